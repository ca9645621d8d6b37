# Self-test of the test-side Redisson read-write lock client (FakeRedisson's
# RReadWriteLock methods, test/redisson/rw_*.lua): two FakeRedisson clients,
# two "JVMs" with their own uuids, check Redisson's RReadWriteLock semantics
# against a real redis-server, once more over TLS.  Needs redis-server (and
# openssl + IO::Socket::SSL for the TLS part), neither PostgreSQL nor the
# redislock extension.
#
# What was published is checked without timing: an observer connection is
# subscribed to the lock's channel and to a marker channel of its own; the
# test publishes a marker and reads the messages that came before it (Redis
# delivers a connection's pub/sub messages in publish order).  Holders use
# long leases unless a lease is what is being tested, so that only a publish
# can explain a prompt wake-up.  Watchdog rounds are checked on the keys'
# expiry in Redis against a marker key (watchdog_round), lease expiries by
# waiting for the key to be gone: no sleeps, no elapsed-time checks.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use Test::More;
use POSIX ();
use RedisLockTest;
use FakeRedisson;

my $T    = 30;         # bound for anything that should happen at once, s
my $LONG = 600_000;    # a lease no test outlives, ms

# --- helpers --------------------------------------------------------------------
# A server under test: its raw connection and two JVMs.
sub setup
{
	my ($redis) = @_;
	my %c = (port => $redis->port, $redis->tls_opts);
	return {
		rc => FakeRedisson::Conn->new(%c),
		a  => FakeRedisson->new(%c, lease => $LONG),
		b  => FakeRedisson->new(%c, lease => $LONG),
		c  => \%c,
	};
}

# An observer subscribed to the lock's channel and to marker:<name>.
sub observer
{
	my ($s, $name) = @_;
	my $o = FakeRedisson::Conn->new(%{ $s->{c} });
	$o->subscribe(FakeRedisson::rw_channel($name), "marker:$name");
	return $o;
}

# The payloads published on the lock's channel since the last call: those the
# observer got before the marker published now.
sub published
{
	my ($s, $o, $name) = @_;
	$s->{rc}->cmd('PUBLISH', "marker:$name", 'mark');
	my @m;
	while (1)
	{
		my $m = $o->next_message($T) // return [ @m, 'NO MARKER' ];
		return \@m if $m->[0] eq "marker:$name";
		push @m, $m->[1];
	}
}

# PTTLs of @keys, in the order given, read by one script: one clock for all
# (Redis 7 freezes time in a script; before that each PTTL reads it anew, in
# order, which keeps the comparisons in watchdog_round sound).
sub pttls
{
	my ($rc, @keys) = @_;
	return $rc->cmd('EVAL',
		'local t = {} for i, k in ipairs(KEYS) do t[i] = redis.call(\'pttl\', k) end return t',
		scalar(@keys), @keys);
}

# One watchdog round, $round->() (its result is returned), checked without a
# clock in the test: the round must push the expiry of every key of @$renew
# out to $lease ms from the round, and must not touch the keys of @$keep.
#
# First Redis's clock is seen past the moment each key got its expiry (its
# PTTL below $lease), then a marker key is set to expire $lease ms from now,
# and the round runs.  Without a PEXPIRE by the round a key expires before
# the marker (less than $lease after a moment before the marker was set);
# renewed by the round, no earlier than the marker.  So afterwards, in one
# snapshot: each key of @$renew must have a PTTL >= the marker's (a value only
# a renewal can give it), each key of @$keep a PTTL below it (-2: gone).
sub watchdog_round
{
	my ($s, $desc, $lease, $round, $renew, $keep) = @_;
	my $rc   = $s->{rc};
	my $mark = 'watchdog:mark';
	until_ok("$desc: Redis's clock is past the last expiry set on the keys",
		sub { !grep { $_ >= $lease } @{ pttls($rc, @$renew, @$keep) } }, $T);
	$rc->cmd('SET', $mark, 1, 'PX', $lease);
	my $r = $round->();
	my @p  = @{ pttls($rc, @$renew, $mark, @$keep) };
	my @pr = splice(@p, 0, scalar(@$renew));
	my $pm = shift @p;
	my %pr; @pr{@$renew} = @pr;
	my %pk; @pk{@$keep}  = @p;
	ok(!grep({ $_ < $pm } @pr), "$desc: the keys it renews expire no earlier than the marker")
	  or diag(explain({ marker => $pm, pttl => \%pr }));
	ok(!grep({ $_ >= $pm } @p), "$desc: the keys it must not renew expire before it")
	  or diag(explain({ marker => $pm, pttl => \%pk }));
	$rc->cmd('DEL', $mark);
	return $r;
}

sub numsub { my ($s, $ch) = @_; $s->{rc}->cmd('PUBSUB', 'NUMSUB', $ch)->[1] }

# --- names ----------------------------------------------------------------------
{
	my $o = '6f1c0000-0000-4000-a000-000000000001:7';
	is(FakeRedisson::rw_channel('doc:1'), 'redisson_rwlock:{doc:1}', 'channel redisson_rwlock:{name}');
	is(FakeRedisson::rw_timeout_key('doc:1', $o, 2), "{doc:1}:$o:rwlock_timeout:2",
		'timeout key {name}:<owner>:rwlock_timeout:n');
	is(FakeRedisson::rw_key_prefix('doc:1', $o), '{doc:1}', 'key prefix {name}');
	is(FakeRedisson::rw_channel('a{t}b'), 'redisson_rwlock:a{t}b', 'a name with { is not wrapped: channel');
	is(FakeRedisson::rw_timeout_key('a{t}b', $o, 1), "a{t}b:$o:rwlock_timeout:1", '... timeout key');
	is(FakeRedisson::rw_key_prefix('a{t}b', $o), 'a{t}b', '... key prefix');
}

# --- readers share, a writer excludes both ways, wake-up messages ---------------
# (run on the plain server and over TLS)
sub share_and_exclude
{
	my ($s, $label) = @_;
	my ($a, $b) = @$s{qw(a b)};
	my $name = "rw:share";
	my $o = observer($s, $name);

	is($a->try_read_lock($name, 1), undef, "[$label] A reads");
	is($b->try_read_lock($name, 1), undef, "[$label] B reads too: readers share");
	my $st = $a->rw_state($name);
	is($st->{mode}, 'read', "[$label] mode read");
	is_deeply($st->{readers}, { $a->owner(1) => 1, $b->owner(1) => 1 }, "[$label] both readers in the hash");
	ok($st->{timeouts}{ $a->owner(1) }[0] > 0 && $st->{timeouts}{ $b->owner(1) }[0] > 0,
		"[$label] each has its rwlock_timeout:1 key with a TTL");
	ok($st->{pttl} > 0 && $st->{pttl} <= $LONG, "[$label] the hash has the lease as TTL");
	is($a->is_read_locked($name) . $a->is_write_locked($name), '10', "[$label] isLocked: read yes, write no");

	my $ttl = $a->try_write_lock($name, 2);
	ok(defined $ttl && $ttl > 0, "[$label] A's writer is refused with the TTL ($ttl)");
	$ttl = $b->try_write_lock($name, 2);
	ok(defined $ttl && $ttl > 0, "[$label] B's writer is refused too");

	my $w = $b->write_waiter($name, 2);
	ok(!$w->acquired && $w->subscribed, "[$label] B's writer waits, subscribed");
	is($w->attempts, 2, "[$label] ... after an attempt, the subscription, and another attempt");
	is(numsub($s, FakeRedisson::rw_channel($name)), 2, "[$label] the waiter and the observer are subscribed");

	is($a->unlock_read($name, 1), 0, "[$label] A's reader leaves: 0, B still reads");
	is_deeply(published($s, $o, $name), [], "[$label] nothing published");
	is($b->unlock_read($name, 1), 1, "[$label] the last reader leaves: 1");
	is_deeply(published($s, $o, $name), ['0'], "[$label] the last reader published 0 (UNLOCK_MESSAGE)");
	ok($w->wait($T), "[$label] the waiting writer gets the lock");
	is_deeply($w->events, [ [ message => '0' ] ], "[$label] ... woken by the message 0");
	ok(!$w->subscribed, "[$label] ... and unsubscribed");

	$st = $a->rw_state($name);
	is($st->{mode}, 'write', "[$label] mode write");
	is_deeply([ $st->{writers}, $st->{readers} ], [ { $b->owner(2) => 1 }, {} ],
		"[$label] one writer field <uuid>:<tid>:write, no readers");
	is($a->is_read_locked($name) . $a->is_write_locked($name), '01', "[$label] isLocked: read no, write yes");
	ok($a->try_read_lock($name, 1) > 0, "[$label] a writer excludes readers of another JVM");
	ok($b->try_read_lock($name, 3) > 0, "[$label] ... and of another thread of its own JVM");
	ok($a->try_write_lock($name, 1) > 0, "[$label] ... and other writers");

	my $r1 = $a->read_waiter($name, 1);
	my $r2 = $b->read_waiter($name, 3);
	ok(!$r1->acquired && !$r2->acquired, "[$label] two readers wait");
	is($b->unlock_write($name, 2), 1, "[$label] the writer leaves: 1");
	is_deeply(published($s, $o, $name), ['1'], "[$label] it published 1 (READ_UNLOCK_MESSAGE)");
	ok($r1->wait($T) && $r2->wait($T), "[$label] both waiting readers get the lock");
	is_deeply([ $r1->events, $r2->events ], [ [ [ message => '1' ] ], [ [ message => '1' ] ] ],
		"[$label] ... each woken by the message 1");
	is_deeply($a->rw_state($name)->{readers}, { $a->owner(1) => 1, $b->owner(3) => 1 },
		"[$label] both hold it together");

	is($b->renew_read($name, 3), 1, "[$label] read watchdog round: 1");
	is($a->unlock_read($name, 1), 0, "[$label] unlock: 0");
	is($b->unlock_read($name, 3), 1, "[$label] unlock: 1");
	is_deeply(published($s, $o, $name), ['0'], "[$label] 0 published");
	is($s->{rc}->cmd('EXISTS', $name), 0, "[$label] the hash is gone");
	is(scalar(@{ $s->{rc}->cmd('KEYS', '*rwlock_timeout*') }), 0, "[$label] so are the rwlock_timeout keys");
	is(scalar(@{ $s->{rc}->cmd('KEYS', 'redisson_unlock_latch*') }), 0, "[$label] and the unlock latches");
	$o->close;
}

my $redis = RedisLockTest::Redis->new;
my $s = setup($redis);
my ($A, $B, $rc) = @$s{qw(a b rc)};

share_and_exclude($s, 'plain');

# --- reentrancy -------------------------------------------------------------------
{
	my $name = 'rw:reentry';
	my $o = observer($s, $name);
	my $ao = $A->owner(1);

	# R -> R
	is($A->try_read_lock($name, 1), undef, 'R: A reads');
	is($A->try_read_lock($name, 1), undef, 'R -> R: A reads again');
	is($A->read_hold_count($name, 1), 2, 'read count 2');
	my $st = $A->rw_state($name);
	ok($st->{timeouts}{$ao}[0] > 0 && $st->{timeouts}{$ao}[1] > 0, 'one rwlock_timeout key per nested hold (:1, :2)');
	is($A->unlock_read($name, 1), 0, 'unlock 1 of 2: 0');
	is_deeply([ $rc->cmd('EXISTS', FakeRedisson::rw_timeout_key($name, $ao, 1)),
			$rc->cmd('EXISTS', FakeRedisson::rw_timeout_key($name, $ao, 2)) ], [ 1, 0 ],
		'the most recent timeout key (:2) is deleted, :1 stays');
	is($A->unlock_read($name, 1), 1, 'unlock 2 of 2: 1');
	is_deeply(published($s, $o, $name), ['0'], 'one 0, at the last unlock');

	# W -> W
	is($A->try_write_lock($name, 1), undef, 'W: A writes');
	is($A->try_write_lock($name, 1), undef, 'W -> W: A writes again');
	is($A->write_hold_count($name, 1), 2, 'write count 2');
	ok($rc->cmd('PTTL', $name) > $LONG, 'a write reentry adds the lease to the TTL');
	ok($B->try_write_lock($name, 1) > 0, 'B is refused');
	is($A->unlock_write($name, 1), 0, 'unlock 1 of 2: 0');
	ok($rc->cmd('PTTL', $name) <= $LONG, '... the TTL is set back to the lease');
	is($A->unlock_write($name, 1), 1, 'unlock 2 of 2: 1');
	is_deeply(published($s, $o, $name), ['1'], 'one 1, at the last unlock');

	# W -> R, the write lock released first (downgrade)
	is($A->try_write_lock($name, 1), undef, 'W: A writes');
	is($A->try_read_lock($name, 1), undef, 'W -> R: A also reads');
	$st = $A->rw_state($name);
	is_deeply([ @$st{qw(mode writers readers)} ], [ 'write', { $ao => 1 }, { $ao => 1 } ],
		'mode write, A is writer and reader');
	ok($st->{timeouts}{$ao}[0] > 0, "A's read has its rwlock_timeout key");
	is($A->is_read_locked($name), 1, 'readLock().isLocked(): 1 (write mode with a reader)');
	ok($B->try_read_lock($name, 1) > 0, 'B cannot read');
	ok($A->try_read_lock($name, 2) > 0, "nor A's other thread");
	is($A->unlock_write($name, 1), 1, 'A releases the write lock: 1');
	$st = $A->rw_state($name);
	is_deeply([ @$st{qw(mode writers readers)} ], [ 'read', {}, { $ao => 1 } ],
		'downgraded: mode read, A still reads');
	is_deeply(published($s, $o, $name), [], 'a downgrade publishes nothing');
	is($A->renew_write($name, 1), 0, 'the write watchdog round finds no write field: 0');
	is($A->renew_read($name, 1), 1, 'the read watchdog round renews: 1');
	is($B->try_read_lock($name, 1), undef, 'B reads now');
	is($A->unlock_read($name, 1), 0, 'A leaves: 0');
	is($B->unlock_read($name, 1), 1, 'B leaves: 1');
	is_deeply(published($s, $o, $name), ['0'], '0 published by the last reader');

	# W -> R, the read lock released first
	is($A->try_write_lock($name, 1), undef, 'W: A writes');
	is($A->try_read_lock($name, 1), undef, 'W -> R: A also reads');
	is($A->unlock_read($name, 1), 0, "A's read leaves first: 0 (mode write)");
	$st = $A->rw_state($name);
	is_deeply([ @$st{qw(mode writers readers)} ], [ 'write', { $ao => 1 }, {} ], 'still write-locked by A');
	is($A->unlock_write($name, 1), 1, 'the write leaves: 1');
	is_deeply(published($s, $o, $name), ['1'], 'only the write release published: 1');

	# R -> W: no upgrade
	is($A->try_read_lock($name, 1), undef, 'R: A reads');
	my $ttl = $A->try_write_lock($name, 1);
	ok(defined $ttl && $ttl > 0, "R -> W: A's own write attempt is refused (TTL $ttl; Java would wait forever)");
	is($A->write_hold_count($name, 1), 0, '... no write field');
	is($A->unlock_read($name, 1), 1, 'A leaves: 1');
	is_deeply(published($s, $o, $name), ['0'], '0 published');
	$o->close;
}

# --- unlock and forceUnlock corner cases ------------------------------------------
{
	my $name = 'rw:corners';
	my $o = observer($s, $name);

	is($A->try_read_lock($name, 1), undef, 'A reads');
	is($B->unlock_read($name, 1), undef, "B's unlock of a read it does not hold: nil");
	is($A->unlock_write($name, 1), undef, 'unlocking the write lock in read mode: nil');
	is($A->force_unlock_write($name), 0, 'write forceUnlock in read mode: 0');
	is($A->force_unlock_read($name), 1, 'read forceUnlock: 1');
	is($rc->cmd('EXISTS', $name), 0, '... the hash is deleted');
	is($rc->cmd('EXISTS', FakeRedisson::rw_timeout_key($name, $A->owner(1), 1)), 1,
		'... the rwlock_timeout key is left to expire');
	is_deeply(published($s, $o, $name), ['0'], '... 0 published');
	$rc->cmd('DEL', FakeRedisson::rw_timeout_key($name, $A->owner(1), 1));

	is($A->unlock_read($name, 1), undef, 'read unlock of a missing lock: nil');
	is_deeply(published($s, $o, $name), ['0'], '... and 0 published all the same');
	is($A->unlock_write($name, 1), undef, 'write unlock of a missing lock: nil');
	is_deeply(published($s, $o, $name), ['1'], '... and 1 published all the same');

	is($A->try_write_lock($name, 1), undef, 'A writes');
	is($A->try_read_lock($name, 1), undef, '... and reads');
	is($B->unlock_write($name, 1), undef, "B's unlock of a write it does not hold: nil");
	is($A->force_unlock_read($name), 0, 'read forceUnlock in write mode: 0');
	is($A->force_unlock_write($name), 1, 'write forceUnlock: 1');
	is($rc->cmd('EXISTS', $name), 0, '... the whole hash, read field included, is deleted');
	is_deeply(published($s, $o, $name), ['1'], '... 1 published');
	$rc->cmd('DEL', FakeRedisson::rw_timeout_key($name, $A->owner(1), 1));
	is(scalar(@{ $rc->cmd('KEYS', 'redisson_unlock_latch*') }), 0, 'no unlock latch is left');
	$o->close;
}

# --- a reader's lease runs out ----------------------------------------------------
{
	my $name = 'rw:lease';
	my $o = observer($s, $name);
	my ($ao, $bo) = ($A->owner(1), $B->owner(1));
	my $akey = FakeRedisson::rw_timeout_key($name, $ao, 1);

	# alone: the hash and the key share the lease; a waiting writer gets the
	# lock by its TTL, no message
	is($A->try_read_lock($name, 1, 300), undef, 'A reads with a 300 ms lease');
	my $w = $B->write_waiter($name, 1);
	ok(!$w->acquired, "B's writer waits");
	ok($w->wait($T), '... and gets the lock once the lease ran out');
	is(scalar(grep { $_->[0] eq 'message' } @{ $w->events }), 0, '... woken by its TTL, not by a message');
	is_deeply(published($s, $o, $name), [], 'an expiry publishes nothing');
	ok(RedisLockTest::wait_until($T, "A's timeout key expires", sub { !$rc->cmd('EXISTS', $akey) }),
		"A's rwlock_timeout key expired too");
	is($B->unlock_write($name, 1), 1, 'B leaves');
	is_deeply(published($s, $o, $name), ['1'], '1 published');

	# with another reader: A's field outlives its key
	is($B->try_read_lock($name, 1, 60_000), undef, 'B reads with a 60 s lease');
	is($B->try_read_lock($name, 1, $LONG), undef, '... and again with a 600 s one');
	ok($rc->cmd('PTTL', $name) > 60_000, 'the hash TTL is the longest lease');
	is($A->try_read_lock($name, 1, 300), undef, 'A reads with a 300 ms lease');
	ok(RedisLockTest::wait_until($T, "A's timeout key expires", sub { !$rc->cmd('EXISTS', $akey) }),
		"A's rwlock_timeout key expires");
	my $st = $A->rw_state($name);
	is_deeply($st->{readers}, { $ao => 1, $bo => 2 }, "A's field stays in the hash (no script ran)");
	is_deeply($st->{timeouts}{$ao}, [-2], '... with its timeout key gone');
	ok($st->{pttl} > 60_000, '... and the hash keeps its TTL');
	ok($A->try_write_lock($name, 2) > 0, 'a writer is still refused');

	is($B->unlock_read($name, 1), 0, "B's nested read leaves: 0");
	$st = $A->rw_state($name);
	ok($st->{pttl} > 0 && $st->{pttl} <= 60_000,
		"the hash TTL is cut to the longest live timeout key (B's :1, 60 s lease)");
	ok($st->{pttl} <= $st->{timeouts}{$bo}[0] + 1, '... which it does not outlive');
	is_deeply($st->{readers}, { $ao => 1, $bo => 1 }, "A's stale field is still there");
	is_deeply(published($s, $o, $name), [], 'nothing published');

	$w = $A->write_waiter($name, 2);
	ok(!$w->acquired, "A's writer waits");
	is($B->unlock_read($name, 1), 1, "B, the last live reader, leaves: 1 (A's stale field does not count)");
	is($rc->cmd('EXISTS', $name), 0, '... the hash, stale field and all, is deleted');
	is_deeply(published($s, $o, $name), ['0'], '... 0 published');
	ok($w->wait($T), 'the waiting writer gets the lock');
	is_deeply($w->events, [ [ message => '0' ] ], '... woken by the 0');
	is($A->unlock_write($name, 2), 1, 'A leaves');
	is_deeply(published($s, $o, $name), ['1'], '1 published');
	$o->close;
}

# --- the watchdog's rounds renew a JVM's own read holds -----------------------------
# Java runs a round every lease/3; here the test runs them, and each is
# checked on the expiry times in Redis (watchdog_round), not on the clock.
{
	my $name = 'rw:renew';
	my ($ao, $bo, $bo2) = ($A->owner(1), $B->owner(1), $B->owner(2));
	my @akeys = ($name, map { FakeRedisson::rw_timeout_key($name, $ao, $_) } 1, 2);
	my $bkey  = FakeRedisson::rw_timeout_key($name, $bo, 1);
	my $bkey2 = FakeRedisson::rw_timeout_key($name, $bo2, 1);
	is($A->try_read_lock($name, 1), undef, 'A reads (watchdog lease)');
	is($A->try_read_lock($name, 1), undef, '... twice');
	is($B->try_read_lock($name, 1), undef, 'B reads (watchdog lease), but its watchdog is stopped');
	is($B->try_read_lock($name, 2, 1000), undef, "B's thread 2 reads with a 1 s lease (never renewed)");

	for my $i (1 .. 3)
	{
		is(watchdog_round($s, "round $i", $LONG, sub { $A->renew_read($name, 1) },
				\@akeys, [ $bkey, $bkey2 ]),
			1, "round $i: A's read watchdog round returns 1");
	}

	until_ok("the 1 s lease of B's thread 2 runs out (its timeout key expires)",
		sub { !$rc->cmd('EXISTS', $bkey2) }, $T);
	my $st = $A->rw_state($name);
	is($st->{readers}{$ao}, 2, 'A still holds its two reads');
	ok($st->{timeouts}{$ao}[0] > 0 && $st->{timeouts}{$ao}[1] > 0, '... both timeout keys are alive');
	ok($st->{pttl} > 0 && $st->{pttl} <= $LONG, '... the hash TTL is within the lease');
	is_deeply($st->{timeouts}{$bo2}, [-2], "B's thread 2 has no timeout key left");
	is($st->{readers}{$bo2}, 1, "... its stale field stays until a script purges it");
	ok($B->try_write_lock($name, 3) > 0, 'a writer is refused');
	is_deeply($A->renew_reads([ $name, 1 ], [ 'rw:renew:none', 1 ]), [ 1, 0 ],
		'a batch round: 1 for the held lock, 0 for one not held');
	is($B->renew_read($name, 3), 0, 'a round for a thread not holding it: 0');

	is($A->try_write_lock('rw:renew:w', 1), undef, 'A writes another lock');
	is($rc->cmd('PEXPIRE', 'rw:renew:w', 10 * $LONG), 1, '(its TTL set far above the lease)');
	is($A->renew_write('rw:renew:w', 1), 1, 'the write watchdog round: 1');
	ok($rc->cmd('PTTL', 'rw:renew:w') <= $LONG, '... the TTL is the lease again');
	is($A->renew_write('rw:renew:w', 2), 0, '0 for a thread without the write lock');
	is($A->unlock_write('rw:renew:w', 1), 1, 'A leaves it');

	is($B->unlock_read($name, 1), 0, "B's thread 1 leaves: 0 (A still reads)");
	is($A->unlock_read($name, 1), 0, 'A unlocks once: 0');
	is($A->unlock_read($name, 1), 1, "A unlocks again: 1 (B's thread 2 field is stale)");
	is($rc->cmd('EXISTS', $name), 0, '... the hash, stale field and all, is deleted');
	is($A->renew_read($name, 1), 0, 'the next watchdog round: 0');
}

# --- a blocking wait in a forked child ----------------------------------------------
{
	my $name = 'rw:fork';
	is($A->try_write_lock($name, 1), undef, 'A writes');
	my $pid = fork() // die "fork: $!";
	if ($pid == 0)
	{
		# the child: B's JVM, a connection of its own; no TAP, no END blocks
		my $r = eval { $B->clone->read_lock($name, 5, undef, $T) };
		POSIX::_exit(defined $@ && $@ ne '' ? 3 : defined $r ? 2 : 0);
	}
	ok(RedisLockTest::wait_until($T, 'the child subscribes',
			sub { numsub($s, FakeRedisson::rw_channel($name)) >= 1 }),
		'the child waits, subscribed to the channel');
	is($A->unlock_write($name, 1), 1, 'A leaves: publishes 1');
	my $st;
	ok(RedisLockTest::wait_until($T, 'the child exits',
			sub { waitpid($pid, POSIX::WNOHANG()) == $pid && do { $st = $?; 1 } }),
		'the child is done');
	is($st, 0, "the child's read_lock returned undef: acquired");
	is($B->read_hold_count($name, 5), 1, "B's thread 5 holds the read lock");
	is($B->unlock_read($name, 5), 1, 'B unlocks it from the parent (same uuid)');
	is($B->read_lock($name, 6, undef, 1), undef, 'read_lock on a free lock returns at once');
	$B->unlock_read($name, 6);
	is($A->try_write_lock($name, 1), undef, 'A writes again');
	ok($B->write_lock($name, 2, undef, 0.5) > 0, 'write_lock gives up after its wait, with the TTL');
	ok(RedisLockTest::wait_until($T, 'the waiter unsubscribes',
			sub { numsub($s, FakeRedisson::rw_channel($name)) == 0 }),
		'... and unsubscribes');
	$A->unlock_write($name, 1);
}

# --- over TLS -----------------------------------------------------------------------
{
	my $tls = RedisLockTest::TLS->new;
	my $tr  = RedisLockTest::Redis->new(tls => $tls);
	share_and_exclude(setup($tr), 'tls');
	$tr->stop;
}

done_testing();
