# 350_semaphore_redisson.pl — semaphores, expiring permits and count-down
# latches shared by SQL sessions and the real Redisson client (RSemaphore,
# RPermitExpirableSemaphore, RCountDownLatch) on the same names: one pool
# both ways, Redisson's layout and messages, waiting for 2 permits, permit
# ids valid both ways (getLeaseTime, updateLeaseTime, tryRelease,
# release(List) of SQL's ids and Redisson's), a SQL permit released by Java
# behind its holder's back (lost, the commit guard), latches both ways, and
# the same on a Redis Cluster with SPUBLISH / SSUBSCRIBE.
#
# The Redisson client is the real one (RealRedisson: test/redisson-java's
# driver), the newest version in @RealRedisson::VERSIONS only, one JVM on
# the single server and one on the cluster (Redisson's sharded pub/sub, its
# default there); every version's wake-ups are 500_redisson_real.pl's
# 'semaphore', 'sem-addPermits', 'permits' and 'latch' checks, so the
# single-permit wake-ups are not repeated here.  Nothing here needs the
# transcribed client (FakeRedisson) as a Redisson client: it is only the raw
# Redis connection and the key and channel names.
#
# No sleeps and no timing thresholds: a waiter is shown waiting (a SQL
# session in wait_event_type Extension and subscribed to the channel, a
# Java waiter subscribed and without a result) before the release on the
# other side, and returns after it; semaphores have no TTL and the holders
# here have none either (permits are held without lease or with 10 min
# leases), so only the release's message explains a wake within the bound.
# What was published is read by an observer subscribed to the channel and
# to a marker channel (the test publishes a marker and takes what came
# before it).
# Takes 15 to 20 s (two JVM starts and a Redis Cluster; about 14 s before,
# with FakeRedisson).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use RealRedisson;
use FakeRedisson;    # only its Redis connection and key / channel names
use Test::More;

my $T    = 60;         # bound for anything that should happen at once, s
my $LONG = 600_000;    # 10 min, ms
my $NX   = FakeRedisson::NON_EXPIRABLE;
my $HEX  = qr/^[0-9a-f]{32}$/;
my $WD   = 2000;       # redislock.watchdog_timeout, ms

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('semredisson', $redis,
	'redislock.watchdog_timeout' => "${WD}ms");
my $rc   = FakeRedisson::Conn->new(port => $redis->port);
my ($JAVA_VERSION) = reverse RealRedisson::versions();
my $java = RealRedisson->new(version => $JAVA_VERSION, port => $redis->port);
is($java->version, $JAVA_VERSION, "the real Redisson client, $JAVA_VERSION");
my $obs  = RedisLockTest::observer($node);

my $a = RedisLockTest::Session->new($node);
my $b = RedisLockTest::Session->new($node);
my $a_id = $a->query('SELECT redis_lock_owner_id()');
my $b_id = $b->query('SELECT redis_lock_owner_id()');

# --- helpers ------------------------------------------------------------------------
sub holders_key { "redislock_semaphore_holders:{$_[0]}" }
sub records_key { "redislock_semaphore_timeout:{$_[0]}" }

# An observer subscribed to $channel and marker:$channel on the single
# server.
sub watch
{
	my ($channel) = @_;
	my $c = FakeRedisson::Conn->new(port => $redis->port);
	$c->subscribe($channel, "marker:$channel");
	return { conn => $c, channel => $channel };
}

# The payloads published on the watched channel since the last call.
sub published
{
	my ($o) = @_;
	my $mark = "marker:$o->{channel}";
	$rc->cmd('PUBLISH', $mark, 'mark');
	my @m;
	while (1)
	{
		my $m = $o->{conn}->next_message($T) // return [ @m, 'NO MARKER' ];
		return \@m if $m->[0] eq $mark;
		push @m, $m->[1];
	}
}

sub numsub { $rc->cmd('PUBSUB', 'NUMSUB', $_[0])->[1] }

# A permit zset on $conn: { hex id => score }, and the members' byte lengths.
sub permits
{
	my ($conn, $name) = @_;
	my $z = $conn->cmd('ZRANGE', FakeRedisson::permit_timeout_key($name), 0, -1, 'WITHSCORES');
	my (%m, @len);
	for (my $i = 0; $i < @$z; $i += 2)
	{
		$m{ FakeRedisson::permit_id_hex($z->[$i]) } = $z->[ $i + 1 ];
		push @len, length($z->[$i]);
	}
	return (\%m, \@len);
}

# Starts a Java waiter ($tag: $thread runs @op) once $subs->() (the
# channel's subscribers) is back at $base, and waits until it has
# subscribed: then it has tried and waits.
sub java_waiter
{
	my ($j, $subs, $base, $tag, $thread, @op) = @_;
	RedisLockTest::until_ok("only the $base expected subscriber(s) before the Java waiter",
		sub { $subs->() == $base });
	$j->start($tag, $thread, @op);
	RedisLockTest::until_ok("Java waiter ($op[0]) subscribed", sub { $subs->() > $base });
	is($j->poll($tag), undef, "Java waiter ($op[0]) still waits");
}

# A SQL session waiting inside redislock right now (no test line).
sub in_wait
{
	my ($s) = @_;
	my $t = $obs->query('SELECT wait_event_type FROM pg_stat_activity WHERE pid = ' . $s->pid);
	return defined $t && $t eq 'Extension';
}

# Its started statement's (value, error, sqlstate), bounded; cancelled if
# it still runs, so the session can go on.
sub finish_or_cancel
{
	my ($s) = @_;
	my ($v, $err, $st) = $s->finish($T);
	$s->cancel if defined $st && $st eq 'TIMEOUT';
	return ($v, $err, $st);
}

# redis_locks for a name: "kind:hold_count:pid" rows, sorted.
sub rows_for
{
	my ($name) = @_;
	return join(',', map { join(':', @$_) } $obs->rows(
		"SELECT kind, hold_count, pid FROM redis_locks WHERE name = " . sql_literal($name)
		  . ' ORDER BY pid, kind'));
}

# --- 1. RSemaphore: one pool, both ways ---------------------------------------------
{
	my $n  = 'rs:pool';
	my $o  = watch(FakeRedisson::sem_channel($n));
	is($java->run('j', 'sem.trySetPermits', $n, 3), 'true', 'Redisson trySetPermits(3)');
	is_deeply(published($o), ['3'], '... publishes 3');
	is($a->query("SELECT redis_semaphore_available('$n')"), 3, 'SQL sees 3 available');
	is($a->query("SELECT redis_semaphore_try_set_permits('$n', 5)"), 'f', 'SQL trySetPermits on the existing pool: f');
	is($rc->cmd('GET', $n), '3', '... still 3');

	is($a->query("SELECT redis_semaphore_acquire('$n', 2)"), 't', 'A takes 2');
	is_deeply([ $rc->cmd('TYPE', $n), $rc->cmd('GET', $n) ], [ 'string', '1' ],
		'the Redisson layout: a string, 1 left');
	is($rc->cmd('HGET', holders_key($n), $a_id), '2', "our record: A holds 2 ($a_id)");
	ok(defined $rc->cmd('ZSCORE', records_key($n), $a_id), "... and A's record has an expiry");
	is(rows_for($n), 'semaphore:2:' . $a->pid, "redis_locks: kind semaphore, count 2, A's pid");
	is($java->run('j', 'sem.tryAcquire', $n, 2), 'false', 'Redisson tryAcquire(2): false (one left)');
	is($java->run('j', 'sem.tryAcquire', $n, 1), 'true', 'Redisson tryAcquire(1): true');
	is($rc->cmd('GET', $n), '0', '0 left');
	is($b->query("SELECT redis_semaphore_acquire('$n', 1, '0')"), 'f', "B's try (wait 0): f");
	is($a->query("SELECT redis_semaphore_available('$n')"), 0, 'SQL sees 0 available');
	is($java->run('j', 'sem.availablePermits', $n), 0, 'Redisson sees 0 available');
	is_deeply(published($o), [], 'acquisitions publish nothing');

	is($java->run('j', 'sem.release', $n, 1), 'null', 'Redisson releases 1');
	is($b->query("SELECT redis_semaphore_acquire('$n', 1, '0')"), 't', 'B takes it');
	is($a->query("SELECT redis_semaphore_release('$n', 2)"), 't', 'A releases its 2');
	is($rc->cmd('GET', $n), '2', '2 available');
	is_deeply(published($o), [ '1', '2' ], "Redisson's release published 1, A's the new total 2");
	is($rc->cmd('HEXISTS', holders_key($n), $a_id), 0, "A's record is gone");
	is($java->run('j', 'sem.tryAcquire', $n, 2), 'true', 'Redisson takes those 2');
	is($b->query("SELECT redis_semaphore_release('$n')"), 't', 'B releases its 1');
	is_deeply(published($o), ['1'], '... 1 published');
	is($java->run('j', 'sem.release', $n, 2), 'null', 'Redisson releases 2');
	is($a->query("SELECT redis_semaphore_available('$n')"), 3, 'the pool is back to 3');
	is(rows_for($n), '', 'redis_locks: nothing held');

	# SQL creates and changes the pool, Redisson sees it
	my $m = 'rs:made';
	my $o2 = watch(FakeRedisson::sem_channel($m));
	is($a->query("SELECT redis_semaphore_try_set_permits('$m', 2)"), 't', 'SQL trySetPermits(2) on a new name: t');
	is($java->run('j', 'sem.trySetPermits', $m, 7), 'false', "Redisson's trySetPermits then: false");
	is($java->run('j', 'sem.availablePermits', $m), 2, 'Redisson sees 2');
	ok(eval { $a->query("SELECT redis_semaphore_add_permits('$m', 3)"); 1 }, 'SQL addPermits(3)') or diag($@);
	is($java->run('j', 'sem.availablePermits', $m), 5, 'Redisson sees 5');
	ok(eval { $a->query("SELECT redis_semaphore_add_permits('$m', -4)"); 1 }, 'SQL addPermits(-4)') or diag($@);
	is($java->run('j', 'sem.availablePermits', $m), 1, 'Redisson sees 1');
	is_deeply(published($o2), [ '2', '5', '1' ], 'published as Redisson does: 2, then the new totals 5 and 1');
	$rc->cmd('DEL', $n, $m);
	$_->{conn}->close for $o, $o2;
}

# --- 2. RSemaphore: waiting for 2 permits, both ways ---------------------------------
# (a single permit's wake-ups both ways: 500_redisson_real.pl 'semaphore')
{
	my $n  = 'rs:wake';
	my $ch = FakeRedisson::sem_channel($n);
	is($java->run('j', 'sem.trySetPermits', $n, 2), 'true', 'pool of 2');
	is($a->query("SELECT redis_semaphore_acquire('$n', 2)"), 't', 'A takes 2');
	java_waiter($java, sub { numsub($ch) }, 0, 'w2', 'w', 'sem.acquire', $n, 2);
	is($a->query("SELECT redis_semaphore_release('$n', 1)"), 't', 'A releases 1 of 2');
	RedisLockTest::until_ok('1 available', sub { $rc->cmd('GET', $n) eq '1' });
	is($java->poll('w2'), undef, 'the Java waiter for 2 still waits with 1 available');
	is($a->query("SELECT redis_semaphore_release('$n', 1)"), 't', 'A releases the other');
	my ($st, $r) = $java->result('w2', $T);
	is($st, 'ok', "the Java waiter gets its 2 within $T s (woken by SQL's message)") or diag($r // 'no result');
	is($rc->cmd('GET', $n), '0', '... both taken');

	# SQL waiter for 2 woken by Redisson's addPermits
	RedisLockTest::until_ok('the Java waiter has unsubscribed', sub { numsub($ch) == 0 });
	$a->start("SELECT redis_semaphore_acquire('$n', 2, '60 s')");
	waits_ok($a, 'SQL waiter A for 2');
	RedisLockTest::until_ok('A subscribed', sub { numsub($ch) >= 1 });
	is($java->run('w', 'sem.release', $n, 1), 'null', 'Redisson releases 1 (total 1: not enough)');
	RedisLockTest::until_ok('A waits again after trying', sub { in_wait($a) });
	ok(!$a->is_done, '... and has not returned');
	is($java->run('j', 'sem.addPermits', $n, 1), 'null', 'Redisson addPermits(1): total 2');
	my ($v, $err) = finish_or_cancel($a);
	is($v, 't', 'A is woken and gets 2') or diag($err);
	is($a->query("SELECT redis_semaphore_release('$n', 2)"), 't', 'A releases 2');
	is($java->run('w', 'sem.release', $n, 1), 'null', 'Redisson releases its last');
	is($java->run('j', 'sem.availablePermits', $n), 3, 'the pool holds 3 (2 + addPermits 1)');
	$rc->cmd('DEL', $n);
}

# --- 3. expiring permits: ids valid both ways ---------------------------------------
# (a single permit's wake-ups both ways: 500_redisson_real.pl 'permits')
{
	my $n  = 'rp:ids';
	my $z  = FakeRedisson::permit_timeout_key($n);
	my $ch = FakeRedisson::sem_channel($n);
	my $o  = watch($ch);
	is($java->run('j', 'pes.trySetPermits', $n, 3), 'true', 'Redisson PES trySetPermits(3)');
	is($a->query("SELECT redis_permit_try_set_permits('$n', 9)"), 'f', 'SQL trySetPermits: f (exists)');
	is($a->query("SELECT redis_permit_available('$n')"), 3, 'SQL sees 3');

	# a SQL permit under the watchdog (NULL lease)
	my $t0 = FakeRedisson::now_ms();
	my $id = $a->query("SELECT redis_permit_acquire('$n')");
	like($id, $HEX, "A's permit id: 32 lower-case hex chars ($id)");
	my ($m, $len) = permits($rc, $n);
	my $t2 = FakeRedisson::now_ms();
	ok(exists $m->{$id}, 'the zset holds it (as Redisson reads ids)');
	is_deeply($len, [16], '... as 16 raw bytes');
	my $sc = $m->{$id};
	ok($sc ne $NX && $sc >= $t0 + $WD && $sc <= $t2 + $WD,
		"... scored now + the watchdog lease (renewed or not), not $NX ($sc)");
	is(rows_for($n), 'permit:1:' . $a->pid, 'redis_locks: kind permit, count 1');
	my $lt = $java->run('j', 'pes.getLeaseTime', $n, $id);
	ok($lt > 0 && $lt <= $WD, "Redisson's getLeaseTime of A's id: $lt ms left, at most the watchdog lease");
	# the watchdog keeps it (updateLeaseTime semantics) past many leases
	my $marker = "marker-key:$n";
	$rc->cmd('SET', $marker, 1, 'PX', 3 * $WD);
	until_ok('three watchdog leases pass (by Redis clock)', sub { !$rc->cmd('EXISTS', $marker) });
	($m) = permits($rc, $n);
	ok(exists $m->{$id} && $m->{$id} > $sc, "A's permit is renewed, still held");
	is($java->run('j', 'pes.availablePermits', $n), 2, "... and Redisson's availablePermits counts it out: 2");
	is($a->query("SELECT redis_permit_release('$n', '$id')"), 't', 'A releases it');
	($m) = permits($rc, $n);
	is_deeply([ $rc->cmd('GET', $n), exists $m->{$id} ? 1 : 0 ], [ '3', 0 ],
		'... back in the pool: 3, the id gone');
	is_deeply(published($o), [ '3', '3' ], 'Redisson trySetPermits published 3, our release the new value 3');

	# a fixed-lease SQL permit: Redisson reads, extends and releases it by its id
	my $id2 = $a->query("SELECT redis_permit_acquire('$n', '0', '10 min')");
	like($id2, $HEX, "A's fixed-lease permit ($id2)");
	is(rows_for($n), 'permit:1:' . $a->pid, 'redis_locks: the permit row');
	$lt = $java->run('j', 'pes.getLeaseTime', $n, $id2);
	ok($lt > $LONG - $T * 1000 && $lt <= $LONG, "Redisson's getLeaseTime: about 10 min left ($lt ms)");
	$t0 = FakeRedisson::now_ms();
	is($java->run('j', 'pes.updateLeaseTime', $n, $id2, 2 * $LONG), 'true',
		"Redisson's updateLeaseTime(20 min) of A's id: true");
	($m) = permits($rc, $n);
	ok($m->{$id2} >= $t0 + 2 * $LONG, "... its score is now + 20 min ($m->{$id2})");
	$lt = $java->run('j', 'pes.getLeaseTime', $n, $id2);
	ok($lt > $LONG, "... and getLeaseTime says more than 10 min ($lt ms)");
	is($java->run('j', 'pes.tryRelease', $n, $id2), 'true', "Redisson's tryRelease of A's id: true");
	is($rc->cmd('GET', $n), '3', '... it went back: 3 available');
	is($java->run('j', 'pes.updateLeaseTime', $n, $id2, $LONG), 'false', "Redisson's updateLeaseTime of it now: false");
	my ($v, $err) = $a->try("SELECT redis_permit_release('$n', '$id2')");
	is($v, 'f', "A's own release of it afterwards: f");
	like(join("\n", $a->notices), qr/WARNING/, '... with a WARNING');

	# Redisson's ids beside a SQL permit: a Java permit waiter (10 min
	# lease) woken by SQL's release (B's permit runs 10 min, so only the
	# message wakes it within $T s); then a SQL waiter woken by Redisson's
	# release of one of its ids (the Java waiter first, so that no SQL
	# subscription is still lingering on the channel when it subscribes)
	my ($j0, $j1) = map { $java->run('j', 'pes.tryAcquire', $n, 0) } 1 .. 2;
	ok(!grep({ !defined $_ || $_ !~ $HEX } $j0, $j1), "Redisson takes 2 permits, without lease ($j0 $j1)");
	my $bid = $b->query("SELECT redis_permit_acquire('$n', '0', '10 min')");
	like($bid, $HEX, "B takes the third (10 min lease, $bid)");
	($m) = permits($rc, $n);
	is_deeply([ map { $m->{$_} } $j0, $j1 ], [ ($NX) x 2 ], "Redisson's ids are scored $NX in the zset (no lease)");
	ok(exists $m->{$bid}, "B's id is in the zset");
	is($rc->cmd('GET', $n), '0', 'none left');
	$lt = $java->run('j', 'pes.getLeaseTime', $n, $bid);
	ok($lt > $LONG - $T * 1000 && $lt <= $LONG, "Redisson's getLeaseTime of B's id: about 10 min ($lt ms)");
	is_deeply(published($o), [ '3' ], "Redisson's release of A's id published the new value 3");
	java_waiter($java, sub { numsub($ch) }, 1, 'pw', 'w', 'pes.acquire', $n, $LONG);
	is($b->query("SELECT redis_permit_release('$n', '$bid')"), 't', 'B releases its permit');
	is_deeply(published($o), ['1'], '... the new value 1 published, as Redisson does');
	my ($st, $j2) = $java->result('pw', $T);
	is($st, 'ok', "the Java waiter gets a permit within $T s") or diag($j2 // 'no result');
	like($j2, $HEX, "... its id ($j2)");

	RedisLockTest::until_ok('the Java waiter has unsubscribed', sub { numsub($ch) == 1 });
	$b->start("SELECT redis_permit_acquire('$n', '60 s', '10 min')");
	waits_ok($b, 'SQL permit waiter B');
	until_ok('B subscribed', sub { numsub($ch) >= 2 });    # B and the observer
	ok(in_wait($b) && !$b->is_done, 'B still waits: no lease runs out, no TTL to retry at');
	is($java->run('j', 'pes.release', $n, $j1), 'null', 'Redisson releases one of its permits');
	($v, $err) = finish_or_cancel($b);
	like($v, $HEX, "B is woken by Redisson's release message and gets a permit ($v)") or diag($err);
	is_deeply(published($o), ['1'], "Redisson's release published 1");
	is($b->query("SELECT redis_permit_release('$n', " . sql_literal($v // '') . ')'), 't', 'B releases it');

	is(rows_for($n), '', 'redis_locks: nothing held');
	is($java->run('j', 'pes.releaseList', $n, $j0, $j2), 'null', 'Redisson release(List) of its 2');
	is($a->query("SELECT redis_permit_available('$n')"), 3, 'the pool is back to 3');
	is($rc->cmd('ZCARD', $z), 0, 'the zset is empty');
	$rc->cmd('DEL', $n, $z);
	$o->{conn}->close;

	# SQL's ids in Redisson's release(List) and tryRelease(List)
	my $l = 'rp:list';
	is($a->query("SELECT redis_permit_try_set_permits('$l', 3)"), 't', 'a pool of 3 for the lists');
	my @ids = map { $a->query("SELECT redis_permit_acquire('$l', '0', '10 min')") } 1 .. 3;
	is($java->run('j', 'pes.tryReleaseList', $l, @ids[0, 1]), 2, "Redisson tryRelease(List) of 2 of A's ids: 2");
	is($java->run('j', 'pes.releaseList', $l, $ids[2]), 'null', "Redisson release(List) of A's third");
	is($java->run('j', 'pes.availablePermits', $l), 3, 'all 3 back');
	$a->notices;
	is($a->query("SELECT count(*) FROM unnest(ARRAY['" . join("','", @ids) . "']) i WHERE redis_permit_release('$l', i)"),
		0, "A's own releases afterwards: none held");
	$a->notices;
	$rc->cmd('DEL', $l, FakeRedisson::permit_timeout_key($l));

	# SQL set/try_set seen by Redisson
	is($a->query("SELECT redis_permit_try_set_permits('rp:made', 2)"), 't', 'SQL PES trySetPermits(2): t');
	is($java->run('j', 'pes.trySetPermits', 'rp:made', 4), 'false', "Redisson's trySetPermits then: false");
	my $jid = $java->run('j', 'pes.tryAcquire', 'rp:made', 0);
	like($jid, $HEX, 'Redisson takes one');
	is($a->query("SELECT redis_permit_set_permits('rp:made', 4)"), '', 'SQL setPermits(4) with one out');
	is_deeply([ $java->run('j', 'pes.availablePermits', 'rp:made'), $java->run('j', 'pes.getPermits', 'rp:made') ],
		[ 3, 4 ], 'Redisson: 3 available, 4 in all');
	$java->run('j', 'pes.release', 'rp:made', $jid);
	$rc->cmd('DEL', 'rp:made');
}

# --- 3b. a SQL permit released by Redisson behind its holder's back ---------------
# (Redisson accepts our ids, so a Java service can release one): the
# watchdog's renewal finds it gone and marks it lost; the commit guard
# fails a writing transaction's COMMIT, as for a lost lock
{
	my $n = 'rp:lost';
	my $c = RedisLockTest::Session->new($node);
	$c->query('CREATE TABLE IF NOT EXISTS guarded(v int)');
	is($c->query("SELECT redis_permit_try_set_permits('$n', 1)"), 't', 'lost: a pool of 1');
	my $id = $c->query("SELECT redis_permit_acquire('$n')");
	like($id, $HEX, "lost: C takes it under the watchdog ($WD ms lease)");
	my ($v, $err) = $c->try('BEGIN; INSERT INTO guarded VALUES (1); COMMIT');
	ok(!defined $err, 'lost: a writing transaction commits while the permit is held') or diag($err);
	is($java->run('j', 'pes.tryRelease', $n, $id), 'true', "lost: Redisson's tryRelease of C's id: true");
	until_ok("lost: redis_locks shows C's permit 'lost'", sub {
		($obs->query("SELECT string_agg(state, ',') FROM redis_locks WHERE name = '$n'") // '') eq 'lost' });
	my $st;
	($v, $err, $st) = $c->try('BEGIN; INSERT INTO guarded VALUES (2); COMMIT');
	$c->dbh->do('ROLLBACK') if defined $err;
	is($st, '55P03', 'lost: the commit guard fails the COMMIT of a writing transaction (55P03)') or diag($err);
	is($c->query('SELECT count(*) FROM guarded WHERE v = 2'), 0, 'lost: its write was rolled back');
	$c->notices;
	is($c->query("SELECT redis_permit_release('$n', '$id')"), 'f', 'lost: C releasing it: f');
	like(join("\n", $c->notices), qr/WARNING/, 'lost: ... with a WARNING');
	is($java->run('j', 'pes.availablePermits', $n), 1, 'lost: the pool has its permit (given back once, by Redisson)');
	$c->close;
	$rc->cmd('DEL', $n);
}

# --- 4. count-down latches both ways ----------------------------------------------
{
	my $n  = 'rl:1';
	my $ch = FakeRedisson::latch_channel($n);
	is($java->run('j', 'latch.trySetCount', $n, 2), 'true', 'Redisson trySetCount(2)');
	is($a->query("SELECT redis_latch_count('$n')"), 2, 'SQL count: 2');
	is($a->query("SELECT redis_latch_try_set_count('$n', 5)"), 'f', 'SQL trySetCount: f (exists)');
	is($a->query("SELECT redis_latch_await('$n', '0')"), 'f', "SQL await (wait 0): f");
	$b->start("SELECT redis_latch_await('$n', '60 s')");
	waits_ok($b, 'SQL latch waiter B');
	until_ok('B subscribed to the latch channel', sub { numsub($ch) >= 1 });
	is($java->run('j', 'latch.countDown', $n), 'null', 'Redisson countDown: 1 left');
	is($rc->cmd('GET', $n), '1', '... 1 in Redis');
	ok(in_wait($b) && !$b->is_done, 'B still waits at 1');
	is($java->run('j', 'latch.countDown', $n), 'null', 'Redisson countDown: 0 (publishes 0)');
	my ($v, $err) = finish_or_cancel($b);
	is($v, 't', "B is woken by Redisson's 0") or diag($err);
	is($rc->cmd('EXISTS', $n), 0, 'the key is gone at 0');
	is($a->query("SELECT redis_latch_count('$n')"), 0, 'SQL count: 0');
	is($a->query("SELECT redis_latch_await('$n', '0')"), 't', 'SQL await at 0: t at once');

	my $m = 'rl:2';
	my $mch = FakeRedisson::latch_channel($m);
	my $o = watch($mch);
	is($a->query("SELECT redis_latch_try_set_count('$m', 2)"), 't', 'SQL trySetCount(2): t');
	is_deeply([ $rc->cmd('TYPE', $m), $rc->cmd('GET', $m), $rc->cmd('PTTL', $m) ], [ 'string', '2', -1 ],
		'the Redisson layout: a string 2, no TTL');
	is_deeply(published($o), ['1'], '... 1 (NEW_COUNT) published');
	is($java->run('j', 'latch.getCount', $m), 2, 'Redisson getCount: 2');
	java_waiter($java, sub { numsub($mch) }, 1, 'law', 'w', 'latch.await', $m);
	is($a->query("SELECT redis_latch_count_down('$m')"), 1, 'SQL countDown: 1');
	is_deeply(published($o), [], '... nothing published');
	is($java->poll('law'), undef, 'the Java awaiter still waits at 1');
	is($a->query("SELECT redis_latch_count_down('$m')"), 0, 'SQL countDown: 0');
	is_deeply(published($o), ['0'], '... 0 (ZERO_COUNT) published');
	is($rc->cmd('EXISTS', $m), 0, '... and the key deleted');
	my ($st, $r) = $java->result('law', $T);
	is($st, 'ok', "the Java awaiter returns within $T s (SQL's 0)") or diag($r // 'no result');
	$o->{conn}->close;
}
$java->quit;

# --- 5. on a Redis Cluster: SPUBLISH / SSUBSCRIBE both ways ------------------------
{
	my $cl = RedisLockTest::Cluster->new(masters => 3, replicas => 0);
	my @m  = $cl->masters;
	my $cn = RedisLockTest::node('semcluster', undef,
		'redislock.cluster_nodes' => $cl->seeds,
		'redislock.command_timeout' => '20s');
	my ($ca, $cb) = map { RedisLockTest::Session->new($cn) } 1 .. 2;
	my $cb_id = $cb->query('SELECT redis_lock_owner_id()');
	# Redisson's defaults on a Redis 7 cluster: sharded pub/sub, as redislock's
	my $cj = RealRedisson->new(version => $JAVA_VERSION,
		mode => [ 'cluster', join(',', map { 'redis://127.0.0.1:' . $_->port } @m) ]);
	my $snum = sub { my ($ch) = @_; ($cl->cli_for_key($ch, 'PUBSUB', 'SHARDNUMSUB', $ch))[1] };
	my $cnum = sub { my ($ch) = @_; my $s = 0; $s += ($_->cli('PUBSUB', 'NUMSUB', $ch))[1] for @m; $s };

	# semaphore: a name served by a master other than the first seed
	my ($n) = grep { $cl->node_for_key($_)->port != $m[0]->port } map { "cs:$_" } 1 .. 50;
	my $ch = FakeRedisson::sem_channel($n);
	my $srv = $cl->node_for_key($n);
	# (each Java waiter first, so that no SQL subscription is still lingering
	# on the channel when it subscribes)
	is($cj->run('j', 'sem.trySetPermits', $n, 1), 'true', "[cluster] Redisson trySetPermits(1) on $n");
	is($cb->query("SELECT redis_semaphore_acquire('$n', 1, '0')"), 't', '[cluster] B takes the permit');
	is(FakeRedisson::conn_to($srv->port)->cmd('HGET', holders_key($n), $cb_id), '1',
		"[cluster] B's record on the master serving $n");
	java_waiter($cj, sub { $snum->($ch) }, 0, 'sw', 'w', 'sem.acquire', $n, 1);
	is($cnum->($ch), 0, '[cluster] ... with SSUBSCRIBE: no classic subscriber');
	is($cb->query("SELECT redis_semaphore_release('$n')"), 't', '[cluster] B releases');
	my ($st, $r) = $cj->result('sw', $T);
	is($st, 'ok', "[cluster] the Java waiter gets the permit within $T s (SQL's sharded message)")
	  or diag($r // 'no result');
	RedisLockTest::until_ok('[cluster] the Java waiter has unsubscribed', sub { $snum->($ch) == 0 });
	$cb->start("SELECT redis_semaphore_acquire('$n', 1, '60 s')");
	ok(RedisLockTest::wait_for_extension_wait($cn, $cb->pid, $T), '[cluster] SQL waiter B waits');
	until_ok('[cluster] B subscribed with SSUBSCRIBE on the slot master', sub { $snum->($ch) >= 1 });
	ok(!$cb->is_done, '[cluster] B still waits');
	is($cj->run('w', 'sem.release', $n), 'null', '[cluster] Redisson releases (SPUBLISH)');
	my ($v, $err) = $cb->finish($T);
	is($v, 't', "[cluster] B is woken by Redisson's sharded message") or diag($err);
	is($cb->query("SELECT redis_semaphore_release('$n')"), 't', '[cluster] B gives it back');

	# expiring permits
	my $p = "$n:p";
	my $pch = FakeRedisson::sem_channel($p);
	is($cj->run('j', 'pes.trySetPermits', $p, 1), 'true', "[cluster] PES of 1 ($p)");
	my $pid = $ca->query("SELECT redis_permit_acquire('$p', '0', '10 min')");
	like($pid, $HEX, '[cluster] A takes the permit (10 min lease)');
	my $lt = $cj->run('j', 'pes.getLeaseTime', $p, $pid);
	ok($lt > $LONG - $T * 1000, "[cluster] Redisson's getLeaseTime sees A's id ($lt ms left)");
	java_waiter($cj, sub { $snum->($pch) }, 0, 'pw', 'w', 'pes.acquire', $p, $LONG);
	is($ca->query("SELECT redis_permit_release('$p', '$pid')"), 't', '[cluster] A releases');
	my $jid;
	($st, $jid) = $cj->result('pw', $T);
	is($st, 'ok', "[cluster] the Java waiter gets it within $T s (the sharded message)") or diag($jid // 'no result');
	RedisLockTest::until_ok('[cluster] the Java waiter has unsubscribed', sub { $snum->($pch) == 0 });
	$cb->start("SELECT redis_permit_acquire('$p', '60 s', '10 min')");
	ok(RedisLockTest::wait_for_extension_wait($cn, $cb->pid, $T), '[cluster] SQL permit waiter B waits');
	until_ok('[cluster] B subscribed (SSUBSCRIBE)', sub { $snum->($pch) >= 1 });
	is($cj->run('w', 'pes.release', $p, $jid), 'null', '[cluster] Redisson releases (SPUBLISH)');
	($v, $err) = $cb->finish($T);
	like($v, $HEX, '[cluster] B is woken and gets the permit') or diag($err);
	is($cb->query("SELECT redis_permit_release('$p', '$v')"), 't', '[cluster] B releases');

	# latch
	my $l = "$n:l";
	my $lch = FakeRedisson::latch_channel($l);
	is($ca->query("SELECT redis_latch_try_set_count('$l', 1)"), 't', '[cluster] SQL trySetCount(1)');
	java_waiter($cj, sub { $snum->($lch) }, 0, 'lw', 'w', 'latch.await', $l);
	is($ca->query("SELECT redis_latch_count_down('$l')"), 0, '[cluster] SQL countDown: 0');
	($st, $r) = $cj->result('lw', $T);
	is($st, 'ok', "[cluster] the Java awaiter returns within $T s (SQL's sharded 0)") or diag($r // 'no result');
	RedisLockTest::until_ok('[cluster] the Java awaiter has unsubscribed', sub { $snum->($lch) == 0 });
	is($cj->run('j', 'latch.trySetCount', $l, 1), 'true', '[cluster] Redisson trySetCount(1)');
	$cb->start("SELECT redis_latch_await('$l', '60 s')");
	ok(RedisLockTest::wait_for_extension_wait($cn, $cb->pid, $T), '[cluster] SQL latch waiter B waits');
	until_ok('[cluster] B subscribed (SSUBSCRIBE)', sub { $snum->($lch) >= 1 });
	is($cj->run('j', 'latch.countDown', $l), 'null', '[cluster] Redisson countDown: 0');
	($v, $err) = $cb->finish($T);
	is($v, 't', "[cluster] B is woken by Redisson's sharded 0") or diag($err);

	# a latch whose name has braces: its channel is in another slot, so it is
	# an argument of our script, not a key (Redisson's own scripts are
	# refused there, see test/redisson/README.md); a subscriber of the
	# channel, as Redisson's awaiter would be, gets the 0
	my $bl = 'x{t}y';
	my $blch = FakeRedisson::latch_channel($bl);
	isnt($cl->slot_of($blch), $cl->slot_of($bl), "[cluster] latch '$bl': its channel's slot is not the key's");
	($v, $err) = $ca->try("SELECT redis_latch_try_set_count('$bl', 1)");
	is($v, 't', "[cluster] SQL trySetCount on '$bl'") or diag($err);
	SKIP:
	{
		skip "no latch '$bl' to wait on", 5 unless defined $v && $v eq 't';
		my $bsub = FakeRedisson::Conn->new(port => $cl->node_for_key($blch)->port);
		$bsub->ssubscribe($blch);
		$cb->start("SELECT redis_latch_await('$bl', '60 s')");
		ok(RedisLockTest::wait_for_extension_wait($cn, $cb->pid, $T), "[cluster] SQL awaiter B waits on '$bl'");
		until_ok("[cluster] B subscribed on the channel's own slot", sub { $snum->($blch) >= 2 });
		($v, $err) = $ca->try("SELECT redis_latch_count_down('$bl')");
		is($v, 0, '[cluster] SQL countDown: 0') or diag($err);
		($v, $err) = $cb->finish($T);
		is($v, 't', "[cluster] B is woken") or diag($err);
		my $msg = $bsub->next_message($T);
		is_deeply($msg, [ $blch, '0' ],
			"[cluster] a subscriber of '$bl' (SSUBSCRIBE on the channel's own slot) gets 0");
		$bsub->close;
	}
	$cj->quit;
	$_->close for $ca, $cb;
	no_crash_ok($cn, 'cluster');
}

# the SQL sessions' notices were only the WARNING checked above
$_->close for $a, $b;
no_crash_ok($node, 'semaphores with Redisson');
done_testing();
