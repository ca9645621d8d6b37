# Self-test of the test-side Redisson semaphore and latch client
# (FakeRedisson's RSemaphore, RPermitExpirableSemaphore and RCountDownLatch
# methods, test/redisson/sem_*.lua, permit_*.lua, latch_*.lua): two
# FakeRedisson clients, two "JVMs", against a real redis-server, once more
# over TLS, once more on a Redis Cluster (3 masters; the clients follow
# MOVED, the scripts SPUBLISH, the waiters and observers SSUBSCRIBE on the
# master of the channel's slot, as Redisson's cluster mode with Redis 7).
# Needs redis-server 7 (and openssl + IO::Socket::SSL for the TLS part),
# neither PostgreSQL nor the redislock extension.
#
# No check depends on timing.  As in 002: what was published is checked by
# an observer subscribed to the object's channel and to a marker channel;
# the test publishes a marker and reads what came before it.  Waiters are
# checked on what woke them (the message, or the expiry the script
# reported); that a message did NOT wake a waiter is shown by publishing a
# marker on the waiter's own channel afterwards and finding the marker is
# what ended its wait.  Permit lease expiries are waited for (until_ok, or
# a waiter bounded by the script's hint) on observable state; a permit a
# waiter must be refused first is held with a lease no test outlives, then
# shortened.  No sleeps, no elapsed-time checks.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use Test::More;
use RedisLockTest;
use FakeRedisson;

my $T    = 30;         # bound for anything that should happen at once, s
my $LONG = 600_000;    # a lease no test outlives, ms
my $NX   = FakeRedisson::NON_EXPIRABLE;
my $HEX  = qr/^[0-9a-f]{32}$/;

# --- helpers (as in 002) ----------------------------------------------------------
# $s: rc runs raw commands (a plain connection, or on a cluster a client
# following MOVED); a and b are the two "JVMs"; pub is the publish command
# their scripts use; numsub($channel) counts the channel's subscribers where
# they are (PUBSUB NUMSUB, or SHARDNUMSUB on the slot's master); keys lists
# every key (on every master).
sub setup
{
	my ($redis) = @_;
	my %c = (port => $redis->port, $redis->tls_opts);
	my $rc = FakeRedisson::Conn->new(%c);
	return {
		rc     => $rc,
		a      => FakeRedisson->new(%c, lease => $LONG),
		b      => FakeRedisson->new(%c, lease => $LONG),
		pub    => 'PUBLISH',
		numsub => sub { $rc->cmd('PUBSUB', 'NUMSUB', $_[0])->[1] },
		keys   => sub { $rc->cmd('KEYS', '*') },
	};
}

# The same on a cluster: a, b and rc each start from a different master.
sub setup_cluster
{
	my ($cl) = @_;
	my @m = $cl->masters;
	return {
		rc     => FakeRedisson->new(port => $m[2]->port, cluster => 1),
		a      => FakeRedisson->new(port => $m[0]->port, cluster => 1, lease => $LONG),
		b      => FakeRedisson->new(port => $m[1]->port, cluster => 1, lease => $LONG),
		pub    => 'SPUBLISH',
		numsub => sub { my ($ch) = @_; ($cl->cli_for_key($ch, 'PUBSUB', 'SHARDNUMSUB', $ch))[1] },
		keys   => sub { [ map { @{ FakeRedisson::conn_to($_->port)->cmd('KEYS', '*') } } $cl->masters ] },
	};
}

# An observer subscribed to $channel and to marker:$channel, as a's
# subscribers are (SSUBSCRIBE on a cluster: both share the hash tag).
sub observer
{
	my ($s, $channel) = @_;
	my $o = $s->{a}->subscriber($channel, "marker:$channel");
	return { conn => $o, channel => $channel };
}

# The payloads published on the observed channel since the last call.
sub published
{
	my ($s, $o) = @_;
	my $mark = "marker:$o->{channel}";
	$s->{rc}->cmd($s->{pub}, $mark, 'mark');
	my @m;
	while (1)
	{
		my $m = $o->{conn}->next_message($T) // return [ @m, 'NO MARKER' ];
		return \@m if $m->[0] eq $mark;
		push @m, $m->[0] eq $o->{channel} ? $m->[1] : "on $m->[0]: $m->[1]";
	}
}

sub numsub { my ($s, $ch) = @_; $s->{numsub}->($ch) }

# --- names ----------------------------------------------------------------------
is(FakeRedisson::sem_channel('s:1'), 'redisson_sc:{s:1}', 'semaphore channel redisson_sc:{name}');
is(FakeRedisson::sem_channel('a{t}b'), 'redisson_sc:a{t}b', '... not wrapped when the name has {');
is(FakeRedisson::permit_timeout_key('p:1'), '{p:1}:timeout', 'PES zset {name}:timeout');
is(FakeRedisson::permit_timeout_key('a{t}b'), 'a{t}b:timeout', '... name:timeout when the name has {');
is(FakeRedisson::latch_channel('l:1'), 'redisson_countdownlatch__channel__{l:1}',
	'latch channel redisson_countdownlatch__channel__{name}');
is(FakeRedisson::latch_channel('a{t}b'), 'redisson_countdownlatch__channel__{a{t}b}',
	'... braces added even when the name has some (concatenation, not prefixName)');
{
	my $id = FakeRedisson::new_permit_id();
	like($id, $HEX, 'a permit id: 32 lowercase hex chars');
	is(length(FakeRedisson::permit_id_bytes($id)), 16, '... 16 raw bytes');
	is(FakeRedisson::permit_id_hex(FakeRedisson::permit_id_bytes($id)), $id, '... hex <-> bytes round trip');
	isnt(FakeRedisson::new_permit_id(), $id, 'ids are fresh');
}

# --- RSemaphore -------------------------------------------------------------------
sub semaphore
{
	my ($s, $label) = @_;
	my ($a, $b, $rc) = @$s{qw(a b rc)};
	my $name = 'sem:1';
	my $o = observer($s, FakeRedisson::sem_channel($name));

	is($a->available_permits($name), 0, "[$label] sem: availablePermits of a missing key: 0");
	is($a->try_acquire($name), 0, "[$label] sem: tryAcquire on a missing key: 0");
	is($rc->cmd('EXISTS', $name), 0, "[$label] sem: ... creates nothing");
	is($a->try_set_permits($name, 2), 1, "[$label] sem: trySetPermits(2): 1");
	is_deeply([ $rc->cmd('TYPE', $name), $rc->cmd('GET', $name), $rc->cmd('PTTL', $name) ],
		[ 'string', '2', -1 ], "[$label] sem: the key is a string 2, no TTL");
	is_deeply(published($s, $o), ['2'], "[$label] sem: 2 published");
	is($b->try_set_permits($name, 3), 0, "[$label] sem: trySetPermits on an existing key: 0");
	is($rc->cmd('GET', $name), '2', "[$label] sem: ... value unchanged");
	is_deeply(published($s, $o), [], "[$label] sem: ... nothing published");

	is($a->try_acquire($name), 1, "[$label] sem: A tryAcquire(1): 1");
	is($rc->cmd('GET', $name), '1', "[$label] sem: ... 1 left");
	is($b->try_acquire($name, 2), 0, "[$label] sem: B tryAcquire(2): 0");
	is($rc->cmd('GET', $name), '1', "[$label] sem: ... still 1");
	is($a->try_acquire($name, 0), 1, "[$label] sem: tryAcquire(0): 1 (no round trip)");
	is_deeply(published($s, $o), [], "[$label] sem: acquisitions publish nothing");

	my $w = $b->semaphore_waiter($name, 2);
	ok(!$w->acquired && $w->subscribed, "[$label] sem: B waits for 2, subscribed");
	is_deeply([ $w->attempts, $w->ttl ], [ 2, -1 ], "[$label] sem: ... after 2 attempts, no TTL to wait on");
	is(numsub($s, FakeRedisson::sem_channel($name)), 2, "[$label] sem: waiter and observer subscribed");
	is($a->release($name), undef, "[$label] sem: A releases 1: nil");
	is($rc->cmd('GET', $name), '2', "[$label] sem: ... 2 available");
	is_deeply(published($s, $o), ['2'], "[$label] sem: ... the new total 2 published");
	ok($w->wait($T), "[$label] sem: the waiter gets its 2 permits");
	is_deeply($w->events, [ [ message => '2' ] ], "[$label] sem: ... woken by the message 2");
	ok(!$w->subscribed, "[$label] sem: ... and unsubscribed");
	is($rc->cmd('GET', $name), '0', "[$label] sem: 0 left");

	is($a->add_permits($name, -1), undef, "[$label] sem: addPermits(-1)");
	is($rc->cmd('GET', $name), '-1', "[$label] sem: ... the value goes to -1");
	is_deeply(published($s, $o), ['-1'], "[$label] sem: ... -1 published");
	$w = $b->semaphore_waiter($name);
	ok(!$w->acquired, "[$label] sem: a waiter for 1");
	$a->add_permits($name, 1);
	is($rc->cmd('GET', $name), '0', "[$label] sem: addPermits(1): 0");
	$a->release($name, 1);
	is_deeply(published($s, $o), [ '0', '1' ], "[$label] sem: 0 then 1 published");
	ok($w->wait($T), "[$label] sem: the waiter gets its permit");
	is_deeply($w->events, [ [ ignored => '0' ], [ message => '1' ] ],
		"[$label] sem: ... the 0 woke nobody (min(waiters, 0) latch permits), the 1 did");
	is($rc->cmd('GET', $name), '0', "[$label] sem: 0 left");

	is($a->release($name, 0), undef, "[$label] sem: release(0)");
	is_deeply(published($s, $o), [], "[$label] sem: ... sends nothing");
	eval { $a->release($name, -1) };
	like($@, qr/negative/, "[$label] sem: release(-1) dies");
	is($a->release($name, 5), undef, "[$label] sem: release(5) beyond any initial count");
	is($rc->cmd('GET', $name), '5', "[$label] sem: ... unchecked: 5");
	is_deeply(published($s, $o), ['5'], "[$label] sem: ... 5 published");
	is($a->drain_permits($name), 5, "[$label] sem: drainPermits: 5");
	is($rc->cmd('GET', $name), '0', "[$label] sem: ... the key is 0");
	is_deeply(published($s, $o), [], "[$label] sem: ... nothing published");
	is($rc->cmd('DEL', $name), 1, "[$label] sem: (key deleted)");
	is($a->drain_permits($name), 0, "[$label] sem: drainPermits of a missing key: 0");
	is($rc->cmd('EXISTS', $name), 0, "[$label] sem: ... creates nothing");

	is($a->release_if_exists($name, 2), 0, "[$label] sem: releaseIfExists on a missing key: 0");
	is($rc->cmd('EXISTS', $name), 0, "[$label] sem: ... creates nothing");
	is_deeply(published($s, $o), [], "[$label] sem: ... publishes nothing");
	is($a->release($name, 1), undef, "[$label] sem: release on a missing key");
	is($rc->cmd('GET', $name), '1', "[$label] sem: ... creates it: 1");
	is($a->release_if_exists($name, 2), 1, "[$label] sem: releaseIfExists(2) now: 1");
	is($rc->cmd('GET', $name), '3', "[$label] sem: ... 3");
	is_deeply(published($s, $o), [ '1', '3' ], "[$label] sem: 1 and 3 published");
	$rc->cmd('DEL', $name);

	# trySetPermits with a TTL; release keeps it, addPermits and drain drop it
	is($a->try_set_permits($name, 1, $LONG), 1, "[$label] sem: trySetPermits(1, ttl): 1");
	my $pttl = $rc->cmd('PTTL', $name);
	ok($pttl > 0 && $pttl <= $LONG, "[$label] sem: ... the key has the TTL ($pttl)");
	is_deeply(published($s, $o), ['1'], "[$label] sem: ... 1 published");
	$a->release($name, 1);
	ok($rc->cmd('PTTL', $name) > 0, "[$label] sem: release (INCRBY) keeps the TTL");
	$a->add_permits($name, 1);
	is_deeply([ $rc->cmd('GET', $name), $rc->cmd('PTTL', $name) ], [ '3', -1 ],
		"[$label] sem: addPermits (SET) drops it");
	is_deeply(published($s, $o), [ '2', '3' ], "[$label] sem: 2 and 3 published");
	$rc->cmd('DEL', $name);
	$o->{conn}->close;
}

# --- RPermitExpirableSemaphore ---------------------------------------------------
sub permit_semaphore
{
	my ($s, $label) = @_;
	my ($a, $b, $rc) = @$s{qw(a b rc)};
	my $name = 'pes:1';
	my $zkey = FakeRedisson::permit_timeout_key($name);
	my $o = observer($s, FakeRedisson::sem_channel($name));

	is($a->permit_available($name), 0, "[$label] pes: availablePermits of a missing key: 0");
	is($a->permit_get_permits($name), 0, "[$label] pes: getPermits: 0");
	is($a->try_acquire_permit($name), undef, "[$label] pes: tryAcquire on a missing key: nil");
	is_deeply([ $rc->cmd('EXISTS', $name), $rc->cmd('EXISTS', $zkey) ], [ 0, 0 ], "[$label] pes: ... no key made");
	is($a->permit_try_set_permits($name, 2), 1, "[$label] pes: trySetPermits(2): 1");
	is($b->permit_try_set_permits($name, 3), 0, "[$label] pes: again: 0");
	is_deeply(published($s, $o), ['2'], "[$label] pes: 2 published once");

	# a permit without a lease
	my $id1 = $a->try_acquire_permit($name);
	like($id1, $HEX, "[$label] pes: A acquires a permit without lease: a hex id");
	my $st = $a->permit_state($name);
	is_deeply([ $st->{value}, $st->{members}, $st->{raw_lengths}, $st->{pttl}, $st->{zpttl} ],
		[ '1', { $id1 => $NX }, [16], -1, -1 ],
		"[$label] pes: value 1; the zset holds the id as 16 raw bytes, score $NX; no TTLs");
	is($rc->cmd('TYPE', $zkey), 'zset', "[$label] pes: $zkey is a zset");
	is($rc->cmd('ZSCORE', $zkey, $id1), undef, "[$label] pes: ... not keyed by the hex form");
	is($a->permit_lease_time($name, $id1), -1, "[$label] pes: getLeaseTime: -1");

	# a permit with a lease: the score is the client's now + lease
	my $t0  = FakeRedisson::now_ms();
	my $id2 = $b->try_acquire_permit($name, $LONG);
	my $t1  = FakeRedisson::now_ms();
	like($id2, $HEX, "[$label] pes: B acquires one with a lease");
	my $sc2 = $a->permit_state($name)->{members}{$id2};
	ok($sc2 >= $t0 + $LONG && $sc2 <= $t1 + $LONG, "[$label] pes: ... its score is now + lease ($sc2)");
	my $lt = $a->permit_lease_time($name, $id2);
	ok($lt > 0 && $lt <= $LONG, "[$label] pes: getLeaseTime: the ms left ($lt)");
	is($a->permit_lease_time($name, FakeRedisson::new_permit_id()), 0, "[$label] pes: getLeaseTime of an unknown id: 0");
	is_deeply([ $a->permit_available($name), $a->permit_acquired($name), $a->permit_get_permits($name) ],
		[ 0, 2, 2 ], "[$label] pes: available 0, acquired 2, permits 2");
	is_deeply(published($s, $o), [], "[$label] pes: acquisitions publish nothing");

	is($a->try_acquire_permit($name), ":$sc2", "[$label] pes: no permit left: the hint is B's expiry");
	is($rc->cmd('ZCARD', $zkey), 2, "[$label] pes: ... the refused ids are not added");

	# release
	is($b->release_permit($name, $id2), 1, "[$label] pes: B releases its permit: 1");
	is_deeply([ $rc->cmd('GET', $name), $a->permit_state($name)->{members} ], [ '1', { $id1 => $NX } ],
		"[$label] pes: ... value 1, the id gone");
	is_deeply(published($s, $o), ['1'], "[$label] pes: ... the new value 1 published");
	is($b->release_permit($name, $id2), 0, "[$label] pes: releasing it again: 0");
	is_deeply(published($s, $o), [], "[$label] pes: ... nothing published");
	my $id3 = $b->try_acquire_permit($name);
	ok($id3 =~ $HEX, "[$label] pes: B takes the last permit");
	is($a->try_acquire_permit($name), undef, "[$label] pes: no lease among the holders: the hint is nil");

	# a waiter woken by a release message
	my $w = $b->permit_waiter($name, $LONG);
	ok(!$w->acquired && $w->subscribed, "[$label] pes: B's thread waits, subscribed");
	is($w->ttl, -1, "[$label] pes: ... on messages only (nil hint)");
	is($a->release_permit($name, $id1), 1, "[$label] pes: A releases its permit");
	is_deeply(published($s, $o), ['1'], "[$label] pes: ... 1 published");
	ok($w->wait($T), "[$label] pes: the waiter gets a permit");
	is_deeply($w->events, [ [ message => '1' ] ], "[$label] pes: ... woken by the message 1");
	my $id4 = $w->value;
	like($id4, $HEX, "[$label] pes: ... its id");
	$st = $a->permit_state($name);
	is_deeply([ $st->{value}, [ sort keys %{ $st->{members} } ] ], [ '0', [ sort $id3, $id4 ] ],
		"[$label] pes: value 0, the zset holds B's two ids");
	ok($st->{members}{$id4} > $t1 && $st->{members}{$id4} != $NX, "[$label] pes: ... the waiter's with its lease");

	# update the lease
	$t0 = FakeRedisson::now_ms();
	is($b->update_lease_time($name, $id3, $LONG), 1, "[$label] pes: updateLeaseTime of B's id: 1");
	$t1 = FakeRedisson::now_ms();
	my $sc3 = $a->permit_state($name)->{members}{$id3};
	ok($sc3 >= $t0 + $LONG && $sc3 <= $t1 + $LONG, "[$label] pes: ... score now + lease");
	is($b->update_lease_time($name, $id3, -1), 1, "[$label] pes: updateLeaseTime(-1): 1");
	is($a->permit_state($name)->{members}{$id3}, $NX, "[$label] pes: ... score $NX");
	is($b->update_lease_time($name, $id1, $LONG), 0, "[$label] pes: updateLeaseTime of a released id: 0");
	is_deeply(published($s, $o), [], "[$label] pes: ... nothing published");

	# release several: all or nothing
	is($b->release_permits($name, $id3, $id4, $id1), 0, "[$label] pes: release([$id3, $id4, released]): 0");
	is_deeply([ $rc->cmd('GET', $name), $rc->cmd('ZCARD', $zkey) ], [ '0', 2 ], "[$label] pes: ... nothing changed");
	is($b->release_permits($name, $id3, $id4), 2, "[$label] pes: release([two held ids]): 2");
	is_deeply([ $rc->cmd('GET', $name), $rc->cmd('ZCARD', $zkey) ], [ '2', 0 ], "[$label] pes: ... value 2, zset empty");
	is_deeply(published($s, $o), ['2'], "[$label] pes: ... the number released (2) published");

	# the value key's TTL is copied onto the zset
	$rc->cmd('PEXPIRE', $name, $LONG);
	my $ids = $a->try_acquire_permits($name, 2, $LONG);
	is(ref $ids && scalar(@$ids), 2, "[$label] pes: tryAcquire(2 permits): 2 ids");
	$st = $a->permit_state($name);
	ok($st->{zpttl} > 0 && $st->{zpttl} <= $st->{pttl} + 1, "[$label] pes: the zset got the value key's TTL");
	is($b->release_permits($name, @$ids), 2, "[$label] pes: released");
	$rc->cmd('PERSIST', $name);
	$rc->cmd('PERSIST', $zkey);
	is_deeply(published($s, $o), ['2'], "[$label] pes: 2 published");

	# setPermits / addPermits
	my $h = $a->try_acquire_permit($name);
	$a->permit_set_permits($name, 5);
	is_deeply([ $rc->cmd('GET', $name), $rc->cmd('ZCARD', $zkey) ], [ '4', 1 ],
		"[$label] pes: setPermits(5) with 1 held: 4 available");
	is_deeply(published($s, $o), ['5'], "[$label] pes: ... 5 published");
	$a->permit_set_permits($name, 5);
	is_deeply(published($s, $o), [], "[$label] pes: setPermits(5) again: nothing published");
	$a->permit_add_permits($name, 2);
	is($rc->cmd('GET', $name), '6', "[$label] pes: addPermits(2): 6");
	$a->permit_add_permits($name, -3);
	is($rc->cmd('GET', $name), '3', "[$label] pes: addPermits(-3): 3");
	is_deeply(published($s, $o), ['2'], "[$label] pes: the delta 2 published, nothing for -3");
	$a->release_permit($name, $h);
	is_deeply(published($s, $o), ['4'], "[$label] pes: release: 4 published");
	$a->permit_set_permits($name, 1);
	is($rc->cmd('GET', $name), '1', "[$label] pes: setPermits(1)");
	is_deeply(published($s, $o), ['1'], "[$label] pes: 1 published");

	# a lease runs out: no publish by itself; the next script reclaims.
	# A holds the last permit with a lease no test outlives, so B is refused
	# however slow the machine; then A shortens the lease (updateLeaseTime)
	# and B's waiter learns the new expiry from its next attempt's hint.
	my $e = $a->try_acquire_permit($name, $LONG);
	like($e, $HEX, "[$label] pes: A acquires the last permit ($LONG ms lease)");
	my $se = $a->permit_state($name)->{members}{$e};
	is($b->try_acquire_permit($name, $LONG), ":$se", "[$label] pes: B is refused with the hint :$se");
	$w = $b->permit_waiter($name, $LONG);
	ok(!$w->acquired && $w->ttl > 0, "[$label] pes: B waits for the expiry the hint gave (ttl " . $w->ttl . ' ms)');
	is($a->update_lease_time($name, $e, 500), 1, "[$label] pes: A shortens its lease to 500 ms (updateLeaseTime)");
	is_deeply(published($s, $o), [], "[$label] pes: ... nothing published");
	$w->step(0);    # Java's waiter wakes at its bound and attempts again
	ok($w->acquired || ($w->ttl >= 0 && $w->ttl <= 500),
		"[$label] pes: B's next attempt: the hint is A's new expiry (or the lease already ran out)");
	ok($w->wait($T), "[$label] pes: B gets the permit once the lease ran out");
	ok(!grep({ $_->[0] ne 'timeout' } @{ $w->events }), "[$label] pes: ... woken by the expiry, no message");
	ok($w->events->[-1][1] <= 0.5, "[$label] pes: ... its last wait was bounded by the hint, not by the wait's $T s");
	$st = $a->permit_state($name);
	is_deeply([ $st->{value}, [ keys %{ $st->{members} } ] ], [ '0', [ $w->value ] ],
		"[$label] pes: A's expired id reclaimed, B's id in, value 0");
	is_deeply(published($s, $o), ['1'], "[$label] pes: the reclaim by B's attempt published 1");
	is($a->release_permit($name, $e), 0, "[$label] pes: A's release of its reclaimed id: 0");
	is_deeply(published($s, $o), [], "[$label] pes: ... nothing published");
	$b->release_permit($name, $w->value);
	is_deeply(published($s, $o), ['1'], "[$label] pes: B releases: 1 published");

	# expiry seen through availablePermits (observable state, polled)
	$e = $a->try_acquire_permit($name, 300);
	is($rc->cmd('GET', $name), '0', "[$label] pes: A holds the last permit, 300 ms lease");
	until_ok("[$label] pes: availablePermits finds it back once the lease ran out",
		sub { $b->permit_available($name) == 1 }, $T);
	is_deeply([ $rc->cmd('GET', $name), $rc->cmd('ZCARD', $zkey) ], [ '1', 0 ],
		"[$label] pes: ... reclaimed: value 1, zset empty");
	is_deeply(published($s, $o), ['1'], "[$label] pes: ... 1 published by the reclaim");
	is($a->update_lease_time($name, $e, $LONG), 0, "[$label] pes: updateLeaseTime of the reclaimed id: 0");

	# releasing an expired, not yet reclaimed permit: 0, but it goes back
	$e = $a->try_acquire_permit($name, 300);
	$se = $a->permit_state($name)->{members}{$e};
	until_ok("[$label] pes: the client's clock is past the lease", sub { FakeRedisson::now_ms() > $se }, $T);
	is($a->release_permit($name, $e), 0, "[$label] pes: releasing the expired id: 0");
	is_deeply([ $rc->cmd('GET', $name), $rc->cmd('ZCARD', $zkey) ], [ '1', 0 ],
		"[$label] pes: ... yet removed and counted back");
	is_deeply(published($s, $o), ['1'], "[$label] pes: ... and 1 published");
	$rc->cmd('DEL', $name, $zkey);
	$o->{conn}->close;
}

# --- RCountDownLatch --------------------------------------------------------------
sub latch
{
	my ($s, $label) = @_;
	my ($a, $b, $rc) = @$s{qw(a b rc)};
	my $name = 'latch:1';
	my $o = observer($s, FakeRedisson::latch_channel($name));

	is($a->get_count($name), 0, "[$label] latch: getCount of a missing key: 0");
	my $w = $b->latch_awaiter($name);
	ok($w->acquired && $w->attempts == 1 && !$w->subscribed, "[$label] latch: await on count 0 returns at once");
	is($a->try_set_count($name, 2), 1, "[$label] latch: trySetCount(2): 1");
	is_deeply([ $rc->cmd('TYPE', $name), $rc->cmd('GET', $name), $rc->cmd('PTTL', $name) ],
		[ 'string', '2', -1 ], "[$label] latch: the key is a string 2, no TTL");
	is_deeply(published($s, $o), ['1'], "[$label] latch: 1 (NEW_COUNT) published");
	is($b->try_set_count($name, 5), 0, "[$label] latch: trySetCount again: 0");
	is($rc->cmd('GET', $name), '2', "[$label] latch: ... still 2");
	is_deeply(published($s, $o), [], "[$label] latch: ... nothing published");

	$w = $b->latch_awaiter($name);
	ok(!$w->acquired && $w->subscribed, "[$label] latch: B awaits, subscribed");
	is_deeply([ $w->attempts, $w->value ], [ 2, 2 ], "[$label] latch: ... after reading the count 2 twice");
	is(numsub($s, FakeRedisson::latch_channel($name)), 2, "[$label] latch: awaiter and observer subscribed");
	is($a->count_down($name), undef, "[$label] latch: countDown");
	is($a->get_count($name), 1, "[$label] latch: ... 1");
	is_deeply(published($s, $o), [], "[$label] latch: ... nothing published");
	$a->count_down($name);
	is($rc->cmd('EXISTS', $name), 0, "[$label] latch: countDown to 0 deletes the key");
	is_deeply(published($s, $o), ['0'], "[$label] latch: ... 0 (ZERO_COUNT) published");
	ok($w->wait($T), "[$label] latch: the awaiter returns");
	is_deeply($w->events, [ [ message => '0' ] ], "[$label] latch: ... woken by the 0");
	ok(!$w->subscribed, "[$label] latch: ... and unsubscribed");

	$a->count_down($name);
	is($rc->cmd('EXISTS', $name), 0, "[$label] latch: countDown of a missing key leaves none");
	is_deeply(published($s, $o), [], "[$label] latch: ... and publishes nothing");

	# delete() publishes 1, which closes Java's latch: the awaiter stays
	# until it reads the count again
	is($a->try_set_count($name, 1), 1, "[$label] latch: trySetCount(1)");
	$w = $b->latch_awaiter($name);
	ok(!$w->acquired, "[$label] latch: B awaits");
	is($a->latch_delete($name), 1, "[$label] latch: delete(): 1");
	is($a->latch_delete($name), 0, "[$label] latch: delete() again: 0");
	is_deeply(published($s, $o), [ '1', '1' ], "[$label] latch: 1 from trySetCount, 1 from delete");
	$s->{rc}->cmd($s->{pub}, FakeRedisson::latch_channel($name), 'marker');
	is($w->step($T, 'marker'), 1, "[$label] latch: the awaiter's next attempt finds the count 0");
	is_deeply($w->events, [ [ ignored => '1' ], [ marker => 'marker' ] ],
		"[$label] latch: ... the 1 did not wake it: a marker published later ended its wait");
	$o->{conn}->close;
}

# --- cluster layout: each object's keys and channel in one slot ------------------
sub cluster_layout
{
	my ($s, $cl) = @_;
	my ($a, $b) = @$s{qw(a b)};
	my $slot = sub { $cl->slot_of($_[0]) };
	for my $name ('pes:2', 'x{t}y')
	{
		my $z  = FakeRedisson::permit_timeout_key($name);
		my $ch = FakeRedisson::sem_channel($name);
		is_deeply([ $slot->($z), $slot->($ch) ], [ $slot->($name), $slot->($name) ],
			"[cluster] $name: $z and $ch share its slot");
		my $m = $cl->node_for_key($name);
		is($a->permit_try_set_permits($name, 2), 1, "[cluster] $name: trySetPermits(2)");
		my $id = $b->try_acquire_permit($name, $LONG);
		like($id, $HEX, "[cluster] $name: B acquires a permit");
		my $sub = $a->subscriber($ch);
		is(($m->cli('PUBSUB', 'SHARDNUMSUB', $ch))[1], 1,
			"[cluster] $name: A's subscriber is on the master serving the slot (SSUBSCRIBE)");
		is(FakeRedisson::conn_to($m->port)->cmd('EXISTS', $name, $z), 2,
			"[cluster] $name: both keys on that master");
		is($b->release_permit($name, $id), 1, "[cluster] $name: B releases (SPUBLISH)");
		my $msg = $sub->next_message($T);
		is_deeply($msg, [ $ch, '2' ], "[cluster] $name: A's sharded subscriber gets the new total 2");
		$sub->close;
		$s->{rc}->cmd('DEL', $name, $z);
	}
	# RCountDownLatch builds its channel by concatenation: with braces in the
	# name the channel's hash tag is not the key's, and the scripts, which
	# declare it as KEYS[2], are refused on a cluster (a Redisson fact).
	my $ln = 'x{t}y';
	isnt($slot->(FakeRedisson::latch_channel($ln)), $slot->($ln),
		"[cluster] latch $ln: its channel is in another slot");
	eval { $a->try_set_count($ln, 1) };
	like($@, qr/CROSSSLOT/, "[cluster] latch $ln: trySetCount fails (CROSSSLOT)");
	is(FakeRedisson::conn_to($cl->node_for_key($ln)->port)->cmd('EXISTS', $ln), 0,
		"[cluster] latch $ln: nothing set");
}

my $redis = RedisLockTest::Redis->new;
my $s = setup($redis);
semaphore($s, 'plain');
permit_semaphore($s, 'plain');
latch($s, 'plain');
is_deeply($s->{keys}->(), [], 'no key left behind');

{
	my $tls = RedisLockTest::TLS->new;
	my $tr  = RedisLockTest::Redis->new(tls => $tls);
	my $ts  = setup($tr);
	semaphore($ts, 'tls');
	permit_semaphore($ts, 'tls');
	latch($ts, 'tls');
	is_deeply($ts->{keys}->(), [], '[tls] no key left behind');
	$tr->stop;
}

{
	my $cl = RedisLockTest::Cluster->new(masters => 3, replicas => 0);
	my $cs = setup_cluster($cl);
	semaphore($cs, 'cluster');
	permit_semaphore($cs, 'cluster');
	latch($cs, 'cluster');
	cluster_layout($cs, $cl);
	is_deeply($cs->{keys}->(), [], '[cluster] no key left behind');
}

done_testing();
