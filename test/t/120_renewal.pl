# 120_renewal.pl — the watchdog renews watchdog-mode locks every lease/3 and
# never lets them lapse (a 1 s lease held for 10 s, polled every 200 ms);
# fixed leases are not renewed and show 'expired' once past their lease;
# reentrant and transaction-scope watchdog locks are renewed too; each lock
# is renewed with its own lease; renewals go on after the worker's Redis
# connection is killed.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use Test::More;
use Time::HiRes qw(time sleep);

my $T = 60;

sub lockrow
{
	my ($s, $name) = @_;
	return $s->dbh->selectrow_hashref(
		'SELECT *, extract(epoch FROM lease) * 1000 AS lease_ms, extract(epoch FROM renewed_at) AS renewed_ep '
		  . 'FROM redis_locks WHERE name = ?',
		undef, $name);
}

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('renewal', $redis);
my $obs   = RedisLockTest::observer($node);
my $rc    = FakeRedisson::Conn->new(port => $redis->port);

# --- 1. a 1 s watchdog lock held for 10 s --------------------------------------------
{
	my $a = RedisLockTest::Session->new($node);
	$a->query("SET redislock.watchdog_timeout = '1s'");
	my $id = $a->query('SELECT redis_lock_owner_id()');
	my $s0 = lock_stats($obs);
	is($a->query("SELECT redis_lock_acquire('wd:1s')"), 't', 'watchdog lock with a 1 s lease');
	my $row = lockrow($obs, 'wd:1s');
	is($row->{renewal}, 'watchdog', 'redis_locks: renewal watchdog');
	is($row->{state}, 'held', 'redis_locks: held');
	is(0 + $row->{lease_ms}, 1000, 'redis_locks: lease 1 s');
	is($row->{owner_id}, $id, 'redis_locks: owner id of the session');
	is($row->{pid}, $a->pid, 'redis_locks: pid of the session');
	is($row->{hold_count}, 1, 'redis_locks: hold count 1');
	my $first_renewed = $row->{renewed_ep};

	my $start = time();
	my ($polls, $gone, $foreign, $too_long, $maxpttl) = (0, 0, 0, 0, 0);
	while (time() - $start < 10)
	{
		my $pttl = $rc->cmd('PTTL', 'wd:1s');
		my $mine = $rc->cmd('HEXISTS', 'wd:1s', $id);
		$polls++;
		$gone++ if $pttl < 0;
		$foreign++ unless $mine;
		$too_long++ if $pttl > 1000;
		$maxpttl = $pttl if $pttl > $maxpttl;
		sleep(0.2);
	}
	ok($polls >= 20, "polled $polls times over 10 s");
	is($gone, 0, 'PTTL never -2/-1 during 10 leases');
	is($foreign, 0, 'the holder owned it at every poll (HEXISTS)');
	is($too_long, 0, "PTTL never above the 1 s lease (max $maxpttl)");
	my $s1 = lock_stats($obs);
	# Surviving 10 s on a 1 s lease takes at least 9 renewals.
	ok($s1->{renewals} - $s0->{renewals} >= 9,
		'renewals grew by >= 9 (' . ($s1->{renewals} - $s0->{renewals}) . ')');
	is($s1->{lost_locks}, $s0->{lost_locks}, 'nothing lost');
	is($s1->{renewal_failures}, $s0->{renewal_failures}, 'no renewal failures');
	$row = lockrow($obs, 'wd:1s');
	is($row->{state}, 'held', 'still held in redis_locks');
	ok($row->{renewed_ep} > $first_renewed, 'renewed_at advanced')
	  or diag("$first_renewed -> $row->{renewed_ep}");
	is($a->query("SELECT redis_lock_release('wd:1s')"), 't', 'released');
	is($rc->cmd('EXISTS', 'wd:1s'), 0, 'key gone');
	ok(!defined lockrow($obs, 'wd:1s'), 'no row left in redis_locks');
	$a->close;
}

# --- 2. fixed lease: not renewed, 'expired', release -> false + WARNING ------------------
{
	my $a = RedisLockTest::Session->new($node);
	my $id = $a->query('SELECT redis_lock_owner_id()');
	my $s0 = lock_stats($obs);
	is($a->query("SELECT redis_lock_acquire('fx', '0', '2 s')"), 't', 'fixed 2 s lease');
	my $row = lockrow($obs, 'fx');
	is($row->{renewal}, 'fixed', 'redis_locks: renewal fixed');
	is($row->{state}, 'held', 'redis_locks: held at first');
	is(0 + $row->{lease_ms}, 2000, 'redis_locks: lease 2 s');
	my $pttl = $rc->cmd('PTTL', 'fx');
	ok($pttl > 0 && $pttl <= 2000, "PTTL within the lease ($pttl)");
	until_ok('the key expires in Redis (nothing renews it)',
		sub { $rc->cmd('PTTL', 'fx') == -2 }, 30);
	until_ok("redis_locks shows 'expired'", sub { lockrow($obs, 'fx')->{state} eq 'expired' }, 30);
	is(lock_stats($obs)->{renewals}, $s0->{renewals}, 'no renewal happened (only a fixed lease held)');
	is($a->query("SELECT redis_lock_fencing_token('fx') IS NULL"), 't',
		'its fencing token is NULL: the lease ran out, whatever Redis says');
	$a->notices;
	my ($v, $err) = $a->try("SELECT redis_lock_release('fx')");
	is($v, 'f', 'release after expiry returns false') or diag($err);
	my @n = $a->notices;
	ok((grep { /WARNING/ && /fx/ } @n), 'with a WARNING naming the lock') or diag(explain \@n);
	ok(!defined lockrow($obs, 'fx'), 'row gone from redis_locks');
	is($a->query("SELECT redis_lock_release_all()"), 0, 'nothing left to release');
	$a->close;
}

# --- 3. reentrant watchdog lock; transaction-scope watchdog lock ----------------------
{
	my $a = RedisLockTest::Session->new($node);
	$a->query("SET redislock.watchdog_timeout = '1s'");
	my $id = $a->query('SELECT redis_lock_owner_id()');
	is($a->query("SELECT redis_lock_acquire('re')"), 't', 're: first hold');
	is($a->query("SELECT redis_lock_acquire('re')"), 't', 're: second hold');
	is(lockrow($obs, 're')->{hold_count}, 2, 'redis_locks: hold count 2');
	is($a->query("SELECT redis_lock_release('re')"), 't', 're: one release');
	is($rc->cmd('HGET', 're', $id), '1', 'count 1 in Redis');
	my $r0 = lock_stats($obs)->{renewals};
	until_ok('re: still renewed after a partial release (renewals +4)',
		sub { lock_stats($obs)->{renewals} >= $r0 + 4 });
	is($rc->cmd('HEXISTS', 're', $id), 1, 're: held');
	is($a->query("SELECT redis_lock_release('re')"), 't', 're: last release');
	is($rc->cmd('EXISTS', 're'), 0, 're: key gone');

	$a->dbh->begin_work;
	is($a->query("SELECT redis_xact_lock_acquire('tx')"), 't', 'tx: transaction-scope watchdog lock');
	is(lockrow($obs, 'tx')->{scope}, 'transaction', 'redis_locks: scope transaction');
	$r0 = lock_stats($obs)->{renewals};
	until_ok('tx: renewed inside the transaction (renewals +4, more than a lease)',
		sub { lock_stats($obs)->{renewals} >= $r0 + 4 });
	is($rc->cmd('HEXISTS', 'tx', $id), 1, 'tx: held');
	$a->dbh->commit;
	is($rc->cmd('EXISTS', 'tx'), 0, 'tx: released at COMMIT');
	ok(!defined lockrow($obs, 'tx'), 'tx: row gone');
	$a->close;
}

# --- 4. every lock renewed with its own lease ---------------------------------------
{
	my $a = RedisLockTest::Session->new($node);
	my $b = RedisLockTest::Session->new($node);
	$a->query("SET redislock.watchdog_timeout = '1s'");
	$b->query("SET redislock.watchdog_timeout = '6s'");
	is($a->query("SELECT redis_lock_acquire('own:1s')"), 't', 'A: 1 s watchdog lock');
	is($b->query("SELECT redis_lock_acquire('own:6s')"), 't', 'B: 6 s watchdog lock');
	is(0 + lockrow($obs, 'own:1s')->{lease_ms}, 1000, 'view: 1 s');
	is(0 + lockrow($obs, 'own:6s')->{lease_ms}, 6000, 'view: 6 s');
	my $ra = lockrow($obs, 'own:6s')->{renewed_ep};
	until_ok('the 6 s lock is renewed (renewed_at advances)',
		sub { lockrow($obs, 'own:6s')->{renewed_ep} > $ra }, 30);
	my $p6 = $rc->cmd('PTTL', 'own:6s');
	ok($p6 > 1000 && $p6 <= 6000, "6 s lock renewed to its own lease (PTTL $p6)");
	my $ok = 1;
	for (1 .. 10)
	{
		my $p1 = $rc->cmd('PTTL', 'own:1s');
		$ok = 0 if $p1 <= 0 || $p1 > 1000;
		sleep(0.2);
	}
	ok($ok, '1 s lock renewed to its own lease, never lapsing');
	is($a->query("SELECT redis_lock_release('own:1s')"), 't', 'A releases');
	is($b->query("SELECT redis_lock_release('own:6s')"), 't', 'B releases');
	$a->close;
	$b->close;
}

# --- 5. the worker's Redis connection is killed: renewals go on ---------------------------
{
	my $a = RedisLockTest::Session->new($node);
	$a->query("SET redislock.watchdog_timeout = '3s'");
	my $id = $a->query('SELECT redis_lock_owner_id()');
	is($a->query("SELECT redis_lock_acquire('rc')"), 't', 'rc: watchdog lock (3 s)');
	my $s0 = lock_stats($obs);
	until_ok('rc: renewed once', sub { lock_stats($obs)->{renewals} > $s0->{renewals} });
	# every client connection but ours: the worker's and the session's
	my $killed = $rc->cmd('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
	ok($killed >= 1, "CLIENT KILL TYPE normal killed $killed connections");
	my $s1 = lock_stats($obs);
	until_ok('rc: renewals go on after the kill (renewals +3)',
		sub { lock_stats($obs)->{renewals} >= $s1->{renewals} + 3 });
	is($rc->cmd('HEXISTS', 'rc', $id), 1, 'rc: still held');
	ok($rc->cmd('PTTL', 'rc') > 0, 'rc: PTTL > 0');
	is(lock_stats($obs)->{lost_locks}, $s0->{lost_locks}, 'rc: not reported lost');
	is(lockrow($obs, 'rc')->{state}, 'held', 'rc: view says held');
	is($a->query("SELECT redis_lock_release('rc')"), 't', 'rc: the session (reconnecting) releases');
	is($rc->cmd('EXISTS', 'rc'), 0, 'rc: key gone');
	$a->close;
}

no_crash_ok($node, 'renewal');
done_testing();
