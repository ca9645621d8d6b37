# Our waits are named in pg_stat_activity: on PostgreSQL 17 and later, where
# an extension may register its own wait events (WaitEventExtensionNew),
# wait_event is "RedisLock" (wait_event_type "Extension"); before 17 the
# generic "Extension".  Checked for each kind of wait a session can be seen
# in (a lock, a read-write lock, a semaphore, a latch, a multi-lock) and for
# the watchdog idling between renewals.
use strict;
use warnings;
use Test::More;
use RedisLockTest;

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('wait_event', $redis);
my $obs   = RedisLockTest::Session->new($node);
my $named = $obs->query('SHOW server_version_num') >= 170000 ? 'RedisLock' : 'Extension';
my $a     = RedisLockTest::Session->new($node);
my $b     = RedisLockTest::Session->new($node);

sub wait_event
{
	my ($pid) = @_;
	return $obs->query(
		"SELECT wait_event_type || '/' || wait_event FROM pg_stat_activity WHERE pid = $pid") // '';
}

# [what, A's statement that makes B wait, B's waiting statement, A's release]
my @waits = (
	[ 'lock', "SELECT redis_lock_acquire('we:l')", "SELECT redis_lock_acquire('we:l', '60 s')",
		"SELECT redis_lock_release('we:l')" ],
	[ 'read-write lock', "SELECT redis_read_lock_acquire('we:rw')",
		"SELECT redis_write_lock_acquire('we:rw', '60 s')", "SELECT redis_read_lock_release('we:rw')" ],
	[ 'semaphore', "SELECT redis_semaphore_try_set_permits('we:s', 1) AND redis_semaphore_acquire('we:s')",
		"SELECT redis_semaphore_acquire('we:s', 1, '60 s')", "SELECT redis_semaphore_release('we:s')" ],
	[ 'latch', "SELECT redis_latch_try_set_count('we:c', 1)", "SELECT redis_latch_await('we:c', '60 s')",
		"SELECT redis_latch_count_down('we:c')" ],
	[ 'multi-lock', "SELECT redis_lock_acquire('we:m2')",
		"SELECT redis_lock_acquire_all(ARRAY['we:m1', 'we:m2'], '60 s')", "SELECT redis_lock_release('we:m2')" ],
);
for my $w (@waits)
{
	my ($what, $hold, $wait, $release) = @$w;
	is($a->query($hold), 't', "A: $hold");
	$b->start($wait);
	my $seen = '';
	ok( RedisLockTest::wait_until(30, "B waits for the $what",
			sub { ($seen = wait_event($b->pid)) eq "Extension/$named" }),
		"a wait for a $what shows as Extension/$named")
	  or diag("last seen: $seen");
	my (undef, $err, $state) = $b->cancel;
	is($state, '57014', "... and is cancelled") or diag($err);
	$a->query($release);
}

my $seen = '';
ok( RedisLockTest::wait_until(30, 'the watchdog idles',
		sub {
			$seen = $obs->query(
				"SELECT string_agg(DISTINCT wait_event_type || '/' || wait_event, ',') "
				  . "FROM pg_stat_activity WHERE backend_type = 'redislock watchdog'") // '';
			$seen eq "Extension/$named";
		}),
	"the watchdog's idle wait shows as Extension/$named")
  or diag("last seen: $seen");

no_crash_ok($node, 'wait events');

done_testing();
