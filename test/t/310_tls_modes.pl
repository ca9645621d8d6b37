# 310_tls_modes.pl — TLS in the modes with several servers, every server
# speaking only TLS:
#  - Sentinel: TLS sentinels (redislock.sentinel_tls) naming a TLS master;
#    a waiter woken over TLS; a real failover followed: a call made during it
#    succeeds or fails with a connection error, the lock confirmed by the
#    replica is held and renewed by the watchdog on the promoted one, a
#    waiter there is woken by its release; sentinel_tls off against TLS
#    sentinels is a clear 08001 naming the sentinel (its hint: 312);
#  - Cluster with tls-cluster yes: locks on every master, a sharded wait
#    woken, a slot migration followed, the real Redisson client (RealRedisson,
#    the newest version of @RealRedisson::VERSIONS) as a TLS cluster client
#    excluded and woken both ways; the mutual-exclusion counter;
#  - Redlock over 3 TLS masters: a majority on all three, a waiter, fencing
#    tokens increasing, one master down still a majority (a waiter too), two
#    down a clear 08006, the watchdog restoring a hold on a master restarted
#    empty.
# Takes about 30 s (4 s of it the JVM starting).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;    # only its channel names
use RealRedisson;
use Test::More;

my $T = 60;
my $tls = RedisLockTest::TLS->new;
my %tls_conf = ('redislock.tls_ca_file' => $tls->ca_file, 'redislock.watchdog_timeout' => '3s');

# --- Sentinel over TLS --------------------------------------------------------------
{
	my $master = RedisLockTest::Redis->new(tls => $tls);
	my $replica = RedisLockTest::Redis->new(tls => $tls,
		extra => [ 'replicaof 127.0.0.1 ' . $master->port ]);
	until_ok('the replica is in sync over TLS', sub {
		$replica->cli('INFO', 'replication') =~ /master_link_status:up/ });
	my @sentinels = map {
		RedisLockTest::Redis->new(sentinel => 1, tls => $tls, extra => [
			'sentinel monitor m 127.0.0.1 ' . $master->port . ' 2',
			'sentinel down-after-milliseconds m 1000',
			'sentinel failover-timeout m 4000',
		])
	} 1 .. 3;
	until_ok('the sentinels see each other and the replica', sub {
		my $m = join ' ', $sentinels[0]->cli('SENTINEL', 'master', 'm');
		$m =~ /num-other-sentinels\s+2\b/ && $m =~ /num-slaves\s+1\b/ });

	my $node = RedisLockTest::node('tls_sentinel', undef, %tls_conf,
		'redislock.url' => 'rediss://ignored',
		'redislock.sentinels' => join(',', map { '127.0.0.1:' . $_->port } @sentinels),
		'redislock.sentinel_master' => 'm',
		'redislock.sentinel_tls' => 'on',
		'redislock.command_timeout' => '15s');
	my $a = RedisLockTest::Session->new($node);
	my $b = RedisLockTest::Session->new($node);
	my $owner_a = $a->query('SELECT redis_lock_owner_id()');

	is($a->query("SELECT redis_lock_acquire('ts:a', '0', '10 min')"), 't',
		'a lock through TLS sentinels on the TLS master');
	is($master->cli('HEXISTS', 'ts:a', $owner_a), 1, '... it is on the master');
	$b->start("SELECT redis_lock_acquire('ts:a', '1 min', '1 min')");
	waits_ok($b, 'B');
	is($a->query("SELECT redis_lock_release('ts:a')"), 't', 'A releases');
	my ($v, $err) = $b->finish($T);
	is($v, 't', 'B is woken over TLS and gets the lock') or diag($err);
	is($b->query("SELECT redis_lock_release('ts:a')"), 't', 'B releases');

	my $c = RedisLockTest::Session->new($node);
	$c->query("SET redislock.sentinel_tls = off");
	$c->query("SET redislock.connect_timeout = '1s'");
	$c->query("SET redislock.command_timeout = '1s'");  # retried until then
	my $st;
	(undef, $err, $st) = $c->try("SELECT redis_lock_acquire('ts:x', '0')");
	is($st, '08001', 'sentinel_tls off against TLS sentinels: 08001') or diag($err);
	note("sentinel_tls off: $err");
	like($err // '', qr/No sentinel of redislock\.sentinels could name master "m": sentinel 127\.0\.0\.1:\d+/,
		'... naming a sentinel');
	# the hint (sentinel_tls) is checked in 312: whether it comes depends
	# on when the command timeout ends the retries
	$c->close;

	$a->query('SET redislock.sync_replicas = 1');
	is($a->query("SELECT redis_lock_acquire('ts:held')"), 't',
		'A holds ts:held (watchdog), confirmed by the replica over TLS');
	is($replica->cli('HEXISTS', 'ts:held', $owner_a), 1, '... the replica has it');
	$master->kill9;
	my $during = RedisLockTest::Session->new($node);
	$during->start("SELECT redis_lock_acquire('ts:during', '0', '1 min')");
	until_ok('the sentinels promote the replica', sub {
		(($sentinels[1]->cli('SENTINEL', 'get-master-addr-by-name', 'm'))[1] // '') eq $replica->port }, 60);
	my ($dv, $de, $ds) = $during->finish($T);
	ok((defined $dv && $dv eq 't') || (($ds // '') =~ /^08/),
		'a call made during the failover succeeds or fails with a connection error')
	  or diag('value ' . ($dv // 'undef') . ', error ' . ($de // ''));
	$during->close;
	is($b->query("SELECT redis_lock_acquire('ts:held', '0', '1 min')"), 'f',
		'B is refused ts:held on the new master');
	is($a->query("SELECT (redis_lock_status('ts:held')).held_by_me"), 't', 'A still holds it, on the new master');
	my $r0 = lock_stats($a)->{renewals};
	until_ok('the watchdog renews ts:held on the promoted replica over TLS', sub {
		lock_stats($a)->{renewals} >= $r0 + 2 });
	is($replica->cli('HEXISTS', 'ts:held', $owner_a), 1, '... the hold is there');
	$b->start("SELECT redis_lock_acquire('ts:held', '1 min', '1 min')");
	waits_ok($b, 'B (for ts:held, on the new master)');
	is($a->query("SELECT redis_lock_release('ts:held')"), 't', 'A releases ts:held on the new master');
	($v, $err) = $b->finish($T);
	is($v, 't', 'B is woken over TLS by the new master and gets ts:held') or diag($err);
	is($replica->cli('HEXISTS', 'ts:held', $b->query('SELECT redis_lock_owner_id()')), 1, "... B's hold is there");
	is($b->query("SELECT redis_lock_acquire('ts:new', '0', '1 min')"), 't',
		'new locks work on the new master');
	is($replica->cli('HEXISTS', 'ts:new', $b->query('SELECT redis_lock_owner_id()')), 1,
		'... and are there');
	is($b->query('SELECT redis_lock_release_all()'), 2, 'B releases both');
	is($replica->cli('EXISTS', 'ts:held', 'ts:new'), 0, '... nothing left on the new master');
	$_->close for $a, $b;
	no_crash_ok($node, 'sentinel over TLS');
	$node->stop;
	$_->stop for @sentinels, $replica;
}

# --- Cluster with tls-cluster yes -----------------------------------------------------
{
	my $cl = RedisLockTest::Cluster->new(masters => 3, replicas => 0, tls => $tls);
	my $node = RedisLockTest::node('tls_cluster', undef, %tls_conf,
		'redislock.url' => 'rediss://ignored',
		'redislock.cluster_nodes' => $cl->seeds,
		'redislock.command_timeout' => '20s');
	my $a = RedisLockTest::Session->new($node);
	my $b = RedisLockTest::Session->new($node);
	my $owner_a = $a->query('SELECT redis_lock_owner_id()');

	is($a->query("SELECT count(*) FILTER (WHERE redis_lock_acquire('tc:' || i, '0', '1 min')) FROM generate_series(1, 30) i"),
		30, '30 locks over the TLS cluster');
	my %on = map { $cl->node_for_key("tc:$_")->port => 1 } 1 .. 30;
	is(scalar(keys %on), 3, '... on all 3 masters');
	is(scalar(grep { $cl->node_for_key("tc:$_")->cli('HEXISTS', "tc:$_", $owner_a) == 1 } 1 .. 30), 30,
		'... each on the master serving its slot');
	is($a->query('SELECT redis_lock_release_all()'), 30, 'all released');

	is($a->query("SELECT redis_lock_acquire('tc:w', '0', '10 min')"), 't', 'A holds tc:w');
	$b->start("SELECT redis_lock_acquire('tc:w', '1 min', '1 min')");
	waits_ok($b, 'B (for tc:w)');
	my $chan = FakeRedisson::channel('tc:w');
	until_ok('B is subscribed (SSUBSCRIBE) on the slot master', sub {
		($cl->cli_for_key($chan, 'PUBSUB', 'SHARDNUMSUB', $chan))[1] == 1 });
	is($a->query("SELECT redis_lock_release('tc:w')"), 't', 'A releases');
	my ($v, $err) = $b->finish($T);
	is($v, 't', 'B is woken by the sharded message over TLS') or diag($err);
	is($b->query("SELECT redis_lock_release('tc:w')"), 't', 'B releases');

	my $slot = $cl->slot_of('tc:m');
	is($a->query("SELECT redis_lock_acquire('tc:m', '0', '10 min')"), 't', 'A holds tc:m');
	my ($to) = grep { $_ != $cl->owner_of_slot($slot) } $cl->masters;
	$cl->migrate_slot($slot, $to);
	is($to->cli('HEXISTS', 'tc:m', $owner_a), 1, 'its slot migrated with it');
	is($a->query("SELECT redis_lock_release('tc:m')"), 't', 'A follows MOVED over TLS and releases');
	is($to->cli('EXISTS', 'tc:m'), 0, '... on the new master');

	my ($JAVA_VERSION) = reverse RealRedisson::versions();
	my $LONG = 600000;    # Redisson lease and wait: 10 min, so only a message explains a wake
	my $java = RealRedisson->new(version => $JAVA_VERSION, tls => $tls,
		mode => [ 'cluster', join(',', map { $_->url } $cl->masters) ]);
	is($java->run('j', 'tryLock', 'plain', 'tc:j', 0, $LONG), 'true',
		"the Redisson client ($JAVA_VERSION, a TLS cluster client) locks tc:j");
	is($a->query("SELECT redis_lock_acquire('tc:j', '0')"), 'f', 'A is refused');
	$a->start("SELECT redis_lock_acquire('tc:j', '1 min', '10 min')");
	waits_ok($a, 'A (for the Redisson client)');
	is($java->run('j', 'unlock', 'plain', 'tc:j'), 'null', 'the Redisson client unlocks');
	($v, $err) = $a->finish($T);
	is($v, 't', 'A is woken and gets tc:j') or diag($err);
	is($java->run('j', 'tryLock', 'plain', 'tc:j', 0, $LONG), 'false',
		'the Redisson client is refused while A holds it');
	is($a->query("SELECT redis_lock_release('tc:j')"), 't', 'A releases');

	# a lock no session waited for, so that the client is its channel's only subscriber
	my $kchan = FakeRedisson::channel('tc:k');
	my $subs = sub { ($cl->cli_for_key($kchan, 'PUBSUB', 'SHARDNUMSUB', $kchan))[1] };
	is($a->query("SELECT redis_lock_acquire('tc:k', '0', '10 min')"), 't', 'A holds tc:k');
	is($subs->(), 0, '... nobody is subscribed to its channel');
	$java->start('w', 'j', 'tryLock', 'plain', 'tc:k', $LONG, $LONG);
	until_ok('the Redisson client waits, subscribed (SSUBSCRIBE) over TLS', sub { $subs->() >= 1 });
	is($a->query("SELECT redis_lock_release('tc:k')"), 't', 'A releases tc:k');
	is_deeply([ $java->result('w', $T) ], [ 'ok', 'true' ],
		"the Redisson client is woken by A's release over TLS and gets tc:k");
	is($java->run('j', 'unlock', 'plain', 'tc:k'), 'null', 'the Redisson client unlocks tc:k');
	$java->quit;

	my ($count, @errors) = counter_run($node, 'tc:counter', 4, 30);
	is($count, 120, 'the counter over the TLS cluster: 4 sessions x 30 rounds');
	is_deeply(\@errors, [], '... without errors');
	$_->close for $a, $b;
	no_crash_ok($node, 'cluster over TLS');
	$node->stop;
}

# --- Redlock over TLS ---------------------------------------------------------------
{
	my $rl = RedisLockTest::Redlock->new(n => 3, tls => $tls);
	my $node = RedisLockTest::node('tls_redlock', undef, %tls_conf,
		'redislock.url' => 'rediss://ignored',
		'redislock.redlock_nodes' => $rl->list);
	my $a = RedisLockTest::Session->new($node);
	my $b = RedisLockTest::Session->new($node);

	is($a->query("SELECT redis_lock_acquire('tr:a', '0', '10 min')"), 't', 'A acquires over 3 TLS masters');
	is($rl->holders('tr:a'), 3, '... held on all 3');
	is($a->query("SELECT count(*) FROM redis_lock_nodes('tr:a') WHERE locked AND error IS NULL"), 3,
		'redis_lock_nodes: locked on each master');
	is($b->query("SELECT redis_lock_acquire('tr:a', '0', '1 min')"), 'f', 'B is refused');
	my $t1 = $a->query("SELECT redis_lock_fencing_token('tr:a')");
	$b->start("SELECT redis_lock_acquire('tr:a', '1 min', '1 min')");
	waits_ok($b, 'B');
	is($a->query("SELECT redis_lock_release('tr:a')"), 't', 'A releases');
	my ($v, $err) = $b->finish($T);
	is($v, 't', 'B is woken over TLS and gets it') or diag($err);
	cmp_ok($b->query("SELECT redis_lock_fencing_token('tr:a')"), '>', $t1, "B's fencing token is above A's");
	is($b->query("SELECT redis_lock_release('tr:a')"), 't', 'B releases');
	is($rl->holders('tr:a'), 0, 'no hold left on any master');

	is($a->query("SELECT redis_lock_acquire('tr:w')"), 't', 'A takes tr:w in watchdog mode');
	$rl->restart_empty(0);
	until_ok('the watchdog restores the hold on the master restarted empty, over TLS',
		sub { $rl->holders('tr:w') == 3 });
	is($a->query("SELECT state FROM redis_locks WHERE name = 'tr:w'"), 'held', 'tr:w is still held');
	is($a->query("SELECT redis_lock_release('tr:w')"), 't', 'A releases tr:w');

	$rl->kill9(2);
	is($a->query("SELECT redis_lock_acquire('tr:b', '0', '10 min')"), 't', 'with one master down, a majority still grants');
	is($a->query("SELECT masters FROM redis_locks WHERE name = 'tr:b'"), '2/3', '... on 2 of 3');
	$b->start("SELECT redis_lock_acquire('tr:b', '1 min', '1 min')");
	waits_ok($b, 'B (one master down)');
	is($a->query("SELECT redis_lock_release('tr:b')"), 't', 'A releases');
	($v, $err) = $b->finish($T);
	is($v, 't', 'B is woken and gets it on the 2 masters left') or diag($err);
	is($b->query("SELECT redis_lock_release('tr:b')"), 't', 'B releases');

	$rl->kill9(1);
	my $st;
	(undef, $err, $st) = $a->try("SELECT redis_lock_acquire('tr:c', '0', '1 min')");
	is($st, '08006', 'with 2 of 3 masters down: 08006') or diag($err);
	like($err // '', qr/Only 1 of 3 Redlock masters answered, 2 needed/, '... saying how many answered');
	$_->close for $a, $b;
	no_crash_ok($node, 'redlock over TLS');
}

done_testing();
