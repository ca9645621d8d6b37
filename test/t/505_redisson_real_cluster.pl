# 505_redisson_real_cluster.pl — the real Redisson client (every version in
# @RealRedisson::VERSIONS) and SQL sessions on a Redis 7 cluster (3 masters):
# wake-ups both ways on one lock, with 10-minute leases, under each
# redislock.cluster_pubsub:
#   sharded   (our default): the Java client with its defaults; Redisson up
#             to 3.21 publishes and subscribes classically, so neither side
#             hears the other (P1, TODO for those versions);
#   classic:  the Java client with shardedSubscriptionMode OFF where it has
#             the setting (3.29+), its defaults before (3.22-3.28, always
#             sharded on Redis 7, is not in the list).
# Subscriptions are counted over every master, classic and sharded.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use RealRedisson;
use FakeRedisson;
use Test::More;

# Bound for a wake: far below the leases, and short, because the versions
# that cannot hear each other (P1) wait it out twice in each mode.
my $T    = 20;
my $LONG = 600_000;

my $cl = RedisLockTest::Cluster->new(masters => 3);
my $node = RedisLockTest::node('realcluster', undef,
	'redislock.cluster_nodes' => $cl->seeds, 'max_connections' => '30');
my $urls = join(',', map { 'redis://127.0.0.1:' . $_->port } $cl->masters);
my $a = RedisLockTest::Session->new($node);

sub subs
{
	my ($chan) = @_;
	my $n = 0;
	for my $m ($cl->masters)
	{
		$n += ($m->cli('PUBSUB', 'NUMSUB', $chan))[1];
		$n += ($m->cli('PUBSUB', 'SHARDNUMSUB', $chan))[1];
	}
	return $n;
}

my %record;

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

for my $mode (qw(sharded classic))
{
	set_pubsub($mode);
	for my $v (RealRedisson::versions())
	{
		my $why = RealRedisson::check_build($v);
		if ($why) { fail("Redisson $v: driver available"); diag($why); next; }
		my @opt;
		push @opt, 'sharded=off' if $mode eq 'classic' && RealRedisson::version_cmp($v, '3.29.0') >= 0;
		my $j = eval { RealRedisson->new(version => $v, mode => [ 'cluster', $urls ], options => \@opt) };
		if (!$j)
		{
			fail("Redisson $v: the client starts and connects");
			diag($@);
			$record{$v}{$mode} = 'FAIL';
			next;
		}
		my $known = $mode eq 'sharded' && RealRedisson::version_cmp($v, '3.22.0') < 0;
		our $TODO;
		local $TODO = $known ? 'P1 (redisson-versions.md): Redisson up to 3.21 uses classic pub/sub on a cluster' : undef;
		my $ok = subtest("Redisson $v, cluster_pubsub = $mode" . (@opt ? " (@opt)" : '') => sub {
			eval { wake_check($j, $v, $mode); 1 } or fail("no error: $@");
		});
		$record{$v}{$mode} = $ok ? 'pass' : $known ? 'FAIL (known P1)' : 'FAIL';
		$j->quit;
	}
}

my $table = "version\tsharded\tclassic\n";
for my $v (RealRedisson::versions())
{
	$table .= join("\t", $v, map { $record{$v}{$_} // '-' } qw(sharded classic)) . "\n";
}
diag("real Redisson on a cluster, per version and cluster_pubsub:\n$table");
if (open my $fh, '>', "$PostgreSQL::Test::Utils::log_path/505_redisson_real_cluster.tsv")
{
	print $fh $table;
	close $fh;
}

$a->close;
no_crash_ok($node, 'real Redisson on a cluster');
done_testing();
