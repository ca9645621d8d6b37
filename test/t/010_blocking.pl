# 010_blocking.pl — a waiter blocks while the lock is held and is woken by the
# unlock publish; bounded waits end with false.
#
# Holders use a long fixed lease ('10 min'), so only the release's publish
# (not an expiry) can explain a waiter getting the lock within the bounded
# wait used here.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use Test::More;

my $T = 60;    # generous upper bound for anything that should happen "at once"

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('blocking', $redis);
my $rc    = FakeRedisson::Conn->new(port => $redis->port);

# bounded waits on observable state, each one a test

my $a = RedisLockTest::Session->new($node);
my $b = RedisLockTest::Session->new($node);
my $c = RedisLockTest::Session->new($node);

my $a_id = $a->query('SELECT redis_lock_owner_id()');
my $b_id = $b->query('SELECT redis_lock_owner_id()');
like($a_id, qr/^[0-9a-f-]{36}:\d+$/, 'owner id looks like <uuid>:<n>');
isnt($a_id, $b_id, 'two sessions have different owner ids');

sub pubsub_numsub
{
	my ($chan) = @_;
	my $r = $rc->cmd('PUBSUB', 'NUMSUB', $chan);
	return $r->[1];
}

# --- 1. blocking wait (wait NULL) woken by release --------------------------
{
	my $name = 'blk:1';
	is($a->query("SELECT redis_lock_acquire('$name', '0', '10 min')"),
		't', 'A takes the lock with a 10 min lease');
	is($rc->cmd('HGET', $name, $a_id), '1', 'hash field <A owner> = 1');
	cmp_ok($rc->cmd('PTTL', $name), '>', 60_000, 'lease is the fixed 10 min');

	$b->start("SELECT redis_lock_acquire('$name')");
	waits_ok($b);
	ok(!$b->is_done, 'B has not returned while A holds the lock');
	until_ok('B subscribed to the unlock channel',
		sub { pubsub_numsub(FakeRedisson::channel($name)) >= 1 });
	ok(!$rc->cmd('HEXISTS', $name, $b_id), 'B holds nothing in Redis');

	is($a->query("SELECT redis_lock_release('$name')"), 't', 'A releases');
	my ($v, $err, $state) = $b->finish($T);
	is($v, 't', 'B is woken and returns t') or diag("err=$err state=$state");
	is($rc->cmd('HGET', $name, $b_id), '1', 'B is now the holder in Redis');
	ok(!$rc->cmd('HEXISTS', $name, $a_id), 'A field is gone');
	is($b->query("SELECT held_by_me FROM redis_lock_status('$name')"), 't',
		'redis_lock_status: held_by_me for B');
	is($a->query("SELECT held_by_me FROM redis_lock_status('$name')"), 'f',
		'redis_lock_status: not held_by_me for A');
	is($b->query("SELECT redis_lock_release('$name')"), 't', 'B releases');
	is($rc->cmd('EXISTS', $name), 0, 'key gone after the last release');
	until_ok('B unsubscribed after its wait',
		sub { pubsub_numsub(FakeRedisson::channel($name)) == 0 });
}

# --- 2. bounded waits ---------------------------------------------------------
{
	my $name = 'blk:2';
	is($a->query("SELECT redis_lock_acquire('$name', '0', '10 min')"), 't',
		'A holds blk:2');
	is($b->query("SELECT redis_lock_acquire('$name', '0')"), 'f',
		"wait '0' returns f while held");
	is($b->query("SELECT redis_lock_acquire('$name', '300ms')"), 'f',
		"wait '300ms' returns f when the lock stays held");
	is($b->query("SELECT redis_lock_acquire('$name', '300ms', '10 min', true)"), 'f',
		"fair wait '300ms' returns f when the lock stays held");
	ok(!$rc->cmd('HEXISTS', $name, $b_id), 'B holds nothing after the failed waits');
	is(fair_queue_len($rc, $name), 0, 'failed fair wait left the queue');
	is($rc->cmd('HGET', $name, $a_id), '1', 'A still holds with count 1');

	# a timed wait that gets the lock before its end returns t
	$b->start("SELECT redis_lock_acquire('$name', '5 min', '10 min')");
	waits_ok($b);
	is($a->query("SELECT redis_lock_release('$name')"), 't', 'A releases');
	my ($v, $err) = $b->finish($T);
	is($v, 't', 'timed waiter woken by the release returns t') or diag($err);
	is($b->query("SELECT redis_lock_release('$name')"), 't', 'B releases');
}

# --- 3. reentrant holder: only the last release wakes the waiter --------------
{
	my $name = 'blk:3';
	is($a->query("SELECT redis_lock_acquire('$name', '0', '10 min')"), 't', 'A 1st hold');
	is($a->query("SELECT redis_lock_acquire('$name', '0', '10 min')"), 't', 'A 2nd hold');
	is($rc->cmd('HGET', $name, $a_id), '2', 'hold count 2 in Redis');
	is($a->query("SELECT hold_count FROM redis_lock_status('$name')"), '2',
		'redis_lock_status hold_count 2');

	$b->start("SELECT redis_lock_acquire('$name')");
	waits_ok($b);
	is($a->query("SELECT redis_lock_release('$name')"), 't', 'A drops one hold');
	is($rc->cmd('HGET', $name, $a_id), '1', 'hold count back to 1');
	# B must still be waiting: the lock is still A's
	waits_ok($b);
	ok(!$b->is_done, 'B still waits after the first release');
	is($a->query("SELECT redis_lock_release('$name')"), 't', 'A drops the last hold');
	my ($v, $err) = $b->finish($T);
	is($v, 't', 'B gets the lock after the last release') or diag($err);
	$a->notices;
	my ($v2, $err2) = $a->try("SELECT redis_lock_release('$name')");
	is($v2, 'f', 'a third release by A returns f (not held)');
	like(join("\n", $a->notices), qr/WARNING/, '... with a WARNING');
	is($b->query("SELECT redis_lock_release('$name')"), 't', 'B releases');
}

# --- 4. expiry of a fixed lease wakes the waiter without any publish ----------
{
	my $name = 'blk:4';
	is($a->query("SELECT redis_lock_acquire('$name', '0', '2s')"), 't',
		'A holds with a 2 s fixed lease');
	$b->start("SELECT redis_lock_acquire('$name', NULL, '10 min')");
	waits_ok($b);
	my ($v, $err) = $b->finish($T);
	is($v, 't', 'B gets the lock once the lease has run out') or diag($err);
	is($rc->cmd('HGET', $name, $b_id), '1', 'B is the holder');
	my ($rv) = $a->try("SELECT redis_lock_release('$name')");
	is($rv, 'f', 'A release after expiry returns f');
	is($rc->cmd('HGET', $name, $b_id), '1', "A's late release did not touch B's hold");
	is($b->query("SELECT redis_lock_release('$name')"), 't', 'B releases');
}

# --- 5. several waiters on one lock, one wake each release ---------------------
{
	my $name = 'blk:5';
	is($a->query("SELECT redis_lock_acquire('$name', '0', '10 min')"), 't', 'A holds');
	my @w = map { RedisLockTest::Session->new($node) } 1 .. 3;
	for my $s (@w)
	{
		$s->start("SELECT redis_lock_acquire('$name', NULL, '10 min')");
		waits_ok($s);
	}
	is($a->query("SELECT redis_lock_release('$name')"), 't', 'A releases');
	my %done;
	for my $round (1 .. 3)
	{
		my $winner = first_done_ok("round $round: a waiter returns",
			map { $done{$_} ? undef : $w[$_] } 0 .. $#w);
		last unless defined $winner;
		my ($v, $err) = $w[$winner]->finish($T);
		is($v, 't', "round $round: the woken waiter got the lock") or diag($err);
		$done{$winner} = 1;
		my $h = $rc->cmd('HGETALL', $name);
		is(scalar(@$h), 2, "round $round: exactly one holder field in Redis");
		for my $i (0 .. $#w)
		{
			next if $done{$i};
			ok(!$w[$i]->is_done, "round $round: waiter $i still waiting");
		}
		is($w[$winner]->query("SELECT redis_lock_release('$name')"), 't',
			"round $round: winner releases");
	}
	is($rc->cmd('EXISTS', $name), 0, 'lock free at the end');
	$_->close for @w;
}

$a->close;
$b->close;
$c->close;
done_testing();
