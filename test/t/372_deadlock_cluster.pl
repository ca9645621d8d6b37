# 372_deadlock_cluster.pl — deadlock detection on a Redis Cluster: the locks
# of a cycle and the sessions' wait-for edges live on different masters, so
# the walk crosses slots (issue 14). Two PostgreSQL servers share the cluster.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use Test::More;

my $cl = RedisLockTest::Cluster->new(masters => 3, replicas => 0);
my @conf = ('redislock.cluster_nodes' => $cl->seeds, 'redislock.command_timeout' => '20s',
	'redislock.deadlock_timeout' => '200ms');
my $n1 = RedisLockTest::node('dlc_one', undef, @conf);
my $n2 = RedisLockTest::node('dlc_two', undef, @conf);

# one name per master
my %by_master;
for my $i (1 .. 60)
{
	$by_master{ $cl->node_for_key("dlc:$i")->port } //= "dlc:$i";
}
my @names = sort values %by_master;
is(scalar(@names), 3, 'one lock name per master');

sub owner_cmp
{
	my ($a, $b) = @_;
	my ($ua, $na) = $a =~ /^(.*):(\d+)$/;
	my ($ub, $nb) = $b =~ /^(.*):(\d+)$/;
	return ($ua cmp $ub) || ($na <=> $nb);
}

# a 3-cycle: session i holds names[i] and waits for names[i+1]
my @s = (RedisLockTest::Session->new($n1), RedisLockTest::Session->new($n2), RedisLockTest::Session->new($n1));
my @ids = map { $_->query('SELECT redis_lock_owner_id()') } @s;
is($s[$_]->query("SELECT redis_lock_acquire('$names[$_]')"), 't', "session $_ holds $names[$_]") for 0 .. 2;
$s[$_]->start("SELECT redis_lock_acquire('$names[($_ + 1) % 3]')") for 0 .. 2;
waits_ok($s[$_], "session $_") for 0 .. 2;

# the edges are where their slots are; the view follows the slots too
my $key0 = "redislock_waits:{$ids[0]}";
until_ok('session 0 publishes its edge on the master of its slot',
	sub { ($cl->node_for_key($key0)->cli('EXISTS', $key0) // 0) == 1 });

my $v = first_done_ok('a session returns', @s);
my (undef, $err, $state) = $s[$v]->finish(10);
is($state, '40P01', 'one victim gets 40P01') or diag($err);
my @pids = map { $_->pid } @s;
like($err, qr/DETAIL:.*which waits for.*which waits for.*held by session $pids[$v]\./s, 'errdetail lists three waits');
my ($max) = sort { owner_cmp($b, $a) } @ids;
is($ids[$v], $max, 'the victim is the largest owner id');
ok(!$s[($v + 1) % 3]->is_done && !$s[($v + 2) % 3]->is_done, 'the others keep waiting');

my $w = ($v + 2) % 3;    # waits for the victim's lock
my $obs = RedisLockTest::observer($w == 1 ? $n2 : $n1);
is($obs->query('SELECT holders::text FROM redis_lock_waits WHERE pid = ' . $s[$w]->pid),
	"{$ids[$v]}", 'redis_lock_waits reads the holders on the master of the lock');

$s[$v]->query('SELECT redis_lock_release_all()');
is(($s[$w]->finish(30))[0], 't', 'the session waiting for the victim completes');
$s[$w]->query('SELECT redis_lock_release_all()');
my $last = ($v + 1) % 3;
is(($s[$last]->finish(30))[0], 't', 'the last one completes');
$s[$last]->query('SELECT redis_lock_release_all()');
for my $i (0 .. 2)
{
	my $k = "redislock_waits:{$ids[$i]}";
	is($cl->node_for_key($k)->cli('EXISTS', $k), 0, "no edge left for session $i");
}
$_->close for @s;
done_testing();
