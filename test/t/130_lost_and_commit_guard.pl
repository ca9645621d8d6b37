# 130_lost_and_commit_guard.pl — a lock whose hold disappears behind the
# holder's back (key deleted, force-released) is marked 'lost' by the
# watchdog (WARNING naming lock and PID, lost_locks), its fencing token
# becomes NULL; the commit guard fails the COMMIT of a writing transaction
# (55P03, message naming the lock) and rolls the work back, but not with
# verify_on_commit = off and not for read-only transactions; a fixed-lease
# lock that nobody renews is caught by the guard's own HEXISTS round trip.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use Test::More;

my $T = 60;

sub state_of
{
	my ($s, $name) = @_;
	return $s->query("SELECT string_agg(state, ',') FROM redis_locks WHERE name = '$name'");
}

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('lost', $redis);
my $obs   = RedisLockTest::observer($node);
my $rc    = FakeRedisson::Conn->new(port => $redis->port);
$node->safe_psql('postgres', 'CREATE TABLE t (v int)');
sub rows_with { $obs->query("SELECT count(*) FROM t WHERE v = $_[0]") }

# Runs "BEGIN; <body>; COMMIT" and returns (value, err, sqlstate); leaves the
# session outside any transaction block whatever happened.
sub xact
{
	my ($s, $body) = @_;
	my ($v, $err, $st) = $s->try("BEGIN; $body; COMMIT");
	# A failed COMMIT ends the transaction; a failure before it leaves an
	# aborted block: end it either way.
	$s->dbh->do('ROLLBACK') if defined $err;
	$s->notices;
	return ($v, $err, $st);
}

my $a = RedisLockTest::Session->new($node);
$a->query("SET redislock.watchdog_timeout = '1s'");
my $a_id = $a->query('SELECT redis_lock_owner_id()');
my $a_pid = $a->pid;

# --- 1. positive control: locks present, writes commit ---------------------------------
is($a->query("SELECT redis_lock_acquire('g:ok')"), 't', 'A holds g:ok (watchdog)');
is($a->query("SELECT redis_lock_acquire('g:fixed', '0', '10 min')"), 't', 'A holds g:fixed (fixed)');
{
	my $s0 = lock_stats($obs);
	my ($v, $err) = xact($a, 'INSERT INTO t VALUES (1)');
	ok(!defined $err, 'writing transaction commits while the locks are held') or diag($err);
	is(rows_with(1), 1, 'row 1 committed');
	(undef, $err) = $a->try('INSERT INTO t VALUES (2)');
	ok(!defined $err, 'autocommit write commits') or diag($err);
	is(lock_stats($obs)->{lost_locks}, $s0->{lost_locks}, 'nothing lost');
}

# --- 2. key deleted behind the holder's back: the worker marks it lost -------------------
is($a->query("SELECT redis_lock_acquire('lost:del')"), 't', 'A holds lost:del (watchdog, 1 s)');
my $tok = $a->query("SELECT redis_lock_fencing_token('lost:del')");
ok(defined $tok && $tok > 0, "fencing token $tok while held");
my $s0 = lock_stats($obs);
is($rc->cmd('DEL', 'lost:del'), 1, 'DEL lost:del behind its back');
until_ok("redis_locks: lost:del is 'lost'", sub { state_of($obs, 'lost:del') eq 'lost' });
until_ok('lost_locks counts it', sub { lock_stats($obs)->{lost_locks} == $s0->{lost_locks} + 1 });
until_ok('server log: WARNING naming the lock and the PID', sub {
	slurp($node->logfile) =~ /WARNING:  Redis lock "lost:del" held by the session with PID $a_pid was lost/;
});
ok(!defined $a->query("SELECT redis_lock_fencing_token('lost:del')"), 'fencing token is NULL once lost');
is(state_of($obs, 'g:ok'), 'held', 'the other watchdog lock is still held');
is($rc->cmd('HEXISTS', 'g:ok', $a_id), 1, '... and in Redis');

# --- 3. commit guard ------------------------------------------------------------------------
{
	my ($v, $err, $st) = xact($a, 'INSERT INTO t VALUES (3)');
	is($st, '55P03', 'COMMIT of a writing transaction fails with 55P03') or diag($err);
	like($err // '', qr/Redis lock "lost:del" was lost before COMMIT/, 'message names the lock');
	is(rows_with(3), 0, 'its write was rolled back');
	is($a->query('SELECT 1'), 1, 'session usable afterwards');

	($v, $err, $st) = $a->try('INSERT INTO t VALUES (4)');
	is($st, '55P03', 'autocommit write fails with 55P03 as well') or diag($err);
	is(rows_with(4), 0, 'not committed');

	($v, $err, $st) = xact($a, 'SELECT count(*) FROM t');
	ok(!defined $err, 'a read-only transaction commits (not checked)') or diag($err);
	($v, $err) = $a->try("SELECT redis_lock_status('g:ok')");
	ok(!defined $err, 'read-only autocommit statements work') or diag($err);

	# a transaction that took no xid: SELECT ... FOR nothing, temp values
	($v, $err) = xact($a, "SELECT set_config('x.y', '1', true)");
	ok(!defined $err, 'transaction without an xid commits') or diag($err);

	$a->query('SET redislock.verify_on_commit = off');
	($v, $err) = xact($a, 'INSERT INTO t VALUES (5)');
	ok(!defined $err, 'verify_on_commit = off: the write commits') or diag($err);
	is(rows_with(5), 1, 'row 5 committed');
	$a->query('RESET redislock.verify_on_commit');
	is($a->query('SHOW redislock.verify_on_commit'), 'on', 'verify_on_commit back on');
}

# --- 4. releasing the lost lock; taking it again -----------------------------------------
{
	$a->notices;
	my ($v, $err) = $a->try("SELECT redis_lock_release('lost:del')");
	is($v, 'f', 'release of a lost lock returns false') or diag($err);
	ok((grep { /WARNING/ && /lost:del/ } $a->notices), 'with a WARNING naming it');
	ok(!defined state_of($obs, 'lost:del'), 'its row is gone');
	($v, $err) = xact($a, 'INSERT INTO t VALUES (6)');
	ok(!defined $err, 'writes commit again once the lost lock is released') or diag($err);

	is($a->query("SELECT redis_lock_acquire('lost:del')"), 't', 'lost:del taken again');
	my $tok2 = $a->query("SELECT redis_lock_fencing_token('lost:del')");
	ok($tok2 > $tok, "new fencing token $tok2 > $tok");
	is(state_of($obs, 'lost:del'), 'held', 'held again');
	is($a->query("SELECT redis_lock_release('lost:del')"), 't', 'released');
}

# --- 5. force-released by another session ---------------------------------------------
{
	my $b = RedisLockTest::Session->new($node);
	is($a->query("SELECT redis_lock_acquire('lost:force')"), 't', 'A holds lost:force');
	my $s1 = lock_stats($obs);
	is($b->query("SELECT redis_lock_force_release('lost:force')"), 't', 'B force-releases it');
	until_ok("lost:force becomes 'lost'", sub { state_of($obs, 'lost:force') eq 'lost' });
	ok(lock_stats($obs)->{lost_locks} >= $s1->{lost_locks} + 1, 'lost_locks counts it');
	is($b->query("SELECT redis_lock_acquire('lost:force', '0', '10 min')"), 't',
		'B can take it now');
	my ($v, $err, $st) = xact($a, 'INSERT INTO t VALUES (7)');
	is($st, '55P03', "A's write fails at COMMIT") or diag($err);
	like($err // '', qr/lost:force/, 'naming lost:force');
	is(rows_with(7), 0, 'not committed');
	is($b->query("SELECT redis_lock_release('lost:force')"), 't', 'B releases');
	$a->try("SELECT redis_lock_release('lost:force')");
	$a->notices;
	$b->close;
}

# --- 6. the guard's own round trip: a fixed lease nobody renews ---------------------------
# g:fixed (10 min, fixed) is never renewed, so the worker never looks at it;
# only the HEXISTS at COMMIT can notice that its hold is gone.
{
	my $s1 = lock_stats($obs);
	is(state_of($obs, 'g:fixed'), 'held', 'g:fixed held');
	is($rc->cmd('DEL', 'g:fixed'), 1, 'DEL g:fixed behind its back');
	my ($v, $err, $st) = xact($a, 'INSERT INTO t VALUES (8)');
	is($st, '55P03', 'COMMIT fails with 55P03 (found by the HEXISTS check)') or diag($err);
	like($err // '', qr/Redis lock "g:fixed" was lost before COMMIT/, 'naming g:fixed');
	unlike($err // '', qr/g:ok/, 'not naming the lock that is still held');
	is(rows_with(8), 0, 'not committed');
	is(lock_stats($obs)->{lost_locks}, $s1->{lost_locks} + 1, 'lost_locks +1');
	is(state_of($obs, 'g:fixed'), 'lost', "g:fixed now shows 'lost'");
	ok(!defined $a->query("SELECT redis_lock_fencing_token('g:fixed')"), 'its fencing token is NULL');
	$a->try("SELECT redis_lock_release('g:fixed')");
	$a->notices;
}

# --- 7. transaction-scope lock lost inside the transaction ----------------------------
{
	$a->query('BEGIN');
	is($a->query("SELECT redis_xact_lock_acquire('gx', '0', '10 min')"), 't', 'xact lock gx');
	$a->query('INSERT INTO t VALUES (9)');
	is($rc->cmd('DEL', 'gx'), 1, 'DEL gx');
	my ($v, $err, $st) = $a->try('COMMIT');
	is($st, '55P03', 'COMMIT fails with 55P03') or diag($err);
	like($err // '', qr/"gx"/, 'naming gx');
	# (inside an aborted block this would fail with 25P02)
	($v, $err) = $a->try('SELECT 1');
	is($v, 1, 'the failed COMMIT ended the transaction') or diag($err);
	is(rows_with(9), 0, 'not committed');
	ok(!defined state_of($obs, 'gx'), 'the xact lock is gone from redis_locks');
	is($rc->cmd('EXISTS', 'gx'), 0, 'nothing left in Redis');
}

# --- 8. after all that, A still works normally -------------------------------------------
{
	is(state_of($obs, 'g:ok'), 'held', 'g:ok still held throughout');
	is($rc->cmd('HEXISTS', 'g:ok', $a_id), 1, 'g:ok in Redis');
	my ($v, $err) = xact($a, 'INSERT INTO t VALUES (10)');
	ok(!defined $err, 'write commits with only healthy locks') or diag($err);
	is($a->query('SELECT redis_lock_release_all()'), 1, 'release_all releases g:ok');
	is($rc->cmd('EXISTS', 'g:ok'), 0, 'g:ok gone');
	is($a->query('SELECT count(*) FROM redis_locks'), 0, 'redis_locks empty');
}
$a->close;

no_crash_ok($node, 'lost/commit guard');
done_testing();
