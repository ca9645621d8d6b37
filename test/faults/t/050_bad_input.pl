# 050_bad_input.pl — abuse sweep: every SQL function with bad arguments, bad
# data at the Redis keys, a full Redis, a wrong password, and servers on the
# port that are not Redis.
#
# Proves, for each case: a clear ERROR with a sensible SQLSTATE (or the
# documented result), within connect_timeout + command_timeout + slack; no
# backend crash (server log has no "terminated by signal"); nothing leaked
# (no lock key of the session left in Redis, no redis_locks row for it); the
# session still works afterwards.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../../lib", "$FindBin::RealBin/../../redisson";
use RedisLockTest;
use FakeRedisson;
use FaultLib qw(until_ok no_crash_ok stats timed_call);
use Test::More;
use IO::Socket::INET;
use POSIX ();
use Time::HiRes qw(time sleep);

my ($CONNECT_T, $COMMAND_T, $SLACK) = (1, 1, 2.5);
our $CURRENT_URL;    # the session's redislock.url override, restored after a crash
my $BOUND = $CONNECT_T + $COMMAND_T + $SLACK;

my $redis = RedisLockTest::Redis->new;
my $node = RedisLockTest::node('badinput', $redis,
	'redislock.connect_timeout' => "${CONNECT_T}s",
	'redislock.command_timeout' => "${COMMAND_T}s",
	# a crash must not end the test: it is reported (no_crash_ok) and the
	# sweep goes on with a new session
	'restart_after_crash' => 'on');
my $rc = FakeRedisson::Conn->new(port => $redis->port);
my $s = RedisLockTest::Session->new($node);
my $obs = RedisLockTest::observer($node);
my $owner = $s->query('SELECT redis_lock_owner_id()');

# (sql, expected sqlstate regex or 'ok:<value regex>', description)
sub check
{
	my ($sql, $want, $desc) = @_;
	my ($v, $err, $code, $dt) = timed_call($s, $sql, 60);
	if (defined $err && ($err =~ /terminated abnormally|no connection to the server|server closed the connection/ || !$s->dbh->ping))
	{
		fail("BACKEND CRASHED on: $sql");
		diag("crash: $err");
		RedisLockTest::wait_until(60, 'server accepts connections after the crash', sub {
			my $n = eval { RedisLockTest::Session->new($node) }; $s = $n if $n; $n });
		$obs = RedisLockTest::observer($node);
		$owner = $s->query('SELECT redis_lock_owner_id()');
		$s->query("SET redislock.url = '$CURRENT_URL'") if $CURRENT_URL;
		return ($v, $err, $code);
	}
	$s->try('ROLLBACK') if $sql =~ /^BEGIN/;
	$desc //= $sql;
	$desc = substr($desc, 0, 120) . '...' if length($desc) > 120;
	# $want: alternatives separated by "|": a SQLSTATE, or "ok:<value regex>"
	my @alt = split /\|(?=ok:|[0-9A-Z]{5}(?:\||$))/, $want;
	my @vals = map { /^ok:(.*)$/s ? $1 : () } @alt;
	my @codes = grep { !/^ok:/ } @alt;
	my $codes_re = join('|', @codes);
	my $good = defined $err
	  ? (@codes && $code =~ /^(?:$codes_re)$/)
	  : (grep { ($v // 'NULL') =~ /^(?:$_)$/ } @vals);
	ok($good, "$desc -> " . (defined $err ? "ERROR $code" : ($v // 'NULL')) . " (want $want)")
	  or diag("got: " . ($err // 'success: ' . ($v // 'NULL')) . " [" . ($code // '') . "]");
	ok(length($err) > 10 && $err =~ /\S/, '... with a message') if defined $err && $good;
	cmp_ok($dt, '<=', $BOUND, sprintf('... within %.1fs', $BOUND)) if $dt > 1;
	return ($v, $err, $code);
}

sub nothing_leaked
{
	my ($what) = @_;
	# a call whose outcome Redis never told may leave an 'unsettled' row, for
	# the worker to settle: it is not held
	is($s->query("SELECT count(*) FROM redis_locks WHERE pid = pg_backend_pid() AND state <> 'unsettled'"), 0,
		"$what: no redis_locks row held");
	my @keys = grep { my $t = $rc->cmd('TYPE', $_); $t eq 'hash' && $rc->cmd('HEXISTS', $_, $owner) } @{ $rc->cmd('KEYS', '*') };
	ok(!@keys, "$what: no lock hash of this session in Redis") or diag("left: @keys");
}

# --- 1. arguments ---------------------------------------------------------------------------
my $huge = "repeat('h', 1048576)";
for my $fn ('redis_lock_acquire', 'redis_xact_lock_acquire')
{
	my $pre = $fn =~ /xact/ ? 'BEGIN; ' : '';
	check("${pre}SELECT $fn(NULL)", '22004');
	check("${pre}SELECT $fn('')", '22023');
	check("${pre}SELECT $fn($huge)", '22023', "$fn(1 MB name)");
	check("${pre}SELECT $fn(repeat('n', 513))", '22023');
	check("${pre}SELECT $fn(repeat(chr(233), 257))", '22023', "$fn(514-byte UTF-8 name)");
	check("${pre}SELECT $fn('b', '-1 s')", '22023');
	check("${pre}SELECT $fn('b', '-1 microsecond')", '22023');
	# PostgreSQL 15 has no infinite intervals: rejected by interval input (22007)
	check("${pre}SELECT $fn('b', 'infinity')", '22023|22008|22007');
	check("${pre}SELECT $fn('b', '-infinity')", '22023|22008|22007');
	check("${pre}SELECT $fn('b', '178000000 years')", '22008|22023');
	check("${pre}SELECT $fn('b', NULL, '0')", '22023');
	check("${pre}SELECT $fn('b', NULL, '-1 s')", '22023');
	check("${pre}SELECT $fn('b', NULL, '99 ms')", '22023');
	check("${pre}SELECT $fn('b', NULL, '102 years')", '22023');
	check("${pre}SELECT $fn('b', NULL, '200 years')", '22023');
	check("${pre}SELECT $fn('b', NULL, '101 years')", '22023');
	$s->try('ROLLBACK'); $s->try('SELECT redis_lock_release_all()'); $rc->cmd('DEL', 'b');
	check("${pre}SELECT $fn('b', NULL, 'infinity')", '22023|22008|22007');
	check("${pre}SELECT $fn('b', NULL, '-infinity')", '22023|22008|22007');
	check("${pre}SELECT $fn('b', NULL, '178000000 years')", '22008|22023');
	check("${pre}SELECT $fn('b', NULL, '1 mon -40 days')", '22023', "$fn(lease '1 mon -40 days')");
	check("${pre}SELECT $fn('b', NULL, NULL, NULL)", '22004');
	check("${pre}SELECT $fn('b', '1 s'::text::interval, NULL, NULL)", '22004');
	nothing_leaked($fn);
}
for my $fn ('redis_lock_release', 'redis_lock_force_release', 'redis_lock_fencing_token')
{
	check("SELECT $fn(NULL)", '22004');
	check("SELECT $fn('')", '22023');
	check("SELECT $fn($huge)", '22023', "$fn(1 MB name)");
}
check("SELECT (redis_lock_status(NULL)).locked", '22004');
check("SELECT (redis_lock_status('')).locked", '22023');
check("SELECT (redis_lock_status($huge)).locked", '22023', 'redis_lock_status(1 MB name)');
check("SELECT redis_lock_release('never:held')", 'ok:f', 'release of a lock never held -> false');
check("SELECT redis_lock_fencing_token('never:held')", 'ok:NULL', 'fencing token of a lock not held -> NULL');
check("BEGIN; SELECT redis_xact_lock_acquire('x:1'); SELECT redis_lock_release('x:1')", '55000',
	'release of an xact lock by hand');
check("SELECT redis_lock_release_all()", 'ok:0', 'release_all with nothing held');

# binary-ish names: sent as they are, released cleanly
my @names = ("E'\\x01\\x02'", "E'a\\nb\\rc'", "E'\\x7f\\x1b[0m'", "E'tab\\there'", "'{}'", "'{'", "'}{'",
	"E'\\\\x00'", "' '", "repeat('n', 512)", "repeat(chr(233), 256)", "E'\\u00ff\\u2028'",
	"'*'", "'redisson_lock__channel:{x}'");
for my $n (@names)
{
	check("SELECT redis_lock_acquire($n, '0', '1 min')", 'ok:t', "acquire($n)");
	check("SELECT redis_lock_acquire($n, '0', '1 min')", 'ok:t', "reentry($n)");
	check("SELECT (redis_lock_status($n)).hold_count", 'ok:2', "status($n).hold_count");
	check("SELECT redis_lock_fencing_token($n) > 0", 'ok:t', "fencing_token($n)");
	check("SELECT redis_lock_release($n)", 'ok:t', "release($n) 1/2");
	check("SELECT redis_lock_release($n)", 'ok:t', "release($n) 2/2");
	check("BEGIN; SELECT redis_xact_lock_acquire($n, '0'); COMMIT", 'ok:NULL', "xact($n)");
}
my $bin = $rc->cmd('EXISTS', "\x01\x02");
is($bin, 0, 'binary name released in Redis (exact bytes)');
nothing_leaked('names');

# --- 2. wrong types at the Redis keys --------------------------------------------------------------
my %setup = (
	string => sub { $rc->cmd('SET', $_[0], 'not a lock') },
	list   => sub { $rc->cmd('RPUSH', $_[0], 'a', 'b') },
	zset   => sub { $rc->cmd('ZADD', $_[0], 1, 'm') },
	set    => sub { $rc->cmd('SADD', $_[0], 'm') },
);
for my $type (sort keys %setup)
{
	my $k = "wt:$type";
	$setup{$type}->($k);
	check("SELECT redis_lock_acquire('$k', '0')", '42809', "acquire on a $type");
	check("SELECT redis_lock_acquire('$k', '200 ms')", '42809', "acquire with wait on a $type");
	check("SELECT redis_lock_acquire('$k', '0', NULL, true)", '42809', "fair acquire on a $type");
	check("BEGIN; SELECT redis_xact_lock_acquire('$k', '0')", '42809', "xact acquire on a $type");
	check("SELECT (redis_lock_status('$k')).locked", '42809', "status on a $type");
	check("SELECT redis_lock_release('$k')", 'ok:f', "release (not held) on a $type");
	my ($v, $err, $code) = check("SELECT redis_lock_force_release('$k')", '42809|ok:[tf]', "force_release on a $type");
	is($rc->cmd('TYPE', $k), $type, "force_release left the $type alone")
	  if !defined $err || $code eq '42809';
	$rc->cmd('DEL', $k);
	nothing_leaked("wrong type $type");
}
# wrong types at the companion keys: fencing counter, fair queue / timeout set
{
	# acquire.lua writes the hold (HSET, PEXPIRE) before INCR of the counter;
	# a failing INCR leaves the hold in Redis while SQL reports an ERROR.
	$rc->cmd('SET', FakeRedisson::token_key('wt:tok'), 'not a number');
	check("SELECT redis_lock_acquire('wt:tok', '0', '1 hour')", '38000|42809|22003', 'acquire with a non-integer fencing counter');
	is($rc->cmd('EXISTS', 'wt:tok'), 0, '... and no lock hash left behind (SQL said: not acquired)')
	  or diag("BUG: wt:tok left in Redis: " . join(' ', @{ $rc->cmd('HGETALL', 'wt:tok') }) . ", pttl "
		  . $rc->cmd('PTTL', 'wt:tok') . "; this session's redis_locks rows: "
		  . $s->query('SELECT count(*) FROM redis_locks WHERE pid = pg_backend_pid()')
		  . "; release says: " . ($s->try("SELECT redis_lock_release('wt:tok')") // 'error'));
	$rc->cmd('DEL', 'wt:tok');
	$rc->cmd('DEL', FakeRedisson::token_key('wt:tok'));
	$rc->cmd('HSET', FakeRedisson::token_key('wt:tok2'), 'a', 'b');
	check("SELECT redis_lock_acquire('wt:tok2', '0', '1 hour')", '38000|42809', 'acquire with a hash as fencing counter');
	is($rc->cmd('EXISTS', 'wt:tok2'), 0, '... and no lock hash left behind');
	$rc->cmd('DEL', 'wt:tok2');
	$rc->cmd('DEL', FakeRedisson::token_key('wt:tok2'));
	$rc->cmd('SET', FakeRedisson::queue_key('wt:q'), 'x');
	check("SELECT redis_lock_acquire('wt:q', '0', NULL, true)", '42809', 'fair acquire with a string as queue');
	is($rc->cmd('EXISTS', 'wt:q'), 0, '... and no lock hash left behind');
	$rc->cmd('DEL', FakeRedisson::queue_key('wt:q'));
	$rc->cmd('SET', FakeRedisson::timeout_key('wt:z'), 'x');
	check("SELECT redis_lock_acquire('wt:z', '0', NULL, true)", '42809', 'fair acquire with a string as timeout set');
	$rc->cmd('DEL', FakeRedisson::timeout_key('wt:z'));
	$rc->cmd('DEL', 'wt:z');
	# a lock hash whose count is not a number
	$rc->cmd('HSET', 'wt:h', $owner, 'abc');
	# the scripts write absolute counts: a corrupt one simply becomes 1
	check("SELECT redis_lock_acquire('wt:h', '0')", 'ok:t', 'reentry onto a corrupt hold count (count rewritten)');
	$s->try('SELECT redis_lock_release_all()');
	$rc->cmd('DEL', 'wt:h');
	nothing_leaked('companion keys');
}
check("SELECT redis_lock_acquire('after:wrongtype', '0')", 'ok:t', 'session still works');
check("SELECT redis_lock_release('after:wrongtype')", 'ok:t', '... and releases');

# --- 3. Redis at maxmemory with noeviction -----------------------------------------------------------
{
	is($s->query("SELECT redis_lock_acquire('oom:held', '0', '10 min')"), 't', 'oom: a lock held before memory runs out');
	my ($used) = $rc->cmd('INFO', 'memory') =~ /used_memory:(\d+)/;
	$rc->cmd('CONFIG', 'SET', 'maxmemory-policy', 'noeviction');
	$rc->cmd('CONFIG', 'SET', 'maxmemory', $used + 512 * 1024);
	# Fill until even a tiny write is refused (the argv of a refused big SET
	# is freed again, leaving room for a small one).
	my $i = 0;
	for my $size (8192, 512, 32, 1)
	{
		while ($i < 200000)
		{
			my $r = $rc->cmd_raw('SET', "fill:" . $i++, 'f' x $size);
			last if ref $r eq 'FakeRedisson::Error';
		}
	}
	my $probe = $rc->cmd_raw('EVAL', "redis.call('hset', KEYS[1], 'f', 1) return 1", 1, 'oom:probe');
	ok(ref $probe eq 'FakeRedisson::Error' && $probe->msg =~ /OOM/, 'oom: a script write is refused now (Redis is full)')
	  or diag("probe: " . (ref $probe ? $probe->msg : $probe));
	diag("oom: filled with $i keys");
	# A refused command frees its arguments again, which can leave room for
	# one small write: once full, put maxmemory 64 kB below what is used, so
	# every write is refused for as long as the checks run.
	my ($used2) = $rc->cmd('INFO', 'memory') =~ /used_memory:(\d+)/;
	$rc->cmd('CONFIG', 'SET', 'maxmemory', $used2 - 65536);
	check("SELECT redis_lock_acquire('oom:new', '0')", '53200', 'acquire when Redis is out of memory');
	check("BEGIN; SELECT redis_xact_lock_acquire('oom:x', '0')", '53200', 'xact acquire when out of memory');
	is($rc->cmd('EXISTS', 'oom:new'), 0, 'oom: nothing created');
	# the fencing counter is a fair acquisition's first write: refused too
	check("SELECT redis_lock_acquire('oom:fair', '0', NULL, true)", '53200', 'fair acquire when out of memory');
	is($rc->cmd('EXISTS', 'oom:fair'), 0, 'oom: no fair lock created');
	check("SELECT (redis_lock_status('oom:held')).locked", 'ok:t', 'status works when out of memory');
	check("SELECT redis_lock_release('oom:held')", 'ok:t|53200', 'release when out of memory');
	# whatever release said, the session must end up without the lock once memory is back
	$rc->cmd('CONFIG', 'SET', 'maxmemory', 0);
	$rc->cmd('FLUSHDB') if 0;
	my @fill = map { "fill:$_" } 0 .. $i;
	while (my @chunk = splice(@fill, 0, 1000)) { $rc->cmd('DEL', @chunk); }
	$s->try('SELECT redis_lock_release_all()');
	check("SELECT redis_lock_acquire('oom:new', '0')", 'ok:t', 'acquire works again with memory back');
	check("SELECT redis_lock_release('oom:new')", 'ok:t', '... and release');
	until_ok(10, 'oom: oom:held gone from Redis', sub { $rc->cmd('EXISTS', 'oom:held') == 0 });
	nothing_leaked('oom');
}

# --- 4. wrong password ---------------------------------------------------------------------------
{
	my $rp = RedisLockTest::Redis->new(requirepass => 'right-pw');
	my $url = 'redis://127.0.0.1:' . $rp->port;
	$s->query("SET redislock.url = '$url'");
	my ($v, $err);
	($v, $err) = check("SELECT redis_lock_acquire('pw:a', '0', '1 min')", '08001', 'no password given (NOAUTH)');
	like($err // '', qr/NOAUTH|auth/i, '... the message says authentication is needed');
	$s->query("SET redislock.password = 'wrong-pw-secret'");
	($v, $err) = check("SELECT redis_lock_acquire('pw:a', '0', '1 min')", '08001', 'wrong password');
	unlike($err // '', qr/wrong-pw-secret/, 'the password is not in the message');
	like($err // '', qr/127\.0\.0\.1:\d+/, 'the message names the server');
	$s->query("SET redislock.url = 'redis://:wrong-pw-url\@127.0.0.1:" . $rp->port . "'");
	$s->query('RESET redislock.password');
	($v, $err) = check("SELECT (redis_lock_status('pw:a')).locked", '08001', 'wrong password in the url');
	unlike($err // '', qr/wrong-pw-url/, 'the url password is not in the message');
	$s->query("SET redislock.password = 'right-pw'");
	check("SELECT redis_lock_acquire('pw:a', '0', '1 min')", 'ok:t', 'right password works');
	check("SELECT redis_lock_release('pw:a')", 'ok:t', '... and releases');
	$s->query('RESET redislock.url; RESET redislock.password');
	$rp->stop;
}

# --- 5. servers on the port that are not Redis ----------------------------------------------------------
sub fake_server
{
	my ($mode) = @_;
	my $port = RedisLockTest::free_port();
	my $srv = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $port, Listen => 16, ReuseAddr => 1)
	  or die "listen: $!";
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		$SIG{ALRM} = sub { POSIX::_exit(0) };
		alarm(300);
		my @keep;
		while (my $c = $srv->accept)
		{
			binmode $c;
			push @keep, $c;    # never close: the silent mode keeps them open
			next if $mode eq 'silent';
			my $buf = '';
			sysread($c, $buf, 65536);
			if ($mode eq 'garbage') { syswrite($c, "HTTP/1.1 400 Bad Request\r\n\r\n\x00\xff\xfe garbage"); }
			elsif ($mode eq 'binary')
			{
				# random bytes after one that cannot start a RESP reply, so that
				# the outcome does not depend on the draw
				syswrite($c, "\x01" . join('', map { chr(int(rand(256))) } 1 .. 4095));
			}
			elsif ($mode eq 'ok-to-all')
			{
				# "+OK" to every command (each starts "*<n>\r\n$"), as long as it talks
				while (1)
				{
					my $n = () = $buf =~ /\*\d+\r\n\$/g;
					syswrite($c, "+OK\r\n" x $n) if $n;
					$buf = '';
					last unless sysread($c, $buf, 65536);
				}
			}
			elsif ($mode eq 'half') { syswrite($c, "\$100\r\nabc"); }
			elsif ($mode eq 'huge-bulk') { syswrite($c, "\$9999999999999\r\nabc"); }
			elsif ($mode eq 'deep') { syswrite($c, ("*1\r\n" x 100000) . ":1\r\n"); }
			elsif ($mode eq 'close') { close $c; pop @keep; }
		}
		POSIX::_exit(0);
	}
	close $srv;
	return ($port, $pid);
}

my @fakes = (
	[ 'postgres', undef, '08P01|08006|08001', 'PostgreSQL port' ],
	[ 'garbage', 1, '08P01', 'HTTP-ish garbage' ],
	[ 'binary', 1, '08P01|08006', 'random bytes' ],
	[ 'ok-to-all', 1, '08P01|38000', '+OK to everything' ],
	[ 'half', 1, '08006|08001', 'half a reply, then silence' ],
	[ 'huge-bulk', 1, '08P01|08006|08001', 'absurd bulk length' ],
	[ 'deep', 1, '08P01|08006|38000', '100000-deep nested array' ],
	[ 'close', 1, '08006|08001', 'closes at once' ],
	[ 'silent', 1, '08006|08001', 'accepts, never answers' ],
);
for my $f (@fakes)
{
	my ($mode, $fork, $want, $desc) = @$f;
	my ($port, $pid) = $fork ? fake_server($mode) : ($node->port, undef);
	$s->query("SET redislock.url = 'redis://127.0.0.1:$port'");
	local $CURRENT_URL = "redis://127.0.0.1:$port";
	for my $sql ("SELECT redis_lock_acquire('ns:a', '0', '1 min')", "SELECT redis_lock_acquire('ns:a', '2 s', '1 min', true)",
		"SELECT redis_lock_force_release('ns:a')", "BEGIN; SELECT redis_xact_lock_acquire('ns:x', '0', '1 min')",
		"SELECT redis_lock_release('ns:a')", "SELECT (redis_lock_status('ns:a')).locked")
	{
		my ($v, $err) = check($sql, $sql =~ /lock_release\(/ ? q{ok:f} : $want, "$desc: $sql");
		like($err // '', qr/127\.0\.0\.1:$port/, "$desc: message names the server") if defined $err;
	}
	is($s->query("SELECT count(*) FROM redis_locks WHERE pid = pg_backend_pid() AND state <> 'unsettled'"), 0,
		"$desc: no redis_locks row held");
	$s->query('RESET redislock.url');
	$CURRENT_URL = undef;
	if ($pid) { kill 'KILL', $pid; waitpid($pid, 0); }
	check("SELECT redis_lock_acquire('ns:ok', '0')", 'ok:t', "$desc: back on the real Redis, works");
	check("SELECT redis_lock_release('ns:ok')", 'ok:t', '... and releases');
}

nothing_leaked('end');
$s->close;
until_ok(20, 'redis_locks empty', sub { $obs->query('SELECT count(*) FROM redis_locks') == 0 });
my @left = grep { $rc->cmd('TYPE', $_) eq 'hash' } @{ $rc->cmd('KEYS', '*') };
ok(!@left, 'no lock hash left in Redis') or diag("left: @left");
is(stats($obs)->{lost_locks}, 0, 'nothing lost');
no_crash_ok($node, 'bad input');
$node->stop;
done_testing();
