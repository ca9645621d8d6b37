# Redlock: a renewal under way while the session releases must never bring
# the released lock back. The worker reaches the 3 masters through a proxy
# whose client-to-server direction the test holds back (test/lib/
# DelayProxy.pm), so its renewal reaches the masters only after the session,
# whose connections the proxy lets through (pin), has released. Also: a master restarted empty still
# gets the hold back while the lock is held, and a restore under way while
# the session releases does not bring the lock back either (the release
# leaves a mark the restore checks).
# The worker gives up a round trip at the first lease of its batch to run
# out (plus LAPSE_SLACK_MS, worker.c): a 30 s lease, renewed after 10 s,
# leaves 20 s for the steps taken while a renewal is held back.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib";
use RedisLockTest;
use DelayProxy;
use Test::More;

my $rl = RedisLockTest::Redlock->new(n => 3);
my @ports = map { $_->port } $rl->nodes;
my $proxy = DelayProxy->spawn(0, @ports);
my $via_proxy = join(',', map { '127.0.0.1:' . $proxy->port($_) } @ports);

my $node = RedisLockTest::node('redlock_renew_race', undef,
	'redislock.redlock_nodes' => $via_proxy,
	'redislock.command_timeout' => '20s');

my $a = RedisLockTest::Session->new($node);
$a->query("SET redislock.watchdog_timeout = '30s'");

sub evalsha_calls
{
	my ($r) = @_;
	my ($line) = grep { /^cmdstat_evalsha:/ } $r->cli('INFO', 'commandstats');
	return defined $line && $line =~ /calls=(\d+)/ ? $1 : 0;
}

# Lets the requests held back in the proxy go, and waits until every master
# has run one more script: the late $what.
sub let_go
{
	my ($what) = @_;
	my @calls = map { evalsha_calls($_) } $rl->nodes;
	$proxy->cmd('go up');
	until_ok("the late $what has run on every master", sub {
		my @now = map { evalsha_calls($_) } $rl->nodes;
		return !grep { $now[$_] <= $calls[$_] } 0 .. $#now;
	}, 30);
}

is($a->query("SELECT redis_lock_acquire('rr:1')"), 't', 'A holds rr:1 (watchdog, 30 s lease) on the masters');
is($rl->holders('rr:1'), 3, 'on all 3');
my $t1 = $a->query("SELECT redis_lock_fencing_token('rr:1')");

$proxy->cmd('stall up');
ok($proxy->wait_held('up', 3, 60), "the worker's renewal is on its way to the 3 masters (held in the proxy)");
$proxy->cmd('pin up');    # the worker's connections alone
is($a->query("SELECT redis_lock_release('rr:1')"), 't', 'A releases rr:1 meanwhile');
is($rl->holders('rr:1'), 0, 'no master has it');
let_go('renewal');
is($rl->holders('rr:1'), 0, 'the released lock did not come back on any master');

is($a->query("SELECT redis_lock_acquire('rr:1')"), 't', 'A takes rr:1 again');
cmp_ok($a->query("SELECT redis_lock_fencing_token('rr:1')"), '>', $t1,
	'as a fresh hold: a higher fencing token');

# the restore itself still works: a master restarted empty gets the hold back
$proxy->cmd('stall up');
$rl->restart_empty(2);
is($rl->holders('rr:1'), 2, 'master 2 restarted empty: 2 of 3 have the hold');
$proxy->cmd('go up');
until_ok('the watchdog puts the hold back on master 2', sub { $rl->holders('rr:1') == 3 }, 60);
is($a->query("SELECT state FROM redis_locks WHERE name = 'rr:1'"), 'held', 'and the lock is held, not lost');
is($a->query("SELECT redis_lock_release('rr:1')"), 't', 'A releases');
is($rl->holders('rr:1'), 0, 'released everywhere');

# a restore under way while the session releases
is($a->query("SELECT redis_lock_acquire('rr:2')"), 't', 'A holds rr:2');
$proxy->cmd('stall up');
$rl->restart_empty(2);
ok($proxy->wait_held('up', 3, 60), "the worker's renewal of rr:2 is held back");
$proxy->cmd('step up ' . $proxy->held->{up});
ok($proxy->wait_held('up', 3, 30), 'let through, it finds master 2 without the hold: the restore it sends is held back');
$proxy->cmd('pin up');
is($a->query("SELECT redis_lock_release('rr:2')"), 't', 'A releases rr:2 meanwhile');
is($rl->holders('rr:2'), 0, 'no master has it');
let_go('restore');
is($rl->holders('rr:2'), 0, 'the released lock did not come back on any master');
is($a->query("SELECT count(*) FROM redis_locks WHERE name = 'rr:2'"), '0', 'nor in redis_locks');

RedisLockTest::no_crash_ok($node, 'redlock renew race');
$proxy->stop;
done_testing();
