# 430_restricted_redis.pl — what managed and restricted Redis servers look
# like, reproduced with real redis-server, and what redislock does on each:
# a working lock or an ERROR that names what to change (SQLSTATE, message,
# hint), never a hang or Redis's bare reply.
#
#  A. WAIT renamed away (as ElastiCache Serverless has none): with
#     redislock.sync_replicas > 0 every acquisition fails with 0A000 naming
#     redislock.sync_replicas and leaves nothing held; with 0 all works.
#  B. scripting unavailable, each way a server refuses it: EVAL and EVALSHA
#     renamed away (unknown command, also what a server with Lua off says),
#     an ACL user without @scripting (NOPERM on EVALSHA), and an ACL user
#     with EVALSHA but without SCRIPT LOAD or EVAL (NOSCRIPT, then the
#     refused load): the first call of every function says scripting is
#     required, with the SQLSTATE of the cause.
#  C. a one-node Redis Cluster (every slot on one endpoint, CROSSSLOT for
#     keys of different slots, as a serverless or proxy endpoint) used
#     through a plain redislock.url: every function of the catalog works,
#     except a multi-lock across slots, which fails with 0A000 naming
#     redislock.cluster_nodes; through redislock.cluster_nodes every
#     function works, that multi-lock included.
# The calls are one table with a row for every function of the extension
# (checked against pg_proc). Takes about 10 s.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib";
use RedisLockTest;
use Test::More;

# --- the table: one row per SQL function of the extension --------------------------
# [function, SQL, kind]: 'script' = runs a Lua script whatever the state, so
# must fail where scripting is refused; 'plain' = plain commands only;
# 'local' = may answer from the session's own state; 'cross' = keys of
# several cluster slots. Each SQL returns true when the call works. Order
# matters: later rows use earlier state.
my @calls = (
	[ 'redis_lock_owner_id', "SELECT redis_lock_owner_id() IS NOT NULL", 'local' ],
	[ 'redis_lock_acquire', "SELECT redis_lock_acquire('m:l', '0', '1 min')", 'script' ],
	[ 'redis_lock_fencing_token', "SELECT true FROM (SELECT redis_lock_fencing_token('m:l')) x", 'local' ],
	[ 'redis_lock_status', "SELECT locked FROM redis_lock_status('m:l')", 'script' ],
	[ 'redis_lock_nodes', "SELECT bool_and(locked) FROM redis_lock_nodes('m:l')", 'script' ],
	[ 'redis_lock_release', "SELECT redis_lock_release('m:l') IS NOT NULL", 'local' ],
	[ 'redis_xact_lock_acquire', "SELECT redis_xact_lock_acquire('m:x', '0', '1 min')", 'script' ],
	[ 'redis_read_lock_acquire', "SELECT redis_read_lock_acquire('m:rw', '0', '1 min')", 'script' ],
	[ 'redis_read_lock_release', "SELECT redis_read_lock_release('m:rw') IS NOT NULL", 'local' ],
	[ 'redis_write_lock_acquire', "SELECT redis_write_lock_acquire('m:rw', '0', '1 min')", 'script' ],
	[ 'redis_write_lock_release', "SELECT redis_write_lock_release('m:rw') IS NOT NULL", 'local' ],
	[ 'redis_xact_read_lock_acquire', "SELECT redis_xact_read_lock_acquire('m:xrw', '0', '1 min')", 'script' ],
	[ 'redis_xact_write_lock_acquire', "SELECT redis_xact_write_lock_acquire('m:xw', '0', '1 min')", 'script' ],
	# m:a, m:b and m:c hash to three different slots, as do m:d, m:e, m:f
	[ 'redis_lock_acquire_all', "SELECT redis_lock_acquire_all(ARRAY['m:a', 'm:b', 'm:c'], '0', '1 min')", 'cross' ],
	[ 'redis_xact_lock_acquire_all', "SELECT redis_xact_lock_acquire_all(ARRAY['m:d', 'm:e', 'm:f'], '0', '1 min')", 'cross' ],
	[ 'redis_semaphore_try_set_permits', "SELECT redis_semaphore_try_set_permits('m:s', 3) IS NOT NULL", 'plain' ],
	[ 'redis_semaphore_add_permits', "SELECT true FROM (SELECT redis_semaphore_add_permits('m:s', 1)) x", 'script' ],
	[ 'redis_semaphore_acquire', "SELECT redis_semaphore_acquire('m:s', 1, '0')", 'script' ],
	[ 'redis_xact_semaphore_acquire', "SELECT redis_xact_semaphore_acquire('m:s', 1, '0')", 'script' ],
	[ 'redis_semaphore_release', "SELECT redis_semaphore_release('m:s') IS NOT NULL", 'local' ],
	[ 'redis_semaphore_available', "SELECT redis_semaphore_available('m:s') >= 0", 'script' ],
	[ 'redis_permit_try_set_permits', "SELECT redis_permit_try_set_permits('m:p', 3) IS NOT NULL", 'plain' ],
	[ 'redis_permit_set_permits', "SELECT true FROM (SELECT redis_permit_set_permits('m:p', 3)) x", 'script' ],
	[ 'redis_permit_available', "SELECT redis_permit_available('m:p') >= 0", 'script' ],
	[ 'redis_permit_acquire', "SELECT redis_permit_acquire('m:p', '0', '1 min') IS NOT NULL", 'script' ],
	[ 'redis_xact_permit_acquire', "SELECT redis_xact_permit_acquire('m:p', '0', '1 min') IS NOT NULL", 'script' ],
	[ 'redis_permit_release', "SELECT redis_permit_release('m:p', redis_permit_acquire('m:p', '0', '1 min'))", 'script' ],
	[ 'redis_latch_try_set_count', "SELECT redis_latch_try_set_count('m:latch', 1) IS NOT NULL", 'plain' ],
	[ 'redis_latch_count', "SELECT redis_latch_count('m:latch') >= 0", 'script' ],
	[ 'redis_latch_count_down', "SELECT redis_latch_count_down('m:latch') >= 0", 'script' ],
	[ 'redis_latch_await', "SELECT redis_latch_await('m:latch', '1 s')", 'script' ],
	[ 'redis_lock_force_release', "SELECT redis_lock_force_release('m:l') IS NOT NULL", 'script' ],
	[ 'redis_locks', "SELECT count(*) >= 0 FROM redis_locks", 'local' ],
	[ 'redis_lock_stats', "SELECT count(*) = 1 FROM redis_lock_stats", 'local' ],
	[ 'redis_lock_waits', "SELECT count(*) >= 0 FROM redis_lock_waits", 'local' ],
	[ 'redis_lock_blocking_pids', "SELECT redis_lock_blocking_pids(pg_backend_pid()) IS NOT NULL", 'local' ],
	[ 'redis_lock_release_all', "SELECT redis_lock_release_all() >= 0", 'local' ],
);

my $T = 60;
my $node;

# Points the whole server (the worker too) at other Redis settings
# (undef resets one); returns a new session, which sees them.
sub configure
{
	my (%set) = @_;
	for my $k (sort keys %set)
	{
		$node->safe_psql('postgres', defined $set{$k}
			? "ALTER SYSTEM SET redislock.$k = '$set{$k}'"
			: "ALTER SYSTEM RESET redislock.$k");
	}
	$node->reload;
	return RedisLockTest::Session->new($node);
}

# Runs every row in session $s; $expect->($row, $v, $err, $state, $elapsed)
# checks each outcome. Returns nothing: the checks are the tests.
sub run_table
{
	my ($s, $expect) = @_;
	for my $row (@calls)
	{
		my $t0 = time;
		my ($v, $err, $state) = $s->try($row->[1]);
		$expect->($row, $v, $err, $state, time - $t0);
	}
}

# --- A. WAIT renamed away ------------------------------------------------------------
my $nowait = RedisLockTest::Redis->new(extra => [ 'rename-command WAIT ""' ]);
$node = RedisLockTest::node('restricted', $nowait,
	'redislock.command_timeout' => '5s');
my $s = RedisLockTest::Session->new($node);

# the catalog and the table agree
my @catalog = split /\n/, $s->query(q{
	SELECT string_agg(DISTINCT p.proname, E'\n' ORDER BY p.proname)
	FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
	JOIN pg_extension e ON e.oid = d.refobjid AND d.deptype = 'e'
	WHERE e.extname = 'redislock'});
my %table = map { $_->[0] => 1 } @calls;
is_deeply([ grep { !$table{$_} } @catalog ], [], 'every function of the extension has a row in the table');
my %cat = map { $_ => 1 } @catalog;
is_deeply([ grep { !$cat{$_} } sort keys %table ], [], 'every row names a function of the extension');

$s->query('SET redislock.sync_replicas = 1');
my @wait_calls = grep { $_->[1] =~ /acquire/ } @calls;
for my $row (@wait_calls)
{
	my ($v, $err, $state) = $s->try("BEGIN; $row->[1]; COMMIT");
	$s->try('ROLLBACK');
	my $what = $row->[0];
	if ($what =~ /semaphore|permit/)
	{
		# permits are counters with no WAIT behind them
		ok(!defined $err || $state ne '38000', "$what with sync_replicas = 1 on a server without WAIT: no bare Redis reply")
		  or diag($err);
		next;
	}
	is($state, '0A000', "$what with sync_replicas = 1 on a server without WAIT: 0A000") or diag($err);
	like($err // '', qr/redislock\.sync_replicas needs the WAIT command, which Redis server "127\.0\.0\.1:\d+" refuses/,
		"$what: the message names redislock.sync_replicas");
	like($err // '', qr/HINT:  Set redislock\.sync_replicas = 0/, "$what: the hint says what to set");
}
is(scalar(grep { $_ =~ /^m:/ } $nowait->cli('KEYS', 'm:*')), 0, 'no lock is left held in Redis')
  or diag(join ' ', $nowait->cli('KEYS', '*'));
is($s->query('SELECT count(*) FROM redis_locks'), 0, 'nor in redis_locks');

$s->query('SET redislock.sync_replicas = 0');
run_table($s, sub {
	my ($row, $v, $err, $state) = @_;
	is($v, 't', "sync_replicas = 0 on a server without WAIT: $row->[0] works") or diag($err);
});
$s->query("SELECT redis_lock_release_all()");
is($s->query("SELECT redis_lock_acquire('m:wd')"), 't', 'a watchdog-mode lock works too');
is($s->query("SELECT redis_lock_release('m:wd')"), 't', 'and is released');

# --- B. scripting unavailable --------------------------------------------------------
my $noeval = RedisLockTest::Redis->new(extra => [ 'rename-command EVAL ""', 'rename-command EVALSHA ""' ]);
my $acl = RedisLockTest::Redis->new(extra => [
	'user noscript on >pw ~* &* +@all -@scripting',
	'user noload on >pw ~* &* +@all -script|load -eval',
]);

my @scripting = (
	[ 'EVAL and EVALSHA renamed away', $noeval->url, '0A000',
		qr/redislock requires Lua scripting, which Redis server "127\.0\.0\.1:\d+" does not offer/,
		qr/HINT:  Make EVAL, EVALSHA and SCRIPT available on the server/ ],
	[ 'an ACL user without @scripting', 'redis://noscript:pw@127.0.0.1:' . $acl->port, '42501',
		qr/redislock requires Lua scripting, which Redis user "noscript" may not use/,
		qr/HINT:  Grant the user the scripting commands: ACL SETUSER noscript \+evalsha \+eval \+script\|load/ ],
	[ 'an ACL user with EVALSHA but without SCRIPT LOAD and EVAL (NOSCRIPT)', 'redis://noload:pw@127.0.0.1:' . $acl->port, '42501',
		qr/redislock requires Lua scripting, which Redis user "noload" may not use/,
		qr/HINT:  Grant the user the scripting commands/ ],
);
for my $case (@scripting)
{
	my ($label, $url, $sqlstate, $msg, $hint) = @$case;
	my $f = configure(url => $url);
	run_table($f, sub {
		my ($row, $v, $err, $state) = @_;
		if ($row->[2] eq 'script' || $row->[2] eq 'cross')
		{
			is($state, $sqlstate, "$label: $row->[0] fails with $sqlstate") or diag($err // "returned $v");
			like($err // '', $msg, "$label: $row->[0] says scripting is required");
			like($err // '', $hint, "$label: $row->[0] hints at the fix");
			return;
		}
		# plain commands work; local answers work or say the same
		ok(defined $err ? $state eq $sqlstate && $err =~ $msg : $v eq 't',
			"$label: $row->[0] works or says scripting is required") or diag($err // "returned $v");
	});
	$f->close;
}
is(scalar($acl->cli('EXISTS', 'm:l', 'm:x', 'm:rw', 'm:xrw', 'm:a')), 0, 'no lock was written without scripts');

# --- C. a one-node cluster through a plain redislock.url ----------------------------
my $one = RedisLockTest::Redis->new(extra => [
	'cluster-enabled yes', 'cluster-config-file nodes.conf',
	'cluster-port ' . RedisLockTest::free_port() ]);
$one->cli('CLUSTER', 'ADDSLOTSRANGE', 0, 16383);
until_ok('the one-node cluster is up', sub { $one->cli('CLUSTER', 'INFO') =~ /cluster_state:ok/ });
my %slots = map { $one->cli('CLUSTER', 'KEYSLOT', $_) => 1 } qw(m:a m:b m:c);
is(scalar(keys %slots), 3, 'the multi-lock names hash to three slots');

my $p = configure(url => $one->url);
run_table($p, sub {
	my ($row, $v, $err, $state) = @_;
	if ($row->[2] eq 'cross')
	{
		is($state, '0A000', "plain url on a cluster endpoint: $row->[0] across slots fails with 0A000") or diag($err);
		like($err // '', qr/refused keys of different cluster slots in one request/, "$row->[0]: says why");
		like($err // '', qr/HINT:  .*set redislock\.cluster_nodes to it instead of redislock\.url/,
			"$row->[0]: the hint names redislock.cluster_nodes");
		return;
	}
	is($v, 't', "plain url on a cluster endpoint: $row->[0] works") or diag($err);
});
is($p->query("SELECT redis_lock_acquire_all(ARRAY['{m}:a', '{m}:b'], '0', '1 min')"), 't',
	'a multi-lock whose names share one hash tag works through the plain url');
is($p->query('SELECT redis_lock_release_all()'), 2, 'and is released');
is($p->query("SELECT redis_lock_acquire('m:wd')"), 't', 'a watchdog-mode lock works through the plain url');
my $w = RedisLockTest::Session->new($node);
$w->start("SELECT redis_lock_acquire('m:wd', '30 s', '1 min')");
waits_ok($w, 'another session waits for it');
is($p->query("SELECT redis_lock_release('m:wd')"), 't', 'released');
my ($got) = $w->finish($T);
is($got, 't', 'the waiter is woken through the plain url');
$w->query('SELECT redis_lock_release_all()');
$p->close;

my $c = configure(url => undef, cluster_nodes => '127.0.0.1:' . $one->port);
run_table($c, sub {
	my ($row, $v, $err, $state) = @_;
	is($v, 't', "through redislock.cluster_nodes: $row->[0] works") or diag($err);
});
is(scalar(grep { $one->cli('EXISTS', $_) } qw(m:a m:b m:c m:l m:rw)), 0, 'nothing is left held in Redis');

done_testing;
