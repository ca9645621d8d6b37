# 394_listener_fair_place.pl — a fair waiter keeps its place in the queue
# while it waits for the listener to subscribe its channel. A fair waiter's
# place lives redislock.fair_wait_timeout unless renewed, and waiters renew
# it every third of that; the wait for the listener to say READY lasts up
# to command_timeout, and before, it renewed nothing meanwhile: with the
# listener slow, the first waiter's place ran out, the next waiter took the
# head, and FIFO was broken.
# As in Redisson, a first waiter's place starts at the lock's remaining
# lease plus fair_wait_timeout: the holder holds on the watchdog with a 2 s
# watchdog_timeout, so W1's first deadline comes within 3 s.
#
# The listener is stopped (SIGSTOP) so that it subscribes nothing: W1 waits
# on the board for as long as command_timeout (2 minutes here), far longer
# than its place lives (1 s). W2, queued behind it, has Redis settings of
# its own (the same server, written differently), so it subscribes by
# itself, renews its place, and would drop an expired head. W1's place must
# be renewed past its first deadline with the queue still W1, W2; once the
# holder releases (heard by nobody: W1's channel is not subscribed), W1 gets
# the lock first and W2 after it (fencing tokens in that order). The same
# for a writer's mark, the place a writer waiting behind readers keeps.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use Test::More;

my $BOUND = 60;
my $NAME  = 'l394:fair';

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('fair_place', $redis,
	'redislock.fair_wait_timeout' => '1s',
	'redislock.watchdog_timeout'  => '2s',
	'redislock.command_timeout'   => '2min');
my $rc  = FakeRedisson::Conn->new(port => $redis->port);
my $obs = RedisLockTest::observer($node);

sub listener_pid
{
	return $obs->query("SELECT pid FROM pg_stat_activity WHERE backend_type = 'redislock listener'");
}

sub place_deadline
{
	my ($owner) = @_;
	return $rc->cmd('ZSCORE', FakeRedisson::timeout_key($NAME), $owner);
}

my $h  = RedisLockTest::Session->new($node);
my $w1 = RedisLockTest::Session->new($node);
my $w2 = RedisLockTest::Session->new($node);
$w2->query("SET redislock.url = '" . $redis->url . "/0'");
my $o1 = $w1->query('SELECT redis_lock_owner_id()');
my $o2 = $w2->query('SELECT redis_lock_owner_id()');

until_ok('the listener runs', sub { defined listener_pid() });
is($h->query("SELECT redis_lock_acquire('$NAME', '0', NULL, true)"), 't',
	'the holder takes the fair lock (watchdog lease, 2 s)');
my $listener = RedisLockTest::stop_listener($node);
ok(defined $listener, 'the listener is stopped: it subscribes nothing');

$w1->start("SELECT redis_lock_acquire('$NAME', '5 min', '10 min', true)");
until_ok('W1 is queued', sub { join(',', @{ fair_queue($rc, $NAME) }) eq $o1 });
waits_ok($w1, 'W1, waiting for the listener,');
my $first = place_deadline($o1);
$w2->start("SELECT redis_lock_acquire('$NAME', '5 min', '10 min', true)");
until_ok('W2 is queued behind W1', sub { join(',', @{ fair_queue($rc, $NAME) }) eq "$o1,$o2" });

until_ok('W1 renews its place past its first deadline while the listener is stopped', sub {
		my $d = place_deadline($o1);
		defined $d && $d > $first + 1000;
	});
is(join(',', @{ fair_queue($rc, $NAME) }), "$o1,$o2", 'the queue is still W1, W2');

is($h->query("SELECT redis_lock_release('$NAME')"), 't',
	'the holder releases (W1 hears nothing: its channel is not subscribed)');
my ($v1, $e1) = $w1->finish($BOUND);
$w1->cancel if defined $e1 && $e1 =~ /^timeout/;
is($v1, 't', 'W1 gets the lock first') or diag($e1 // 'no error');
my $t1 = $w1->query("SELECT redis_lock_fencing_token('$NAME')");
ok(!$w2->is_done, 'W2 still waits while W1 holds it');
is($w1->query("SELECT redis_lock_release('$NAME')"), 't', 'W1 releases');
my ($v2, $e2) = $w2->finish($BOUND);
$w2->cancel if defined $e2 && $e2 =~ /^timeout/;
is($v2, 't', 'W2 gets the lock after W1') or diag($e2 // 'no error');
my $t2 = $w2->query("SELECT redis_lock_fencing_token('$NAME')");
ok(defined $t1 && defined $t2 && $t1 < $t2, "fencing tokens in FIFO order (" . ($t1 // "none") . ", " . ($t2 // "none") . ")");
is($w2->query("SELECT redis_lock_release('$NAME')"), 't', 'W2 releases');

# --- a waiting writer's mark, the other place a waiter renews --------------------------
# A writer waiting behind readers keeps a mark that new readers of ours let
# pass; it lives fair_wait_timeout unless renewed. With the listener still
# stopped, the writer's mark must be renewed (its PTTL goes up again), a
# new reader must stay out, and the writer gets the lock once the reader
# releases.
my $RW   = 'l394:rw';
my $mark = FakeRedisson::prefix_name('redislock_rwlock_writer', $RW);
is($h->query("SELECT redis_read_lock_acquire('$RW', '0', '10 min')"), 't',
	'writer: a reader holds the lock for 10 minutes');
$w1->start("SELECT redis_write_lock_acquire('$RW', '5 min', '10 min')");
until_ok('writer: its mark is up', sub { $rc->cmd('EXISTS', $mark) == 1 });
my $last;
until_ok('writer: its mark is renewed while the listener is stopped', sub {
		my $p = $rc->cmd('PTTL', $mark);
		my $renewed = defined $last && $p > $last;
		$last = $p;
		return $renewed;
	});
is($w2->query("SELECT redis_read_lock_acquire('$RW', '0', '10 min')"), 'f',
	'writer: a new reader stays out behind the waiting writer');
is($h->query("SELECT redis_read_lock_release('$RW')"), 't', 'writer: the reader releases');
my ($vw, $ew) = $w1->finish($BOUND);
$w1->cancel if defined $ew && $ew =~ /^timeout/;
is($vw, 't', 'writer: the writer gets the lock') or diag($ew // 'no error');
is($w1->query("SELECT redis_write_lock_release('$RW')"), 't', 'writer: the writer releases');

ok(kill('CONT', $listener), 'the listener resumes');
is($rc->cmd('EXISTS', $NAME, FakeRedisson::queue_key($NAME), $RW, $mark), 0, 'nothing left in Redis');
RedisLockTest::no_crash_ok($node, 'fair place');

$_->close for $h, $w1, $w2;
$node->stop;
done_testing();
