# redislock.url in all its forms: a unix socket, a database number, an ACL
# user with a password (also %-encoded), redislock.password overriding the
# URL's, and switching servers with a reload. The password never shows.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use RedisLockTest;

# a short path: unix socket paths are limited to about 100 bytes
my $sock = tempdir('rlsockXXXX', TMPDIR => 1, CLEANUP => 1) . '/redis.sock';
my $redis = RedisLockTest::Redis->new(extra => [
    "unixsocket $sock",
    'unixsocketperm 777',
    'user default on nopass ~* &* +@all',
    'user locker on >s3cr%t ~* &* +@all',
]);
my $port = $redis->port;
my $node = RedisLockTest::node('connsettings', $redis);
my $s = RedisLockTest::Session->new($node);

sub use_url
{
    my ($url, $password) = @_;
    $node->append_conf('postgresql.conf', "redislock.url = '$url'\n"
        . "redislock.password = '" . ($password // '') . "'\n");
    $node->reload;
    # a new session sees the reloaded settings for certain
    $s->close;
    $s = RedisLockTest::Session->new($node);
}

sub holds_in_db
{
    my ($db, $name) = @_;
    return $redis->cli('-n', $db, 'HEXISTS', $name, $s->query('SELECT redis_lock_owner_id()'));
}

# unix socket
use_url("unix://$sock");
is($s->query("SELECT redis_lock_acquire('conn:unix', '0')"), 't', 'acquire over a unix socket');
is(holds_in_db(0, 'conn:unix'), 1, 'the lock is in Redis db 0');
is($s->query("SELECT redis_lock_release('conn:unix')"), 't', 'release over a unix socket');

# unix socket with a database number
use_url("unix://$sock?db=3");
is($s->query("SELECT redis_lock_acquire('conn:unixdb', '0')"), 't', 'acquire over a unix socket, db 3');
is(holds_in_db(3, 'conn:unixdb'), 1, 'the lock is in db 3');
is($redis->cli('-n', 0, 'EXISTS', 'conn:unixdb'), 0, 'and not in db 0');
$s->query("SELECT redis_lock_release('conn:unixdb')");

# TCP with a database number
use_url("redis://127.0.0.1:$port/2");
is($s->query("SELECT redis_lock_acquire('conn:db2', '0')"), 't', 'acquire in db 2');
is(holds_in_db(2, 'conn:db2'), 1, 'the lock is in db 2');
$s->query("SELECT redis_lock_release('conn:db2')");

# ACL user and %-encoded password in the URL
use_url("redis://locker:s3cr%25t\@127.0.0.1:$port");
is($s->query("SELECT redis_lock_acquire('conn:acl', '0')"), 't', 'ACL user with a %-encoded password');
like($redis->cli('CLIENT', 'LIST'), qr/user=locker/, 'Redis sees the connection as user locker');
$s->query("SELECT redis_lock_release('conn:acl')");

# a wrong password in the URL, overridden by redislock.password
use_url("redis://locker:wrong\@127.0.0.1:$port", 's3cr%t');
is($s->query("SELECT redis_lock_acquire('conn:override', '0')"), 't',
    'redislock.password overrides the URL password');
$s->query("SELECT redis_lock_release('conn:override')");

# the wrong password alone: a clear error that names the server, not the secret
use_url("redis://locker:wrong-secret\@127.0.0.1:$port");
my (undef, $err, $state) = $s->try("SELECT redis_lock_acquire('conn:bad', '0')");
is($state, '08001', 'wrong password: SQLSTATE 08001');
like($err, qr/127\.0\.0\.1:$port/, 'the error names the server');
unlike($err, qr/wrong-secret/, 'the error does not show the password');
unlike(slurp($node->logfile), qr/wrong-secret|s3cr%t|s3cr%25t/,
    'no password in the server log (other than in the config file)');

like(slurp($node->logfile), qr/parameter "redislock.password" changed to "\*\*\*"/,
    'a reload logs the password setting with its value hidden');
like(slurp($node->logfile), qr{redis://locker:\*\*\*\@127\.0\.0\.1},
    'and the URL with its password masked');

# a rejected URL is quoted in the error: its password is masked there too
(undef, $err) = $s->try("SET redislock.url = 'redis://locker:hunter2\@127.0.0.1:99999'");
like($err, qr{invalid value for parameter "redislock.url": "redis://locker:\*\*\*\@127\.0\.0\.1:99999"},
    'a rejected URL is shown with its password masked');
unlike(slurp($node->logfile), qr/hunter2/, 'nor does the log show it');

# an ordinary role sees neither setting
$node->safe_psql('postgres', 'CREATE ROLE plain LOGIN');
my $plain = RedisLockTest::Session->new($node, user => 'plain');
# (the refusal is worded by PostgreSQL, differently by version: its SQLSTATE
# and the secret's absence are what count)
my ($v2, $e2, $st2) = $plain->try('SHOW redislock.password');
is($st2, '42501', 'an ordinary role cannot read redislock.password (42501)');
unlike(($v2 // '') . ($e2 // ''), qr/hunter2/, '... nor see it in the refusal');
($v2, $e2, $st2) = $plain->try('SHOW redislock.url');
is($st2, '42501', 'nor redislock.url (42501)');
unlike(($v2 // '') . ($e2 // ''), qr/hunter2|locker/, '... nor see it in the refusal');

# the timeouts are per session, but bounded: no setting makes one request
# or connection attempt wait for hours
{
	my $su = RedisLockTest::Session->new($node);
	for my $t ([ connect_timeout => '1min', '61s', 60000 ], [ command_timeout => '5min', '301s', 300000 ])
	{
		my ($g, $max, $over, $max_ms) = @$t;
		is($su->query("SELECT max_val FROM pg_settings WHERE name = 'redislock.$g'"), $max_ms,
			"$g is at most $max");
		my (undef, $err, $state) = $su->try("SET redislock.$g = '$max'");
		ok(!defined $err, "$g = $max is accepted") or diag($err);
		(undef, $err, $state) = $su->try("SET redislock.$g = '$over'");
		is($state, '22023', "$g = $over is refused (22023)");
		# PostgreSQL 16 and later add the unit: (1 ms .. 60000 ms)
		like($err // '', qr/outside the valid range for parameter "redislock.$g" \(1(?: ms)? \.\. $max_ms(?: ms)?\)/,
			'... naming the range');
		$su->query("RESET redislock.$g");
	}
}

# Settings that cannot work together, or at all: the message names what is
# wrong, the hint what to do about it (not "redislock is not configured",
# not "Set redislock.url" when it is set), SQLSTATE 22023.
{
	my $su = RedisLockTest::Session->new($node);
	my $url = "redis://127.0.0.1:$port";
	my @bad = (
		[ 'sentinels and cluster_nodes',
		  { sentinels => "127.0.0.1:$port", cluster_nodes => "127.0.0.1:$port" },
		  qr/only one of redislock\.sentinels, redislock\.cluster_nodes and redislock\.redlock_nodes may be set/,
		  qr/Set the one that describes the deployment and leave the others empty\./ ],
		[ 'cluster_nodes and redlock_nodes',
		  { cluster_nodes => "127.0.0.1:$port", redlock_nodes => "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3" },
		  qr/only one of redislock\.sentinels, redislock\.cluster_nodes and redislock\.redlock_nodes may be set/,
		  qr/Set the one that describes the deployment/ ],
		[ 'two Redlock masters', { redlock_nodes => "127.0.0.1:1,127.0.0.1:2" },
		  qr/redislock\.redlock_nodes must name at least 3 independent masters/,
		  qr/Name 3 or more/ ],
		[ 'a cluster with database 3', { url => "$url/3", cluster_nodes => "127.0.0.1:$port" },
		  qr/a Redis Cluster has only database 0/, qr/Leave the database out of redislock\.url/ ],
		[ 'no URL', { url => '' },
		  qr/redislock\.url is not set/, qr/Set redislock\.url, e\.g\. 'redis:\/\/127\.0\.0\.1:6379'/ ],
	);
	for my $t (@bad)
	{
		my ($what, $set, $msg, $hint) = @$t;
		$su->query("SET redislock.$_ = '$set->{$_}'") for sort keys %$set;
		my (undef, $err, $state) = $su->try("SELECT redis_lock_acquire('cfg:bad', '0', '1 min')");
		is($state, '22023', "$what: 22023");
		like($err // '', qr/^ERROR:  $msg/, "$what: the message says what is wrong") or diag($err);
		like($err // '', qr/\nHINT:  $hint/, "$what: the hint says what to do") or diag($err);
		unlike($err // '', qr/not configured/, "$what: not 'redislock is not configured'");
		$su->query("RESET redislock.$_") for sort keys %$set;
	}
	$su->query("SET redislock.url = '$url'");
	is($su->query("SELECT redis_lock_acquire('cfg:good', '0', '1 min') AND redis_lock_release('cfg:good')"), 't',
		'with usable settings, the same session takes a lock again');
	$su->close;
}

# Sessions that never held anything say nothing at exit, whatever went wrong
# with their Redis settings: [what, user, statements].
{
	my $url = "redis://127.0.0.1:$port";
	my $dead = 'redis://127.0.0.1:' . RedisLockTest::free_port();
	for my $t (
		[ 'its own redislock.url refused (not a superuser)', 'plain',
		  [ "SET redislock.url = '$dead'", "SELECT redis_lock_acquire('ex:a', '0', '1 min')" ] ],
		[ 'its own redislock.url unreachable', undef,
		  [ "SET redislock.url = '$dead'", "SELECT redis_lock_acquire('ex:b', '0', '1 min')" ] ],
		[ 'two modes set', undef,
		  [ "SET redislock.sentinels = '127.0.0.1:$port'", "SET redislock.cluster_nodes = '127.0.0.1:$port'",
		    "SELECT redis_lock_acquire('ex:c', '0', '1 min')" ] ],
		[ 'a transaction lock refused', undef,
		  [ "SET redislock.url = '$dead'", "BEGIN", "SELECT redis_xact_lock_acquire('ex:d', '0', '1 min')", "ROLLBACK" ] ])
	{
		my ($what, $user, $sqls) = @$t;
		my $offset = -s $node->logfile;
		my $x = RedisLockTest::Session->new($node, defined $user ? (user => $user) : (), application_name => 'exit_quiet');
		my $pid = $x->pid;
		my @errs = grep { defined } map { ($x->try($_))[1] } @$sqls;
		ok(@errs > 0, "$what: the session got an error") or next;
		$x->close;
		ok(RedisLockTest::wait_until(30, 'the session ended', sub {
			$s->query("SELECT count(*) FROM pg_stat_activity WHERE pid = $pid") == 0 }),
			"$what: the session ends");
		my $log = substr(slurp($node->logfile), $offset);
		unlike($log, qr/\[$pid\][^\n]*WARNING:  could not release the Redis locks of this session/,
			"$what: no WARNING about releasing locks it never held at exit");
	}
}

done_testing();
