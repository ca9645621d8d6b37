# Redis Sentinel: the master is found through the sentinels and followed
# across a real failover (1 master, 1 replica, 3 sentinels on loopback).
# With sync_replicas = 1 a lock taken before the master dies is still held
# on the promoted replica, is renewed there, and excludes others.
use strict;
use warnings;
use Test::More;
use RedisLockTest;

my $master = RedisLockTest::Redis->new;
my $replica = RedisLockTest::Redis->new(extra => ['replicaof 127.0.0.1 ' . $master->port]);
until_ok('the replica is in sync', sub {
    $replica->cli('INFO', 'replication') =~ /master_link_status:up/ });

# The sentinels require a password (requirepass, and sentinel-pass among
# themselves): redislock.sentinel_password.
my @sentinels = map {
    RedisLockTest::Redis->new(sentinel => 1, requirepass => 'sent-secret', extra => [
        'sentinel sentinel-pass sent-secret',
        'sentinel monitor m 127.0.0.1 ' . $master->port . ' 2',
        'sentinel down-after-milliseconds m 1000',
        'sentinel failover-timeout m 4000',
        'sentinel parallel-syncs m 1',
    ])
} 1 .. 3;
until_ok('the sentinels see each other and the replica', sub {
    my $m = join ' ', $sentinels[0]->cli('SENTINEL', 'master', 'm');
    $m =~ /num-other-sentinels\s+2\b/ && $m =~ /num-slaves\s+1\b/
});

my $list = join ',', map { '127.0.0.1:' . $_->port } @sentinels;
my $node = RedisLockTest::node('sentinel', $master,
    'redislock.sentinels' => $list,
    'redislock.sentinel_master' => 'm',
    'redislock.sentinel_password' => 'sent-secret',
    'redislock.watchdog_timeout' => '3s',
    'redislock.command_timeout' => '15s');

my $a = RedisLockTest::Session->new($node);
my $c = RedisLockTest::Session->new($node);
my $owner_a = $a->query('SELECT redis_lock_owner_id()');

# found through the sentinels
is($a->query("SELECT redis_lock_acquire('st:a', '0', '1 min')"), 't', 'acquire through the sentinels');
is($master->cli('HEXISTS', 'st:a', $owner_a), 1, 'the lock is on the master');
is($a->query("SELECT redis_lock_release('st:a')"), 't', 'release through the sentinels');

# clear errors when the sentinels cannot help
$c->query("SET redislock.sentinel_master = 'nosuch'");
my (undef, $err, $state) = $c->try("SELECT redis_lock_acquire('st:x', '0', '1 min')");
is($state, '08001', 'unknown master name: 08001');
like($err // '', qr/No sentinel .* could name master "nosuch"/, '... saying no sentinel knows it');
$c->query('RESET redislock.sentinel_master');
$c->query("SET redislock.sentinels = '127.0.0.1:1'");
(undef, $err, $state) = $c->try("SELECT redis_lock_acquire('st:x', '0', '1 min')");
is($state, '08001', 'no sentinel reachable: 08001');
like($err // '', qr/sentinel 127\.0\.0\.1:1/, '... naming the sentinel');
$c->query('RESET redislock.sentinels');

# a wrong sentinel password: a clear error that does not show it
$c->query("SET redislock.sentinel_password = 'wrong-sent'");
(undef, $err, $state) = $c->try("SELECT redis_lock_acquire('st:x', '0')");
is($state, '08001', 'wrong sentinel password: 08001');
like($err // '', qr/refused the password/, '... saying the sentinel refused it');
unlike($err // '', qr/wrong-sent/, '... without showing it');
unlike(slurp($node->logfile), qr/wrong-sent|sent-secret/, 'no sentinel password in the server log');
$c->query('RESET redislock.sentinel_password');

# a bad list is refused when set
(undef, $err, $state) = $c->try("SET redislock.sentinels = '127.0.0.1'");
is($state, '22023', 'a sentinel without a port is refused');

# a lock confirmed by the replica survives the failover
$a->query('SET redislock.sync_replicas = 1');
is($a->query("SELECT redis_lock_acquire('st:held')"), 't', 'A holds st:held (watchdog), confirmed by the replica');
is($replica->cli('HEXISTS', 'st:held', $owner_a), 1, 'the replica has it');

$master->kill9;
my $during = RedisLockTest::Session->new($node);
$during->start("SELECT redis_lock_acquire('st:during', '0', '1 min')");
until_ok('a sentinel names the replica as the new master', sub {
    my @addr = $sentinels[1]->cli('SENTINEL', 'get-master-addr-by-name', 'm');
    ($addr[1] // '') eq $replica->port
});

my ($v, $e2, $s2) = $during->finish(60);
ok((defined $v && $v eq 't') || (($s2 // '') =~ /^08/),
    'a call made during the failover succeeds or fails with a connection error, within the command timeout')
  or diag("value " . ($v // 'undef') . ", error " . ($e2 // ''));

is($c->query("SELECT redis_lock_acquire('st:held', '0')"), 'f', 'after the failover, st:held still excludes others');
is($a->query("SELECT (redis_lock_status('st:held')).held_by_me"), 't', 'A still holds it, on the new master');
my $r0 = lock_stats($a)->{renewals};
until_ok('the watchdog renews on the new master', sub { lock_stats($a)->{renewals} >= $r0 + 2 });
is($replica->cli('HEXISTS', 'st:held', $owner_a), 1, 'the hold is on the new master');
is($a->query("SELECT state FROM redis_locks WHERE name = 'st:held'"), 'held', 'redis_locks: held');

is($c->query("SELECT redis_lock_acquire('st:new', '0', '1 min')"), 't', 'new acquisitions work on the new master');
is($replica->cli('EXISTS', 'st:new'), 1, '... and land there');
is($a->query("SELECT redis_lock_release('st:held')"), 't', 'A releases st:held');
is($replica->cli('EXISTS', 'st:held'), 0, '... gone from the new master');

# --- a failover that loses a lock (no sync_replicas) ---------------------------
# The old master comes back as a replica of the new one. A takes st:lost
# without replica confirmation; the hold is then removed from the replica
# only (made writable for that), which is what a failover before
# replication loses. After the next failover the watchdog finds the hold
# gone: the lock is reported lost and the commit guard stops the commit.
$master->start;
until_ok('the old master is a replica of the new one, in sync', sub {
    $master->cli('INFO', 'replication') =~ /master_link_status:up/ });
$a->query('SET redislock.sync_replicas = 0');
is($a->query("SELECT redis_lock_acquire('st:lost')"), 't', 'A holds st:lost (watchdog), not confirmed by replicas');
until_ok('the replica has it', sub { $master->cli('HEXISTS', 'st:lost', $owner_a) == 1 });
$master->cli('CONFIG', 'SET', 'replica-read-only', 'no');
is($master->cli('DEL', 'st:lost'), 1, 'the hold is taken off the replica only');
$replica->kill9;
until_ok('a sentinel names the old master again', sub {
    my @addr = $sentinels[1]->cli('SENTINEL', 'get-master-addr-by-name', 'm');
    ($addr[1] // '') eq $master->port
});
until_ok('the watchdog reports st:lost as lost', sub {
    $a->query("SELECT state FROM redis_locks WHERE name = 'st:lost'") eq 'lost' });
my (undef, $gerr, $gstate) = $a->try('CREATE TABLE st_guard(i int)');
is($gstate, '55P03', 'the commit guard stops a writing transaction under the lost lock');
is($c->query("SELECT redis_lock_acquire('st:lost', '0', '1 min')"), 't', 'another session can take it now');

# --- the mutual-exclusion counter, through the sentinels -------------------------
my ($count, @errors) = counter_run($node, 'st:ctr', 4, 50);
is(scalar(@errors), 0, 'counter run: no errors') or diag(join("\n", @errors));
is($count, 200, 'the counter is exact');

no_crash_ok($node, 'sentinel');

done_testing();
