# 355_semaphore_counter.pl — the concurrency check for semaphores and
# expiring permits: N SQL sessions and a Redisson client (in a forked
# child, with a database connection of its own, as a Java service has) each
# take a permit of a pool of 3, count themselves in a "now inside" counter
# while they hold it, and give it back; the most ever inside is exactly 3,
# and the pool is back to 3 at the end.  Once with redis_semaphore_* and
# Redisson's RSemaphore, once with redis_permit_* and
# RPermitExpirableSemaphore.
#
# The counter is one row: "UPDATE inside SET n = n + 1 RETURNING n" in its
# own committed transaction right after the acquisition, "n - 1" committed
# right before the release; the row lock orders the updates, so each
# RETURNING is exactly how many were inside then.  A control run without
# permits shows the workload does get more than 3 inside here (asserted
# only when it does, as in 060_mutual_exclusion.pl).  Everything runs at
# once and is waited for with bounds; nothing is timed.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use POSIX ();
use Test::More;

my $SESSIONS = 5;
my $ROUNDS   = 40;     # per SQL session
my $J_ROUNDS = 20;     # for the Redisson client
my $POOL     = 3;
my $T        = 300;    # bound for a whole run, s

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('semcounter', $redis, 'max_connections' => '30');
my $rc    = FakeRedisson::Conn->new(port => $redis->port);
my $java  = FakeRedisson->new(port => $redis->port);

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

# The Redisson client's rounds, in a forked child: take a permit as Java's
# acquire() does (waiting on the channel), count in and out through its own
# database connection, give it back.  Exits 0, or 3 with the error on stderr.
sub java_worker
{
	my ($run, $pool, $kind) = @_;
	my $pid = fork() // die "fork: $!";
	return $pid if $pid;
	my $ok = eval {
		my $j = $java->clone;
		my $s = RedisLockTest::Session->new($node);
		my $most = 0;
		for (1 .. $J_ROUNDS)
		{
			my $id;
			if ($kind eq 'semaphore')
			{
				$j->semaphore_acquire($pool, 1, $T) or die "Redisson: no permit of $pool within ${T}s\n";
			}
			else
			{
				$id = $j->permit_acquire($pool, undef, undef, $T)
				  // die "Redisson: no permit of $pool within ${T}s\n";
			}
			my $cur = $s->query('UPDATE inside SET n = n + 1 RETURNING n');
			$most = $cur if $cur > $most;
			$s->query('SELECT pg_sleep(0.002)');
			$s->query('UPDATE inside SET n = n - 1');
			if ($kind eq 'semaphore')
			{
				$j->release($pool, 1);
			}
			else
			{
				$j->release_permit($pool, $id) == 1 or die "Redisson: permit $id of $pool not released\n";
			}
		}
		$s->query("INSERT INTO seen VALUES ('$run', 'redisson', $most)");
		1;
	};
	print STDERR "java worker: $@" unless $ok;
	POSIX::_exit($ok ? 0 : 3);
}

# Runs $SESSIONS SQL workers and, unless $kind is 'none', the Redisson
# client; returns (most inside, how many workers reported, errors).
sub run_pool
{
	my ($run, $pool, $kind) = @_;
	$setup->query('UPDATE inside SET n = 0');
	my @s = map { RedisLockTest::Session->new($node) } 1 .. $SESSIONS;
	for my $i (0 .. $#s)
	{
		$s[$i]->start("CALL pool_worker('$run', '$pool', $ROUNDS, '$kind', 'sql$i')");
	}
	my $jpid = $kind eq 'none' ? undef : java_worker($run, $pool, $kind);
	my $jdone = !defined $jpid;
	my $jstatus = 0;
	my $all = RedisLockTest::wait_until($T, "run $run: every worker returned", sub {
		if (!$jdone && waitpid($jpid, POSIX::WNOHANG()) == $jpid)
		{
			$jdone = 1;
			$jstatus = $? >> 8;
		}
		return $jdone && !grep { !$_->is_done } @s;
	});
	ok($all, "run $run: all workers returned within ${T}s");
	my @errors;
	for my $s (@s)
	{
		my ($v, $err, $st) = $s->finish($all ? 30 : 1);
		($v, $err, $st) = $s->cancel(30) if defined $st && $st eq 'TIMEOUT';
		push @errors, "[$st] $err" if defined $err;
		$s->close;
	}
	if (!$jdone)
	{
		kill 'KILL', $jpid;
		waitpid($jpid, 0);
		push @errors, 'Redisson worker still running, killed';
	}
	push @errors, "Redisson worker exited with $jstatus" if $jstatus;
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
	is($who, $SESSIONS + 1, "semaphore: $SESSIONS SQL sessions and the Redisson client took part");
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
	is($who, $SESSIONS + 1, "permit: $SESSIONS SQL sessions and the Redisson client took part");
	is($most, $POOL, "permit: the most ever inside is exactly $POOL");
	is($rc->cmd('GET', $pool), $POOL, "permit: the pool is back to $POOL");
	is($rc->cmd('ZCARD', FakeRedisson::permit_timeout_key($pool)), 0, 'permit: no permit out');
	is($java->permit_available($pool), $POOL, "permit: Redisson's availablePermits: $POOL");
	is($setup->query('SELECT count(*) FROM redis_locks'), 0, 'permit: redis_locks is empty');
}

$setup->close;
no_crash_ok($node, 'semaphore counter');
done_testing();
