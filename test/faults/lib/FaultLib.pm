# FaultLib.pm — small helpers shared by test/faults/t/*.pl (own copy: test/lib
# belongs to another helper).  Everything waits on observable state, bounded.
package FaultLib;
use strict;
use warnings;
use Exporter 'import';
use Time::HiRes qw(time);
use Test::More;
use RedisLockTest;
use FakeRedisson;

our @EXPORT_OK = qw(until_ok slurp no_crash_ok stats timed_call rconn);

sub until_ok
{
	my ($t, $desc, $pred) = @_;
	return ok(RedisLockTest::wait_until($t, $desc, $pred), $desc);
}

sub slurp
{
	my ($f) = @_;
	open my $fh, '<', $f or return '';
	local $/;
	my $s = <$fh>;
	close $fh;
	return $s;
}

# No backend died by a signal, no assertion/PANIC in the node's log.
sub no_crash_ok
{
	my ($node, $what) = @_;
	my @bad = grep { /terminated by signal|TRAP:|PANIC:|server process .* was terminated/ }
	  split /\n/, slurp($node->logfile);
	ok(!@bad, "$what: no crash in the server log") or diag(join("\n", @bad));
}

sub stats
{
	my ($s) = @_;
	return $s->dbh->selectrow_hashref('SELECT * FROM redis_lock_stats')
	  || die "redis_lock_stats: " . $s->dbh->errstr;
}

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

# A (re)connecting direct Redis connection per host:port.
my %conn;
sub rconn
{
	my ($port, $host) = @_;
	$host //= '127.0.0.1';
	my $k = "$host:$port";
	my $c = $conn{$k};
	if ($c && !eval { $c->cmd('PING'); 1 }) { $c->close; undef $c; }
	$conn{$k} = $c //= FakeRedisson::Conn->new(host => $host, port => $port, timeout => 10);
	return $c;
}

1;
