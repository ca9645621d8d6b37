# 393_listener_lapse.pl — no lost wake-up when the listener drops and
# subscribes anew while a waiter is between two sleeps. A wait wakes every
# redislock.deadlock_timeout to run the deadlock check; the round that
# follows makes no attempt unless something may have changed. If the
# listener's connection drops and a release is published before it has
# subscribed anew, and all of it lands after the waiter's sleep ended and
# before it looks at the board again, the waiter must still try again:
# before, that look cleared the listener's mark and the waiter slept on
# to the holder's lease end with the lock free.
#
# The window is made deterministic by holding the waiter there: gdb stops
# it on entering rl_wakeup_ready, the board's look at the start of each
# round. Nothing but the deadlock check can end its sleep here (the lease
# is 10 minutes and nobody else touches the name), so that round follows a
# deadlock-check wake. Meanwhile the listener is stopped (SIGSTOP), its
# subscriber connection killed (CLIENT KILL TYPE pubsub) and the holder
# releases, published to nobody; then the listener resumes, sees the drop
# and subscribes again. Once released by gdb, the waiter must get what it
# waits for within a bound far below the lease. Every kind of wait that
# uses the board is run this way.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use File::Temp qw(tempdir);
use IPC::Run ();
use RedisLockTest;
use FakeRedisson;
use Test::More;

# Every hold here has a 10-minute lease (a semaphore's holders, renewed by
# the worker, the watchdog's 10 minutes); the waiter may wait 5 minutes,
# and must get what it waits for within $BOUND seconds (a wait also tries
# once more at its own end, which must not be what saves it).
my $BOUND = 60;
my $WAIT_FOR = '5 min';

if (system('gdb --version >/dev/null 2>&1') != 0)
{
	plan skip_all => 'gdb is not installed (test/setup-deps.sh installs it)';
}
# gdb stops the waiter at a function of ours: a packaged redislock.so is
# stripped, and from PostgreSQL 16 on its functions are hidden, so gdb
# needs the package's debug symbols (postgresql-NN-redislock-dbgsym).
{
	my $so = `pg_config --pkglibdir`;
	chomp $so;
	$so .= '/redislock.so';
	my $info = `gdb -q -batch -iex 'set debuginfod enabled off' -ex 'info address rl_wakeup_ready' '$so' 2>&1`;
	plan skip_all => "gdb finds no symbol rl_wakeup_ready in $so (a stripped build: install its debug symbols, postgresql-NN-redislock-dbgsym)"
	  unless $info =~ /Symbol "rl_wakeup_ready" is/;
}

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('lapse', $redis,
	'redislock.deadlock_timeout'  => '100ms',
	'redislock.fair_wait_timeout' => '10min',
	'redislock.watchdog_timeout'  => '600s');
my $rc  = FakeRedisson::Conn->new(port => $redis->port);
my $obs = RedisLockTest::observer($node);
my $dir = tempdir(CLEANUP => 1);

sub listener_pid
{
	return $obs->query("SELECT pid FROM pg_stat_activity WHERE backend_type = 'redislock listener'");
}

# subscribers of a channel, as Redis counts them
sub numsub
{
	my ($channel) = @_;
	my $r = $rc->cmd('PUBSUB', 'NUMSUB', $channel);
	return $r->[1];
}

# Stops backend $pid at its next entry to rl_wakeup_ready, under gdb;
# returns a handle for held() and let_go().
sub hold_at_next_round
{
	my ($pid, $tag) = @_;
	my $go  = "$dir/go-$tag";
	my $out = "$dir/gdb-$tag.out";
	open my $fh, '>', "$dir/gdb-$tag.cmd" or die $!;
	print $fh <<"GDB";
set pagination off
set confirm off
handle SIGUSR1 SIGUSR2 SIGURG SIGINT SIGTERM SIGQUIT SIGALRM SIGPIPE nostop noprint pass
break rl_wakeup_ready
continue
echo HELD-AT-ROUND\\n
bt 4
delete
shell timeout 300 sh -c 'while [ ! -e $go ]; do sleep 0.05; done'
detach
quit
GDB
	close $fh;
	my $h = IPC::Run::start(
		[ 'gdb', '-q', '-batch', '-iex', 'set debuginfod enabled off',
			'-p', $pid, '-x', "$dir/gdb-$tag.cmd" ],
		'<', \undef, '>', $out, '2>&1');
	return { h => $h, go => $go, out => $out };
}

sub held
{
	my ($g) = @_;
	return slurp($g->{out}) =~ /^HELD-AT-ROUND$/m;
}

sub let_go
{
	my ($g) = @_;
	open my $fh, '>', $g->{go} or die $!;
	close $fh;
	eval { $g->{h}->finish; 1 } or $g->{h}->kill_kill;
}

my $holder = RedisLockTest::Session->new($node);
my $waiter = RedisLockTest::Session->new($node);

# Each kind of wait: what the holder takes (10-minute lease), what the
# waiter runs (true when it got it), how the holder lets go (given what
# take returned), and the channel the release is published on (a fair
# waiter's is its own).
my @kinds = (
	{   kind    => 'lock',
		take    => "SELECT redis_lock_acquire('l393:lock', '0', '10 min')",
		wait    => "SELECT redis_lock_acquire('l393:lock', '$WAIT_FOR', '10 min') AND redis_lock_release('l393:lock')",
		release => "SELECT redis_lock_release('l393:lock')",
		channel => FakeRedisson::channel('l393:lock') },
	{   kind    => 'fair lock',
		take    => "SELECT redis_lock_acquire('l393:fair', '0', '10 min', true)",
		wait    => "SELECT redis_lock_acquire('l393:fair', '$WAIT_FOR', '10 min', true) AND redis_lock_release('l393:fair')",
		release => "SELECT redis_lock_release('l393:fair')",
		channel => sub { FakeRedisson::fair_channel('l393:fair', $waiter->query('SELECT redis_lock_owner_id()')) } },
	{   kind    => 'xact lock',
		take    => "SELECT redis_lock_acquire('l393:xact', '0', '10 min')",
		wait    => "SELECT redis_xact_lock_acquire('l393:xact', '$WAIT_FOR', '10 min')",
		release => "SELECT redis_lock_release('l393:xact')",
		channel => FakeRedisson::channel('l393:xact') },
	{   kind    => 'write lock behind a read lock',
		take    => "SELECT redis_read_lock_acquire('l393:rw', '0', '10 min')",
		wait    => "SELECT redis_write_lock_acquire('l393:rw', '$WAIT_FOR', '10 min') AND redis_write_lock_release('l393:rw')",
		release => "SELECT redis_read_lock_release('l393:rw')",
		channel => FakeRedisson::rw_channel('l393:rw') },
	{   kind    => 'read lock behind a write lock',
		take    => "SELECT redis_write_lock_acquire('l393:wr', '0', '10 min')",
		wait    => "SELECT redis_read_lock_acquire('l393:wr', '$WAIT_FOR', '10 min') AND redis_read_lock_release('l393:wr')",
		release => "SELECT redis_write_lock_release('l393:wr')",
		channel => FakeRedisson::rw_channel('l393:wr') },
	{   kind    => 'multi-lock',
		take    => "SELECT redis_lock_acquire('l393:m2', '0', '10 min')",
		wait    => "SELECT redis_lock_acquire_all(ARRAY['l393:m1', 'l393:m2'], '$WAIT_FOR', '10 min') AND redis_lock_release('l393:m1') AND redis_lock_release('l393:m2')",
		release => "SELECT redis_lock_release('l393:m2')",
		channel => FakeRedisson::channel('l393:m2') },
	{   kind    => 'semaphore',
		setup   => "SELECT redis_semaphore_try_set_permits('l393:sem', 1)",
		take    => "SELECT redis_semaphore_acquire('l393:sem', 1, '0')",
		wait    => "SELECT redis_semaphore_acquire('l393:sem', 1, '$WAIT_FOR') AND redis_semaphore_release('l393:sem')",
		release => "SELECT redis_semaphore_release('l393:sem')",
		channel => FakeRedisson::prefix_name('redisson_sc', 'l393:sem') },
	{   kind    => 'expiring permit',
		setup   => "SELECT redis_permit_try_set_permits('l393:permit', 1)",
		take    => "SELECT redis_permit_acquire('l393:permit', '0', '10 min')",
		wait    => "SELECT redis_permit_acquire('l393:permit', '$WAIT_FOR', '10 min') IS NOT NULL",
		release => "SELECT redis_permit_release('l393:permit', '%s')",
		channel => FakeRedisson::prefix_name('redisson_sc', 'l393:permit') },
	{   kind    => 'latch',
		setup   => "SELECT redis_latch_try_set_count('l393:latch', 1)",
		wait    => "SELECT redis_latch_await('l393:latch', '$WAIT_FOR')",
		release => "SELECT redis_latch_count_down('l393:latch') = 0",
		channel => 'redisson_countdownlatch__channel__{l393:latch}' },
);

until_ok('the listener runs', sub { defined listener_pid() });
my $tag = 0;
for my $k (@kinds)
{
	my $what = $k->{kind};
	$tag++;
	# one case failing must not stop the others: report it, go on with a
	# new waiting session
	next if eval { run_case($k, $tag); 1 };
	fail("$what: the case ran to its end") or diag($@);
	eval { $waiter->terminate; 1 };
	$waiter = RedisLockTest::Session->new($node);
}

sub run_case
{
	my ($k, $tag) = @_;
	my $what = $k->{kind};
	my $channel = ref $k->{channel} ? $k->{channel}->() : $k->{channel};
	my $taken;
	is($holder->query($k->{setup}), 't', "$what: set up") if $k->{setup};
	if ($k->{take})
	{
		$taken = $holder->query($k->{take});
		ok(defined $taken && $taken ne 'f', "$what: the holder takes it for 10 minutes");
	}
	$waiter->start($k->{wait});
	waits_ok($waiter, "$what: the waiter");
	until_ok("$what: the listener has the channel subscribed", sub { numsub($channel) == 1 });

	my $gdb = hold_at_next_round($waiter->pid, $tag);
	until_ok("$what: the waiter is held at the round after a deadlock-check wake", sub { held($gdb) })
	  or diag(slurp($gdb->{out}));

	my $listener = RedisLockTest::stop_listener($node);
	ok(defined $listener, "$what: the listener is stopped");
	ok($rc->cmd('CLIENT', 'KILL', 'TYPE', 'pubsub') >= 1, "$what: CLIENT KILL TYPE pubsub");
	until_ok("$what: nobody is subscribed", sub { numsub($channel) == 0 });
	is($holder->query(sprintf($k->{release}, $taken // '')), 't', "$what: the holder lets go, heard by nobody");
	ok(kill('CONT', $listener), "$what: the listener resumes");
	until_ok("$what: the listener has subscribed anew", sub { numsub($channel) == 1 });

	let_go($gdb);
	note(slurp($gdb->{out}));
	my ($v, $err) = $waiter->finish($BOUND);
	is($v, 't', "$what: the waiter gets it within ${BOUND}s, though it was between two sleeps when the release went unheard")
	  or diag($err // 'no error');
	if (defined $err && $err =~ /^timeout/)
	{
		my (undef, $cerr) = $waiter->cancel;
		die "the waiter did not end on cancel: $cerr\n" if defined $cerr && $cerr =~ /^timeout/;
	}
	return;
}

is($rc->cmd('EXISTS', 'l393:lock', 'l393:fair', 'l393:xact', 'l393:rw', 'l393:wr', 'l393:m1', 'l393:m2'), 0,
	'no lock left in Redis');
RedisLockTest::no_crash_ok($node, 'lapse');

$_->close for $holder, $waiter;
$node->stop;
done_testing();
