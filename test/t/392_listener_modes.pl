# 392_listener_modes.pl — the listener serves waiters behind Sentinel, on a
# cluster (one connection per node that serves a waited-on channel, sharded
# subscriptions) and with Redlock (one connection per master): sessions
# waiting on several names show as at most one subscriber connection per
# Redis server in CLIENT LIST (the listener subscribes while they wait:
# waited for, within a bound), and all of them get the lock once released.
# The holder's lease is far longer than the bound of the wait, so a waiter
# that missed its wake-up would fail it.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use Test::More;

my $BOUND = 60;

# connections in pub/sub mode, but for the sentinels' own (name=sentinel-...)
sub subscribers
{
	my ($r) = @_;
	return scalar grep { /\bflags=\S*P/ && !/\bname=sentinel-/ } $r->cli('CLIENT', 'LIST');
}

# n sessions wait on names (round robin) that a holder keeps, then get them
sub waiters_ok
{
	my ($node, $what, $n, $names, $check) = @_;
	my $holder = RedisLockTest::Session->new($node);
	my @s = map { RedisLockTest::Session->new($node) } 1 .. $n;
	is($holder->query("SELECT count(*) FILTER (WHERE redis_lock_acquire(n, '0', '10 min')) FROM unnest(ARRAY['"
			. join("','", @$names) . "']) n"), scalar(@$names), "$what: the holder takes every name");
	for my $i (0 .. $n - 1)
	{
		my $name = $names->[ $i % @$names ];
		$s[$i]->start("SELECT redis_lock_acquire('$name', '$BOUND s') AND redis_lock_release('$name')");
	}
	until_ok("$what: $n sessions wait", sub {
		RedisLockTest::observer($node)->query(
			"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Extension' AND backend_type = 'client backend'") == $n });
	$check->();
	is($holder->query("SELECT count(*) FILTER (WHERE redis_lock_release(n)) FROM unnest(ARRAY['"
			. join("','", @$names) . "']) n"), scalar(@$names), "$what: the holder releases");
	my $got = grep { my ($v) = $_->finish($BOUND + 30); defined $v && $v eq 't' } @s;
	is($got, $n, "$what: all $n waiters got the lock");
	$_->close for $holder, @s;
}

# --- a session with a Redis server of its own ---------------------------------------------
# redislock.url is a superuser setting that a session (or a role, a
# database) may set for itself: the listener, which follows the server's
# settings, cannot hear that server's messages, so such a waiter subscribes
# by itself. Before, it was put on the board and never woken.
{
	my $main  = RedisLockTest::Redis->new;
	my $other = RedisLockTest::Redis->new;
	my $node  = RedisLockTest::node('lm_own_url', $main);
	my $h = RedisLockTest::Session->new($node);
	my $w = RedisLockTest::Session->new($node);
	$_->query("SET redislock.url = '" . $other->url . "'") for $h, $w;
	is($h->query("SELECT redis_lock_acquire('lm:own', '0', '10 min')"), 't',
		'own url: the holder takes the lock on the other server');
	$w->start("SELECT redis_lock_acquire('lm:own', '$BOUND s', '10 min')");
	waits_ok($w, 'own url: the waiter');
	until_ok('own url: the waiter is subscribed on the other server',
		sub { subscribers($other) == 1 });
	is($h->query("SELECT redis_lock_release('lm:own')"), 't', 'own url: the holder releases');
	my ($v) = $w->finish($BOUND + 30);
	is($v, 't', 'own url: the waiter is woken and gets the lock');
	$_->close for $h, $w;
	$node->stop;
}

# --- Sentinel ---------------------------------------------------------------------
{
	my $master = RedisLockTest::Redis->new;
	my @sentinels = map {
		RedisLockTest::Redis->new(sentinel => 1, extra => [
			'sentinel monitor m 127.0.0.1 ' . $master->port . ' 2',
			'sentinel down-after-milliseconds m 5000',
		])
	} 1 .. 2;
	my $node = RedisLockTest::node('lm_sentinel', $master,
		'redislock.sentinels' => join(',', map { '127.0.0.1:' . $_->port } @sentinels),
		'redislock.sentinel_master' => 'm');
	waiters_ok($node, 'sentinel', 8, [ 'lm:s1', 'lm:s2' ], sub {
		until_ok('sentinel: one subscriber connection on the master', sub { subscribers($master) == 1 });
	});
	$node->stop;
}

# --- Cluster (sharded pub/sub) ------------------------------------------------------
{
	my $cl = RedisLockTest::Cluster->new(masters => 3, replicas => 0);
	my $node = RedisLockTest::node('lm_cluster', undef,
		'redislock.cluster_nodes' => $cl->seeds,
		'redislock.command_timeout' => '20s');
	my @names = map { "lm:c$_" } 1 .. 6;
	waiters_ok($node, 'cluster', 12, \@names, sub {
		# the nodes that hold the names (a channel lies in its name's slot)
		my %owners;
		for my $r ($cl->nodes)
		{
			$owners{ $r->port } = 1 if grep { ($r->cli('EXISTS', $_) // '') eq '1' } @names;
		}
		my ($total, $most);
		my $count = sub {
			($total, $most) = (0, 0);
			for my $r ($cl->nodes)
			{
				my $k = subscribers($r);
				$total += $k;
				$most = $k if $k > $most;
			}
			return $total == keys %owners;
		};
		until_ok('cluster: one per node that serves a waited-on channel (' . scalar(keys %owners) . ')',
			$count);
		is($most, 1, 'cluster: at most one subscriber connection per node');
	});
	$node->stop;
}

# --- Redlock --------------------------------------------------------------------------
{
	my $rl = RedisLockTest::Redlock->new(n => 3);
	my $node = RedisLockTest::node('lm_redlock', undef,
		'redislock.redlock_nodes' => $rl->list);
	waiters_ok($node, 'redlock', 8, [ 'lm:r1', 'lm:r2' ], sub {
		my $seen;
		until_ok('redlock: one subscriber connection on each master',
			sub { ($seen = join(',', map { subscribers($_) } $rl->nodes)) eq '1,1,1' })
		  or diag("subscribers per master: $seen");
	});
	$node->stop;
}

# --- Redlock: a minority of masters subscribed is not READY ----------------------------------
# A release publishes only on the masters where the lock was held. Two of
# three masters refuse subscriptions (an ACL without SUBSCRIBE), so the
# listener can subscribe on one master only; the lock is held on the other
# two (a foreign hold on the first). Before, the listener showed the channel
# READY on that one master, the release went unheard, and the waiter slept
# to the lease end (10 minutes). The listener is stopped once both refusals
# are in, so that its retries of the refused masters, which took READY back
# for a moment, cannot rescue the waiter: it must get the lock by itself.
{
	my $rl = RedisLockTest::Redlock->new(n => 3);
	my ($ma, $mb, $mc) = $rl->nodes;
	my $node = RedisLockTest::node('lm_redlock_minority', undef,
		'redislock.redlock_nodes' => $rl->list);
	my $h = RedisLockTest::Session->new($node);
	my $w = RedisLockTest::Session->new($node);
	for my $r ($mb, $mc)
	{
		$r->cli('ACL', 'SETUSER', 'default', '-subscribe', '-ssubscribe', '-psubscribe');
		$r->cli('ACL', 'LOG', 'RESET');
	}
	$ma->cli('HSET', 'lm:minority', 'someone-else:1', '1');
	$ma->cli('PEXPIRE', 'lm:minority', '600000');
	is($h->query("SELECT redis_lock_acquire('lm:minority', '0', '10 min')"), 't',
		'redlock minority: the holder takes the lock on the two other masters');
	$w->start("SELECT redis_lock_acquire('lm:minority', '5 min', '10 min')");
	waits_ok($w, 'redlock minority: the waiter');
	until_ok('redlock minority: both masters refused a subscription',
		sub { !grep { scalar(grep { /subscribe/ } $_->cli('ACL', 'LOG')) == 0 } ($mb, $mc) });
	my $listener = RedisLockTest::stop_listener($node);
	ok(defined $listener, 'redlock minority: the listener is stopped');
	is($h->query("SELECT redis_lock_release('lm:minority')"), 't',
		'redlock minority: the holder releases (published on the two refusing masters only)');
	my ($v, $err) = $w->finish($BOUND);
	is($v, 't', "redlock minority: the waiter gets the lock within ${BOUND}s") or diag($err // 'no error');
	$w->cancel if defined $err && $err =~ /^timeout/;
	ok(kill('CONT', $listener), 'redlock minority: the listener resumes');
	$_->close for $h, $w;
	$node->stop;
}

# --- Redlock: a waiter on subscriptions of its own hears them drop ------------------------------
# A session with Redlock settings of its own (the same masters, spelled with
# spaces) subscribes on a connection per master by itself. The lock is held
# on masters two and three only (a foreign hold on the first), so its
# release is published there only. While the waiter sleeps, its subscriber
# connections to those two are killed, and the holder releases at once.
# Before, the sleep went on with the first master's connection alone and
# heard nothing until the holder's lease end (10 minutes); now a drop ends
# the sleep, the waiter subscribes anew and tries.
{
	my $rl = RedisLockTest::Redlock->new(n => 3);
	my ($ma, $mb, $mc) = $rl->nodes;
	my $node = RedisLockTest::node('lm_redlock_drop', undef,
		'redislock.redlock_nodes' => $rl->list);
	my $h = RedisLockTest::Session->new($node);
	my $w = RedisLockTest::Session->new($node);
	my $own = join(', ', split /,/, $rl->list);
	$w->query("SET redislock.redlock_nodes = '$own'");
	my $channel = 'redisson_lock__channel:{lm:drop}';
	$ma->cli('HSET', 'lm:drop', 'someone-else:1', '1');
	$ma->cli('PEXPIRE', 'lm:drop', '600000');
	is($h->query("SELECT redis_lock_acquire('lm:drop', '0', '10 min')"), 't',
		'redlock drop: the holder takes the lock on masters two and three');
	$w->start("SELECT redis_lock_acquire('lm:drop', '5 min', '10 min')");
	waits_ok($w, 'redlock drop: the waiter');
	until_ok('redlock drop: the waiter is subscribed on all three masters by itself',
		sub { !grep { ($_->cli('PUBSUB', 'NUMSUB', $channel))[1] != 1 } ($ma, $mb, $mc) });
	$_->cli('CLIENT', 'KILL', 'TYPE', 'pubsub') for ($mb, $mc);
	is($h->query("SELECT redis_lock_release('lm:drop')"), 't',
		'redlock drop: the holder releases (published on masters two and three only)');
	my ($v, $err) = $w->finish($BOUND);
	is($v, 't', "redlock drop: the waiter gets the lock within ${BOUND}s") or diag($err // 'no error');
	$w->cancel if defined $err && $err =~ /^timeout/;
	$w->query("SELECT redis_lock_release_all()") if defined $v && $v eq 't';
	$ma->cli('DEL', 'lm:drop');
	$_->close for ($h, $w);
	$node->stop;
}

done_testing();
