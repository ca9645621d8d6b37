# 260_status_shape_token_ttl_session_cap.pl — what an ordinary user can do to
# Redis through redislock is bounded (issue 9, item 10):
#  * redis_lock_status() and redis_lock_nodes() report only lock-shaped data
#    (owner-id fields with counts, a Redisson read-write lock's mode and
#    readers): an application's hash, a list, a string holding spaces, a
#    hash with a non-integer count or a non-integer fencing counter is
#    refused with 42809 and none of its content appears in the error; a
#    string without spaces is a lock of the plain layout (1.2) whose value
#    an ordinary user does not see;
#  * the fencing counter redisson_lock_token:{name} never gets a TTL (as
#    in Redisson's RFencedLock), from any kind of acquisition, and one left
#    by an earlier version is dropped;
#  * redislock.max_locks_per_session (superuser-only) caps the distinct
#    locks of one session with 53400, and a refused lock leaves nothing in
#    Redis.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../lib";
use RedisLockTest;
use Test::More;

my $redis = RedisLockTest::Redis->new;
my $node = RedisLockTest::node('shape', $redis);
$node->safe_psql('postgres', 'CREATE ROLE plain LOGIN');
my $su = RedisLockTest::Session->new($node);
my $pl = RedisLockTest::Session->new($node, user => 'plain');

# --- status reads only locks -------------------------------------------------
$redis->cli('HSET', 'app:users', 'alice', 'secret-alice', 'bob', 'secret-bob');
$redis->cli('HSET', 'app:counts', 'x:1', 'secret-count');
$redis->cli('SET', 'app:str', 'secret string');
$redis->cli('SET', 'app:plain', 'secret-string');
$redis->cli('RPUSH', 'app:list', 'secret-list');
$redis->cli('SET', 'redisson_lock_token:{app:tok}', 'secret-token');
$redis->cli('HSET', 'app:rwbad', 'mode', 'secret-mode', "x:1", 1);
$redis->cli('HSET', 'app:writer', 'x:1:write', 1);

for my $key (qw(app:users app:counts app:str app:list app:tok app:rwbad app:writer))
{
	for my $f ('redis_lock_status', 'redis_lock_nodes')
	{
		my ($v, $err, $st) = $pl->try("SELECT * FROM $f('$key')");
		is($st, '42809', "$f('$key'): 42809") or diag($v // $err);
		like($err // '', qr/Redis key "\Q$key\E" is not a lock/, '... saying it is not a lock');
		unlike($err // '', qr/secret/, '... without any of its content');
	}
}

# a string without spaces is a plain lock: shown as such, its value hidden
for my $f ('redis_lock_status', 'redis_lock_nodes')
{
	is($pl->query("SELECT locked::text || ' ' || holders::text || ' ' || layout FROM $f('app:plain')"),
		'true {(hidden)} plain', "$f('app:plain'): a plain lock, its holder hidden");
}

# lock-shaped data is shown: a Redisson read-write lock with two readers
$redis->cli('HSET', 'rw', 'mode', 'read', 'u-1:7', 2, 'u-2:9', 1);
$redis->cli('PEXPIRE', 'rw', 600000);
is($pl->query("SELECT array_to_string(ARRAY(SELECT unnest(holders) ORDER BY 1), ',') "
		. "FROM redis_lock_status('rw')"), 'u-1:7,u-2:9', 'a read-write lock: its readers, not "mode"');
is($pl->query("SELECT hold_count FROM redis_lock_status('rw')"), 3, '... and their holds');
$redis->cli('HSET', 'rw', 'u-1:7:write', 1);
$redis->cli('HSET', 'rw', 'mode', 'write');
is($pl->query("SELECT cardinality(holders) FROM redis_lock_status('rw')"), 3, 'with a writer too');
is($pl->query("SELECT locked FROM redis_lock_status('free')"), 'f', 'a free name: not locked');
is($pl->query("SELECT redis_lock_acquire('mine', '0', '10 min')"), 't', 'plain takes a lock');
is($pl->query("SELECT held_by_me FROM redis_lock_status('mine')"), 't', '... and sees it as its own');

# --- the fencing counter never expires ---------------------------------------
# Redisson's RFencedLock only INCRs redisson_lock_token:{name}; INCR keeps a
# TTL, so one set by us would run out under a name Java uses daily and its
# tokens would restart at 1. No acquisition sets one, and each drops one an
# earlier redislock version left (simulated by PEXPIRE).
sub counter_ttl { return $redis->cli('PTTL', "redisson_lock_token:{$_[0]}"); }
sub old_ttl { $redis->cli('PEXPIRE', "redisson_lock_token:{$_[0]}", 600000) for @_; }

is(counter_ttl('mine'), -1, 'after an acquisition the counter has no TTL');
old_ttl('mine');
is($pl->query("SELECT redis_lock_acquire('mine', '0', '10 min')"), 't', 'reentry');
is(counter_ttl('mine'), -1, '... drops an old TTL');
is($pl->query('SELECT redis_lock_release_all()'), 1, 'release');
old_ttl('mine');
is($pl->query("SELECT redis_lock_acquire('mine', '0', '10 min')"), 't', 'acquire again');
is($pl->query("SELECT redis_lock_fencing_token('mine')"), 2, '... the counter went on (token 2)');
is(counter_ttl('mine'), -1, '... a fresh acquisition drops an old TTL');
for my $c (
	[ 'fair', "redis_lock_acquire('fair', '0', '10 min', true)", 'a fair acquisition' ],
	[ 'w', "redis_write_lock_acquire('w', '0', '10 min')", 'a write lock' ],
	[ 'all1', "redis_lock_acquire_all(ARRAY['all1', 'all2'], '0', '10 min')", 'a multi-lock' ])
{
	my ($name, $call, $what) = @$c;
	old_ttl($name, 'all2');
	is($pl->query("SELECT $call"), 't', $what);
	is(counter_ttl($name), -1, '... drops an old TTL');
	is($pl->query("SELECT $call"), 't', '... re-entered');
	is(counter_ttl($name), -1, '... still none');
}
is(counter_ttl('all2'), -1, 'the multi-lock drops it on every name');
$pl->query('SELECT redis_lock_release_all()');
is($pl->query('SELECT count(*) FROM redis_locks WHERE pid = pg_backend_pid()'), 0, 'nothing held');
my ($v, $err, $st) = $su->try('SHOW redislock.token_ttl');
like($err // '', qr/unrecognized configuration parameter/, 'redislock.token_ttl is gone');

# --- one session cannot take the whole shared table -------------------------
is($pl->query('SHOW redislock.max_locks_per_session'), '1000', 'max_locks_per_session is 1000 by default');
($v, $err, $st) = $pl->try('SET redislock.max_locks_per_session = 100000');
is($st, '42501', 'plain may not raise it');
$su->query('SET redislock.max_locks_per_session = 3');
is($su->query('SHOW redislock.max_locks_per_session'), '3', 'a superuser sets it to 3 for its session');
for my $i (1 .. 3)
{
	is($su->query("SELECT redis_lock_acquire('cap:$i', '0', '10 min')"), 't', "lock $i of 3");
}
for my $lease ("'10 min'", 'NULL')
{
	($v, $err, $st) = $su->try("SELECT redis_lock_acquire('cap:4', '0', $lease)");
	is($st, '53400', "a 4th lock (lease $lease): 53400");
	like($err // '', qr/too many Redis locks in this session/, '... too many redis locks');
	like($err // '', qr/max_locks_per_session/, '... naming the setting');
	is($redis->cli('EXISTS', 'cap:4', 'redisson_lock_token:{cap:4}'), 0, '... and nothing of it in Redis');
}
($v, $err, $st) = $su->try("BEGIN; SELECT redis_xact_lock_acquire('cap:4x', '0', '10 min'); COMMIT");
$su->dbh->do('ROLLBACK');
is($st, '53400', 'a 4th transaction lock: 53400');
is($redis->cli('EXISTS', 'cap:4x'), 0, '... nothing in Redis');
is($su->query("SELECT redis_lock_acquire('cap:1', '0', '10 min')"), 't', 'reentry needs no new entry');
is($su->query("SELECT count(*) FROM redis_locks WHERE pid = pg_backend_pid()"), 3, '3 rows in redis_locks');
is($su->query("SELECT redis_lock_release('cap:3')"), 't', 'release one');
is($su->query("SELECT redis_lock_acquire('cap:4', '0', '10 min')"), 't', 'now a new one fits');
is($pl->query("SELECT redis_lock_acquire('cap:pl', '0', '10 min')"), 't', 'other sessions are not limited by it');
is($su->query('SELECT redis_lock_release_all()'), 3, 'release all');
is($pl->query('SELECT redis_lock_release_all()'), 1, 'release all');

$pl->close;
$su->close;
no_crash_ok($node, 'status shape, token ttl, session cap');
$node->stop('fast');
done_testing();
