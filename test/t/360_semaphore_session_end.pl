# 360_semaphore_session_end.pl — permits never leak: a session that ends
# (disconnect, pg_terminate_backend, FATAL) gives back the semaphore permits
# and expiring permits it took at once and wakes the waiters; transaction
# scope permits come back at COMMIT, ROLLBACK and subtransaction abort (a
# PL/pgSQL exception block too), session scope ones survive ROLLBACK; a
# session that ends while Redis is
# unreachable leaves its permits to the watchdog, which gives them back once
# Redis is there again; after a crash-restart of PostgreSQL nobody renews
# the dead sessions' permits and they come back within one lease.
#
# No sleeps, no timing thresholds: the node's watchdog lease is 10 min
# (records and watchdog permits live that long unless given back), holders
# of fixed-lease permits use 10 min too, so within the bounds used here only
# the give-back explains a waiter's return.  The crash case sets a 2 s lease
# in the holder's session and waits on observable state (the records' and
# permits' scores never go up after the crash; a waiter returns).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use Test::More;

my $T   = 60;
my $HEX = qr/^[0-9a-f]{32}$/;

my $redis = RedisLockTest::Redis->new(appendonly => 1);
my $node  = RedisLockTest::node('semend', $redis,
	'redislock.watchdog_timeout' => '10min',
	'restart_after_crash'        => 'on');
my $rc;
sub rc { $rc //= FakeRedisson::Conn->new(port => $redis->port); $rc }
sub reset_rc { $rc->close if $rc; undef $rc; }
my $java = FakeRedisson->new(port => $redis->port);
my $obs  = RedisLockTest::observer($node);
my %killed;

sub holders_key { "redislock_semaphore_holders:{$_[0]}" }
sub records_key { "redislock_semaphore_timeout:{$_[0]}" }
sub pes_ids     { [ sort keys %{ FakeRedisson->new(port => $redis->port)->permit_state($_[0])->{members} } ] }
sub rows_of_pid
{
	my ($pid) = @_;
	return join(',', map { join(':', @$_) } $obs->rows(
		"SELECT name, kind, state FROM redis_locks WHERE pid = $pid ORDER BY name, kind"));
}

# --- 1. the session ends: permits back at once, waiters woken ------------------------
sub end_holder
{
	my ($how) = @_;
	my ($sem, $pes) = ("se:$how", "pe:$how");
	my $a = RedisLockTest::Session->new($node);
	my $b = RedisLockTest::Session->new($node);
	my $c = RedisLockTest::Session->new($node);
	my $a_id = $a->query('SELECT redis_lock_owner_id()');
	my $apid = $a->pid;
	is($a->query("SELECT redis_semaphore_try_set_permits('$sem', 2)"), 't', "$how: semaphore of 2");
	is($a->query("SELECT redis_permit_try_set_permits('$pes', 2)"), 't', "$how: expiring permits, 2");
	is($a->query("SELECT redis_semaphore_acquire('$sem', 2)"), 't', "$how: A takes both permits");
	my $w = $a->query("SELECT redis_permit_acquire('$pes')");
	like($w, $HEX, "$how: A takes a watchdog permit (10 min lease)");
	my $f = $a->query("SELECT redis_permit_acquire('$pes', '0', '10 min')");
	like($f, $HEX, "$how: and a fixed-lease one (10 min)");
	is(rc()->cmd('HGET', holders_key($sem), $a_id), '2', "$how: A's record: 2 permits");
	is_deeply(pes_ids($pes), [ sort $w, $f ], "$how: both ids out");
	is(rows_of_pid($apid), "$pes:permit:held,$pes:permit:held,$sem:semaphore:held",
		"$how: redis_locks shows A's permits");

	$b->start("SELECT redis_semaphore_acquire('$sem', 2, '60 s')");
	waits_ok($b, "$how: B (for 2 permits)");
	$c->start("SELECT redis_permit_acquire('$pes', '60 s', '10 min')");
	waits_ok($c, "$how: C (for an expiring permit)");

	if ($how eq 'disconnect')
	{
		$a->close;
	}
	elsif ($how eq 'terminate')
	{
		ok($a->terminate($T), "$how: A's backend is gone");
	}
	elsif ($how eq 'fatal')
	{
		# the backend ends with FATAL (idle_session_timeout)
		$a->query("SET idle_session_timeout = '200ms'");
	}
	my ($v, $err) = $b->finish($T);
	is($v, 't', "$how: B gets both permits once A's session ended") or diag($err);
	($v, $err) = $c->finish($T);
	like($v, $HEX, "$how: C gets a permit") or diag($err);
	my $cid = $v;
	is(rc()->cmd('HEXISTS', holders_key($sem), $a_id), 0, "$how: A's record is gone");
	ok(!defined rc()->cmd('ZSCORE', records_key($sem), $a_id), "$how: ... and its expiry");
	my $ids = pes_ids($pes);
	ok(!grep({ $_ eq $w || $_ eq $f } @$ids), "$how: A's permit ids are gone (both)");
	is(rc()->cmd('GET', $pes), '1', "$how: one permit free beside C's");
	until_ok("$how: no redis_locks row for A's pid", sub { rows_of_pid($apid) eq '' });
	if ($how eq 'fatal')
	{
		like(slurp($node->logfile), qr/FATAL:.*idle-session timeout/i, "$how: A ended with FATAL");
	}
	is($b->query("SELECT redis_semaphore_release('$sem', 2)"), 't', "$how: B releases");
	is($c->query("SELECT redis_permit_release('$pes', '$cid')"), 't', "$how: C releases");
	is_deeply([ rc()->cmd('GET', $sem), rc()->cmd('GET', $pes) ], [ '2', '2' ], "$how: both pools full");
	$_->close for $a, $b, $c;
}

end_holder('disconnect');
end_holder('terminate');
end_holder('fatal');

# --- 2. transaction scope -------------------------------------------------------------
{
	my $a = RedisLockTest::Session->new($node);
	my $b = RedisLockTest::Session->new($node);
	my $a_id = $a->query('SELECT redis_lock_owner_id()');
	my ($sem, $pes) = ('sx:sem', 'sx:pes');
	$a->query("SELECT redis_semaphore_try_set_permits('$sem', 2), redis_permit_try_set_permits('$pes', 1)");

	# COMMIT
	$a->query('BEGIN');
	is($a->query("SELECT redis_xact_semaphore_acquire('$sem', 2)"), 't', 'xact: A takes 2 in a transaction');
	is(rc()->cmd('HGET', holders_key($sem), $a_id), '2', 'xact: recorded');
	is($a->query("SELECT scope FROM redis_locks WHERE name = '$sem' AND pid = pg_backend_pid()"), 'transaction',
		'xact: redis_locks shows scope transaction');
	$b->start("SELECT redis_semaphore_acquire('$sem', 1, '60 s')");
	waits_ok($b, 'xact: B');
	$a->query('COMMIT');
	is(rc()->cmd('HEXISTS', holders_key($sem), $a_id), 0, 'xact: given back at COMMIT');
	my ($v, $err) = $b->finish($T);
	is($v, 't', 'xact: B woken by the COMMIT') or diag($err);
	is($b->query("SELECT redis_semaphore_release('$sem')"), 't', 'xact: B releases');

	# ROLLBACK
	$a->query('BEGIN');
	is($a->query("SELECT redis_xact_semaphore_acquire('$sem', 1)"), 't', 'xact: A takes 1');
	is($a->query("SELECT redis_xact_semaphore_acquire('$sem', 1)"), 't', 'xact: and 1 more');
	is(rc()->cmd('HGET', holders_key($sem), $a_id), '2', 'xact: 2 recorded');
	$a->query('ROLLBACK');
	is_deeply([ rc()->cmd('HEXISTS', holders_key($sem), $a_id), rc()->cmd('GET', $sem) ], [ 0, '2' ],
		'xact: both back at ROLLBACK');

	# subtransaction abort
	$a->query('BEGIN');
	is($a->query("SELECT redis_xact_semaphore_acquire('$sem', 1)"), 't', 'subxact: A takes 1 outside');
	$a->query('SAVEPOINT sp');
	is($a->query("SELECT redis_xact_semaphore_acquire('$sem', 1)"), 't', 'subxact: and 1 in a savepoint');
	is(rc()->cmd('GET', $sem), '0', 'subxact: none left');
	$a->query('ROLLBACK TO SAVEPOINT sp');
	is_deeply([ rc()->cmd('HGET', holders_key($sem), $a_id), rc()->cmd('GET', $sem) ], [ '1', '1' ],
		"subxact: the savepoint's permit is back at ROLLBACK TO, the outer one kept");
	my $x = $a->query("SELECT redis_xact_permit_acquire('$pes', '0', '10 min')");
	like($x, $HEX, 'subxact: A takes an expiring permit in the transaction');
	is_deeply(pes_ids($pes), [$x], 'subxact: its id is out');
	$a->query('COMMIT');
	is_deeply([ rc()->cmd('HEXISTS', holders_key($sem), $a_id), rc()->cmd('GET', $sem) ], [ 0, '2' ],
		'subxact: the outer permit is back at COMMIT');
	is_deeply([ pes_ids($pes), rc()->cmd('GET', $pes) ], [ [], '1' ], 'xact: the expiring permit is back at COMMIT');

	# expiring permits: ROLLBACK and subtransaction abort
	$a->query('BEGIN');
	$x = $a->query("SELECT redis_xact_permit_acquire('$pes')");
	like($x, $HEX, 'xact permit: A takes one (watchdog lease)');
	$a->query('ROLLBACK');
	is_deeply([ pes_ids($pes), rc()->cmd('GET', $pes) ], [ [], '1' ], 'xact permit: back at ROLLBACK');
	$a->query('BEGIN');
	$a->query('SAVEPOINT sp');
	$x = $a->query("SELECT redis_xact_permit_acquire('$pes', '0', '10 min')");
	like($x, $HEX, 'xact permit: A takes one in a savepoint');
	$b->start("SELECT redis_permit_acquire('$pes', '60 s', '10 min')");
	waits_ok($b, 'xact permit: B');
	$a->query('ROLLBACK TO SAVEPOINT sp');
	($v, $err) = $b->finish($T);
	like($v, $HEX, 'xact permit: B woken by the subtransaction abort') or diag($err);
	ok(!grep({ $_ eq $x } @{ pes_ids($pes) }), "xact permit: A's id is gone");
	$a->query('COMMIT');
	is($b->query("SELECT redis_permit_release('$pes', '$v')"), 't', 'xact permit: B releases');

	# a PL/pgSQL exception block is a subtransaction too
	my $e;
	(undef, $e) = $a->try(<<"SQL");
DO \$\$
BEGIN
    BEGIN
        PERFORM redis_xact_semaphore_acquire('$sem', 2);
        PERFORM redis_xact_permit_acquire('$pes', '0', '10 min');
        RAISE EXCEPTION 'boom';
    EXCEPTION WHEN others THEN
        NULL;
    END;
    IF redis_semaphore_available('$sem') <> 2 OR redis_permit_available('$pes') <> 1 THEN
        RAISE EXCEPTION 'not back after the exception block';
    END IF;
END \$\$
SQL
	ok(!defined $e, 'plpgsql: permits taken in an exception block are back when it catches the error (checked inside)')
	  or diag($e);
	is_deeply([ rc()->cmd('GET', $sem), rc()->cmd('GET', $pes), pes_ids($pes) ], [ '2', '1', [] ],
		'plpgsql: and after the DO');

	# a transaction that failed: back at its ROLLBACK
	$a->query('BEGIN');
	is($a->query("SELECT redis_xact_semaphore_acquire('$sem', 2)"), 't', 'failed xact: A takes 2');
	(undef, $e) = $a->try('SELECT 1/0');
	like($e, qr/division by zero/, 'failed xact: the transaction fails');
	$a->query('ROLLBACK');
	is(rc()->cmd('GET', $sem), '2', 'failed xact: both back');

	# session scope survives ROLLBACK
	$a->query('BEGIN');
	is($a->query("SELECT redis_semaphore_acquire('$sem', 1)"), 't', 'session scope: A takes 1 in a transaction');
	my $sid = $a->query("SELECT redis_permit_acquire('$pes', '0', '10 min')");
	$a->query('ROLLBACK');
	is(rc()->cmd('HGET', holders_key($sem), $a_id), '1', 'session scope: still held after ROLLBACK');
	is_deeply(pes_ids($pes), [$sid], 'session scope: the expiring permit too');
	is($a->query("SELECT redis_semaphore_release('$sem')"), 't', 'session scope: released by hand');
	is($a->query("SELECT redis_permit_release('$pes', '$sid')"), 't', 'session scope: released by hand');
	$_->close for $a, $b;
}

# --- 3. Redis unreachable at session end: the watchdog gives them back -------------
{
	my ($sem, $pes) = ('su:sem', 'su:pes');
	my $h = RedisLockTest::Session->new($node);
	my $hpid = $h->pid;
	my $h_id = $h->query('SELECT redis_lock_owner_id()');
	$h->query("SET redislock.command_timeout = '300ms'");
	$h->query("SET redislock.connect_timeout = '300ms'");
	$h->query("SELECT redis_semaphore_try_set_permits('$sem', 2), redis_permit_try_set_permits('$pes', 2)");
	is($h->query("SELECT redis_semaphore_acquire('$sem', 2)"), 't', 'unreachable: H takes 2 permits');
	my $w = $h->query("SELECT redis_permit_acquire('$pes')");
	my $f = $h->query("SELECT redis_permit_acquire('$pes', '0', '10 min')");
	ok($w =~ $HEX && $f =~ $HEX, 'unreachable: and 2 expiring permits (watchdog, 10 min)');
	my $s0 = lock_stats($obs);

	reset_rc();
	$redis->stop;
	ok(!$redis->ping, 'unreachable: Redis stopped');
	ok($h->terminate($T), 'unreachable: H terminated while Redis is down');
	until_ok("unreachable: redis_locks shows H's permits 'releasing'", sub {
		rows_of_pid($hpid) eq "$pes:permit:releasing,$pes:permit:releasing,$sem:semaphore:releasing" })
	  or diag(rows_of_pid($hpid));
	$redis->start;
	until_ok('unreachable: Redis back, the semaphore permits come back',
		sub { (rc()->cmd('GET', $sem) // '') eq '2' });
	is(rc()->cmd('HEXISTS', holders_key($sem), $h_id), 0, "unreachable: H's record is gone");
	until_ok('unreachable: the expiring permits come back', sub {
		(rc()->cmd('GET', $pes) // '') eq '2' && !@{ pes_ids($pes) } });
	until_ok('unreachable: no row left for H', sub { rows_of_pid($hpid) eq '' });
	cmp_ok(lock_stats($obs)->{worker_released}, '>', $s0->{worker_released},
		'unreachable: counted as given back by the worker');
}

# --- 4. crash-restart: back within one lease, nobody renews them ---------------------
{
	my ($sem, $pes) = ('sc:sem', 'sc:pes');
	my $h = RedisLockTest::Session->new($node);
	my $h_id = $h->query('SELECT redis_lock_owner_id()');
	$h->query("SET redislock.watchdog_timeout = '2s'");
	$h->query("SELECT redis_semaphore_try_set_permits('$sem', 1), redis_permit_try_set_permits('$pes', 1)");
	is($h->query("SELECT redis_semaphore_acquire('$sem')"), 't', 'crash: H takes the permit (2 s watchdog lease)');
	my $pid = $h->query("SELECT redis_permit_acquire('$pes')");
	like($pid, $HEX, 'crash: and the expiring permit (2 s watchdog lease)');
	my $probe = FakeRedisson->new(port => $redis->port);
	my $r0 = rc()->cmd('ZSCORE', records_key($sem), $h_id);
	my $p0 = $probe->permit_state($pes)->{members}{$pid};
	ok(defined $r0 && defined $p0, "crash: H's record and permit have expiries ($r0, $p0)");
	until_ok('crash: the watchdog renews both', sub {
		(rc()->cmd('ZSCORE', records_key($sem), $h_id) // 0) > $r0
		  && ($probe->permit_state($pes)->{members}{$pid} // 0) > $p0 });

	my $victim = $h->pid;
	$killed{$victim} = 1;
	ok(kill('KILL', $victim), "crash: kill -9 backend $victim (H)");
	until_ok('crash: the postmaster reports it', sub {
		slurp($node->logfile) =~ /(?:server process|client backend) \(PID $victim\) was terminated by signal 9/ });
	$h->close;
	$obs->close;
	my $b;
	until_ok('crash: the server accepts connections again', sub {
		$b = eval { RedisLockTest::Session->new($node) };
		$b && defined $b->query('SELECT 1');
	});
	$obs = RedisLockTest::observer($node);
	is($obs->query('SELECT count(*) FROM redis_locks'), 0, 'crash: redis_locks is empty after the reinitialisation');

	# nothing renews H's record and permit any more: their scores only stay
	my ($rlast, $plast, @rose);
	my $sample = sub {
		my $r = rc()->cmd('ZSCORE', records_key($sem), $h_id);
		my $p = $probe->permit_state($pes)->{members}{$pid};
		push @rose, "record $rlast -> $r" if defined $r && defined $rlast && $r > $rlast;
		push @rose, "permit $plast -> $p" if defined $p && defined $plast && $p > $plast;
		$rlast = $r if defined $r;
		$plast = $p if defined $p;
	};
	$sample->();
	ok(defined $rlast && defined $plast, "crash: H's record and permit are still there after the restart");
	$b->start("SELECT redis_semaphore_acquire('$sem', 1, '60 s')");
	my $c = RedisLockTest::Session->new($node);
	$c->start("SELECT redis_permit_acquire('$pes', '60 s', '10 min')");
	until_ok('crash: both waiters return', sub { $sample->(); $b->is_done && $c->is_done });
	my ($v, $err) = $b->finish($T);
	is($v, 't', "crash: a new session gets the semaphore permit once H's record ran out") or diag($err);
	($v, $err) = $c->finish($T);
	like($v, $HEX, "crash: a new session gets the expiring permit once H's lease ran out") or diag($err);
	my $cid = $v;
	ok(!@rose, 'crash: nothing renewed them after the crash') or diag(join("\n", @rose));
	is(rc()->cmd('HEXISTS', holders_key($sem), $h_id), 0, "crash: H's record is gone");
	is_deeply(pes_ids($pes), [$cid], "crash: H's permit id is gone, the new one is out");
	is($b->query("SELECT redis_semaphore_release('$sem')"), 't', 'crash: released');
	is($c->query("SELECT redis_permit_release('$pes', '$cid')"), 't', 'crash: released');
	$_->close for $b, $c;
}

my @sig = grep { /was terminated by signal/ } split /\n/, slurp($node->logfile);
my @unexpected = grep { my $l = $_; !grep { $l =~ /\(PID $_\) was terminated by signal 9/ } keys %killed } @sig;
ok(!@unexpected, 'no other process died of a signal') or diag(join("\n", @unexpected));
my @trap = grep { /TRAP:|PANIC:/ } split /\n/, slurp($node->logfile);
ok(!@trap, 'no assertion failure or PANIC') or diag(join("\n", @trap));
$obs->close;
$node->stop('fast');
done_testing();
