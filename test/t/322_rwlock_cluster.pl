# 322_rwlock_cluster.pl — read-write locks on a Redis Cluster: every key of a
# lock (hash, rwlock_timeout keys, writer mark, fencing counter) lives on the
# master serving the name's slot; waiters are woken by sharded pub/sub on
# redisson_rwlock:{name}, also when a Redisson client (SSUBSCRIBE, as its
# cluster mode with Redis 7) waits for a SQL writer; the watchdog renews
# read holds there.
#
# The Redisson client is the real one (RealRedisson: test/redisson-java's
# driver, the newest version in @RealRedisson::VERSIONS, which shards its
# pub/sub on a Redis 7 cluster by default); 505 covers every version, with
# plain locks.  FakeRedisson serves only as key and channel names.
# Takes about 20 s (one JVM start).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use RealRedisson;
use FakeRedisson;    # only its key and channel names
use Test::More;

my $T = 60;
my $cl = RedisLockTest::Cluster->new(masters => 3, replicas => 0);
my $node = RedisLockTest::node('rw_cluster', undef,
	'redislock.cluster_nodes' => $cl->seeds,
	'redislock.watchdog_timeout' => '2s',
	'redislock.command_timeout' => '20s');
my ($a, $b) = map { RedisLockTest::Session->new($node) } 1 .. 2;
my ($a_id, $b_id) = map { $_->query('SELECT redis_lock_owner_id()') } $a, $b;
my $obs = RedisLockTest::observer($node);

# names on all three masters
my %by_master;
for my $i (1 .. 40)
{
	my $port = $cl->node_for_key("crw:$i")->port;
	$by_master{$port} //= "crw:$i";
}
my @names = values %by_master;
is(scalar(@names), 3, 'one name per master');

for my $n (@names)
{
	my $m = $cl->node_for_key($n);
	is($a->query("SELECT redis_read_lock_acquire('$n', '0', '10 min')"), 't', "A reads $n");
	is($b->query("SELECT redis_read_lock_acquire('$n', '0', '10 min')"), 't', "B reads $n too");
	is($m->cli('HGET', $n, 'mode'), 'read', "$n: mode read on the master serving its slot");
	is($m->cli('EXISTS', "{$n}:$a_id:rwlock_timeout:1"), 1, "$n: A's timeout key is there too");
	is($a->query("SELECT redis_write_lock_acquire('$n', '0')"), 'f', "$n: A cannot upgrade while B reads");

	$a->start("SELECT redis_write_lock_acquire('$n', NULL, '10 min')");
	waits_ok($a, "writer A on $n");
	until_ok("$n: A's mark on the slot's master", sub { ($m->cli('GET', "redislock_rwlock_writer:{$n}") // '') eq $a_id });
	my $chan = FakeRedisson::rw_channel($n);
	until_ok("$n: A is subscribed with SSUBSCRIBE on the slot's master", sub {
		($cl->cli_for_key($chan, 'PUBSUB', 'SHARDNUMSUB', $chan))[1] == 1 });
	is($b->query("SELECT redis_read_lock_release('$n')"), 't', "$n: B releases its read");
	my ($v, $err) = $a->finish($T);
	is($v, 't', "$n: A upgrades once B is gone (woken by the sharded message)") or diag($err);
	is($m->cli('HGET', $n, "$a_id:write"), '1', "$n: A is the writer");
	cmp_ok($m->cli('GET', FakeRedisson::prefix_name('redisson_lock_token', $n)) // 0, '>=', 1,
		"$n: its fencing counter is on the same master");
	is($a->query("SELECT format('%s|%s', redis_write_lock_release('$n'), redis_read_lock_release('$n'))"), 't|t',
		"$n: A releases both");
	is($m->cli('EXISTS', $n), 0, "$n: gone");
}

# a Redisson client (sharded pub/sub) waits for a SQL writer; A's write
# hold has a 10-minute lease, so Redisson would retry only in 10 minutes:
# only the release's message can let it in within $T
{
	my $n = $names[0];
	my $chan = FakeRedisson::rw_channel($n);
	my ($v) = reverse RealRedisson::versions();
	my $why = RealRedisson::check_build($v);
	ok(!$why, "Redisson $v: driver available") or diag($why);
	my $java = !$why && eval {
		RealRedisson->new(version => $v,
			mode => [ 'cluster', join(',', map { 'redis://127.0.0.1:' . $_->port } $cl->masters) ]);
	};
	ok($java, "Redisson $v: the client starts and connects to the cluster") or diag($@);
	if ($java)
	{
		is($a->query("SELECT redis_write_lock_acquire('$n', '0', '10 min')"), 't', "A writes $n (10 min lease)");
		# the owner id now: once the thread waits, it runs nothing else
		my $jo = $java->owner('r1');
		until_ok("nobody subscribed to $chan yet", sub {
			($cl->cli_for_key($chan, 'PUBSUB', 'SHARDNUMSUB', $chan))[1] == 0 });
		$java->start('r', 'r1', 'lock', 'read', $n, 600_000);
		until_ok('the Redisson reader is subscribed with SSUBSCRIBE on the slot\'s master', sub {
			($cl->cli_for_key($chan, 'PUBSUB', 'SHARDNUMSUB', $chan))[1] == 1 });
		is($java->poll('r'), undef, 'the Redisson reader waits');
		is($a->query("SELECT redis_write_lock_release('$n')"), 't', 'A releases');
		my ($st, $r) = $java->result('r', $T);
		is($st, 'ok', "the Redisson reader gets in within $T s: woken by the sharded message")
		  or diag($r // 'no result');
		if ($st)
		{
			is($cl->node_for_key($n)->cli('HGET', $n, $jo), '1', '... and reads');
			is($java->run('r1', 'unlock', 'read', $n), 'null', 'the Redisson reader unlocks');
			is($cl->node_for_key($n)->cli('EXISTS', $n), 0, "$n: gone");
		}
		$java->quit;
	}
}

# the watchdog renews read holds on their masters
{
	my $n = $names[1];
	is($a->query("SELECT redis_read_lock_acquire('$n')"), 't', "A reads $n under the watchdog (2 s)");
	my $renewals = lock_stats($obs)->{renewals};
	until_ok('renewed three times', sub { lock_stats($obs)->{renewals} >= $renewals + 3 });
	is($cl->node_for_key($n)->cli('HEXISTS', $n, $a_id), 1, 'the read hold is still there');
	is($a->query("SELECT state FROM redis_locks WHERE name = '$n'"), 'held', 'and shown held');
	is($a->query("SELECT redis_read_lock_release('$n')"), 't', 'A releases');
}

$_->close for $a, $b;
no_crash_ok($node, 'read-write locks on a cluster');
done_testing();
