# 320_rwlock.pl — read-write locks between SQL sessions: waiting and waking
# (holders on 10-minute leases, so only a message explains a prompt wake),
# a waiting writer keeps new SQL readers out, upgrades (the sole reader at
# once; two upgraders are both bounded by their waits), cancel, session
# end, the watchdog on read holds, and lost read holds with the commit
# guard.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use Test::More;

my $T = 60;

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('rwlock', $redis);
my $obs   = RedisLockTest::observer($node);
my $rc    = FakeRedisson::Conn->new(port => $redis->port);
$node->safe_psql('postgres', 'CREATE TABLE t (v int)');

my ($a, $b, $c) = map { RedisLockTest::Session->new($node) } 1 .. 3;
my ($a_id, $b_id, $c_id) = map { $_->query('SELECT redis_lock_owner_id()') } $a, $b, $c;

sub numsub { $rc->cmd('PUBSUB', 'NUMSUB', $_[0])->[1] }
sub mark   { $rc->cmd('GET', "redislock_rwlock_writer:{$_[0]}") }

# --- 1. a reader waits for a writer and is woken by its release -------------
{
	my $n = 'rw:1';
	is($a->query("SELECT redis_write_lock_acquire('$n', '0', '10 min')"), 't', 'A writes rw:1 (10 min lease)');
	is($rc->cmd('HGET', $n, 'mode'), 'write', 'mode = write in Redis');
	$b->start("SELECT redis_read_lock_acquire('$n', NULL, '10 min')");
	waits_ok($b, 'reader B');
	until_ok('B subscribed to redisson_rwlock:{rw:1}', sub { numsub(FakeRedisson::rw_channel($n)) >= 1 });
	ok(!$rc->cmd('HEXISTS', $n, $b_id), 'B holds nothing while it waits');
	is($a->query("SELECT redis_write_lock_release('$n')"), 't', 'A releases the write hold');
	my ($v, $err) = $b->finish($T);
	is($v, 't', 'B is woken and reads') or diag($err);
	is($rc->cmd('HGET', $n, 'mode'), 'read', 'mode = read');
	is($rc->cmd('EXISTS', "{$n}:$b_id:rwlock_timeout:1"), 1, "B's timeout key exists");

	# --- 2. a writer waits for the readers; the last one wakes it ---------------
	is($c->query("SELECT redis_read_lock_acquire('$n', '0', '10 min')"), 't', 'C reads too');
	$a->start("SELECT redis_write_lock_acquire('$n', NULL, '10 min')");
	waits_ok($a, 'writer A');
	until_ok('A left its waiting mark', sub { (mark($n) // '') eq $a_id });
	is($b->query("SELECT redis_read_lock_release('$n')"), 't', 'B releases (C still reads)');
	ok(!$a->is_done, 'A still waits while C reads');
	is($c->query("SELECT redis_read_lock_release('$n')"), 't', 'C, the last reader, releases');
	($v, $err) = $a->finish($T);
	is($v, 't', 'A is woken and writes') or diag($err);
	ok(!defined mark($n), "A's mark is gone once it holds the lock");
	is($a->query("SELECT redis_write_lock_release('$n')"), 't', 'A releases');
	is($rc->cmd('EXISTS', $n), 0, 'the hash is gone');
}

# --- 3. a waiting writer keeps new SQL readers out ---------------------------
{
	my $n = 'rw:3';
	is($b->query("SELECT redis_read_lock_acquire('$n', '0', '10 min')"), 't', 'B reads rw:3');
	$a->start("SELECT redis_write_lock_acquire('$n', '1 h', '10 min')");
	waits_ok($a, 'writer A');
	until_ok('A left its waiting mark', sub { (mark($n) // '') eq $a_id });
	is($c->query("SELECT redis_read_lock_acquire('$n', '0')"), 'f',
		'a new reader C does not get in while writer A waits');
	is($b->query("SELECT redis_read_lock_acquire('$n', '0')"), 't',
		'reader B may re-enter (it would otherwise wait for a writer that waits for it)');
	$c->start("SELECT redis_read_lock_acquire('$n', NULL, '10 min')");
	waits_ok($c, 'reader C');
	is($b->query("SELECT format('%s|%s', redis_read_lock_release('$n'), redis_read_lock_release('$n'))"), 't|t',
		'B releases both holds');
	my ($v, $err) = $a->finish($T);
	is($v, 't', 'the writer got the lock first') or diag($err);
	ok(!$c->is_done, 'C still waits behind the writer');
	is($a->query("SELECT redis_write_lock_release('$n')"), 't', 'A releases');
	($v, $err) = $c->finish($T);
	is($v, 't', 'then C reads') or diag($err);
	is($c->query("SELECT redis_read_lock_release('$n')"), 't', 'C releases');

	# a writer that gives up takes its mark away and lets the readers in
	is($b->query("SELECT redis_read_lock_acquire('$n', '0', '10 min')"), 't', 'B reads again');
	$a->start("SELECT redis_write_lock_acquire('$n', '1 h', '10 min')");
	waits_ok($a, 'writer A');
	until_ok('A left its waiting mark', sub { (mark($n) // '') eq $a_id });
	$c->start("SELECT redis_read_lock_acquire('$n', NULL, '10 min')");
	waits_ok($c, 'reader C behind the mark');
	my (undef, $aerr, $ast) = $a->cancel($T);
	is($ast, '57014', 'cancelling writer A: 57014') or diag($aerr);
	($v, $err) = $c->finish($T);
	is($v, 't', 'reader C gets in once the writer gave up') or diag($err);
	ok(!defined mark($n), 'no mark left');
	ok(!$rc->cmd('HEXISTS', $n, "$a_id:write"), 'the cancelled writer holds nothing');
	is($obs->query("SELECT count(*) FROM redis_locks WHERE name = '$n' AND pid = " . $a->pid), 0,
		'nor does redis_locks show it');
	is($b->query("SELECT redis_read_lock_release('$n')"), 't', 'B releases');
	is($c->query("SELECT redis_read_lock_release('$n')"), 't', 'C releases');
}

# --- 3b. a writer whose session ends while it waits takes its mark along ----
{
	my $n = 'rw:3b';
	my $d = RedisLockTest::Session->new($node);
	my $d_id = $d->query('SELECT redis_lock_owner_id()');
	$d->query("SET redislock.fair_wait_timeout = '1h'");    # the mark would live an hour
	is($b->query("SELECT redis_read_lock_acquire('$n', '0', '10 min')"), 't', 'B reads rw:3b');
	$d->start("SELECT redis_write_lock_acquire('$n', NULL, '10 min')");
	waits_ok($d, 'writer D');
	until_ok("D left its waiting mark", sub { (mark($n) // '') eq $d_id });
	$c->start("SELECT redis_read_lock_acquire('$n', NULL, '10 min')");
	waits_ok($c, 'reader C behind the mark');
	ok($d->terminate($T), 'D is terminated while it waits');
	my ($v, $err) = $c->finish($T);
	is($v, 't', "reader C gets in: D's session end took the mark back and woke it") or diag($err);
	ok(!defined mark($n), 'no mark left');
	is($b->query("SELECT redis_read_lock_release('$n')"), 't', 'B releases');
	is($c->query("SELECT redis_read_lock_release('$n')"), 't', 'C releases');
}

# --- 4. upgrades --------------------------------------------------------------
{
	my $n = 'rw:4';
	is($a->query("SELECT redis_read_lock_acquire('$n', '0', '10 min')"), 't', 'A reads rw:4');
	is($a->query("SELECT redis_write_lock_acquire('$n', '0', '10 min')"), 't', 'the sole reader upgrades at once');
	is($rc->cmd('HGET', $n, "$a_id:write"), '1', 'A is the writer in Redis');
	is($rc->cmd('HGET', $n, $a_id), '1', 'and keeps its read hold');
	is($a->query("SELECT format('%s|%s', redis_write_lock_release('$n'), redis_read_lock_release('$n'))"), 't|t', 'A releases both');

	# two readers that both try to upgrade: each waits for the other's read
	# hold, so each is bounded by its own wait
	is($a->query("SELECT redis_read_lock_acquire('$n', '0', '10 min')"), 't', 'A reads');
	is($b->query("SELECT redis_read_lock_acquire('$n', '0', '10 min')"), 't', 'B reads');
	$a->start("SELECT redis_write_lock_acquire('$n', '2 s')");
	waits_ok($a, 'upgrader A');
	is($b->query("SELECT redis_write_lock_acquire('$n', '0')"), 'f', 'upgrader B gets false at once');
	my ($v, $err) = $a->finish($T);
	is($v, 'f', 'upgrader A gets false when its wait ends') or diag($err);
	$b->query("SET lock_timeout = '300ms'");
	my (undef, $berr, $bst) = $b->try("SELECT redis_write_lock_acquire('$n')");
	is($bst, '55P03', 'with wait NULL, lock_timeout bounds the upgrade (55P03)') or diag($berr);
	$b->query('RESET lock_timeout');
	ok(!$rc->cmd('HEXISTS', $n, "$a_id:write") && !$rc->cmd('HEXISTS', $n, "$b_id:write"),
		'neither holds a write hold');
	is($rc->cmd('HGET', $n, $a_id) . $rc->cmd('HGET', $n, $b_id), '11', 'both still hold their read');
	is($a->query("SELECT redis_read_lock_release('$n')"), 't', 'A releases its read');
	is($b->query("SELECT redis_write_lock_acquire('$n', '0')"), 't', 'now B, the sole reader, upgrades');
	is($b->query("SELECT format('%s|%s', redis_write_lock_release('$n'), redis_read_lock_release('$n'))"), 't|t', 'B releases');
	is($rc->cmd('EXISTS', $n), 0, 'the hash is gone');
}

# --- 5. session end gives read and write holds back -------------------------
{
	my $d = RedisLockTest::Session->new($node);
	my $d_id = $d->query('SELECT redis_lock_owner_id()');
	is($d->query("SELECT format('%s|%s', redis_read_lock_acquire('rw:5r', '0', '10 min'), redis_write_lock_acquire('rw:5w', '0', '10 min'))"),
		't|t', 'D reads rw:5r and writes rw:5w');
	$d->terminate;
	until_ok('the read hold is gone from Redis', sub { !$rc->cmd('HEXISTS', 'rw:5r', $d_id) });
	until_ok('the write hold is gone from Redis', sub { !$rc->cmd('HEXISTS', 'rw:5w', "$d_id:write") });
	is($rc->cmd('EXISTS', 'rw:5r') + $rc->cmd('EXISTS', 'rw:5w'), 0, 'both hashes are gone');
	until_ok('redis_locks forgets them', sub {
		$obs->query("SELECT count(*) FROM redis_locks WHERE name LIKE 'rw:5_'") == 0 });
}

# --- 6. the watchdog renews read holds; a lost read hold is caught ----------
{
	my $n = 'rw:6';
	$a->query("SET redislock.watchdog_timeout = '1s'");
	is($a->query("SELECT redis_read_lock_acquire('$n')"), 't', 'A reads rw:6 under the watchdog (1 s lease)');
	my $renewals = lock_stats($obs)->{renewals};
	until_ok('the worker renews it three times', sub { lock_stats($obs)->{renewals} >= $renewals + 3 });
	is($rc->cmd('HEXISTS', $n, $a_id), 1, 'the read hold outlived three leases');
	my $pttl = $rc->cmd('PTTL', "{$n}:$a_id:rwlock_timeout:1");
	cmp_ok($pttl, '>', 0, "its timeout key is alive (pttl $pttl)");
	is($obs->query("SELECT kind || '/' || state || '/' || renewal FROM redis_locks WHERE name = '$n'"),
		'read/held/watchdog', 'redis_locks: read, held, watchdog');

	my $lost = lock_stats($obs)->{lost_locks};
	$rc->cmd('DEL', $n);
	until_ok('redis_locks shows the read hold lost', sub {
		($obs->query("SELECT state FROM redis_locks WHERE name = '$n'") // '') eq 'lost' });
	is(lock_stats($obs)->{lost_locks}, $lost + 1, 'lost_locks counted');
	my ($v, $err, $st) = $a->try("BEGIN; INSERT INTO t VALUES (6); COMMIT");
	$a->dbh->do('ROLLBACK') if defined $err;
	is($st, '55P03', 'the commit guard refuses a write under the lost read hold') or diag($err);
	is($obs->query('SELECT count(*) FROM t WHERE v = 6'), 0, 'and the write was rolled back');
	is($a->query("SELECT redis_read_lock_release('$n')"), 'f', 'releasing the lost read hold says false');
	$a->notices;

	# the commit guard lets a write through under live read and write holds
	is($a->query("SELECT format('%s|%s', redis_read_lock_acquire('rw:6a', '0', '10 min'), redis_write_lock_acquire('rw:6b', '0', '10 min'))"),
		't|t', 'A reads rw:6a and writes rw:6b');
	(undef, $err) = $a->try("BEGIN; INSERT INTO t VALUES (7); COMMIT");
	ok(!defined $err, 'a write commits under them') or diag($err);
	is($a->query("SELECT redis_lock_release_all()"), 2, 'redis_lock_release_all drops both');
	is($rc->cmd('EXISTS', 'rw:6a') + $rc->cmd('EXISTS', 'rw:6b'), 0, 'nothing left in Redis');
}

# --- 7. force-release of a read-write lock wakes its waiters ----------------
{
	my $n = 'rw:7';
	is($b->query("SELECT redis_write_lock_acquire('$n', '0', '10 min')"), 't', 'B writes rw:7 (10 min lease)');
	$c->start("SELECT redis_read_lock_acquire('$n', NULL, '10 min')");
	waits_ok($c, 'reader C');
	until_ok('C subscribed', sub { numsub(FakeRedisson::rw_channel($n)) >= 1 });
	is($a->query("SELECT redis_lock_force_release('$n')"), 't', 'A force-releases rw:7');
	my ($v, $err) = $c->finish($T);
	is($v, 't', 'C is woken and reads') or diag($err);
	is($c->query("SELECT redis_read_lock_release('$n')"), 't', 'C releases');
	is($b->query("SELECT redis_write_lock_release('$n')"), 'f', "B's release says false: its hold was taken away");
	$b->notices;
}

# --- 8. a hash that only looks like a read-write lock is left alone ----------
{
	my $n = 'rw:prefs';
	$rc->cmd('HSET', $n, 'mode', 'read', 'theme', 'dark');
	is($b->query("SELECT redis_read_lock_acquire('$n', '0', '10 min')"), 'f', 'a read of an application hash with mode=read is refused');
	is($b->query("SELECT redis_write_lock_acquire('$n', '0', '10 min')"), 'f', '... and a write');
	is(join(',', sort @{ $rc->cmd('HKEYS', $n) }), 'mode,theme', 'the hash is untouched');
	is($rc->cmd('PTTL', $n), -1, '... and still has no expiry');
	$rc->cmd('DEL', $n);

	# a reader whose hold ran out (no live timeout key) still counts while
	# the hash lives, as for Redisson's writer, which only looks at the mode
	$rc->cmd('HSET', 'rw:stale', 'mode', 'read', 'gone-reader:1', '1');
	$rc->cmd('PEXPIRE', 'rw:stale', '600000');
	is($b->query("SELECT redis_write_lock_acquire('rw:stale', '0', '10 min')"), 'f',
		'a writer waits for a reader without a live timeout key');
	is(join(',', sort @{ $rc->cmd('HKEYS', 'rw:stale') }), 'gone-reader:1,mode', 'the stale reader is left alone');
	$rc->cmd('DEL', 'rw:stale');
}

is($obs->query('SELECT count(*) FROM redis_locks'), 0, 'redis_locks is empty at the end');
$_->close for $a, $b, $c;
no_crash_ok($node, 'read-write locks');
done_testing();
