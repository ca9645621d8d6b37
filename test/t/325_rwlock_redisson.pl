# 325_rwlock_redisson.pl — read-write locks shared by SQL sessions and a
# Redisson client (RReadWriteLock) on the same names: readers share across
# both sides, writers exclude both ways, releases on either side wake
# waiters on the other, downgrades on either side let readers in, a crashed
# Redisson reader's hold runs out and stops keeping writers out, and the
# watchdog keeps SQL read holds (their rwlock_timeout keys included) alive
# past many leases, so that a Redisson reader's unlock sees them.
#
# Two groups of checks fail on commit 8eec616 (defects, see the comments at
# 3e (ii) and 5d): a SQL reader waiting to upgrade to write is not woken when
# the last other reader, a SQL session, leaves; and a SQL reader's
# fixed-lease hold is lost when a Redisson reader that ran under Java's
# watchdog crashes.
#
# The "Java client" is test/redisson/FakeRedisson.pm: Redisson's own
# RedissonReadLock / RedissonWriteLock / ReadLockTask scripts (transcribed in
# test/redisson/rw_*.lua) with the keys and arguments Redisson computes.
#
# No sleeps and no timing thresholds:
# * holders use 10-minute leases wherever a wake-up is checked, and the
#   SQL writers' place refresh (fair_wait_timeout / 3) is 20 minutes, so
#   that within the bounds used here only a publish can explain a wake-up;
# * what was published is read by an observer subscribed to the lock's
#   channel and to a marker channel: the test publishes a marker and takes
#   the messages that came before it (Redis delivers in publish order);
# * short watchdog leases (a crashed reader's, the Redisson downgrade
#   holder's) are kept alive by the test playing Redisson's watchdog on
#   every poll, and the "crash" is when it stops; a renewal round that finds
#   the hold gone is counted and must not happen; a crashed reader with a
#   fixed lease is waited out by its rwlock_timeout key's expiry;
# * "past N leases" is measured by Redis's own clock: a marker key set with
#   PX N * lease after the hold's keys got their expiry, waited out.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use Test::More;

my $T     = 60;         # bound for anything that should happen "at once", s
my $LONG  = 600_000;    # the Java client's lease: 10 min, ms
my $SHORT = 2000;       # lockWatchdogTimeout of the short-lease Java clients, ms
my $WD    = 2000;       # redislock.watchdog_timeout, ms (the GUC's minimum is 1 s)

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('rwredisson', $redis,
	'redislock.watchdog_timeout' => "${WD}ms",
	# a waiting SQL writer refreshes its mark every fair_wait_timeout / 3:
	# 20 min, so only a message can wake it within $T
	'redislock.fair_wait_timeout' => '1h');
my $rc   = FakeRedisson::Conn->new(port => $redis->port);
my $java = FakeRedisson->new(port => $redis->port, lease => $LONG);
my $obs  = RedisLockTest::observer($node);

my $a = RedisLockTest::Session->new($node);
my $b = RedisLockTest::Session->new($node);
my $c = RedisLockTest::Session->new($node);
my $a_id = $a->query('SELECT redis_lock_owner_id()');
my $b_id = $b->query('SELECT redis_lock_owner_id()');
my $c_id = $c->query('SELECT redis_lock_owner_id()');
my @notices;    # every session's NOTICE/WARNING, checked at the end

# --- helpers ------------------------------------------------------------------------
# The session's notices so far (kept for the final check), as one string.
sub take_notices
{
	my ($s) = @_;
	my @n = $s->notices;
	push @notices, @n;
	return join("\n", @n);
}

sub numsub { $rc->cmd('PUBSUB', 'NUMSUB', $_[0])->[1] }
sub mark_key { "redislock_rwlock_writer:{$_[0]}" }
sub tkey { FakeRedisson::rw_timeout_key($_[0], $_[1], $_[2] // 1) }

# An observer subscribed to the lock's channel and to marker:<name>.
sub observer
{
	my ($name) = @_;
	my $o = FakeRedisson::Conn->new(port => $redis->port);
	$o->subscribe(FakeRedisson::rw_channel($name), "marker:$name");
	return $o;
}

# The payloads published on the lock's channel since the last call.
sub published
{
	my ($o, $name) = @_;
	$rc->cmd('PUBLISH', "marker:$name", 'mark');
	my @m;
	while (1)
	{
		my $m = $o->next_message($T) // return [ @m, 'NO MARKER' ];
		return \@m if $m->[0] eq "marker:$name";
		push @m, $m->[1];
	}
}

# rw_state reduced to what the checks compare: mode, readers, writers
sub shape
{
	my ($name) = @_;
	my $st = $java->rw_state($name) // return undef;
	return { mode => $st->{mode}, readers => $st->{readers}, writers => $st->{writers} };
}

# The started statement's (value, error, sqlstate), waited for up to $T;
# one still running then is cancelled, so the session can go on.
sub finish_or_cancel
{
	my ($s) = @_;
	my ($v, $err, $state) = $s->finish($T);
	$s->cancel if defined $state && $state eq 'TIMEOUT';
	return ($v, $err, $state);
}

# A SQL session waiting inside redislock (as waits_ok), without a test line.
sub in_wait
{
	my ($s) = @_;
	my $t = $obs->query('SELECT wait_event_type FROM pg_stat_activity WHERE pid = ' . $s->pid);
	return defined $t && $t eq 'Extension';
}

# until_ok($desc, $pred) while playing a Java watchdog: $renew runs on every
# poll (every ~50 ms, far more often than lease / 3) and returns whether the
# round found the hold.  Returns how many rounds did not (0 = never lapsed).
sub renewing_until
{
	my ($desc, $renew, $pred) = @_;
	my $missed = 0;
	until_ok($desc, sub { $missed++ unless $renew->(); $pred->() }, $T);
	return $missed;
}

# A marker key that expires $ms from now: once it is gone, $ms have passed
# on Redis's clock.
sub set_marker { $rc->cmd('SET', $_[0], 1, 'PX', $_[1]) }

sub lockrow
{
	my ($s, $name, $kind) = @_;
	return $obs->dbh->selectrow_hashref(
		'SELECT *, extract(epoch FROM lease) * 1000 AS lease_ms FROM redis_locks WHERE pid = ? AND name = ? AND kind = ?',
		undef, $s->pid, $name, $kind);
}

like($a_id, qr/^[0-9a-f-]{36}:\d+$/, 'SQL owner id <uuid>:<n>');

# --- 1. readers share across both sides ---------------------------------------------
{
	my $name = 'rwi:share';
	my $o = observer($name);
	is($a->query("SELECT redis_read_lock_acquire('$name', '0', '10 min')"), 't', 'SQL A reads');
	is($java->try_read_lock($name, 1), undef, 'Redisson thread 1 reads too: readers share');
	is($a->query("SELECT redis_read_lock_acquire('$name', '0', '10 min')"), 't',
		'SQL A re-enters its read (nested hold 2, counted in the session)');
	is($b->query("SELECT redis_read_lock_acquire('$name', '0', '10 min')"), 't',
		'SQL B reads as well, with a Redisson reader in');
	is($java->try_read_lock($name, 2), undef, 'Redisson thread 2 reads, with SQL readers in');
	my $st = $java->rw_state($name);
	is($st->{mode}, 'read', 'rw_state: mode read');
	is_deeply($st->{readers},
		{ $a_id => 1, $b_id => 1, $java->owner(1) => 1, $java->owner(2) => 1 },
		'rw_state: all four readers, SQL and Redisson, in one hash (A counted once: nested holds are counted in the session)');
	is_deeply($st->{writers}, {}, 'rw_state: no writer');
	ok(!grep({ $_ <= 0 } map { @$_ } values %{ $st->{timeouts} }),
		'every read hold, SQL and Redisson, has its live rwlock_timeout:n key')
	  or diag(explain($st->{timeouts}));
	is(scalar(@{ $st->{timeouts}{$a_id} }), 1, "A's nested holds share key :1");
	is($java->is_read_locked($name) . $java->is_write_locked($name), '10',
		'Redisson isLocked: read yes, write no');
	is($a->query("SELECT rw_mode FROM redis_lock_status('$name')"), 'read',
		'redis_lock_status: rw_mode read');
	is($a->query("SELECT holders @> ARRAY['" . $java->owner(1) . "', '$b_id']::text[] "
			  . "FROM redis_lock_status('$name')"), 't',
		'redis_lock_status lists the Redisson reader and the other SQL reader');

	# a SQL release cannot take a Redisson hold
	is($c->query("SELECT redis_read_lock_release('$name')"), 'f',
		'SQL C, holding nothing, releases: f');
	like(take_notices($c), qr/WARNING:.*you don't own/, '... with a WARNING');
	is($java->read_hold_count($name, 1), 1, "... the Redisson reader's hold is untouched");

	is($java->unlock_read($name, 1), 0, 'Redisson thread 1 leaves: 0 (SQL readers live)');
	is($a->query("SELECT redis_read_lock_release('$name')"), 't', 'SQL A drops one hold');
	ok($rc->cmd('HGET', $name, $a_id) eq '1' && $rc->cmd('PTTL', tkey($name, $a_id, 1)) > 0,
		'... A still reads in Redis, with its live key :1 (a hold is left in the session)');
	is($a->query("SELECT redis_read_lock_release('$name')"), 't', 'SQL A drops its last hold');
	is($rc->cmd('EXISTS', tkey($name, $a_id, 1)) + $rc->cmd('EXISTS', tkey($name, $a_id, 2)), 0,
		"A's timeout keys are deleted");
	is($b->query("SELECT redis_read_lock_release('$name')"), 't', 'SQL B leaves');
	is_deeply(published($o, $name), [], 'no message while a reader remains');
	is_deeply(shape($name), { mode => 'read', readers => { $java->owner(2) => 1 }, writers => {} },
		'only Redisson thread 2 still reads');
	is($java->unlock_read($name, 2), 1, 'Redisson thread 2, the last reader, leaves: 1');
	is_deeply(published($o, $name), ['0'], '... 0 published once, by the last reader');
	is($rc->cmd('EXISTS', $name), 0, 'the hash is gone');
	$o->close;
}

# --- 2. writers exclude both ways ---------------------------------------------------
{
	my $name = 'rwi:excl';
	# Redisson writes
	is($java->try_write_lock($name, 1), undef, 'Redisson writes');
	is($a->query("SELECT redis_read_lock_acquire('$name', '0', '10 min')"), 'f',
		"SQL read, wait '0': f");
	is($a->query("SELECT redis_write_lock_acquire('$name', '0', '10 min')"), 'f',
		"SQL write, wait '0': f");
	is($rc->cmd('EXISTS', mark_key($name)), 0, "a one-shot SQL writer leaves no writer mark");
	is($a->query("SELECT redis_write_lock_release('$name')"), 'f',
		'SQL write release of a Redisson write hold: f');
	like(take_notices($a), qr/WARNING:.*you don't own/, '... with a WARNING');
	is_deeply(shape($name), { mode => 'write', readers => {}, writers => { $java->owner(1) => 1 } },
		'only the Redisson writer holds it, untouched');
	is($java->unlock_write($name, 1), 1, 'Redisson leaves');

	# SQL writes
	is($a->query("SELECT redis_write_lock_acquire('$name', '0', '10 min')"), 't', 'SQL A writes');
	my $ttl = $java->try_read_lock($name, 1);
	ok(defined $ttl && $ttl > 0, "Redisson read attempt refused with the lock's TTL");
	$ttl = $java->try_write_lock($name, 1);
	ok(defined $ttl && $ttl > 0, 'Redisson write attempt refused');
	is($java->unlock_write($name, 1), undef, 'Redisson write unlock of the SQL hold: nil (not held)');
	is_deeply(shape($name), { mode => 'write', readers => {}, writers => { $a_id => 1 } },
		'only SQL A holds it, as writer <owner>:write');
	is($a->query("SELECT redis_write_lock_release('$name')"), 't', 'SQL A leaves');

	# readers on one side exclude writers on the other
	is($a->query("SELECT redis_read_lock_acquire('$name', '0', '10 min')"), 't', 'SQL A reads');
	$ttl = $java->try_write_lock($name, 1);
	ok(defined $ttl && $ttl > 0, 'Redisson write refused by the SQL reader');
	is($java->try_read_lock($name, 1), undef, 'Redisson reads');
	is($a->query("SELECT redis_write_lock_acquire('$name', '0', '10 min')"), 'f',
		'SQL A is no sole reader: its upgrade to write is refused');
	is($b->query("SELECT redis_write_lock_acquire('$name', '0', '10 min')"), 'f',
		'SQL B write refused');
	is($a->query("SELECT redis_read_lock_release('$name')"), 't', 'SQL A leaves');
	is($b->query("SELECT redis_write_lock_acquire('$name', '0', '10 min')"), 'f',
		'SQL B write still refused by the Redisson reader alone');
	is($java->unlock_read($name, 1), 1, 'Redisson leaves: 1');
	is($rc->cmd('EXISTS', $name), 0, 'the hash is gone');
}

# --- 3. wake-ups both ways (holders on 10-minute leases) -----------------------------
# 3a. Redisson writer unlocks -> SQL read waiter
{
	my $name = 'rwi:wake:r';
	my $chan = FakeRedisson::rw_channel($name);
	is($java->try_write_lock($name, 1), undef, 'Redisson writes (10 min lease)');
	$a->start("SELECT redis_read_lock_acquire('$name', '5 min', '10 min')");
	waits_ok($a, 'SQL read waiter');
	until_ok('the SQL waiter is subscribed to redisson_rwlock:{name}', sub { numsub($chan) >= 1 });
	is($java->unlock_write($name, 1), 1, 'Redisson writer leaves (publishes 1)');
	my ($v, $err) = finish_or_cancel($a);
	is($v, 't', 'the SQL read waiter is woken and gets it') or diag($err);
	is_deeply(shape($name), { mode => 'read', readers => { $a_id => 1 }, writers => {} },
		'SQL A reads');
	is($a->query("SELECT redis_read_lock_release('$name')"), 't', 'SQL A leaves');
	until_ok('the SQL waiter unsubscribed', sub { numsub($chan) == 0 });
}

# 3b. the last Redisson reader unlocks -> SQL write waiter; its writer mark
#     keeps new SQL readers out, Redisson readers ignore it
{
	my $name = 'rwi:wake:w';
	my $o = observer($name);
	is($java->try_read_lock($name, 1), undef, 'Redisson thread 1 reads (10 min lease)');
	is($java->try_read_lock($name, 2), undef, 'Redisson thread 2 reads');
	$b->start("SELECT redis_write_lock_acquire('$name', '5 min', '10 min')");
	waits_ok($b, 'SQL write waiter');
	until_ok('the SQL waiter is subscribed', sub { numsub(FakeRedisson::rw_channel($name)) >= 2 });
	is($rc->cmd('GET', mark_key($name)), $b_id, "the waiting writer's mark names B");
	is($c->query("SELECT redis_read_lock_acquire('$name', '0', '10 min')"), 'f',
		'a new SQL reader stays out while the SQL writer waits');
	is($java->try_read_lock($name, 3), undef, 'a new Redisson reader (thread 3) ignores the mark');
	is($java->unlock_read($name, 1), 0, 'Redisson thread 1 leaves: 0');
	is($java->unlock_read($name, 3), 0, 'Redisson thread 3 leaves: 0');
	is_deeply(published($o, $name), [], 'nothing published while a reader remains');
	ok(!$b->is_done, 'the SQL writer still waits');
	is($java->unlock_read($name, 2), 1, 'Redisson thread 2, the last reader, leaves: 1');
	is_deeply(published($o, $name), ['0'], '... 0 published');
	my ($v, $err) = finish_or_cancel($b);
	is($v, 't', 'the SQL write waiter is woken and gets it') or diag($err);
	is_deeply(shape($name), { mode => 'write', readers => {}, writers => { $b_id => 1 } },
		'SQL B writes');
	is($rc->cmd('EXISTS', mark_key($name)), 0, "B's writer mark is gone");
	ok(defined $java->try_read_lock($name, 1), 'Redisson reader refused by the SQL writer');
	is($b->query("SELECT redis_write_lock_release('$name')"), 't', 'SQL B leaves');
	is_deeply(published($o, $name), ['1'], '... 1 published');
	$o->close;
}

# 3c. the SQL writer releases -> Redisson read waiter
{
	my $name = 'rwi:wake:jr';
	is($a->query("SELECT redis_write_lock_acquire('$name', '0', '10 min')"), 't', 'SQL A writes (10 min lease)');
	my $w = $java->read_waiter($name, 1);
	ok(!$w->acquired && $w->subscribed, 'a Redisson read waiter waits, subscribed');
	ok($w->ttl > $T * 1000, "... told to retry only at the lock's TTL ($w->{ttl} ms)");
	is($a->query("SELECT redis_write_lock_release('$name')"), 't', 'SQL A leaves');
	ok($w->wait($T), 'the Redisson read waiter gets the lock');
	is_deeply($w->events, [ [ message => '1' ] ], '... woken by the message 1, not by a timeout');
	is_deeply(shape($name), { mode => 'read', readers => { $java->owner(1) => 1 }, writers => {} },
		'Redisson reads');
	is($java->unlock_read($name, 1), 1, 'Redisson leaves');
}

# 3d. the last SQL reader releases -> Redisson write waiter
{
	my $name = 'rwi:wake:jw';
	my $o = observer($name);
	is($a->query("SELECT redis_read_lock_acquire('$name', '0', '10 min')"), 't', 'SQL A reads (10 min lease)');
	is($b->query("SELECT redis_read_lock_acquire('$name', '0', '10 min')"), 't', 'SQL B reads');
	my $w = $java->write_waiter($name, 1);
	ok(!$w->acquired && $w->subscribed, 'a Redisson write waiter waits, subscribed');
	ok($w->ttl > $T * 1000, "... told to retry only at the lock's TTL ($w->{ttl} ms)");
	is($a->query("SELECT redis_read_lock_release('$name')"), 't', 'SQL A leaves');
	is_deeply(published($o, $name), [], 'nothing published: B still reads');
	is($b->query("SELECT redis_read_lock_release('$name')"), 't', 'SQL B, the last reader, leaves');
	is_deeply(published($o, $name), ['0'], '... 0 published');
	ok($w->wait($T), 'the Redisson write waiter gets the lock');
	is_deeply($w->events, [ [ message => '0' ] ], '... woken by the message 0, not by a timeout');
	is_deeply(shape($name), { mode => 'write', readers => {}, writers => { $java->owner(1) => 1 } },
		'Redisson writes');
	is($java->unlock_write($name, 1), 1, 'Redisson leaves');
	$o->close;
}

# 3e. a SQL reader waiting to upgrade to write, while other readers (SQL and
#     Redisson) hold it.  No side publishes while a live reader remains, and
#     the upgrader is one, so:
#     (i)  last other reader Redisson: its unlock publishes nothing (Redisson's
#          rule, as it sees the upgrader's live rwlock_timeout key); the
#          upgrader can only come in by its own retry.  A runs with
#          fair_wait_timeout = 3 s, so its place refresh retries every 1 s.
#          Asserted: the upgrade completes, and nothing was published.
#     (ii) last other reader SQL: ours could tell the upgrader, and must, as
#          our write_release publishes on a downgrade so that readers come
#          in "at once instead of at their retry".  With 10 min leases and
#          fair_wait_timeout 1 h (retry every 20 min), only a message can
#          bring the upgrader in within $T.
sub upgrade_wait
{
	my ($name, $last) = @_;
	my $o = observer($name);
	is($a->query("SELECT redis_read_lock_acquire('$name', '0', '10 min')"), 't', "[$name] SQL A reads (10 min)");
	is($b->query("SELECT redis_read_lock_acquire('$name', '0', '10 min')"), 't', "[$name] SQL B reads");
	is($java->try_read_lock($name, 1), undef, "[$name] Redisson reads (10 min)");
	$a->start("SELECT redis_write_lock_acquire('$name', '5 min', '10 min')");
	waits_ok($a, "[$name] SQL A, upgrading to write,");
	until_ok("[$name] A is subscribed", sub { numsub(FakeRedisson::rw_channel($name)) >= 2 });
	is($rc->cmd('GET', mark_key($name)), $a_id, "[$name] A's writer mark is set");
	if ($last eq 'redisson')
	{
		is($b->query("SELECT redis_read_lock_release('$name')"), 't', "[$name] SQL B leaves");
		ok(!$a->is_done, "[$name] A still waits: the Redisson reader holds");
		is($java->unlock_read($name, 1), 0, "[$name] Redisson, the last other reader, leaves: 0 (A's read is live)");
	}
	else
	{
		is($java->unlock_read($name, 1), 0, "[$name] Redisson leaves: 0");
		ok(!$a->is_done, "[$name] A still waits: SQL B reads");
		is($b->query("SELECT redis_read_lock_release('$name')"), 't', "[$name] SQL B, the last other reader, leaves");
	}
	my $pub = published($o, $name);
	my ($v, $err) = finish_or_cancel($a);
	if ($last eq 'redisson')
	{
		is_deeply($pub, [], "[$name] nothing was published");
		is($v, 't', "[$name] A's upgrade completes (by its retry)") or diag($err);
	}
	else
	{
		is($v, 't', "[$name] A's upgrade completes once the last other reader, a SQL session, left")
		  or diag("A still waits ($err); published on the channel: [@$pub]; "
			  . join('', explain($java->rw_state($name))));
	}
	if (defined $v && $v eq 't')
	{
		is_deeply(shape($name), { mode => 'write', readers => { $a_id => 1 }, writers => { $a_id => 1 } },
			"[$name] A reads and writes");
		is($rc->cmd('EXISTS', mark_key($name)), 0, "[$name] A's mark is gone");
		is($a->query("SELECT redis_write_lock_release('$name')"), 't', "[$name] A releases the write hold");
	}
	is($a->query("SELECT redis_read_lock_release('$name')"), 't', "[$name] A releases the read hold");
	is($rc->cmd('EXISTS', $name), 0, "[$name] the hash is gone");
	$o->close;
}
$a->query("SET redislock.fair_wait_timeout = '3s'");
upgrade_wait('rwi:upgrade:java', 'redisson');
$a->query('RESET redislock.fair_wait_timeout');
upgrade_wait('rwi:upgrade:sql', 'sql');

# --- 4. downgrades -------------------------------------------------------------------
# 4a. SQL: write, then read, release write -> mode read, a Redisson reader gets in
{
	my $name = 'rwi:down:sql';
	my $o = observer($name);
	is($a->query("SELECT redis_write_lock_acquire('$name', '0', '10 min')"), 't', 'SQL A writes');
	is($a->query("SELECT redis_read_lock_acquire('$name', '0', '10 min')"), 't', 'SQL A also reads');
	is_deeply(shape($name), { mode => 'write', readers => { $a_id => 1 }, writers => { $a_id => 1 } },
		'mode write, A is writer and reader');
	my $w = $java->read_waiter($name, 1);
	ok(!$w->acquired && $w->subscribed, 'a Redisson read waiter waits');
	is($a->query("SELECT redis_write_lock_release('$name')"), 't', 'SQL A releases its write hold');
	is_deeply(shape($name), { mode => 'read', readers => { $a_id => 1 }, writers => {} },
		'downgraded: mode read, A still reads');
	is_deeply(published($o, $name), ['1'], 'our downgrade publishes 1 (Redisson would publish nothing)');
	ok($w->wait($T), 'the Redisson read waiter gets in');
	is_deeply($w->events, [ [ message => '1' ] ], '... woken by that 1');
	is_deeply(shape($name)->{readers}, { $a_id => 1, $java->owner(1) => 1 },
		'SQL A and the Redisson reader share it');
	ok(defined $java->try_write_lock($name, 2), 'a Redisson writer is refused');
	is($a->query("SELECT redis_read_lock_release('$name')"), 't', 'SQL A leaves');
	is($java->unlock_read($name, 1), 1, 'Redisson leaves last: 1');
	is_deeply(published($o, $name), ['0'], '0 published by the last reader');
	$o->close;
}

# 4b. Redisson: write, then read, unlock write -> mode read, nothing
#     published; a SQL read waiter still gets in.  The Java client runs with
#     lockWatchdogTimeout = 2 s and the test plays its watchdog (write and
#     read rounds) on every poll, so the hash's TTL, and with it the SQL
#     waiter's retry, stays within 2 s while the Redisson holds never lapse.
#     Asserted: the downgrade publishes nothing; the SQL reader gets in
#     (within $T) while the Redisson reader still holds, so by sharing the
#     read mode, not by an expiry; every watchdog round found the holds.
#     Not asserted: when the SQL waiter retried (it is the TTL-bound retry).
{
	my $name = 'rwi:down:java';
	my $o = observer($name);
	my $jd = FakeRedisson->new(port => $redis->port, lease => $SHORT);
	my $writing = 1;
	my $renew = sub {
		my $ok = $jd->renew_read($name, 1);
		$ok &&= $jd->renew_write($name, 1) if $writing;
		return $ok;
	};
	is($jd->try_write_lock($name, 1), undef, 'Redisson writes (watchdog lease 2 s)');
	is($jd->try_read_lock($name, 1), undef, '... and reads (W -> R)');
	$a->start("SELECT redis_read_lock_acquire('$name', '5 min', '10 min')");
	my $missed = renewing_until('the SQL read waiter waits, subscribed (Redisson watchdog running)',
		$renew, sub { in_wait($a) && numsub(FakeRedisson::rw_channel($name)) >= 2 });
	ok(!$a->is_done, 'the SQL reader is kept out by the Redisson writer');
	is($jd->unlock_write($name, 1), 1, 'Redisson releases its write hold: 1');
	$writing = 0;
	is_deeply(published($o, $name), [], 'the Redisson downgrade publishes nothing');
	is($jd->cmd('HGET', $name, 'mode'), 'read', 'mode read');
	$missed += renewing_until('the SQL read waiter returns (Redisson read watchdog running)',
		$renew, sub { $a->is_done });
	my ($v, $err) = finish_or_cancel($a);
	is($v, 't', 'the SQL read waiter got in after the Redisson downgrade') or diag($err);
	is($missed, 0, 'every Redisson watchdog round found its holds: they never lapsed');
	my $st = $jd->rw_state($name);
	is_deeply({ mode => $st->{mode}, readers => $st->{readers}, writers => $st->{writers} },
		{ mode => 'read', readers => { $a_id => 1, $jd->owner(1) => 1 }, writers => {} },
		'the SQL reader shares it with the Redisson reader, still there');
	ok($st->{timeouts}{ $jd->owner(1) }[0] > 0, "... whose rwlock_timeout:1 key is alive");
	is($jd->unlock_read($name, 1), 0, 'Redisson leaves: 0 (the SQL reader is live)');
	is($a->query("SELECT redis_read_lock_release('$name')"), 't', 'SQL A leaves');
	is_deeply(published($o, $name), ['0'], '0 published once, by the last (SQL) reader');
	$o->close;
}

# --- 5. a crashed Redisson reader's hold runs out --------------------------------------
# The crashed reader is a Java client with lockWatchdogTimeout = 2 s whose
# watchdog the test plays until the "crash", then never again.
# 5a. alone: a SQL writer with a bounded wait gets in once its lease lapsed
{
	my $name = 'rwi:crash:1';
	my $jc = FakeRedisson->new(port => $redis->port, lease => $SHORT);
	my $ck = tkey($name, $jc->owner(1));
	is($jc->try_read_lock($name, 1), undef, 'Redisson reader (2 s watchdog lease)');
	$b->start("SELECT redis_write_lock_acquire('$name', '60 s', '10 min')");
	my $early = 0;
	my $missed = renewing_until('the SQL writer waits while the reader is alive',
		sub { $jc->renew_read($name, 1) },
		sub { $early++ if $b->is_done; in_wait($b) });
	is($missed + $early, 0, 'the reader stayed alive and the writer stayed out');
	# the crash: no more watchdog rounds
	my ($v, $err) = finish_or_cancel($b);
	is($v, 't', "the SQL writer's bounded wait succeeds after the crashed reader's lease")
	  or diag($err);
	is_deeply(shape($name), { mode => 'write', readers => {}, writers => { $b_id => 1 } },
		'SQL B writes; the crashed reader is gone');
	is($rc->cmd('EXISTS', $ck), 0, "the crashed reader's timeout key expired");
	is($jc->renew_read($name, 1), 0, "a late watchdog round of the crashed reader finds nothing");
	is($b->query("SELECT redis_write_lock_release('$name')"), 't', 'SQL B leaves');
}

# A live SQL reader A (10 min) and a crashed Redisson reader (a fixed lease,
# no watchdog) whose key ran out while its field stays in the hash (A's
# lease keeps the hash).
sub stale_reader
{
	my ($name) = @_;
	my $jc = FakeRedisson->new(port => $redis->port, lease => $LONG);
	my $ck = tkey($name, $jc->owner(1));
	is($a->query("SELECT redis_read_lock_acquire('$name', '0', '10 min')"), 't', "[$name] SQL A reads (10 min)");
	is($jc->try_read_lock($name, 1, 1500), undef,
		"[$name] a Redisson reader with a fixed 1500 ms lease joins, then crashes");
	until_ok("[$name] the crashed reader's timeout key expires", sub { !$rc->cmd('EXISTS', $ck) }, $T);
	is($rc->cmd('HGET', $name, $jc->owner(1)), '1', "[$name] its field is still in the hash (stale)");
	ok($rc->cmd('PTTL', $name) > $T * 1000, "[$name] the hash lives on A's lease");
	return $jc;
}

# 5b. the stale field still counts, as for Redisson's writer (R4): the sole
#     live SQL reader cannot upgrade past it; once the Redisson reader
#     unlocks (late, its hold still found), A upgrades
{
	my $name = 'rwi:crash:2';
	my $jc = stale_reader($name);
	is($b->query("SELECT redis_write_lock_acquire('$name', '0', '10 min')"), 'f',
		'SQL B cannot write: A reads');
	is($a->query("SELECT redis_write_lock_acquire('$name', '0', '10 min')"), 'f',
		'SQL A, the only live reader, cannot upgrade past the stale reader');
	is($rc->cmd('HGET', $name, $jc->owner(1)), '1', "the stale reader's field is untouched");
	is($jc->unlock_read($name, 1), 0, "the Redisson reader's late unlock finds its hold: 0 (A reads on)");
	is($a->query("SELECT redis_write_lock_acquire('$name', '0', '10 min')"), 't',
		'SQL A, now the only reader, upgrades to write at once');
	is_deeply(shape($name), { mode => 'write', readers => { $a_id => 1 }, writers => { $a_id => 1 } },
		'mode write, A reads and writes');
	is($c->query("SELECT redis_read_lock_acquire('$name', '0', '10 min')"), 'f', 'SQL C cannot read');
	is($a->query("SELECT redis_write_lock_release('$name')"), 't', 'A releases the write hold');
	is($a->query("SELECT redis_read_lock_release('$name')"), 't', 'A releases the read hold');
	is($rc->cmd('EXISTS', $name), 0, 'the hash is gone');
}

# 5c. a SQL writer waits for the live SQL reader only: A's release, the last
#     live reader's, deletes the hash, stale field and all, and publishes 0
{
	my $name = 'rwi:crash:3';
	my $o = observer($name);
	my $jc = stale_reader($name);
	$b->start("SELECT redis_write_lock_acquire('$name', '5 min', '10 min')");
	waits_ok($b, 'SQL B write waiter');
	until_ok('B is subscribed', sub { numsub(FakeRedisson::rw_channel($name)) >= 2 });
	is($a->query("SELECT redis_read_lock_release('$name')"), 't', 'SQL A, the last live reader, leaves');
	is_deeply(published($o, $name), ['0'], '... 0 published (the stale field does not count)');
	my ($v, $err) = finish_or_cancel($b);
	is($v, 't', 'the SQL writer is woken and gets it') or diag($err);
	is_deeply(shape($name), { mode => 'write', readers => {}, writers => { $b_id => 1 } },
		'SQL B writes; no stale field');
	is($b->query("SELECT redis_write_lock_release('$name')"), 't', 'SQL B leaves');
	$o->close;
}

# 5d. the other way round: a crashed Redisson reader that ran under Java's
#     watchdog must not take a live SQL reader's fixed-lease hold with it.
#     Redisson's read watchdog round (ReadLockTask, 4.4+) PEXPIREs the hash
#     to lockWatchdogTimeout (2 s here), below the 10 min that A's hold
#     still has; once that client is gone, nothing on the Redisson side
#     lengthens it again.  Checked after the hash's TTL at the round has
#     passed on Redis's clock (a marker key set right after the round).
{
	my $name = 'rwi:crash:4';
	my $jc = FakeRedisson->new(port => $redis->port, lease => $SHORT);
	my $ak = tkey($name, $a_id, 1);
	is($a->query("SELECT redis_read_lock_acquire('$name', '0', '10 min')"), 't', 'SQL A reads (fixed 10 min lease)');
	is($jc->try_read_lock($name, 1), undef, 'a Redisson reader (2 s watchdog lease) joins');
	is($jc->renew_read($name, 1), 1, '... its watchdog runs a round, then it crashes');
	my $p = $rc->cmd('PTTL', $name);
	set_marker('marker:rwi:crash:4', $SHORT);
	diag("the hash's TTL after the Redisson watchdog round: $p ms");
	until_ok("the crashed reader's key expired and 2 s passed since the round",
		sub { !$rc->cmd('EXISTS', tkey($name, $jc->owner(1))) && !$rc->cmd('EXISTS', 'marker:rwi:crash:4') }, $T);
	ok($rc->cmd('PTTL', $ak) > $T * 1000, "A's own rwlock_timeout:1 key still has most of its 10 min");
	is($rc->cmd('HGET', $name, $a_id), '1', "A's read hold is still in Redis (the hash outlives the crashed reader)");
	is($b->query("SELECT redis_write_lock_acquire('$name', '0', '10 min')"), 'f',
		'SQL B cannot write while A reads');
	# B gives back what it should not have got (no test line)
	$b->query("SELECT redis_write_lock_release('$name')") if $rc->cmd('HEXISTS', $name, "$b_id:write");
	my ($v) = $a->try("SELECT redis_read_lock_release('$name')");
	# (its WARNING, if any, is shown here and left out of section 7's check)
	my @n = $a->notices;
	is($v, 't', 'A releases its read hold: t') or diag(join("\n", @n));
	$rc->cmd('DEL', $name);
}

# --- 6. the watchdog renews SQL read holds past many leases -------------------------------
{
	my $name = 'rwi:renew';
	my $o = observer($name);
	my $ak = tkey($name, $a_id, 1);
	my $marker = 'marker:rwi:renew';
	is($a->query("SELECT redis_read_lock_acquire('$name')"), 't', "SQL A reads with the watchdog (lease ${WD} ms)");
	my $row = lockrow($a, $name, 'read');
	is($row->{renewal}, 'watchdog', 'redis_locks: renewal watchdog');
	is(0 + $row->{lease_ms}, $WD, 'redis_locks: the lease is watchdog_timeout');
	ok($rc->cmd('PTTL', $ak) <= $WD, 'the timeout key has the lease as TTL');

	# Three leases on Redis's clock, counting renewals seen in redis_locks
	# (renewed_at changes) and in Redis (the timeout key's PTTL going up,
	# which only a renewal does).
	my $watch = sub {
		my ($phase) = @_;
		set_marker($marker, 3 * $WD);
		my ($last_at, $last_pttl, $changes, $raises) = (lockrow($a, $name, 'read')->{renewed_at}, undef, 0, 0);
		until_ok("[$phase] 3 leases pass with >= 3 renewals seen in redis_locks and in Redis", sub {
			my $at = lockrow($a, $name, 'read')->{renewed_at};
			$changes++ if defined $at && $at ne $last_at;
			$last_at = $at;
			my $p = $rc->cmd('PTTL', $ak);
			$raises++ if defined $last_pttl && $p > $last_pttl;
			$last_pttl = $p;
			return $changes >= 3 && $raises >= 3 && !$rc->cmd('EXISTS', $marker);
		}, $T);
		diag("[$phase] renewed_at changed $changes times, the key's PTTL went up $raises times");
		is($rc->cmd('HGET', $name, $a_id), '1', "[$phase] A's read field is in the hash");
		ok($rc->cmd('PTTL', $ak) > 0, "[$phase] A's rwlock_timeout:1 key is alive past 3 leases");
		ok($rc->cmd('PTTL', $name) > 0, "[$phase] the hash is alive");
		is(lockrow($a, $name, 'read')->{state}, 'held', "[$phase] redis_locks: held");
	};
	$watch->('alone');

	is($java->try_read_lock($name, 1), undef, 'a Redisson reader (10 min lease) joins');
	ok($rc->cmd('PTTL', $name) > $WD, "... the hash's TTL is its 10 min lease");
	is($java->unlock_read($name, 1), 0,
		'the Redisson reader leaves: 0 (it sees our live rwlock_timeout key)');
	is_deeply(published($o, $name), [], '... nothing published');
	my $p = $rc->cmd('PTTL', $name);
	ok($p > 0 && $p <= $WD, "... the hash stays, its TTL cut to our key's remaining TTL ($p ms)");
	$watch->('after the Redisson unlock');

	is($a->query("SELECT redis_read_lock_release('$name')"), 't', 'SQL A leaves');
	is_deeply(published($o, $name), ['0'], '... 0 published');
	is($rc->cmd('EXISTS', $name) + $rc->cmd('EXISTS', $ak), 0, 'the hash and the timeout key are gone');
	$o->close;
}

# --- 7. nothing lost, nothing crashed -------------------------------------------------------
{
	my $stats = lock_stats($obs);
	is($stats->{lost_locks}, 0, 'redis_lock_stats: no lost locks');
	is($stats->{renewal_failures}, 0, 'redis_lock_stats: no failed renewals');
	ok($stats->{renewals} >= 6, "redis_lock_stats: renewals counted ($stats->{renewals})");
	push @notices, map { $_->notices } $a, $b, $c;
	is_deeply([ grep { /lost|no longer held/ } @notices ], [],
		'no session was told that a hold was lost or no longer held');
	my @lost = grep { /was lost|had been lost/ } split /\n/, slurp($node->logfile);
	is_deeply(\@lost, [], 'no "was lost" WARNING in the server log');
	no_crash_ok($node, 'read-write locks with Redisson');
}

$_->close for $a, $b, $c;
done_testing();
