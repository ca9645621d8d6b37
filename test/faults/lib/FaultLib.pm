# FaultLib.pm — helpers of test/faults/t/*.pl on top of test/lib/RedisLockTest.pm.
# Everything waits on observable state, bounded.
package FaultLib;
use strict;
use warnings;
use Exporter 'import';
use Time::HiRes qw(time);
use Test::More;
use RedisLockTest ();
use FakeRedisson;

our @EXPORT_OK = qw(until_ok slurp no_crash_ok stats timed_call rconn);

sub until_ok
{
	my ($t, $desc, $pred) = @_;
	return ok(RedisLockTest::wait_until($t, $desc, $pred), $desc);
}

# The shared test library's helpers, under the names these tests use.
*slurp = \&RedisLockTest::slurp;
*no_crash_ok = \&RedisLockTest::no_crash_ok;
*stats = \&RedisLockTest::lock_stats;
*rconn = \&FakeRedisson::conn_to;

# Runs $sql asynchronously in $s and returns (value, err, sqlstate, seconds).
# A call still running after $hard seconds is cancelled and reported with
# sqlstate 'HANG' (the caller fails on it).
sub timed_call
{
	my ($s, $sql, $hard) = @_;
	$hard //= 60;
	my $t0 = time();
	$s->start($sql);
	my ($v, $err, $st) = $s->finish($hard);
	my $dt = time() - $t0;
	if (defined $st && $st eq 'TIMEOUT')
	{
		$s->cancel(30);
		return (undef, "hang: no answer within ${hard}s: $sql", 'HANG', $dt);
	}
	return ($v, $err, $st, $dt);
}

1;
