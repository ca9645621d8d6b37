# 376_lease_from_send.pl — the lease of an acquisition runs from when its
# request was sent, not from when the reply came. With
# redislock.sync_replicas the reply comes only once a replica has the write
# (WAIT), which may be long after Redis started the lease; a session that
# counted the lease from the reply would trust it (local re-entry, the
# watchdog's schedule) after Redis had let it run out.
#
# The replica reaches the master through a proxy (test/lib/DelayProxy.pm)
# that holds the replication stream back, so each acquisition below waits
# in WAIT with its hold already in Redis. The test takes a timestamp then
# (between send and reply) and, once the stream is let go and the call has
# returned, checks that redis_locks shows the hold acquired and renewed
# before that timestamp. One case per primitive that holds.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use DelayProxy;
use FakeRedisson;
use Test::More;

my $T = 60;

sub info_field
{
	my ($r, $section, $field) = @_;
	my $info = redis_cmd($r, 'INFO', $section);
	return $info =~ /^\Q$field\E:(\S+)/m ? $1 : undef;
}

my $master  = RedisLockTest::Redis->new;
my $proxy   = DelayProxy->spawn(0, $master->port);
my $replica = RedisLockTest::Redis->new(
	extra => [ 'replicaof 127.0.0.1 ' . $proxy->port($master->port) ]);
until_ok('the replica is linked through the proxy', sub {
	(info_field($replica, 'replication', 'master_link_status') // '') eq 'up';
}, $T);

my $node = RedisLockTest::node('lease_from_send', $master,
	'redislock.command_timeout' => '40s');    # WAIT waits up to 30 s
my $obs = RedisLockTest::observer($node);
my $s = RedisLockTest::Session->new($node);
$s->query('SET redislock.sync_replicas = 1');
$s->query("SELECT redis_semaphore_try_set_permits('ls:sem', 1)");
$s->query("SELECT redis_permit_try_set_permits('ls:permit', 1)");

# name shown in redis_locks, the call, the key that shows the hold in Redis,
# how to give it back
my @cases = (
	[ 'ls:lock', "SELECT redis_lock_acquire('ls:lock')", 'ls:lock',
		"SELECT redis_lock_release('ls:lock')" ],
	[ 'ls:fixed', "SELECT redis_lock_acquire('ls:fixed', '0', '10 min')", 'ls:fixed',
		"SELECT redis_lock_release('ls:fixed')" ],
	[ 'ls:read', "SELECT redis_read_lock_acquire('ls:read')", 'ls:read',
		"SELECT redis_read_lock_release('ls:read')" ],
	[ 'ls:write', "SELECT redis_write_lock_acquire('ls:write')", 'ls:write',
		"SELECT redis_write_lock_release('ls:write')" ],
	[ 'ls:sem', "SELECT redis_semaphore_acquire('ls:sem', 1)",
		'redislock_semaphore_holders:{ls:sem}', "SELECT redis_semaphore_release('ls:sem')" ],
	[ 'ls:permit', "SELECT redis_permit_acquire('ls:permit') IS NOT NULL", '{ls:permit}:timeout',
		"SELECT redis_permit_release('ls:permit', owner_id) FROM redis_locks WHERE name = 'ls:permit'" ],
	[ 'ls:multi1', "SELECT redis_lock_acquire_all(ARRAY['ls:multi1', 'ls:multi2'])", 'ls:multi1',
		"SELECT redis_lock_release('ls:multi1') AND redis_lock_release('ls:multi2')" ],
);

for my $c (@cases)
{
	my ($name, $call, $key, $release) = @$c;
	my $before = $obs->query('SELECT clock_timestamp()');
	$proxy->cmd('stall down');
	$s->start($call);
	until_ok("$name: the acquisition has run on the master", sub {
		redis_cmd($master, 'EXISTS', $key) eq '1' }, $T);
	my $mid = $obs->query('SELECT clock_timestamp()');
	ok(!$s->is_done, "$name: the call still waits for the replica");
	$proxy->cmd('go down');
	my ($v, $err) = $s->finish($T);
	is($v, 't', "$name: acquired once the replica has it") or diag($err);
	is($obs->query("SELECT acquired_at >= '$before' AND acquired_at < '$mid' FROM redis_locks WHERE name = '$name'"),
		't', "$name: acquired_at is when the request was sent, not when WAIT answered");
	is($obs->query("SELECT renewed_at >= '$before' AND renewed_at < '$mid' FROM redis_locks WHERE name = '$name'"),
		't', "$name: the lease (renewed_at) runs from then too");
	is($s->query($release), 't', "$name: released");
}

$proxy->stop;
no_crash_ok($node, 'lease from send');
done_testing();
