# 370_deadlock.pl — deadlock detection across two PostgreSQL servers that
# share one Redis (issue 14): ABBA, a 3-cycle, a cycle through a fair queue,
# a cycle of transaction-scope locks; exactly one victim per cycle, however
# often both ends discover it at once; no false positive under contention
# with a global lock order; a waiter killed mid-wait leaves no edge after its
# TTL; the redis_lock_waits view and redis_lock_blocking_pids().
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use Test::More;

my $redis = RedisLockTest::Redis->new;
my $n1 = RedisLockTest::node('dl_one', $redis, 'max_connections' => '40');
my $n2 = RedisLockTest::node('dl_two', $redis, 'max_connections' => '40');
my $rc = FakeRedisson::Conn->new(port => $redis->port);

sub session
{
	my ($node, $timeout) = @_;
	my $s = RedisLockTest::Session->new($node);
	$s->query("SET redislock.deadlock_timeout = '$timeout'") if defined $timeout;
	$s->{id} = $s->query('SELECT redis_lock_owner_id()');
	return $s;
}

sub edges { my $k = $rc->cmd('KEYS', 'redislock_waits:*'); return ref $k ? @$k : (); }

# The victim rule of src/deadlock.c: the largest owner id, compared by
# instance uuid, then session number.
sub owner_cmp
{
	my ($a, $b) = @_;
	my ($ua, $na) = $a =~ /^(.*):(\d+)$/;
	my ($ub, $nb) = $b =~ /^(.*):(\d+)$/;
	return ($ua cmp $ub) || ($na <=> $nb);
}

# Starts each session's statement and waits until one has returned. The
# victim is the one that failed: with transaction-scope locks the other one
# may have finished too by the time we look. Returns the victim's index and
# (value, error, sqlstate); the others' results, if in, wait in outcome().
sub one_victim
{
	my ($what, $sessions, $sqls) = @_;
	$sessions->[$_]->start($sqls->[$_]) for 0 .. $#$sessions;
	my $first = first_done_ok("$what: a session returns", @$sessions);
	return (undef) unless defined $first;
	my $victim = $first;
	for my $i (0 .. $#$sessions)
	{
		next unless $sessions->[$i]->is_done;
		$sessions->[$i]{outcome} = [ $sessions->[$i]->finish(10) ];
		$victim = $i if defined $sessions->[$i]{outcome}[1] && !defined $sessions->[$victim]{outcome}[1];
	}
	return ($victim, @{ delete $sessions->[$victim]{outcome} });
}

# The result of a session's statement started by one_victim: kept, or awaited.
sub outcome
{
	my ($s, $t) = @_;
	my $r = delete $s->{outcome};
	return $r ? @$r : $s->finish($t);
}

# --- 1. ABBA across two servers, the server's deadlock_timeout ---------------
{
	my $a = session($n1);
	my $b = session($n2);
	is($a->query("SHOW redislock.deadlock_timeout"), '-1', 'default: the server\'s deadlock_timeout');
	is($a->query("SELECT redis_lock_acquire('dl:a')"), 't', 'A (server one) holds dl:a');
	is($b->query("SELECT redis_lock_acquire('dl:b')"), 't', 'B (server two) holds dl:b');
	my @s = ($a, $b);
	my ($v, $val, $err, $state) = one_victim('ABBA', \@s,
		[ "SELECT redis_lock_acquire('dl:b')", "SELECT redis_lock_acquire('dl:a')" ]);
	my $other = 1 - $v;
	is($state, '40P01', 'ABBA: the victim gets 40P01') or diag($err);
	like($err, qr/deadlock detected/, 'ABBA: errmsg "deadlock detected"');
	my ($vp, $op) = ($s[$v]->pid, $s[$other]->pid);
	my ($vn, $on) = $v == 0 ? ('dl_one', 'dl_two') : ('dl_two', 'dl_one');
	my ($vl, $ol) = $v == 0 ? ('dl:b', 'dl:a') : ('dl:a', 'dl:b');
	like($err, qr/DETAIL:\s+Session $vp on server "$vn" waits for Redis lock "$vl" held by session $op on server "$on", which waits for Redis lock "$ol" held by session $vp\./,
		'ABBA: errdetail names both sessions, their servers and both locks');
	is(owner_cmp($s[$v]{id}, $s[$other]{id}), 1, 'ABBA: the victim has the larger owner id');
	ok(!$s[$other]{outcome} && !$s[$other]->is_done, 'ABBA: the other session keeps waiting while the victim holds its lock');
	is($s[$v]->query('SELECT redis_lock_release_all()'), 1,
		'ABBA: the victim still holds its session lock (as advisory locks do) and releases it');
	my ($ov, $oerr) = outcome($s[$other], 30);
	is($ov, 't', 'ABBA: the other session completes') or diag($oerr);
	$s[$other]->query('SELECT redis_lock_release_all()');
	is(scalar(edges()), 0, 'ABBA: no wait-for edge is left in Redis');
	$_->close for @s;
}

# --- 2. redis_lock_waits and redis_lock_blocking_pids ------------------------
{
	my $a = session($n1, '0');
	my $b = session($n1, '0');
	my $c = session($n2, '0');
	is($a->query("SELECT redis_lock_acquire('dl:view')"), 't', 'A holds dl:view');
	$b->start("SELECT redis_lock_acquire('dl:view')");
	$c->start("SELECT redis_read_lock_acquire('dl:view')");
	waits_ok($b, 'B (server one)');
	waits_ok($c, 'C (server two, read)');
	my $obs1 = RedisLockTest::observer($n1);
	my $obs2 = RedisLockTest::observer($n2);
	my $bp = $b->pid;
	is($obs1->query("SELECT format('%s %s %s %s %s', pid, name, kind, holders, holder_pids) FROM redis_lock_waits"),
		"$bp dl:view lock {$a->{id}} {" . $a->pid . "}", 'redis_lock_waits on server one: B waits for A, a session of this server');
	is($obs1->query("SELECT wait_started <= now() FROM redis_lock_waits"), 't', '... with when its wait started');
	is($obs2->query("SELECT format('%s %s %s %s', name, kind, holders, holder_pids) FROM redis_lock_waits WHERE pid = " . $c->pid),
		"dl:view read {$a->{id}} {}", 'redis_lock_waits on server two: C (read) waits for A, a session of another server');
	is($obs1->query("SELECT redis_lock_blocking_pids($bp)::text"), '{' . $a->pid . '}', 'redis_lock_blocking_pids(B) = {A}');
	is($obs1->query("SELECT count(*) FROM pg_stat_activity WHERE cardinality(redis_lock_blocking_pids(pid)) > 0"), 1,
		'joins with pg_stat_activity');
	is($obs1->query("SELECT redis_lock_blocking_pids(" . $a->pid . ")::text"), '{}', 'a session that does not wait is blocked by nobody');
	is(scalar(edges()), 0, 'with redislock.deadlock_timeout 0 nothing is published in Redis');
	$a->query('SELECT redis_lock_release_all()');
	is(($b->finish(30))[0], 't', 'B gets the lock');
	$b->query('SELECT redis_lock_release_all()');
	is(($c->finish(90))[0], 't', 'C gets its read hold');
	$c->query('SELECT redis_lock_release_all()');
	is($obs1->query('SELECT count(*) FROM redis_lock_waits'), 0, 'redis_lock_waits is empty again');
	$_->close for ($a, $b, $c);
}

# --- 3. a waiter blocked for less than deadlock_timeout publishes nothing -----
{
	my $a = session($n1, '1h');
	my $b = session($n2, '1h');
	$a->query("SELECT redis_lock_acquire('dl:quiet')");
	$b->start("SELECT redis_lock_acquire('dl:quiet')");
	waits_ok($b, 'B waits (deadlock_timeout 1h)');
	is(scalar(edges()), 0, 'no edge before deadlock_timeout');
	$a->query('SELECT redis_lock_release_all()');
	is(($b->finish(30))[0], 't', 'B gets the lock');
	$b->query('SELECT redis_lock_release_all()');
	$_->close for ($a, $b);
}

# --- 4. a 3-cycle across both servers -----------------------------------------
{
	my @s = (session($n1, '200ms'), session($n2, '200ms'), session($n1, '200ms'));
	my @locks = ('dl3:x', 'dl3:y', 'dl3:z');
	is($s[$_]->query("SELECT redis_lock_acquire('$locks[$_]')"), 't', "session $_ holds $locks[$_]") for 0 .. 2;
	my ($v, $val, $err, $state) = one_victim('3-cycle', \@s,
		[ map { "SELECT redis_lock_acquire('$locks[($_ + 1) % 3]')" } 0 .. 2 ]);
	is($state, '40P01', '3-cycle: one victim gets 40P01') or diag($err);
	my @pids = map { $_->pid } @s;
	like($err, qr/DETAIL:.*waits for.*held by.*which waits for.*held by.*which waits for.*held by session $pids[$v]\./s,
		'3-cycle: errdetail lists the three waits');
	like($err, qr/session $pids[$_]\b/, "3-cycle: errdetail names session $_") for 0 .. 2;
	my @max = sort { owner_cmp($b->{id}, $a->{id}) } @s;
	is($s[$v]{id}, $max[0]{id}, '3-cycle: the victim is the largest owner id');
	$s[$v]->query('SELECT redis_lock_release_all()');
	# the one waiting for the victim's lock goes on, then the last one
	my $w = ($v + 2) % 3;
	is((outcome($s[$w], 30))[0], 't', '3-cycle: the session waiting for the victim completes');
	$s[$w]->query('SELECT redis_lock_release_all()');
	my $last = ($v + 1) % 3;
	is((outcome($s[$last], 30))[0], 't', '3-cycle: the last one completes');
	$s[$last]->query('SELECT redis_lock_release_all()');
	is(scalar(edges()), 0, '3-cycle: no edge left');
	$_->close for @s;
}

# --- 5. a cycle through a fair queue ------------------------------------------
{
	my $a = session($n1, '200ms');
	my $b = session($n2, '200ms');
	# C, queued ahead of B, gets the largest owner id of the three: were the
	# queue counted while dlf:x is held, C would close a cycle of its own
	# (C -> A -> B -> C) as its largest member and be aborted for nothing
	my $c = session(owner_cmp($a->{id}, $b->{id}) > 0 ? $n1 : $n2, '200ms');
	is(owner_cmp($c->{id}, $_->{id}), 1, 'C has a larger owner id than ' . ($_ == $a ? 'A' : 'B')) for ($a, $b);
	is($a->query("SELECT redis_lock_acquire('dlf:x', NULL, NULL, true)"), 't', 'A holds fair dlf:x');
	is($b->query("SELECT redis_lock_acquire('dlf:y', NULL, NULL, true)"), 't', 'B holds fair dlf:y');
	$c->start("SELECT redis_lock_acquire('dlf:x', NULL, NULL, true)");
	until_ok('C heads the queue of dlf:x', sub { (fair_queue($rc, 'dlf:x')->[0] // '') eq $c->{id} });
	my @s = ($a, $b);
	my ($v, $val, $err, $state) = one_victim('fair', \@s,
		[ "SELECT redis_lock_acquire('dlf:y', NULL, NULL, true)", "SELECT redis_lock_acquire('dlf:x', NULL, NULL, true)" ]);
	is($state, '40P01', 'fair: one victim gets 40P01') or diag($err);
	ok(!grep({ $_ eq $s[$v]{id} } @{ fair_queue($rc, $v == 0 ? 'dlf:y' : 'dlf:x') }),
		'fair: the victim left the queue it waited in');
	ok(!$c->is_done, 'fair: C, queued ahead of B but not in the cycle, still waits');
	$s[$v]->query('SELECT redis_lock_release_all()');
	if ($v == 1)
	{
		is((outcome($a, 30))[0], 't', 'fair: A gets dlf:y');
		$a->query('SELECT redis_lock_release_all()');
		is(($c->finish(30))[0], 't', 'fair: then C gets dlf:x');
	}
	else
	{
		is(($c->finish(30))[0], 't', 'fair: C, at the head, gets dlf:x first');
		$c->query('SELECT redis_lock_release_all()');
		is((outcome($b, 30))[0], 't', 'fair: then B gets dlf:x');
		$b->query('SELECT redis_lock_release_all()');
	}
	$_->query('SELECT redis_lock_release_all()') for ($a, $b, $c);
	is(fair_queue_len($rc, $_), 0, "fair: the queue of $_ is empty") for ('dlf:x', 'dlf:y');
	$_->close for ($a, $b, $c);
}

# --- 6. transaction-scope locks: the victim's transaction rolls back -----------
{
	my $a = session($n1, '200ms');
	my $b = session($n2, '200ms');
	$a->query("BEGIN; SELECT redis_xact_lock_acquire('dlx:a')");
	$b->query("BEGIN; SELECT redis_xact_lock_acquire('dlx:b')");
	my @s = ($a, $b);
	my ($v, $val, $err, $state) = one_victim('xact', \@s,
		[ "SELECT redis_xact_lock_acquire('dlx:b')", "SELECT redis_xact_lock_acquire('dlx:a')" ]);
	my $other = 1 - $v;
	is($state, '40P01', 'xact: one victim gets 40P01') or diag($err);
	my ($ov, $oerr) = outcome($s[$other], 30);
	is($ov, 't', 'xact: the other gets the lock without waiting for the victim\'s ROLLBACK') or diag($oerr);
	my $vlock = $v == 0 ? 'dlx:a' : 'dlx:b';
	is($rc->cmd('HEXISTS', $vlock, $s[$v]{id}), 0, "xact: the victim's hold of $vlock is gone from Redis");
	is(RedisLockTest::observer($v == 0 ? $n1 : $n2)->query('SELECT count(*) FROM redis_locks WHERE pid = ' . $s[$v]->pid),
		0, 'xact: redis_locks shows nothing for the victim');
	my (undef, $aerr, $astate) = $s[$v]->try('SELECT 1');
	is($astate, '25P02', 'xact: the victim\'s transaction is aborted');
	$s[$v]->query('ROLLBACK');
	$s[$other]->query('COMMIT');
	is($rc->cmd('EXISTS', 'dlx:a') + $rc->cmd('EXISTS', 'dlx:b'), 0, 'xact: both locks are free after COMMIT');
	$_->close for @s;
}

# --- 6b. read-write locks and a multi-lock in a cycle ------------------------
{
	# A writes dlr:x; B holds dlr:y and reads dlr:x; A waits for dlr:y
	my $a = session($n1, '200ms');
	my $b = session($n2, '200ms');
	is($a->query("SELECT redis_write_lock_acquire('dlr:x')"), 't', 'A holds the write lock dlr:x');
	is($b->query("SELECT redis_lock_acquire('dlr:y')"), 't', 'B holds dlr:y');
	my @s = ($a, $b);
	my ($v, $val, $err, $state) = one_victim('read-write', \@s,
		[ "SELECT redis_lock_acquire('dlr:y')", "SELECT redis_read_lock_acquire('dlr:x')" ]);
	is($state, '40P01', 'read-write: one victim gets 40P01') or diag($err);
	like($err, qr/waits for Redis read lock "dlr:x"/, 'read-write: errdetail names the read wait');
	$s[$v]->query('SELECT redis_lock_release_all()');
	$s[$v]->query("SELECT redis_write_lock_release('dlr:x')") if $v == 0;
	is((outcome($s[1 - $v], 30))[0], 't', 'read-write: the other completes');
	$_->query('SELECT redis_lock_release_all()') for @s;
	$b->query("SELECT redis_read_lock_release('dlr:x')") if $v == 0;
	$a->query("SELECT redis_write_lock_release('dlr:x')") if $v == 1;

	# C holds dlm:1; D holds dlm:2 and waits for dlm:1; C waits for all of dlm:2, dlm:3
	my $c = session($n1, '200ms');
	my $d = session($n2, '200ms');
	is($c->query("SELECT redis_lock_acquire('dlm:1')"), 't', 'C holds dlm:1');
	is($d->query("SELECT redis_lock_acquire('dlm:2')"), 't', 'D holds dlm:2');
	@s = ($c, $d);
	($v, $val, $err, $state) = one_victim('multi-lock', \@s,
		[ "SELECT redis_lock_acquire_all(ARRAY['dlm:2', 'dlm:3'])", "SELECT redis_lock_acquire('dlm:1')" ]);
	is($state, '40P01', 'multi-lock: one victim gets 40P01') or diag($err);
	like($err, qr/"dlm:2"/, 'multi-lock: errdetail names the lock of the multi-lock that closes the cycle');
	$s[$v]->query('SELECT redis_lock_release_all()');
	is((outcome($s[1 - $v], 30))[0], 't', 'multi-lock: the other completes');
	$_->query('SELECT redis_lock_release_all()') for @s;
	is(scalar(edges()), 0, 'read-write and multi-lock: no edge left');
	$_->close for ($a, $b, $c, $d);
}

# --- 7. simultaneous discovery: exactly one victim, many times -----------------
{
	my $rounds = 25;
	my ($one, $larger) = (0, 0);
	for my $r (1 .. $rounds)
	{
		my $a = session($n1, '100ms');
		my $b = session($n2, '100ms');
		$a->query("SELECT redis_lock_acquire('dls:a')");
		$b->query("SELECT redis_lock_acquire('dls:b')");
		# both start waiting together, so their checks fall due together
		$a->start("SELECT redis_lock_acquire('dls:b')");
		$b->start("SELECT redis_lock_acquire('dls:a')");
		my @s = ($a, $b);
		my $v = first_done_ok("round $r: a session returns", @s);
		last unless defined $v;
		my (undef, $err, $state) = $s[$v]->finish(10);
		my $other = 1 - $v;
		# the survivor must still be waiting: give it the victim's lock only
		# after checking that it did not fail too
		my $survivor_failed = $s[$other]->is_done;
		$s[$v]->query('SELECT redis_lock_release_all()');
		my ($ov, $oerr, $ostate) = outcome($s[$other], 30);
		$one++ if ($state // '') eq '40P01' && !$survivor_failed && ($ov // '') eq 't';
		diag("round $r: victim [$state] $err; other [" . ($ostate // '') . '] ' . ($oerr // ''))
		  unless ($ov // '') eq 't';
		$larger++ if owner_cmp($s[$v]{id}, $s[$other]{id}) > 0;
		$s[$other]->query('SELECT redis_lock_release_all()');
		$_->close for @s;
	}
	is($one, $rounds, "simultaneous discovery: exactly one victim in each of $rounds rounds");
	is($larger, $rounds, 'simultaneous discovery: always the larger owner id');
	is(scalar(edges()), 0, 'simultaneous discovery: no edge left');
}

# --- 8. no false positive: 16 sessions, a global lock order ------------------
{
	for my $n ($n1, $n2)
	{
		$n->safe_psql('postgres', <<'SQL');
CREATE PROCEDURE dl_churn(rounds int) LANGUAGE plpgsql AS $$
BEGIN
    FOR r IN 1 .. rounds LOOP
        -- a random subset of churn:0 .. churn:7, always in ascending order
        FOR i IN 0 .. 7 LOOP
            IF random() < 0.5 THEN
                PERFORM redis_lock_acquire('churn:' || i, NULL, '1 min');
            END IF;
        END LOOP;
        PERFORM pg_sleep(0.01);
        PERFORM redis_lock_release_all();
    END LOOP;
END $$;
SQL
	}
	my @s = map { session($_ % 2 ? $n1 : $n2, '30ms') } 1 .. 16;
	$_->start('CALL dl_churn(40)') for @s;
	until_ok('contention: waits last long enough to publish edges', sub { scalar(edges()) > 0 });
	my @errors;
	for my $s (@s)
	{
		my (undef, $err, $state) = $s->finish(600);
		push @errors, "[$state] $err" if defined $err;
	}
	is(scalar(@errors), 0, 'no false positive: 16 sessions, random subsets in a global order, no 40P01')
	  or diag(join("\n", @errors));
	is(scalar(edges()), 0, 'contention: no edge left');
	$_->close for @s;
}

# --- 9. a waiter killed mid-wait leaves no edge after its TTL ------------------
{
	my $a = session($n1);
	my $b = session($n2, '100ms');
	$b->query("SET redislock.command_timeout = '1s'");
	$a->query("SELECT redis_lock_acquire('dl:kill')");
	$b->start("SELECT redis_lock_acquire('dl:kill')");
	my $key = "redislock_waits:{$b->{id}}";
	until_ok('B publishes its edge', sub { $rc->cmd('EXISTS', $key) == 1 });
	my %edge = @{ $rc->cmd('HGETALL', $key) };
	is("$edge{server} $edge{pid} $edge{kind} $edge{n} $edge{name1}", 'dl_two ' . $b->pid . ' lock 1 dl:kill',
		'the edge names server, pid, kind and lock');
	cmp_ok($rc->cmd('PTTL', $key), '>', 0, 'the edge has a TTL');
	ok($b->terminate, 'B is terminated mid-wait');
	until_ok('its edge is gone after its TTL', sub { $rc->cmd('EXISTS', $key) == 0 });
	$a->query('SELECT redis_lock_release_all()');
	$a->close;
}

# --- 10. a server without shared_preload_libraries -----------------------------
# No registry there: a cycle is confirmed through the members' edges alone
# (their check walked, both refresh them). Before, confirmation looked the
# members up in the registry that does not exist and crashed the server.
my $n3 = RedisLockTest::node('dl_three', $redis, 'preload' => 0);
{
	my $a = session($n3, '100ms');
	my $b = session($n3, '100ms');
	is($a->query("SELECT redis_lock_acquire('dl:np:a', '0', '60 s')"), 't', 'not preloaded: A holds dl:np:a (fixed lease)');
	is($b->query("SELECT redis_lock_acquire('dl:np:b', '0', '60 s')"), 't', 'not preloaded: B holds dl:np:b');
	my @s = ($a, $b);
	my ($v, $val, $err, $state) = one_victim('not preloaded ABBA', \@s,
		[ "SELECT redis_lock_acquire('dl:np:b', '30 s', '60 s')",
		  "SELECT redis_lock_acquire('dl:np:a', '30 s', '60 s')" ]);
	is($state, '40P01', 'not preloaded: the victim gets 40P01') or diag($err);
	is($s[$v]->query('SELECT redis_lock_release_all()'), 1, 'not preloaded: the victim releases its lock');
	my ($ov, $oerr) = outcome($s[1 - $v], 30);
	is($ov, 't', 'not preloaded: the other session completes') or diag($oerr);
	$s[1 - $v]->query('SELECT redis_lock_release_all()');
	$_->close for @s;
}

# --- read-write locks: the DETAIL says how each holder holds the lock ------------
# Two readers that both upgrade wait for each other's read hold; two writers
# that then read each other's lock wait for a write hold. Not "held by" (the
# words of an exclusive lock) for a read hold.
for my $t (
	[ 'two upgraders', [ "SELECT redis_read_lock_acquire('dl:up')", "SELECT redis_read_lock_acquire('dl:up')" ],
	  [ "SELECT redis_write_lock_acquire('dl:up', '30 s')", "SELECT redis_write_lock_acquire('dl:up', '30 s')" ],
	  sub { my ($vl, $ol) = ('dl:up', 'dl:up'); (qq{Redis write lock "$vl" held for read}, qq{Redis write lock "$ol" held for read}) } ],
	[ 'writers reading each other\'s lock',
	  [ "SELECT redis_write_lock_acquire('dl:w1')", "SELECT redis_write_lock_acquire('dl:w2')" ],
	  [ "SELECT redis_read_lock_acquire('dl:w2', '30 s')", "SELECT redis_read_lock_acquire('dl:w1', '30 s')" ],
	  sub { my ($v) = @_; my @l = ('dl:w2', 'dl:w1'); (qq{Redis read lock "$l[$v]" held for write}, qq{Redis read lock "$l[1 - $v]" held for write}) } ])
{
	my ($what, $take, $wait, $words) = @$t;
	my @s = (session($n1, '100ms'), session($n2, '100ms'));
	is($s[$_]->query($take->[$_]), 't', "$what: session " . ($_ + 1) . ' takes its hold') for 0, 1;
	my ($v, $val, $err, $state) = one_victim($what, \@s, $wait);
	is($state, '40P01', "$what: the victim gets 40P01") or diag($err);
	my ($vp, $op) = ($s[$v]->pid, $s[1 - $v]->pid);
	my ($vw, $ow) = $words->($v);
	like($err // '', qr/DETAIL:\s+Session $vp on server "\w+" waits for \Q$vw\E by session $op on server "\w+", which waits for \Q$ow\E by session $vp\./,
		"$what: the DETAIL names the kind of each hold") or diag($err);
	$s[$v]->query('SELECT redis_lock_release_all()');
	my ($ov, $oerr) = outcome($s[1 - $v], 30);
	is($ov, 't', "$what: the other session then gets its hold") or diag($oerr);
	$s[1 - $v]->query('SELECT redis_lock_release_all()');
	$_->close for @s;
}

no_crash_ok($n1, 'server one');
no_crash_ok($n2, 'server two');
no_crash_ok($n3, 'server three (not preloaded)');
done_testing();
