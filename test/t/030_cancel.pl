# 030_cancel.pl — cancel, statement_timeout and lock_timeout end a wait at
# once with the right SQLSTATE, and a fair waiter that gives up leaves the
# queue without disturbing the others.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use Test::More;

my $T = 60;

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('cancel', $redis,
	'redislock.fair_wait_timeout' => '120s');
my $rc = FakeRedisson::Conn->new(port => $redis->port);

my $a = RedisLockTest::Session->new($node);
my $ctl = RedisLockTest::Session->new($node);

# Starts $n fair waiters on $name one after another (each after the previous
# is queued); returns (sessions, owner ids).
sub fair_waiters
{
	my ($name, $n, $extra) = @_;
	$extra //= '';
	my (@w, @ids);
	my $base = fair_queue_len($rc, $name);
	for my $i (1 .. $n)
	{
		my $s = RedisLockTest::Session->new($node);
		$s->query($extra) if $extra ne '';
		push @ids, $s->query('SELECT redis_lock_owner_id()');
		$s->start("SELECT redis_lock_acquire('$name', NULL, '10 min', true)");
		until_ok("fair waiter $i queued on $name",
			sub { fair_queue_len($rc, $name) == $base + $i });
		waits_ok($s);
		push @w, $s;
	}
	return (\@w, \@ids);
}

# --- 1. cancel a fair waiter in the middle of the queue -----------------------
{
	my $name = 'cx:mid';
	is($a->query("SELECT redis_lock_acquire('$name', '0', '10 min', true)"), 't', 'A holds');
	my ($w, $ids) = fair_waiters($name, 3);
	is_deeply(fair_queue($rc, $name), $ids, 'three waiters queued in order');

	is($ctl->query('SELECT pg_cancel_backend(' . $w->[1]->pid . ')'), 't',
		'pg_cancel_backend on the 2nd waiter');
	my ($v, $err, $st) = $w->[1]->finish($T);
	is($st, '57014', 'cancelled waiter gets 57014 (query_canceled)') or diag("v=$v err=$err");
	until_ok('cancelled waiter left the queue',
		sub { fair_queue_len($rc, $name) == 2 && fair_timeout_count($rc, $name) == 2 });
	is_deeply(fair_queue($rc, $name), [ $ids->[0], $ids->[2] ], 'queue is 1st, 3rd');
	ok(!$rc->cmd('HEXISTS', $name, $ids->[1]), 'cancelled waiter holds nothing');
	is($w->[1]->query('SELECT 1'), '1', 'cancelled session is usable afterwards');

	is($a->query("SELECT redis_lock_release('$name')"), 't', 'A releases');
	($v, $err) = $w->[0]->finish($T);
	is($v, 't', '1st waiter gets the lock') or diag($err);
	ok(!$w->[2]->is_done, '3rd waiter still waits');
	is($w->[0]->query("SELECT redis_lock_release('$name')"), 't', '1st releases');
	($v, $err) = $w->[2]->finish($T);
	is($v, 't', '3rd waiter gets the lock next') or diag($err);
	is($w->[2]->query("SELECT redis_lock_release('$name')"), 't', '3rd releases');
	is(fair_queue_len($rc, $name) + fair_timeout_count($rc, $name), 0, 'queue and timeout set empty');
	$_->close for @$w;
}

# --- 2. cancel the head of the queue (with the harness's cancel) ----------------
{
	my $name = 'cx:head';
	is($a->query("SELECT redis_lock_acquire('$name', '0', '10 min', true)"), 't', 'A holds');
	my ($w, $ids) = fair_waiters($name, 2);
	my ($v, $err, $st) = $w->[0]->cancel($T);
	is($st, '57014', 'cancelled head gets 57014') or diag("v=$v err=$err");
	until_ok('head left the queue', sub { fair_queue_len($rc, $name) == 1 });
	is_deeply(fair_queue($rc, $name), [ $ids->[1] ], 'the 2nd waiter is now the head');
	is($a->query("SELECT redis_lock_release('$name')"), 't', 'A releases');
	($v, $err) = $w->[1]->finish($T);
	is($v, 't', 'the new head is woken and gets the lock') or diag($err);
	is($w->[1]->query("SELECT redis_lock_release('$name')"), 't', 'release');
	$_->close for @$w;
}

# --- 3. cancel a non-fair waiter: no lock leaked, holder unaffected -------------
{
	my $name = 'cx:nonfair';
	is($a->query("SELECT redis_lock_acquire('$name', '0', '10 min')"), 't', 'A holds');
	my $b = RedisLockTest::Session->new($node);
	my $b_id = $b->query('SELECT redis_lock_owner_id()');
	$b->start("SELECT redis_lock_acquire('$name')");
	waits_ok($b);
	my ($v, $err, $st) = $b->cancel($T);
	is($st, '57014', 'cancelled non-fair waiter gets 57014') or diag("v=$v err=$err");
	is($b->query("SELECT held_by_me FROM redis_lock_status('$name')"), 'f',
		'cancelled waiter does not hold it');
	is(scalar(@{ $rc->cmd('HGETALL', $name) }), 2, 'A is still the only holder');
	is($a->query("SELECT redis_lock_release('$name')"), 't', 'A releases');
	is($rc->cmd('EXISTS', $name), 0, 'nothing left behind');
	$b->close;
}

# --- 4. statement_timeout ends a wait with 57014 ---------------------------------
{
	my $name = 'cx:stmt';
	is($a->query("SELECT redis_lock_acquire('$name', '0', '10 min', true)"), 't', 'A holds');
	my $b = RedisLockTest::Session->new($node);
	$b->query("SET statement_timeout = '500ms'");
	my ($v, $err, $st) = $b->try("SELECT redis_lock_acquire('$name')");
	is($st, '57014', 'statement_timeout ends a NULL wait with 57014') or diag("v=$v err=$err");
	($v, $err, $st) = $b->try("SELECT redis_lock_acquire('$name', NULL, NULL, true)");
	is($st, '57014', 'statement_timeout ends a fair NULL wait with 57014') or diag("v=$v err=$err");
	is(fair_queue_len($rc, $name), 0, 'fair waiter ended by statement_timeout left the queue');
	is(fair_timeout_count($rc, $name), 0, '... and the timeout set');
	($v, $err, $st) = $b->try("SELECT redis_lock_acquire('$name', '1 h')");
	is($st, '57014', 'statement_timeout also cuts an explicit long wait') or diag("v=$v err=$err");
	$b->query('RESET statement_timeout');
	is($b->query("SELECT redis_lock_acquire('$name', '0')"), 'f', 'session usable, lock still busy');
	is($a->query("SELECT redis_lock_release('$name')"), 't', 'A releases');
	$b->close;
}

# --- 5. lock_timeout ends a NULL wait with 55P03; an explicit wait is not cut ----
{
	my $name = 'cx:lockto';
	is($a->query("SELECT redis_lock_acquire('$name', '0', '10 min')"), 't', 'A holds');
	my $b = RedisLockTest::Session->new($node);
	$b->query("SET lock_timeout = '300ms'");
	my ($v, $err, $st) = $b->try("SELECT redis_lock_acquire('$name')");
	is($st, '55P03', 'lock_timeout ends a NULL wait with 55P03 (lock_not_available)')
	  or diag("v=$v err=$err");
	($v, $err, $st) = $b->try("SELECT redis_lock_acquire('$name', NULL, NULL, true)");
	is($st, '55P03', 'lock_timeout ends a fair NULL wait with 55P03') or diag("v=$v err=$err");
	is(fair_queue_len($rc, $name), 0, 'fair waiter ended by lock_timeout left the queue');

	# explicit wait longer than lock_timeout: runs its own course
	($v, $err, $st) = $b->try("SELECT redis_lock_acquire('$name', '1s')");
	is($v, 'f', "an explicit wait '1s' with lock_timeout 300ms returns f, not an error")
	  or diag("err=$err state=$st");

	# and an explicit wait still gets the lock when it is released; the
	# waiter is past lock_timeout when the release comes (observed below)
	$b->start("SELECT redis_lock_acquire('$name', '5 min')");
	waits_ok($b);
	# let more than lock_timeout (300ms) pass while B waits; this is not a
	# timing assertion, only a way to be past the point where a wrongly
	# applied lock_timeout would have fired
	select(undef, undef, undef, 1.0);
	ok(!$b->is_done, 'explicit wait still waiting past lock_timeout');
	is($a->query("SELECT redis_lock_release('$name')"), 't', 'A releases');
	($v, $err, $st) = $b->finish($T);
	is($v, 't', 'explicit waiter gets the lock') or diag("err=$err state=$st");
	is($b->query("SELECT redis_lock_release('$name')"), 't', 'B releases');
	$b->close;
}

# --- 6. a fair waiter whose own wait runs out leaves the queue ------------------
{
	my $name = 'cx:fairwait';
	is($a->query("SELECT redis_lock_acquire('$name', '0', '10 min', true)"), 't', 'A holds');
	my ($w, $ids) = fair_waiters($name, 1);    # a NULL-wait waiter first
	my $b = RedisLockTest::Session->new($node);
	my $b_id = $b->query('SELECT redis_lock_owner_id()');
	$b->start("SELECT redis_lock_acquire('$name', '2s', '10 min', true)");
	until_ok('timed fair waiter queued', sub { fair_queue_len($rc, $name) == 2 });
	is_deeply(fair_queue($rc, $name), [ $ids->[0], $b_id ], 'timed waiter is behind the first');
	my ($v, $err, $st) = $b->finish($T);
	is($v, 'f', 'timed fair waiter returns f when its wait ends') or diag("err=$err st=$st");
	is_deeply(fair_queue($rc, $name), [ $ids->[0] ], 'it left the queue, the first stays');
	is(fair_timeout_count($rc, $name), 1, 'and its timeout entry is gone');
	is($a->query("SELECT redis_lock_release('$name')"), 't', 'A releases');
	($v, $err) = $w->[0]->finish($T);
	is($v, 't', 'the remaining waiter gets the lock') or diag($err);
	is($w->[0]->query("SELECT redis_lock_release('$name')"), 't', 'release');
	is(fair_queue_len($rc, $name) + fair_timeout_count($rc, $name), 0, 'queue empty');
	$_->close for @$w, $b;
}

# --- 7. cancel inside a transaction: xact wait, the transaction is aborted --------
{
	my $name = 'cx:xact';
	is($a->query("SELECT redis_lock_acquire('$name', '0', '10 min')"), 't', 'A holds');
	my $b = RedisLockTest::Session->new($node);
	$b->query('BEGIN');
	$b->start("SELECT redis_xact_lock_acquire('$name')");
	waits_ok($b);
	my ($v, $err, $st) = $b->cancel($T);
	is($st, '57014', 'cancelled xact waiter gets 57014') or diag("v=$v err=$err");
	$b->query('ROLLBACK');
	is($b->query("SELECT redis_lock_acquire('$name', '0')"), 'f', 'still held by A');
	is($a->query("SELECT redis_lock_release('$name')"), 't', 'A releases');
	is($b->query("SELECT redis_lock_acquire('$name', '0', '10 min')"), 't',
		'B can take it now');
	is($b->query("SELECT redis_lock_release('$name')"), 't', 'B releases');
	$b->close;
}

$a->close;
$ctl->close;
done_testing();
