# 500_redisson_real.pl — the real Redisson client, every version in
# @RealRedisson::VERSIONS, against SQL sessions on one lock:
#   exclusion  SQL sessions and Java threads bump one non-atomic counter under
#              the lock; the count is exact;
#   wake       a SQL waiter wakes when a Java holder unlocks and a Java waiter
#              when a SQL holder releases (plain and fair locks), every hold on
#              a 10-minute lease, so only the unlock message explains a wake
#              within $T;
#   fencing    tokens strictly increase across SQL and RFencedLock (3.19+);
#   semaphore  a Java waiter wakes on a SQL release and a SQL waiter on a
#              Java release; sem-addPermits: a SQL waiter sees Java's
#              addPermits (before 3.16.2 it publishes nothing: by the
#              waiter's re-check, S1; 3.12.5's addPermits takes permits
#              away, shown, and the cell is n/a);
#   permits, latch, multi-lock, rwlock: the same both ways for expiring
#              permits, count-down latches, Java's client-side multi-lock
#              against redis_lock_acquire_all, and read/write locks;
#   rw-nested-renew, rw-two-reads-renew: a Java watchdog (3 s) keeps renewing
#              its read hold beside a nested SQL read, which Redis counts
#              once (R3); a SQL writer stays out of two read locks one JVM
#              holds on the watchdog, also where Java 3.44-3.52 renews only
#              the first and the other's timeout key lapses (R4);
#   token-ttl  the token counter carries no TTL, as Redisson leaves it (T1);
#   nonreentrant, nonreentrant-fair: Redisson 4.4+'s getNonReentrantLock and
#              getNonReentrantFairLock on the same hash: the holder's second
#              acquire is refused (NON_REENTRANT_REACQUIRE), SQL and Java
#              exclude and wake each other both ways, and (fair) one queue of
#              SQL and Java waiters is served in order; n/a before 4.4;
#   fair-slot  the queue slot of a Java fair tryLock(wait, unit): without a
#              lease Redisson reads the wait as milliseconds whatever the
#              unit (tryLock(60, SECONDS): 60 ms), with one in its unit; read
#              from the queue's deadlines, which differ by exactly the slot.
# Known disagreements (their ids on the reference page redisson-versions.md,
# issue 23) are TODO for the versions they concern, so the suite stays green
# while they are real; the per-version table at the end says what passed.
# The drivers are built by test/redisson-java/build.sh (see its README).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use RealRedisson;
use FakeRedisson;
use Test::More;
use Time::HiRes ();

my $T      = 60;         # bound for a wake; far below the lease
my $LONG   = 600_000;    # 10-minute leases, ms
my $ROUNDS = 15;         # counter rounds per SQL session and per Java thread

# Which known disagreement makes a check fail for which versions
# (redisson-versions.md).  A check listed here is TODO for those versions.
my %KNOWN = (
);

# Checks that pass for some versions only with a setting of ours, and which.
my %SETTING = (
	'sem-addPermits' => [ sub { RealRedisson::version_cmp($_[0], '3.16.2') < 0 },
		'redislock.semaphore_recheck > 0 (default 5 s): before 3.16.2 addPermits publishes nothing, '
		  . 'so a SQL waiter sees the new permits at its next re-check, not at once (S1)' ],
);

# What each check shows, for the interop table (tools/interop-table.pl).
my %PRIMITIVE = (
	'exclusion'          => 'lock: mutual exclusion (exact counter)',
	'wake'               => 'lock: wake-ups both ways',
	'fair-wake'          => 'fair lock: wake-ups both ways',
	'semaphore'          => 'semaphore: wake-ups both ways',
	'sem-addPermits'     => 'semaphore: Java addPermits seen by a SQL waiter',
	'permits'            => 'expiring permits: wake-ups both ways',
	'latch'              => 'count-down latch: both ways',
	'multi-lock'         => 'multi-lock (RedissonMultiLock) vs redis_lock_acquire_all',
	'rwlock'             => 'read/write lock: exclusion and wake-ups both ways',
	'rw-nested-renew'    => 'read/write lock: Java watchdog beside nested SQL reads',
	'rw-two-reads-renew' => 'read/write lock: two Java read locks renewed, SQL writer kept out',
	'fencing'            => 'fenced lock: tokens increase across both sides',
	'token-ttl'          => 'fenced lock: token counter never expires',
	'nonreentrant'       => 'non-reentrant lock: exclusion and wake-ups both ways, reacquire refused',
	'nonreentrant-fair'  => 'non-reentrant fair lock: exclusion, wake-ups both ways, one queue with SQL',
	'fair-slot'          => 'fair lock: a Java tryLock(wait) waiter\'s queue slot as docs/redisson.md says',
);

# Before 4.4 there is no getNonReentrantLock: the driver answers
# UnsupportedOperationException, and the cell is n/a.
my $NO_NONREENTRANT = 'no getNonReentrantLock / getNonReentrantFairLock (Redisson 4.4+)';

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('real', $redis,
	'redislock.fair_wait_timeout' => '120s', 'max_connections' => '30');
my $rc = FakeRedisson::Conn->new(port => $redis->port);
sub numsub { $rc->cmd('PUBSUB', 'NUMSUB', $_[0])->[1] }

my $a = RedisLockTest::Session->new($node);
my $b = RedisLockTest::Session->new($node);
my $pg = RedisLockTest::Session->new($node);    # the Java threads' counter access
$pg->query(<<'SQL');
CREATE TABLE real_counter(name text PRIMARY KEY, v int NOT NULL);
CREATE PROCEDURE real_bump(lock_name text, rounds int)
LANGUAGE plpgsql AS $$
DECLARE
    cur int;
BEGIN
    FOR i IN 1 .. rounds LOOP
        PERFORM redis_xact_lock_acquire(lock_name);
        SELECT v INTO cur FROM real_counter WHERE name = lock_name;
        PERFORM pg_sleep(0.001);
        UPDATE real_counter SET v = cur + 1 WHERE name = lock_name;
        COMMIT;
    END LOOP;
END $$;
SQL

# Starts a Java waiter ($tag: $thread runs @op) and waits until it has
# subscribed to $chan: first until nobody listens there (a SQL waiter's
# subscription may still be going away), then until someone does.
sub java_waiter
{
	my ($j, $chan, $tag, $thread, @op) = @_;
	RedisLockTest::until_ok("nobody subscribed to $chan yet", sub { numsub($chan) == 0 });
	$j->start($tag, $thread, @op);
	RedisLockTest::until_ok("Java waiter subscribed to $chan", sub { numsub($chan) >= 1 });
	is($j->poll($tag), undef, "Java waiter ($op[0]) still waits");
}

my %record;    # version -> check -> pass | FAIL | FAIL (known X) | n/a

# check($java, $check, sub { ... }): a subtest; TODO if a known disagreement
# covers it for this version.
sub check
{
	my ($j, $name, $body) = @_;
	my $v = $j->version;
	my $k = $KNOWN{$name};
	my $known = $k && $k->[2]->($v) ? $k->[0] : undef;
	our $TODO;
	local $TODO = $known ? "$known (redisson-versions.md): $k->[1]" : undef;
	my $ok = subtest("Redisson $v: $name" => sub {
		eval { $body->($j, $v); 1 } or fail("no error: $@");
		# whatever happened, the sessions end idle and hold nothing
		eval {
			for my $s ($a, $b)
			{
				$s->cancel if $s->{sth_async};
				$s->query('SELECT redis_lock_release_all()');
			}
			1;
		} or fail("the SQL sessions are idle again: $@");
	});
	$record{$v}{$name} = $ok ? 'pass' : $known ? "FAIL (known $known)" : 'FAIL';
	return $ok;
}

sub counter_check
{
	my ($j, $v) = @_;
	my $name = "real:$v:counter";
	$pg->query("INSERT INTO real_counter VALUES (" . sql_literal($name) . ", 0)");
	my @sql = ($a, $b);
	$_->start('CALL real_bump(' . sql_literal($name) . ", $ROUNDS)") for @sql;
	# Java threads j1, j2: lock, read and write the counter (two statements,
	# on their behalf), unlock; each thread's next lock starts at once.
	my %left = (j1 => $ROUNDS, j2 => $ROUNDS);
	my %n;
	my $start = sub { my $t = shift; $j->start("$t." . ++$n{$t}, $t, 'lock', 'plain', $name) };
	$start->($_) for keys %left;
	my $errors = 0;
	while (grep { $_ > 0 } values %left)
	{
		my $tag = $j->next_result([ map { "$_.$n{$_}" } grep { $left{$_} > 0 } keys %left ], $T * 5);
		unless (defined $tag) { fail("Java lock within " . ($T * 5) . " s"); $errors++; last; }
		my ($t) = split /\./, $tag;
		my ($st, $val) = $j->result($tag, 0);
		if ($st ne 'ok') { fail("Java $t lock: $val"); $errors++; last; }
		my $cur = $pg->query('SELECT v FROM real_counter WHERE name = ' . sql_literal($name));
		$pg->query('UPDATE real_counter SET v = ' . ($cur + 1) . ' WHERE name = ' . sql_literal($name));
		$j->run($t, 'unlock', 'plain', $name);
		$start->($t) if --$left{$t} > 0;
	}
	for my $s (@sql)
	{
		my ($val, $err) = $s->finish($T * 5);
		is($err, undef, 'SQL session bumped its rounds');
	}
	is($pg->query('SELECT v FROM real_counter WHERE name = ' . sql_literal($name)), 4 * $ROUNDS,
		"counter exact: 2 SQL sessions and 2 Java threads x $ROUNDS rounds");
	is($rc->cmd('EXISTS', $name), 0, 'lock gone at the end');
}

# One direction each, plain (SQL fair = false) or fair.
sub wake_check
{
	my ($j, $v, $kind) = @_;
	my $fair = $kind eq 'fair' ? 'true' : 'false';
	my $name = "real:$v:wake:$kind";
	my $l = sql_literal($name);
	my $jo = $j->owner('h');

	# Java holds, SQL waits, Java unlocks
	is($j->run('h', 'lock', $kind, $name, $LONG), 'null', 'Java holds (10 min lease)');
	is($rc->cmd('HGET', $name, $jo), '1', 'the hash holds the Java owner');
	$a->start("SELECT redis_lock_acquire($l, NULL, '10 min', $fair)");
	waits_ok($a, 'SQL waiter');
	ok(!$a->is_done, 'SQL waiter still waits while Java holds');
	is($j->run('h', 'unlock', $kind, $name), 'null', 'Java unlocks');
	my ($val, $err) = $a->finish($T);
	is($val, 't', "SQL waiter woken within $T s by the Java unlock") or diag($err);
	$a->query("SELECT redis_lock_release($l)");

	# SQL holds, Java waits, SQL releases
	is($a->query("SELECT redis_lock_acquire($l, '0', '10 min', $fair)"), 't', 'SQL holds (10 min lease)');
	my $w = $j->owner("w$kind");
	my $chan = $kind eq 'fair' ? FakeRedisson::fair_channel($name, $w) : FakeRedisson::channel($name);
	java_waiter($j, $chan, "wake$kind", "w$kind", 'lock', $kind, $name, $LONG);
	if ($kind eq 'fair')
	{
		RedisLockTest::until_ok('Java waiter queued', sub { RedisLockTest::fair_queue_len($rc, $name) >= 1 });
	}
	is($a->query("SELECT redis_lock_release($l)"), 't', 'SQL releases');
	my ($st, $r) = $j->result("wake$kind", $T);
	is($st, 'ok', "Java waiter woken within $T s by the SQL release") or diag($r // 'no result');
	is($rc->cmd('HGET', $name, $w), '1', 'the hash holds the Java waiter');
	is($j->run("w$kind", 'unlock', $kind, $name), 'null', 'Java unlocks');
	is($rc->cmd('EXISTS', $name), 0, 'lock gone');
}

# Semaphore: a Java waiter wakes on a SQL release, a SQL waiter on a Java release.
sub sem_check
{
	my ($j, $v) = @_;
	my $name = "real:$v:sem";
	my $l = sql_literal($name);
	my $chan = FakeRedisson::sem_channel($name);
	is($j->run('s1', 'sem.trySetPermits', $name, 1), 'true', 'Java trySetPermits 1');
	is($a->query("SELECT redis_semaphore_acquire($l, 1, '0')"), 't', 'SQL takes the permit');
	is($j->run('s1', 'sem.tryAcquire', $name, 1, 0), 'false', 'Java tryAcquire: none left');
	java_waiter($j, $chan, 'semw', 's2', 'sem.acquire', $name, 1);
	is($a->query("SELECT redis_semaphore_release($l, 1)"), 't', 'SQL releases its permit');
	my ($st, $r) = $j->result('semw', $T);
	is($st, 'ok', "Java waiter woken within $T s by the SQL release") or diag($r // 'no result');
	is($a->query("SELECT redis_semaphore_available($l)"), 0, 'Java holds the only permit');
	$a->start("SELECT redis_semaphore_acquire($l, 1, NULL)");
	waits_ok($a, 'SQL semaphore waiter');
	is($j->run('s2', 'sem.release', $name, 1), 'null', 'Java releases');
	my ($val, $err) = $a->finish($T);
	is($val, 't', "SQL waiter woken within $T s by the Java release") or diag($err);
	is($a->query("SELECT redis_semaphore_release($l, 1)"), 't', 'SQL gives it back');
	is($j->run('s1', 'sem.availablePermits', $name), 1, 'Java sees 1 available');
}

# Semaphore: a SQL waiter wakes when Java adds permits. Before 3.16.2
# addPermits publishes nothing (S1): the waiter sees it by its re-check
# (redislock.semaphore_recheck, off on the test's node, 2 s here); from
# 3.16.2 the message wakes it, with the re-check off.
sub sem_add_check
{
	my ($j, $v) = @_;
	my $name = "real:$v:semadd";
	my $l = sql_literal($name);
	my $silent = RealRedisson::version_cmp($v, '3.16.2') < 0;
	is($j->run('s1', 'sem.trySetPermits', $name, 1), 'true', 'Java trySetPermits 1');
	is($b->query("SELECT redis_semaphore_acquire($l, 1, '0')"), 't', 'SQL B takes the permit');
	$a->query("SET redislock.semaphore_recheck = '2s'") if $silent;
	$a->start("SELECT redis_semaphore_acquire($l, 1, NULL)");
	waits_ok($a, 'SQL A waits');
	RedisLockTest::until_ok('SQL A subscribed', sub { numsub(FakeRedisson::sem_channel($name)) >= 1 });
	my $sub = FakeRedisson::Conn->new(port => $redis->port);
	$sub->subscribe(FakeRedisson::sem_channel($name));
	is($j->run('s1', 'sem.addPermits', $name, 1), 'null', 'Java addPermits 1');
	my $t0 = Time::HiRes::time();
	my ($val, $err) = $a->finish($T);
	note(sprintf('the SQL waiter ended %.1f s after addPermits', Time::HiRes::time() - $t0));
	# A message, if any, was published before the waiter woke or $T ago.
	my $m = $sub->next_message(1);
	if ($silent)
	{
		is($m, undef, 'addPermits published nothing (before 3.16.2)');
	}
	else
	{
		is($m && $m->[1], '1', 'addPermits published the new count on ' . FakeRedisson::sem_channel($name));
	}
	$sub->close;
	is($val, 't', "SQL waiter saw Java's addPermits within $T s" . ($silent ? ' (by its re-check)' : '')) or diag($err);
	$a->cancel if $a->{sth_async};
	$a->query('RESET redislock.semaphore_recheck');
	$a->query("SELECT redis_semaphore_release($l, 1)") if ($val // '') eq 't';
	is($b->query("SELECT redis_semaphore_release($l, 1)"), 't', 'SQL B gives it back');
}

# Redisson 3.12.5's RSemaphore.addPermits takes permits away: it calls
# reducePermitsAsync (its bytecode; 3.16.1 adds). There is nothing for a SQL
# waiter to see, so sem-addPermits is n/a there; this check shows why.
my $ADD_REDUCES = "Redisson's addPermits takes permits away in this version (RedissonSemaphore.addPermits calls reducePermitsAsync; 3.16.1 adds)";
sub add_reduces { RealRedisson::version_cmp($_[0], '3.16.1') < 0 }

sub sem_add_reduces_check
{
	my ($j, $v) = @_;
	my $name = "real:$v:semadd";
	my $l = sql_literal($name);
	is($j->run('s1', 'sem.trySetPermits', $name, 2), 'true', 'Java trySetPermits 2');
	is($j->run('s1', 'sem.addPermits', $name, 1), 'null', 'Java addPermits 1');
	is($a->query("SELECT redis_semaphore_available($l)"), 1, "SQL sees 1 available: Redisson ${v}'s addPermits(1) took one away");
}

# Read/write locks: readers share across both sides, writers exclude, and
# each side's last release wakes the other side's waiting writer or reader.
sub rw_check
{
	my ($j, $v) = @_;
	my $name = "real:$v:rw";
	my $l = sql_literal($name);
	my $chan = FakeRedisson::rw_channel($name);
	is($j->run('r1', 'lock', 'read', $name, $LONG), 'null', 'Java reads');
	is($a->query("SELECT redis_read_lock_acquire($l, '0', '10 min')"), 't', 'SQL reads too');
	is($b->query("SELECT redis_write_lock_acquire($l, '0', '10 min')"), 'f', 'SQL writer refused');
	is($j->run('w1', 'tryLock', 'write', $name, 0, $LONG), 'false', 'Java writer refused');
	$b->start("SELECT redis_write_lock_acquire($l, NULL, '10 min')");
	waits_ok($b, 'SQL writer');
	is($a->query("SELECT redis_read_lock_release($l)"), 't', 'SQL reader leaves');
	ok(!$b->is_done, 'SQL writer still waits for the Java reader');
	is($j->run('r1', 'unlock', 'read', $name), 'null', 'Java reader leaves');
	my ($val, $err) = $b->finish($T);
	is($val, 't', "SQL writer woken within $T s by the Java read unlock") or diag($err);

	java_waiter($j, $chan, 'rwr', 'r1', 'lock', 'read', $name, $LONG);
	is($b->query("SELECT redis_write_lock_release($l)"), 't', 'SQL writer leaves');
	my ($st, $r) = $j->result('rwr', $T);
	is($st, 'ok', "Java reader woken within $T s by the SQL write release") or diag($r // 'no result');

	is($a->query("SELECT redis_read_lock_acquire($l, '0', '10 min')"), 't', 'SQL reads');
	is($j->run('r1', 'unlock', 'read', $name), 'null', 'Java reader leaves');
	java_waiter($j, $chan, 'rww', 'w1', 'lock', 'write', $name, $LONG);
	is($a->query("SELECT redis_read_lock_release($l)"), 't', 'SQL reader leaves');
	($st, $r) = $j->result('rww', $T);
	is($st, 'ok', "Java writer woken within $T s by the SQL read release") or diag($r // 'no result');
	is($a->query("SELECT redis_read_lock_acquire($l, '0', '10 min')"), 'f', 'SQL reader refused while Java writes');
	is($j->run('w1', 'unlock', 'write', $name), 'null', 'Java writer leaves');
	is($rc->cmd('EXISTS', $name), 0, 'lock gone');
}

# Whether the watchdog keeps renewing $key: its PTTL jumps up again (by more
# than 100 ms over the lowest seen) before it runs out, within $T.
sub renewed_ok
{
	my ($j, $key, $what) = @_;
	my $low;
	my $gone = 0;
	my $ok = RedisLockTest::wait_until($T, "$what renewed", sub {
		my $p = $rc->cmd('PTTL', $key);
		if ($p < 0) { $gone = 1; return 1; }
		$low = $p if !defined $low || $p < $low;
		return $p > $low + 100;
	});
	return 1 if ok($ok && !$gone, "$what: the Java watchdog renews $key" . ($gone ? ' (it expired)' : ''));
	# what Redisson said about it (its log is the JVM's stderr)
	my @log = grep { /ERROR|WARN/ } split /\n/, slurp($j->logfile);
	diag("Redisson's log: " . scalar(@log) . " ERROR/WARN lines; the first: " . ($log[0] // '-'));
	return 0;
}

# Java read holds on the watchdog (lockWatchdogTimeout 3 s, so a renewal
# round every second) go on being renewed while a SQL session holds the
# same read lock twice (R3).
sub rw_nested_renew_check
{
	my ($j, $v) = @_;
	my $name = "real:$v:rwnest";
	my $l = sql_literal($name);
	is($a->query("SELECT redis_read_lock_acquire($l, '0', '10 min')"), 't', 'SQL reads');
	is($a->query("SELECT redis_read_lock_acquire($l, '0', '10 min')"), 't', 'SQL reads again (nested)');
	is($rc->cmd('HGET', $name, $a->query('SELECT redis_lock_owner_id()')), '1', 'Redis counts one read hold of the session');
	is($j->run('n1', 'lock', 'read', $name), 'null', 'Java reads (watchdog)');
	my $key = FakeRedisson::rw_timeout_key($name, $j->owner('n1'), 1);
	renewed_ok($j, $key, 'Java read hold');
	is($j->run('n1', 'unlock', 'read', $name), 'null', 'Java reader leaves');
	is($a->query("SELECT redis_read_lock_release($l)"), 't', 'SQL leaves one read');
	is($a->query("SELECT redis_read_lock_release($l)"), 't', 'SQL leaves the other');
}

# Two read locks held in one JVM on the watchdog. Java 3.44-3.52's batched
# renewal refreshes only the first of them (R4): the other's timeout key
# lapses while its hash lives, and Redisson's writer still waits for that
# reader; a SQL writer must not get either lock.
sub rw_two_reads_renew_check
{
	my ($j, $v) = @_;
	my @names = ("real:$v:rwtwo1", "real:$v:rwtwo2");
	is($j->run('n2', 'lock', 'read', $_), 'null', "Java reads $_ (watchdog)") for @names;
	my $o = $j->owner('n2');
	for my $n (@names)
	{
		# a renewal round passed for it: its key was renewed, or lapsed
		my $key = FakeRedisson::rw_timeout_key($n, $o, 1);
		my $low;
		my $lapsed = 0;
		RedisLockTest::until_ok("Java's watchdog renewed $n, or its timeout key lapsed", sub {
			my $p = $rc->cmd('PTTL', $key);
			if ($p < 0) { $lapsed = 1; return 1; }
			$low = $p if !defined $low || $p < $low;
			return $p > $low + 100;
		});
		note("$n: the Java reader's timeout key lapsed (R4)") if $lapsed;
		is($rc->cmd('HGET', $n, $o), '1', "the Java reader's field is in the hash of $n");
		is($b->query('SELECT redis_write_lock_acquire(' . sql_literal($n) . ", '0', '10 min')"), 'f',
			"SQL writer refused on $n while Java reads it");
	}
	$j->try_run('n2', 'unlock', 'read', $_) for @names;
}

# Count-down latch both ways.
sub latch_check
{
	my ($j, $v) = @_;
	my $name = "real:$v:latch";
	my $l = sql_literal($name);
	is($j->run('l1', 'latch.trySetCount', $name, 2), 'true', 'Java trySetCount 2');
	is($a->query("SELECT redis_latch_count($l)"), 2, 'SQL sees count 2');
	java_waiter($j, FakeRedisson::latch_channel($name), 'law', 'l2', 'latch.await', $name);
	$a->start("SELECT redis_latch_await($l, NULL)");
	waits_ok($a, 'SQL awaits');
	is($j->run('l1', 'latch.countDown', $name), 'null', 'Java counts down to 1');
	ok(!$a->is_done, 'SQL still awaits at 1');
	is($b->query("SELECT redis_latch_count_down($l)"), 0, 'SQL counts down to 0');
	my ($val, $err) = $a->finish($T);
	is($val, 't', "SQL awaiter released within $T s") or diag($err);
	my ($st, $r) = $j->result('law', $T);
	is($st, 'ok', "Java awaiter released within $T s by the SQL count-down") or diag($r // 'no result');
	is($j->run('l1', 'latch.getCount', $name), 0, 'Java sees 0');
}

# Expiring-permit semaphore both ways.
sub permit_check
{
	my ($j, $v) = @_;
	my $name = "real:$v:pes";
	my $l = sql_literal($name);
	is($j->run('p1', 'pes.trySetPermits', $name, 1), 'true', 'Java trySetPermits 1');
	my $id = $j->run('p1', 'pes.acquire', $name, $LONG);
	like($id, qr/^[0-9a-f]{32}$/, 'Java acquires a permit (10 min lease)');
	is($a->query("SELECT redis_permit_acquire($l, '0', '10 min')"), undef, 'SQL gets none');
	$a->start("SELECT redis_permit_acquire($l, NULL, '10 min')");
	waits_ok($a, 'SQL permit waiter');
	is($j->run('p1', 'pes.release', $name, $id), 'null', 'Java releases its permit');
	my ($sid, $err) = $a->finish($T);
	ok(defined $sid, "SQL waiter got the permit within $T s") or diag($err);
	is($j->run('p1', 'pes.tryAcquire', $name, 0, $LONG), 'null', 'Java gets none while SQL holds it');
	java_waiter($j, FakeRedisson::sem_channel($name), 'pw', 'p2', 'pes.acquire', $name, $LONG);
	is($a->query("SELECT redis_permit_release($l, " . sql_literal($sid // '') . ')'), 't', 'SQL releases its permit');
	my ($st, $r) = $j->result('pw', $T);
	is($st, 'ok', "Java permit waiter woken within $T s") or diag($r // 'no result');
	$j->try_run('p2', 'pes.release', $name, $r) if $st eq 'ok';
	is($j->run('p1', 'pes.availablePermits', $name), 1, 'one permit available at the end');
}

# Java's client-side multi-lock against a SQL multi-lock of the same names.
sub multi_check
{
	my ($j, $v) = @_;
	my @n = map { "real:$v:multi$_" } 1 .. 3;
	my $arr = 'ARRAY[' . join(',', map { sql_literal($_) } @n) . ']';
	is($j->run('m1', 'mlock', $LONG, @n), 'null', 'Java multi-lock of 3');
	is($a->query("SELECT redis_lock_acquire_all($arr, '0', '10 min')"), 'f', 'SQL all-of-3 refused');
	$a->start("SELECT redis_lock_acquire_all($arr, NULL, '10 min')");
	waits_ok($a, 'SQL all-of-3 waits');
	is($j->run('m1', 'munlock', @n), 'null', 'Java unlocks all');
	my ($val, $err) = $a->finish($T);
	is($val, 't', "SQL all-of-3 got them within $T s") or diag($err);
	is($j->run('m1', 'mtryLock', 0, $LONG, @n), 'false', 'Java multi tryLock refused while SQL holds');
	# RedissonMultiLock also retries on its own every few seconds: a wake
	# here is not only the message's.
	java_waiter($j, FakeRedisson::channel($n[0]), 'mw', 'm2', 'mlock', $LONG, @n);
	$a->query('SELECT redis_lock_release_all()');
	my ($st, $r) = $j->result('mw', $T);
	is($st, 'ok', "Java multi-lock woken within $T s") or diag($r // 'no result');
	is($j->run('m2', 'munlock', @n), 'null', 'Java unlocks all');
	is($rc->cmd('EXISTS', @n), 0, 'locks gone');
}

sub fencing_check
{
	my ($j, $v) = @_;
	my $name = "real:$v:fence";
	my $l = sql_literal($name);
	my @tok;
	for my $round (1 .. 2)
	{
		is($a->query("SELECT redis_lock_acquire($l, '0', '10 min')"), 't', "SQL acquires ($round)");
		push @tok, [ 'SQL', $a->query("SELECT redis_lock_fencing_token($l)") ];
		is($a->query("SELECT redis_lock_release($l)"), 't', 'SQL releases');
		my $t = $round == 1 ? $j->run('f', 'lockAndGetToken', $name, $LONG)
		  : $j->run('f', 'tryLockAndGetToken', $name, 0, $LONG);
		push @tok, [ 'Java', $t ];
		is($j->run('f', 'getToken', $name), $t, 'getToken while held');
		is($j->run('f', 'unlock', 'fenced', $name), 'null', 'Java unlocks');
	}
	for my $i (1 .. $#tok)
	{
		ok(defined $tok[$i][1] && defined $tok[$i-1][1] && $tok[$i][1] > $tok[$i-1][1],
			"token $i ($tok[$i][0]) > token " . ($i - 1) . " ($tok[$i-1][0])")
		  or diag(join(', ', map { "$_->[0] " . ($_->[1] // 'undef') } @tok));
	}
}

sub token_ttl_check
{
	my ($j, $v) = @_;
	my $name = "real:$v:fence-ttl";
	my $key = FakeRedisson::token_key($name);
	my $t = $j->run('f', 'lockAndGetToken', $name, $LONG);
	$j->run('f', 'unlock', 'fenced', $name);
	is($rc->cmd('PTTL', $key), -1, 'after a Java acquisition: no TTL');
	is($a->query('SELECT redis_lock_acquire(' . sql_literal($name) . ", '0', '10 min')"), 't', 'SQL acquires');
	is($a->query('SELECT redis_lock_release(' . sql_literal($name) . ')'), 't', 'SQL releases');
	is($rc->cmd('PTTL', $key), -1, 'after a SQL acquisition: still no TTL (else the counter can vanish and Java restarts at 1)');
}

# Redisson 4.4+'s non-reentrant locks ($kind nonreentrant or
# nonreentrantfair): the plain and fair locks' hash, queue and channels with
# a hold count of 1; the holder's second acquire is refused.
sub nonreentrant_check
{
	my ($j, $v, $kind) = @_;
	my $fair = $kind eq 'nonreentrantfair';
	my $f = $fair ? 'true' : 'false';
	my $name = "real:$v:$kind";
	my $l = sql_literal($name);
	my $jo = $j->owner('nh');
	is($j->run('nh', 'lock', $kind, $name, $LONG), 'null', "Java holds the $kind lock (10 min lease)");
	is($rc->cmd('HGET', $name, $jo), '1', 'the hash holds the Java owner once');
	my ($again, $e) = $j->try_run('nh', 'tryLock', $kind, $name, 0, $LONG);
	like($e // "returned $again", qr/non-reentrant/, "the holder's second tryLock fails: non-reentrant");
	note("the holder's second tryLock: " . ($e // "returned $again"));
	($again, $e) = $j->try_run('nh', 'lock', $kind, $name, $LONG);
	like($e // "returned $again", qr/non-reentrant/, "the holder's second lock() fails: non-reentrant");
	is($rc->cmd('HGET', $name, $jo), '1', 'still one hold in the hash');
	is($a->query("SELECT redis_lock_acquire($l, '0', '10 min', $f)"), 'f', 'SQL refused while Java holds');
	$a->start("SELECT redis_lock_acquire($l, NULL, '10 min', $f)");
	waits_ok($a, 'SQL waiter');
	is($j->run('nh', 'unlock', $kind, $name), 'null', 'Java unlocks');
	my ($val, $err) = $a->finish($T);
	is($val, 't', "SQL waiter woken within $T s by the Java unlock") or diag($err);

	is($j->run('nw', 'tryLock', $kind, $name, 0, $LONG), 'false', 'Java refused while SQL holds');
	is(RedisLockTest::fair_queue_len($rc, $name), 0, 'the refused Java attempt left no queue entry') if $fair;
	my $w = $j->owner('nw');
	my $chan = $fair ? FakeRedisson::fair_channel($name, $w) : FakeRedisson::channel($name);
	java_waiter($j, $chan, "nrw$kind", 'nw', 'lock', $kind, $name, $LONG);
	RedisLockTest::until_ok('Java waiter queued', sub { RedisLockTest::fair_queue_len($rc, $name) >= 1 }) if $fair;
	is($a->query("SELECT redis_lock_release($l)"), 't', 'SQL releases');
	my ($st, $r) = $j->result("nrw$kind", $T);
	is($st, 'ok', "Java waiter woken within $T s by the SQL release") or diag($r // 'no result');
	is($rc->cmd('HGET', $name, $w), '1', 'the hash holds the Java waiter');
	is($j->run('nw', 'unlock', $kind, $name), 'null', 'Java unlocks');
	is($rc->cmd('EXISTS', $name), 0, 'lock gone');
	return unless $fair;

	# One queue of both sides, served in order: SQL A holds, Java J1 queues,
	# SQL B behind it; A's release goes to J1 and J1's unlock to B.  Then the
	# other way round: J1 holds, SQL A queues, Java J2 behind it.
	my $bo = $b->query('SELECT redis_lock_owner_id()');
	my $ao = $a->query('SELECT redis_lock_owner_id()');
	my ($j1, $j2) = ($j->owner('nq1'), $j->owner('nq2'));
	is($a->query("SELECT redis_lock_acquire($l, '0', '10 min', true)"), 't', 'SQL A holds');
	java_waiter($j, FakeRedisson::fair_channel($name, $j1), 'nq1', 'nq1', 'lock', $kind, $name, $LONG);
	RedisLockTest::until_ok('Java J1 queued', sub { RedisLockTest::fair_queue_len($rc, $name) == 1 });
	$b->start("SELECT redis_lock_acquire($l, NULL, '10 min', true)");
	waits_ok($b, 'SQL B waits');
	RedisLockTest::until_ok('SQL B queued behind J1', sub { RedisLockTest::fair_queue_len($rc, $name) == 2 });
	is_deeply(RedisLockTest::fair_queue($rc, $name), [ $j1, $bo ], 'queue: J1, B');
	is($a->query("SELECT redis_lock_release($l)"), 't', 'SQL A releases');
	($st, $r) = $j->result('nq1', $T);
	is($st, 'ok', "J1, the head, gets the lock within $T s") or diag($r // 'no result');
	is($rc->cmd('HGET', $name, $j1), '1', 'the hash holds J1');
	ok(!$b->is_done, 'SQL B still waits');
	$a->start("SELECT redis_lock_acquire($l, NULL, '10 min', true)");
	waits_ok($a, 'SQL A waits again, behind B');
	RedisLockTest::until_ok('SQL A queued behind B', sub { RedisLockTest::fair_queue_len($rc, $name) == 2 });
	java_waiter($j, FakeRedisson::fair_channel($name, $j2), 'nq2', 'nq2', 'lock', $kind, $name, $LONG);
	RedisLockTest::until_ok('Java J2 queued behind A', sub { RedisLockTest::fair_queue_len($rc, $name) == 3 });
	is_deeply(RedisLockTest::fair_queue($rc, $name), [ $bo, $ao, $j2 ], 'queue: B, A, J2');
	is($j->run('nq1', 'unlock', $kind, $name), 'null', 'J1 unlocks');
	($val, $err) = $b->finish($T);
	is($val, 't', "SQL B, the head, woken within $T s by J1's unlock") or diag($err);
	ok(!$a->is_done, 'SQL A still waits');
	is($b->query("SELECT redis_lock_release($l)"), 't', 'SQL B releases');
	($val, $err) = $a->finish($T);
	is($val, 't', "SQL A, the head, woken within $T s by B's release") or diag($err);
	is($j->poll('nq2'), undef, 'J2 still waits');
	is($a->query("SELECT redis_lock_release($l)"), 't', 'SQL A releases');
	($st, $r) = $j->result('nq2', $T);
	is($st, 'ok', "J2 woken within $T s by A's release") or diag($r // 'no result');
	is($j->run('nq2', 'unlock', $kind, $name), 'null', 'J2 unlocks');
	is($rc->cmd('EXISTS', $name), 0, 'lock gone');
}

# The slot a Java fair tryLock(wait, unit) takes: its deadline is the last
# waiter's plus the slot, exactly, so the difference between neighbours in
# the timeout set is the slot.  Queue: SQL B, then J1 tryLock(60, SECONDS),
# then J2 tryLock(60, 600, SECONDS).  Up to 3.13.2 every slot is the fixed
# 5 s; from 3.13.3 J1's is 60 ms (Redisson passes the wait on in the
# caller's unit but reads it as milliseconds when no lease is given) and
# J2's 60 s.
sub fair_slot_check
{
	my ($j, $v) = @_;
	my $name = "real:$v:slot";
	my $l = sql_literal($name);
	my @want = RealRedisson::version_cmp($v, '3.13.3') < 0 ? (5000, 5000) : (60, 60_000);
	my $bo = $b->query('SELECT redis_lock_owner_id()');
	my ($j1, $j2) = ($j->owner('ns1'), $j->owner('ns2'));
	is($a->query("SELECT redis_lock_acquire($l, '0', '10 min', true)"), 't', 'SQL A holds');
	$b->start("SELECT redis_lock_acquire($l, NULL, '10 min', true)");
	waits_ok($b, 'SQL B waits');
	RedisLockTest::until_ok('SQL B queued', sub { RedisLockTest::fair_queue_len($rc, $name) == 1 });
	$j->start('ns1', 'ns1', 'tryLockIn', 'fair', $name, 60, 'SECONDS');
	RedisLockTest::until_ok('J1 queued', sub { RedisLockTest::fair_queue_len($rc, $name) == 2 });
	$j->start('ns2', 'ns2', 'tryLockIn', 'fair', $name, 60, 'SECONDS', 600);
	RedisLockTest::until_ok('J2 queued', sub { RedisLockTest::fair_queue_len($rc, $name) == 3 });
	# one read of all three (B's refreshes move those behind it by as much)
	my $d = $rc->cmd('EVAL', "local r = {} for i, o in ipairs(ARGV) do r[i] = redis.call('zscore', KEYS[1], o) end return r",
		1, FakeRedisson::timeout_key($name), $bo, $j1, $j2);
	is($d->[1] - $d->[0], $want[0], "J1's slot, tryLock(60, SECONDS): $want[0] ms");
	is($d->[2] - $d->[1], $want[1], "J2's slot, tryLock(60, 600, SECONDS): $want[1] ms");
	is($a->query("SELECT redis_lock_release($l)"), 't', 'SQL A releases');
	my ($val, $err) = $b->finish($T);
	is($val, 't', 'SQL B gets it') or diag($err);
	is($b->query("SELECT redis_lock_release($l)"), 't', 'SQL B releases');
	my ($st, $r) = $j->result('ns1', $T);
	is("$st $r", 'ok true', 'J1 gets it');
	is($j->run('ns1', 'unlock', 'fair', $name), 'null', 'J1 unlocks');
	($st, $r) = $j->result('ns2', $T);
	is("$st $r", 'ok true', 'J2 gets it');
	is($j->run('ns2', 'unlock', 'fair', $name), 'null', 'J2 unlocks');
}

for my $v (RealRedisson::usable_versions(sub { $record{$_[0]}{driver} = 'FAIL' }))
{
	# lockWatchdogTimeout 3 s (a renewal round a second) for the renewal
	# checks; the exclusion check's Java holds run on it too, the others
	# have 10-minute leases.
	my $j = eval { RealRedisson->new(version => $v, port => $redis->port, options => ['watchdog=3000']) };
	if (!$j)
	{
		fail("Redisson $v: the client starts and connects");
		diag($@);
		$record{$v}{driver} = 'FAIL';
		next;
	}
	note("Redisson $v: client id " . $j->id . ", log " . $j->logfile);
	check($j, 'exclusion', \&counter_check);
	check($j, 'wake', sub { wake_check(@_, 'plain') });
	check($j, 'fair-wake', sub { wake_check(@_, 'fair') });
	check($j, 'semaphore', \&sem_check);
	if (add_reduces($v))
	{
		check($j, 'sem-addPermits', \&sem_add_reduces_check);
		$record{$v}{'sem-addPermits'} = "n/a ($ADD_REDUCES)" if $record{$v}{'sem-addPermits'} eq 'pass';
	}
	else
	{
		check($j, 'sem-addPermits', \&sem_add_check);
	}
	check($j, 'permits', \&permit_check);
	check($j, 'latch', \&latch_check);
	check($j, 'multi-lock', \&multi_check);
	check($j, 'rwlock', \&rw_check);
	check($j, 'rw-nested-renew', \&rw_nested_renew_check);
	check($j, 'rw-two-reads-renew', \&rw_two_reads_renew_check);
	if (RealRedisson::has_fenced($v))
	{
		check($j, 'fencing', \&fencing_check);
		check($j, 'token-ttl', \&token_ttl_check);
	}
	else
	{
		$record{$v}{$_} = 'n/a (no RFencedLock)' for qw(fencing token-ttl);
	}
	check($j, 'fair-slot', \&fair_slot_check);
	my (undef, $no_nr) = $j->try_run('nh', 'isLocked', 'nonreentrant', "real:$v:probe");
	if (defined $no_nr && $no_nr =~ /UnsupportedOperationException/)
	{
		note("Redisson $v: $no_nr");
		$record{$v}{$_} = "n/a ($NO_NONREENTRANT)" for qw(nonreentrant nonreentrant-fair);
	}
	else
	{
		check($j, 'nonreentrant', sub { nonreentrant_check(@_, 'nonreentrant') });
		check($j, 'nonreentrant-fair', sub { nonreentrant_check(@_, 'nonreentrantfair') });
	}
	$j->quit;
}

# The per-version record, also in the log directory for the docs' table.
my @checks = qw(exclusion wake fair-wake semaphore sem-addPermits permits latch multi-lock rwlock
  rw-nested-renew rw-two-reads-renew fencing token-ttl fair-slot nonreentrant nonreentrant-fair);
my $table = join("\t", 'version', @checks) . "\n";
for my $v (RealRedisson::versions())
{
	$table .= join("\t", $v, map { $record{$v}{$_} // $record{$v}{driver} // '-' } @checks) . "\n";
}
diag("real Redisson, per version:\n$table");
if (open my $fh, '>', "$PostgreSQL::Test::Utils::log_path/500_redisson_real.tsv")
{
	print $fh $table;
	close $fh;
}
my @rows;
for my $c (@checks)
{
	for my $v (RealRedisson::versions())
	{
		my $r = $record{$v}{$c} // $record{$v}{driver} // 'not run';
		my $k = $KNOWN{$c};
		my $set = $SETTING{$c};
		push @rows, [ $PRIMITIVE{$c}, $v,
			$r eq 'pass' && $set && $set->[0]->($v) ? ('setting', $set->[1])
			: $r eq 'pass' ? ('works', '')
			: $r =~ /^n\/a \((.*)\)$/ ? ('n/a', $1)
			: $r =~ /^FAIL \(known (\w+)\)$/ ? ('fails', "$1: $k->[1]")
			: ('fails', "failed in this run ($r), not a known disagreement: see the test's log") ];
	}
}
RealRedisson::write_interop('500_redisson_real', @rows);

$_->close for ($a, $b, $pg);
no_crash_ok($node, 'real Redisson');
done_testing();
