# 040_session_end.pl — a session that ends releases its locks at once and
# wakes the waiters; transaction locks end with the transaction; session
# locks survive ROLLBACK.
#
# Holders use a '10 min' fixed lease, so a waiter getting the lock within the
# bounded wait can only be explained by the release, not by expiry.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use Test::More;

my $T = 60;

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('sessend', $redis,
	'redislock.fair_wait_timeout' => '120s');
my $rc = FakeRedisson::Conn->new(port => $redis->port);

# Holder $how-ends while a waiter waits: the waiter gets the lock promptly.
sub end_holder_wakes_waiter
{
	my ($how, $name) = @_;
	my $l = sql_literal($name);
	my $a = RedisLockTest::Session->new($node);
	my $b = RedisLockTest::Session->new($node);
	my $a_id = $a->query('SELECT redis_lock_owner_id()');
	my $b_id = $b->query('SELECT redis_lock_owner_id()');
	is($a->query("SELECT redis_lock_acquire($l, '0', '10 min')"), 't', "$how: A holds");
	is($a->query("SELECT redis_lock_acquire($l, '0', '10 min')"), 't', "$how: A holds twice");
	is($rc->cmd('HGET', $name, $a_id), '2', "$how: count 2 in Redis");
	$b->start("SELECT redis_lock_acquire($l, NULL, '10 min')");
	waits_ok($b, "$how: B");

	if ($how eq 'disconnect')
	{
		$a->close;
	}
	elsif ($how eq 'terminate')
	{
		ok($a->terminate($T), "$how: A's backend is gone");
	}
	elsif ($how eq 'exit')
	{
		# the backend exits by itself (FATAL from idle_session_timeout)
		$a->query("SET idle_session_timeout = '200ms'");
	}
	my ($v, $err, $st) = $b->finish($T);
	is($v, 't', "$how: waiter gets the lock when the holder's session ends")
	  or diag("err=$err state=$st");
	ok(!$rc->cmd('HEXISTS', $name, $a_id), "$how: the ended session's field is gone");
	is($rc->cmd('HGET', $name, $b_id), '1', "$how: B holds with count 1");
	is($b->query("SELECT redis_lock_release($l)"), 't', "$how: B releases");
	is($rc->cmd('EXISTS', $name), 0, "$how: key gone");
	$b->close;
	$a->close;
}

end_holder_wakes_waiter('disconnect', 'end:disc');
end_holder_wakes_waiter('terminate', 'end:term');
end_holder_wakes_waiter('exit', 'end:exit');
# unusual names through the same path
end_holder_wakes_waiter('terminate', "it's a \"name\"\nwith newline");
end_holder_wakes_waiter('disconnect', "\xe6\x97\xa5\xe6\x9c\xac {\xd0\xb7\xd0\xb0\xd0\xbc\xd0\xbe\xd0\xba}");
end_holder_wakes_waiter('terminate', 'L' x 512);

# --- all of a session's locks go, and no waiter is left stuck -------------------
{
	my $a = RedisLockTest::Session->new($node);
	my $a_id = $a->query('SELECT redis_lock_owner_id()');
	my @names = ('many:1', 'many:2', 'many {3}', 'many:fair');
	is($a->query("SELECT redis_lock_acquire('many:1', '0', '10 min')"), 't', 'A: many:1');
	is($a->query("SELECT redis_lock_acquire('many:2', '0', '10 min')"), 't', 'A: many:2');
	is($a->query("SELECT redis_lock_acquire('many:2', '0', '10 min')"), 't', 'A: many:2 again');
	is($a->query("SELECT redis_lock_acquire('many {3}')"), 't', 'A: many {3} (watchdog)');
	is($a->query("SELECT redis_lock_acquire('many:fair', '0', '10 min', true)"), 't',
		'A: many:fair (fair)');
	# a fair waiter on many:fair and a non-fair one on many:1
	my $f = RedisLockTest::Session->new($node);
	$f->start("SELECT redis_lock_acquire('many:fair', NULL, '10 min', true)");
	until_ok('fair waiter queued', sub { fair_queue_len($rc, 'many:fair') == 1 });
	my $n = RedisLockTest::Session->new($node);
	$n->start("SELECT redis_lock_acquire('many:1', NULL, '10 min')");
	waits_ok($n, 'non-fair waiter');

	ok($a->terminate($T), 'A terminated');
	my ($v, $err) = $f->finish($T);
	is($v, 't', 'fair waiter gets many:fair') or diag($err);
	($v, $err) = $n->finish($T);
	is($v, 't', 'non-fair waiter gets many:1') or diag($err);
	for my $k (@names)
	{
		ok(!$rc->cmd('HEXISTS', $k, $a_id), "A's field on '$k' is gone");
	}
	is($rc->cmd('EXISTS', 'many:2'), 0, 'many:2 (count 2) fully released');
	is($rc->cmd('EXISTS', 'many {3}'), 0, 'watchdog lock released');
	is(fair_queue_len($rc, 'many:fair'), 0, 'fair queue empty');
	is($f->query('SELECT redis_lock_release_all()'), 1, 'fair waiter releases all (1)');
	is($n->query('SELECT redis_lock_release_all()'), 1, 'non-fair waiter releases all (1)');
	$f->close;
	$n->close;
}

# --- a waiter that is terminated leaves no trace ----------------------------------
{
	my $a = RedisLockTest::Session->new($node);
	is($a->query("SELECT redis_lock_acquire('wt', '0', '10 min', true)"), 't', 'A holds wt');
	my $w1 = RedisLockTest::Session->new($node);
	my $w2 = RedisLockTest::Session->new($node);
	my $w2_id = $w2->query('SELECT redis_lock_owner_id()');
	$w1->start("SELECT redis_lock_acquire('wt', NULL, '10 min', true)");
	until_ok('w1 queued', sub { fair_queue_len($rc, 'wt') == 1 });
	$w2->start("SELECT redis_lock_acquire('wt', NULL, '10 min', true)");
	until_ok('w2 queued', sub { fair_queue_len($rc, 'wt') == 2 });
	ok($w1->terminate($T), 'queue head terminated while waiting');
	until_ok('terminated waiter left the queue',
		sub { fair_queue_len($rc, 'wt') == 1 && fair_timeout_count($rc, 'wt') == 1 });
	is_deeply(fair_queue($rc, 'wt'), [$w2_id],
		'w2 is the head');
	is($a->query("SELECT redis_lock_release('wt')"), 't', 'A releases');
	my ($v, $err) = $w2->finish($T);
	is($v, 't', 'w2 gets the lock') or diag($err);
	$w2->close;
	$a->close;
}

# --- transaction-scope locks --------------------------------------------------------
{
	my $a = RedisLockTest::Session->new($node);
	my $b = RedisLockTest::Session->new($node);
	my $a_id = $a->query('SELECT redis_lock_owner_id()');

	$a->query('BEGIN');
	is($a->query("SELECT redis_xact_lock_acquire('x:commit', '0', '10 min')"), 't',
		'xact lock taken in a transaction');
	is($rc->cmd('HGET', 'x:commit', $a_id), '1', 'held in Redis');
	$b->start("SELECT redis_lock_acquire('x:commit', NULL, '10 min')");
	waits_ok($b, 'B waiting on the xact lock');
	$a->query('COMMIT');
	is($rc->cmd('HEXISTS', 'x:commit', $a_id), 0, 'released at COMMIT');
	my ($v, $err) = $b->finish($T);
	is($v, 't', 'waiter woken by COMMIT') or diag($err);
	is($b->query("SELECT redis_lock_release('x:commit')"), 't', 'B releases');

	$a->query('BEGIN');
	is($a->query("SELECT redis_xact_lock_acquire('x:rb', '0', '10 min')"), 't', 'xact lock 2');
	is($a->query("SELECT redis_xact_lock_acquire('x:rb', '0', '10 min')"), 't', 'reentered');
	is($rc->cmd('HGET', 'x:rb', $a_id), '2', 'count 2');
	$b->start("SELECT redis_lock_acquire('x:rb', NULL, '10 min')");
	waits_ok($b, 'B waiting on the xact lock');
	$a->query('ROLLBACK');
	($v, $err) = $b->finish($T);
	is($v, 't', 'waiter woken by ROLLBACK') or diag($err);
	ok(!$rc->cmd('HEXISTS', 'x:rb', $a_id), "A's field gone after ROLLBACK");
	is($b->query("SELECT redis_lock_release('x:rb')"), 't', 'B releases');

	# transaction aborted by an error: still released at ROLLBACK
	$a->query('BEGIN');
	is($a->query("SELECT redis_xact_lock_acquire('x:err', '0', '10 min')"), 't', 'xact lock 3');
	my (undef, $e2) = $a->try('SELECT 1/0');
	like($e2, qr/division by zero/, 'transaction fails');
	# (whether it goes at the error, as pg_advisory_xact_lock does, or at the
	# ROLLBACK command is not part of the contract; gone after ROLLBACK is)
	$a->query('ROLLBACK');
	is($rc->cmd('EXISTS', 'x:err'), 0, 'released at ROLLBACK of the failed transaction');

	# implicit transaction (autocommit single statement)
	is($a->query("SELECT redis_xact_lock_acquire('x:auto', '0', '10 min')"), 't',
		'xact lock in an autocommit statement');
	is($rc->cmd('EXISTS', 'x:auto'), 0, 'released when the statement commits');

	# a session whose transaction holds an xact lock is terminated
	$a->query('BEGIN');
	is($a->query("SELECT redis_xact_lock_acquire('x:term', '0', '10 min')"), 't', 'xact lock 4');
	$b->start("SELECT redis_lock_acquire('x:term', NULL, '10 min')");
	waits_ok($b, 'B waiting on x:term');
	ok($a->terminate($T), 'terminate the session inside its transaction');
	($v, $err) = $b->finish($T);
	is($v, 't', 'waiter gets the lock of the terminated transaction') or diag($err);
	is($b->query("SELECT redis_lock_release('x:term')"), 't', 'B releases');
	$a->close;
	$b->close;
}

# --- session locks survive ROLLBACK ---------------------------------------------------
{
	my $a = RedisLockTest::Session->new($node);
	my $b = RedisLockTest::Session->new($node);
	my $a_id = $a->query('SELECT redis_lock_owner_id()');
	$a->query('BEGIN');
	is($a->query("SELECT redis_lock_acquire('s:rb', '0', '10 min')"), 't',
		'session lock taken inside a transaction');
	$a->query('ROLLBACK');
	is($rc->cmd('HGET', 's:rb', $a_id), '1', 'still held after ROLLBACK');
	is($a->query("SELECT held_by_me FROM redis_lock_status('s:rb')"), 't', 'held_by_me');
	is($b->query("SELECT redis_lock_acquire('s:rb', '0')"), 'f', 'others still excluded');

	$a->query('BEGIN');
	$a->query('SAVEPOINT sp');
	is($a->query("SELECT redis_lock_acquire('s:rb', '0', '10 min')"), 't', 'reentered in a savepoint');
	$a->query('ROLLBACK TO SAVEPOINT sp');
	$a->query('COMMIT');
	is($rc->cmd('HGET', 's:rb', $a_id), '2', 'both holds kept after ROLLBACK TO SAVEPOINT');
	is($a->query("SELECT redis_lock_release('s:rb')"), 't', 'release 1');
	is($a->query("SELECT redis_lock_release('s:rb')"), 't', 'release 2');
	is($rc->cmd('EXISTS', 's:rb'), 0, 'gone');

	# a session lock released inside a transaction that rolls back stays released
	is($a->query("SELECT redis_lock_acquire('s:rb2', '0', '10 min')"), 't', 'take s:rb2');
	$a->query('BEGIN');
	is($a->query("SELECT redis_lock_release('s:rb2')"), 't', 'release inside a transaction');
	$a->query('ROLLBACK');
	is($rc->cmd('EXISTS', 's:rb2'), 0, 'release is not undone by ROLLBACK');
	$a->close;
	$b->close;
}

done_testing();
