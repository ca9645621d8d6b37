# 312_sentinel_failure_reason.pl — a sentinel setup that fails the same way
# every time is reported the same way every time: its reason and its hint,
# whatever the command timeout.
#
# Behind sentinels a failed connection is tried again every 100 ms until
# redislock.command_timeout (a failover takes a few seconds). The error must
# still say why the sentinels could not be used: with sentinel_tls off
# against TLS sentinels, the reset connection and the sentinel_tls hint;
# with a wrong sentinel password, that the sentinel refused it. The command
# timeouts swept here (100-139 ms) end the retries at every point of the
# 100 ms cycle, the last attempt included.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use Test::More;

my $tls = RedisLockTest::TLS->new;
my $master = RedisLockTest::Redis->new(tls => $tls);
my @sentinels = map {
	RedisLockTest::Redis->new(sentinel => 1, tls => $tls, requirepass => 'sent-secret', extra => [
		'sentinel sentinel-pass sent-secret',
		'sentinel monitor m 127.0.0.1 ' . $master->port . ' 1',
	])
} 1 .. 2;
until_ok('the sentinels see each other', sub {
	join(' ', $sentinels[0]->cli('SENTINEL', 'master', 'm')) =~ /num-other-sentinels\s+1\b/ });

my $node = RedisLockTest::node('sentinel_reason', undef,
	'redislock.tls_ca_file' => $tls->ca_file,
	'redislock.url' => 'rediss://ignored',
	'redislock.sentinels' => join(',', map { '127.0.0.1:' . $_->port } @sentinels),
	'redislock.sentinel_master' => 'm',
	'redislock.sentinel_password' => 'sent-secret',
	'redislock.sentinel_tls' => 'on',
	'redislock.connect_timeout' => '1s');
my $s = RedisLockTest::Session->new($node);
is($s->query("SELECT redis_lock_acquire('sf:ok', '0', '1 min')"), 't', 'the sentinels work when set right');
is($s->query("SELECT redis_lock_release('sf:ok')"), 't', '... and release');

# Calls the acquisition 80 times over the swept command timeouts; returns
# the errors that do not match $want (SQLSTATE 08001 and the pattern).
my $n = 0;
sub sweep
{
	my ($want) = @_;
	my @bad;
	for my $ms (map { ($_) x 2 } 100 .. 139)
	{
		$s->query("SET redislock.command_timeout = '${ms}ms'");
		my (undef, $err, $st) = $s->try("SELECT redis_lock_acquire('sf:" . $n++ . "', '0', '1 min')");
		(my $e = $err // '') =~ s/\n/ | /g;
		push @bad, "command_timeout ${ms}ms: [" . ($st // 'no error') . "] $e"
		  unless ($st // '') eq '08001' && ($err // '') =~ $want;
	}
	$s->query('RESET redislock.command_timeout');
	return @bad;
}

$s->query('SET redislock.sentinel_tls = off');
my @bad = sweep(qr/could name master "m": sentinel 127\.0\.0\.1:\d+: .*Connection reset by peer.*HINT:.*set redislock\.sentinel_tls to on/s);
is(scalar(@bad), 0, 'sentinel_tls off against TLS sentinels: 80 of 80 calls give the reset and the sentinel_tls hint')
  or diag(join("\n", scalar(@bad) . ' did not, e.g.:', @bad[0 .. ($#bad < 2 ? $#bad : 2)]));
$s->query('RESET redislock.sentinel_tls');

$s->query("SET redislock.sentinel_password = 'wrong-sent'");
@bad = sweep(qr/could name master "m": sentinel 127\.0\.0\.1:\d+ refused the password/);
is(scalar(@bad), 0, 'a wrong sentinel password: 80 of 80 calls say the sentinel refused it')
  or diag(join("\n", scalar(@bad) . ' did not, e.g.:', @bad[0 .. ($#bad < 2 ? $#bad : 2)]));

# A refused password stays refused: one call asks each sentinel once, not
# again every 100 ms until the command timeout.
sub connections { my $n = 0; $n += ($_->cli('INFO', 'stats') =~ /total_connections_received:(\d+)/)[0] for @sentinels; $n }
$s->query("SET redislock.command_timeout = '3s'");
my $before = connections();
my (undef, $err, $st) = $s->try("SELECT redis_lock_acquire('sf:once', '0', '1 min')");
my $asked = connections() - $before;
is($st, '08001', 'a refused sentinel password is 08001');
like($err, qr/HINT:\s+Check redislock\.sentinel_password/, '... with a hint naming sentinel_password');
cmp_ok($asked, '<=', 2 * @sentinels, "... and is not tried again (the sentinels got $asked connections)");
$s->query('RESET redislock.command_timeout');
$s->query('RESET redislock.sentinel_password');

is($s->query("SELECT redis_lock_acquire('sf:ok', '0', '1 min')"), 't', 'set right again, the sentinels work');
$s->close;
no_crash_ok($node, 'sentinel failure reason');

done_testing();
