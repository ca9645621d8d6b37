# 398_listener_resubscribe.pl — a channel that a waiter wants again while
# the listener's UNSUBSCRIBE of it is on its way is subscribed again as
# soon as Redis answers the UNSUBSCRIBE, not at the listener's next look at
# the board (about a second later, which would be added to the wait).
#
# The listener lingers on a channel nobody waits for (10 s), then sends
# UNSUBSCRIBE. gdb holds the listener as it is about to send it, a second
# waiter arrives, Redis is stopped (SIGSTOP) so that its answer comes only
# after the listener has taken in the new waiter, and the listener goes on
# and sleeps. Redis resumes and answers; once the listener has read the
# answer (its socket's receive queue empty, ss) and sleeps again (in
# epoll_wait, /proc/PID/syscall), it is stopped: its connection must then
# be subscribed in Redis, by a SUBSCRIBE sent before that sleep (the wake
# that takes in the answer also syncs every link, and the scan that saw
# the waiter left the channel marked wanted). A listener that left it to
# its next scan would sleep with the channel unsubscribed for about a
# second; a test that stops it later than that could not tell.
# The waiter then gets the lock when it is released.
# Takes about 12 s.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use File::Temp qw(tempdir);
use IPC::Run ();
use Time::HiRes ();
use RedisLockTest;
use FakeRedisson;
use Test::More;

plan skip_all => 'reads x86-64 Linux system call numbers (/proc/PID/syscall)'
  unless `uname -m` =~ /^x86_64/;
if (system('gdb --version >/dev/null 2>&1') != 0)
{
	plan skip_all => 'gdb is not installed (test/setup-deps.sh installs it)';
}
# gdb stops the listener at a function of ours: it needs redislock.so's
# debug symbols (see 393)
{
	my $so = `pg_config --pkglibdir`;
	chomp $so;
	$so .= '/redislock.so';
	my $info = `gdb -q -batch -iex 'set debuginfod enabled off' -ex 'info address rl_queue_commands' '$so' 2>&1`;
	plan skip_all => "gdb finds no symbol rl_queue_commands in $so (a stripped build: install its debug symbols)"
	  unless $info =~ /Symbol "rl_queue_commands" is/;
}

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('resubscribe', $redis,
	'redislock.watchdog_timeout' => '600s',
	# no wait-for edges sent while Redis is stopped, and a waiter waits for
	# the listener's subscription that long before it subscribes by itself
	'redislock.deadlock_timeout' => '0',
	'redislock.command_timeout'  => '60s');
my $rc  = FakeRedisson::Conn->new(port => $redis->port);
my $obs = RedisLockTest::observer($node);
my $dir = tempdir(CLEANUP => 1);

my $name    = 'rs:lock';
my $channel = FakeRedisson::channel($name);

sub numsub { $rc->cmd('PUBSUB', 'NUMSUB', $_[0])->[1] }

sub listener_pid
{
	return $obs->query("SELECT pid FROM pg_stat_activity WHERE backend_type = 'redislock listener'");
}

until_ok('the listener runs', sub { defined listener_pid() });
my $lpid   = listener_pid();
my $holder = RedisLockTest::Session->new($node);
my $w1     = RedisLockTest::Session->new($node);
my $w2     = RedisLockTest::Session->new($node);
is($holder->query("SELECT redis_lock_acquire('$name', '0', '10 min')"), 't', 'the holder takes the lock');
$w1->start("SELECT redis_lock_acquire('$name', '5 min')");
waits_ok($w1, 'a first waiter');
until_ok('the listener subscribes its channel', sub { numsub($channel) == 1 });
$w1->cancel;

# Redis's count of the commands of a kind it ran
sub calls
{
	my ($cmd) = @_;
	return ($rc->cmd('INFO', 'commandstats') =~ /^cmdstat_$cmd:calls=(\d+)/m)[0] // 0;
}

# The listener asleep in its wait for events: in epoll_wait (232) told of
# more than one event (a connection's own wait is told of one).
sub listener_asleep
{
	my $sc = slurp("/proc/$lpid/syscall");
	return $sc =~ /^232 0x[0-9a-f]+ 0x[0-9a-f]+ 0x([0-9a-f]+) / && hex($1) > 1;
}

# The listener's connection to Redis: its local port, and the bytes it has
# received and not read yet.
sub listener_socket
{
	my $port = $redis->port;
	for (split /\n/, `ss -tnpH state established '( dport = :$port )'`)
	{
		return ($2, $1) if /^\s*(\d+)\s+\d+\s+\S+:(\d+)\s.*pid=$lpid,/;
	}
	return;
}
my ($lport) = listener_socket();
ok(defined $lport, "the listener's connection to Redis is found (ss)");

# The listener's connection as Redis's CLIENT LIST shows it.
sub listener_client
{
	my ($line) = grep { /\baddr=127\.0\.0\.1:$lport\b/ } split /\n/, $rc->cmd('CLIENT', 'LIST');
	return $line // '';
}

# gdb holds the listener at its next send (the UNSUBSCRIBE, once the
# channel has lingered) until told to go, then leaves it. Only that: here
# gdb cannot resume the listener from a breakpoint ("Couldn't write
# extended state status"), but it can detach.
my $go  = "$dir/go";
my $out = "$dir/gdb.out";
open my $fh, '>', "$dir/gdb.cmd" or die $!;
print $fh <<"GDB";
set pagination off
set confirm off
handle SIGUSR1 SIGUSR2 SIGURG SIGINT SIGTERM SIGQUIT SIGALRM SIGPIPE nostop noprint pass
break rl_queue_commands
continue
echo HELD-AT-SEND\\n
delete
shell timeout 300 sh -c 'while [ ! -e $go ]; do sleep 0.05; done'
detach
quit
GDB
close $fh;
my $gdb = IPC::Run::start(
	[ 'gdb', '-q', '-batch', '-iex', 'set debuginfod enabled off',
		'-p', $lpid, '-x', "$dir/gdb.cmd" ],
	'<', \undef, '>', $out, '2>&1');

until_ok('the listener is held as it sends the UNSUBSCRIBE (after its linger)',
	sub { slurp($out) =~ /^HELD-AT-SEND$/m });
like(listener_client(), qr/\bsub=1\b/, '... which Redis has not had yet');
$w2->start("SELECT redis_lock_acquire('$name', '5 min')");
waits_ok($w2, 'a second waiter');
my $unsubs = calls('unsubscribe');
$redis->pause;
open my $g, '>', $go or die $!;
close $g;
eval { $gdb->finish; 1 } or $gdb->kill_kill;
# asleep in epoll_wait: the second waiter's wake-up of the listener (its
# latch, set while gdb held it) has been taken in, or it would not sleep
until_ok('the listener sleeps with the UNSUBSCRIBE sent to a stopped Redis', sub { listener_asleep() });
$redis->resume;
my $t_resume = Time::HiRes::time();
until_ok('Redis runs the UNSUBSCRIBE', sub { calls('unsubscribe') == $unsubs + 1 });
until_ok('... and its answer has left Redis', sub { listener_client() =~ /\bobl=0 oll=0\b/ });

# Stop the listener once it has read that answer and sleeps again: from
# then on it cannot scan, so a subscription Redis shows was sent before it
# slept.
my $stopped = RedisLockTest::wait_until($RedisLockTest::WAIT, 'the listener has read the answer and sleeps', sub {
	return 0 unless listener_asleep() && ((listener_socket())[1] // 1) == 0;
	kill 'STOP', $lpid;
	return 1 if ((listener_socket())[1] // 1) == 0;
	kill 'CONT', $lpid;
	return 0;
});
ok($stopped, 'the listener has read the answer to its UNSUBSCRIBE and sleeps (now stopped)');
note(sprintf('stopped %.3f s after Redis resumed; its connection in Redis: %s',
	Time::HiRes::time() - $t_resume, listener_client()));
until_ok('... having subscribed the channel again for the waiter first, not left it to its next scan',
	sub { listener_client() =~ /\bsub=1\b/ });
kill 'CONT', $lpid;

until_ok('the channel is subscribed', sub { numsub($channel) >= 1 });
is($holder->query("SELECT redis_lock_release('$name')"), 't', 'the holder releases');
my ($v, $err) = $w2->finish($RedisLockTest::WAIT);
is($v, 't', 'the second waiter gets the lock') or diag($err);
$w2->query("SELECT redis_lock_release('$name')");

$_->close for ($holder, $w1, $w2);
no_crash_ok($node, 'resubscribe');
done_testing();
