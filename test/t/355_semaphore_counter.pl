# 355_semaphore_counter.pl — the concurrency check for semaphores and
# expiring permits: N SQL sessions and two threads of the real Redisson
# client each take a permit of a pool of 3, count themselves in a "now
# inside" counter while they hold it, and give it back; the most ever inside
# is exactly 3, and the pool is back to 3 at the end.  Once with
# redis_semaphore_* and Redisson's RSemaphore, once with redis_permit_* and
# RPermitExpirableSemaphore.
#
# The counter is one row: "UPDATE inside SET n = n + 1 RETURNING n" in its
# own committed transaction right after the acquisition, "n - 1" committed
# right before the release; the row lock orders the updates, so each
# RETURNING is exactly how many were inside then.  The Java threads' counts
# are made by the test on their behalf, between the acquisition's result
# and the release it then asks for, as 500_redisson_real.pl's exclusion
# check does.  A control run without permits shows the workload does get
# more than 3 inside here (asserted only when it does, as in
# 060_mutual_exclusion.pl).  Everything runs at once and is waited for with
# bounds; nothing is timed.
#
# The Redisson client is the real one (RealRedisson: test/redisson-java's
# driver), the newest version in @RealRedisson::VERSIONS, one JVM.
# Takes about 5 s (one JVM start; about 3 s before, with FakeRedisson).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use RealRedisson;
use FakeRedisson;    # only its Redis connection and key names
use Test::More;

my $SESSIONS = 5;
my $ROUNDS   = 40;     # per SQL session
my $J_ROUNDS = 20;     # per Java thread
my @JT       = qw(j1 j2);    # the Java threads
my $POOL     = 3;
my $T        = 300;    # bound for a whole run, s

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('semcounter', $redis, 'max_connections' => '30');
my $rc    = FakeRedisson::Conn->new(port => $redis->port);
my ($JAVA_VERSION) = reverse RealRedisson::versions();
my $java  = RealRedisson->new(version => $JAVA_VERSION, port => $redis->port);
is($java->version, $JAVA_VERSION, "the real Redisson client, $JAVA_VERSION");

my $setup = RedisLockTest::Session->new($node);
$setup->query(<<'SQL');
CREATE TABLE inside(n int NOT NULL);
INSERT INTO inside VALUES (0);
CREATE TABLE seen(run text, who text, most int);

-- kind: 'semaphore', 'permit' (session scope), or 'none' (the control)
CREATE PROCEDURE pool_worker(run text, pool text, rounds int, kind text, who text)
LANGUAGE plpgsql AS $$
DECLARE
    cur int;
    most int := 0;
    id text;
BEGIN
    FOR i IN 1 .. rounds LOOP
        IF kind = 'semaphore' THEN
            IF NOT redis_semaphore_acquire(pool) THEN
                RAISE EXCEPTION 'no permit of %', pool;
            END IF;
        ELSIF kind = 'permit' THEN
            id := redis_permit_acquire(pool);
            IF id IS NULL THEN
                RAISE EXCEPTION 'no permit of %', pool;
            END IF;
        END IF;
        UPDATE inside SET n = n + 1 RETURNING n INTO cur;
        COMMIT;
        most := greatest(most, cur);
        PERFORM pg_sleep(0.002);
        UPDATE inside SET n = n - 1;
        COMMIT;
        IF kind = 'semaphore' THEN
            IF NOT redis_semaphore_release(pool) THEN
                RAISE EXCEPTION 'permit of % not held at release', pool;
            END IF;
        ELSIF kind = 'permit' THEN
            IF NOT redis_permit_release(pool, id) THEN
                RAISE EXCEPTION 'permit % of % not held at release', id, pool;
            END IF;
        END IF;
    END LOOP;
    INSERT INTO seen VALUES (run, who, most);
END $$;
SQL

# The Java threads' rounds, while the SQL workers run: each thread's
# acquisition is started at once; when one comes back, the test counts that
# thread in and out through its own session and has the thread give its
# permit back, then starts its next acquisition.  Returns the errors.
sub java_rounds
{
	my ($run, $pool, $kind, $pg) = @_;
	my %left = map { $_ => $J_ROUNDS } @JT;
	my (%n, %most);
	my $acquire = $kind eq 'semaphore' ? [ 'sem.acquire', $pool, 1 ] : [ 'pes.acquire', $pool ];
	my $start = sub { my $t = shift; $java->start("$t." . ++$n{$t}, $t, @$acquire) };
	$start->($_) for @JT;
	while (grep { $_ > 0 } values %left)
	{
		my $tag = $java->next_result([ map { "$_.$n{$_}" } grep { $left{$_} > 0 } @JT ], $T)
		  // return "run $run: no Java acquisition came back within ${T}s";
		my ($t) = split /\./, $tag;
		my ($st, $val) = $java->result($tag, 0);
		return "run $run: Java $t $acquire->[0]: $val" if $st ne 'ok';
		my $cur = $pg->query('UPDATE inside SET n = n + 1 RETURNING n');
		$most{$t} = $cur if $cur > ($most{$t} // 0);
		$pg->query('SELECT pg_sleep(0.002)');
		$pg->query('UPDATE inside SET n = n - 1');
		my ($r, $err) = $kind eq 'semaphore'
		  ? $java->try_run($t, 'sem.release', $pool, 1)
		  : $java->try_run($t, 'pes.tryRelease', $pool, $val);
		return "run $run: Java $t release: " . ($err // $r)
		  if defined $err || ($kind eq 'permit' && $r ne 'true');
		$start->($t) if --$left{$t} > 0;
	}
	$pg->query("INSERT INTO seen VALUES ('$run', 'java:$_', $most{$_})") for @JT;
	return ();
}

# Runs $SESSIONS SQL workers and, unless $kind is 'none', the Java
# threads; returns (most inside, how many workers reported, errors).
sub run_pool
{
	my ($run, $pool, $kind) = @_;
	$setup->query('UPDATE inside SET n = 0');
	my @s = map { RedisLockTest::Session->new($node) } 1 .. $SESSIONS;
	for my $i (0 .. $#s)
	{
		$s[$i]->start("CALL pool_worker('$run', '$pool', $ROUNDS, '$kind', 'sql$i')");
	}
	my @errors;
	if ($kind ne 'none')
	{
		my $pg = RedisLockTest::Session->new($node);
		push @errors, java_rounds($run, $pool, $kind, $pg);
		$pg->close;
	}
	my $all = RedisLockTest::wait_until($T, "run $run: every SQL worker returned", sub {
		return !grep { !$_->is_done } @s;
	});
	ok($all, "run $run: all SQL workers returned within ${T}s");
	for my $s (@s)
	{
		my ($v, $err, $st) = $s->finish($all ? 30 : 1);
		($v, $err, $st) = $s->cancel(30) if defined $st && $st eq 'TIMEOUT';
		push @errors, "[$st] $err" if defined $err;
		$s->close;
	}
	diag("run $run: most inside as each worker saw it: "
		  . join(' ', map { "$_->[0]=$_->[1]" } $setup->rows("SELECT who, most FROM seen WHERE run = '$run' ORDER BY who")));
	my $most = $setup->query("SELECT max(most) FROM seen WHERE run = '$run'");
	my $who  = $setup->query("SELECT count(*) FROM seen WHERE run = '$run'");
	return ($most, $who, @errors);
}

# --- control: no permits at all -------------------------------------------------------
{
	my ($most, $who, @errors) = run_pool('none', 'none', 'none');
	is(scalar(@errors), 0, 'control: no errors') or diag(join("\n", @errors));
	diag("control: up to $most inside at once");
	SKIP:
	{
		skip "control: never more than $POOL inside without permits: the workload does not overlap here", 1
		  if $most <= $POOL;
		cmp_ok($most, '>', $POOL, "control without permits: more than $POOL inside ($most)");
	}
}

# --- the pools ---------------------------------------------------------------------------
{
	my $pool = 'sc:sem';
	is($setup->query("SELECT redis_semaphore_try_set_permits('$pool', $POOL)"), 't', "semaphore $pool of $POOL");
	my ($most, $who, @errors) = run_pool('semaphore', $pool, 'semaphore');
	is(scalar(@errors), 0, 'semaphore: no errors') or diag(join("\n", @errors));
	is($who, $SESSIONS + @JT, "semaphore: $SESSIONS SQL sessions and " . @JT . ' Java threads took part');
	is($most, $POOL, "semaphore: the most ever inside is exactly $POOL");
	is($rc->cmd('GET', $pool), $POOL, "semaphore: the pool is back to $POOL");
	is($rc->cmd('HLEN', "redislock_semaphore_holders:{$pool}"), 0, 'semaphore: no holder recorded');
	is($rc->cmd('ZCARD', "redislock_semaphore_timeout:{$pool}"), 0, 'semaphore: no holder record left');
	is($setup->query('SELECT count(*) FROM redis_locks'), 0, 'semaphore: redis_locks is empty');
}
{
	my $pool = 'sc:permit';
	is($setup->query("SELECT redis_permit_try_set_permits('$pool', $POOL)"), 't', "expiring permits $pool of $POOL");
	my ($most, $who, @errors) = run_pool('permit', $pool, 'permit');
	is(scalar(@errors), 0, 'permit: no errors') or diag(join("\n", @errors));
	is($who, $SESSIONS + @JT, "permit: $SESSIONS SQL sessions and " . @JT . ' Java threads took part');
	is($most, $POOL, "permit: the most ever inside is exactly $POOL");
	is($rc->cmd('GET', $pool), $POOL, "permit: the pool is back to $POOL");
	is($rc->cmd('ZCARD', FakeRedisson::permit_timeout_key($pool)), 0, 'permit: no permit out');
	is($java->run('j1', 'pes.availablePermits', $pool), $POOL, "permit: Redisson's availablePermits: $POOL");
	is($setup->query('SELECT count(*) FROM redis_locks'), 0, 'permit: redis_locks is empty');
}

$java->quit;
$setup->close;
no_crash_ok($node, 'semaphore counter');
done_testing();
