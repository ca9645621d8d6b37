# Cancelling a call while it asks the sentinels where the master is leaks
# nothing: a "sentinel" that accepts connections but never answers keeps the
# backend in discovery; each cancel must close the probe connection's socket
# and its wait set (epoll fd), so the backend's open file descriptors
# (/proc/<pid>/fd) do not grow however often it is cancelled there.
use strict;
use warnings;
use IO::Socket::INET;
use Test::More;
use RedisLockTest;

my $redis = RedisLockTest::Redis->new;
my $node = RedisLockTest::node('sentinel_cancel', $redis);

# Connections complete in the kernel's backlog; nothing is ever read or sent.
my $port = RedisLockTest::free_port();
my $mute = IO::Socket::INET->new(
	LocalAddr => '127.0.0.1',
	LocalPort => $port,
	Proto     => 'tcp',
	Listen    => 128,
	ReuseAddr => 1) or die "cannot listen on $port: $!";

my $s = RedisLockTest::Session->new($node);
$s->query("SET redislock.sentinels = '127.0.0.1:$port'");
$s->query("SET redislock.sentinel_master = 'm'");
$s->query("SET redislock.connect_timeout = '60s'");
$s->query("SET redislock.command_timeout = '60s'");

sub open_fds
{
	my $pid = $s->pid;
	opendir(my $d, "/proc/$pid/fd") or die "cannot read /proc/$pid/fd: $!";
	my $n = grep { /^\d+$/ } readdir($d);
	closedir($d);
	return $n;
}

sub cancel_in_discovery
{
	my ($round) = @_;
	$s->start("SELECT redis_lock_acquire('sc:k', '0', '1 min')");
	waits_ok($s, "round $round: the backend waits for the silent sentinel");
	my (undef, $err, $state) = $s->cancel(30);
	is($state, '57014', "round $round: cancel ends it") or diag($err);
}

cancel_in_discovery(0);
my $before = open_fds();
cancel_in_discovery($_) for 1 .. 5;
my $after = open_fds();
is($after, $before, "open fds after 5 more cancels: $after, as before: $before");

$s->query('RESET redislock.sentinels');
is($s->query("SELECT redis_lock_acquire('sc:k', '0', '1 min')"), 't',
	'the session still works afterwards');

no_crash_ok($node, 'sentinel discovery cancel');

done_testing();
