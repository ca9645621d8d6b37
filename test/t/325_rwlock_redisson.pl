# 325_rwlock_redisson.pl — read-write locks shared by SQL sessions and a
# Redisson client (RReadWriteLock) on the same names: readers share across
# both sides, writers exclude both ways, a Redisson writer's unlock wakes a
# SQL reader and the last Redisson reader's a SQL writer (whose writer mark
# keeps new SQL readers out, not Redisson's), an upgrade waits for the
# other readers of both sides, downgrades on either side let readers in, a
# crashed Redisson reader's hold runs out and stops keeping writers out, and
# the watchdog keeps SQL read holds (their rwlock_timeout keys included)
# alive past many leases, so that a Redisson reader's unlock sees them.
# A Redisson reader or writer woken by a SQL release is 500's 'rwlock'
# check, for every version.
#
# Two groups of checks fail on commit 8eec616 (defects, see the comments at
# 3e (ii) and 5d): a SQL reader waiting to upgrade to write is not woken when
# the last other reader, a SQL session, leaves; and a SQL reader's
# fixed-lease hold is lost when a Redisson reader that ran under Java's
# watchdog crashes.
#
# The Java client is the real one (RealRedisson: test/redisson-java's
# driver, the newest version in @RealRedisson::VERSIONS, with
# lockWatchdogTimeout 2 s; a second JVM is killed in 5a).  The transcribed
# client (test/redisson/FakeRedisson.pm: Redisson's scripts, test/redisson/
# rw_*.lua) plays Redisson only where the Java API cannot show what is
# checked: the scripts' return codes (2r) and exactly one read watchdog
# round before a crash (5d).  Elsewhere FakeRedisson is only a Redis
# connection, key and channel names and the rw_state snapshot.
#
# No sleeps and no timing thresholds:
# * holders use 10-minute leases wherever a wake-up is checked, and the
#   SQL writers' place refresh (fair_wait_timeout / 3) is 20 minutes, so
#   that within the bounds used here only a publish can explain a wake-up;
# * what was published is read by an observer subscribed to the lock's
#   channel and to a marker channel: the test publishes a marker and takes
#   the messages that came before it (Redis delivers in publish order);
# * a Redisson hold on the watchdog (2 s) is kept by Redisson's own
#   watchdog: a renewal is seen as its rwlock_timeout key's PTTL going up,
#   and a hold that lapsed never comes back, so its field and live key at
#   the end show it never lapsed; a crash is a SIGKILL of the JVM; a
#   crashed reader with a fixed lease is waited out by its rwlock_timeout
#   key's expiry;
# * "past N leases" is measured by Redis's own clock: a marker key set with
#   PX N * lease after the hold's keys got their expiry, waited out.
# Takes about 1 min (two JVM starts).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use RealRedisson;
use FakeRedisson;
use Test::More;

my $T     = 60;         # bound for anything that should happen "at once", s
my $LONG  = 600_000;    # the Java client's lease: 10 min, ms
my $SHORT = 2000;       # lockWatchdogTimeout of the Java clients, ms
my $WD    = 2000;       # redislock.watchdog_timeout, ms (the GUC's minimum is 1 s)

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('rwredisson', $redis,
	'redislock.watchdog_timeout' => "${WD}ms",
	# a waiting SQL writer refreshes its mark every fair_wait_timeout / 3:
	# 20 min, so only a message can wake it within $T
	'redislock.fair_wait_timeout' => '1h');
my $rc   = FakeRedisson::Conn->new(port => $redis->port);
my ($JAVA_VERSION) = reverse RealRedisson::versions();
my $why = RealRedisson::check_build($JAVA_VERSION);
ok(!$why, "Redisson $JAVA_VERSION: driver available") or diag($why);
my $java = RealRedisson->new(version => $JAVA_VERSION, port => $redis->port, options => ["watchdog=$SHORT"]);
note("Redisson $JAVA_VERSION: client id " . $java->id . ', log ' . $java->logfile);
# the transcribed scripts, for the return codes (2r) and 5d
my $fake = FakeRedisson->new(port => $redis->port, lease => $LONG);
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
sub rw_chan { FakeRedisson::rw_channel($_[0]) }
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
	my $st = $fake->rw_state($name) // return undef;
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

# The owner id (<client id>:<thread id>) of the main JVM's thread $t.
my %owners;
sub jowner { $owners{ $_[0] } //= $java->owner($_[0]) }

# Starts Java thread $t's lock operation @op as $tag and waits until it
# waits, subscribed: $name's channel has one subscriber more than $before.
# Until its result is in, that thread runs nothing else (take its owner id
# before).
sub java_waiter
{
	my ($tag, $t, $name, $before, @op) = @_;
	$java->start($tag, $t, @op);
	until_ok("[$name] the Redisson waiter ($op[0] $op[1]) is subscribed", sub { numsub(rw_chan($name)) > $before });
	is($java->poll($tag), undef, "[$name] ... and waits");
}

# Whether Redisson's watchdog renews $key: its PTTL goes up (by more than
# 100 ms over the lowest seen) before it runs out, within $T.
sub renewed_ok
{
	my ($key, $what) = @_;
	my ($low, $gone) = (undef, 0);
	my $ok = RedisLockTest::wait_until($T, "$what renewed", sub {
		my $p = $rc->cmd('PTTL', $key);
		if ($p < 0) { $gone = 1; return 1; }
		$low = $p if !defined $low || $p < $low;
		return $p > $low + 100;
	});
	return ok($ok && !$gone, "$what: Redisson's watchdog renews it" . ($gone ? ' (it expired)' : ''));
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
	is($java->run('t1', 'tryLock', 'read', $name, 0, $LONG), 'true', 'Redisson thread t1 reads too: readers share');
	is($a->query("SELECT redis_read_lock_acquire('$name', '0', '10 min')"), 't',
		'SQL A re-enters its read (nested hold 2, counted in the session)');
	is($b->query("SELECT redis_read_lock_acquire('$name', '0', '10 min')"), 't',
		'SQL B reads as well, with a Redisson reader in');
	is($java->run('t2', 'tryLock', 'read', $name, 0, $LONG), 'true', 'Redisson thread t2 reads, with SQL readers in');
	my $st = $fake->rw_state($name);
	is($st->{mode}, 'read', 'rw_state: mode read');
	is_deeply($st->{readers},
		{ $a_id => 1, $b_id => 1, jowner('t1') => 1, jowner('t2') => 1 },
		'rw_state: all four readers, SQL and Redisson, in one hash (A counted once: nested holds are counted in the session)');
	is_deeply($st->{writers}, {}, 'rw_state: no writer');
	ok(!grep({ $_ <= 0 } map { @$_ } values %{ $st->{timeouts} }),
		'every read hold, SQL and Redisson, has its live rwlock_timeout:n key')
	  or diag(explain($st->{timeouts}));
	is(scalar(@{ $st->{timeouts}{$a_id} }), 1, "A's nested holds share key :1");
	is($java->run('t1', 'isLocked', 'read', $name) . '/' . $java->run('t1', 'isLocked', 'write', $name), 'true/false',
		'Redisson isLocked: read yes, write no');
	is($a->query("SELECT rw_mode FROM redis_lock_status('$name')"), 'read',
		'redis_lock_status: rw_mode read');
	is($a->query("SELECT holders @> ARRAY['" . jowner('t1') . "', '$b_id']::text[] "
			  . "FROM redis_lock_status('$name')"), 't',
		'redis_lock_status lists the Redisson reader and the other SQL reader');

	# a SQL release cannot take a Redisson hold
	is($c->query("SELECT redis_read_lock_release('$name')"), 'f',
		'SQL C, holding nothing, releases: f');
	like(take_notices($c), qr/WARNING:.*you don't own/, '... with a WARNING');
	is($rc->cmd('HGET', $name, jowner('t1')), '1', "... the Redisson reader's hold is untouched");

	is($java->run('t1', 'unlock', 'read', $name), 'null', 'Redisson thread t1 leaves (SQL readers live)');
	is($rc->cmd('HEXISTS', $name, jowner('t1')), 0, '... its field is gone');
	is($a->query("SELECT redis_read_lock_release('$name')"), 't', 'SQL A drops one hold');
	ok($rc->cmd('HGET', $name, $a_id) eq '1' && $rc->cmd('PTTL', tkey($name, $a_id, 1)) > 0,
		'... A still reads in Redis, with its live key :1 (a hold is left in the session)');
	is($a->query("SELECT redis_read_lock_release('$name')"), 't', 'SQL A drops its last hold');
	is($rc->cmd('EXISTS', tkey($name, $a_id, 1)) + $rc->cmd('EXISTS', tkey($name, $a_id, 2)), 0,
		"A's timeout keys are deleted");
	is($b->query("SELECT redis_read_lock_release('$name')"), 't', 'SQL B leaves');
	is_deeply(published($o, $name), [], 'no message while a reader remains');
	is_deeply(shape($name), { mode => 'read', readers => { jowner('t2') => 1 }, writers => {} },
		'only Redisson thread t2 still reads');
	is($java->run('t2', 'unlock', 'read', $name), 'null', 'Redisson thread t2, the last reader, leaves');
	is_deeply(published($o, $name), ['0'], '... 0 published once, by the last reader');
	is($rc->cmd('EXISTS', $name), 0, 'the hash is gone');
	$o->close;
}

# --- 2. writers exclude both ways ---------------------------------------------------
{
	my $name = 'rwi:excl';
	# Redisson writes
	is($java->run('w1', 'tryLock', 'write', $name, 0, $LONG), 'true', 'Redisson writes');
	is($a->query("SELECT redis_read_lock_acquire('$name', '0', '10 min')"), 'f',
		"SQL read, wait '0': f");
	is($a->query("SELECT redis_write_lock_acquire('$name', '0', '10 min')"), 'f',
		"SQL write, wait '0': f");
	is($rc->cmd('EXISTS', mark_key($name)), 0, "a one-shot SQL writer leaves no writer mark");
	is($a->query("SELECT redis_write_lock_release('$name')"), 'f',
		'SQL write release of a Redisson write hold: f');
	like(take_notices($a), qr/WARNING:.*you don't own/, '... with a WARNING');
	is_deeply(shape($name), { mode => 'write', readers => {}, writers => { jowner('w1') => 1 } },
		'only the Redisson writer holds it, untouched');
	is($java->run('w1', 'unlock', 'write', $name), 'null', 'Redisson leaves');

	# SQL writes
	is($a->query("SELECT redis_write_lock_acquire('$name', '0', '10 min')"), 't', 'SQL A writes');
	is($java->run('r1', 'tryLock', 'read', $name, 0, $LONG), 'false', 'Redisson read attempt refused');
	is($java->run('w1', 'tryLock', 'write', $name, 0, $LONG), 'false', 'Redisson write attempt refused');
	my (undef, $e) = $java->try_run('w1', 'unlock', 'write', $name);
	like($e // 'no error', qr/IllegalMonitorStateException/,
		'Redisson write unlock of the SQL hold: IllegalMonitorStateException (not held by that thread)');
	is_deeply(shape($name), { mode => 'write', readers => {}, writers => { $a_id => 1 } },
		'only SQL A holds it, as writer <owner>:write');
	is($a->query("SELECT redis_write_lock_release('$name')"), 't', 'SQL A leaves');

	# readers on one side exclude writers on the other
	is($a->query("SELECT redis_read_lock_acquire('$name', '0', '10 min')"), 't', 'SQL A reads');
	is($java->run('w1', 'tryLock', 'write', $name, 0, $LONG), 'false', 'Redisson write refused by the SQL reader');
	is($java->run('r1', 'tryLock', 'read', $name, 0, $LONG), 'true', 'Redisson reads');
	is($a->query("SELECT redis_write_lock_acquire('$name', '0', '10 min')"), 'f',
		'SQL A is no sole reader: its upgrade to write is refused');
	is($b->query("SELECT redis_write_lock_acquire('$name', '0', '10 min')"), 'f',
		'SQL B write refused');
	is($a->query("SELECT redis_read_lock_release('$name')"), 't', 'SQL A leaves');
	is($b->query("SELECT redis_write_lock_acquire('$name', '0', '10 min')"), 'f',
		'SQL B write still refused by the Redisson reader alone');
	is($java->run('r1', 'unlock', 'read', $name), 'null', 'Redisson leaves');
	is($rc->cmd('EXISTS', $name), 0, 'the hash is gone');
}

# --- 2r. what Redisson's scripts return beside SQL holders -----------------------------
# Stays FakeRedisson: the Java API hides these return codes (unlock is
# void, a refused tryLock says false, not the TTL Redisson retries at).
{
	my $name = 'rwi:codes';
	is($a->query("SELECT redis_read_lock_acquire('$name', '0', '10 min')"), 't', 'SQL A reads');
	is($fake->try_read_lock($name, 1), undef, 'read lock script beside a SQL reader: nil (acquired)');
	is($fake->unlock_read($name, 1), 0,
		'read unlock script while a SQL reader is live: 0 (no delete, no publish; so in 3e and 6 too)');
	is($fake->try_read_lock($name, 1), undef, 'the Redisson reader again');
	is($a->query("SELECT redis_read_lock_release('$name')"), 't', 'SQL A leaves');
	is($fake->unlock_read($name, 1), 1, 'read unlock script of the last reader: 1 (delete, publish 0)');
	is($fake->renew_read($name, 1), 0, 'a read watchdog round after the hold is gone: 0');

	is($a->query("SELECT redis_write_lock_acquire('$name', '0', '10 min')"), 't', 'SQL A writes (10 min lease)');
	my $ttl = $fake->try_read_lock($name, 1);
	ok(defined $ttl && $ttl > $T * 1000, "read lock script refused by the SQL writer: the lock's TTL, Redisson's retry ("
		  . ($ttl // 'nil') . ' ms)');
	$ttl = $fake->try_write_lock($name, 1);
	ok(defined $ttl && $ttl > $T * 1000, 'write lock script refused: the TTL (' . ($ttl // 'nil') . ' ms)');
	is($fake->unlock_write($name, 1), undef, 'write unlock script against the SQL write hold: nil (not held)');
	is($a->query("SELECT redis_write_lock_release('$name')"), 't', 'SQL A leaves');
	is($fake->try_write_lock($name, 1), undef, 'write lock script: nil (acquired)');
	is($fake->unlock_write($name, 1), 1, 'write unlock script: 1');
	is($rc->cmd('EXISTS', $name), 0, 'the hash is gone');
}

# --- 3. wake-ups (holders on 10-minute leases) ---------------------------------------
# A Redisson reader woken by a SQL write release, and a Redisson writer by
# the last SQL reader's release: 500's 'rwlock' check, every version.
# 3a. Redisson writer unlocks -> SQL read waiter
{
	my $name = 'rwi:wake:r';
	my $chan = rw_chan($name);
	is($java->run('w1', 'lock', 'write', $name, $LONG), 'null', 'Redisson writes (10 min lease)');
	$a->start("SELECT redis_read_lock_acquire('$name', '5 min', '10 min')");
	waits_ok($a, 'SQL read waiter');
	until_ok('the SQL waiter is subscribed to redisson_rwlock:{name}', sub { numsub($chan) >= 1 });
	is($java->run('w1', 'unlock', 'write', $name), 'null', 'Redisson writer leaves');
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
	is($java->run('r1', 'lock', 'read', $name, $LONG), 'null', 'Redisson thread r1 reads (10 min lease)');
	is($java->run('r2', 'lock', 'read', $name, $LONG), 'null', 'Redisson thread r2 reads');
	$b->start("SELECT redis_write_lock_acquire('$name', '5 min', '10 min')");
	waits_ok($b, 'SQL write waiter');
	until_ok('the SQL waiter is subscribed', sub { numsub(rw_chan($name)) >= 2 });
	is($rc->cmd('GET', mark_key($name)), $b_id, "the waiting writer's mark names B");
	is($c->query("SELECT redis_read_lock_acquire('$name', '0', '10 min')"), 'f',
		'a new SQL reader stays out while the SQL writer waits');
	is($java->run('r3', 'tryLock', 'read', $name, 0, $LONG), 'true', 'a new Redisson reader (r3) ignores the mark');
	is($java->run('r1', 'unlock', 'read', $name), 'null', 'Redisson r1 leaves');
	is($java->run('r3', 'unlock', 'read', $name), 'null', 'Redisson r3 leaves');
	is_deeply(published($o, $name), [], 'nothing published while a reader remains');
	ok(!$b->is_done, 'the SQL writer still waits');
	is($java->run('r2', 'unlock', 'read', $name), 'null', 'Redisson r2, the last reader, leaves');
	is_deeply(published($o, $name), ['0'], '... 0 published');
	my ($v, $err) = finish_or_cancel($b);
	is($v, 't', 'the SQL write waiter is woken and gets it') or diag($err);
	is_deeply(shape($name), { mode => 'write', readers => {}, writers => { $b_id => 1 } },
		'SQL B writes');
	is($rc->cmd('EXISTS', mark_key($name)), 0, "B's writer mark is gone");
	is($java->run('r1', 'tryLock', 'read', $name, 0, $LONG), 'false', 'Redisson reader refused by the SQL writer');
	is($b->query("SELECT redis_write_lock_release('$name')"), 't', 'SQL B leaves');
	is_deeply(published($o, $name), ['1'], '... 1 published');
	$o->close;
}

# 3e. a SQL reader waiting to upgrade to write, while other readers (SQL and
#     Redisson) hold it.  No side publishes while a live reader remains, and
#     the upgrader is one, so:
#     (i)  last other reader Redisson: its unlock publishes nothing (Redisson's
#          rule, as it sees the upgrader's live rwlock_timeout key; its
#          script's 0 there is checked in 2r); the
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
	is($java->run('u1', 'lock', 'read', $name, $LONG), 'null', "[$name] Redisson reads (10 min)");
	$a->start("SELECT redis_write_lock_acquire('$name', '5 min', '10 min')");
	waits_ok($a, "[$name] SQL A, upgrading to write,");
	until_ok("[$name] A is subscribed", sub { numsub(rw_chan($name)) >= 2 });
	is($rc->cmd('GET', mark_key($name)), $a_id, "[$name] A's writer mark is set");
	if ($last eq 'redisson')
	{
		is($b->query("SELECT redis_read_lock_release('$name')"), 't', "[$name] SQL B leaves");
		ok(!$a->is_done, "[$name] A still waits: the Redisson reader holds");
		is($java->run('u1', 'unlock', 'read', $name), 'null', "[$name] Redisson, the last other reader, leaves (A's read is live)");
	}
	else
	{
		is($java->run('u1', 'unlock', 'read', $name), 'null', "[$name] Redisson leaves");
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
			  . join('', explain($fake->rw_state($name))));
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
	my $jo = jowner('d1');    # now: once the thread waits, it runs nothing else
	java_waiter('dr', 'd1', $name, 1, 'lock', 'read', $name, $LONG);
	is($a->query("SELECT redis_write_lock_release('$name')"), 't', 'SQL A releases its write hold');
	is_deeply(published($o, $name), ['1'], 'our downgrade publishes 1 (Redisson would publish nothing)');
	my ($st, $r) = $java->result('dr', $T);
	is($st, 'ok', "the Redisson read waiter gets in within $T s: woken by that 1 (A's holds have 10 min leases)")
	  or diag($r // 'no result');
	is_deeply(shape($name), { mode => 'read', readers => { $a_id => 1, $jo => 1 }, writers => {} },
		'downgraded: mode read, SQL A and the Redisson reader share it');
	is($java->run('d2', 'tryLock', 'write', $name, 0, $LONG), 'false', 'a Redisson writer is refused');
	is($a->query("SELECT redis_read_lock_release('$name')"), 't', 'SQL A leaves');
	is($java->run('d1', 'unlock', 'read', $name), 'null', 'Redisson leaves last') if $st;
	is_deeply(published($o, $name), ['0'], '0 published by the last reader');
	$o->close;
}

# 4b. Redisson: write, then read, unlock write -> mode read, nothing
#     published; a SQL read waiter still gets in.  The Java holds run on
#     Redisson's watchdog (lockWatchdogTimeout 2 s), so the hash's TTL, and
#     with it the SQL waiter's retry, stays within 2 s while they live.
#     Asserted: the downgrade publishes nothing; the SQL reader gets in
#     (within $T) while the Redisson reader still holds, so by sharing the
#     read mode, not by an expiry; the watchdog renewed the Redisson read
#     hold, whose field and timeout key are still there at the end (a lapsed
#     hold never comes back).
#     Not asserted: when the SQL waiter retried (it is the TTL-bound retry).
{
	my $name = 'rwi:down:java';
	my $o = observer($name);
	my $jk = tkey($name, jowner('d3'));
	is($java->run('d3', 'lock', 'write', $name), 'null', 'Redisson writes (watchdog lease 2 s)');
	is($java->run('d3', 'lock', 'read', $name), 'null', '... and reads (W -> R)');
	$a->start("SELECT redis_read_lock_acquire('$name', '5 min', '10 min')");
	until_ok('the SQL read waiter waits, subscribed', sub { in_wait($a) && numsub(rw_chan($name)) >= 2 });
	renewed_ok($jk, "the Redisson read hold's timeout key");
	ok(!$a->is_done, 'the SQL reader is kept out by the Redisson writer');
	is($java->run('d3', 'unlock', 'write', $name), 'null', 'Redisson releases its write hold');
	is_deeply(published($o, $name), [], 'the Redisson downgrade publishes nothing');
	is($rc->cmd('HGET', $name, 'mode'), 'read', 'mode read');
	my ($v, $err) = finish_or_cancel($a);
	is($v, 't', 'the SQL read waiter got in after the Redisson downgrade') or diag($err);
	is_deeply(shape($name), { mode => 'read', readers => { $a_id => 1, jowner('d3') => 1 }, writers => {} },
		'the SQL reader shares it with the Redisson reader, still there');
	ok($rc->cmd('PTTL', $jk) > 0, "... whose rwlock_timeout:1 key is alive: its hold never lapsed");
	is($java->run('d3', 'unlock', 'read', $name), 'null', 'Redisson leaves (the SQL reader is live)');
	is($a->query("SELECT redis_read_lock_release('$name')"), 't', 'SQL A leaves');
	is_deeply(published($o, $name), ['0'], '0 published once, by the last (SQL) reader');
	$o->close;
}

# --- 5. a crashed Redisson reader's hold runs out --------------------------------------
# 5a. alone: a reader on Redisson's watchdog (2 s) in a JVM of its own,
#     killed (SIGKILL): a SQL writer with a bounded wait gets in once its
#     lease lapsed
{
	my $name = 'rwi:crash:1';
	my $jc = RealRedisson->new(version => $JAVA_VERSION, port => $redis->port, options => ["watchdog=$SHORT"]);
	my $co = $jc->owner('c1');
	my $ck = tkey($name, $co);
	is($jc->run('c1', 'lock', 'read', $name), 'null', 'Redisson reader (watchdog lease 2 s)');
	$b->start("SELECT redis_write_lock_acquire('$name', '60 s', '10 min')");
	waits_ok($b, 'the SQL writer');
	renewed_ok($ck, "the reader's timeout key");
	ok(!$b->is_done, 'the writer stays out while the reader is alive');
	$jc->kill;
	my ($v, $err) = finish_or_cancel($b);
	is($v, 't', "the SQL writer's bounded wait succeeds after the killed reader's lease")
	  or diag($err);
	is_deeply(shape($name), { mode => 'write', readers => {}, writers => { $b_id => 1 } },
		'SQL B writes; the crashed reader is gone');
	is($rc->cmd('EXISTS', $ck), 0, "the crashed reader's timeout key expired");
	is($b->query("SELECT redis_write_lock_release('$name')"), 't', 'SQL B leaves');
}

# A live SQL reader A (10 min) and a Redisson reader (Java thread $t) with
# a fixed lease and no watchdog that does not unlock, as if crashed: its key
# ran out while its field stays in the hash (A's lease keeps the hash).
# Returns its owner id.
sub stale_reader
{
	my ($name, $t) = @_;
	my $jo = jowner($t);
	my $ck = tkey($name, $jo);
	is($a->query("SELECT redis_read_lock_acquire('$name', '0', '10 min')"), 't', "[$name] SQL A reads (10 min)");
	is($java->run($t, 'lock', 'read', $name, 1500), 'null',
		"[$name] a Redisson reader with a fixed 1500 ms lease joins, then does not unlock");
	until_ok("[$name] the Redisson reader's timeout key expires", sub { !$rc->cmd('EXISTS', $ck) }, $T);
	is($rc->cmd('HGET', $name, $jo), '1', "[$name] its field is still in the hash (stale)");
	ok($rc->cmd('PTTL', $name) > $T * 1000, "[$name] the hash lives on A's lease");
	return $jo;
}

# 5b. the stale field still counts, as for Redisson's writer (R4): the sole
#     live SQL reader cannot upgrade past it; once the Redisson reader
#     unlocks (late, its hold still found), A upgrades
{
	my $name = 'rwi:crash:2';
	my $o = observer($name);
	my $jo = stale_reader($name, 's2');
	is($b->query("SELECT redis_write_lock_acquire('$name', '0', '10 min')"), 'f',
		'SQL B cannot write: A reads');
	is($a->query("SELECT redis_write_lock_acquire('$name', '0', '10 min')"), 'f',
		'SQL A, the only live reader, cannot upgrade past the stale reader');
	is($rc->cmd('HGET', $name, $jo), '1', "the stale reader's field is untouched");
	is($java->run('s2', 'unlock', 'read', $name), 'null',
		"the Redisson reader's late unlock finds its hold (else IllegalMonitorStateException)");
	is($rc->cmd('HEXISTS', $name, $jo), 0, '... its field is gone');
	is_deeply(published($o, $name), [], '... nothing published: A reads on');
	is($a->query("SELECT redis_write_lock_acquire('$name', '0', '10 min')"), 't',
		'SQL A, now the only reader, upgrades to write at once');
	is_deeply(shape($name), { mode => 'write', readers => { $a_id => 1 }, writers => { $a_id => 1 } },
		'mode write, A reads and writes');
	is($c->query("SELECT redis_read_lock_acquire('$name', '0', '10 min')"), 'f', 'SQL C cannot read');
	is($a->query("SELECT redis_write_lock_release('$name')"), 't', 'A releases the write hold');
	is($a->query("SELECT redis_read_lock_release('$name')"), 't', 'A releases the read hold');
	is($rc->cmd('EXISTS', $name), 0, 'the hash is gone');
	$o->close;
}

# 5c. a SQL writer waits for the live SQL reader only: A's release, the last
#     live reader's, deletes the hash, stale field and all, and publishes 0
{
	my $name = 'rwi:crash:3';
	my $o = observer($name);
	stale_reader($name, 's3');
	$b->start("SELECT redis_write_lock_acquire('$name', '5 min', '10 min')");
	waits_ok($b, 'SQL B write waiter');
	until_ok('B is subscribed', sub { numsub(rw_chan($name)) >= 2 });
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
#     Stays FakeRedisson: it needs exactly one round of the 4.4+ read
#     watchdog script and then none; a real client runs rounds on its own
#     clock until it is killed, and versions before 4.4 renew otherwise.
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

	is($java->run('j6', 'lock', 'read', $name, $LONG), 'null', 'a Redisson reader (10 min lease) joins');
	ok($rc->cmd('PTTL', $name) > $WD, "... the hash's TTL is its 10 min lease");
	is($java->run('j6', 'unlock', 'read', $name), 'null',
		'the Redisson reader leaves (it sees our live rwlock_timeout key)');
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
