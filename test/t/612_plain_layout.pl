# 612_plain_layout.pl — the plain key layout (issue 31) from SQL, end to end,
# with real redis-servers and concurrent PostgreSQL sessions, each step
# observed on the key itself (redis-cli GET/PTTL/TYPE): the key is the name,
# its value redis_lock_owner_id().
#   - the ways to choose it (layout => 'plain', SET, SET LOCAL, ALTER ROLE,
#     ALTER DATABASE; the argument over the setting); re-entry counted in
#     the session; transaction scope; fixed lease (PX); the watchdog over
#     several watchdog_timeouts; session end (disconnect,
#     pg_terminate_backend) and the worker's clean-up of an ended session;
#   - a key whose value is not ours: never deleted or extended by release,
#     renewal, session end or the worker; the hold is lost (WARNING,
#     redis_locks state, on_lock_lost = cancel, the commit guard);
#   - multi-locks all or none; refusals (fair, the Redisson-only functions,
#     a bad layout, a key of the other layout, a semaphore's or latch's
#     count) with nothing written;
#   - views and fencing tokens; waits woken by a SQL release, a DEL with and
#     without keyspace notifications, a foreign key's expiry, releases no
#     event tells of (notifications turned off, FLUSHDB), Spring
#     Integration's unlock channel both ways, force release; a waiter
#     cancelled or timed out; a deadlock between plain locks;
#   - Redlock over 3 masters (restore after an empty restart) and a Redis
#     Cluster of 3 masters (waiters woken by a SQL release, a DEL with and
#     without keyspace notifications, Spring's unlock).
# Wake latencies are printed (diag), never asserted.
# Takes about 25 s (PostgreSQL 15, 2 cores; a 3-master cluster, 3 Redlock
# masters and one more redis-server among it).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib", "$FindBin::RealBin/../redisson";
use RedisLockTest;
use IPC::Run ();
use Time::HiRes qw(time sleep);
use Test::More;

my $T = 60;    # bound of anything that should happen "at once"

my $redis = RedisLockTest::Redis->new(appendonly => 1);
my $node = RedisLockTest::node('plain', $redis,
	'redislock.watchdog_timeout' => '1s',
	'max_connections' => '40');
my $obs = RedisLockTest::observer($node);
my $a = RedisLockTest::Session->new($node);
my $b = RedisLockTest::Session->new($node);
my $owner_a = $a->query('SELECT redis_lock_owner_id()');
my $owner_b = $b->query('SELECT redis_lock_owner_id()');
$obs->query('CREATE TABLE t (v int)');
$obs->query('CREATE ROLE plainrole LOGIN');
$obs->query('GRANT ALL ON t TO plainrole');
$obs->query("ALTER ROLE plainrole SET redislock.layout = 'plain'");
$obs->query('CREATE DATABASE plaindb');
$node->safe_psql('plaindb', "CREATE EXTENSION redislock; ALTER DATABASE plaindb SET redislock.layout = 'plain'");

sub cli { $redis->cli(@_) }
sub value_of { my $v = cli('GET', $_[0]); return $v eq '' ? undef : $v }
sub state_of
{
	return $obs->query("SELECT string_agg(state || '/' || layout, ',') FROM redis_locks WHERE name = '$_[0]'");
}

# --- 1. the ways to choose plain: the key is the name, the value our owner id ---
my @ways = (
	[ 'layout argument', sub { $_[0]->query("SELECT redis_lock_acquire('$_[1]', layout => 'plain')") } ],
	[ 'SET redislock.layout', sub {
		$_[0]->query("SET redislock.layout = 'plain'");
		my $v = $_[0]->query("SELECT redis_lock_acquire('$_[1]')");
		$_[0]->query('RESET redislock.layout');
		return $v;
	} ],
	[ 'SET LOCAL redislock.layout', sub {
		my $v = $_[0]->query("BEGIN; SET LOCAL redislock.layout = 'plain'; SELECT redis_lock_acquire('$_[1]')");
		$_[0]->query('COMMIT');
		is($_[0]->query('SHOW redislock.layout'), 'redisson', 'SET LOCAL: the setting ends with the transaction');
		return $v;
	} ],
	[ 'ALTER DATABASE ... SET', sub {
		my $s = RedisLockTest::Session->new($node, dbname => 'plaindb');
		$_[2]{session} = $s;
		return $s->query("SELECT redis_lock_acquire('$_[1]')");
	} ],
	[ 'layout => NULL under SET plain', sub {
		my $v = $_[0]->query("SET redislock.layout = 'plain'; SELECT redis_lock_acquire('$_[1]', layout => NULL)");
		$_[0]->query('RESET redislock.layout');
		return $v;
	} ],
	[ 'ALTER ROLE ... SET', sub {
		my $s = RedisLockTest::Session->new($node, user => 'plainrole');
		$_[2]{session} = $s;
		return $s->query("SELECT redis_lock_acquire('$_[1]')");
	} ],
);
for my $w (@ways)
{
	my ($what, $take) = @$w;
	my $name = "w:$what";
	$name =~ s/[^\w:]+/_/g;
	my %ctx;
	is($take->($a, $name, \%ctx), 't', "$what: acquired");
	my $s = $ctx{session} // $a;
	my $owner = $s->query('SELECT redis_lock_owner_id()');
	is(cli('TYPE', $name), 'string', "$what: the key is the name, a string");
	is(value_of($name), $owner, "$what: its value is redis_lock_owner_id()");
	cmp_ok(cli('PTTL', $name), '>', 0, "$what: with a lease (PX)");
	is(state_of($name), 'held/plain', "$what: redis_locks shows it held, layout plain");
	is($s->query("SELECT redis_lock_release('$name')"), 't', "$what: released");
	is(cli('EXISTS', $name), 0, "$what: the key is gone");
	$s->close if $ctx{session};
}
# the argument wins over the setting
$a->query("SET redislock.layout = 'plain'");
is($a->query("SELECT redis_lock_acquire('w:redisson', layout => 'redisson')"), 't', "layout => 'redisson' under SET plain: acquired");
is(cli('TYPE', 'w:redisson') . '/' . cli('HEXISTS', 'w:redisson', $owner_a), 'hash/1', "layout => 'redisson' under SET plain: a Redisson hash");
is(state_of('w:redisson'), 'held/redisson', "layout => 'redisson' under SET plain: redis_locks layout redisson");
is($a->query("SELECT redis_lock_release('w:redisson')"), 't', "layout => 'redisson' under SET plain: released");
$a->query('RESET redislock.layout');
is(cli('EXISTS', 'w:redisson'), 0, "layout => 'redisson' under SET plain: gone");

# --- 2. re-entry is counted in the session: one string, gone at the last release
{
	is($a->query("SELECT count(*) FILTER (WHERE redis_lock_acquire('re:1', layout => 'plain')) FROM generate_series(1, 3)"),
		3, 're-entry: acquired 3 times');
	is($obs->query("SELECT hold_count FROM redis_locks WHERE name = 're:1'"), 3, 're-entry: hold_count 3');
	is(cli('TYPE', 're:1') . '=' . value_of('re:1'), "string=$owner_a", 're-entry: still one string, our value');
	for my $i (1 .. 2)
	{
		is($a->query("SELECT redis_lock_release('re:1')"), 't', "re-entry: release $i of 3");
		is(value_of('re:1'), $owner_a, "re-entry: the key stays after release $i");
	}
	is($a->query("SELECT redis_lock_release('re:1')"), 't', 're-entry: release 3 of 3');
	is(cli('EXISTS', 're:1'), 0, 're-entry: the key is gone after the last release');
}

# --- 3. transaction scope ---------------------------------------------------------
for my $end (qw(COMMIT ROLLBACK))
{
	$a->query('BEGIN');
	is($a->query("SELECT redis_xact_lock_acquire('x:$end', layout => 'plain')"), 't', "xact: acquired ($end)");
	is(value_of("x:$end"), $owner_a, "xact: key holds our value before $end");
	$a->query($end);
	is(cli('EXISTS', "x:$end"), 0, "xact: the key is gone at $end");
	ok(!defined state_of("x:$end"), "xact: no redis_locks row after $end");
}

# --- 4. fixed lease: SET ... PX; the watchdog keeps a watchdog-mode key ------------
{
	is($a->query("SELECT redis_lock_acquire('l:fixed', '0', '1 min', layout => 'plain')"), 't', 'fixed lease: acquired');
	my $pttl = cli('PTTL', 'l:fixed');
	ok($pttl > 50_000 && $pttl <= 60_000, "fixed lease: PTTL $pttl is the 1 min lease");
	is($obs->query("SELECT renewal FROM redis_locks WHERE name = 'l:fixed'"), 'fixed', 'fixed lease: renewal fixed');
	is($a->query("SELECT redis_lock_release('l:fixed')"), 't', 'fixed lease: released');

	is($a->query("SELECT redis_lock_acquire('l:wd', layout => 'plain')"), 't', 'watchdog: acquired (1 s lease)');
	cmp_ok(cli('PTTL', 'l:wd'), '<=', 1000, 'watchdog: PTTL at most the 1 s watchdog_timeout');
	# 4 s = 4 leases: without renewal the key would be gone after the first
	my ($end, $kept, $max_pttl) = (time() + 4, 1, 0);
	while (time() < $end)
	{
		my ($v, $p) = (value_of('l:wd'), cli('PTTL', 'l:wd'));
		$kept = 0 unless defined $v && $v eq $owner_a && $p > 0;
		sleep 0.1;
	}
	ok($kept, 'watchdog: the key kept our value through 4 watchdog_timeouts');
	is(state_of('l:wd'), 'held/plain', 'watchdog: still held');
	is($a->query("SELECT redis_lock_release('l:wd')"), 't', 'watchdog: released');
	is(cli('EXISTS', 'l:wd'), 0, 'watchdog: key gone');
}

# --- 5. session end deletes our keys --------------------------------------------------
for my $how ([ 'disconnect', sub { $_[0]->close; 1 } ], [ 'pg_terminate_backend', sub { $_[0]->terminate($T) } ])
{
	my ($what, $end) = @$how;
	my $s = RedisLockTest::Session->new($node);
	my $pid = $s->pid;
	is($s->query("SELECT redis_lock_acquire('e:wd', layout => 'plain') AND redis_lock_acquire('e:fixed', '0', '10 min', layout => 'plain')"),
		't', "$what: a watchdog and a 10 min fixed plain lock");
	ok($end->($s), "$what: session ended");
	until_ok("$what: both keys gone", sub { cli('EXISTS', 'e:wd', 'e:fixed') == 0 });
	until_ok("$what: no rows left", sub {
		!defined $obs->query("SELECT 1 FROM redis_locks WHERE pid = $pid") });
}

# --- 6. a key whose value is not ours is never deleted or extended ------------------
{
	# renewal: the watchdog finds the value changed: lost, the other value stays
	is($a->query("SELECT redis_lock_acquire('f:wd', layout => 'plain')"), 't', 'foreign: A holds f:wd (watchdog)');
	is(cli('SET', 'f:wd', 'someone-else', 'PX', 600_000), 'OK', 'foreign: f:wd overwritten by another client');
	until_ok("foreign: redis_locks shows f:wd lost", sub { (state_of('f:wd') // '') eq 'lost/plain' });
	until_ok('foreign: server log WARNING names f:wd', sub {
		slurp($node->logfile) =~ /WARNING:  Redis lock "f:wd" held by the session with PID ${\ $a->pid} was lost/ });
	my $pttl = cli('PTTL', 'f:wd');
	cmp_ok($pttl, '>', 500_000, "foreign: the other value's PX was not renewed down or up ($pttl ms)");
	my ($v, $err) = $a->try("SELECT redis_lock_release('f:wd')");
	is($v, 'f', 'foreign: the release of the lost lock returns false') or diag($err);
	ok((grep { /WARNING/ && /f:wd/ } $a->notices), 'foreign: with a WARNING naming it');
	is(value_of('f:wd'), 'someone-else', 'foreign: the other value survives the release');

	# release of a fixed-lease hold (no renewal to notice it first)
	is($a->query("SELECT redis_lock_acquire('f:fixed', '0', '10 min', layout => 'plain')"), 't', 'foreign: A holds f:fixed (10 min)');
	cli('SET', 'f:fixed', 'someone-else');
	($v, $err) = $a->try("SELECT redis_lock_release('f:fixed')");
	is($v, 'f', 'foreign: release of an overwritten fixed hold returns false') or diag($err);
	is(value_of('f:fixed') . '/' . cli('PTTL', 'f:fixed'), 'someone-else/-1', 'foreign: the other value survives, no TTL added');

	# session end
	my $s = RedisLockTest::Session->new($node);
	is($s->query("SELECT redis_lock_acquire('f:end', '0', '10 min', layout => 'plain')"), 't', 'foreign: S holds f:end');
	cli('SET', 'f:end', 'someone-else');
	my $pid = $s->pid;
	ok($s->terminate($T), 'foreign: S terminated');
	until_ok('foreign: no rows left for S', sub { !defined $obs->query("SELECT 1 FROM redis_locks WHERE pid = $pid") });
	is(value_of('f:end'), 'someone-else', 'foreign: session end left the other value');

	# on_lock_lost = cancel: a statement of the holder is ended
	my $c = RedisLockTest::Session->new($node);
	$c->query("SET redislock.on_lock_lost = 'cancel'");
	is($c->query("SELECT redis_lock_acquire('f:cancel', layout => 'plain')"), 't', 'on_lock_lost: C holds f:cancel');
	$c->start('SELECT pg_sleep(120)');
	until_ok('on_lock_lost: C sleeps', sub {
		($obs->query('SELECT wait_event FROM pg_stat_activity WHERE pid = ' . $c->pid) // '') eq 'PgSleep' });
	cli('SET', 'f:cancel', 'someone-else');
	(undef, $err, my $state) = $c->finish($T);
	is($state, '57014', 'on_lock_lost: the statement is cancelled (57014)');
	told_like($node, $err, $c->pid, qr/f:cancel/, 'on_lock_lost: the cancel names the lock');
	is(value_of('f:cancel'), 'someone-else', 'on_lock_lost: the other value survives');
	$c->try("SELECT redis_lock_release('f:cancel')");
	$c->close;
	cli('DEL', 'f:wd', 'f:fixed', 'f:end', 'f:cancel');
}

# --- 7. the worker's clean-up of an ended session: ours deleted, another's kept -------
{
	my $h = RedisLockTest::Session->new($node);
	my $pid = $h->pid;
	$h->query("SET redislock.command_timeout = '300ms'; SET redislock.connect_timeout = '300ms'");
	is($h->query("SELECT redis_lock_acquire('o:ours', '0', '10 min', layout => 'plain') AND redis_lock_acquire('o:theirs', '0', '10 min', layout => 'plain')"),
		't', 'worker: H holds o:ours and o:theirs (10 min)');
	$redis->stop;
	ok($h->terminate($T), 'worker: H terminated while Redis is down');
	until_ok("worker: both 'releasing'", sub {
		($obs->query("SELECT string_agg(state, ',' ORDER BY name) FROM redis_locks WHERE pid = $pid") // '') eq 'releasing,releasing' });
	# another client takes o:theirs while Redis is down: its write, in the AOF
	my ($incr) = glob($redis->dir . '/appendonlydir/*.incr.aof');
	ok(defined $incr, 'worker: the AOF increment file') or diag(join ' ', glob($redis->dir . '/*'));
	open my $fh, '>>', $incr or die "$incr: $!";
	print $fh "*3\r\n\$3\r\nSET\r\n\$8\r\no:theirs\r\n\$12\r\nsomeone-else\r\n";
	close $fh;
	$redis->start;
	until_ok('worker: o:ours deleted', sub { cli('EXISTS', 'o:ours') == 0 });
	until_ok('worker: no rows left for H', sub {
		!defined $obs->query("SELECT 1 FROM redis_locks WHERE pid = $pid") });
	is(value_of('o:theirs') . '/' . cli('PTTL', 'o:theirs'), 'someone-else/-1',
		'worker: the other value survives, no TTL added');
	cli('DEL', 'o:theirs');
	# the sessions' connections went with the restart; they reconnect
}

# --- 8. multi-locks: all or none -----------------------------------------------------
{
	cli('SET', 'm:2', 'someone-else', 'PX', 600_000);
	is($a->query("SELECT redis_lock_acquire_all(ARRAY['m:1','m:2','m:3'], '0', NULL, 'plain')"), 'f',
		'all: refused while m:2 has another value');
	is(cli('EXISTS', 'm:1', 'm:3'), 0, 'all: nothing written');
	is(value_of('m:2'), 'someone-else', 'all: m:2 untouched');
	cli('DEL', 'm:2');
	is($a->query("SELECT redis_lock_acquire_all(ARRAY['m:1','m:2','m:3'], '0', NULL, 'plain')"), 't', 'all: taken once m:2 is free');
	is(join(',', map { value_of("m:$_") // 'none' } 1 .. 3), join(',', ($owner_a) x 3), 'all: each key holds our value');
	for my $i (1 .. 3)
	{
		is($a->query("SELECT redis_lock_release('m:$i')"), 't', "all: m:$i released");
		is(cli('EXISTS', "m:$i"), 0, "all: m:$i gone");
	}
	$a->query('BEGIN');
	is($a->query("SELECT redis_xact_lock_acquire_all(ARRAY['mx:1','mx:2'], '0', NULL, 'plain')"), 't', 'xact all: taken');
	is(cli('EXISTS', 'mx:1', 'mx:2'), 2, 'xact all: both keys');
	$a->query('COMMIT');
	is(cli('EXISTS', 'mx:1', 'mx:2'), 0, 'xact all: gone at COMMIT');
}

# --- 9. refusals: clear errors, nothing written ------------------------------------
{
	my $dbsize = sub { scalar(cli('DBSIZE')) };
	my $n0 = $dbsize->();
	my @refused = (
		[ 'fair with plain', "SELECT redis_lock_acquire('r:k', '0', NULL, true, 'plain')", '0A000', qr/fair locks need the redisson layout/ ],
		[ 'fair under SET plain', "SET redislock.layout = 'plain'; SELECT redis_lock_acquire('r:k', '0', NULL, true)", '0A000', qr/fair locks need the redisson layout/ ],
		[ 'fair xact with plain', "SELECT redis_xact_lock_acquire('r:k', '0', NULL, true, 'plain')", '0A000', qr/fair locks need the redisson layout/ ],
		[ 'bad layout', "SELECT redis_lock_acquire('r:k', layout => 'flat')", '22023', qr/invalid layout "flat"/ ],
		[ 'bad layout, xact', "SELECT redis_xact_lock_acquire('r:k', layout => 'Plain')", '22023', qr/invalid layout "Plain"/ ],
		[ 'bad setting', "SET redislock.layout = 'flat'", '22023', qr/invalid value for parameter "redislock.layout"/ ],
		[ 'bad layout, all', "SELECT redis_lock_acquire_all(ARRAY['r:k'], layout => 'flat')", '22023', qr/invalid layout/ ],
	);
	my @redisson_only = (
		"SELECT redis_read_lock_acquire('r:k', '0')",
		"SELECT redis_write_lock_acquire('r:k', '0')",
		"BEGIN; SELECT redis_xact_read_lock_acquire('r:k', '0')",
		"BEGIN; SELECT redis_xact_write_lock_acquire('r:k', '0')",
		"BEGIN; SELECT redis_xact_semaphore_acquire('r:k', 1, '0')",
		"BEGIN; SELECT redis_xact_permit_acquire('r:k', '0')",
		"SELECT redis_semaphore_try_set_permits('r:k', 2)",
		"SELECT redis_semaphore_add_permits('r:k', 2)",
		"SELECT redis_semaphore_acquire('r:k', 1, '0')",
		"SELECT redis_permit_try_set_permits('r:k', 2)",
		"SELECT redis_permit_set_permits('r:k', 2)",
		"SELECT redis_permit_acquire('r:k', '0')",
		"SELECT redis_latch_try_set_count('r:k', 2)",
		"SELECT redis_latch_count_down('r:k')",
		"SELECT redis_latch_await('r:k', '0')",
	);
	push @refused, map { [ "plain: $_", "SET redislock.layout = 'plain'; $_", '0A000', qr/need the redisson layout/ ] } @redisson_only;
	for my $r (@refused)
	{
		my ($what, $sql, $code, $re) = @$r;
		my (undef, $err, $state) = $a->try($sql);
		is($state, $code, "$what: $code");
		like($err // '', $re, "$what: message");
		$a->try('ROLLBACK');
		$a->query('RESET redislock.layout');
	}
	is($dbsize->(), $n0, 'refusals: nothing written to Redis');

	# a key of the other layout: 42809 naming the layout it has, nothing changed
	is($b->query("SELECT redis_lock_acquire('r:hash', '0', '10 min')"), 't', 'B holds r:hash (redisson)');
	is($b->query("SELECT redis_lock_acquire('r:str', '0', '10 min', layout => 'plain')"), 't', 'B holds r:str (plain)');
	my @before = (join(',', cli('HGETALL', 'r:hash')), value_of('r:str'));
	for my $c (
		[ "SELECT redis_lock_acquire('r:hash', '0', layout => 'plain')", 'redisson' ],
		[ "SELECT redis_lock_acquire('r:hash', '5 s', layout => 'plain')", 'redisson' ],
		[ "SELECT redis_lock_acquire_all(ARRAY['r:free','r:hash'], '0', NULL, 'plain')", 'redisson' ],
		[ "SELECT redis_lock_acquire('r:str', '0')", 'plain' ],
		[ "SELECT redis_lock_acquire('r:str', '5 s')", 'plain' ],
		[ "SELECT redis_lock_acquire_all(ARRAY['r:free','r:str'], '0')", 'plain' ],
		[ "BEGIN; SELECT redis_xact_lock_acquire('r:str', '0'); COMMIT", 'plain' ])
	{
		my ($sql, $has) = @$c;
		my (undef, $err, $state) = $a->try($sql);
		$a->try('ROLLBACK');
		is($state, '42809', "other layout: $sql: 42809");
		like($err // '', qr/has the $has layout/, "other layout: $sql: names the $has layout");
	}
	# a plain key where the Redisson-only kinds are asked for: an error naming
	# the plain layout (never Redis's raw WRONGTYPE), no change
	for my $sql ("SELECT redis_lock_acquire('r:str', '0', NULL, true)",
		"SELECT redis_read_lock_acquire('r:str', '0')",
		"SELECT redis_write_lock_acquire('r:str', '0')",
		"BEGIN; SELECT redis_xact_write_lock_acquire('r:str', '0'); COMMIT")
	{
		my (undef, $err, $state) = $a->try($sql);
		$a->try('ROLLBACK');
		is($state, '42809', "plain key: $sql: 42809");
		like($err // '', qr/has the plain layout/, "plain key: $sql: names the plain layout");
		unlike($err // '', qr/WRONGTYPE/, "plain key: $sql: no raw WRONGTYPE");
	}
	is_deeply([ join(',', cli('HGETALL', 'r:hash')), value_of('r:str') ], \@before, 'other layout: both keys unchanged');
	is(cli('EXISTS', 'r:free'), 0, 'other layout: nothing else written');
	ok(!defined $obs->query("SELECT 1 FROM redis_locks WHERE pid = " . $a->pid), 'other layout: A holds nothing');
	# the session itself holds the name in the other layout: told so, before Redis
	for my $c (
		[ "SELECT redis_lock_acquire('r:hash', '0', layout => 'plain')", 'redisson' ],
		[ "SELECT redis_lock_acquire('r:str', '0')", 'plain' ],
		[ "SELECT redis_read_lock_acquire('r:str', '0')", 'plain' ])
	{
		my ($sql, $has) = @$c;
		my (undef, $err, $state) = $b->try($sql);
		is($state, '55000', "own hold: $sql: 55000");
		like($err // '', qr/this session holds "r:\w+" in the $has layout/, "own hold: $sql: names the $has layout");
	}
	is_deeply([ join(',', cli('HGETALL', 'r:hash')), value_of('r:str') ], \@before, 'own hold: both keys unchanged');
	$b->query("SELECT redis_lock_release('r:hash'), redis_lock_release('r:str')");
}

# A Redisson semaphore's or latch's count (a string holding an integer) is
# not a plain lock: a lock of either layout is refused there, force release
# deletes nothing.
{
	$a->query("SELECT redis_semaphore_try_set_permits('n:sem', 3)");
	$a->query("SELECT redis_latch_try_set_count('n:latch', 2)");
	for my $name ('n:sem', 'n:latch')
	{
		my $v0 = value_of($name);
		for my $sql ("SELECT redis_lock_acquire('$name', '0')",
			"SELECT redis_lock_acquire_all(ARRAY['$name'], '0')",
			"SELECT redis_lock_force_release('$name')",
			"SET redislock.layout = 'plain'; SELECT redis_lock_force_release('$name')")
		{
			my (undef, $err, $state) = $a->try($sql);
			$a->query('RESET redislock.layout');
			is($state, '42809', "count: $sql: 42809");
			unlike($err // '', qr/has the plain layout/, "count: $sql: not called a plain lock");
		}
		my (undef, $err, $state) = $a->try("SELECT holders FROM redis_lock_status('$name')");
		is($state, '42809', "count: redis_lock_status('$name') refuses it (42809), its count unread");
		for my $sql ("SELECT redis_lock_acquire('$name', NULL, layout => 'plain')",
			"SELECT redis_lock_acquire_all(ARRAY['n:free', '$name'], NULL, NULL, 'plain')")
		{
			my (undef, $err, $state) = $a->try($sql);
			is($state, '42809', "count: $sql: 42809 at once (no wait for a count without expiry)");
			like($err // '', qr/has the redisson layout/, "count: $sql: names the redisson layout");
		}
		cli('SET', 'n:homemade', '1', 'PX', 600_000);
		is($a->query("SELECT redis_lock_acquire('n:homemade', '0', layout => 'plain')"), 'f',
			'count: an integer with an expiry (SET k 1 NX PX, a homemade lock) is another holder');
		cli('DEL', 'n:homemade');
		is(value_of($name), $v0, "count: $name unchanged ($v0)");
		$a->try("SELECT redis_lock_release('$name')");    # (held only if taken wrongly)
		$a->notices;
		cli('DEL', $name);
	}
}

# docs/security.md: redis_lock_status is open to every user. A string at a
# name (another client's token, an application's secret) is shown as a
# plain lock, its value only to roles with pg_read_all_stats.
{
	cli('SET', 'app:secret', 'sk_live_0123456789abcdef');
	my $u = RedisLockTest::Session->new($node, user => 'plainrole');
	my ($v) = $u->try("SELECT holders::text FROM redis_lock_status('app:secret')");
	is($v, '{(hidden)}', "an ordinary role cannot read another application's string through redis_lock_status");
	($v) = $u->try("SELECT holders::text FROM redis_lock_nodes('app:secret')");
	is($v, '{(hidden)}', '... nor through redis_lock_nodes');
	$u->close;
	$obs->query('GRANT pg_read_all_stats TO plainrole');
	$u = RedisLockTest::Session->new($node, user => 'plainrole');
	is($u->query("SELECT holders::text FROM redis_lock_status('app:secret')"), '{sk_live_0123456789abcdef}',
		'a role with pg_read_all_stats reads the token');
	$u->close;
	$obs->query('REVOKE pg_read_all_stats FROM plainrole');
	$u = RedisLockTest::Session->new($node, user => 'plainrole');
	is($u->query("SELECT redis_lock_acquire('app:own', '0', '1 min', layout => 'plain')"), 't',
		'a SQL holder of a plain lock ...');
	is($u->query("SELECT holders = ARRAY[redis_lock_owner_id()] FROM redis_lock_status('app:own')"), 't',
		'... is shown by its owner id to everyone (redis_locks shows it anyway)');
	is($u->query("SELECT redis_lock_release('app:own')"), 't', '... and released');
	$u->close;
	cli('DEL', 'app:secret');
}

# --- 10. views, fencing tokens ---------------------------------------------------------
{
	my $ctr = 'redislock_plain_token:{v:1}';
	is($a->query("SELECT redis_lock_acquire('v:1', '0', '1 min', layout => 'plain')"), 't', 'views: A holds v:1');
	my $tok1 = cli('GET', $ctr);
	is($a->query("SELECT redis_lock_fencing_token('v:1')"), $tok1, "views: fencing token = $ctr ($tok1)");
	is($a->query("SELECT redis_lock_acquire('v:1', '0', '1 min', layout => 'plain')"), 't', 'views: re-entered');
	is(cli('GET', $ctr), $tok1, 'views: a re-entry does not increment the counter');
	my $st = $b->dbh->selectrow_hashref("SELECT locked, holders::text, hold_count, ttl IS NOT NULL AS has_ttl, fencing_token, held_by_me, layout, mode FROM redis_lock_status('v:1')");
	is_deeply($st, { locked => 't', holders => "{$owner_a}", hold_count => 1, has_ttl => 't',
			fencing_token => $tok1, held_by_me => 'f', layout => 'plain', mode => 'single' },
		'views: redis_lock_status from another session');
	is($a->query("SELECT layout || '/' || held_by_me FROM redis_lock_status('v:1')"), 'plain/true', 'views: held_by_me for A');
	is($a->query("SELECT layout || '/' || locked || '/' || (holders = ARRAY['$owner_a']) FROM redis_lock_nodes('v:1')"),
		'plain/true/true', 'views: redis_lock_nodes');
	is($obs->query("SELECT kind || '/' || layout || '/' || hold_count || '/' || fencing_token FROM redis_locks WHERE name = 'v:1'"),
		"lock/plain/2/$tok1", 'views: redis_locks row');

	$b->start("SELECT redis_lock_acquire('v:1', '60 s', layout => 'plain')");
	waits_ok($b, 'views: B waits for v:1');
	# (its first attempt's I/O already shows as an Extension wait)
	until_ok('views: B is listed in redis_lock_waits', sub {
		defined $obs->query('SELECT 1 FROM redis_lock_waits WHERE pid = ' . $b->pid) });
	is($obs->query("SELECT layout || '/' || kind || '/' || (holders = ARRAY['$owner_a']) || '/' || (holder_pids = ARRAY[" . $a->pid . "]) FROM redis_lock_waits WHERE pid = " . $b->pid),
		'plain/lock/true/true', 'views: redis_lock_waits shows B waiting for A, layout plain')
	  or diag(explain([ $obs->rows('SELECT * FROM redis_lock_waits') ]));
	is($obs->query('SELECT redis_lock_blocking_pids(' . $b->pid . ')::text'), '{' . $a->pid . '}',
		'views: redis_lock_blocking_pids names A');
	$a->query("SELECT redis_lock_release('v:1'), redis_lock_release('v:1')");
	my ($v) = $b->finish($T);
	is($v, 't', 'views: B gets v:1');
	is(cli('GET', $ctr), $tok1 + 1, 'views: a fresh acquisition increments the counter');
	is($b->query("SELECT redis_lock_fencing_token('v:1')"), $tok1 + 1, "views: B's token");
	is($b->query("SELECT redis_lock_release('v:1')"), 't', 'views: B releases');
	is($b->query("SELECT locked::text || '/' || layout FROM redis_lock_status('v:1')"), 'false/redisson',
		'views: a free name shows unlocked (no key: the default layout)');
	$b->query("SET redislock.layout = 'plain'");
	is($b->query("SELECT locked::text || '/' || layout || '/' || fencing_token FROM redis_lock_status('v:1')"),
		'false/plain/' . ($tok1 + 1), "views: ... and under redislock.layout = 'plain', plain with its counter");
	$b->query('RESET redislock.layout');
}

# --- 11. the commit guard ---------------------------------------------------------------
for my $c ([ 'xact', 'deleted' ], [ 'xact', 'overwritten' ], [ 'session', 'deleted' ], [ 'session', 'overwritten' ])
{
	my ($scope, $what) = @$c;
	my $name = "g:$scope:$what";
	my $fn = $scope eq 'xact' ? 'redis_xact_lock_acquire' : 'redis_lock_acquire';
	$a->query('BEGIN');
	is($a->query("SELECT $fn('$name', '0', '10 min', layout => 'plain')"), 't', "guard: $scope lock $name");
	$a->query('INSERT INTO t VALUES (1)');
	cli($what eq 'deleted' ? ('DEL', $name) : ('SET', $name, 'someone-else'));
	my (undef, $err, $state) = $a->try('COMMIT');
	is($state, '55P03', "guard: COMMIT fails when the key was $what");
	like($err // '', qr/Redis lock "$name" was lost before COMMIT/, 'guard: naming it');
	is($obs->query('SELECT count(*) FROM t'), 0, 'guard: the row was not committed');
	is(value_of($name), $what eq 'overwritten' ? 'someone-else' : undef, "guard: the key is as left ($what)");
	$a->try("SELECT redis_lock_release('$name')") if $scope eq 'session';
	$a->notices;
	cli('DEL', $name);
}

# --- 12. waiting -------------------------------------------------------------------------
# A waiter in a fresh session (each session trusts what it learnt of
# notify-keyspace-events for 10 s), waiting 60 s for a key another client
# holds for 10 min; returns once it waits.
sub waiter
{
	my ($name, %opt) = @_;
	my $w = RedisLockTest::Session->new($node);
	$w->query($opt{setup}) if $opt{setup};
	$w->start("SELECT redis_lock_acquire('$name', '60 s', '1 min', layout => 'plain')");
	waits_ok($w, "$name: the waiter waits");
	return $w;
}
sub woken_ok
{
	my ($w, $name, $since, $what) = @_;
	my ($v, $err) = $w->finish($T);
	my $ms = int((time() - $since) * 1000);
	is($v, 't', "$what: the waiter gets $name") or diag($err);
	is(value_of($name), $w->query('SELECT redis_lock_owner_id()'), "$what: the key holds the waiter's value");
	diag("wake latency, $what: $ms ms");
	$w->query("SELECT redis_lock_release('$name')");
	$w->close;
}
{
	# a SQL release (no notifications)
	cli('CONFIG', 'SET', 'notify-keyspace-events', '');
	is($a->query("SELECT redis_lock_acquire('wk:sql', '0', '10 min', layout => 'plain')"), 't', 'wait: A holds wk:sql');
	my $w = waiter('wk:sql');
	my $t0 = time();
	$a->query("SELECT redis_lock_release('wk:sql')");
	woken_ok($w, 'wk:sql', $t0, 'SQL release');

	# another client's DEL and a foreign key's expiry, with and without notifications
	for my $notify ('Kgx', '')
	{
		my $mode = $notify ? 'keyspace notifications' : 'polling';
		cli('CONFIG', 'SET', 'notify-keyspace-events', $notify);
		my $name = 'wk:del:' . ($notify ? 'n' : 'p');
		cli('SET', $name, 'someone-else', 'PX', 600_000);
		$w = waiter($name);
		my $ks = "__keyspace\@0__:$name";
		until_ok("$mode: the waiter listens on redislock's channel", sub {
			(cli('PUBSUB', 'NUMSUB', "redislock_plain__channel:{$name}"))[1] > 0 });
		if ($notify)
		{
			until_ok("$mode: the waiter listens on $ks", sub { (cli('PUBSUB', 'NUMSUB', $ks))[1] > 0 });
		}
		else
		{
			is((cli('PUBSUB', 'NUMSUB', $ks))[1], 0, "$mode: no one listens on $ks");
		}
		$t0 = time();
		cli('DEL', $name);
		woken_ok($w, $name, $t0, "DEL by redis-cli, $mode");

		# the same once the waiter's back-off has reached its longest pause
		$name .= ':late';
		cli('SET', $name, 'someone-else', 'PX', 600_000);
		$w = waiter($name);
		until_ok("$mode: the waiter has waited 3 s", sub {
			$obs->query('SELECT now() - wait_started > interval \'3 s\' FROM redis_lock_waits WHERE pid = ' . $w->pid) eq 't' });
		$t0 = time();
		cli('DEL', $name);
		woken_ok($w, $name, $t0, "DEL by redis-cli after 3 s of waiting, $mode");

		$name = 'wk:exp:' . ($notify ? 'n' : 'p');
		cli('SET', $name, 'someone-else', 'PX', 600_000);
		$w = waiter($name);
		$t0 = time();
		cli('PEXPIRE', $name, 300);
		woken_ok($w, $name, $t0, "expiry of a foreign PX, $mode (from PEXPIRE 300 ms)");
	}
}

# --- 12a. notifications that stop telling: the waiter still tries now and then ----
# A waiter that found keyspace notifications on listens for the key's events
# and polls rarely; it must still see a release that publishes no event it
# hears: the server's notifications turned off during the wait, a FLUSHDB.
# It waits 10 min for a key held for 10 min: it must get it well before.
for my $case (
	[ 'notifications turned off', sub {
		cli('CONFIG', 'SET', 'notify-keyspace-events', '');
		cli('DEL', $_[0]) } ],
	[ 'FLUSHDB', sub { cli('FLUSHDB') } ])
{
	my ($what, $release) = @$case;
	cli('CONFIG', 'SET', 'notify-keyspace-events', 'Kgx');
	my $name = 'wk:silent';
	cli('SET', $name, 'someone-else', 'PX', 600_000);
	my $w = RedisLockTest::Session->new($node);
	$w->start("SELECT redis_lock_acquire('$name', '10 min', '1 min', layout => 'plain')");
	waits_ok($w, "$what: the waiter waits");
	until_ok("$what: it listens on the key's events", sub {
		(cli('PUBSUB', 'NUMSUB', "__keyspace\@0__:$name"))[1] > 0 });
	my $t0 = time();
	$release->($name);
	my ($v, $err) = $w->finish($T);
	is($v, 't', "$what: the waiter gets the key well before its wait ends") or diag($err);
	diag("wake latency, $what: " . int((time() - $t0) * 1000) . ' ms');
	$w->cancel($T) if ($err // '') =~ /^timeout/;
	$w->close;
	cli('DEL', $name);
}
cli('CONFIG', 'SET', 'notify-keyspace-events', '');

# --- 12b. a waiter cancelled or timed out holds nothing; a deadlock -----------------
{
	cli('SET', 'wk:cancel', 'someone-else', 'PX', 600_000);
	my $w = waiter('wk:cancel');
	my (undef, undef, $state) = $w->cancel($T);
	is($state, '57014', 'cancel: the plain waiter is cancelled');
	is($w->query("SELECT redis_lock_acquire('wk:cancel', '200ms', layout => 'plain')"), 'f',
		'timeout: a 200 ms wait ends with false');
	is(value_of('wk:cancel'), 'someone-else', 'cancel, timeout: the key untouched');
	ok(!defined $obs->query('SELECT 1 FROM redis_locks WHERE pid = ' . $w->pid), 'cancel, timeout: nothing held');
	$w->close;
	cli('DEL', 'wk:cancel');

	my @s = map { RedisLockTest::Session->new($node) } 0, 1;
	$_->query("SET redislock.deadlock_timeout = '100ms'") for @s;
	is($s[$_]->query("SELECT redis_lock_acquire('dl:$_', layout => 'plain')"), 't', "deadlock: S$_ holds dl:$_") for 0, 1;
	$s[0]->start("SELECT redis_lock_acquire('dl:1', '60 s', layout => 'plain')");
	waits_ok($s[0], 'deadlock: S0 waits for dl:1');
	$s[1]->start("SELECT redis_lock_acquire('dl:0', '60 s', layout => 'plain')");
	my $first = first_done_ok('deadlock: one wait ends', @s);
	my (undef, $err, $st) = $s[$first]->finish($T);
	is($st, '40P01', 'deadlock: the victim gets 40P01') or diag($err);
	$s[$first]->query("SELECT redis_lock_release('dl:$first')");
	my ($v) = $s[1 - $first]->finish($T);
	is($v, 't', 'deadlock: the other gets its lock');
	$_->close for @s;
	until_ok('deadlock: both keys gone', sub { cli('EXISTS', 'dl:0', 'dl:1') == 0 });
}

# --- 13. Spring Integration's unlock channel, both ways (notifications off) ------------
{
	cli('CONFIG', 'SET', 'notify-keyspace-events', '');
	my $chan = 'myReg-channel:myReg:x';
	# a SQL release publishes there, the key as the message
	$a->query("SET redislock.spring_registries = 'myReg'");
	is($a->query("SELECT redis_lock_acquire('myReg:x', '0', '10 min', layout => 'plain')"), 't', 'spring: A holds myReg:x (a camelCase registry key, kept as written)');
	my ($in, $out, $err) = ('', '', '');
	my $sub = IPC::Run::start([ $RedisLockTest::Redis::CLI, '-h', '127.0.0.1', '-p', $redis->port, 'SUBSCRIBE', $chan ],
		\$in, \$out, \$err, IPC::Run::timeout(120));
	until_ok('spring: redis-cli subscribed', sub { (cli('PUBSUB', 'NUMSUB', $chan))[1] >= 1 });
	is($a->query("SELECT redis_lock_release('myReg:x')"), 't', 'spring: A releases myReg:x');
	until_ok("spring: PUBLISH $chan myReg:x seen by the subscriber", sub { $sub->pump_nb; $out =~ /^message\n\Q$chan\E\nmyReg:x$/m });
	$sub->kill_kill;

	# the setting: at most 8 registries, a list, a superuser's
	my (undef, $e, $st) = $a->try("SET redislock.spring_registries = '" . join(',', map { "r$_" } 1 .. 9) . "'");
	is($st, '22023', 'spring: 9 registries refused (22023)');
	(undef, $e, $st) = $a->try(q{SET redislock.spring_registries = 'a,,b'});
	is($st, '22023', 'spring: a bad list refused (22023)');
	(undef, $e, $st) = $a->try(q{SET redislock.spring_registries = 'orders,orders'});
	is($st, '22023', 'spring: a registry named twice refused (22023)');
	(undef, $e, $st) = $a->try("SET redislock.spring_registries = '" . ('r' x 65) . "'");
	is($st, '22023', 'spring: a registry key over 64 bytes refused (22023)');
	my $u = RedisLockTest::Session->new($node, user => 'plainrole');
	(undef, $e, $st) = $u->try("SET redislock.spring_registries = 'myReg'");
	is($st, '42501', 'spring: an ordinary role may not set it (42501)');
	$u->close;

	# a release of a name of no listed registry publishes nothing there
	is($a->query("SELECT redis_lock_acquire('other:x', '0', '10 min', layout => 'plain') AND redis_lock_release('other:x')"), 't',
		'spring: other:x taken and released');
	$a->query('RESET redislock.spring_registries');

	# a SQL waiter listens there and wakes on Spring's unlock (DEL + PUBLISH)
	cli('SET', 'myReg:x', 'spring-holder', 'PX', 600_000);
	my $w = waiter('myReg:x', setup => "SET redislock.spring_registries = 'myReg'");
	until_ok("spring: the waiter listens on $chan", sub { (cli('PUBSUB', 'NUMSUB', $chan))[1] >= 1 });
	my $t0 = time();
	cli('EVAL', "redis.call('del', KEYS[1]); return redis.call('publish', ARGV[1], KEYS[1])", 1, 'myReg:x', $chan);
	woken_ok($w, 'myReg:x', $t0, "Spring's unlock (DEL + PUBLISH $chan), no notifications");
}

# --- 14. force release ----------------------------------------------------------------------
{
	is($a->query("SELECT redis_lock_acquire('fr:1', '0', '10 min', layout => 'plain')"), 't', 'force: A holds fr:1');
	my $w = waiter('fr:1');
	my (undef, $err, $state) = $b->try("SELECT redis_lock_force_release('fr:1')");
	is($state, '42809', 'force: refused without plain (42809)');
	like($err // '', qr/has the plain layout/, 'force: naming the plain layout');
	is(value_of('fr:1'), $owner_a, 'force: the key unchanged');
	my $t0 = time();
	is($b->query("SET redislock.layout = 'plain'; SELECT redis_lock_force_release('fr:1')"), 't', 'force: released under plain');
	$b->query('RESET redislock.layout');
	woken_ok($w, 'fr:1', $t0, 'force release');
	$a->try("SELECT redis_lock_release('fr:1')");
}

no_crash_ok($node, 'single server');
$_->close for $a, $b;
$node->stop;

# --- 15. Redlock over 3 masters ------------------------------------------------------------
{
	my $rl = RedisLockTest::Redlock->new(n => 3);
	my $rn = RedisLockTest::node('plainredlock', undef,
		'redislock.redlock_nodes' => $rl->list,
		'redislock.watchdog_timeout' => '2s');
	my $x = RedisLockTest::Session->new($rn);
	my $y = RedisLockTest::Session->new($rn);
	my $ox = $x->query('SELECT redis_lock_owner_id()');
	is($x->query("SELECT redis_lock_acquire('rl:p', layout => 'plain')"), 't', 'redlock: X acquires');
	is(join(',', map { scalar $_->cli('GET', 'rl:p') } $rl->nodes), join(',', ($ox) x 3), 'redlock: our value on each master');
	is($x->query("SELECT masters FROM redis_locks WHERE name = 'rl:p'"), '3/3', 'redlock: 3/3 masters');
	is($y->query("SELECT redis_lock_acquire('rl:p', '0', layout => 'plain')"), 'f', 'redlock: Y refused');
	is($x->query("SELECT layout FROM redis_lock_status('rl:p')"), 'plain', 'redlock: status layout plain');
	is($x->query("SELECT redis_lock_release('rl:p')"), 't', 'redlock: X releases');
	is($rl->holders('rl:p'), 0, 'redlock: deleted on every master');

	# waiters: woken by a SQL release; by the other client's DEL on every master (polling)
	is($x->query("SELECT redis_lock_acquire('rl:w', '0', '10 min', layout => 'plain')"), 't', 'redlock: X holds rl:w');
	$y->start("SELECT redis_lock_acquire('rl:w', '60 s', '1 min', layout => 'plain')");
	waits_ok($y, 'redlock: Y waits for rl:w');
	my $t0 = time();
	$x->query("SELECT redis_lock_release('rl:w')");
	my ($v) = $y->finish($T);
	is($v, 't', 'redlock: Y woken by the SQL release');
	diag('wake latency, redlock SQL release: ' . int((time() - $t0) * 1000) . ' ms');
	$y->query("SELECT redis_lock_release('rl:w')");
	$_->cli('SET', 'rl:w', 'someone-else', 'PX', 600_000) for $rl->nodes;
	$y->start("SELECT redis_lock_acquire('rl:w', '60 s', '1 min', layout => 'plain')");
	waits_ok($y, 'redlock: Y waits for a foreign rl:w');
	$t0 = time();
	$_->cli('DEL', 'rl:w') for $rl->nodes;
	($v) = $y->finish($T);
	is($v, 't', 'redlock: Y gets rl:w after the DEL on every master');
	diag('wake latency, redlock DEL by redis-cli (polling): ' . int((time() - $t0) * 1000) . ' ms');
	$y->query("SELECT redis_lock_release('rl:w')");
	is($rl->holders('rl:w'), 0, 'redlock: rl:w gone');

	# the watchdog restores our key on a master restarted empty, not over another value
	is($x->query("SELECT redis_lock_acquire('rl:r', layout => 'plain')"), 't', 'redlock: X holds rl:r (watchdog)');
	$rl->restart_empty(0);
	until_ok('redlock: the watchdog restores rl:r on master 0', sub { $rl->node(0)->cli('GET', 'rl:r') eq $ox });
	$rl->restart_empty(1);
	$rl->node(1)->cli('SET', 'rl:r', 'someone-else', 'PX', 600_000);
	until_ok('redlock: still on 2 of 3 (3/3 -> 2/3 once renewed)', sub {
		($x->query("SELECT masters FROM redis_locks WHERE name = 'rl:r'") // '') eq '2/3' });
	is($rl->node(1)->cli('GET', 'rl:r'), 'someone-else', 'redlock: the other value on master 1 kept');
	is($x->query("SELECT redis_lock_release('rl:r')"), 't', 'redlock: X releases rl:r');
	is(join(',', map { scalar $_->cli('GET', 'rl:r') } $rl->nodes), ',someone-else,', 'redlock: only ours deleted');
	$rl->node(1)->cli('DEL', 'rl:r');

	# a majority held by another value: refused, and nothing of ours left
	$rl->node($_)->cli('SET', 'rl:q', 'someone-else', 'PX', 600_000) for 0, 1;
	is($y->query("SELECT redis_lock_acquire('rl:q', '0', layout => 'plain')"), 'f', 'redlock: refused with 2 of 3 masters foreign');
	is(join(',', map { scalar $_->cli('GET', 'rl:q') } $rl->nodes), 'someone-else,someone-else,',
		'redlock: the foreign values kept, nothing left on the free master');
	$rl->node(0)->cli('DEL', 'rl:q');
	my $oy = $y->query('SELECT redis_lock_owner_id()');
	is($y->query("SELECT redis_lock_acquire('rl:q', '0', '1 min', layout => 'plain')"), 't', 'redlock: 1 of 3 foreign: taken on the majority');
	is(join(',', map { scalar $_->cli('GET', 'rl:q') } $rl->nodes), "$oy,someone-else,$oy",
		'redlock: ours on 2 masters, the foreign value kept on the third');
	is($y->query("SELECT redis_lock_release('rl:q')"), 't', 'redlock: Y releases');
	is(join(',', map { scalar $_->cli('GET', 'rl:q') } $rl->nodes), ',someone-else,',
		'redlock: ours deleted, the foreign value survives the release');
	$rl->node(1)->cli('DEL', 'rl:q');

	# a plain multi-lock: every name on each master at once, a majority of
	# masters holding them all (as node redlock locks several resources)
	my $all = "ARRAY['rl:m1','rl:m2']";
	my $keys = sub { join(';', map { my $n = $_; join(',', map { scalar $n->cli('GET', $_) } 'rl:m1', 'rl:m2') } $rl->nodes) };
	is($x->query("SELECT redis_lock_acquire_all($all, '0', '1 min', 'plain')"), 't', 'redlock multi: X takes both');
	is($keys->(), join(';', ("$ox,$ox") x 3), 'redlock multi: both keys ours on each master');
	is($x->query("SELECT string_agg(masters, ',' ORDER BY name) FROM redis_locks WHERE name LIKE 'rl:m%'"), '3/3,3/3',
		'redlock multi: 3/3 masters for each');
	is($y->query("SELECT redis_lock_acquire_all(ARRAY['rl:m0','rl:m2'], '0', '1 min', 'plain')"), 'f',
		'redlock multi: Y refused (rl:m2 held), ...');
	is(join(',', map { $_->cli('EXISTS', 'rl:m0') } $rl->nodes), '0,0,0', '... and rl:m0 written nowhere');
	is($x->query("SELECT redis_lock_release('rl:m1') AND redis_lock_release('rl:m2')"), 't', 'redlock multi: X releases both');
	is($keys->(), ',;,;,', 'redlock multi: deleted on every master');
	$rl->node(0)->cli('SET', 'rl:m2', 'someone-else', 'PX', 600_000);
	is($y->query("SELECT redis_lock_acquire_all($all, '0', '1 min', 'plain')"), 't',
		'redlock multi: 1 of 3 masters foreign on rl:m2: taken on the majority');
	is($keys->(), ",someone-else;$oy,$oy;$oy,$oy", 'redlock multi: master 0 untouched (all or none there), ours on the others');
	is($y->query("SELECT redis_lock_release_all()"), 2, 'redlock multi: Y releases');
	$rl->node(1)->cli('SET', 'rl:m1', 'someone-else', 'PX', 600_000);
	is($y->query("SELECT redis_lock_acquire_all($all, '0', '1 min', 'plain')"), 'f',
		'redlock multi: a majority with a foreign key: refused');
	is($keys->(), ",someone-else;someone-else,;,", 'redlock multi: the foreign values kept, nothing of ours left');
	$rl->node(0)->cli('DEL', 'rl:m2');
	$rl->node(1)->cli('DEL', 'rl:m1');
	my (undef, $err, $state) = $y->try("SELECT redis_lock_acquire_all($all, '0', '1 min')");
	is($state, '0A000', 'redlock multi: still refused for the redisson layout (0A000)');
	like($err // '', qr/layout => 'plain'/, '... pointing to the plain layout');
	no_crash_ok($rn, 'redlock');
	$_->close for $x, $y;
	$rn->stop;
}

# --- 16. Cluster: a plain key on the master serving its slot ------------------------------
{
	my $cl = RedisLockTest::Cluster->new(masters => 3);
	my $cn = RedisLockTest::node('plaincluster', undef, 'redislock.cluster_nodes' => $cl->seeds);
	my $x = RedisLockTest::Session->new($cn);
	my $ox = $x->query('SELECT redis_lock_owner_id()');
	is($x->query("SELECT count(*) FILTER (WHERE redis_lock_acquire('pc:' || i, '0', '1 min', layout => 'plain')) FROM generate_series(1, 30) i"),
		30, 'cluster: 30 plain locks');
	my (%on, $misplaced);
	for my $i (1 .. 30)
	{
		my $m = $cl->node_for_key("pc:$i");
		$on{ $m->port }++;
		$misplaced++ unless $m->cli('GET', "pc:$i") eq $ox;
	}
	is(scalar(keys %on), 3, 'cluster: on all 3 masters');
	is($misplaced // 0, 0, "cluster: each the slot master's string with our value");
	is($x->query("SELECT layout FROM redis_lock_status('pc:7')"), 'plain', 'cluster: status layout plain');
	is($x->query('SELECT redis_lock_release_all()'), 30, 'cluster: all released');
	is(scalar(grep { $cl->node_for_key("pc:$_")->cli('EXISTS', "pc:$_") } 1 .. 30), 0, 'cluster: none left');
	# several slots: one by one, all or none
	my @ml = map { "pm:$_" } 1 .. 6;
	my $arr = "ARRAY['" . join("','", @ml) . "']";
	$cl->cli_for_key('pm:4', 'SET', 'pm:4', 'someone-else', 'PX', 600_000);
	is($x->query("SELECT redis_lock_acquire_all($arr, '0', '1 min', 'plain')"), 'f', 'cluster all: refused, pm:4 is foreign');
	is(scalar(grep { $cl->node_for_key($_)->cli('GET', $_) eq $ox } @ml), 0, 'cluster all: none of ours left');
	is($cl->node_for_key('pm:4')->cli('GET', 'pm:4'), 'someone-else', 'cluster all: pm:4 untouched');
	$cl->cli_for_key('pm:4', 'DEL', 'pm:4');
	is($x->query("SELECT redis_lock_acquire_all($arr, '0', '1 min', 'plain')"), 't', 'cluster all: taken');
	is(scalar(grep { $cl->node_for_key($_)->cli('GET', $_) eq $ox } @ml), 6, 'cluster all: all 6 ours');
	is($x->query('SELECT redis_lock_release_all()'), 6, 'cluster all: released');
	# a waiter woken by a SQL release on the slot's master
	my $y = RedisLockTest::Session->new($cn);
	is($x->query("SELECT redis_lock_acquire('pc:w', '0', '10 min', layout => 'plain')"), 't', 'cluster: X holds pc:w');
	$y->start("SELECT redis_lock_acquire('pc:w', '60 s', '1 min', layout => 'plain')");
	waits_ok($y, 'cluster: Y waits for pc:w');
	my $t0 = time();
	$x->query("SELECT redis_lock_release('pc:w')");
	my ($v) = $y->finish($T);
	is($v, 't', 'cluster: Y woken by the SQL release');
	diag('wake latency, cluster SQL release: ' . int((time() - $t0) * 1000) . ' ms');
	is($y->query("SELECT redis_lock_release('pc:w')"), 't', 'cluster: Y releases');
	# and by another client's DEL on the slot's master (polling)
	$cl->cli_for_key('pc:w', 'SET', 'pc:w', 'someone-else', 'PX', 600_000);
	$y->start("SELECT redis_lock_acquire('pc:w', '60 s', '1 min', layout => 'plain')");
	waits_ok($y, 'cluster: Y waits for a foreign pc:w');
	$t0 = time();
	$cl->cli_for_key('pc:w', 'DEL', 'pc:w');
	($v) = $y->finish($T);
	is($v, 't', 'cluster: Y gets pc:w after the DEL');
	diag('wake latency, cluster DEL by redis-cli (polling): ' . int((time() - $t0) * 1000) . ' ms');
	is($y->query("SELECT redis_lock_release('pc:w')"), 't', 'cluster: Y releases again');
	# with keyspace notifications on the key's node: the waiter listens there
	# (node-local, unsharded) and wakes on another client's DEL
	$_->cli('CONFIG', 'SET', 'notify-keyspace-events', 'Kgx') for $cl->nodes;
	my $ks = "__keyspace\@0__:pc:w";
	for my $multi (0, 1)
	{
		my $what = $multi ? 'a multi-lock' : 'a lock';
		$cl->cli_for_key('pc:w', 'SET', 'pc:w', 'someone-else', 'PX', 600_000);
		$y->start($multi ? "SELECT redis_lock_acquire_all(ARRAY['pc:w'], '60 s', '1 min', 'plain')"
			: "SELECT redis_lock_acquire('pc:w', '60 s', '1 min', layout => 'plain')");
		waits_ok($y, "cluster notified: Y waits for a foreign pc:w ($what)");
		until_ok("cluster notified: Y listens on $ks at the key's node ($what)", sub {
			($cl->cli_for_key('pc:w', 'PUBSUB', 'NUMSUB', $ks))[1] >= 1 });
		$t0 = time();
		$cl->cli_for_key('pc:w', 'DEL', 'pc:w');
		($v) = $y->finish($T);
		is($v, 't', "cluster notified: Y gets pc:w after the DEL ($what)");
		diag("wake latency, cluster DEL by redis-cli, notifications on ($what): " . int((time() - $t0) * 1000) . ' ms');
		is($y->query("SELECT redis_lock_release('pc:w')"), 't', "cluster notified: Y releases ($what)");
	}
	$_->cli('CONFIG', 'SET', 'notify-keyspace-events', '') for $cl->nodes;

	# Spring's unlock channel, published classically (a cluster broadcasts
	# it): the waiter listens there too, and wakes on Spring's unlock
	$y->query("SET redislock.spring_registries = 'myReg'");
	my $sc = 'myReg-channel:myReg:cw';
	$cl->cli_for_key('myReg:cw', 'SET', 'myReg:cw', 'spring-holder', 'PX', 600_000);
	$y->start("SELECT redis_lock_acquire('myReg:cw', '60 s', '1 min', layout => 'plain')");
	waits_ok($y, 'cluster spring: Y waits for myReg:cw, which Spring holds');
	until_ok("cluster spring: Y listens on $sc", sub {
		my $n = 0;
		$n += ($_->cli('PUBSUB', 'NUMSUB', $sc))[1] for $cl->nodes;
		$n >= 1 });
	$t0 = time();
	$cl->cli_for_key('myReg:cw', 'EVAL', "redis.call('del', KEYS[1]); return redis.call('publish', ARGV[1], KEYS[1])",
		1, 'myReg:cw', $sc);
	($v) = $y->finish($T);
	is($v, 't', "cluster spring: Y gets myReg:cw after Spring's unlock (DEL + PUBLISH $sc)");
	diag("wake latency, cluster Spring unlock, no notifications: " . int((time() - $t0) * 1000) . ' ms');
	is($y->query("SELECT redis_lock_release('myReg:cw')"), 't', 'cluster spring: Y releases');
	$y->query('RESET redislock.spring_registries');
	$y->close;
	no_crash_ok($cn, 'cluster');
	$x->close;
	$cn->stop;
}

done_testing();
