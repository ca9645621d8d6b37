# Races between the watchdog worker and sessions, made deterministic: the
# worker and the sessions talk to Redis through a proxy whose directions the
# test holds back (test/lib/DelayProxy.pm), for the worker's connection
# alone once it is pinned. (Sessions use the server's redislock.url: a
# lease-less lock is refused in a session with settings of its own.) Proves
#  - a lock published while a timer-started worker cycle is under way is
#    renewed before its short lease ends (the worker's wake-up marker);
#  - a renewal that found the lock gone does not mark lost a hold the
#    session has meanwhile taken anew (slot epochs);
# The worker gives up a round trip at the first lease of its batch to run
# out (plus LAPSE_SLACK_MS, worker.c), so every step taken while its
# renewal is held back must end within that lease: the holds the test
# holds the worker's renewal of have 30 s leases (renewed after 10 s),
# leaving 20 s for steps that take well under one.
#  - a release repeated after its reply was lost reports the release the
#    first call did, not "no longer held".
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib";
use RedisLockTest;
use DelayProxy;
use Test::More;

my $redis = RedisLockTest::Redis->new;
my $proxy = DelayProxy->spawn(0, $redis->port);
my $via_proxy = 'redis://127.0.0.1:' . $proxy->port($redis->port);

my $node = RedisLockTest::node('worker_races', undef,
	'redislock.url' => $via_proxy,
	'redislock.command_timeout' => '20s');

sub session_with
{
	my ($watchdog) = @_;
	my $s = RedisLockTest::Session->new($node);
	$s->query("SET redislock.watchdog_timeout = '$watchdog'");
	return $s;
}

sub lock_row
{
	my ($s, $name, $col) = @_;
	return $s->query("SELECT $col FROM redis_locks WHERE name = '$name'");
}

# --- a lock published during a timer-started cycle wakes the worker again --
my $a = session_with('30s');
is($a->query("SELECT redis_lock_acquire('w:slow')"), 't', 'A holds w:slow, 30 s watchdog lease');
$proxy->cmd('stall up');
ok($proxy->wait_held('up', 1, 60), "the worker's timer-started renewal of w:slow is under way (held in the proxy)");
$proxy->cmd('pin up');    # the worker's connection alone

my $b = session_with('6s');
is($b->query("SELECT redis_lock_acquire('w:fast')"), 't', 'meanwhile B takes w:fast, 6 s watchdog lease');
my $taken = lock_row($b, 'w:fast', 'renewed_at');
$proxy->cmd('go up');
RedisLockTest::wait_until(30, 'w:fast renewed or lost', sub {
	my $st = lock_row($b, 'w:fast', "state || ' ' || (renewed_at > '$taken')");
	return $st eq 'lost false' || $st =~ / true$/;
});
is(lock_row($b, 'w:fast', 'state'), 'held', 'w:fast is renewed, not lost: the worker came back for it');
my $owner_b = $b->query('SELECT redis_lock_owner_id()');
is($redis->cli('HEXISTS', 'w:fast', $owner_b), '1', 'Redis still has the hold');
is($b->query("SELECT redis_lock_release('w:fast')"), 't', 'B releases');
is($a->query("SELECT redis_lock_release('w:slow')"), 't', 'A releases');

# --- a renewal that found an earlier hold gone does not mark the new one lost
# The hold vanishes from Redis (force-released, or expired: the same to the
# worker) while the worker's renewal of it is held back; the renewal then
# finds nothing, and its reply is held back until the session has taken
# the lock anew: a transaction-scope entry asks Redis (a session-scope one
# within the lease would not), which takes it afresh.
my $e = session_with('30s');
$e->query('CREATE TABLE guard_probe(i int)');
is($e->query("SELECT redis_lock_acquire('e:1')"), 't', 'E holds e:1, 30 s watchdog lease');
$proxy->cmd('stall up');
ok($proxy->wait_held('up', 1, 60), "the worker's renewal of e:1 is held back");
$proxy->cmd('pin up');
is($redis->cli('DEL', 'e:1'), '1', 'e:1 vanishes from Redis meanwhile');
$proxy->cmd('stall down');
$proxy->cmd('go up');
ok($proxy->wait_held('down', 1, 30), 'the renewal reached Redis (it finds nothing); its reply is held back');
$proxy->cmd('pin down');
$e->notices;
$e->query('BEGIN');
is($e->query("SELECT redis_xact_lock_acquire('e:1')"), 't', 'E takes e:1 anew in a transaction');
like(join("\n", $e->notices), qr/had been lost and was acquired again/, '... and is told it had been lost');
my $retaken = lock_row($e, 'e:1', 'renewed_at');
$proxy->cmd('go down');
RedisLockTest::wait_until(60, 'e:1 renewed again or marked lost', sub {
	my $st = lock_row($e, 'e:1', "state || ' ' || (renewed_at > '$retaken')");
	return $st =~ /^lost / || $st =~ / true$/;
});
is(lock_row($e, 'e:1', 'state'), 'held', "the late 'gone' reply did not mark the new hold lost");
my (undef, $err) = $e->try('INSERT INTO guard_probe VALUES (1); COMMIT');
is($err, undef, 'the commit guard lets the writing transaction commit');
is($e->query("SELECT redis_lock_release('e:1')"), 't', 'E releases its session hold');
is($redis->cli('EXISTS', 'e:1'), '0', 'nothing is left in Redis');

# --- a release repeated after its reply was lost ----------------------------
my $c = RedisLockTest::Session->new($node);    # through the proxy
is($c->query("SELECT redis_lock_acquire('r:1', '0', '1 min')"), 't', 'C holds r:1');
$c->query("SET redislock.command_timeout = '1s'");
$proxy->cmd('stall down');
my ($v, $rerr, $state) = $c->try("SELECT redis_lock_release('r:1')");
is($state, '08006', 'the release gets no reply: 08006');
is($redis->cli('EXISTS', 'r:1'), '0', '... although Redis applied it');
$proxy->cmd('go down');
$c->notices;
is($c->query("SELECT redis_lock_release('r:1')"), 't', 'repeating the release reports it done');
is(join("\n", $c->notices), '', '... without a warning');
is($c->query("SELECT count(*) FROM redis_locks WHERE name = 'r:1'"), '0', 'and nothing is left held');

RedisLockTest::no_crash_ok($node, 'worker races');
$proxy->stop;
done_testing();
