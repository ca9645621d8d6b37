# Acquisitions whose outcome the session never learns, and sessions that end
# while Redis does not answer. Sessions reach Redis through a proxy whose
# directions the test holds back (test/lib/DelayProxy.pm): a request can
# reach Redis while its reply never comes back. The worker goes straight to
# Redis. Proves
#  - a lock taken by a request whose reply was lost does not stay held for
#    its (long) lease when the session then stays idle: the worker settles
#    it;
#  - nor when the session then disconnects: the worker releases it, the
#    ending session having handed its locks over before trying itself;
#  - an ending session waits a short fixed time for Redis, whatever its
#    command_timeout, and leaves the release to the worker.
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

my $node = RedisLockTest::node('unknown_outcome', $redis);
my $obs = RedisLockTest::Session->new($node);

sub session_via_proxy
{
	my ($timeout) = @_;
	my $s = RedisLockTest::Session->new($node);
	$s->query("SET redislock.url = '$via_proxy'");
	$s->query("SET redislock.command_timeout = '$timeout'");
	# open the connection and load the scripts now: later requests each go
	# in one round trip
	$s->query("SELECT redis_lock_acquire('warm-up', '0', '1 min')");
	$s->query("SELECT redis_lock_release('warm-up')");
	return $s;
}

sub gone
{
	my ($pid) = @_;
	return $obs->query("SELECT count(*) FROM pg_stat_activity WHERE pid = $pid") eq '0';
}

# --- the reply is lost, the session stays idle ---------------------------
my $idle = session_via_proxy('1s');
$proxy->cmd('stall down');
my ($v, $err, $state) = $idle->try("SELECT redis_lock_acquire('u:idle', '0', '1 hour')");
is($state, '08006', 'an acquisition whose reply is lost fails with 08006');
is($redis->cli('GET', 'redisson_lock_token:{u:idle}'), '1', '... while Redis did take the lock (for an hour)');
until_ok('the worker settles the idle session\'s lock: Redis no longer has it',
	sub { $redis->cli('EXISTS', 'u:idle') eq '0' }, 60);
$proxy->cmd('go down');
is($idle->query("SELECT redis_lock_acquire('u:idle', '0', '1 min')"), 't',
	'the idle session can take the lock again');
is($idle->query("SELECT redis_lock_release('u:idle')"), 't', '... and release it');

# --- the reply is lost, the client goes away ---------------------------------
my $gone = session_via_proxy('1s');
$proxy->cmd('stall down');
($v, $err, $state) = $gone->try("SELECT redis_lock_acquire('u:gone', '0', '1 hour')");
is($state, '08006', 'another acquisition whose reply is lost');
is($redis->cli('GET', 'redisson_lock_token:{u:gone}'), '1', '... Redis took that one too');
my $gone_pid = $gone->pid;
$gone->close;
until_ok('the ended session\'s lock is released in Redis',
	sub { $redis->cli('EXISTS', 'u:gone') eq '0' }, 60);
until_ok('and its slot is freed', sub {
	$obs->query("SELECT count(*) FROM redis_locks WHERE name = 'u:gone'") eq '0' }, 60);
$proxy->cmd('go down');

# --- an ending session does not wait for a silent Redis ---------------------
my $exit = session_via_proxy('60s');
is($exit->query("SELECT redis_lock_acquire('x:exit', '0', '1 hour')"), 't', 'X holds x:exit, command_timeout 60 s');
my $exit_pid = $exit->pid;
$proxy->cmd('stall up');
$proxy->cmd('stall down');
$exit->close;
until_ok('X\'s backend ends although Redis does not answer it', sub { gone($exit_pid) }, 30);
until_ok('the worker releases x:exit', sub { $redis->cli('EXISTS', 'x:exit') eq '0' }, 60);

# and a terminated one neither
$proxy->cmd('go up');
$proxy->cmd('go down');
my $term = session_via_proxy('60s');
is($term->query("SELECT redis_lock_acquire('x:term', '0', '1 hour')"), 't', 'T holds x:term');
my $term_pid = $term->pid;
$proxy->cmd('stall up');
$term->start('SELECT pg_sleep(600)');
is($obs->query("SELECT pg_terminate_backend($term_pid)"), 't', 'T is terminated');
until_ok('T\'s backend ends although Redis does not answer it', sub { gone($term_pid) }, 30);
until_ok('the worker releases x:term', sub { $redis->cli('EXISTS', 'x:term') eq '0' }, 60);
$term->close;
$proxy->cmd('go up');

like(RedisLockTest::slurp($node->logfile), qr/released Redis lock "x:exit" of the ended session/,
	'the server log names the worker\'s release');
RedisLockTest::no_crash_ok($node, 'unknown outcome');
$proxy->stop;
done_testing();
