# 300_tls.pl — redislock over TLS to a single Redis that speaks only TLS:
# locks, waits (pub/sub over TLS), the real Redisson client (RealRedisson,
# the newest version of @RealRedisson::VERSIONS) over TLS with a password on
# the same names, excluded and woken both ways, the watchdog, the commit
# guard and the mutual-exclusion counter;
# every setup failure a clear 08001 naming the server, with the reason in
# words; the TLS settings checked when set and kept from ordinary users; a
# stalled handshake bounded by connect_timeout and cancellable, and a
# connection cut short that way never reused; a request given up on over
# TLS never applied later.
# Takes about 20 s (4 s of it the JVM starting).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use DelayProxy;
use FakeRedisson;    # only its channel names
use RealRedisson;
use Test::More;

my $T = 60;
my $secret = 'tls-secret-3f9a';
my $tls = RedisLockTest::TLS->new;
my $redis = RedisLockTest::Redis->new(tls => $tls, requirepass => $secret);
my $node = RedisLockTest::node('tls', $redis,
	'redislock.password'         => $secret,
	'redislock.tls_ca_file'      => $tls->ca_file,
	'redislock.watchdog_timeout' => '3s');
my $obs = RedisLockTest::Session->new($node);
my ($JAVA_VERSION) = reverse RealRedisson::versions();
my $java = RealRedisson->new(version => $JAVA_VERSION, url => $redis->url, tls => $tls,
	options => ["password=$secret"]);
my $LONG = 600000;    # Redisson lease and wait: 10 min, so only a message explains a wake

sub state_of
{
	my ($name) = @_;
	return $obs->query("SELECT state FROM redis_locks WHERE name = '$name'") // '';
}

# A session pointed at url with the given extra settings; returns what one
# acquisition of name gives: (value, error, sqlstate).
sub try_with
{
	my ($url, %set) = @_;
	my $s = RedisLockTest::Session->new($node);
	$s->query("SET redislock.url = '$url'");
	$s->query("SET $_ = '$set{$_}'") for sort keys %set;
	my @r = $s->try("SELECT redis_lock_acquire('tls:probe', '0', '1 min')");
	$s->query("SELECT redis_lock_release_all()") if defined $r[0] && $r[0] eq 't';
	push @r, join("\n", $s->notices);
	$s->close;
	return @r;
}

# --- 1. locks, waits and the Redisson client over TLS --------------------------
my $a = RedisLockTest::Session->new($node);
my $b = RedisLockTest::Session->new($node);
my $a_id = $a->query('SELECT redis_lock_owner_id()');
my $b_id = $b->query('SELECT redis_lock_owner_id()');
is($a->query("SELECT redis_lock_acquire('tls:1', '0', '10 min')"), 't', 'A locks over TLS');
is($redis->cli('HGET', 'tls:1', $a_id), '1', '... the hold is in Redis');
$b->start("SELECT redis_lock_acquire('tls:1')");
waits_ok($b);
until_ok('B subscribed over TLS', sub {
	($redis->cli('PUBSUB', 'NUMSUB', FakeRedisson::channel('tls:1')))[1] >= 1 });
is($a->query("SELECT redis_lock_release('tls:1')"), 't', 'A releases');
my ($v, $err) = $b->finish($T);
is($v, 't', 'B is woken by the unlock message over TLS and gets the lock') or diag($err);
is($redis->cli('HGET', 'tls:1', $b_id), '1', '... B holds it in Redis');
is($java->run('j', 'tryLock', 'plain', 'tls:1', 0, $LONG), 'false',
	"the Redisson client ($JAVA_VERSION, over TLS) is refused while B holds it");
is($b->query("SELECT redis_lock_release('tls:1')"), 't', 'B releases');

# a lock no session waited for, so that the client is its channel's only subscriber
sub subscribers { ($redis->cli('PUBSUB', 'NUMSUB', FakeRedisson::channel($_[0])))[1] }
is($b->query("SELECT redis_lock_acquire('tls:3', '0', '10 min')"), 't', 'B takes tls:3');
is(subscribers('tls:3'), 0, '... nobody is subscribed to its channel');
$java->start('w', 'j', 'tryLock', 'plain', 'tls:3', $LONG, $LONG);
until_ok('the Redisson client waits, subscribed over TLS', sub { subscribers('tls:3') >= 1 });
is($b->query("SELECT redis_lock_release('tls:3')"), 't', 'B releases tls:3');
is_deeply([ $java->result('w', $T) ], [ 'ok', 'true' ],
	"the Redisson client is woken by B's release over TLS and gets tls:3");
is($java->run('j', 'unlock', 'plain', 'tls:3'), 'null', 'the Redisson client unlocks tls:3');

is($java->run('j', 'tryLock', 'plain', 'tls:2', 0, $LONG), 'true', 'the Redisson client takes tls:2');
$a->start("SELECT redis_lock_acquire('tls:2', '1 min', '10 min', true)");
waits_ok($a, 'A waits (fair) behind the Redisson client');
is($java->run('j', 'unlock', 'plain', 'tls:2'), 'null', 'the Redisson client unlocks');
($v, $err) = $a->finish($T);
is($v, 't', 'A gets the lock') or diag($err);
is($a->query("SELECT redis_lock_release('tls:2')"), 't', 'A releases');

# --- 2. the watchdog and the commit guard over TLS ------------------------------
$a->query("CREATE TABLE IF NOT EXISTS t (x int)");
is($a->query("SELECT redis_lock_acquire('tls:wd')"), 't', 'A locks tls:wd in watchdog mode (3 s)');
my $renewed0 = $obs->query("SELECT renewed_at FROM redis_locks WHERE name = 'tls:wd'");
until_ok('the worker renews it over TLS', sub {
	$obs->query("SELECT renewed_at > '$renewed0' FROM redis_locks WHERE name = 'tls:wd'") eq 't' });
cmp_ok($redis->cli('PTTL', 'tls:wd'), '>', 0, '... it is still in Redis');
$redis->cli('DEL', 'tls:wd');
until_ok("the worker finds it gone: 'lost'", sub { state_of('tls:wd') eq 'lost' });
my $st;
(undef, $err, $st) = $a->try('INSERT INTO t VALUES (1)');
is($st, '55P03', 'the commit guard refuses a write under the lost lock') or diag($err);
$a->query("SELECT redis_lock_release_all()");

# --- 3. mutual exclusion over TLS -------------------------------------------------
my ($count, @errors) = counter_run($node, 'tls:counter', 4, 40);
is($count, 160, 'the counter: 4 sessions x 40 rounds under one lock over TLS');
is_deeply(\@errors, [], '... without errors');

# --- 4. setup failures: 08001, the server named, the reason in words --------------
sub failure_ok
{
	my ($desc, $url, $set, $detail, $hint) = @_;
	my (undef, $e, $code) = try_with($url, %$set);
	(my $where = $url) =~ s{^rediss?://}{};
	is($code, '08001', "$desc: 08001") or diag($e);
	like($e // '', qr/could not connect to Redis server "\Q$where\E"\nDETAIL:  .*$detail/i, "$desc: message") or diag($e);
	like($e // '', qr/HINT:.*$hint/s, "$desc: hint") if defined $hint;
	unlike($e // '', qr/\Q$secret\E/, "$desc: no password in the message");
}

my $url = $redis->url;
my $untrusted = RedisLockTest::Redis->new(tls => $tls, tls_server => 'untrusted', requirepass => $secret);
failure_ok('a server whose CA is not trusted', $untrusted->url, {},
	qr/The server's certificate is not trusted: unable to get local issuer certificate/,
	qr/redislock\.tls_ca_file/);
my $wrong = RedisLockTest::Redis->new(tls => $tls, tls_server => 'wrongname', requirepass => $secret);
failure_ok('a certificate for another name', $wrong->url, {},
	qr/The server's certificate does not match the name "127\.0\.0\.1": IP address mismatch/,
	qr/redislock\.tls_server_name/);
failure_ok('tls_server_name that is not in the certificate', $url,
	{ 'redislock.tls_server_name' => 'wrong.example' },
	qr/does not match the name "wrong\.example": hostname mismatch/);
is((try_with($wrong->url, 'redislock.tls_server_name' => 'wrong.example'))[0], 't',
	'tls_server_name naming the certificate\'s host: connected');
is((try_with($wrong->url, 'redislock.tls_verify' => 'ca'))[0], 't',
	'tls_verify = ca: a trusted certificate for another name is accepted');
failure_ok('tls_verify = ca still checks the chain', $untrusted->url,
	{ 'redislock.tls_verify' => 'ca' }, qr/not trusted/);
{
	my ($r, $e, undef, $notices) = try_with($untrusted->url, 'redislock.tls_verify' => 'none');
	is($r, 't', 'tls_verify = none: connected to the untrusted server') or diag($e);
	like($notices, qr/redislock\.tls_verify is none: the certificates of Redis servers are not checked/,
		'... with a WARNING');
}

my $auth = RedisLockTest::Redis->new(tls => $tls, tls_auth_clients => 'yes', requirepass => $secret);
failure_ok('no client certificate for a server that requires one', $auth->url, {},
	qr/(refused the client certificate|after it asked for a client certificate)/,
	qr/set redislock\.tls_cert_file and redislock\.tls_key_file/);
failure_ok('a client certificate the server does not trust', $auth->url,
	{ 'redislock.tls_cert_file' => $tls->badclient_cert, 'redislock.tls_key_file' => $tls->badclient_key },
	qr/(refused the client certificate|after it asked for a client certificate)/,
	qr/the server must trust their CA/);
is((try_with($auth->url, 'redislock.tls_cert_file' => $tls->client_cert,
	'redislock.tls_key_file' => $tls->client_key))[0], 't', 'a trusted client certificate: connected');

my $plain = RedisLockTest::Redis->new(requirepass => $secret);
failure_ok('rediss:// to a server without TLS', 'rediss://127.0.0.1:' . $plain->port,
	{ 'redislock.connect_timeout' => '500ms' },
	qr/The TLS handshake did not finish within redislock\.connect_timeout \(500 ms\)/,
	qr/use a redis:\/\/ URL/);
failure_ok('redis:// to a server that speaks only TLS', 'redis://127.0.0.1:' . $redis->port, {},
	qr/./, qr/use a rediss:\/\/ URL/);

# --- 5. the settings: checked when set, superuser only ----------------------------
{
	my $key = $tls->dir . '/readable.key';
	system('cp', $tls->client_key, $key) == 0 or die "cp: $!";
	chmod 0644, $key;
	my (undef, $e, $code) = $a->try("SET redislock.tls_key_file = '$key'");
	is($code, '22023', 'a key file others may read is refused when set');
	like($e, qr/has group or world access/, '... saying why');
	like($e, qr/HINT:.*0600/s, '... and what to do');
	(undef, $e, $code) = $a->try("SET redislock.tls_ca_file = '" . $tls->dir . "/missing.crt'");
	is($code, '22023', 'a CA file that does not exist is refused when set');

	$a->query('CREATE ROLE tls_plain LOGIN');
	my $u = RedisLockTest::Session->new($node, user => 'tls_plain');
	for my $g (qw(tls_verify tls_ca_file tls_cert_file tls_key_file tls_server_name sentinel_tls))
	{
		my $val = $g eq 'tls_verify' ? 'none' : $g eq 'sentinel_tls' ? 'on' : '/tmp/x';
		(undef, $e, $code) = $u->try("SET redislock.$g = '$val'");
		is($code, '42501', "an ordinary user may not set redislock.$g");
	}
	$u->close;
}

# --- 6. a stalled handshake, a cancelled one, a request given up on ---------------
my $proxy = DelayProxy->spawn(0, $redis->port);
my $via = 'rediss://127.0.0.1:' . $proxy->port($redis->port);
{
	my $s = RedisLockTest::Session->new($node);
	$s->query("SET redislock.url = '$via'");
	$s->query("SET redislock.connect_timeout = '1s'");
	$proxy->cmd('stall down');
	my (undef, $e, $code) = $s->try("SELECT redis_lock_acquire('tls:stall', '0', '1 min')");
	is($code, '08001', 'a handshake the server never answers fails at connect_timeout');
	like($e, qr/The TLS handshake did not finish within redislock\.connect_timeout \(1000 ms\)/,
		'... saying so');

	$s->query("SET redislock.connect_timeout = '1min'");
	$s->start("SELECT redis_lock_acquire('tls:stall', '0', '1 min')");
	waits_ok($s, 'a session waits in the stalled handshake');
	my (undef, $ce, $cst) = $s->cancel(30);
	is($cst, '57014', 'cancel ends the handshake wait') or diag($ce);
	$proxy->cmd('go down');
	is($s->query("SELECT redis_lock_acquire('tls:stall', '0', '1 min')"), 't',
		'the next call opens a new connection (the cut one was never set up) and works');
	is($s->query("SELECT redis_lock_release('tls:stall')"), 't', '... and releases');

	$s->query("SET redislock.command_timeout = '1s'");
	$proxy->cmd('stall up');
	(undef, $e, $code) = $s->try("SELECT redis_lock_acquire('tls:late', '0', '1 hour')");
	is($code, '08006', 'a request Redis never gets times out with 08006') or diag($e);
	$proxy->cmd('go up');
	is($s->query("SELECT redis_lock_acquire('tls:other', '0', '1 min')"), 't',
		'the next call works on a new connection');
	is($redis->cli('EXISTS', 'tls:late'), 0,
		'the request given up on never took effect (its connection was reset and killed)');
	$s->query("SELECT redis_lock_release_all()");

	# a lost reply: Redis took the lock, the session never learned it
	$proxy->cmd('stall down');
	(undef, $e, $code) = $s->try("SELECT redis_lock_acquire('tls:lost-reply', '0', '1 hour')");
	is($code, '08006', 'an acquisition whose reply is lost fails with 08006') or diag($e);
	is($redis->cli('GET', 'redisson_lock_token:{tls:lost-reply}'), '1', '... while Redis did take it');
	until_ok('the worker settles it over TLS: Redis no longer has it',
		sub { $redis->cli('EXISTS', 'tls:lost-reply') eq '0' }, 60);
	$proxy->cmd('go down');

	# termination in the middle of a handshake
	$s->query("SET redislock.connect_timeout = '1min'");
	$s->query("SET redislock.tls_server_name = ''");    # a new connection on next use
	$proxy->cmd('stall down');
	$s->start("SELECT redis_lock_acquire('tls:term', '0', '1 min')");
	waits_ok($s, 'a session waits in a stalled handshake again');
	ok($s->terminate(30), 'pg_terminate_backend ends it at once');
	$proxy->cmd('go down');
}

no_crash_ok($node, 'TLS');
done_testing();
