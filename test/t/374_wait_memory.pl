# 374_wait_memory.pl — a waiting session's memory does not grow with the
# length of its wait (issue 21, defect 5). Each deadlock check used to leave
# its walk's and attempt's allocations in the statement's memory (tens of KB
# per check, ~166 MB per hour per waiter at the default 1 s).
#
# For every kind of wait (lock, xact lock, fair lock, read, write, multi-lock,
# semaphore, expiring permit, count-down latch), the waiter checks for a
# deadlock every 10 ms; its memory is logged (pg_log_backend_memory_contexts)
# once N checks have run and again after 4N (counted by
# redis_lock_stats.deadlock_checks; one waiter at a time, so they are its
# own), and the growth over the 3N extra checks must stay below
# $PER_CHECK bytes per check: a count, not a time. Both logs are taken at the
# same point of a round (the sleep that the log request interrupts).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use Test::More;

my $N         = 50;
my $PER_CHECK = 256;

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('waitmem', $redis);
my $obs   = RedisLockTest::observer($node);
my $h     = RedisLockTest::Session->new($node);

sub checks { return $obs->query('SELECT deadlock_checks FROM redis_lock_stats') }

# The Grand total (bytes) of the next memory-context log of pid.
sub logged_total
{
	my ($pid) = @_;
	my $from = -s $node->logfile;
	$obs->query("SELECT pg_log_backend_memory_contexts($pid)");
	my $total;
	RedisLockTest::wait_until(30, "the memory contexts of $pid in the log", sub {
		my $log = RedisLockTest::slurp($node->logfile);
		my $new = substr($log, $from);
		($total) = $new =~ /logging memory contexts of PID $pid.*?Grand total: (\d+) bytes/s;
		return defined $total;
	});
	return $total;
}

# kind => [ what the holder does first, the waiter's statement ]
my @kinds = (
	[ 'lock',      "SELECT redis_lock_acquire('wm:lock')",  "SELECT redis_lock_acquire('wm:lock', '60 s')" ],
	[ 'xact lock', "SELECT redis_lock_acquire('wm:xact')",  "SELECT redis_xact_lock_acquire('wm:xact', '60 s')" ],
	[ 'fair lock', "SELECT redis_lock_acquire('wm:fair', NULL, NULL, true)",
		"SELECT redis_lock_acquire('wm:fair', '60 s', NULL, true)" ],
	[ 'read',  "SELECT redis_write_lock_acquire('wm:rw')", "SELECT redis_read_lock_acquire('wm:rw', '60 s')" ],
	[ 'write', "SELECT redis_read_lock_acquire('wm:wr')",  "SELECT redis_write_lock_acquire('wm:wr', '60 s')" ],
	[ 'multi-lock', "SELECT redis_lock_acquire('wm:m2')",
		"SELECT redis_lock_acquire_all(ARRAY['wm:m1', 'wm:m2'], '60 s')" ],
	[ 'semaphore', "SELECT redis_semaphore_try_set_permits('wm:sem', 1), redis_semaphore_acquire('wm:sem')",
		"SELECT redis_semaphore_acquire('wm:sem', 1, '60 s')" ],
	[ 'expiring permit', "SELECT redis_permit_try_set_permits('wm:permit', 1), redis_permit_acquire('wm:permit')",
		"SELECT redis_permit_acquire('wm:permit', '60 s')" ],
	[ 'latch', "SELECT redis_latch_try_set_count('wm:latch', 1)", "SELECT redis_latch_await('wm:latch', '60 s')" ],
);

for my $k (@kinds)
{
	my ($kind, $hold, $wait) = @$k;
	$h->query($hold);
	my $w = RedisLockTest::Session->new($node);
	$w->query("SET redislock.deadlock_timeout = '10ms'");
	# a lock taken first: the session has its tables before it waits
	$w->query("SELECT redis_lock_acquire('wm:warm'), redis_lock_release('wm:warm')");
	my $c0 = checks();
	$w->start($wait);
	my $pid = $w->pid;

	RedisLockTest::until_ok("$kind: $N deadlock checks", sub { checks() >= $c0 + $N });
	my $m1 = logged_total($pid);
	my $c1 = checks();
	RedisLockTest::until_ok("$kind: " . 4 * $N . " deadlock checks", sub { checks() >= $c1 + 3 * $N });
	my $m2 = logged_total($pid);
	my $c2 = checks();
	my $grown = $m2 - $m1;
	my $per = $grown / ($c2 - $c1);
	ok(defined $m1 && defined $m2 && $per < $PER_CHECK,
		"$kind: memory flat while waiting ($m1 -> $m2 bytes over " . ($c2 - $c1)
		  . " checks, " . sprintf('%.0f', $per) . " bytes per check)");

	my (undef, $err, $state) = $w->cancel;
	is($state, '57014', "$kind: the wait is cancelled") or diag($err);
	$w->close;
	$h->query('SELECT redis_lock_release_all()');
}

RedisLockTest::no_crash_ok($node, 'memory over long waits');
$h->close;
done_testing();
