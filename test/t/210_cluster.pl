# Redis Cluster (3 masters + 3 replicas made by redis-cli --cluster create):
# locks spread over many slots, each on the master serving it; sharded and
# classic pub/sub, also with the real Redisson client on the same cluster
# (RealRedisson, the newest version only, as in 405: wake-ups both ways,
# sharded with its defaults and classic with shardedSubscriptionMode OFF;
# a missing driver fails the test); a slot migrated while a lock on it is
# held and waited for (ASK during, MOVED after); clear errors; the
# mutual-exclusion counter; a master failover.
# Takes about 25 s (two JVM starts among them).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use RealRedisson;
use FakeRedisson;
use Test::More;

my $cl = RedisLockTest::Cluster->new(masters => 3, replicas => 1);
my @seeds = $cl->masters;
my $node = RedisLockTest::node('cluster', undef,
	'redislock.cluster_nodes' => $cl->seeds,
	'redislock.watchdog_timeout' => '3s',
	'redislock.command_timeout' => '20s',
	'max_connections' => '30');

my $a = RedisLockTest::Session->new($node);
my $b = RedisLockTest::Session->new($node);
my $owner_a = $a->query('SELECT redis_lock_owner_id()');
my $LONG = 60000;

# --- locks spread over the slots, each on the master that serves it -----------
# (from one seed node: the rest of the cluster is found through it)
$a->query("SET redislock.cluster_nodes = '127.0.0.1:" . $seeds[0]->port . "'");
is($a->query("SELECT count(*) FILTER (WHERE redis_lock_acquire('cl:' || i, '0', '1 min')) FROM generate_series(1, 60) i"),
	60, '60 locks acquired from one seed node');
my (%on, $misplaced);
for my $i (1 .. 60)
{
	my $m = $cl->node_for_key("cl:$i");
	$on{ $m->port }++;
	$misplaced++ unless $m->cli('HEXISTS', "cl:$i", $owner_a) == 1;
}
is(scalar(keys %on), 3, 'they live on all 3 masters');
is($misplaced // 0, 0, 'each on the master serving its slot');
is($a->query("SELECT mode FROM redis_lock_status('cl:7')"), 'cluster', 'status names the mode');
is($a->query('SELECT mode FROM redis_lock_stats'), 'cluster', 'redis_lock_stats names the mode');
is($a->query("SELECT held_by_me FROM redis_lock_status('cl:7')"), 't', 'status finds the lock');
is($a->query('SELECT redis_lock_release_all()'), 60, 'all released, one pipeline per node');
$a->query('RESET redislock.cluster_nodes');
is(scalar(grep { $cl->node_for_key("cl:$_")->cli('EXISTS', "cl:$_") } 1 .. 60), 0, 'none left');

# --- waits: sharded pub/sub on the slot's master --------------------------------
my $chan = FakeRedisson::channel('cl:w');
is($a->query("SELECT redis_lock_acquire('cl:w', '0', '1 min')"), 't', 'A holds cl:w (1 min lease)');
$b->start("SELECT redis_lock_acquire('cl:w', '30 s', '1 min')");
waits_ok($b, 'B waits for cl:w');
until_ok('B is subscribed with SSUBSCRIBE on the slot master', sub {
	($cl->cli_for_key($chan, 'PUBSUB', 'SHARDNUMSUB', $chan))[1] == 1 });
is($a->query("SELECT redis_lock_release('cl:w')"), 't', 'A releases');
my ($v) = $b->finish(30);
is($v, 't', 'B is woken by the sharded unlock message and gets cl:w');
is($b->query("SELECT redis_lock_release('cl:w')"), 't', 'B releases');

# --- a Redisson client on the same cluster: sharded pub/sub, then classic ---
# The real client (RealRedisson, the newest version in @RealRedisson::VERSIONS,
# as in 405): with its defaults (sharded on a Redis 7 cluster) against
# cluster_pubsub = sharded, then with shardedSubscriptionMode OFF against
# classic.  505 runs the same wake-ups for every version.
my $T = 60;                  # bound for a wake, far below the 10-minute leases
my $JAVA_LONG = 600_000;
my ($JAVA_VERSION) = reverse RealRedisson::versions();
my $urls = join(',', map { 'redis://127.0.0.1:' . $_->port } $cl->masters);


# A Redisson waiter woken by our release, then a SQL waiter by the Redisson
# unlock (in this order: our listener's subscription outlives its wait by
# seconds, Redisson drops its own as soon as it has the lock); each waiter
# seen subscribed the $kind way, and only that way, before the other side
# lets go.
sub java_cluster_wakes
{
	my ($j, $kind, $name) = @_;
	my $l = sql_literal($name);
	my $chan = FakeRedisson::channel($name);
	my $subs = sub { my ($c, $s) = $cl->subscribers($chan); $kind eq 'sharded' ? "$c/$s" eq '0/1' : "$c/$s" eq '1/0' };
	is($a->query("SELECT redis_lock_acquire($l, '0', '10 min')"), 't', "$kind: A holds $name");
	$j->start('w', 'w', 'lock', 'plain', $name, $JAVA_LONG);
	until_ok("$kind: the Redisson waiter is subscribed, $kind only", $subs);
	is($j->poll('w'), undef, "$kind: Redisson is excluded by our lock");
	is($a->query("SELECT redis_lock_release($l)"), 't', "$kind: we release");
	my ($st, $r) = $j->result('w', $T);
	is($st, 'ok', "$kind: our unlock message wakes the Redisson waiter") or diag($r // 'no result');
	is($a->query("SELECT redis_lock_acquire($l, '0', '10 min')"), 'f', "$kind: we are excluded by it");
	until_ok("$kind: nobody subscribed to $chan any more", sub { my ($c, $s) = $cl->subscribers($chan); $c + $s == 0 });
	$a->start("SELECT redis_lock_acquire($l, '$T s', '10 min')");
	waits_ok($a, "$kind: A waits for the Redisson lock");
	until_ok("$kind: A is subscribed, $kind only", $subs);
	is($j->run('w', 'unlock', 'plain', $name), 'null', "$kind: Redisson unlocks");
	my ($v, $err) = $a->finish($T);
	is($v, 't', "$kind: its unlock message wakes our waiter") or diag($err);
	is($a->query("SELECT redis_lock_release($l)"), 't', "$kind: we release");
}

my $java = RealRedisson->new(version => $JAVA_VERSION, mode => [ 'cluster', $urls ]);
note("Redisson $JAVA_VERSION: client id " . $java->id . ', log ' . $java->logfile);
java_cluster_wakes($java, 'sharded', 'cl:j');
$java->quit;

# classic pub/sub, for Redisson clients with shardedSubscriptionMode OFF
$a->query("SET redislock.cluster_pubsub = 'classic'");
$b->query("SET redislock.cluster_pubsub = 'classic'");
is($a->query("SELECT redis_lock_acquire('cl:c', '0', '1 min')"), 't', 'classic: A holds cl:c');
$b->start("SELECT redis_lock_acquire('cl:c', '30 s', '1 min')");
waits_ok($b, 'classic: B waits');
until_ok('classic: B is subscribed classically', sub { ($cl->subscribers(FakeRedisson::channel('cl:c')))[0] == 1 });
is($a->query("SELECT redis_lock_release('cl:c')"), 't', 'classic: A releases (PUBLISH)');
($v) = $b->finish(30);
is($v, 't', 'classic: B is woken');
$b->query("SELECT redis_lock_release('cl:c')");
my $classic = RealRedisson->new(version => $JAVA_VERSION, mode => [ 'cluster', $urls ],
	options => [ 'sharded=off' ]);
java_cluster_wakes($classic, 'classic', 'cl:jc');
$classic->quit;
$a->query('RESET redislock.cluster_pubsub');
$b->query('RESET redislock.cluster_pubsub');

# --- a slot migrated while locks on it are held and waited for --------------
# cl:m (fixed lease) has a waiter; a{cl:m}, same slot, is renewed by the
# watchdog. Its key is moved first, so while the slot is migrating the
# source answers ASK for it and renewals must follow to the target; after
# the migration the source answers MOVED.
my $slot = $cl->slot_of('cl:m');
my $from = $cl->owner_of_slot($slot);
my ($to) = grep { $_->port != $from->port } $cl->masters;
is($a->query("SELECT redis_lock_acquire('cl:m', '0', '1 min')"), 't', 'A holds cl:m');
is($a->query("SELECT redis_lock_acquire('a{cl:m}')"), 't', 'A holds a{cl:m} in watchdog mode (3 s lease)');
$b->start("SELECT redis_lock_acquire('cl:m', '60 s', '1 min')");
waits_ok($b, 'B waits for cl:m');
$cl->begin_migration($slot, $to);
is($from->cli('MIGRATE', '127.0.0.1', $to->port, 'a{cl:m}', 0, 5000), 'OK', 'a{cl:m} is moved ahead of the slot');
like(scalar $from->cli('HEXISTS', 'a{cl:m}', $owner_a), qr/^ASK /, 'the source now answers ASK for it');
my $r0 = lock_stats($a)->{renewals};
until_ok('the watchdog renews a{cl:m} through ASK, past its lease',
	sub { lock_stats($a)->{renewals} >= $r0 + 4 });
is($to->cli('CLUSTER', 'COUNTKEYSINSLOT', $slot), 1,
	'the hold is alive on the importing master, past its 3 s lease');
is($a->query("SELECT state FROM redis_locks WHERE name = 'a{cl:m}'"), 'held', 'and not lost');
$cl->finish_migration($slot, $to);
my $c = RedisLockTest::Session->new($node);
is($to->cli('HEXISTS', 'cl:m', $owner_a), 1, 'after the migration cl:m lives on the new master');
is($c->query("SELECT redis_lock_acquire('cl:m', '0', '1 min')"), 'f', 'and still excludes others (MOVED followed)');
until_ok('B resubscribed on the new master', sub {
	($to->cli('PUBSUB', 'SHARDNUMSUB', FakeRedisson::channel('cl:m')))[1] == 1 });
is($a->query("SELECT redis_lock_release('cl:m')"), 't', 'A releases on the new master');
($v) = $b->finish(60);
is($v, 't', 'B gets cl:m, woken on the new master');
is($b->query("SELECT redis_lock_release('cl:m')"), 't', 'B releases');
is($a->query("SELECT redis_lock_release('a{cl:m}')"), 't', 'A releases a{cl:m}');

# --- clear errors -------------------------------------------------------------
my $plain = RedisLockTest::Redis->new;
$c->query("SET redislock.cluster_nodes = '127.0.0.1:" . $plain->port . "'");
my (undef, $err, $state) = $c->try("SELECT redis_lock_acquire('cl:e', '0', '1 min')");
is($state, '08006', 'a seed that is not a cluster node: 08006');
like($err // '', qr/cannot serve as a cluster node/, '... saying so');
$c->query("SET redislock.cluster_nodes = '127.0.0.1:1'");
(undef, $err, $state) = $c->try("SELECT redis_lock_acquire('cl:e', '0', '1 min')");
like($state // '', qr/^08/, 'no seed reachable: a connection error');
like($err // '', qr/No node of the Redis cluster answered/, '... saying no node answered');
$c->query('RESET redislock.cluster_nodes');
(undef, $err, $state) = $c->try("SET redislock.redlock_nodes = '127.0.0.1:1,127.0.0.1:2,127.0.0.1:3'");
(undef, $err, $state) = $c->try("SELECT redis_lock_acquire('cl:e', '0', '1 min')");
is($state, '22023', 'cluster and redlock nodes both set: 22023');
$c->query('RESET redislock.redlock_nodes');

# --- the mutual-exclusion counter ------------------------------------------------
my ($count, @errors) = counter_run($node, 'cl:ctr', 4, 60);
is(scalar(@errors), 0, 'counter run: no errors') or diag(join("\n", @errors));
is($count, 240, 'the counter is exact');

# --- a master fails over while a lock on it is held ---------------------------
$a->query('SET redislock.sync_replicas = 1');
is($a->query("SELECT redis_lock_acquire('cl:f')"), 't', 'A holds cl:f (watchdog), confirmed by the replica');
my $master = $cl->node_for_key('cl:f');
$r0 = lock_stats($a)->{renewals};
my $promoted = $cl->kill9_master($master);
is($promoted->cli('HEXISTS', 'cl:f', $owner_a), 1, 'the promoted replica has the hold');
is($b->query("SELECT redis_lock_acquire('cl:f', '0', '1 min')"), 'f', 'after the failover cl:f still excludes others');
is($a->query("SELECT held_by_me FROM redis_lock_status('cl:f')"), 't', 'A still holds it, on the new master');
until_ok('the watchdog renews on the new master', sub { lock_stats($a)->{renewals} > $r0 + 2 });
is($a->query("SELECT state FROM redis_locks WHERE name = 'cl:f'"), 'held', 'and it is not lost');
is($a->query("SELECT redis_lock_release('cl:f')"), 't', 'A releases');
is($b->query("SELECT redis_lock_acquire('cl:f', '0', '1 min')"), 't', 'then B acquires');

# --- a slot no master serves: a clear error within the command timeout -------
my $gone = $cl->slot_of('cl:gone');
my $owner = $cl->owner_of_slot($gone);
is($owner->cli('CLUSTER', 'DELSLOTS', $gone), 'OK', "slot $gone is taken from its master");
$c->query("SET redislock.command_timeout = '2s'");
(undef, $err, $state) = $c->try("SELECT redis_lock_acquire('cl:gone', '0', '1 min')");
is($state, '08006', 'an unserved slot: 08006');
like($err // '', qr/Hash slot $gone (is not served by any node|.*CLUSTERDOWN)/, '... naming the slot')
  or diag($err);

no_crash_ok($node, 'cluster');
done_testing();
