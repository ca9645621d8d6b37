# 280_upgrade.pl — every released version installs, works with the current
# library, and updates to the newest; the result equals a fresh install of
# the newest version.  The versions PostgreSQL offers (the scripts installed)
# must be exactly @released and the newest, each with an update path to the
# newest; and one database installed at the oldest version is updated to
# every later version in turn, equal at each step to a fresh install of that
# version.  Compared through the catalogs: the extension's objects,
# every function's signature, result, volatility, strictness, parallel
# label, body symbol, comment and privileges, every view's definition,
# columns, comment and privileges.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib";
use RedisLockTest;
use Test::More;

my @released = ('1.0', '1.1');    # every version users may have installed, oldest first

my $redis = RedisLockTest::Redis->new;
my $node = RedisLockTest::node('upgrade', $redis, create_extension => 0);
my $newest = $node->safe_psql('postgres',
	"SELECT default_version FROM pg_available_extensions WHERE name = 'redislock'");
is($newest, '1.2', 'the newest version is 1.2');

# Every version that can be installed is a released one or the newest: a new
# release must be added to @released (and so gets tested here).
my @available = split /\n/, $node->safe_psql('postgres', q{
	SELECT version FROM pg_available_extension_versions WHERE name = 'redislock'
	ORDER BY string_to_array(version, '.')::int[]});
is_deeply(\@available, [ @released, $newest ],
	"the versions installed scripts offer are the released ones (@released) and $newest");
for my $from (@released)
{
	ok($node->safe_psql('postgres', qq{
		SELECT path FROM pg_extension_update_paths('redislock')
		WHERE source = '$from' AND target = '$newest'}) ne '',
		"an update path leads from $from to $newest");
}

# The extension as the catalogs of database $db describe it, one line each.
sub catalog
{
	my ($db) = @_;
	return $node->safe_psql($db, <<'SQL');
WITH ext AS (SELECT oid FROM pg_extension WHERE extname = 'redislock'),
members AS (
    SELECT d.classid, d.objid FROM pg_depend d, ext
    WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid AND d.deptype = 'e')
SELECT 'object ' || pg_describe_object(classid, objid, 0) FROM members
UNION ALL
SELECT format('function %s returns %s; args %s; volatile %s strict %s parallel %s secdef %s; symbol %s; acl %s; comment %s',
              p.oid::regprocedure, pg_get_function_result(p.oid), pg_get_function_arguments(p.oid),
              p.provolatile, p.proisstrict, p.proparallel, p.prosecdef, p.prosrc,
              coalesce(p.proacl::text, 'default'), obj_description(p.oid, 'pg_proc'))
FROM pg_proc p JOIN members m ON m.classid = 'pg_proc'::regclass AND m.objid = p.oid
UNION ALL
SELECT format('relation %s kind %s; acl %s; comment %s; columns %s; definition %s',
              c.relname, c.relkind, coalesce(c.relacl::text, 'default'),
              obj_description(c.oid, 'pg_class'),
              (SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', ' ORDER BY a.attnum)
               FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped),
              pg_get_viewdef(c.oid))
FROM pg_class c JOIN members m ON m.classid = 'pg_class'::regclass AND m.objid = c.oid
ORDER BY 1
SQL
}

$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql('fresh', 'CREATE EXTENSION redislock');
my $want = catalog('fresh');
like($want, qr/^relation redis_locks .*columns pid integer, name text, kind text, layout text, scope text/m,
	'a fresh install has redis_locks.kind and layout after name');
like($want, qr/^relation redis_lock_waits .*columns pid integer, name text, kind text, wait_started timestamp with time zone, holders text\[\], holder_pids integer\[\], layout text/m,
	'a fresh install has the view redis_lock_waits');
like($want, qr/^function redis_lock_blocking_pids\(integer\) returns integer\[\]/m,
	'a fresh install has redis_lock_blocking_pids(integer)');

for my $from (@released)
{
	my $db = 'from_' . ($from =~ s/\W/_/gr);
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, "CREATE EXTENSION redislock VERSION '$from'");
	is($node->safe_psql($db, "SELECT extversion FROM pg_extension WHERE extname = 'redislock'"),
		$from, "version $from installs");

	# the current library serves the old version's SQL objects
	my $s = RedisLockTest::Session->new($node, dbname => $db);
	is($s->query("SELECT redis_lock_acquire('upgrade:$from', '0', '1 min')"), 't',
		"$from: a lock is taken");
	is($s->query("SELECT count(*) FROM redis_locks WHERE name = 'upgrade:$from'"), 1,
		"$from: its redis_locks view works with the current library");
	is($s->query("SELECT locked FROM redis_lock_status('upgrade:$from')"), 't',
		"$from: its redis_lock_status works with the current library");
	isnt(catalog($db), $want, "$from differs from $newest before the update");

	$node->safe_psql($db, 'ALTER EXTENSION redislock UPDATE');
	is($node->safe_psql($db, "SELECT extversion FROM pg_extension WHERE extname = 'redislock'"),
		$newest, "$from updates to $newest");
	my $got = catalog($db);
	is($got, $want, "$from updated equals a fresh $newest install")
	  or diag("fresh:\n$want\nupdated:\n$got");
	is($s->query("SELECT locked::text || ' ' || coalesce(rw_mode, '-') FROM redis_lock_status('upgrade:$from')"),
		'true -', "$from: redis_lock_status has its new column (none for an exclusive lock)");
	is($s->query("SELECT kind || ' ' || hold_count FROM redis_locks WHERE name = 'upgrade:$from'"),
		'lock 1', "$from: the hold taken before the update shows in the new view");
	is($s->query("SELECT redis_read_lock_acquire('upgrade:rw:$from', '0', '1 min')"), 't',
		"$from: the read locks of $newest work after the update");
	is($s->query("SELECT kind || ' ' || rw_mode FROM redis_locks, redis_lock_status(name) WHERE name = 'upgrade:rw:$from'"),
		'read read', "$from: ... as kind read in redis_locks and rw_mode read in redis_lock_status");
	is($s->query("SELECT redis_read_lock_release('upgrade:rw:$from')"), 't', "$from: ... and are released");
	is($s->query("SELECT redis_semaphore_try_set_permits('upgrade:sem:$from', 2)::text || ' ' || "
			. "redis_semaphore_acquire('upgrade:sem:$from', 2, '0')::text"),
		'true true', "$from: the semaphores of $newest work after the update");
	is($s->query("SELECT kind || ' ' || hold_count FROM redis_locks WHERE name = 'upgrade:sem:$from'"),
		'semaphore 2', "$from: ... and show as kind semaphore with their permits");
	is($s->query("SELECT redis_semaphore_release('upgrade:sem:$from', 2)::text || ' ' || "
			. "redis_semaphore_available('upgrade:sem:$from')"),
		'true 2', "$from: ... and go back");
	is($s->query("SELECT redis_lock_acquire('upgrade:plain:$from', '0', '1 min', layout => 'plain')"), 't',
		"$from: the plain layout of $newest works after the update");
	is($s->query("SELECT r.layout || ' ' || st.layout || ' ' || (st.holders[1] = redis_lock_owner_id())::text "
			. "FROM redis_locks r, redis_lock_status(r.name) st WHERE r.name = 'upgrade:plain:$from'"),
		'plain plain true', "$from: ... as layout plain in redis_locks and redis_lock_status");
	is($s->query("SELECT redis_lock_release('upgrade:plain:$from')"), 't', "$from: ... and is released");
	is($s->query("SELECT count(*) FROM redis_lock_waits"), 0,
		"$from: redis_lock_waits works after the update");
	is($s->query("SELECT redis_lock_blocking_pids(pg_backend_pid())::text"), '{}',
		"$from: ... and redis_lock_blocking_pids");
	is($s->query("SELECT redis_lock_release('upgrade:$from')"), 't', "$from: and is released");
	$s->close;
}

# One database through every version in turn: installed at the oldest,
# updated to each later version one step at a time; after each step its
# catalog equals a fresh install of that version.
my @all = (@released, $newest);
my %fresh_of = ($newest => $want);
for my $v (@released)
{
	my $db = 'fresh_' . ($v =~ s/\W/_/gr);
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, "CREATE EXTENSION redislock VERSION '$v'");
	$fresh_of{$v} = catalog($db);
}
$node->safe_psql('postgres', 'CREATE DATABASE walk');
$node->safe_psql('walk', "CREATE EXTENSION redislock VERSION '$all[0]'");
is(catalog('walk'), $fresh_of{ $all[0] }, "walk: installed at $all[0]");
for my $i (1 .. $#all)
{
	$node->safe_psql('walk', "ALTER EXTENSION redislock UPDATE TO '$all[$i]'");
	is($node->safe_psql('walk', "SELECT extversion FROM pg_extension WHERE extname = 'redislock'"),
		$all[$i], "walk: $all[$i - 1] updates to $all[$i]");
	my $got = catalog('walk');
	is($got, $fresh_of{ $all[$i] }, "walk: after $all[$i - 1] -> $all[$i] it equals a fresh $all[$i] install")
	  or diag("fresh:\n$fresh_of{$all[$i]}\nupdated:\n$got");
}
my $w = RedisLockTest::Session->new($node, dbname => 'walk');
is($w->query("SELECT redis_lock_acquire('upgrade:walk', '0', '1 min')"), 't',
	"walk: a lock is taken at $newest");
is($w->query("SELECT redis_lock_release('upgrade:walk')"), 't', 'walk: and released');
$w->close;

done_testing();
