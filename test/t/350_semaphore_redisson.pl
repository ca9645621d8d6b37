# 350_semaphore_redisson.pl — semaphores, expiring permits and count-down
# latches shared by SQL sessions and a Redisson client (RSemaphore,
# RPermitExpirableSemaphore, RCountDownLatch) on the same names: one pool
# both ways, releases and count-downs on either side wake the other side's
# waiters with the messages Redisson expects, permit ids are valid both
# ways, and the same on a Redis Cluster with SPUBLISH / SSUBSCRIBE.
#
# The "Java client" is test/redisson/FakeRedisson.pm: Redisson's own
# scripts (test/redisson/sem_*.lua, permit_*.lua, latch_*.lua) with the keys
# and arguments Redisson computes; its waiters step as Java's do and record
# what woke them.
#
# No sleeps and no timing thresholds: a waiter is shown waiting (a SQL
# session in wait_event_type Extension and subscribed to the channel, a
# Redisson waiter not acquired) before the release on the other side, and
# returns after it; semaphores have no TTL and the holders here have none
# either (Redisson's semaphore holders are not recorded; permits are held
# without lease or with 10 min leases), so only the release's message
# explains a wake within the bound.  A Redisson waiter's events say what
# woke it.  What was published is read by an observer subscribed to the
# channel and to a marker channel (the test publishes a marker and takes
# what came before it).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
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
my $java = FakeRedisson->new(port => $redis->port, lease => $LONG);
my $obs  = RedisLockTest::observer($node);

my $a = RedisLockTest::Session->new($node);
my $b = RedisLockTest::Session->new($node);
my $a_id = $a->query('SELECT redis_lock_owner_id()');
my $b_id = $b->query('SELECT redis_lock_owner_id()');

# --- helpers ------------------------------------------------------------------------
sub holders_key { "redislock_semaphore_holders:{$_[0]}" }
sub records_key { "redislock_semaphore_timeout:{$_[0]}" }

# An observer subscribed to $channel and marker:$channel, on $conn_maker's
# connection (plain SUBSCRIBE, or SSUBSCRIBE through a cluster client).
sub watch
{
	my ($client, $channel) = @_;
	return { conn => $client->subscriber($channel, "marker:$channel"), channel => $channel,
		client => $client };
}

# The payloads published on the watched channel since the last call.
sub published
{
	my ($o) = @_;
	my $mark = "marker:$o->{channel}";
	$o->{client}->cmd($o->{client}{publish}, $mark, 'mark');
	my @m;
	while (1)
	{
		my $m = $o->{conn}->next_message($T) // return [ @m, 'NO MARKER' ];
		return \@m if $m->[0] eq $mark;
		push @m, $m->[1];
	}
}

sub numsub { $rc->cmd('PUBSUB', 'NUMSUB', $_[0])->[1] }

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
	my $ch = FakeRedisson::sem_channel($n);
	my $o  = watch($java, $ch);
	is($java->try_set_permits($n, 3), 1, 'Redisson trySetPermits(3)');
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
	is($java->try_acquire($n, 2), 0, 'Redisson tryAcquire(2): 0 (one left)');
	is($java->try_acquire($n, 1), 1, 'Redisson tryAcquire(1): 1');
	is($rc->cmd('GET', $n), '0', '0 left');
	is($b->query("SELECT redis_semaphore_acquire('$n', 1, '0')"), 'f', "B's try (wait 0): f");
	is($a->query("SELECT redis_semaphore_available('$n')"), 0, 'SQL sees 0 available');
	is_deeply(published($o), [], 'acquisitions publish nothing');

	is($java->release($n, 1), undef, 'Redisson releases 1');
	is($b->query("SELECT redis_semaphore_acquire('$n', 1, '0')"), 't', 'B takes it');
	is($a->query("SELECT redis_semaphore_release('$n', 2)"), 't', 'A releases its 2');
	is($rc->cmd('GET', $n), '2', '2 available');
	is_deeply(published($o), [ '1', '2' ], "Redisson's release published 1, A's the new total 2");
	is($rc->cmd('HEXISTS', holders_key($n), $a_id), 0, "A's record is gone");
	is($java->try_acquire($n, 2), 1, 'Redisson takes those 2');
	is($b->query("SELECT redis_semaphore_release('$n')"), 't', 'B releases its 1');
	is_deeply(published($o), ['1'], '... 1 published');
	is($java->release($n, 2), undef, 'Redisson releases 2');
	is($a->query("SELECT redis_semaphore_available('$n')"), 3, 'the pool is back to 3');
	is(rows_for($n), '', 'redis_locks: nothing held');

	# SQL creates and changes the pool, Redisson sees it
	my $m = 'rs:made';
	my $o2 = watch($java, FakeRedisson::sem_channel($m));
	is($a->query("SELECT redis_semaphore_try_set_permits('$m', 2)"), 't', 'SQL trySetPermits(2) on a new name: t');
	is($java->try_set_permits($m, 7), 0, "Redisson's trySetPermits then: 0");
	is($java->available_permits($m), 2, 'Redisson sees 2');
	ok(eval { $a->query("SELECT redis_semaphore_add_permits('$m', 3)"); 1 }, 'SQL addPermits(3)') or diag($@);
	is($java->available_permits($m), 5, 'Redisson sees 5');
	ok(eval { $a->query("SELECT redis_semaphore_add_permits('$m', -4)"); 1 }, 'SQL addPermits(-4)') or diag($@);
	is($java->available_permits($m), 1, 'Redisson sees 1');
	is_deeply(published($o2), [ '2', '5', '1' ], 'published as Redisson does: 2, then the new totals 5 and 1');
	$rc->cmd('DEL', $n, $m);
	$_->{conn}->close for $o, $o2;
}

# --- 2. RSemaphore wake-ups both ways ---------------------------------------------
{
	my $n  = 'rs:wake';
	my $ch = FakeRedisson::sem_channel($n);
	is($java->try_set_permits($n, 1), 1, 'pool of 1');
	is($java->try_acquire($n), 1, 'Redisson holds it (no TTL, no record)');
	$b->start("SELECT redis_semaphore_acquire('$n', 1, '60 s')");
	waits_ok($b, 'SQL waiter B');
	until_ok('B is subscribed to redisson_sc:{rs:wake}', sub { numsub($ch) >= 1 });
	ok(in_wait($b) && !$b->is_done, 'B still waits: nothing but a release can give it a permit');
	is($rc->cmd('GET', $n), '0', '... the pool is empty');
	is($java->release($n), undef, 'Redisson releases (publishes the total 1)');
	my ($v, $err) = finish_or_cancel($b);
	is($v, 't', "B is woken by Redisson's release message and gets the permit") or diag($err);
	is($rc->cmd('HGET', holders_key($n), $b_id), '1', 'B holds 1 in our record');

	my $w = $java->semaphore_waiter($n);
	ok(!$w->acquired && $w->subscribed, 'a Redisson waiter waits (subscribed, no TTL)');
	is($b->query("SELECT redis_semaphore_release('$n')"), 't', 'B releases');
	ok($w->wait($T), 'the Redisson waiter gets the permit');
	is_deeply($w->events, [ [ message => '1' ] ], "... woken by SQL's release message, the total 1");
	is($java->release($n), undef, 'Redisson releases');

	# several permits at once: the message is the new total
	$b->query("SELECT redis_semaphore_add_permits('$n', 1)");
	is($rc->cmd('GET', $n), '2', 'pool of 2, both free');
	is($a->query("SELECT redis_semaphore_acquire('$n', 2)"), 't', 'A takes 2');
	$w = $java->semaphore_waiter($n, 2);
	ok(!$w->acquired, 'a Redisson waiter for 2');
	is($a->query("SELECT redis_semaphore_release('$n', 1)"), 't', 'A releases 1 of 2');
	is($a->query("SELECT redis_semaphore_release('$n', 1)"), 't', 'A releases the other');
	ok($w->wait($T), 'the Redisson waiter gets its 2');
	is($w->events->[-1][0], 'message', '... woken by a message');
	is($java->release($n, 2), undef, 'Redisson releases 2');

	# SQL waiter for 2 woken by Redisson's addPermits
	is($java->try_acquire($n, 2), 1, 'Redisson takes both');
	$a->start("SELECT redis_semaphore_acquire('$n', 2, '60 s')");
	waits_ok($a, 'SQL waiter A for 2');
	until_ok('A subscribed', sub { numsub($ch) >= 1 });
	is($java->release($n, 1), undef, 'Redisson releases 1 (total 1: not enough)');
	until_ok('A waits again after trying', sub { in_wait($a) });
	ok(!$a->is_done, '... and has not returned');
	is($java->add_permits($n, 1), undef, 'Redisson addPermits(1): total 2');
	($v, $err) = finish_or_cancel($a);
	is($v, 't', 'A is woken and gets 2') or diag($err);
	is($a->query("SELECT redis_semaphore_release('$n', 2)"), 't', 'A releases 2');
	is($java->release($n, 1), undef, 'Redisson releases its last');
	is($rc->cmd('GET', $n), '3', 'the pool holds 3 (2 + addPermits 1)');
	$rc->cmd('DEL', $n);
}

# --- 3. expiring permits: ids valid both ways, wake-ups both ways ------------------
{
	my $n  = 'rp:ids';
	my $z  = FakeRedisson::permit_timeout_key($n);
	my $ch = FakeRedisson::sem_channel($n);
	my $o  = watch($java, $ch);
	is($java->permit_try_set_permits($n, 3), 1, 'Redisson PES trySetPermits(3)');
	is($a->query("SELECT redis_permit_try_set_permits('$n', 9)"), 'f', 'SQL trySetPermits: f (exists)');
	is($a->query("SELECT redis_permit_available('$n')"), 3, 'SQL sees 3');

	# a SQL permit under the watchdog (NULL lease)
	my $t0 = FakeRedisson::now_ms();
	my $id = $a->query("SELECT redis_permit_acquire('$n')");
	my $t1 = FakeRedisson::now_ms();
	like($id, $HEX, "A's permit id: 32 lower-case hex chars ($id)");
	my $st = $java->permit_state($n);
	my $t2 = FakeRedisson::now_ms();
	ok(exists $st->{members}{$id}, 'the zset holds it (as Redisson reads ids)');
	is_deeply($st->{raw_lengths}, [16], '... as 16 raw bytes');
	my $sc = $st->{members}{$id};
	ok($sc ne $NX && $sc >= $t0 + $WD && $sc <= $t2 + $WD,
		"... scored now + the watchdog lease (renewed or not), not $NX ($sc)");
	is(rows_for($n), 'permit:1:' . $a->pid, 'redis_locks: kind permit, count 1');
	my $lt = $java->permit_lease_time($n, $id);
	ok($lt > 0 && $lt <= $WD, "Redisson's getLeaseTime sees it ($lt ms left)");
	# the watchdog keeps it (updateLeaseTime semantics) past many leases
	my $marker = "marker-key:$n";
	$rc->cmd('SET', $marker, 1, 'PX', 3 * $WD);
	until_ok('three watchdog leases pass (by Redis clock)', sub { !$rc->cmd('EXISTS', $marker) });
	$st = $java->permit_state($n);
	ok(exists $st->{members}{$id} && $st->{members}{$id} > $sc, "A's permit is renewed, still held");
	is($st->{value}, '2', '... and the pool still counts it out');
	is($a->query("SELECT redis_permit_release('$n', '$id')"), 't', 'A releases it');
	is_deeply([ $rc->cmd('GET', $n), exists $java->permit_state($n)->{members}{$id} ? 1 : 0 ], [ '3', 0 ],
		'... back in the pool: 3, the id gone');
	is_deeply(published($o), [ '3', '3' ], 'Redisson trySetPermits published 3, our release the new value 3');

	# a fixed-lease SQL permit
	$t0 = FakeRedisson::now_ms();
	my $id2 = $a->query("SELECT redis_permit_acquire('$n', '0', '10 min')");
	$t1 = FakeRedisson::now_ms();
	like($id2, $HEX, "A's fixed-lease permit ($id2)");
	my $sc2 = $java->permit_state($n)->{members}{$id2};
	ok($sc2 >= $t0 + $LONG && $sc2 <= $t1 + $LONG, "... scored now + 10 min ($sc2)");
	is(rows_for($n), 'permit:1:' . $a->pid, 'redis_locks: the permit row');

	# Redisson's scripts accept SQL's ids: update and release
	is($java->update_lease_time($n, $id2, $LONG), 1, "Redisson's updateLeaseTime of A's id: 1");
	is($java->release_permit($n, $id2), 1, "Redisson's release of A's fixed-lease id: 1");
	is($rc->cmd('GET', $n), '3', '... it went back: 3 available');
	my ($v, $err) = $a->try("SELECT redis_permit_release('$n', '$id2')");
	is($v, 'f', "A's own release of it afterwards: f");
	like(join("\n", $a->notices), qr/WARNING/, '... with a WARNING');

	# Redisson's ids: a Redisson permit released by Redisson wakes a SQL waiter
	my ($j0, $j1, $j2) = map { $java->try_acquire_permit($n) } 1 .. 3;
	ok(!grep({ !defined $_ || $_ !~ $HEX } $j0, $j1, $j2), 'Redisson takes all 3 permits, without lease');
	is($rc->cmd('GET', $n), '0', 'none left');
	is_deeply(published($o), [ '3' ], "Redisson's release of A's id published the new value 3");
	$b->start("SELECT redis_permit_acquire('$n', '60 s', '10 min')");
	waits_ok($b, 'SQL permit waiter B');
	until_ok('B subscribed', sub { numsub($ch) >= 2 });    # B and the observer
	ok(in_wait($b) && !$b->is_done, 'B still waits: no lease runs out, no TTL to retry at');
	is($java->release_permit($n, $j1), 1, 'Redisson releases one of its permits');
	($v, $err) = finish_or_cancel($b);
	like($v, $HEX, "B is woken by Redisson's release message and gets a permit ($v)") or diag($err);
	my $bid = $v;
	ok(exists $java->permit_state($n)->{members}{$bid}, "B's id is in the zset");

	# a Redisson permit waiter woken by SQL's release
	my $w = $java->permit_waiter($n, $LONG);
	ok(!$w->acquired, 'a Redisson permit waiter waits');
	cmp_ok($w->ttl, '>', $T * 1000, "... its hint is B's 10 min lease: only a message can wake it within ${T} s");
	is_deeply(published($o), ['1'], "Redisson's release published 1");
	is($b->query("SELECT redis_permit_release('$n', '$bid')"), 't', 'B releases its permit');
	is_deeply(published($o), ['1'], '... the new value 1 published, as Redisson does');
	ok($w->wait($T), 'the Redisson waiter gets a permit');
	is_deeply([ map { $_->[0] } @{ $w->events } ], ['message'], "... woken by SQL's message, not its hint")
	  or diag(explain($w->events));
	my $j3 = $w->value;

	is(rows_for($n), '', 'redis_locks: nothing held');
	is($java->release_permits($n, $j0, $j2, $j3), 3, 'Redisson releases its 3');
	is($a->query("SELECT redis_permit_available('$n')"), 3, 'the pool is back to 3');
	is($rc->cmd('ZCARD', $z), 0, 'the zset is empty');
	$rc->cmd('DEL', $n, $z);
	$o->{conn}->close;

	# SQL set/try_set seen by Redisson
	is($a->query("SELECT redis_permit_try_set_permits('rp:made', 2)"), 't', 'SQL PES trySetPermits(2): t');
	is($java->permit_try_set_permits('rp:made', 4), 0, "Redisson's trySetPermits then: 0");
	my $jid = $java->try_acquire_permit('rp:made');
	is($a->query("SELECT redis_permit_set_permits('rp:made', 4)"), '', 'SQL setPermits(4) with one out');
	is_deeply([ $java->permit_available('rp:made'), $java->permit_get_permits('rp:made') ], [ 3, 4 ],
		'Redisson: 3 available, 4 in all');
	$java->release_permit('rp:made', $jid);
	$rc->cmd('DEL', 'rp:made');
}

# --- 3b. a SQL permit released by Redisson behind its holder's back ---------------
# (Redisson's scripts accept our ids, so a Java service can release one):
# the watchdog's renewal finds it gone and marks it lost; the commit guard
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
	is($java->release_permit($n, $id), 1, "lost: Redisson's tryRelease of C's id: 1");
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
	is($rc->cmd('GET', $n), '1', 'lost: the pool has its permit (given back once, by Redisson)');
	$c->close;
	$rc->cmd('DEL', $n);
}

# --- 4. count-down latches both ways ----------------------------------------------
{
	my $n  = 'rl:1';
	my $ch = FakeRedisson::latch_channel($n);
	is($java->try_set_count($n, 2), 1, 'Redisson trySetCount(2)');
	is($a->query("SELECT redis_latch_count('$n')"), 2, 'SQL count: 2');
	is($a->query("SELECT redis_latch_try_set_count('$n', 5)"), 'f', 'SQL trySetCount: f (exists)');
	is($a->query("SELECT redis_latch_await('$n', '0')"), 'f', "SQL await (wait 0): f");
	$b->start("SELECT redis_latch_await('$n', '60 s')");
	waits_ok($b, 'SQL latch waiter B');
	until_ok('B subscribed to the latch channel', sub { numsub($ch) >= 1 });
	is($java->count_down($n), undef, 'Redisson countDown: 1 left');
	ok(in_wait($b) && !$b->is_done, 'B still waits at 1');
	is($java->count_down($n), undef, 'Redisson countDown: 0 (publishes 0)');
	my ($v, $err) = finish_or_cancel($b);
	is($v, 't', "B is woken by Redisson's 0") or diag($err);
	is($rc->cmd('EXISTS', $n), 0, 'the key is gone at 0');
	is($a->query("SELECT redis_latch_count('$n')"), 0, 'SQL count: 0');
	is($a->query("SELECT redis_latch_await('$n', '0')"), 't', 'SQL await at 0: t at once');

	my $m = 'rl:2';
	my $o = watch($java, FakeRedisson::latch_channel($m));
	is($a->query("SELECT redis_latch_try_set_count('$m', 2)"), 't', 'SQL trySetCount(2): t');
	is_deeply([ $rc->cmd('TYPE', $m), $rc->cmd('GET', $m), $rc->cmd('PTTL', $m) ], [ 'string', '2', -1 ],
		'the Redisson layout: a string 2, no TTL');
	is_deeply(published($o), ['1'], '... 1 (NEW_COUNT) published');
	is($java->get_count($m), 2, 'Redisson getCount: 2');
	my $w = $java->latch_awaiter($m);
	ok(!$w->acquired && $w->subscribed, 'a Redisson awaiter waits');
	is($a->query("SELECT redis_latch_count_down('$m')"), 1, 'SQL countDown: 1');
	is_deeply(published($o), [], '... nothing published');
	is($a->query("SELECT redis_latch_count_down('$m')"), 0, 'SQL countDown: 0');
	is_deeply(published($o), ['0'], '... 0 (ZERO_COUNT) published');
	is($rc->cmd('EXISTS', $m), 0, '... and the key deleted');
	ok($w->wait($T), 'the Redisson awaiter returns');
	is_deeply($w->events, [ [ message => '0' ] ], "... woken by SQL's 0");
	$o->{conn}->close;
}

# --- 5. on a Redis Cluster: SPUBLISH / SSUBSCRIBE both ways ------------------------
{
	my $cl = RedisLockTest::Cluster->new(masters => 3, replicas => 0);
	my @m  = $cl->masters;
	my $cn = RedisLockTest::node('semcluster', undef,
		'redislock.cluster_nodes' => $cl->seeds,
		'redislock.command_timeout' => '20s');
	my $cobs = RedisLockTest::observer($cn);
	my ($ca, $cb) = map { RedisLockTest::Session->new($cn) } 1 .. 2;
	my $cb_id = $cb->query('SELECT redis_lock_owner_id()');
	my $cj = FakeRedisson->new(port => $m[0]->port, cluster => 1, lease => $LONG);
	my $snum = sub { my ($ch) = @_; ($cl->cli_for_key($ch, 'PUBSUB', 'SHARDNUMSUB', $ch))[1] };
	my $cwait = sub {
		my ($s) = @_;
		my $t = $cobs->query('SELECT wait_event_type FROM pg_stat_activity WHERE pid = ' . $s->pid);
		return defined $t && $t eq 'Extension';
	};

	# semaphore: a name served by a master other than the Redisson seed
	my ($n) = grep { $cl->node_for_key($_)->port != $m[0]->port } map { "cs:$_" } 1 .. 50;
	my $ch = FakeRedisson::sem_channel($n);
	my $srv = $cl->node_for_key($n);
	is($cj->try_set_permits($n, 1), 1, "[cluster] Redisson trySetPermits(1) on $n");
	is($cj->try_acquire($n), 1, '[cluster] Redisson holds it');
	$cb->start("SELECT redis_semaphore_acquire('$n', 1, '60 s')");
	ok(RedisLockTest::wait_for_extension_wait($cn, $cb->pid, $T), '[cluster] SQL waiter B waits');
	until_ok('[cluster] B subscribed with SSUBSCRIBE on the slot master', sub { $snum->($ch) >= 1 });
	ok($cwait->($cb), '[cluster] B still waits');
	is($cj->release($n), undef, '[cluster] Redisson releases (SPUBLISH)');
	my ($v, $err) = $cb->finish($T);
	is($v, 't', "[cluster] B is woken by Redisson's sharded message") or diag($err);
	is(FakeRedisson::conn_to($srv->port)->cmd('HGET', holders_key($n), $cb_id), '1',
		"[cluster] B's record on the master serving $n");
	my $w = $cj->semaphore_waiter($n);
	ok(!$w->acquired, '[cluster] a Redisson waiter (SSUBSCRIBE) waits');
	is($cb->query("SELECT redis_semaphore_release('$n')"), 't', '[cluster] B releases');
	ok($w->wait($T), '[cluster] the Redisson waiter gets the permit');
	is_deeply($w->events, [ [ message => '1' ] ], "[cluster] ... woken by SQL's sharded message 1");
	$cj->release($n);

	# expiring permits
	my $p = "$n:p";
	my $pch = FakeRedisson::sem_channel($p);
	is($cj->permit_try_set_permits($p, 1), 1, "[cluster] PES of 1 ($p)");
	my $pid = $ca->query("SELECT redis_permit_acquire('$p', '0', '10 min')");
	like($pid, $HEX, '[cluster] A takes the permit (10 min lease)');
	ok(exists $cj->permit_state($p)->{members}{$pid}, '[cluster] Redisson sees its id');
	$w = $cj->permit_waiter($p, $LONG);
	ok(!$w->acquired, '[cluster] a Redisson permit waiter waits');
	is($ca->query("SELECT redis_permit_release('$p', '$pid')"), 't', '[cluster] A releases');
	ok($w->wait($T), '[cluster] the Redisson waiter gets it');
	is_deeply([ map { $_->[0] } @{ $w->events } ], ['message'], '[cluster] ... woken by the sharded message');
	$cb->start("SELECT redis_permit_acquire('$p', '60 s', '10 min')");
	ok(RedisLockTest::wait_for_extension_wait($cn, $cb->pid, $T), '[cluster] SQL permit waiter B waits');
	until_ok('[cluster] B subscribed (SSUBSCRIBE)', sub { $snum->($pch) >= 1 });
	is($cj->release_permit($p, $w->value), 1, '[cluster] Redisson releases (SPUBLISH)');
	($v, $err) = $cb->finish($T);
	like($v, $HEX, '[cluster] B is woken and gets the permit') or diag($err);
	is($cb->query("SELECT redis_permit_release('$p', '$v')"), 't', '[cluster] B releases');

	# latch
	my $l = "$n:l";
	my $lch = FakeRedisson::latch_channel($l);
	is($cj->try_set_count($l, 1), 1, '[cluster] Redisson trySetCount(1)');
	$cb->start("SELECT redis_latch_await('$l', '60 s')");
	ok(RedisLockTest::wait_for_extension_wait($cn, $cb->pid, $T), '[cluster] SQL latch waiter B waits');
	until_ok('[cluster] B subscribed (SSUBSCRIBE)', sub { $snum->($lch) >= 1 });
	$cj->count_down($l);
	($v, $err) = $cb->finish($T);
	is($v, 't', "[cluster] B is woken by Redisson's sharded 0") or diag($err);
	is($ca->query("SELECT redis_latch_try_set_count('$l', 1)"), 't', '[cluster] SQL trySetCount(1)');
	$w = $cj->latch_awaiter($l);
	ok(!$w->acquired, '[cluster] a Redisson awaiter waits');
	is($ca->query("SELECT redis_latch_count_down('$l')"), 0, '[cluster] SQL countDown: 0');
	ok($w->wait($T), '[cluster] the Redisson awaiter returns');
	is_deeply($w->events, [ [ message => '0' ] ], "[cluster] ... woken by SQL's sharded 0");

	# a latch whose name has braces: its channel is in another slot, so it is
	# an argument of our script, not a key (Redisson's own scripts are
	# refused there, see test/redisson/README.md)
	my $bl = 'x{t}y';
	my $blch = FakeRedisson::latch_channel($bl);
	isnt($cl->slot_of($blch), $cl->slot_of($bl), "[cluster] latch '$bl': its channel's slot is not the key's");
	($v, $err) = $ca->try("SELECT redis_latch_try_set_count('$bl', 1)");
	is($v, 't', "[cluster] SQL trySetCount on '$bl'") or diag($err);
	SKIP:
	{
		skip "no latch '$bl' to wait on", 5 unless defined $v && $v eq 't';
		my $bsub = $cj->subscriber($blch);
		$cb->start("SELECT redis_latch_await('$bl', '60 s')");
		ok(RedisLockTest::wait_for_extension_wait($cn, $cb->pid, $T), "[cluster] SQL awaiter B waits on '$bl'");
		until_ok("[cluster] B subscribed on the channel's own slot", sub { $snum->($blch) >= 2 });
		($v, $err) = $ca->try("SELECT redis_latch_count_down('$bl')");
		is($v, 0, '[cluster] SQL countDown: 0') or diag($err);
		($v, $err) = $cb->finish($T);
		is($v, 't', "[cluster] B is woken") or diag($err);
		my $msg = $bsub->next_message($T);
		is_deeply($msg, [ $blch, '0' ],
			"[cluster] a Redisson subscriber of '$bl' (on the channel's own slot) gets 0");
		$bsub->close;
	}
	$_->close for $ca, $cb;
	no_crash_ok($cn, 'cluster');
}

# the SQL sessions' notices were only the WARNING checked above
$_->close for $a, $b;
no_crash_ok($node, 'semaphores with Redisson');
done_testing();
