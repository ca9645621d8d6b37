# 512_redisson_real_on_lock_lost.pl — redislock.on_lock_lost against the
# real Redisson client, every version in @RealRedisson::VERSIONS: a Java
# forceUnlock() of a lock that SQL sessions hold while running a long
# statement cancels the statement of the session in cancel mode (57014,
# naming the lock) and ends the session in terminate mode (57P01, naming the
# lock, server log); a Java thread then takes the lock at once.  (135 covers
# every mode and way to lose a lock with our own transcription of Redisson's
# forceUnlock script.)
# Runs on the host only, as 500 does (test/chroot/ci-cell.sh HOST_ONLY).
# Takes about 15 s for the eight versions (one JVM each, one node).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use RealRedisson;
use Test::More;

my $redis = RedisLockTest::Redis->new;
# verbose: the server log shows the SQLSTATE of the FATAL a client loses
my $node = RedisLockTest::node('real_onlost', $redis, log_error_verbosity => 'verbose');
my $obs  = RedisLockTest::observer($node);

sub running_ok
{
	my ($s, $what) = @_;
	until_ok("$what: pg_sleep runs", sub {
		($obs->query('SELECT wait_event FROM pg_stat_activity WHERE pid = ' . $s->pid) // '') eq 'PgSleep' });
}

for my $v (RealRedisson::usable_versions())
{
	my $j = eval { RealRedisson->new(version => $v, port => $redis->port) };
	if (!$j)
	{
		fail("Redisson $v: the client starts and connects");
		diag($@);
		next;
	}
	for my $mode (qw(cancel terminate))
	{
		my $what = "Redisson $v, $mode";
		my $name = "oll:java:$v:$mode";
		my $s    = RedisLockTest::Session->new($node);
		my $pid  = $s->pid;
		$s->query("SET redislock.watchdog_timeout = '1s'; SET redislock.on_lock_lost = $mode");
		is($s->query('SELECT redis_lock_acquire(' . sql_literal($name) . ')'), 't', "$what: SQL holds $name");
		$s->start('SELECT pg_sleep(600)');
		running_ok($s, $what);
		is($j->run('t1', 'forceUnlock', 'plain', $name), 'true', "$what: Java forceUnlock()");
		my (undef, $err, $st) = $s->finish($RedisLockTest::WAIT);
		if ($mode eq 'cancel')
		{
			is($st, '57014', "$what: the statement is cancelled (57014)") or diag($err);
			told_like($node, $err, $pid, qr/canceling statement because Redis lock "\Q$name\E" was lost/,
				"$what: ... naming the lock");
			is($s->query("SELECT state FROM redis_locks WHERE name = " . sql_literal($name)), 'lost',
				"$what: the session goes on; the lock shows 'lost'");
			$s->try('SELECT redis_lock_release(' . sql_literal($name) . ')');
		}
		else
		{
			like($err // '', qr/FATAL:  terminating connection because Redis lock "\Q$name\E" was lost/,
				"$what: the session is terminated, naming the lock");
			until_ok("$what: ... 57P01 (server log)", sub {
				slurp($node->logfile) =~ /\[$pid\] .*FATAL:  57P01: terminating connection because Redis lock "\Q$name\E" was lost/ });
		}
		is($j->run('t2', 'tryLock', 'plain', $name, 0, 600000), 'true', "$what: a Java thread takes the lock at once");
		$j->run('t2', 'unlock', 'plain', $name);
		$s->close;
	}
	$j->quit;
}

no_crash_ok($node, 'on_lock_lost with the real Redisson client');
done_testing();
