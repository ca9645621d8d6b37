# 520_redisson_real_session_end.pl — a holder that goes away without
# unlocking, across the real Redisson client (every version in
# @RealRedisson::VERSIONS) and SQL sessions on one lock:
#   jvm-kill     a Java holder on Redisson's watchdog (lockWatchdogTimeout
#                3 s here) whose JVM is killed (SIGKILL): nothing unlocks, so
#                a SQL waiter gets the lock when the lease Redis holds runs
#                out, within the watchdog timeout of the kill; the bound
#                ($T) is far below the SQL waiter's own wait (10 min);
#   terminated   a SQL session holding the lock (session lock, 10-minute
#                lease) is terminated (pg_terminate_backend): the session's
#                cleanup releases it and publishes the unlock message, so a
#                Java waiter wakes at once (only that message can explain a
#                wake within $T: the lease is 10 min);
#   disconnect   the same for a client that disconnects in the middle of a
#                transaction holding a transaction lock.
# One PostgreSQL node and Redis for the file; per version one JVM that waits
# and one that is killed.  Takes about 45 s for the eight versions.
# The drivers are built by test/redisson-java/build.sh (see its README).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use RealRedisson;
use FakeRedisson;
use Test::More;
use Time::HiRes qw(time);

my $T        = 30;         # bound for a wake; far below every lease and wait
my $LONG     = 600_000;    # 10-minute leases, ms
my $WATCHDOG = 3000;       # the killed JVM's lockWatchdogTimeout, ms

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('real_end', $redis);
my $rc    = FakeRedisson::Conn->new(port => $redis->port);
my $obs   = RedisLockTest::observer($node);
sub numsub { $rc->cmd('PUBSUB', 'NUMSUB', $_[0])->[1] }

for my $v (RealRedisson::usable_versions())
{
	my $waiter = RealRedisson->new(version => $v, port => $redis->port);

	subtest "Redisson $v: jvm-kill" => sub {
		my $name = "end:$v:kill";
		my $l    = sql_literal($name);
		my $j = RealRedisson->new(version => $v, port => $redis->port, options => ["watchdog=$WATCHDOG"]);
		is($j->run('h', 'lock', 'plain', $name), 'null', 'Java holds on the watchdog');
		my $jo = $j->owner('h');
		is($rc->cmd('HGET', $name, $jo), '1', 'the hash holds the Java owner');
		my $s = RedisLockTest::Session->new($node);
		$s->start("SELECT redis_lock_acquire($l, '10 min')");
		waits_ok($s, 'SQL waiter');
		until_ok('redis_lock_waits names the Java owner', sub {
			($obs->query("SELECT holders[1] FROM redis_lock_waits WHERE pid = " . $s->pid) // '') eq $jo });
		ok(!$s->is_done, 'the SQL waiter still waits while the Java watchdog renews');
		my $killed = time();
		$j->kill;
		my ($val, $err) = $s->finish($T);
		is($val, 't', "the SQL waiter got the lock within $T s of the kill") or diag($err);
		note(sprintf('Redisson %s: the SQL waiter got it %.1f s after the kill (lockWatchdogTimeout %d ms)',
			$v, time() - $killed, $WATCHDOG));
		is($rc->cmd('HGET', $name, $s->query('SELECT redis_lock_owner_id()')), '1', 'the hash holds the SQL session');
		is($s->query("SELECT redis_lock_release($l)"), 't', 'SQL releases');
		$s->close;
	};

	for my $how ('terminated', 'disconnect')
	{
		subtest "Redisson $v: $how" => sub {
			my $name = "end:$v:$how";
			my $l    = sql_literal($name);
			my $s    = RedisLockTest::Session->new($node);
			if ($how eq 'terminated')
			{
				is($s->query("SELECT redis_lock_acquire($l, '0', '10 min')"), 't', 'SQL holds (session lock, 10 min lease)');
			}
			else
			{
				$s->query('BEGIN');
				is($s->query("SELECT redis_xact_lock_acquire($l, '0', '10 min')"), 't',
					'SQL holds (transaction lock, 10 min lease) in an open transaction');
			}
			my $chan = FakeRedisson::channel($name);
			until_ok("nobody subscribed to $chan yet", sub { numsub($chan) == 0 });
			$waiter->start('w', "w-$how", 'lock', 'plain', $name, $LONG);
			until_ok("the Java waiter subscribed to $chan", sub { numsub($chan) >= 1 });
			is($waiter->poll('w'), undef, 'the Java waiter still waits');
			my $gone = time();
			if ($how eq 'terminated')
			{
				ok($s->terminate, 'the SQL session is terminated');
			}
			else
			{
				my $pid = $s->pid;
				$s->close;
				until_ok('the SQL backend has ended', sub {
					!defined $obs->query("SELECT 1 FROM pg_stat_activity WHERE pid = $pid") });
			}
			my ($st, $r) = $waiter->result('w', $T);
			is($st, 'ok', "the Java waiter woke within $T s of the session's end") or diag($r // 'no result');
			note(sprintf('Redisson %s: the Java waiter got it %.2f s after %s', $v, time() - $gone,
				$how eq 'terminated' ? 'the SQL session was terminated' : 'the SQL client disconnected'));
			is($rc->cmd('HGET', $name, $waiter->owner("w-$how")), '1', 'the hash holds the Java waiter');
			is($waiter->run("w-$how", 'unlock', 'plain', $name), 'null', 'Java unlocks');
			is($rc->cmd('EXISTS', $name), 0, 'lock gone');
		};
	}
	$waiter->quit;
}

no_crash_ok($node, 'real_end');
$node->stop;
done_testing();
