# 395_single_user.pl — redislock in a single-user backend (postgres
# --single, for maintenance): a fixed-lease lock is taken and released
# (no postmaster to watch: waits must not ask for it) and given back when
# the backend exits, and a lock without a
# lease is refused with 55000, as no watchdog runs there to renew it.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use Test::More;
use IPC::Run;

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('single', $redis);
my $rc    = FakeRedisson::Conn->new(port => $redis->port);
$node->stop;

sub single
{
	my ($sql) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'postgres', '--single', '-D', $node->data_dir, 'postgres' ],
		\$sql, \$out, \$err, IPC::Run::timeout(120));
	return ($out, $err);
}

my ($out, $err) = single("SELECT redis_lock_acquire('su:a', '0', '1 min') AS a, "
	  . "(SELECT count(*) FROM redis_locks WHERE name = 'su:a') AS shown;\n");
like($out, qr/a = "t"/, 'a fixed-lease lock is taken in single-user mode') or diag($err);
like($out, qr/shown = "1"/, 'redis_locks shows it');
is($rc->cmd('EXISTS', 'su:a'), 0, 'released in Redis when the backend exits');

($out, $err) = single("SELECT redis_lock_acquire('su:b', '0', '1 min') AS b, redis_lock_release('su:b') AS r;\n");
like($out, qr/b = "t"/, 'acquire again in a new single-user backend');
like($out, qr/r = "t"/, 'and release');
is($rc->cmd('EXISTS', 'su:b'), 0, 'released in Redis');

($out, $err) = single("SELECT redis_lock_acquire('su:c');\n");
like($err, qr/ERROR:\s+a Redis lock without a lease needs the redislock watchdog/,
	'a lock without a lease is refused in single-user mode');
like($err, qr/single-user mode/, '... saying why');
is($rc->cmd('EXISTS', 'su:c'), 0, '... and nothing reached Redis');

done_testing();
