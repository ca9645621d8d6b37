# 371_deadlock_stale_edge.pl — a fair lock's holder whose wait-for edge is
# still there (it got the lock and has not yet deleted the edge of the wait
# that ended) waits for nobody: it is not in the queue any more. Before,
# every queued owner counted as ahead of it, so a queued session found a
# "cycle" through the holder and got 40P01 with no deadlock (seen in
# bench/handoff.pl with 64 fair sessions). The holder and its edge are
# written here as another server's session would have them.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use Test::More;

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('stale_edge', $redis);
my $rc    = FakeRedisson::Conn->new(port => $redis->port);
my $s     = RedisLockTest::Session->new($node);

# the holder: an owner id below every real one, so the session's walk
# follows it (a walk follows only owners smaller than its own)
my $holder = '00000000-0000-4000-8000-000000000000:1';
my $name   = 'se:fair';
$rc->cmd('HSET', $name, $holder, 1);
$rc->cmd('PEXPIRE', $name, 120000);
my $edge = "redislock_waits:{$holder}";
$rc->cmd('HSET', $edge, 'server', 'elsewhere', 'pid', 4242,
	'started', int(time * 1000) - 5000, 'kind', 'lock', 'fair', 1, 'n', 1, 'name1', $name);
$rc->cmd('PEXPIRE', $edge, 120000);

$s->query("SET redislock.deadlock_timeout = '100ms'");
my ($v, $err, $state) = $s->try("SELECT redis_lock_acquire('$name', '3 s', NULL, true)");
is($state, undef, 'a fair waiter behind a holder with a stale edge gets no 40P01')
  or diag("[$state] $err");
is($v, 'f', '... and times out waiting, as nothing is released');
is($rc->cmd('HGET', $name, $holder), 1, 'the holder still holds it');

$s->close;
done_testing();
