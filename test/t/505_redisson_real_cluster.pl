# 505_redisson_real_cluster.pl — the real Redisson client (every version in
# @RealRedisson::VERSIONS) and SQL sessions on a Redis 7 cluster (3 masters):
# wake-ups both ways on one lock, with 10-minute leases, each version with
# the redislock.cluster_pubsub it needs (P1 in redisson-versions.md):
#   classic:  Redisson up to 3.21 (it always publishes and subscribes
#             classically); 3.29+ too, with its shardedSubscriptionMode OFF;
#   sharded   (our default): 3.22+ with its defaults (3.22-3.28 always
#             shard on a Redis 7 cluster; none of them is in the list).
# And the mismatch is real: with sharded, a SQL waiter does not hear the
# unlock of Redisson up to 3.21 (its SSUBSCRIBE against their PUBLISH): it
# still waits $MISS s after the lock is gone, where a message would have
# woken it at once; then it is cancelled.
# Subscriptions are counted over every master, classic and sharded.
# Takes about 5 min for the eight versions (a JVM start per version and
# mode, $MISS s per version up to 3.21).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use RealRedisson;
use FakeRedisson;
use Test::More;

# Bound for a wake: far below the leases.
my $T    = 60;
my $LONG = 600_000;
# How long a mismatched waiter is shown still waiting after the unlock.
my $MISS = 10;

my $cl = RedisLockTest::Cluster->new(masters => 3);
my $node = RedisLockTest::node('realcluster', undef,
	'redislock.cluster_nodes' => $cl->seeds, 'max_connections' => '30');
my $urls = join(',', map { 'redis://127.0.0.1:' . $_->port } $cl->masters);
my $a = RedisLockTest::Session->new($node);

sub subs { my ($c, $s) = $cl->subscribers($_[0]); return $c + $s; }

sub wake_check
{
	my ($j, $v, $mode) = @_;
	my $name = "realcl:$v:$mode";
	my $l = sql_literal($name);
	my $chan = FakeRedisson::channel($name);

	is($j->run('h', 'lock', 'plain', $name, $LONG), 'null', 'Java holds (10 min lease)');
	$a->start("SELECT redis_lock_acquire($l, NULL, '10 min')");
	waits_ok($a, 'SQL waiter');
	RedisLockTest::until_ok("SQL waiter subscribed to $chan", sub { subs($chan) >= 1 });
	is($j->run('h', 'unlock', 'plain', $name), 'null', 'Java unlocks');
	my ($val, $err) = $a->finish($T);
	is($val, 't', "SQL waiter woken within $T s by the Java unlock") or diag($err);
	$a->cancel if $a->{sth_async};
	$a->query('SELECT redis_lock_release_all()');

	is($a->query("SELECT redis_lock_acquire($l, '0', '10 min')"), 't', 'SQL holds (10 min lease)');
	RedisLockTest::until_ok("nobody subscribed to $chan yet", sub { subs($chan) == 0 });
	$j->start('w', 'w', 'lock', 'plain', $name, $LONG);
	RedisLockTest::until_ok("Java waiter subscribed to $chan", sub { subs($chan) >= 1 });
	is($j->poll('w'), undef, 'Java waiter still waits');
	is($a->query("SELECT redis_lock_release($l)"), 't', 'SQL releases');
	my ($st, $r) = $j->result('w', $T);
	is($st, 'ok', "Java waiter woken within $T s by the SQL release") or diag($r // 'no result');
	$j->try_run('w', 'unlock', 'plain', $name) if $st;
}

# cluster_pubsub = sharded against a Redisson that publishes classically:
# the SQL waiter subscribes sharded, the unlock reaches nobody, and the
# waiter is still waiting $MISS s after the lock is gone.
sub mismatch_check
{
	my ($j, $v) = @_;
	my $name = "realcl:$v:mismatch";
	my $l = sql_literal($name);
	my $chan = FakeRedisson::channel($name);

	is($j->run('h', 'lock', 'plain', $name, $LONG), 'null', 'Java holds (10 min lease)');
	$a->start("SELECT redis_lock_acquire($l, NULL, '10 min')");
	waits_ok($a, 'SQL waiter');
	RedisLockTest::until_ok("SQL waiter subscribed to $chan", sub { subs($chan) >= 1 });
	my ($classic, $sharded) = $cl->subscribers($chan);
	is("$classic/$sharded", '0/1', 'the SQL waiter listens on the sharded channel only');
	is($j->run('h', 'unlock', 'plain', $name), 'null', 'Java unlocks (a classic PUBLISH)');
	my $o = RedisLockTest::Session->new($node);
	is($o->query("SELECT locked FROM redis_lock_status($l)"), 'f', 'the lock is free');
	$o->close;
	my ($val, $err, $state) = $a->finish($MISS);
	is($state, 'TIMEOUT', "the SQL waiter did not hear the unlock: still waiting $MISS s later")
	  or diag($val // $err);
	$a->cancel if $a->{sth_async};
	$a->query('SELECT redis_lock_release_all()');
}

sub set_pubsub
{
	my ($mode) = @_;
	$a->query("ALTER SYSTEM SET redislock.cluster_pubsub = '$mode'");
	$a->query('SELECT pg_reload_conf()');
	$a->close;
	RedisLockTest::until_ok("cluster_pubsub = $mode", sub {
		my $s = RedisLockTest::Session->new($node);
		my $v = $s->query('SHOW redislock.cluster_pubsub');
		$s->close;
		return $v eq $mode;
	});
	$a = RedisLockTest::Session->new($node);
}

my %record;    # version -> mode -> [result, reason] (RealRedisson::write_interop)
my $CLASSIC_ONLY = 'Redisson up to 3.21 publishes and subscribes classically on a cluster (P1)';

for my $mode (qw(sharded classic))
{
	set_pubsub($mode);
	for my $v (RealRedisson::versions())
	{
		my $old = RealRedisson::version_cmp($v, '3.22.0') < 0;
		my $opt_ok = RealRedisson::version_cmp($v, '3.29.0') >= 0;
		if ($mode eq 'classic' && !$old && !$opt_ok)
		{
			$record{$v}{$mode} = [ 'n/a', 'not run: Redisson 3.22-3.28 always shards on a Redis 7 cluster, so it needs redislock.cluster_pubsub = sharded' ];
			next;
		}
		my $why = RealRedisson::check_build($v);
		if ($why)
		{
			fail("Redisson $v: driver available");
			diag($why);
			$record{$v}{$mode} = [ 'fails', "driver not available: $why" ];
			next;
		}
		my @opt;
		push @opt, 'sharded=off' if $mode eq 'classic' && $opt_ok;
		my $j = eval { RealRedisson->new(version => $v, mode => [ 'cluster', $urls ], options => \@opt) };
		if (!$j)
		{
			fail("Redisson $v: the client starts and connects");
			diag($@);
			$record{$v}{$mode} = [ 'fails', 'the client did not start in this run: see the test log' ];
			next;
		}
		my $mismatch = $mode eq 'sharded' && $old;
		my $ok = subtest("Redisson $v, cluster_pubsub = $mode" . (@opt ? " (@opt)" : '')
			  . ($mismatch ? ': the mismatch' : '') => sub {
			eval { $mismatch ? mismatch_check($j, $v) : wake_check($j, $v, $mode); 1 } or fail("no error: $@");
		});
		$record{$v}{$mode} =
		    !$ok ? [ 'fails', 'failed in this run, unexpectedly: see the test log' ]
		  : $mismatch ? [ 'fails', "$CLASSIC_ONLY; shown: a sharded SQL waiter does not hear its unlock" ]
		  : $mode eq 'sharded' ? [ 'works', '' ]
		  : $old ? [ 'setting', 'redislock.cluster_pubsub = classic' ]
		  : [ 'setting', 'redislock.cluster_pubsub = classic with Redisson shardedSubscriptionMode = OFF' ];
		$j->quit;
	}
}

my $table = "version\tsharded\tclassic\n";
for my $v (RealRedisson::versions())
{
	$table .= join("\t", $v, map { $record{$v}{$_} ? $record{$v}{$_}[0] : '-' } qw(sharded classic)) . "\n";
}
diag("real Redisson on a cluster, per version and cluster_pubsub:\n$table");
if (open my $fh, '>', "$PostgreSQL::Test::Utils::log_path/505_redisson_real_cluster.tsv")
{
	print $fh $table;
	close $fh;
}
RealRedisson::write_interop('505_redisson_real_cluster',
	map { my $m = $_; map { [ "lock wake-ups on a Redis 7 cluster, cluster_pubsub = $m", $_, @{ $record{$_}{$m} // [ 'n/a', 'not run' ] } ] } RealRedisson::versions() }
	qw(sharded classic));

$a->close;
no_crash_ok($node, 'real Redisson on a cluster');
done_testing();
