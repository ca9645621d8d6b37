# 010_mutex_churn.pl — mutual exclusion under churn.
#
# 9 SQL sessions (session and transaction locks, blocking and bounded waits)
# and one real Redisson client (one-attempt tryLock(0, 30 s)) increment
# a counter held OUTSIDE PostgreSQL — key "ctr" in a second redis-server —
# with a non-atomic read-modify-write under lock "churn:ctr": the driver GETs
# the counter, lets the holder run a cancellable "work" statement (other
# sessions make progress meanwhile, in the same event loop), then SETs
# value+1 in a later step.  Overlapping holders would lose updates.
#
# Meanwhile a chaos step, every ~150 ms, picks a session at random and
#   - cancels it (pg_cancel_backend): a waiter's acquire ends with 57014; a
#     holder's work statement is cancelled, which for a transaction lock aborts
#     the transaction and so releases the lock;
#   - terminates it (pg_terminate_backend), then replaces it with a new session;
#   - transaction-lock holders end with COMMIT or ROLLBACK at random.
# The driver writes the counter only for a holder whose work statement
# succeeded and which it did not cancel or terminate itself.
#
# Proves: final counter == number of writes (no lost update), every lock
# released at the end (no key in Redis, redis_locks empty), no waiter stuck
# (each acquire bounded), no deadlock (progress at least every 60 s).
#
# The Redisson client is the real one (RealRedisson: test/redisson-java's
# driver, the newest version in @RealRedisson::VERSIONS, as in test/t/405),
# called synchronously from the loop (a one-attempt tryLock and an unlock
# answer within a Redis round trip); a missing driver fails the test.
# Takes about 25 s (600 rounds; one JVM: 2 s of it its start).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../../lib", "$FindBin::RealBin/../../redisson";
use RedisLockTest;
use RealRedisson;
use FakeRedisson;    # only its Redis connections
use FaultLib qw(until_ok no_crash_ok stats);
use Test::More;
use Time::HiRes qw(time sleep);

my $SQL_WORKERS = 9;
our $ROUNDS      = $ENV{FAULT_CHURN_ROUNDS} // 600;
our $CONTROL     = 0;      # 1: the same driver without any lock (must lose updates)
my $DEADLINE    = 420;    # the whole run
my $STUCK       = 60;     # one acquire, or no progress at all
my $LOCK        = 'churn:ctr';

srand($ENV{FAULT_SEED} // time());
diag("seed " . srand());

my $redis   = RedisLockTest::Redis->new;    # locks
my $counter = RedisLockTest::Redis->new;    # the resource outside PostgreSQL
my $node    = RedisLockTest::node('churn', $redis,
	'max_connections' => '40',
	'redislock.watchdog_timeout' => '6s',
	'log_min_messages' => 'warning');
my $ctr  = FakeRedisson::Conn->new(port => $counter->port);
my ($JAVA_VERSION) = reverse RealRedisson::versions();
my $java = RealRedisson->new(version => $JAVA_VERSION, port => $redis->port);
$ctr->cmd('SET', 'ctr', 0);
my $obs = RedisLockTest::observer($node);

my $writes = 0;
my %n;    # event counts

sub new_worker
{
	my ($i) = @_;
	my $s = RedisLockTest::Session->new($node, application_name => "churn$i");
	$s->query("SET lock_timeout = '${STUCK}s'");
	return { i => $i, s => $s, state => 'idle', xact => ($i % 3 == 0) };
}
my @w = map { new_worker($_) } 1 .. $SQL_WORKERS;

my $jv = { state => 'idle', thread => 'churn' };
my $t0 = time();

sub abandon
{
	my ($w, $why) = @_;
	$n{"abandon_$why"}++;
	if ($w->{xact}) { $w->{s}->try('ROLLBACK'); $w->{state} = 'idle'; return; }
	# session lock (if still held) goes back; not judged here
	$w->{s}->start('SELECT redis_lock_release_all()');
	$w->{state} = 'releasing_all';
}

sub step_worker
{
	my ($w) = @_;
	my $s = $w->{s};
	my $st = $w->{state};
	if ($st eq 'idle')
	{
		return if $writes >= $ROUNDS;
		my $sql;
		if ($CONTROL) { $sql = $w->{xact} ? 'BEGIN; SELECT true' : 'SELECT true'; }
		elsif ($w->{xact}) { $sql = "BEGIN; SELECT redis_xact_lock_acquire('$LOCK')"; }
		elsif (rand() < 0.5) { $sql = "SELECT redis_lock_acquire('$LOCK')"; }
		else { $sql = "SELECT redis_lock_acquire('$LOCK', '" . (0.2 + rand(2)) . " s')"; }
		$s->start($sql);
		$w->{state} = 'acquiring';
		$w->{since} = time();
		return;
	}
	return if $st eq 'holding';    # handled by the driver below
	return unless $s->is_done;
	my ($v, $err, $code) = $s->finish(5);
	if ($st eq 'acquiring')
	{
		if (defined $v && $v eq 't')
		{
			$n{acquired}++;
			$w->{val} = $ctr->cmd('GET', 'ctr');    # read ...
			$s->start('SELECT pg_sleep(' . rand(0.05) . ')');    # ... work ...
			$w->{state} = 'working';
		}
		elsif (defined $v && $v eq 'f') { $n{wait_false}++; $w->{state} = 'idle'; }
		else
		{
			$n{"acquire_err_" . ($code // '?')}++;
			push @{ $w->{errs} }, "[$code] $err" unless ($code // '') eq '57014';
			$s->try('ROLLBACK') if $w->{xact};
			$w->{state} = 'idle';
		}
	}
	elsif ($st eq 'working')
	{
		if (defined $err) { abandon($w, "work_$code"); return; }
		$ctr->cmd('SET', 'ctr', $w->{val} + 1);    # ... write, a later step
		$writes++;
		if ($w->{xact}) { $s->start(rand() < 0.5 ? 'COMMIT' : 'ROLLBACK'); }
		elsif ($CONTROL) { $s->start('SELECT true'); }
		else { $s->start("SELECT redis_lock_release('$LOCK')"); }
		$w->{state} = 'releasing';
	}
	elsif ($st eq 'releasing')
	{
		if (defined $err) { abandon($w, "release_$code"); return; }
		if (!$w->{xact} && !(defined $v && $v eq 't'))
		{
			push @{ $w->{errs} }, "release returned " . ($v // 'NULL');
		}
		$n{released}++;
		$w->{state} = 'idle';
	}
	elsif ($st eq 'releasing_all') { $w->{state} = 'idle'; }
}

sub step_java
{
	my $st = $jv->{state};
	if ($st eq 'idle')
	{
		return if $writes >= $ROUNDS || $CONTROL || rand() < 0.7;
		my ($r, $e) = $java->try_run($jv->{thread}, 'tryLock', 'plain', $LOCK, 0, 30000);
		push @{ $jv->{errs} }, "java tryLock: $e" if defined $e;
		if (($r // '') eq 'true')
		{
			$n{java_acquired}++;
			$jv->{val} = $ctr->cmd('GET', 'ctr');
			$jv->{state} = 'read';
			$jv->{steps} = 1 + int(rand(5));
		}
	}
	elsif ($st eq 'read')
	{
		return if --$jv->{steps} > 0;
		$ctr->cmd('SET', 'ctr', $jv->{val} + 1);
		$writes++;
		my ($u, $e) = $java->try_run($jv->{thread}, 'unlock', 'plain', $LOCK);
		push @{ $jv->{errs} }, 'java unlock: ' . ($e // "returned $u") unless defined $u && $u eq 'null';
		$jv->{state} = 'idle';
	}
}

sub chaos
{
	my $w = $w[ int(rand(@w)) ];
	my $r = rand();
	if ($r < 0.55)
	{
		return unless $w->{state} =~ /^(acquiring|working)$/;
		$obs->query("SELECT pg_cancel_backend(" . $w->{s}->pid . ")");
		$n{"cancel_$w->{state}"}++;
		# what it did is seen when its statement ends (57014 -> no write)
	}
	elsif ($r < 0.85)
	{
		$n{"terminate_$w->{state}"}++;
		my $old = $w->{s};
		if (!$old->terminate(30)) { push @{ $w->{errs} }, "backend " . $old->pid . " did not exit"; }
		delete $old->{sth_async};
		$old->close;
		my $nw = new_worker($w->{i});
		%$w = (%$nw, errs => $w->{errs});
	}
}

# --- control: the same driver and chaos without the lock loses updates --------
{
	local $CONTROL = 1;
	local $ROUNDS = 60;
	while ($writes < $ROUNDS || grep({ $_->{state} ne 'idle' } @w))
	{
		step_worker($_) for @w;
		last if time() - $t0 > 120;
		sleep(0.002);
	}
	my $got = $ctr->cmd('GET', 'ctr');
	cmp_ok($got, '<', $writes, "control without lock loses updates ($got of $writes): the check can fail");
	$writes = 0;
	%n = ();
	$ctr->cmd('SET', 'ctr', 0);
}

my $t_start = time();
my $last_progress = time();
my $last_writes = 0;
my $next_chaos = time() + 0.15;
my @fatal;
while ($writes < $ROUNDS || grep({ $_->{state} ne 'idle' } @w) || $jv->{state} ne 'idle')
{
	step_worker($_) for @w;
	step_java();
	if (time() >= $next_chaos && $writes < $ROUNDS) { chaos(); $next_chaos = time() + 0.05 + rand(0.2); }
	if ($writes != $last_writes) { $last_writes = $writes; $last_progress = time(); }
	for my $w (@w)
	{
		if ($w->{state} eq 'acquiring' && time() - $w->{since} > $STUCK + 10)
		{
			push @fatal, "worker $w->{i} (pid " . $w->{s}->pid . ") stuck in acquire for >" . ($STUCK + 10) . "s";
		}
	}
	if (time() - $last_progress > $STUCK) { push @fatal, "no progress for ${STUCK}s at $writes writes"; }
	if (time() - $t_start > $DEADLINE) { push @fatal, "run not done after ${DEADLINE}s ($writes writes)"; }
	last if @fatal;
	sleep(0.002);
}
my $elapsed = time() - $t_start;
diag(sprintf("%d writes in %.1fs; events: %s", $writes, $elapsed,
	join(', ', map { "$_=$n{$_}" } sort keys %n)));
ok(!@fatal, 'run completed without stuck waiter / deadlock') or diag(join("\n", @fatal));

my @errs = map { @{ $_->{errs} // [] } } @w, $jv;
ok(!@errs, 'no unexpected errors') or diag(join("\n", @errs[0 .. ($#errs > 20 ? 20 : $#errs)]));

is($ctr->cmd('GET', 'ctr'), $writes, "counter exact: $writes increments, none lost");
cmp_ok($writes, '>=', $ROUNDS, "all $ROUNDS rounds done") unless @fatal;
cmp_ok(($n{cancel_acquiring} // 0) + ($n{cancel_working} // 0), '>', 0, 'sessions were cancelled');
cmp_ok(scalar(grep { /^terminate_/ } keys %n), '>', 0, 'sessions were terminated');
cmp_ok($n{java_acquired} // 0, '>', 0, 'the Redisson client took part');

$_->{s}->close for @w;
until_ok(30, 'redis_locks empty after all sessions ended', sub {
	$obs->query('SELECT count(*) FROM redis_locks') == 0 });
until_ok(30, 'no lock key left in Redis', sub {
	FakeRedisson::Conn->new(port => $redis->port)->cmd('EXISTS', $LOCK) == 0 });
my $st = stats($obs);
diag("stats: " . join(', ', map { "$_=$st->{$_}" } sort keys %$st));
is($st->{lost_locks}, 0, 'no lock was lost');
no_crash_ok($node, 'churn');
$node->stop;
done_testing();
