# 368_semaphore_lost.pl — permits that disappear behind the holder's back
# are handled as locks are: the watchdog marks them lost (redis_locks
# 'lost', WARNING naming the semaphore and the PID, lost_locks) and the
# commit guard fails the COMMIT of a writing transaction (55P03) while the
# session holds them. A fixed-lease permit that ran out is caught by the
# guard's own round trip. Both kinds of permit: a semaphore's (its owner's
# record in redislock_semaphore_holders) and an expiring permit (its member
# of {name}:timeout). Then what a review found: a multi-permit acquisition
# that the replicas did not confirm gives back every permit it took; a
# shorter lease asked later never shortens a semaphore record; the worker
# keeps giving back an ended session's permits after their lease (nothing
# in Redis expires them); a latch count-down or pool addition sent again
# after a lost reply is answered from the call's record, not applied twice.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use Test::More;

sub state_of
{
	my ($s, $name) = @_;
	return $s->query("SELECT coalesce(string_agg(state, ','), '') FROM redis_locks WHERE name = '$name'");
}

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('semlost', $redis);
my $obs   = RedisLockTest::observer($node);
my $rc    = FakeRedisson::Conn->new(port => $redis->port);
$node->safe_psql('postgres', 'CREATE TABLE t (v int)');

# Runs "BEGIN; <body>; COMMIT"; returns (err, sqlstate) and leaves the
# session outside any transaction block.
sub xact
{
	my ($s, $body) = @_;
	my (undef, $err, $st) = $s->try("BEGIN; $body; COMMIT");
	$s->dbh->do('ROLLBACK') if defined $err;
	$s->notices;
	return ($err, $st);
}

my $a = RedisLockTest::Session->new($node);
$a->query("SET redislock.watchdog_timeout = '1s'");
my $a_id = $a->query('SELECT redis_lock_owner_id()');
my $a_pid = $a->pid;

# --- 1. positive control ----------------------------------------------------------------
is($a->query("SELECT redis_semaphore_try_set_permits('sl:sem', 3)::text || ' ' || "
		. "redis_permit_try_set_permits('sl:pes', 3)::text"), 'true true', 'two pools of 3');
is($a->query("SELECT redis_semaphore_acquire('sl:sem', 2)"), 't', 'A takes 2 permits of sl:sem');
my $id = $a->query("SELECT redis_permit_acquire('sl:pes')");
like($id, qr/^[0-9a-f]{32}$/, 'A takes an expiring permit of sl:pes (watchdog)');
is($rc->cmd('HGET', 'redislock_semaphore_holders:{sl:sem}', $a_id), 2,
	"Redis records A's 2 permits beside the semaphore");
ok(defined $rc->cmd('ZSCORE', '{sl:pes}:timeout', pack('H*', $id)),
	'the permit id is a member of {sl:pes}:timeout as its 16 raw bytes');
{
	my ($err) = xact($a, 'INSERT INTO t VALUES (1)');
	ok(!defined $err, 'a writing transaction commits while the permits are held') or diag($err);
}

# --- 2. the semaphore's record deleted behind A's back ----------------------------------
my $lost0 = lock_stats($obs)->{lost_locks};
is($rc->cmd('HDEL', 'redislock_semaphore_holders:{sl:sem}', $a_id), 1,
	"HDEL A's record of sl:sem behind its back");
until_ok("redis_locks: sl:sem is 'lost'", sub { state_of($obs, 'sl:sem') eq 'lost' });
until_ok('server log: WARNING naming the semaphore and the PID', sub {
	slurp($node->logfile) =~ /WARNING:  Redis semaphore "sl:sem" held by the session with PID $a_pid was lost/;
});
{
	my ($err, $st) = xact($a, 'INSERT INTO t VALUES (2)');
	is($st, '55P03', 'COMMIT of a writing transaction fails with 55P03') or diag($err);
	like($err // '', qr/Redis semaphore "sl:sem" was lost before COMMIT/, '... naming the semaphore');
	is($obs->query('SELECT count(*) FROM t WHERE v = 2'), 0, '... and its work is rolled back');
}
is($a->query("SELECT redis_semaphore_release('sl:sem', 2)"), 'f',
	'releasing the lost permits says false');
is(state_of($obs, 'sl:sem'), '', '... and the entry is gone');

# --- 3. the expiring permit removed behind A's back -------------------------------------
is($rc->cmd('ZREM', '{sl:pes}:timeout', pack('H*', $id)), 1, 'ZREM the permit behind its back');
until_ok("redis_locks: the permit of sl:pes is 'lost'", sub { state_of($obs, 'sl:pes') eq 'lost' });
{
	my ($err, $st) = xact($a, 'INSERT INTO t VALUES (3)');
	is($st, '55P03', 'COMMIT under the lost permit fails with 55P03') or diag($err);
}
is($a->query("SELECT redis_permit_release('sl:pes', '$id')"), 'f', 'releasing it says false');
until_ok('lost_locks counted both', sub { lock_stats($obs)->{lost_locks} >= $lost0 + 2 });

# --- 4. a fixed-lease permit that ran out: the guard's own round trip -------------------
my $fixed = $a->query("SELECT redis_permit_acquire('sl:pes', '0', '200 ms')");
like($fixed, qr/^[0-9a-f]{32}$/, 'A takes a permit with a 200 ms lease');
until_ok("redis_locks shows it 'expired'", sub { state_of($obs, 'sl:pes') eq 'expired' });
{
	my ($err, $st) = xact($a, 'INSERT INTO t VALUES (4)');
	is($st, '55P03', 'COMMIT after its lease ran out fails with 55P03') or diag($err);
}
is($a->query("SELECT redis_permit_release('sl:pes', '$fixed')"), 'f',
	'releasing the expired permit says false (it still went back to the pool)');
is($a->query("SELECT redis_permit_available('sl:pes')"), 2,
	'sl:pes: 2 available (the permit removed behind its back is gone from the pool: nothing knew of it)');
is($a->query("SELECT redis_semaphore_available('sl:sem')"), 1,
	'sl:sem: the 2 permits whose record was deleted are gone from the pool (nothing knew of them)');

# --- 5. sync_replicas refuses a multi-permit acquisition: all of it goes back -------------
{
	my $s = RedisLockTest::Session->new($node);
	my $id = $s->query('SELECT redis_lock_owner_id()');
	is($s->query("SELECT redis_semaphore_try_set_permits('sl:sr', 3)"), 't', 'a pool of 3');
	$s->query("SET redislock.command_timeout = '1s'");
	$s->query('SET redislock.sync_replicas = 1');
	my (undef, $err, $st) = $s->try("SELECT redis_semaphore_acquire('sl:sr', 3, '0')");
	is($st, '55000', 'taking 3 permits with no replica to confirm fails with 55000') or diag($err);
	is($rc->cmd('GET', 'sl:sr'), 3, '... and all 3 permits are back in the pool (1 before the fix)');
	ok(!defined $rc->cmd('HGET', 'redislock_semaphore_holders:{sl:sr}', $id),
		'... and Redis records none for the session');
	$s->query('SET redislock.sync_replicas = 0');
	is($s->query("SELECT redis_semaphore_acquire('sl:sr', 2, '0')::text || ' ' || redis_semaphore_available('sl:sr')"),
		'true 1', 'a later acquisition of 2 really takes 2');
	$s->close;
}

# --- 6. a shorter lease asked later does not shorten the record ----------------------------
{
	my $s = RedisLockTest::Session->new($node);
	my $id = $s->query('SELECT redis_lock_owner_id()');
	is($s->query("SELECT redis_semaphore_try_set_permits('sl:ls', 2)"), 't', 'a pool of 2');
	$s->query("SET redislock.watchdog_timeout = '30s'");
	is($s->query("SELECT redis_semaphore_acquire('sl:ls')"), 't', 'a permit with a 30 s record');
	my $first = $rc->cmd('ZSCORE', 'redislock_semaphore_timeout:{sl:ls}', $id);
	$s->query("SET redislock.watchdog_timeout = '2s'");
	is($s->query("SELECT redis_semaphore_acquire('sl:ls')"), 't', 'one more, asking for 2 s');
	my $second = $rc->cmd('ZSCORE', 'redislock_semaphore_timeout:{sl:ls}', $id);
	cmp_ok($second, '>=', $first, 'the record still expires no sooner than the 30 s one did');
	$s->close;
}

# --- 7. the worker gives back an ended session's permits after their lease ----------------
{
	my $s = RedisLockTest::Session->new($node);
	my $id = $s->query('SELECT redis_lock_owner_id()');
	$s->query("SET redislock.watchdog_timeout = '1s'");
	is($s->query("SELECT redis_semaphore_try_set_permits('sl:orph', 3)"), 't', 'a pool of 3');
	is($s->query("SELECT redis_semaphore_acquire('sl:orph', 2)"), 't', 'A takes 2 (1 s lease)');
	# longer than the worker's command timeout (5 s): its first try fails too
	$rc->cmd('CLIENT', 'PAUSE', 7000, 'ALL');
	ok($s->terminate, 'A is terminated while Redis is paused: its own release cannot finish');
	# Nothing but the worker's release may touch the pool here: the raw
	# GET does not reclaim expired records as redislock's scripts would.
	until_ok('once Redis answers again, the worker gives the 2 permits back', sub {
		($rc->cmd('GET', 'sl:orph') // 0) == 3
		  && !defined $rc->cmd('HGET', 'redislock_semaphore_holders:{sl:orph}', $id);
	});
	until_ok('... and frees the slot', sub {
		$obs->query("SELECT count(*) FROM redis_locks WHERE name = 'sl:orph'") == 0;
	});
}

# --- 8. a call sent again is answered, not applied twice -----------------------------------
{
	my $dir = "$FindBin::RealBin/../../lua";
	my $latch = RedisLockTest::slurp("$dir/latch.lua");
	my $set = RedisLockTest::slurp("$dir/sem_set.lua");
	$rc->cmd('SET', 'sl:latch', 5);
	my @count_down = ('EVAL', $latch, 2, 'sl:latch', '{sl:latch}:redislock_call:c1',
		'count_down', 0, 'publish', 'redisson_countdownlatch__channel__{sl:latch}', 60000);
	is_deeply($rc->cmd(@count_down), [4, -1], 'a latch count-down: 4 left');
	is_deeply($rc->cmd(@count_down), [4, -1], 'the same call again (a resend) answers 4 again');
	is($rc->cmd('GET', 'sl:latch'), 4, '... and counted down once');
	$rc->cmd('SET', 'sl:add', 1);
	my @add = ('EVAL', $set, 3, 'sl:add', 'redisson_sc:{sl:add}', '{sl:add}:redislock_call:c2',
		'add', 2, 'publish', 60000);
	is($rc->cmd(@add), 1, 'a pool addition of 2');
	is($rc->cmd(@add), 1, 'the same call again');
	is($rc->cmd('GET', 'sl:add'), 3, '... added once');
	my (undef, $err, $st) = $a->try("SELECT redis_latch_try_set_count('sl:big', 9007199254740992)");
	is($st, '22023', 'a latch count past 2^53 - 1 is refused with 22023 (Lua counts in doubles)')
	  or diag($err);
}

no_crash_ok($node, 'semlost');
done_testing();
