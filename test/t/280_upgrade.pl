# 280_upgrade.pl — every released version installs, works with the current
# library, and updates to the newest; the result equals a fresh install of
# the newest version, compared through the catalogs: the extension's objects,
# every function's signature, result, volatility, strictness, parallel
# label, body symbol, comment and privileges, every view's definition,
# columns, comment and privileges.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib";
use RedisLockTest;
use Test::More;

my @released = ('1.0');    # every version users may have installed, oldest first

my $redis = RedisLockTest::Redis->new;
my $node = RedisLockTest::node('upgrade', $redis, create_extension => 0);
my $newest = $node->safe_psql('postgres',
	"SELECT default_version FROM pg_available_extensions WHERE name = 'redislock'");
is($newest, '1.1', 'the newest version is 1.1');

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
like($want, qr/^relation redis_locks .*columns pid integer, name text, kind text, scope text/m,
	'a fresh install has redis_locks.kind after name');
like($want, qr/^relation redis_lock_waits .*columns pid integer, name text, kind text, wait_started timestamp with time zone, holders text\[\], holder_pids integer\[\]/m,
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
	is($s->query("SELECT count(*) FROM redis_lock_waits"), 0,
		"$from: redis_lock_waits works after the update");
	is($s->query("SELECT redis_lock_blocking_pids(pg_backend_pid())::text"), '{}',
		"$from: ... and redis_lock_blocking_pids");
	is($s->query("SELECT redis_lock_release('upgrade:$from')"), 't', "$from: and is released");
	$s->close;
}

done_testing();
