# 140_session_end_worker.pl — a session that ends while Redis is unreachable
# hands its locks to the watchdog: redis_locks shows them 'releasing', and
# once Redis is back (AOF brought the keys back) the worker releases them
# (worker_released, LOG line), long before their 10 min lease; the next
# client gets the lock at once.  An orphan whose lease has passed is dropped
# without a release, but for a read hold, whose field outlives its lease
# while another reader keeps the hash: that is given back.  With Redis up, a session's exit releases its locks
# itself and the worker has nothing to do.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use Test::More;

my $T = 60;


my $redis = RedisLockTest::Redis->new(appendonly => 1);
my $node  = RedisLockTest::node('sessworker', $redis);
my $obs   = RedisLockTest::observer($node);
my $rc;
sub rc { $rc //= FakeRedisson::Conn->new(port => $redis->port); $rc }
sub reset_rc { $rc->close if $rc; undef $rc; }
sub states
{
	my ($pid) = @_;
	return join(',', map { "$_->[0]=$_->[1]" } $obs->rows(
		"SELECT name, state FROM redis_locks WHERE pid = $pid ORDER BY name"));
}

# A holder with small timeouts, so that its exit release fails fast.
sub holder
{
	my $h = RedisLockTest::Session->new($node);
	$h->query("SET redislock.command_timeout = '300ms'");
	$h->query("SET redislock.connect_timeout = '300ms'");
	return $h;
}

# --- 1. control: Redis up, the session releases its own locks at exit ---------------------
{
	my $h = holder();
	my $pid = $h->pid;
	is($h->query("SELECT redis_lock_acquire('c:fixed', '0', '10 min')"), 't', 'control: fixed lock');
	is($h->query("SELECT redis_lock_acquire('c:wd')"), 't', 'control: watchdog lock');
	my $s0 = lock_stats($obs);
	ok($h->terminate($T), 'control: holder terminated');
	until_ok('control: both keys gone',
		sub { rc()->cmd('EXISTS', 'c:fixed') + rc()->cmd('EXISTS', 'c:wd') == 0 });
	until_ok('control: no rows left for the pid', sub { states($pid) eq '' });
	is(lock_stats($obs)->{worker_released}, $s0->{worker_released}, 'control: worker released nothing');
}

# --- 2. Redis down at exit: 'releasing', then the worker releases ------------------------------
{
	my $h = holder();
	my $pid = $h->pid;
	my $id = $h->query('SELECT redis_lock_owner_id()');
	$h->query("SET redislock.watchdog_timeout = '10min'");
	is($h->query("SELECT redis_lock_acquire('o:fixed', '0', '10 min')"), 't', 'holder: o:fixed (10 min fixed)');
	is($h->query("SELECT redis_lock_acquire('o:wd')"), 't', 'holder: o:wd (10 min watchdog)');
	# a fixed-lease re-entry goes to Redis (a watchdog one would be counted
	# in the session alone, see 375)
	is($h->query("SELECT redis_lock_acquire('o:wd', '0', '10 min')"), 't', 'holder: o:wd again (count 2)');
	is(rc()->cmd('HGET', 'o:wd', $id), '2', 'count 2 in Redis');
	is(states($pid), 'o:fixed=held,o:wd=held', 'both held');
	my $s0 = lock_stats($obs);

	reset_rc();
	$redis->stop;
	ok(!$redis->ping, 'redis stopped');
	ok($h->terminate($T), 'holder terminated while Redis is down');
	until_ok("redis_locks: both locks 'releasing'",
		sub { states($pid) eq 'o:fixed=releasing,o:wd=releasing' });
	until_ok('server log: the exit release failed', sub {
		slurp($node->logfile) =~ /could not release the Redis locks of this session/;
	});
	is(lock_stats($obs)->{worker_released}, $s0->{worker_released}, 'nothing released yet');

	$redis->start;
	until_ok('after the restart: o:fixed gone from Redis', sub { rc()->cmd('EXISTS', 'o:fixed') == 0 });
	until_ok('after the restart: o:wd gone from Redis (both holds)', sub { rc()->cmd('EXISTS', 'o:wd') == 0 });
	until_ok('worker_released = +2', sub { lock_stats($obs)->{worker_released} == $s0->{worker_released} + 2 });
	until_ok('no rows left for the ended session', sub { states($pid) eq '' });
	my $log = slurp($node->logfile);
	like($log, qr/LOG:  released Redis lock "o:fixed" of the ended session with PID $pid/,
		'server log: worker released o:fixed');
	like($log, qr/LOG:  released Redis lock "o:wd" of the ended session with PID $pid/,
		'server log: worker released o:wd');
	like($log, qr/redislock watchdog cannot reach Redis/, 'server log: the worker noticed the outage');

	# The released lock is free at once for anyone (well before its 10 min lease).
	my $b = RedisLockTest::Session->new($node);
	is($b->query("SELECT redis_lock_acquire('o:fixed', '0', '10 min')"), 't', 'another session takes o:fixed at once');
	is($b->query("SELECT redis_lock_release('o:fixed')"), 't', 'and releases it');
	$b->close;
}

# --- 3. the same, with a waiter that is woken by the worker's release ----------------------
# The waiter starts once Redis is back and the orphan still sits in Redis (AOF);
# it must get the lock from the worker's release (unlock publish), not from
# the 10 min lease.
{
	my $h = holder();
	my $pid = $h->pid;
	is($h->query("SELECT redis_lock_acquire('w:fixed', '0', '10 min')"), 't', 'holder: w:fixed');
	my $s0 = lock_stats($obs);
	reset_rc();
	$redis->stop;
	ok($h->terminate($T), 'holder terminated while Redis is down');
	until_ok("w:fixed 'releasing'", sub { states($pid) eq 'w:fixed=releasing' });
	$redis->start;
	my $b = RedisLockTest::Session->new($node);
	$b->start("SELECT redis_lock_acquire('w:fixed', '2 min', '10 min')");
	my ($v, $err) = $b->finish($T);
	is($v, 't', 'a waiter gets w:fixed after the worker releases it') or diag($err);
	until_ok('worker_released +1', sub { lock_stats($obs)->{worker_released} == $s0->{worker_released} + 1 });
	is($b->query("SELECT redis_lock_release('w:fixed')"), 't', 'waiter releases');
	$b->close;
}

# --- 4. an orphan whose lease runs out while Redis is down: dropped, not released -----------
{
	my $h = holder();
	my $pid = $h->pid;
	is($h->query("SELECT redis_lock_acquire('x:short', '0', '3 s')"), 't', 'holder: x:short (3 s fixed)');
	my $s0 = lock_stats($obs);
	reset_rc();
	$redis->stop;
	ok($h->terminate($T), 'holder terminated while Redis is down');
	until_ok("x:short 'releasing'", sub { states($pid) eq 'x:short=releasing' });
	until_ok('the worker drops it once its lease has passed (Redis still down)',
		sub { states($pid) eq '' });
	$redis->start;
	until_ok('the key is gone (expired)', sub { rc()->cmd('EXISTS', 'x:short') == 0 });
	is(lock_stats($obs)->{worker_released}, $s0->{worker_released}, 'not counted as released by the worker');
	until_ok('the worker talks to Redis again',
		sub { slurp($node->logfile) =~ /redislock watchdog reached Redis server ".*" again/ });
}

# --- 5. a read hold outlives its lease while another reader keeps the hash -----------------
# Its field still counts as a reader for writers (as for Redisson's), so
# the worker gives it back even past its lease, and the live reader can
# then upgrade.
{
	my $a = RedisLockTest::Session->new($node);
	my $a_id = $a->query('SELECT redis_lock_owner_id()');
	my $h = holder();
	my $pid = $h->pid;
	my $id = $h->query('SELECT redis_lock_owner_id()');
	is($a->query("SELECT redis_read_lock_acquire('r:stale', '0', '10 min')"), 't', 'reader A: r:stale (10 min)');
	is($h->query("SELECT redis_read_lock_acquire('r:stale', '0', '3 s')"), 't', 'holder: r:stale (3 s fixed)');
	my $s0 = lock_stats($obs);
	reset_rc();
	$redis->stop;
	ok($h->terminate($T), 'holder terminated while Redis is down');
	until_ok("r:stale 'releasing'", sub { states($pid) eq 'r:stale=releasing' });
	until_ok("the holder's lease has passed (PostgreSQL's clock)", sub {
		$obs->query("SELECT bool_and(clock_timestamp() > renewed_at + lease) FROM redis_locks WHERE pid = $pid") eq 't';
	});
	is(states($pid), 'r:stale=releasing', 'the worker keeps it to give back');
	$redis->start;
	until_ok("the worker gives the holder's field back", sub { !rc()->cmd('HEXISTS', 'r:stale', $id) });
	is(rc()->cmd('HGET', 'r:stale', $a_id), '1', "A's read hold stays");
	until_ok('worker_released +1', sub { lock_stats($obs)->{worker_released} == $s0->{worker_released} + 1 });
	until_ok('no rows left for the ended session', sub { states($pid) eq '' });
	is($a->query("SELECT redis_write_lock_acquire('r:stale', '0', '10 min')"), 't', 'A, the only reader, upgrades');
	is($a->query('SELECT redis_lock_release_all()'), 2, 'A leaves');
	$a->close;
}

is($obs->query('SELECT count(*) FROM redis_locks'), 0, 'redis_locks empty at the end');
is($obs->query("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'redislock watchdog'"),
	1, 'watchdog still running');
no_crash_ok($node, 'session end');
done_testing();
