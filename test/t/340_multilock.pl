# 340_multilock.pl — redis_lock_acquire_all(): every named lock or none.
#
#  1. No partial set is ever visible: sessions take 5 names with one call and
#     give them back one by one, while this script polls all 5 hashes in one
#     EVAL thousands of times.  Per owner id it must see all 5 or none; the
#     one-by-one release legitimately shows the tail of the sorted names
#     ("01111" ... "00001"), which a one-by-one acquisition in sorted order
#     would never show (it shows "10000", "11000" ...), so the two are told
#     apart.  The classifier is first shown to flag such states.
#  2. ABBA: two sessions loop acquire_all(A, B) / acquire_all(B, A) with
#     wait NULL, then the same against a plain session taking B then A one by
#     one, and against a third lock C held by a plain session: all finish
#     (bounded), none ever waits while holding a part.
#  3. A waiting acquire_all holds nothing while it waits, is subscribed to
#     every name's channel, and cancel, a wait that runs out and lock_timeout
#     leave nothing held (a hold the session had before stays as it was).
#  4. A waiter is woken at once by the release of any name (holders on a
#     10 min lease: only the unlock message can explain it).
#  5. Redis Cluster: names on different masters are taken one by one in
#     sorted order and given back on timeout, cancel, ROLLBACK and session
#     end; ABBA across slots finishes; names sharing a hash tag are taken at
#     once, holding nothing while waiting.  In watchdog mode the names taken
#     while the call waits for the rest must stay this session's: another
#     session must not get one, and a call that returns t must find every
#     name its own in Redis.  (On 8eec616 this fails: take_in_order()
#     records, and so the watchdog renews, nothing until all are taken, so
#     the early names expire after redislock.watchdog_timeout.)  With a
#     fixed lease an early name can run out and be taken by another session:
#     the call then does not return t; it gives back and starts over.
# No sleeps: every wait is on observable state, with a bound; the one wait
# that must run out (C's three leases) is a bounded acquire, not a sleep.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use Test::More;
use Time::HiRes qw(time);

my $T = 60;

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('multilock', $redis, 'max_connections' => '40');
my $rc    = FakeRedisson::Conn->new(port => $redis->port);

my $setup = RedisLockTest::Session->new($node);
$setup->query(<<'SQL');
CREATE TABLE ml_ctl(stop boolean NOT NULL);
INSERT INTO ml_ctl VALUES (false);
CREATE TABLE ml_result(run text, who text, rounds int);
CREATE TABLE ml_violation(run text, who text, inside bigint);
CREATE SEQUENCE ml_enter;
CREATE SEQUENCE ml_leave;

-- Up to max_rounds rounds (fewer once ml_ctl.stop is set, with check_stop):
-- take every name with one acquire_all (wait NULL), count ourselves inside
-- (ml_enter / ml_leave: e - l >= 2 means two holders of the set at once),
-- give the names back one by one in release_order.
CREATE PROCEDURE ml_cycle(run text, who text, names text[], release_order text[],
                          max_rounds int, check_stop boolean)
LANGUAGE plpgsql AS $$
DECLARE
    n text;
    e bigint;
    l bigint;
    done int := 0;
BEGIN
    FOR i IN 1 .. max_rounds LOOP
        EXIT WHEN check_stop AND (SELECT stop FROM ml_ctl);
        IF NOT redis_lock_acquire_all(names) THEN
            RAISE EXCEPTION 'acquire_all(%) returned false', names;
        END IF;
        e := nextval('ml_enter');
        SELECT last_value INTO l FROM ml_leave;
        IF e - l >= 2 THEN
            INSERT INTO ml_violation VALUES (run, who, e - l);
        END IF;
        PERFORM nextval('ml_leave');
        FOREACH n IN ARRAY release_order LOOP
            IF NOT redis_lock_release(n) THEN
                RAISE EXCEPTION 'lock % not held at release', n;
            END IF;
        END LOOP;
        done := done + 1;
    END LOOP;
    INSERT INTO ml_result VALUES (run, who, done);
END $$;

-- The plain way: two redis_lock_acquire calls, first then second, each with
-- wait NULL, released in the opposite order.
CREATE PROCEDURE ml_plain(run text, who text, first text, second text, rounds int)
LANGUAGE plpgsql AS $$
DECLARE
    e bigint;
    l bigint;
BEGIN
    FOR i IN 1 .. rounds LOOP
        IF NOT redis_lock_acquire(first) THEN
            RAISE EXCEPTION 'plain acquire of % returned false', first;
        END IF;
        IF NOT redis_lock_acquire(second) THEN
            RAISE EXCEPTION 'plain acquire of % returned false', second;
        END IF;
        e := nextval('ml_enter');
        SELECT last_value INTO l FROM ml_leave;
        IF e - l >= 2 THEN
            INSERT INTO ml_violation VALUES (run, who, e - l);
        END IF;
        PERFORM nextval('ml_leave');
        IF NOT redis_lock_release(second) THEN
            RAISE EXCEPTION 'plain lock % not held at release', second;
        END IF;
        IF NOT redis_lock_release(first) THEN
            RAISE EXCEPTION 'plain lock % not held at release', first;
        END IF;
    END LOOP;
    INSERT INTO ml_result VALUES (run, who, rounds);
END $$;
SQL

sub new_session { RedisLockTest::Session->new($node) }
sub arr { 'ARRAY[' . join(', ', map { sql_literal($_) } @_) . ']' }

sub reset_counters
{
	$setup->query("UPDATE ml_ctl SET stop = false; SELECT setval('ml_enter', 1), setval('ml_leave', 1)");
}

# The owners holding $name in Redis (its hash fields).
sub holders { my %h = @{ $rc->cmd('HGETALL', $_[0]) }; return [ sort keys %h ]; }
# Names among @names whose hash has a field $owner.
sub held_by
{
	my ($owner, @names) = @_;
	return [ grep { $rc->cmd('HEXISTS', $_, $owner) } @names ];
}
sub numsub { $rc->cmd('PUBSUB', 'NUMSUB', $_[0])->[1] }
sub local_holds
{
	my ($s) = @_;
	return $setup->query('SELECT count(*) FROM redis_locks WHERE pid = ' . $s->pid);
}

# Finishes every session (bounded); returns the errors, "who: [state] msg".
# A session still running at the bound is cancelled and counted as an error.
sub finish_all
{
	my ($bound, %s) = @_;
	my @errors;
	my $deadline = time() + $bound;
	for my $who (sort keys %s)
	{
		my $left = $deadline - time();
		my ($v, $err, $st) = $s{$who}->finish($left > 1 ? $left : 1);
		if (defined $st && $st eq 'TIMEOUT')
		{
			$s{$who}->cancel(30);
			$err = "did not return within ${bound}s (cancelled)";
		}
		push @errors, "$who: [$st] $err" if defined $err;
	}
	return @errors;
}

# =============================================================================
# 1. no partial set is ever visible
# =============================================================================
my @ML = map { "ml:$_" } 1 .. 5;    # sorted order
my $SNAP = <<'LUA';
local out = {}
for i = 1, #KEYS do out[i] = redis.call('hgetall', KEYS[i]) end
return out
LUA

# One atomic look at all 5 hashes, classified per owner: 'full' (all 5),
# 'release' (a tail of the sorted names: what the one-by-one release
# shows), anything else is a partial set ('bad').  A hash with two fields is
# 'double' (two owners of one lock).
sub look
{
	my $snap = $rc->cmd('EVAL', $SNAP, scalar(@ML), @ML);
	my (%has, %c);
	for my $i (0 .. $#ML)
	{
		my %h = @{ $snap->[$i] };
		push @{ $c{double} }, "$ML[$i]: " . join(',', sort keys %h) if keys %h > 1;
		$has{$_}[$i] = 1 for keys %h;
	}
	for my $o (sort keys %has)
	{
		my $bits = join('', map { $has{$o}[$_] ? 1 : 0 } 0 .. $#ML);
		if ($bits eq '1' x @ML)       { $c{full}++; }
		elsif ($bits =~ /^0+1+$/)     { $c{release}++; }
		else                          { push @{ $c{bad} }, "$o:$bits"; }
	}
	return \%c;
}

{
	# The classifier, on states made by hand.
	my $x = new_session();
	my $x_id = $x->query('SELECT redis_lock_owner_id()');
	is($x->query('SELECT redis_lock_acquire_all(' . arr(reverse @ML) . ')'), 't',
		'X takes all 5 with one call');
	my $c = look();
	ok($c->{full} && !$c->{bad} && !$c->{release}, 'the watcher sees them as a full set');
	is($x->query("SELECT count(*) FROM redis_locks WHERE name LIKE 'ml:%' AND hold_count = 1 AND kind = 'lock'"),
		5, 'redis_locks: five ordinary holds');
	is($x->query("SELECT redis_lock_release('ml:1')"), 't', 'X gives back ml:1');
	$c = look();
	ok($c->{release} && !$c->{bad}, "... the watcher sees a release tail (ml:2..5)");
	is($x->query('SELECT redis_lock_release_all()'), 4, 'X gives back the rest');
	is($x->query("SELECT redis_lock_acquire('ml:1') AND redis_lock_acquire('ml:2')"), 't',
		'X takes ml:1, ml:2 one by one, as an in-order acquisition would');
	$c = look();
	is_deeply($c->{bad}, ["$x_id:11000"], '... the watcher flags that partial set');
	is($x->query('SELECT redis_lock_release_all()'), 2, 'X gives them back');
	$x->close;
}

{
	reset_counters();
	my @order = ([ reverse @ML ], [ @ML[2, 0, 4, 1, 3] ], [ @ML[1, 3, 0, 4, 2] ]);
	my %s;
	for my $i (0 .. $#order)
	{
		$s{"s$i"} = new_session();
		$s{"s$i"}->start("CALL ml_cycle('watch', 's$i', " . arr(@{ $order[$i] }) . ', '
			  . arr(@ML) . ', 100000, true)');
	}
	my %tot = (polls => 0, full => 0, release => 0);
	my (@bad, @double);
	my $stopped = 0;
	my $deadline = time() + 40;
	while (1)
	{
		my $c = look();
		$tot{polls}++;
		$tot{full} += $c->{full} // 0;
		$tot{release} += $c->{release} // 0;
		push @bad, @{ $c->{bad} } if $c->{bad};
		push @double, @{ $c->{double} } if $c->{double};
		if (!$stopped && (($tot{polls} >= 5000 && $tot{full} >= 200) || time() > $deadline))
		{
			$setup->query('UPDATE ml_ctl SET stop = true');
			$stopped = time();
		}
		last if $stopped && (!grep { !$_->is_done } values %s);
		last if $stopped && time() > $stopped + $T;
	}
	my @errors = finish_all(30, %s);
	is(scalar(@errors), 0, 'watched run: no errors') or diag(join("\n", @errors));
	my $rounds = $setup->query("SELECT sum(rounds) FROM ml_result WHERE run = 'watch'");
	diag("watched run: $rounds sets taken; $tot{polls} looks, $tot{full} full sets, "
		  . "$tot{release} release tails seen");
	cmp_ok($tot{full}, '>=', 200, 'the watcher saw the full set held at least 200 times');
	is(scalar(@bad), 0, "no look ever showed a partial set ($tot{polls} looks)")
	  or diag('partial sets: ' . join(' ', @bad[0 .. ($#bad < 20 ? $#bad : 19)]));
	is(scalar(@double), 0, 'no lock ever had two owners')
	  or diag(join(' ', @double[0 .. ($#double < 20 ? $#double : 19)]));
	is($setup->query("SELECT count(*) FROM ml_violation WHERE run = 'watch'"), 0,
		'no two sessions were ever inside together');
	is($setup->query("SELECT count(*) FROM ml_result WHERE run = 'watch' AND rounds > 0"), 3,
		'each session took the set at least once');
	is($rc->cmd('EXISTS', @ML), 0, 'nothing left in Redis');
	is($setup->query('SELECT count(*) FROM redis_locks'), 0, 'redis_locks is empty');
	$_->close for values %s;
}

# =============================================================================
# 2. ABBA never deadlocks
# =============================================================================
my $N = 150;
sub abba_check
{
	my ($run, $expect, @errors) = @_;
	is(scalar(@errors), 0, "$run: every session finished, no errors") or diag(join("\n", @errors));
	is_deeply({ map { $_->[0] => $_->[1] } $setup->rows("SELECT who, rounds FROM ml_result WHERE run = '$run'") },
		$expect, "$run: every session did all its rounds");
	is($setup->query("SELECT count(*) FROM ml_violation WHERE run = '$run'"), 0,
		"$run: never two holders of the set at once");
	is($rc->cmd('EXISTS', 'ab:A', 'ab:B', 'ab:C'), 0, "$run: nothing left in Redis");
	is($setup->query('SELECT count(*) FROM redis_locks'), 0, "$run: redis_locks is empty");
}

{
	reset_counters();
	my %s = (x => new_session(), y => new_session());
	$s{x}->start("CALL ml_cycle('abba', 'x', ARRAY['ab:A', 'ab:B'], ARRAY['ab:A', 'ab:B'], $N, false)");
	$s{y}->start("CALL ml_cycle('abba', 'y', ARRAY['ab:B', 'ab:A'], ARRAY['ab:B', 'ab:A'], $N, false)");
	abba_check('abba', { x => $N, y => $N }, finish_all($T, %s));
	$_->close for values %s;
}

{
	# against a plain session that takes B, then A, one call each
	reset_counters();
	my %s = (x => new_session(), y => new_session(), p => new_session());
	$s{x}->start("CALL ml_cycle('abba+plain', 'x', ARRAY['ab:A', 'ab:B'], ARRAY['ab:A', 'ab:B'], $N, false)");
	$s{y}->start("CALL ml_cycle('abba+plain', 'y', ARRAY['ab:B', 'ab:A'], ARRAY['ab:B', 'ab:A'], $N, false)");
	$s{p}->start("CALL ml_plain('abba+plain', 'p', 'ab:B', 'ab:A', $N)");
	abba_check('abba+plain', { x => $N, y => $N, p => $N }, finish_all($T, %s));
	$_->close for values %s;
}

{
	# a third lock C held by a plain session, which meanwhile takes A too
	reset_counters();
	my $z = new_session();
	is($z->query("SELECT redis_lock_acquire('ab:C', '0', '10 min')"), 't', 'Z holds ab:C (plain, 10 min)');
	my %s = (x => new_session(), y => new_session());
	$s{x}->start("CALL ml_cycle('abc', 'x', ARRAY['ab:A', 'ab:B', 'ab:C'], ARRAY['ab:A', 'ab:B', 'ab:C'], $N, false)");
	$s{y}->start("CALL ml_cycle('abc', 'y', ARRAY['ab:C', 'ab:B', 'ab:A'], ARRAY['ab:C', 'ab:B', 'ab:A'], $N, false)");
	waits_ok($s{x}, 'X waits for {A, B, C}');
	waits_ok($s{y}, 'Y waits for {C, B, A}');
	is($rc->cmd('EXISTS', 'ab:A', 'ab:B'), 0, 'while they wait, neither holds A or B');
	is($z->query("SELECT redis_lock_acquire('ab:A', '0', '10 min')"), 't',
		'so Z, holding C, can take A at once');
	is($z->query("SELECT redis_lock_release('ab:C')"), 't', 'Z gives back C (still holding A)');
	waits_ok($s{x}, 'X still waits (A is held)');
	waits_ok($s{y}, 'Y still waits');
	is_deeply(holders('ab:A'), [ $z->query('SELECT redis_lock_owner_id()') ], 'A has Z alone');
	is($rc->cmd('EXISTS', 'ab:B', 'ab:C'), 0, 'B and C are free: the waiters took no part of the set');
	is($z->query("SELECT redis_lock_release('ab:A')"), 't', 'Z gives back A');
	abba_check('abc', { x => $N, y => $N }, finish_all($T, %s));
	$_->close for values %s, $z;
}

# =============================================================================
# 3. a waiter holds nothing; cancel, a wait that runs out, lock_timeout
# =============================================================================
my @CX = ('cx:1', 'cx:2', 'cx:3');
my $holder = new_session();
my $w = new_session();
my $w_id = $w->query('SELECT redis_lock_owner_id()');
is($holder->query("SELECT redis_lock_acquire('cx:3', '0', '10 min')"), 't', 'H holds cx:3 (10 min)');

sub nothing_held_ok
{
	my ($what) = @_;
	is_deeply(held_by($w_id, @CX), [], "$what: W's owner id is in no hash");
	is($rc->cmd('EXISTS', 'cx:1', 'cx:2'), 0, "$what: cx:1 and cx:2 do not exist");
	is(local_holds($w), 0, "$what: redis_locks has nothing of W");
	is_deeply(holders('cx:3'), [ $holder->query('SELECT redis_lock_owner_id()') ], "$what: cx:3 is still H's");
}

{
	$w->start('SELECT redis_lock_acquire_all(' . arr(@CX) . ')');
	waits_ok($w, 'W waits in acquire_all (wait NULL)');
	until_ok('W is subscribed to the channel of every name',
		sub { !grep { numsub(FakeRedisson::channel($_)) != 1 } @CX });
	nothing_held_ok('while W waits');
	my ($v, $err, $st) = $w->cancel($T);
	is($st, '57014', 'cancel ends the wait with 57014') or diag("v=" . ($v // 'NULL') . " err=" . ($err // ''));
	nothing_held_ok('after the cancel');
	until_ok('W unsubscribed from every channel',
		sub { !grep { numsub(FakeRedisson::channel($_)) != 0 } @CX });
	is($w->query('SELECT 1'), '1', 'W is usable after the cancel');
}

{
	is($w->query('SELECT redis_lock_acquire_all(' . arr(@CX) . ", '300ms')"), 'f',
		"wait '300ms' returns f while cx:3 stays held");
	nothing_held_ok("after the wait of 300ms");
	is($w->query("SELECT bool_or(locked) FROM unnest(ARRAY['cx:1', 'cx:2']) n, redis_lock_status(n)"), 'f',
		'... redis_lock_status: cx:1 and cx:2 are not locked');
	is($w->query('SELECT redis_lock_acquire_all(' . arr(@CX) . ", '0')"), 'f', "wait '0' returns f");
	nothing_held_ok("after wait '0'");

	$w->query("SET lock_timeout = '300ms'");
	my ($v, $err, $st) = $w->try('SELECT redis_lock_acquire_all(' . arr(@CX) . ')');
	is($st, '55P03', 'lock_timeout ends a NULL wait with 55P03') or diag("v=" . ($v // 'NULL') . " err=" . ($err // ''));
	$w->query('RESET lock_timeout');
	nothing_held_ok('after lock_timeout');
}

{
	# a hold W had before the call stays, with its count, through a failed call
	is($w->query("SELECT redis_lock_acquire('cx:1', '0', '10 min')"), 't', 'W holds cx:1 on its own');
	is($w->query('SELECT redis_lock_acquire_all(' . arr(@CX) . ", '300ms')"), 'f',
		'acquire_all including cx:1 times out');
	is($rc->cmd('HGET', 'cx:1', $w_id), '1', 'cx:1 still has W, count 1 in Redis');
	is($w->query("SELECT hold_count FROM redis_locks WHERE name = 'cx:1'"), 1, '... and 1 in redis_locks');
	is($rc->cmd('EXISTS', 'cx:2'), 0, 'cx:2 was not kept');
	$w->start('SELECT redis_lock_acquire_all(' . arr(@CX) . ')');
	waits_ok($w, 'W waits for the set again');
	is($rc->cmd('HGET', 'cx:1', $w_id), '1', 'while waiting, cx:1 is at count 1 (no extra hold)');
	my ($v, $err, $st) = $w->cancel($T);
	is($st, '57014', 'cancelled');
	is($rc->cmd('HGET', 'cx:1', $w_id), '1', 'after the cancel cx:1 is still W\'s, count 1');
	is($w->query("SELECT hold_count FROM redis_locks WHERE name = 'cx:1'"), 1, '... 1 in redis_locks');
	is($w->query("SELECT redis_lock_release('cx:1')"), 't', 'W releases cx:1');
	is($rc->cmd('EXISTS', 'cx:1'), 0, 'and it is gone: one release was enough');
}

{
	# transaction scope: a cancelled waiter in a transaction, then a real take
	$w->query('BEGIN');
	$w->start('SELECT redis_xact_lock_acquire_all(' . arr(@CX) . ')');
	waits_ok($w, 'W waits in redis_xact_lock_acquire_all');
	nothing_held_ok('while the xact waiter waits');
	my ($v, $err, $st) = $w->cancel($T);
	is($st, '57014', 'xact waiter cancelled');
	$w->query('ROLLBACK');
	nothing_held_ok('after the cancelled xact wait');

	$w->query('BEGIN');
	is($w->query("SELECT redis_xact_lock_acquire_all(ARRAY['cx:1', 'cx:2'], '0')"), 't',
		'in a transaction W takes cx:1, cx:2');
	is($w->query("SELECT count(*) FROM redis_locks WHERE scope = 'transaction'"), 2, 'two transaction holds');
	is_deeply(held_by($w_id, @CX), [ 'cx:1', 'cx:2' ], 'both in Redis');
	$w->query('COMMIT');
	is($rc->cmd('EXISTS', 'cx:1', 'cx:2'), 0, 'COMMIT gave both back');
	is(local_holds($w), 0, 'redis_locks empty for W');
}

# =============================================================================
# 4. a waiter is woken at once by the release of any of its names
# =============================================================================
{
	my @WK = ('wk:a', 'wk:b', 'wk:c');
	my $h2 = new_session();
	is($holder->query("SELECT redis_lock_acquire('wk:c', '0', '10 min')"), 't', 'H holds wk:c (10 min)');
	cmp_ok($rc->cmd('PTTL', 'wk:c'), '>', 60_000, 'its lease is the fixed 10 min');
	$w->start('SELECT redis_lock_acquire_all(' . arr(@WK) . ')');
	waits_ok($w, 'W waits for {wk:a, wk:b, wk:c}');
	is($holder->query("SELECT redis_lock_release('wk:c')"), 't', 'H releases wk:c (the last name)');
	my ($v, $err, $st) = $w->finish($T);
	is($v, 't', 'W is woken and takes all three') or diag("err=" . ($err // '') . " st=" . ($st // ''));
	is_deeply(held_by($w_id, @WK), [@WK], 'all three hold W in Redis');
	until_ok('W unsubscribed from every channel after taking the set',
		sub { !grep { numsub(FakeRedisson::channel($_)) != 0 } @WK });
	is($w->query('SELECT redis_lock_release_all()'), 3, 'W gives them back');

	# two holders: the first release is not enough, the second is
	is($holder->query("SELECT redis_lock_acquire('wk:c', '0', '10 min')"), 't', 'H holds wk:c again');
	is($h2->query("SELECT redis_lock_acquire('wk:a', '0', '10 min')"), 't', 'H2 holds wk:a (10 min)');
	$w->start('SELECT redis_lock_acquire_all(' . arr(@WK) . ')');
	waits_ok($w, 'W waits');
	is($holder->query("SELECT redis_lock_release('wk:c')"), 't', 'H releases wk:c');
	waits_ok($w, 'W still waits (wk:a is held)');
	is_deeply(held_by($w_id, @WK), [], 'W holds none of the three');
	is($holder->query("SELECT redis_lock_acquire('wk:c', '0', '10 min')"), 't',
		'H can take wk:c back: W took no part of the set');
	is($holder->query("SELECT redis_lock_release('wk:c')"), 't', 'H gives wk:c back');
	is($h2->query("SELECT redis_lock_release('wk:a')"), 't', 'H2 releases wk:a (the first name)');
	($v, $err, $st) = $w->finish($T);
	is($v, 't', 'W is woken and takes all three') or diag("err=" . ($err // '') . " st=" . ($st // ''));
	is_deeply(held_by($w_id, @WK), [@WK], 'all three hold W');
	is($w->query('SELECT redis_lock_release_all()'), 3, 'W gives them back');
	$h2->close;
}
# =============================================================================
# 4b. a name that is not a lock, and redislock.sync_replicas
# =============================================================================
{
	$rc->cmd('SET', 'ty:b', 'not a lock');
	is($w->query("SELECT redis_lock_acquire('ty:other', '0')"), 't', 'W holds ty:other');
	my (undef, $err, $st) = $w->try("SELECT redis_lock_acquire_all(ARRAY['ty:a', 'ty:b'], '0')");
	ok(defined $st, 'acquire_all over a string key fails') or diag('it returned');
	like($err // '', qr/\{ty:a,ty:b\}/, '... naming the set it was asked for');
	is($rc->cmd('EXISTS', 'ty:a'), 0, '... and takes nothing');
	is($w->query("SELECT redis_lock_release('ty:other')"), 't',
		'the session is not stuck: it releases its other lock');
	is($w->query("SELECT redis_lock_acquire('ty:c', '0') AND redis_lock_release('ty:c')"), 't',
		'... and takes and releases another one');
	is($rc->cmd('GET', 'ty:b'), 'not a lock', 'the string key is untouched');
	is($w->query("SELECT count(*) FROM redis_locks WHERE name LIKE 'ty:%'"), 0, 'redis_locks shows nothing of it');

	# no replica can confirm: the whole set is given back, as for one lock
	$w->query('SET redislock.sync_replicas = 1');
	(undef, $err, $st) = $w->try("SELECT redis_lock_acquire_all(ARRAY['sr:a', 'sr:b'], '0')");
	is($st, '55000', 'sync_replicas = 1 without replicas: acquire_all fails with 55000') or diag($err // 'no error');
	is($rc->cmd('EXISTS', 'sr:a') + $rc->cmd('EXISTS', 'sr:b'), 0, '... and the set was given back');
	$w->query('RESET redislock.sync_replicas');
	is($w->query("SELECT count(*) FROM redis_locks WHERE name LIKE 'sr:%'"), 0, '... nothing in redis_locks');
}
is($holder->query("SELECT redis_lock_release('cx:3')"), 't', 'H releases cx:3');
is($rc->cmd('EXISTS', 'cx:3'), 0, 'nothing left');
$holder->close;
$w->close;
$setup->close;
no_crash_ok($node, 'multilock, one server');

# =============================================================================
# 5. Redis Cluster
# =============================================================================
my $cl = RedisLockTest::Cluster->new(masters => 3);
my $cnode = RedisLockTest::node('multilock_cluster', undef,
	'redislock.cluster_nodes' => $cl->seeds,
	'redislock.command_timeout' => '20s',
	'max_connections' => '30');

# One name per master, sorted.
my %by_master;
for my $i (1 .. 1000)
{
	my $m = $cl->node_for_key("mc:$i");
	$by_master{ $m->port } //= "mc:$i";
	last if keys %by_master == 3;
}
my @MC = sort values %by_master;
my %node_of = map { $_ => $cl->node_for_key($_) } @MC;
is(scalar(keys %by_master), 3, 'three names on three masters: ' . join(', ', @MC));
sub c_hget { my ($k, $f) = @_; return redis_cmd($node_of{$k}, 'HGET', $k, $f); }
sub c_held_by
{
	my ($owner, @names) = @_;
	return [ grep { redis_cmd($node_of{$_}, 'HEXISTS', $_, $owner) } @names ];
}

my $ca = RedisLockTest::Session->new($cnode);
my $cb = RedisLockTest::Session->new($cnode);
my $ca_id = $ca->query('SELECT redis_lock_owner_id()');
my $cb_id = $cb->query('SELECT redis_lock_owner_id()');
my $cobs = RedisLockTest::Session->new($cnode);
sub c_local_holds { $cobs->query('SELECT count(*) FROM redis_locks WHERE pid = ' . $_[0]->pid) }

{
	is($ca->query('SELECT redis_lock_acquire_all(' . arr(reverse @MC) . ')'), 't',
		'cluster: acquire_all over three masters');
	is(scalar(grep { (c_hget($_, $ca_id) // '') eq '1' } @MC), 3, 'each name has the hold on its own master');
	is($ca->query("SELECT count(*) FROM redis_locks WHERE kind = 'lock' AND hold_count = 1"), 3,
		'three ordinary holds in redis_locks');
	is($ca->query('SELECT bool_and(redis_lock_release(n)) FROM unnest(' . arr(@MC) . ') n'), 't',
		'each is released with redis_lock_release');
	is_deeply(c_held_by($ca_id, @MC), [], 'none left');
}

{
	my $last = $MC[-1];
	is($cb->query("SELECT redis_lock_acquire('$last', '0', '10 min')"), 't', "B holds $last (the last in order)");
	is($ca->query('SELECT redis_lock_acquire_all(' . arr(@MC) . ", '500ms')"), 'f',
		"A's acquire_all with wait '500ms' returns f");
	is_deeply(c_held_by($ca_id, @MC), [], 'A holds none of the names afterwards');
	is(scalar(grep { redis_cmd($node_of{$_}, 'EXISTS', $_) } @MC[0 .. $#MC - 1]), 0,
		'the names A took on the way were deleted');
	is(c_local_holds($ca), 0, 'redis_locks has nothing of A');

	# the same wait, watched and cancelled
	$ca->start('SELECT redis_lock_acquire_all(' . arr(@MC) . ')');
	waits_ok($ca, "A waits for $last");
	until_ok('across slots, A holds the names before the busy one while it waits',
		sub { @{ c_held_by($ca_id, @MC) } == @MC - 1 });
	my ($v, $err, $st) = $ca->cancel($T);
	is($st, '57014', 'cancel ends the cross-slot wait with 57014') or diag("v=" . ($v // 'NULL') . " err=" . ($err // ''));
	is_deeply(c_held_by($ca_id, @MC), [], 'after the cancel A holds none of the names');
	is(c_local_holds($ca), 0, 'redis_locks has nothing of A');
	is(c_hget($last, $cb_id), '1', "B still holds $last");

	# a hold A had before stays through the give-back
	is($ca->query("SELECT redis_lock_acquire('$MC[0]', '0', '10 min')"), 't', "A holds $MC[0] on its own");
	is($ca->query('SELECT redis_lock_acquire_all(' . arr(@MC) . ", '500ms')"), 'f', 'acquire_all times out');
	is(c_hget($MC[0], $ca_id), '1', "$MC[0] is still A's, count 1");
	is_deeply(c_held_by($ca_id, @MC[1 .. $#MC]), [], 'the others are not');
	is($ca->query("SELECT hold_count FROM redis_locks WHERE name = '$MC[0]'"), 1, 'redis_locks: count 1');
	is($ca->query("SELECT redis_lock_release('$MC[0]')"), 't', "A releases $MC[0]");

	# a waiter across slots is woken by the release
	$ca->start('SELECT redis_lock_acquire_all(' . arr(@MC) . ')');
	waits_ok($ca, 'A waits again');
	is($cb->query("SELECT redis_lock_release('$last')"), 't', "B releases $last (10 min lease)");
	($v, $err, $st) = $ca->finish($T);
	is($v, 't', 'A is woken and has all three') or diag("err=" . ($err // '') . " st=" . ($st // ''));
	is(scalar(grep { (c_hget($_, $ca_id) // '') eq '1' } @MC), 3, 'each on its master');
	is($ca->query('SELECT redis_lock_release_all()'), 3, 'A gives them back');
}

{
	# ABBA across slots
	my ($x, $y) = map { RedisLockTest::Session->new($cnode) } 1 .. 2;
	my $p = join(', ', map { "'$_'" } @MC);
	my $q = join(', ', map { "'$_'" } reverse @MC);
	my $loop = 'DO $$ BEGIN FOR i IN 1 .. 40 LOOP '
	  . 'IF NOT redis_lock_acquire_all(ARRAY[%s]) THEN RAISE EXCEPTION \'not taken\'; END IF; '
	  . 'PERFORM redis_lock_release_all(); END LOOP; END $$';
	$x->start(sprintf($loop, $p));
	$y->start(sprintf($loop, $q));
	my @errors = finish_all($T, x => $x, y => $y);
	is(scalar(@errors), 0, 'cluster ABBA: both loops finished') or diag(join("\n", @errors));
	is_deeply(c_held_by($_, @MC), [], 'nothing left') for map { $_->query('SELECT redis_lock_owner_id()') } $x, $y;
	$_->close for $x, $y;
}

{
	# one hash tag: one slot, taken at once
	my @TG = ('{mt}a', '{mt}b', '{mt}c');
	my $tnode = $cl->node_for_key($TG[0]);
	is(scalar(grep { $cl->slot_of($_) == $cl->slot_of($TG[0]) } @TG), 3, 'the {mt} names share a slot');
	is($cb->query("SELECT redis_lock_acquire('{mt}c', '0', '10 min')"), 't', 'B holds {mt}c (10 min)');
	$ca->start('SELECT redis_lock_acquire_all(' . arr(@TG) . ')');
	waits_ok($ca, 'A waits for the {mt} set');
	until_ok('A is subscribed (sharded) to every channel of the set',
		sub {
			my %n = @{ redis_cmd($tnode, 'PUBSUB', 'SHARDNUMSUB', map { FakeRedisson::channel($_) } @TG) };
			!grep { ($n{ FakeRedisson::channel($_) } // 0) != 1 } @TG;
		});
	is(redis_cmd($tnode, 'EXISTS', '{mt}a', '{mt}b'), 0, 'while A waits, {mt}a and {mt}b do not exist');
	is(c_local_holds($ca), 0, 'redis_locks has nothing of A');
	my ($v, $err, $st) = $ca->cancel($T);
	is($st, '57014', 'cancelled');
	is(redis_cmd($tnode, 'EXISTS', '{mt}a', '{mt}b'), 0, 'after the cancel nothing of the set is held');
	is_deeply([ sort keys %{ { @{ redis_cmd($tnode, 'HGETALL', '{mt}c') } } } ], [$cb_id], '{mt}c is B\'s alone');

	$ca->start('SELECT redis_lock_acquire_all(' . arr(@TG) . ')');
	waits_ok($ca, 'A waits again');
	is($cb->query("SELECT redis_lock_release('{mt}c')"), 't', 'B releases {mt}c');
	($v, $err, $st) = $ca->finish($T);
	is($v, 't', 'A is woken and takes the set') or diag("err=" . ($err // '') . " st=" . ($st // ''));
	is(scalar(grep { (redis_cmd($tnode, 'HGET', $_, $ca_id) // '') eq '1' } @TG), 3,
		'all three on the slot\'s master hold A');
	is($ca->query('SELECT redis_lock_release_all()'), 3, 'A gives them back');
	is(redis_cmd($tnode, 'EXISTS', @TG), 0, 'nothing left');
}

{
	# transaction scope across slots: ROLLBACK gives every name back
	$ca->query('BEGIN');
	is($ca->query('SELECT redis_xact_lock_acquire_all(' . arr(@MC) . ", '0')"), 't',
		'cluster: redis_xact_lock_acquire_all over three masters');
	is(scalar(grep { (c_hget($_, $ca_id) // '') eq '1' } @MC), 3, 'each on its master');
	$ca->query('ROLLBACK');
	is_deeply(c_held_by($ca_id, @MC), [], 'ROLLBACK gave all three back');
	is(c_local_holds($ca), 0, 'redis_locks has nothing of A');
}

{
	# a session ended while it waits across slots: what it took is given back
	# (10 min leases: only an active release explains their going)
	my $last = $MC[-1];
	is($cb->query("SELECT redis_lock_acquire('$last', '0', '10 min')"), 't', "B holds $last (10 min)");
	my $d = RedisLockTest::Session->new($cnode);
	my $d_id = $d->query('SELECT redis_lock_owner_id()');
	$d->start('SELECT redis_lock_acquire_all(' . arr(@MC) . ", NULL, '10 min')");
	waits_ok($d, 'D waits across slots (lease 10 min)');
	until_ok('D took the names before the busy one', sub { @{ c_held_by($d_id, @MC) } == @MC - 1 });
	ok($d->terminate($T), 'D is terminated while it waits');
	until_ok('the names D had taken are given back', sub { !@{ c_held_by($d_id, @MC) } });
	is(c_hget($last, $cb_id), '1', "B still holds $last");
	is($cb->query("SELECT redis_lock_release('$last')"), 't', "B releases $last");
}

{
	# watchdog mode across slots: the names taken while the call waits for
	# the rest are this session's; nobody may take them meanwhile, and when
	# the call returns t every name must be this session's alone in Redis.
	my $last = $MC[-1];
	my $cc = RedisLockTest::Session->new($cnode);
	is($cb->query("SELECT redis_lock_acquire('$last', '0', '10 min')"), 't', "B holds $last (10 min)");
	$ca->query("SET redislock.watchdog_timeout = '1s'");
	$ca->start('SELECT redis_lock_acquire_all(' . arr(@MC) . ')');
	waits_ok($ca, 'A (watchdog mode, 1 s lease) waits across slots');
	until_ok('A took the names before the busy one', sub { @{ c_held_by($ca_id, @MC) } == @MC - 1 });
	is($cc->query("SELECT redis_lock_acquire('$MC[0]', '3s', '10 min')"), 'f',
		"C cannot take $MC[0] while A waits (C's wait of three leases ends with f)");
	is($cb->query("SELECT redis_lock_release('$last')"), 't', "B releases $last");
	my ($v, $err, $st) = $ca->finish($T);
	is($v, 't', 'A gets the set') or diag("err=" . ($err // '') . " st=" . ($st // ''));
	is_deeply([ map { join(',', sort keys %{ { @{ redis_cmd($node_of{$_}, 'HGETALL', $_) } } }) } @MC ],
		[ ($ca_id) x @MC ], "A returned t: in Redis every name is A's alone")
	  or diag("A is $ca_id, C is " . $cc->query('SELECT redis_lock_owner_id()')
		  . "; redis_locks:\n" . join("\n", map { join(' | ', map { $_ // 'NULL' } @$_) }
			$cobs->rows('SELECT pid, name, state, hold_count, lease, owner_id FROM redis_locks ORDER BY name, pid')));
	$ca->query('SELECT redis_lock_release_all()');
	$ca->notices;
	$ca->query('RESET redislock.watchdog_timeout');
	$cc->query('SELECT redis_lock_release_all()');
	$cc->close;
	is(scalar(grep { redis_cmd($node_of{$_}, 'EXISTS', $_) } @MC), 0, 'nothing left');
}

{
	# a fixed lease across slots: a name taken early may run out while the
	# call waits for the rest, and another session may take it meanwhile;
	# then the call must not return t with that name lost: it gives back
	# what it holds and starts over, and here its wait ends with f.
	my $last = $MC[-1];
	my $cc = RedisLockTest::Session->new($cnode);
	my $cc_id = $cc->query('SELECT redis_lock_owner_id()');
	is($cb->query("SELECT redis_lock_acquire('$last', '0', '10 min')"), 't', "B holds $last (10 min)");
	$ca->start('SELECT redis_lock_acquire_all(' . arr(@MC) . ", '8 s', '1 s')");
	waits_ok($ca, 'A (fixed 1 s lease, wait 8 s) waits across slots');
	until_ok('A took the names before the busy one', sub { @{ c_held_by($ca_id, @MC) } == @MC - 1 });
	is($cc->query("SELECT redis_lock_acquire('$MC[0]', '5 s', '10 min')"), 't',
		"C gets $MC[0] once A's fixed lease on it has run out");
	is($cb->query("SELECT redis_lock_release('$last')"), 't', "B releases $last");
	my ($v, $err) = $ca->finish($T);
	is($v, 'f', "A does not return t with $MC[0] lost: it starts over and its wait ends with f")
	  or diag($err // '');
	is_deeply(c_held_by($ca_id, @MC), [], 'A holds none of the names');
	is(c_hget($MC[0], $cc_id), '1', "C still holds $MC[0]");
	is($cobs->query("SELECT count(*) FROM redis_locks WHERE pid = " . $ca->pid), 0, 'redis_locks shows nothing for A');
	$cc->query('SELECT redis_lock_release_all()');
	$cc->close;
}

{
	# the call ends by giving every hold its full lease again: one taken
	# early does not keep only what was left of it after the wait
	my ($first, $last) = ($MC[0], $MC[-1]);
	redis_cmd($node_of{$last}, 'HSET', $last, 'someone:1', '1');
	redis_cmd($node_of{$last}, 'PEXPIRE', $last, '3000');
	is($ca->query('SELECT redis_lock_acquire_all(' . arr(@MC) . ", '20 s', '30 s')"), 't',
		"A gets the set once $last's foreign hold ran out");
	my ($p_first, $p_last) = (redis_cmd($node_of{$first}, 'PTTL', $first), redis_cmd($node_of{$last}, 'PTTL', $last));
	cmp_ok($p_first, '>=', $p_last - 1000,
		"$first, taken before the 3 s wait, has its full lease again like $last ($p_first vs $p_last ms)");
	is($ca->query('SELECT redis_lock_release_all()'), scalar(@MC), 'A releases them');
}

$_->close for $ca, $cb, $cobs;
no_crash_ok($cnode, 'multilock, cluster');
done_testing();
