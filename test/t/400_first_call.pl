# 400_first_call.pl — every entry point as the first redislock call of a
# fresh session.  State a session sets up on its first call (its owner id,
# table of holds, cleanup memory) must exist before any path needs it: a
# latch wait longer than deadlock_timeout as a session's first call crashed
# the server (the cleanup context was made only with the hold table), and a
# first call of redis_permit_acquire reserved its shared slot before the
# session had a number, so a later owner id made the worker take the live
# session for ended and give its permit to another session.
#
# (a) Every function of the extension, read from the catalog, is made the
#     first call of a fresh session of an unprivileged role and of a
#     superuser, from the table %CALLS below: a function the table lacks
#     fails the test.  Acquisitions wait on a held resource past
#     deadlock_timeout.
# (b) Every kind of wait x every way a wait ends, the wait being the
#     waiter's first call and ended only once its deadlock check is seen
#     (its wait-for edge in Redis, published after deadlock_timeout).
# (c) A permit taken as the first call stays the session's after it draws
#     an owner id and the worker has swept since.
#
# (c) runs first, on a server where nothing else has happened yet.
#
# After each: no crash in the log, the postmaster did not restart, the
# session still answers and holds only what it was granted; nothing is left
# in Redis once every session has ended.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use FakeRedisson;
use Test::More;

my $redis = RedisLockTest::Redis->new;
my $node  = RedisLockTest::node('firstcall', $redis,
	'redislock.deadlock_timeout' => '100ms',
	'restart_after_crash'        => 'on');
my $obs = RedisLockTest::observer($node);
$obs->query('CREATE ROLE rl_user LOGIN');

sub obs
{
	$obs = RedisLockTest::observer($node);
	return $obs;
}

# A query of the observer, once the server accepts connections again (it
# restarts after a crash: the cases after it still run).
sub oq
{
	my ($sql) = @_;
	my $v;
	RedisLockTest::wait_until($RedisLockTest::WAIT, "the observer runs: $sql",
		sub { $v = obs()->query($sql); 1 });
	return $v;
}

# A fresh session of $user ('super': the bootstrap superuser).
sub session
{
	my ($user) = @_;
	my $s;
	RedisLockTest::wait_until($RedisLockTest::WAIT, "a session of $user connects", sub {
		$s = RedisLockTest::Session->new($node, $user eq 'super' ? () : (user => $user));
	});
	return $s;
}

# The server is whole since the last look: no crash in the part of the log
# written since, the postmaster did not restart (its start time, and the
# checkpointer it starts anew when it reinitialises after a crash).
my $log_seen = 0;
my $restart_sql = q{SELECT pg_postmaster_start_time() || ' ' || pid
	FROM pg_stat_activity WHERE backend_type = 'checkpointer'};

my $started;

sub server_whole_ok
{
	my ($what) = @_;
	my $now = oq($restart_sql);
	my $log = slurp($node->logfile);
	my @bad = grep { /terminated by signal|server process .* was terminated|TRAP:|PANIC:|reinitializing/ }
	  split /\n/, substr($log, $log_seen);
	$log_seen = length $log;
	ok(!@bad, "$what: no crash in the server log") or diag(join("\n", @bad));
	is($now, $started, "$what: the postmaster did not restart");
	$started = $now;
}

sub rows_of
{
	my ($pid) = @_;
	return oq("SELECT count(*) FROM redis_locks WHERE pid = $pid");
}

$started = oq($restart_sql);

# --- (c) what the first call takes stays the session's ---------------------------
#
# For every acquiring function of the catalog (a function the table lacks
# fails the test): session A's first redislock call takes the resource (in
# a transaction for the xact ones), A then draws its owner id, and once
# the worker has swept since, the resource is still A's: B cannot take it,
# redis_locks shows it held, the worker gave back nothing of an "ended
# session".  Found first for redis_permit_acquire (its slot recorded
# session number 0), then for its transaction form by the soak.
{
	# function => [ take (A's first call), B's attempt, what B gets,
	#               A's release (or COMMIT for the xact ones) ]
	my $L = "'10 min'";
	my %TAKE = (
		redis_lock_acquire => [ "SELECT redis_lock_acquire('c:lock', '0', $L)",
			"SELECT redis_lock_acquire('c:lock', '0')", 'f',
			"SELECT redis_lock_release('c:lock')" ],
		redis_xact_lock_acquire => [ "SELECT redis_xact_lock_acquire('c:xlock', '0', $L)",
			"SELECT redis_lock_acquire('c:xlock', '0')", 'f', 'COMMIT' ],
		redis_read_lock_acquire => [ "SELECT redis_read_lock_acquire('c:rw', '0', $L)",
			"SELECT redis_write_lock_acquire('c:rw', '0')", 'f',
			"SELECT redis_read_lock_release('c:rw')" ],
		redis_write_lock_acquire => [ "SELECT redis_write_lock_acquire('c:w', '0', $L)",
			"SELECT redis_read_lock_acquire('c:w', '0')", 'f',
			"SELECT redis_write_lock_release('c:w')" ],
		redis_xact_read_lock_acquire => [ "SELECT redis_xact_read_lock_acquire('c:xrw', '0', $L)",
			"SELECT redis_write_lock_acquire('c:xrw', '0')", 'f', 'COMMIT' ],
		redis_xact_write_lock_acquire => [ "SELECT redis_xact_write_lock_acquire('c:xw', '0', $L)",
			"SELECT redis_read_lock_acquire('c:xw', '0')", 'f', 'COMMIT' ],
		redis_lock_acquire_all => [ "SELECT redis_lock_acquire_all(ARRAY['c:m1', 'c:m2'], '0', $L)",
			"SELECT redis_lock_acquire('c:m2', '0')", 'f',
			"SELECT redis_lock_release('c:m1') AND redis_lock_release('c:m2')" ],
		redis_xact_lock_acquire_all => [ "SELECT redis_xact_lock_acquire_all(ARRAY['c:xm1', 'c:xm2'], '0', $L)",
			"SELECT redis_lock_acquire('c:xm2', '0')", 'f', 'COMMIT' ],
		redis_semaphore_acquire => [ "SELECT redis_semaphore_acquire('c:sem', 1, '0')",
			"SELECT redis_semaphore_acquire('c:sem', 1, '0')", 'f',
			"SELECT redis_semaphore_release('c:sem')" ],
		redis_xact_semaphore_acquire => [ "SELECT redis_xact_semaphore_acquire('c:xsem', 1, '0')",
			"SELECT redis_semaphore_acquire('c:xsem', 1, '0')", 'f', 'COMMIT' ],
		redis_permit_acquire => [ "SELECT redis_permit_acquire('c:pool', '0', $L)",
			"SELECT redis_permit_acquire('c:pool', '0')", undef, 'RELEASE' ],
		redis_xact_permit_acquire => [ "SELECT redis_xact_permit_acquire('c:xpool', '0', $L)",
			"SELECT redis_permit_acquire('c:xpool', '0')", undef, 'COMMIT' ],
	);
	my @catalog = split /\n/, oq(q{SELECT string_agg(p.proname, E'\n' ORDER BY p.proname)
		FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
		JOIN pg_extension e ON d.refobjid = e.oid AND e.extname = 'redislock'
		WHERE p.proname LIKE '%\_acquire%'});
	ok(@catalog > 0, '(c) the catalog lists acquiring functions');
	ok(exists $TAKE{$_}, "(c) the table has $_") for @catalog;

	oq("SELECT redis_semaphore_try_set_permits('$_', 1)") for qw(c:sem c:xsem);
	oq("SELECT redis_permit_try_set_permits('$_', 1)") for qw(c:pool c:xpool);
	my (%a, %b, %id);
	for my $f (sort keys %TAKE)
	{
		my ($take, undef, undef, $end) = @{ $TAKE{$f} };
		$a{$f} = session('rl_user');
		$b{$f} = session('rl_user');
		$a{$f}->query('BEGIN') if $end eq 'COMMIT';
		my $got = $a{$f}->query($take);
		if ($f =~ /permit/) { like($got, qr/^[0-9a-f]{32}$/, "(c) $f: A's first call takes the only permit"); }
		else { is($got, 't', "(c) $f: A's first call takes it"); }
		$id{$f} = $got;
		like($a{$f}->query('SELECT redis_lock_owner_id()'), qr/:\d+$/, "(c) $f: A then draws its owner id");
	}

	# The worker's sweeps are seen through the renewals of a watchdog lock
	# with a short lease (one renewal per sweep): the sweep that makes the
	# third renewal after this point began after the second ended, and so
	# took its look at A's slot after A drew its owner id.
	my $ticker = session('super');
	$ticker->query(q{SET redislock.watchdog_timeout = '3s'});
	$ticker->query(q{SELECT redis_lock_acquire('c:ticker')});
	my $r0 = oq('SELECT renewals FROM redis_lock_stats');
	until_ok('(c) the worker has swept at least once since every A drew its owner id',
		sub { oq('SELECT renewals FROM redis_lock_stats') >= $r0 + 3 });

	my $java = FakeRedisson->new(port => $redis->port);
	for my $f (sort keys %TAKE)
	{
		my (undef, $try, $want, $end) = @{ $TAKE{$f} };
		is($b{$f}->query($try), $want, "(c) $f: B does not get what A holds");
		ok(oq("SELECT count(*) FROM redis_locks WHERE pid = " . $a{$f}->pid . " AND state = 'held'") > 0,
			"(c) $f: redis_locks shows A's hold held");
		ok(exists $java->permit_state($f =~ /xact/ ? 'c:xpool' : 'c:pool')->{members}{ $id{$f} },
			"(c) $f: A's permit is still in Redis") if $f =~ /permit/;
		if ($end eq 'RELEASE')
		{
			is($a{$f}->query("SELECT redis_permit_release('c:pool', '$id{$f}')"), 't', "(c) $f: A gives it back");
		}
		elsif ($end eq 'COMMIT') { $a{$f}->query('COMMIT'); }
		else { is($a{$f}->query($end), 't', "(c) $f: A gives it back"); }
	}
	is(slurp($node->logfile) =~ /of the ended session/ ? 1 : 0, 0,
		'(c) the worker released nothing of an "ended session"');
	$_->close for (values %a, values %b, $ticker);
	server_whole_ok('(c)');
}

# --- (a) every function of the catalog as the first call ---------------------------
#
# Held by the setup session for the whole of (a): every acquisition below
# waits for one of these past deadlock_timeout, then gives up.
my $setup = session('super');
$setup->query(q{SELECT redis_lock_acquire('a:held'), redis_lock_acquire('a:fair', NULL, NULL, true),
	redis_write_lock_acquire('a:rw'),
	redis_semaphore_try_set_permits('a:sem', 1), redis_semaphore_acquire('a:sem'),
	redis_permit_try_set_permits('a:pes', 1), redis_latch_try_set_count('a:latch', 1)});
my $held_permit = $setup->query(q{SELECT redis_permit_acquire('a:pes')});
like($held_permit, qr/^[0-9a-f]{32}$/, 'setup holds the only permit of a:pes');

# regprocedure => [ [ SQL, value for rl_user, value for a superuser ], ... ]
# A value 'ERROR nnnnn' is an error with that SQLSTATE; undef is NULL, ''
# void.  %u is replaced by the role's name, so that the roles' sessions use
# names of their own where it matters.
my $W = "'300 ms'";    # three deadlock checks' worth
my %CALLS = (
	'redis_lock_acquire(text,interval,interval,boolean,text)' => [
		[ "SELECT redis_lock_acquire('a:held', $W)", 'f', 'f' ],
		[ "SELECT redis_lock_acquire('a:fair', $W, NULL, true)", 'f', 'f' ],
		[ "SELECT redis_lock_acquire('a:free:%u')", 't', 't' ],
		[ "SELECT redis_lock_acquire('a:free:plain:%u', layout => 'plain')", 't', 't' ],
		[ "SELECT redis_lock_acquire('a:held', $W, layout => 'plain')", 'ERROR 42809', 'ERROR 42809' ] ],
	'redis_xact_lock_acquire(text,interval,interval,boolean,text)' => [
		[ "SELECT redis_xact_lock_acquire('a:held', $W)", 'f', 'f' ],
		[ "SELECT redis_xact_lock_acquire('a:free:%u')", 't', 't' ],
		[ "SELECT redis_xact_lock_acquire('a:free:xplain:%u', layout => 'plain')", 't', 't' ] ],
	'redis_lock_release(text)' => [
		[ "SELECT redis_lock_release('a:held')", 'f', 'f' ] ],
	'redis_read_lock_acquire(text,interval,interval)' => [
		[ "SELECT redis_read_lock_acquire('a:rw', $W)", 'f', 'f' ],
		[ "SELECT redis_read_lock_acquire('a:free:rw:%u')", 't', 't' ] ],
	'redis_write_lock_acquire(text,interval,interval)' => [
		[ "SELECT redis_write_lock_acquire('a:rw', $W)", 'f', 'f' ],
		[ "SELECT redis_write_lock_acquire('a:free:rw:%u')", 't', 't' ] ],
	'redis_xact_read_lock_acquire(text,interval,interval)' => [
		[ "SELECT redis_xact_read_lock_acquire('a:rw', $W)", 'f', 'f' ] ],
	'redis_xact_write_lock_acquire(text,interval,interval)' => [
		[ "SELECT redis_xact_write_lock_acquire('a:rw', $W)", 'f', 'f' ] ],
	'redis_read_lock_release(text)' => [
		[ "SELECT redis_read_lock_release('a:rw')", 'f', 'f' ] ],
	'redis_write_lock_release(text)' => [
		[ "SELECT redis_write_lock_release('a:rw')", 'f', 'f' ] ],
	'redis_lock_acquire_all(text[],interval,interval,text)' => [
		[ "SELECT redis_lock_acquire_all(ARRAY['a:free:m:%u', 'a:held'], $W)", 'f', 'f' ],
		[ "SELECT redis_lock_acquire_all(ARRAY['a:free:pm:%u', 'a:held'], $W, NULL, 'plain')", 'ERROR 42809', 'ERROR 42809' ] ],
	'redis_xact_lock_acquire_all(text[],interval,interval,text)' => [
		[ "SELECT redis_xact_lock_acquire_all(ARRAY['a:free:m:%u', 'a:held'], $W)", 'f', 'f' ] ],
	'redis_semaphore_try_set_permits(text,integer)' => [
		[ "SELECT redis_semaphore_try_set_permits('a:sem', 5)", 'f', 'f' ] ],
	'redis_semaphore_add_permits(text,integer)' => [
		[ "SELECT redis_semaphore_add_permits('a:sem:add:%u', 1)", '', '' ] ],
	'redis_semaphore_acquire(text,integer,interval)' => [
		[ "SELECT redis_semaphore_acquire('a:sem', 1, $W)", 'f', 'f' ] ],
	'redis_xact_semaphore_acquire(text,integer,interval)' => [
		[ "SELECT redis_xact_semaphore_acquire('a:sem', 1, $W)", 'f', 'f' ] ],
	'redis_semaphore_release(text,integer)' => [
		[ "SELECT redis_semaphore_release('a:sem', 1)", 'f', 'f' ] ],
	'redis_semaphore_available(text)' => [
		[ "SELECT redis_semaphore_available('a:sem')", '0', '0' ] ],
	'redis_permit_try_set_permits(text,integer)' => [
		[ "SELECT redis_permit_try_set_permits('a:pes', 5)", 'f', 'f' ] ],
	'redis_permit_set_permits(text,integer)' => [
		[ "SELECT redis_permit_set_permits('a:pes:set:%u', 2)", '', '' ] ],
	'redis_permit_available(text)' => [
		[ "SELECT redis_permit_available('a:pes')", '0', '0' ] ],
	'redis_permit_acquire(text,interval,interval)' => [
		[ "SELECT redis_permit_acquire('a:pes', $W)", undef, undef ] ],
	'redis_xact_permit_acquire(text,interval,interval)' => [
		[ "SELECT redis_xact_permit_acquire('a:pes', $W)", undef, undef ] ],
	'redis_permit_release(text,text)' => [
		[ "SELECT redis_permit_release('a:pes', '00000000000000000000000000000000')", 'f', 'f' ] ],
	'redis_latch_try_set_count(text,bigint)' => [
		[ "SELECT redis_latch_try_set_count('a:latch', 3)", 'f', 'f' ] ],
	'redis_latch_count_down(text)' => [
		[ "SELECT redis_latch_count_down('a:latch:down:%u')", '0', '0' ] ],
	'redis_latch_count(text)' => [
		[ "SELECT redis_latch_count('a:latch')", '1', '1' ] ],
	'redis_latch_await(text,interval)' => [
		[ "SELECT redis_latch_await('a:latch', $W)", 'f', 'f' ],
		# the statement of the crash report, on a latch of its own
		[ "SELECT redis_latch_try_set_count('a:latch:%u', 1), redis_latch_await('a:latch:%u', $W)",
			't', 't' ] ],
	'redis_lock_release_all()' => [
		[ "SELECT redis_lock_release_all()", '0', '0' ] ],
	'redis_lock_force_release(text)' => [
		[ "SELECT redis_lock_force_release('a:free:force')", 'ERROR 42501', 'f' ] ],
	'redis_lock_status(text)' => [
		[ "SELECT locked FROM redis_lock_status('a:held')", 't', 't' ] ],
	'redis_lock_nodes(text)' => [
		[ "SELECT count(*) FROM redis_lock_nodes('a:held')", '1', '1' ] ],
	'redis_lock_fencing_token(text)' => [
		[ "SELECT redis_lock_fencing_token('a:held')", undef, undef ] ],
	'redis_lock_owner_id()' => [
		[ "SELECT redis_lock_owner_id() IS NOT NULL", 't', 't' ] ],
	'redis_locks()' => [
		[ "SELECT count(*) > 0 FROM redis_locks()", 't', 't' ] ],
	'redis_lock_stats()' => [
		[ "SELECT acquires > 0 FROM redis_lock_stats()", 't', 't' ] ],
	'redis_lock_waits()' => [
		[ "SELECT count(*) FROM redis_lock_waits()", '0', '0' ] ],
	'redis_lock_blocking_pids(integer)' => [
		[ "SELECT cardinality(redis_lock_blocking_pids(pg_backend_pid()))", '0', '0' ] ],
);

my @catalog = map { $_->[0] } obs()->rows(q{
	SELECT p.oid::regprocedure::text
	FROM pg_proc p
	JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
	JOIN pg_extension e ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid
	WHERE e.extname = 'redislock' AND d.deptype = 'e'
	ORDER BY 1});
cmp_ok(scalar(@catalog), '>', 30, 'the catalog lists the functions of redislock');
my @missing = grep { !$CALLS{$_} } @catalog;
is_deeply(\@missing, [], 'every function of the catalog has a first call in the table')
  or diag("add to %CALLS: @missing");
my %in_catalog = map { $_ => 1 } @catalog;
is_deeply([ grep { !$in_catalog{$_} } sort keys %CALLS ], [],
	'every function of the table is in the catalog');

for my $fn (@catalog)
{
	my $i = 0;
	for my $call (@{ $CALLS{$fn} // [] })
	{
		$i++;
		for my $role ([ 'rl_user', 1 ], [ 'super', 2 ])
		{
			my ($user, $col) = @$role;
			(my $sql = $call->[0]) =~ s/%u/$user/g;
			my $want = $call->[$col];
			my $what = "(a) $fn #$i as $user";
			my $s = session($user);
			my $pid = $s->pid;
			my ($v, $err, $state) = $s->try($sql);
			if (defined $want && $want =~ /^ERROR (\w+)$/)
			{
				is($state, $1, "$what: fails with $1") or diag($err);
			}
			else
			{
				is($err, undef, "$what: no error");
				is($v, $want, "$what: returns " . ($want // 'NULL'));
			}
			is(eval { $s->query('SELECT 1') }, '1', "$what: the session still answers");
			my $want_rows = ($want // '') eq 't' && $sql =~ /free/ && $fn !~ /xact/ ? 1 : 0;
			is(rows_of($pid), $want_rows, "$what: holds only what it was granted");
			$s->close;
			server_whole_ok($what);
		}
	}
}
until_ok('(a): the sessions\' locks are gone from redis_locks once they ended', sub {
	oq('SELECT count(*) FROM redis_locks WHERE pid <> ' . $setup->pid) == 0;
});
$setup->close;
until_ok('(a): no lock, fair queue or wait-for edge of (a) is left in Redis', sub {
	my @left = (@{ redis_cmd($redis, 'KEYS', 'a:free*') },
		@{ redis_cmd($redis, 'KEYS', 'redislock_waits:*') },
		grep { redis_cmd($redis, 'EXISTS', $_) }
		  ('a:held', 'a:fair', 'a:rw', 'redisson_lock_queue:{a:fair}'));
	@left == 0;
});

# --- (b) every kind of wait x every way it ends ---------------------------------------
#
# kind => holder's statements (the first takes what the waiter waits for),
# the waiter's call with wait W, the holder's release, what the waiter's
# call returns when it times out, how many redis_locks rows a granted wait
# leaves it, and whether the holder's session end frees what it waits for.
my %KINDS = (
	lock => {
		hold    => [ "SELECT redis_lock_acquire('%n')" ],
		wait    => "SELECT redis_lock_acquire('%n', %w)",
		release => "SELECT redis_lock_release('%n')",
		missed  => 'f', granted => 't', rows => 1 },
	fair => {
		hold    => [ "SELECT redis_lock_acquire('%n', NULL, NULL, true)" ],
		wait    => "SELECT redis_lock_acquire('%n', %w, NULL, true)",
		release => "SELECT redis_lock_release('%n')",
		missed  => 'f', granted => 't', rows => 1 },
	xact => {
		hold    => [ "SELECT redis_lock_acquire('%n')" ],
		wait    => "SELECT redis_xact_lock_acquire('%n', %w)",
		release => "SELECT redis_lock_release('%n')",
		missed  => 'f', granted => 't', rows => 0 },
	read => {
		hold    => [ "SELECT redis_write_lock_acquire('%n')" ],
		wait    => "SELECT redis_read_lock_acquire('%n', %w)",
		release => "SELECT redis_write_lock_release('%n')",
		missed  => 'f', granted => 't', rows => 1 },
	write => {
		hold    => [ "SELECT redis_read_lock_acquire('%n')" ],
		wait    => "SELECT redis_write_lock_acquire('%n', %w)",
		release => "SELECT redis_read_lock_release('%n')",
		missed  => 'f', granted => 't', rows => 1 },
	multi => {
		hold    => [ "SELECT redis_lock_acquire('%n:b')" ],
		wait    => "SELECT redis_lock_acquire_all(ARRAY['%n:a', '%n:b'], %w)",
		release => "SELECT redis_lock_release('%n:b')",
		missed  => 'f', granted => 't', rows => 2 },
	semaphore => {
		hold    => [ "SELECT redis_semaphore_try_set_permits('%n', 1)", "SELECT redis_semaphore_acquire('%n')" ],
		wait    => "SELECT redis_semaphore_acquire('%n', 1, %w)",
		release => "SELECT redis_semaphore_release('%n')",
		missed  => 'f', granted => 't', rows => 1 },
	permit => {
		hold    => [ "SELECT redis_permit_try_set_permits('%n', 1)", "SELECT redis_permit_acquire('%n')" ],
		wait    => "SELECT redis_permit_acquire('%n', %w)",
		release => "SELECT redis_permit_release('%n', '%id')",
		missed  => undef, granted => qr/^[0-9a-f]{32}$/, rows => 1 },
	latch => {
		hold    => [ "SELECT redis_latch_try_set_count('%n', 1)" ],
		wait    => "SELECT redis_latch_await('%n', %w)",
		release => "SELECT redis_latch_count_down('%n')",
		missed  => 'f', granted => 't', rows => 0,
		no_holder => 1 },    # a latch has no holder whose end opens it
);

# ending => how the waiter's statement is prepared and how the wait is ended.
# Timeouts are 4 s: well past deadlock_timeout (100 ms), and the wait-for
# edge, which shows the deadlock check ran, is seen before they end.
my %ENDINGS = (
	own_timeout       => { w => "'4 s'" },
	cancel            => { w => 'NULL', end => sub { $_[0]->cancel }, state => '57014' },
	statement_timeout => { w => 'NULL', pre => "SET statement_timeout = '4s'", state => '57014' },
	lock_timeout      => { w => 'NULL', pre => "SET lock_timeout = '4s'", state => '55P03' },
	terminate         => { w => 'NULL', end => sub { $_[0]->terminate }, gone => 1 },
	holder_release    => { w => 'NULL', granted => 1 },
	holder_end        => { w => 'NULL', granted => 1, holder_end => 1 },
);

# The waiter's wait-for edge (deadlock.c) in Redis: its deadlock check ran.
sub edge_of
{
	my ($pid) = @_;
	my $cursor = 0;
	do
	{
		my $r = redis_cmd($redis, 'SCAN', $cursor, 'MATCH', 'redislock_waits:*', 'COUNT', 1000);
		$cursor = $r->[0];
		for my $k (@{ $r->[1] })
		{
			my $p = redis_cmd($redis, 'HGET', $k, 'pid');
			return $k if defined $p && $p eq $pid;
		}
	} while ($cursor ne '0');
	return undef;
}

# The waiter's statement's outcome, also from a backend that crashed.
sub finish_of
{
	my ($waiter) = @_;
	my @r = eval { $waiter->finish($RedisLockTest::WAIT) };
	return @r ? @r : (undef, $@, 'died');
}

my @names;
for my $kind (sort keys %KINDS)
{
	my $k = $KINDS{$kind};
	for my $ending (sort keys %ENDINGS)
	{
		my $e = $ENDINGS{$ending};
		next if $e->{holder_end} && $k->{no_holder};
		my $what = "(b) $kind wait, ended by $ending";
		my $n = "b:$kind:$ending";
		push @names, [ $kind, $n ];
		my $holder = session('rl_user');
		my $id;
		for my $h (@{ $k->{hold} })
		{
			(my $sql = $h) =~ s/%n/$n/g;
			$id = $holder->query($sql);
		}
		my $waiter = session('rl_user');
		my $pid = $waiter->pid;
		$waiter->query($e->{pre}) if $e->{pre};
		(my $sql = $k->{wait}) =~ s/%n/$n/g;
		$sql =~ s/%w/$e->{w}/g;
		$waiter->start($sql);
		waits_ok($waiter, "$what: the waiter");
		until_ok("$what: the waiter's deadlock check ran (its wait-for edge is in Redis)",
			sub { defined edge_of($pid) || $waiter->is_done });
		ok(!$waiter->is_done, "$what: the waiter still waits after its deadlock check");
		until_ok("$what: redis_lock_waits shows the waiter", sub {
			oq("SELECT count(*) FROM redis_lock_waits WHERE pid = $pid") > 0 || $waiter->is_done;
		});

		my ($v, $err, $state);
		if ($e->{end})
		{
			($v, $err, $state) = eval { $e->{end}->($waiter) };
			$err //= $@ if $@;
		}
		elsif ($e->{granted})
		{
			if ($e->{holder_end})
			{
				$holder->close;
			}
			else
			{
				(my $rel = $k->{release}) =~ s/%n/$n/g;
				$rel =~ s/%id/$id/g;
				$holder->try($rel);
			}
			($v, $err, $state) = finish_of($waiter);
		}
		else
		{
			($v, $err, $state) = finish_of($waiter);
		}

		if ($e->{gone})
		{
			ok($v, "$what: the waiter's backend is gone");
		}
		elsif ($e->{state})
		{
			is($state, $e->{state}, "$what: the wait ends with $e->{state}") or diag($err // '');
		}
		elsif ($e->{granted})
		{
			is($err, undef, "$what: no error");
			if (ref $k->{granted}) { like($v // '', $k->{granted}, "$what: the waiter is granted") }
			else { is($v, $k->{granted}, "$what: the waiter is granted") }
		}
		else
		{
			is($err, undef, "$what: no error");
			is($v, $k->{missed}, "$what: the wait times out");
		}

		if (!$e->{gone})
		{
			is(eval { $waiter->query('SELECT 1') }, '1', "$what: the waiter's session still answers");
			is(rows_of($pid), $e->{granted} ? $k->{rows} : 0,
				"$what: the waiter holds only what it was granted");
			ok(defined eval { $waiter->query('SELECT redis_lock_release_all()') },
				"$what: the waiter's session can still use redislock");
		}
		server_whole_ok($what);
		$waiter->close;
		$holder->close;
		until_ok("$what: the sessions' locks are gone once they ended",
			sub { oq("SELECT count(*) FROM redis_locks") == 0 });
	}
}

# Nothing left in Redis: no lock, queue, waiting writer's mark, semaphore
# record or wait-for edge; every semaphore and pool has its permit back.
until_ok('(b): no wait-for edge is left in Redis', sub {
	my $r = redis_cmd($redis, 'KEYS', 'redislock_waits:*');
	@$r == 0;
});
for my $kn (@names)
{
	my ($kind, $n) = @$kn;
	if ($kind eq 'semaphore')
	{
		is(oq("SELECT redis_semaphore_available('$n')"), '1', "(b) $n: the permit is back");
		is(redis_cmd($redis, 'HLEN', "redislock_semaphore_holders:{$n}"), 0,
			"(b) $n: no holder is recorded");
	}
	elsif ($kind eq 'permit')
	{
		is(oq("SELECT redis_permit_available('$n')"), '1', "(b) $n: the permit is back");
	}
	elsif ($kind ne 'latch')
	{
		my @left = grep { redis_cmd($redis, 'EXISTS', $_) }
		  ($n, "$n:a", "$n:b", "redisson_lock_queue:{$n}", "redisson_lock_timeout:{$n}",
		   "redislock_rwlock_writer:{$n}");
		is_deeply(\@left, [], "(b) $n: nothing of it is left in Redis");
	}
}

done_testing();
