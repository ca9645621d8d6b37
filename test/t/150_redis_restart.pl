# 150_redis_restart.pl — Redis restarted while sessions hold locks.
# Without persistence the data is gone: the watchdog reports the watchdog
# locks 'lost' (WARNING, lost_locks), keeps running, the commit guard refuses
# writes, the locks can be taken again.  With AOF (appendfsync always) the
# locks survive a restart and a kill -9 and keep being renewed.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use Test::More;

my $T = 60;

sub states
{
	my ($s, $pid) = @_;
	return join(',', map { "$_->[0]=$_->[1]" } $s->rows(
		"SELECT name, state FROM redis_locks WHERE pid = $pid ORDER BY name"));
}

# --- A. no persistence: locks lost --------------------------------------------------
{
	my $redis = RedisLockTest::Redis->new;
	my $node  = RedisLockTest::node('restart_mem', $redis);
	my $obs   = RedisLockTest::observer($node);
	$node->safe_psql('postgres', 'CREATE TABLE t (v int)');
	my $wpid = RedisLockTest::watchdog_pids($obs);
	ok(defined $wpid, "watchdog running ($wpid)");

	my $a = RedisLockTest::Session->new($node);
	my $b = RedisLockTest::Session->new($node);
	$a->query("SET redislock.watchdog_timeout = '2s'");
	$b->query("SET redislock.watchdog_timeout = '2s'");
	is($a->query("SELECT redis_lock_acquire('m:a1')"), 't', 'A holds m:a1');
	is($a->query("SELECT redis_lock_acquire('m:a2')"), 't', 'A holds m:a2');
	is($b->query("SELECT redis_lock_acquire('m:b1')"), 't', 'B holds m:b1');
	my $s0 = lock_stats($obs);
	until_ok('renewals going on', sub { lock_stats($obs)->{renewals} >= $s0->{renewals} + 3 });
	$s0 = lock_stats($obs);

	$redis->restart;
	is(redis_cmd($redis, 'DBSIZE'), 0, 'Redis came back empty');
	until_ok("A's locks become 'lost'", sub { states($obs, $a->pid) eq 'm:a1=lost,m:a2=lost' });
	until_ok("B's lock becomes 'lost'", sub { states($obs, $b->pid) eq 'm:b1=lost' });
	is(lock_stats($obs)->{lost_locks}, $s0->{lost_locks} + 3, 'lost_locks +3');
	my $log = slurp($node->logfile);
	my ($apid, $bpid) = ($a->pid, $b->pid);
	like($log, qr/Redis lock "m:a1" held by the session with PID $apid was lost/, 'WARNING for m:a1');
	like($log, qr/Redis lock "m:b1" held by the session with PID $bpid was lost/, 'WARNING for m:b1');
	is(RedisLockTest::watchdog_pids($obs), $wpid, 'the same watchdog still runs');
	ok(!defined $a->query("SELECT redis_lock_fencing_token('m:a1')"), 'fencing token NULL');

	my ($v, $err, $st) = $a->try('INSERT INTO t VALUES (1)');
	is($st, '55P03', 'commit guard refuses a write') or diag($err);
	like($err // '', qr/Redis lock "m:a\d" was lost before COMMIT/, 'naming a lost lock');
	is($obs->query('SELECT count(*) FROM t'), 0, 'nothing committed');

	# Someone else can take them now; A's release says it no longer held them.
	my $c = RedisLockTest::Session->new($node);
	is($c->query("SELECT redis_lock_acquire('m:a1', '0', '10 min')"), 't', 'C takes m:a1');
	$a->notices;
	($v, $err) = $a->try("SELECT redis_lock_release('m:a1')");
	is($v, 'f', "A's release of m:a1 returns false") or diag($err);
	ok((grep { /WARNING/ } $a->notices), 'with a WARNING');
	is(redis_cmd($redis, 'HEXISTS', 'm:a1', $c->query('SELECT redis_lock_owner_id()')), 1,
		"A's release did not touch C's hold");
	# release_all counts only what it released: m:a2 was lost already
	($v, $err) = $a->try("SELECT redis_lock_release_all()");
	ok(!defined $err, 'A: release_all after the loss works') or diag($err);
	is($v, 0, 'release_all does not count the lost lock');
	ok((grep { /no longer held/ } $a->notices), 'and warns that it was no longer held');
	is(states($obs, $a->pid), '', "A's rows are gone from redis_locks");
	# B never released its lost hold: taking it again stacks on it (count 2),
	# with a WARNING that it had been lost.
	$b->notices;
	is($b->query("SELECT redis_lock_acquire('m:b1')"), 't', 'B takes m:b1 again');
	ok((grep { /had been lost and was acquired again/ } $b->notices), 'WARNING: had been lost and was acquired again');
	is(states($obs, $b->pid), 'm:b1=held', 'held again');
	is($obs->query("SELECT hold_count FROM redis_locks WHERE name = 'm:b1'"), 2, 'hold count 2 (old hold + new)');
	my $r0 = lock_stats($obs)->{renewals};
	until_ok('and renewed again', sub { lock_stats($obs)->{renewals} >= $r0 + 3 });
	is(redis_cmd($redis, 'HEXISTS', 'm:b1', $b->query('SELECT redis_lock_owner_id()')), 1, 'B holds it in Redis');
	is($b->query("SELECT redis_lock_release('m:b1')"), 't', 'B releases once');
	is($b->query("SELECT redis_lock_release('m:b1')"), 't', 'B releases twice');
	is(redis_cmd($redis, 'EXISTS', 'm:b1'), 0, 'm:b1 gone');
	is($c->query("SELECT redis_lock_release('m:a1')"), 't', 'C releases');
	is($obs->query('SELECT count(*) FROM redis_locks'), 0, 'redis_locks empty')
	  or diag(explain [ $obs->rows('SELECT pid, name, state, hold_count, owner_id FROM redis_locks') ]);
	no_crash_ok($node, 'no persistence');
	$_->close for ($a, $b, $c);
	$node->stop('fast');
}

# --- B. AOF: locks survive restart and kill -9 -------------------------------------------
{
	my $redis = RedisLockTest::Redis->new(appendonly => 1);
	my $node  = RedisLockTest::node('restart_aof', $redis);
	my $obs   = RedisLockTest::observer($node);
	my $wpid  = RedisLockTest::watchdog_pids($obs);

	my $a = RedisLockTest::Session->new($node);
	# 10 s lease: the outage (a restart) is far shorter, so nothing may expire.
	$a->query("SET redislock.watchdog_timeout = '10s'");
	my $id = $a->query('SELECT redis_lock_owner_id()');
	is($a->query("SELECT redis_lock_acquire('p:1')"), 't', 'A holds p:1');
	is($a->query("SELECT redis_lock_acquire('p:2')"), 't', 'A holds p:2');
	is($a->query("SELECT redis_lock_acquire('p:fixed', '0', '10 min')"), 't', 'A holds p:fixed');
	my $tok = $a->query("SELECT redis_lock_fencing_token('p:1')");

	for my $how (qw(restart kill9))
	{
		my $s0 = lock_stats($obs);
		if ($how eq 'restart') { $redis->restart; }
		else { $redis->kill9; $redis->start; }
		is(redis_cmd($redis, 'HEXISTS', 'p:1', $id), 1, "$how: p:1 came back from the AOF");
		is(redis_cmd($redis, 'HEXISTS', 'p:fixed', $id), 1, "$how: p:fixed came back");
		my $r0 = lock_stats($obs)->{renewals};
		# 2 locks renewed every 3.3 s: +4 = two rounds after the restart
		until_ok("$how: renewals go on (+4)", sub { lock_stats($obs)->{renewals} >= $r0 + 4 });
		is(redis_cmd($redis, 'HEXISTS', 'p:1', $id), 1, "$how: p:1 still held");
		is(redis_cmd($redis, 'HEXISTS', 'p:2', $id), 1, "$how: p:2 still held");
		ok(redis_cmd($redis, 'PTTL', 'p:1') > 0, "$how: PTTL > 0");
		is(states($obs, $a->pid), 'p:1=held,p:2=held,p:fixed=held', "$how: all held in redis_locks");
		is(lock_stats($obs)->{lost_locks}, $s0->{lost_locks}, "$how: nothing lost");
		is(RedisLockTest::watchdog_pids($obs), $wpid, "$how: same watchdog");
		is($a->query("SELECT redis_lock_fencing_token('p:1')"), $tok, "$how: same fencing token");
	}
	is($a->query('SELECT redis_lock_release_all()'), 3, 'A releases all three');
	is(redis_cmd($redis, 'EXISTS', 'p:1') + redis_cmd($redis, 'EXISTS', 'p:2') + redis_cmd($redis, 'EXISTS', 'p:fixed'),
		0, 'keys gone');
	no_crash_ok($node, 'AOF');
	$a->close;
	$node->stop('fast');
}

done_testing();
