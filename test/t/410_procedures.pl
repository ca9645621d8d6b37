# 410_procedures.pl — procedures that commit as they go (CALL of a
# procedure with COMMIT inside a loop): a session lock held across all of
# the procedure's transactions and released at its end; transaction locks
# taken and released per iteration (each COMMIT releases that iteration's
# lock); the commit guard failing the COMMIT of the iteration in which the
# lock was lost, the procedure stopping there with the earlier iterations'
# work committed and the failed one's not; with redislock.on_lock_lost =
# cancel, the procedure cancelled in the iteration that lost its lock, as
# soon as the watchdog finds the loss.
#
# Each procedure pauses in its second iteration, waiting for test:gate,
# which the test holds: a pause the test can see (wait_event_type
# Extension) and end when it has looked.  docs/database-jobs.md copies the
# procedures from here; the *_step functions stand for the work.
#
# The Redisson client that force-unlocks is the real one (RealRedisson:
# test/redisson-java's driver, the newest version in @RealRedisson::VERSIONS,
# as in 405); a missing driver fails the test.
# Takes about 5 s (2 of them the JVM's start).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use RealRedisson;
use FakeRedisson;    # only its Redis connection, which redis_cmd uses
use Test::More;

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('proc', $redis);
my ($JAVA_VERSION) = reverse RealRedisson::versions();
my $java  = RealRedisson->new(version => $JAVA_VERSION, port => $redis->port);
my $obs   = RedisLockTest::observer($node);
my $t     = RedisLockTest::Session->new($node);    # holds the gate
my $p     = RedisLockTest::Session->new($node);    # runs the procedures
my $b     = RedisLockTest::Session->new($node);    # another session

sub key_exists { redis_cmd($redis, 'EXISTS', $_[0]) }

$obs->query(<<'SQL');
CREATE TABLE batch_log(i int, locks text);

CREATE FUNCTION batch_step(i int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO batch_log
    SELECT i, string_agg(name, ',' ORDER BY name) FROM redis_locks WHERE pid = pg_backend_pid();
    IF i = 2 THEN
        PERFORM redis_xact_lock_acquire('test:gate');    -- the test's pause
    END IF;
END $$;

CREATE PROCEDURE nightly_batch(n int) LANGUAGE plpgsql AS $$
BEGIN
    IF NOT redis_lock_acquire('jobs:nightly-batch', wait => '0') THEN
        RAISE EXCEPTION 'another session runs the nightly batch';
    END IF;
    FOR i IN 1 .. n LOOP
        PERFORM batch_step(i);
        COMMIT;    -- the session lock stays held
    END LOOP;
    PERFORM redis_lock_release('jobs:nightly-batch');
END $$;

CREATE PROCEDURE process_items(n int) LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1 .. n LOOP
        PERFORM redis_xact_lock_acquire('item:' || i);
        PERFORM batch_step(i);
        COMMIT;    -- releases item:<i>
    END LOOP;
END $$;
SQL

# The procedure's session waits for test:gate (redis_lock_waits; a Redis
# round trip alone also shows wait_event_type Extension).
sub paused_ok
{
	my ($what) = @_;
	until_ok("$what: the procedure pauses in iteration 2 (waits for test:gate)", sub {
		($obs->query('SELECT name FROM redis_lock_waits WHERE pid = ' . $p->pid) // '') eq 'test:gate' });
}

sub gate_closed { is($t->query("SELECT redis_lock_acquire('test:gate')"), 't', 'the test holds test:gate') }
sub open_gate   { $t->query("SELECT redis_lock_release('test:gate')") }

# --- 1. a session lock held across the procedure's transactions ---------------------
{
	gate_closed();
	$p->start('CALL nightly_batch(3)');
	paused_ok('session lock');
	is($obs->query('SELECT string_agg(i::text, \' \') FROM batch_log'), '1',
		"iteration 1's work is committed (iteration 2's is not yet)");
	ok(key_exists('jobs:nightly-batch'), 'jobs:nightly-batch is held in Redis after the first COMMIT');
	is($obs->query("SELECT scope || '/' || hold_count FROM redis_locks WHERE pid = " . $p->pid
			  . " AND name = 'jobs:nightly-batch'"), 'session/1', '... by the procedure\'s session, once');
	is($b->query("SELECT redis_lock_acquire('jobs:nightly-batch', '0')"), 'f', '... and another session cannot take it');
	my (undef, $err, $state) = $b->try('CALL nightly_batch(1)');
	is($state, 'P0001', '... a second CALL elsewhere refuses to run') or diag($err);
	open_gate();
	my ($v, $perr) = $p->finish($RedisLockTest::WAIT);
	is($perr, undef, 'the procedure finished');
	is($obs->query("SELECT string_agg(i || ':' || locks, ' ' ORDER BY i) FROM batch_log"),
		'1:jobs:nightly-batch 2:jobs:nightly-batch 3:jobs:nightly-batch',
		'every iteration ran holding jobs:nightly-batch');
	ok(!key_exists('jobs:nightly-batch'), '... released at the end');
	is($obs->query('SELECT count(*) FROM redis_locks WHERE pid = ' . $p->pid), 0, '... nothing left in redis_locks');
	$obs->query('TRUNCATE batch_log');
}

# --- 2. transaction locks per iteration ------------------------------------------------
{
	gate_closed();
	$p->start('CALL process_items(3)');
	paused_ok('transaction locks');
	ok(!key_exists('item:1'), "item:1 was released by iteration 1's COMMIT");
	ok(key_exists('item:2'), 'item:2 is held by iteration 2');
	is($obs->query("SELECT scope FROM redis_locks WHERE pid = " . $p->pid . " AND name = 'item:2'"), 'transaction',
		'... at transaction scope');
	is($b->query("SELECT redis_lock_acquire('item:1', '0')"), 't', 'another session takes item:1 meanwhile');
	$b->query("SELECT redis_lock_release('item:1')");
	open_gate();
	my ($v, $perr) = $p->finish($RedisLockTest::WAIT);
	is($perr, undef, 'the procedure finished');
	is($obs->query("SELECT string_agg(i || ':' || locks, ' ' ORDER BY i) FROM batch_log"),
		'1:item:1 2:item:2 3:item:3', 'each iteration held only its own item lock');
	ok(!grep({ key_exists("item:$_") } 1 .. 3), '... none is left in Redis');
	$obs->query('TRUNCATE batch_log');
}

# --- 3. the commit guard stops the procedure at the iteration that lost the lock ------
for my $case (
	[ 'session lock, force-released by SQL',    'CALL nightly_batch(3)',  'jobs:nightly-batch', 'sql' ],
	[ 'transaction lock, force-unlocked by Redisson', 'CALL process_items(3)', 'item:2', 'java' ])
{
	my ($what, $call, $lock, $by) = @$case;
	gate_closed();
	$p->start($call);
	paused_ok($what);
	if ($by eq 'sql') { is($b->query("SELECT redis_lock_force_release('$lock')"), 't', "$what: $lock force-released") }
	else { is($java->run('admin', 'forceUnlock', 'plain', $lock), 'true', "$what: $lock force-unlocked") }
	open_gate();
	my ($v, $err, $state) = $p->finish($RedisLockTest::WAIT);
	is($state, '55P03', "$what: the COMMIT of iteration 2 fails (55P03)");
	like($err, qr/"\Q$lock\E" was lost before COMMIT/, "$what: ... the commit guard names the lock");
	is($obs->query("SELECT string_agg(i::text, ' ' ORDER BY i) FROM batch_log"), '1',
		"$what: ... the procedure stopped there: iteration 1 committed, 2 and 3 not");
	is($p->query('SELECT 1'), 1, "$what: ... the session goes on");
	$p->try('SELECT redis_lock_release_all()');
	until_ok("$what: ... nothing of the procedure is left in Redis", sub {
		!key_exists($lock) && !key_exists('item:1') && !key_exists('item:3') });
	$obs->query('TRUNCATE batch_log');
}

# --- 4. redislock.on_lock_lost = cancel stops the procedure when the loss is found ----
# The gate stays closed: what ends iteration 2 is the watchdog's cancel,
# not a COMMIT.
{
	my $what = 'on_lock_lost = cancel';
	$p->query("SET redislock.on_lock_lost = cancel; SET redislock.watchdog_timeout = '1s'");
	gate_closed();
	$p->start('CALL nightly_batch(3)');
	paused_ok($what);
	is($java->run('admin', 'forceUnlock', 'plain', 'jobs:nightly-batch'), 'true',
		"$what: jobs:nightly-batch force-unlocked by Redisson");
	my ($v, $err, $state) = $p->finish($RedisLockTest::WAIT);
	is($state, '57014', "$what: the procedure is cancelled in iteration 2 (57014)") or diag($err);
	told_like($node, $err, $p->pid, qr/canceling statement because Redis lock "jobs:nightly-batch" was lost/,
		"$what: ... naming the lock");
	is($obs->query("SELECT string_agg(i::text, ' ' ORDER BY i) FROM batch_log"), '1',
		"$what: ... iteration 1 committed, 2 and 3 not");
	open_gate();
	$p->query('RESET redislock.on_lock_lost; RESET redislock.watchdog_timeout');
	$p->try('SELECT redis_lock_release_all()');
	until_ok("$what: ... nothing of the procedure is left in Redis", sub {
		!key_exists('jobs:nightly-batch') && !key_exists('test:gate') });
	$obs->query('TRUNCATE batch_log');
}

no_crash_ok($node, 'procedures');
done_testing();
