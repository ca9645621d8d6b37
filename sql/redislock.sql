/* redislock.sql: Redis-backed distributed locks (Redisson layout), the newest
 * version; the Makefile installs it as redislock--<default_version>.sql */

\echo Use "CREATE EXTENSION redislock" to load this file. \quit

-- The lock functions change session state and talk to Redis: VOLATILE and
-- PARALLEL UNSAFE. They are not STRICT because a NULL name or fair flag must
-- be an error, while NULL wait and lease have a meaning.

CREATE FUNCTION redis_lock_acquire(name text,
                                   wait interval DEFAULT NULL,
                                   lease interval DEFAULT NULL,
                                   fair boolean DEFAULT false)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redis_lock_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_lock_acquire(text, interval, interval, boolean) IS
'take a session-scope, reentrant Redis lock; wait NULL = until acquired, 0 = one attempt; lease NULL = watchdog lease; fair = FIFO among waiters; returns false when the wait ends without the lock';

CREATE FUNCTION redis_xact_lock_acquire(name text,
                                        wait interval DEFAULT NULL,
                                        lease interval DEFAULT NULL,
                                        fair boolean DEFAULT false)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redis_xact_lock_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_xact_lock_acquire(text, interval, interval, boolean) IS
'take a transaction-scope Redis lock, released at COMMIT or ROLLBACK; arguments as redis_lock_acquire';

CREATE FUNCTION redis_lock_release(name text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redis_lock_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_lock_release(text) IS
'drop one session-scope hold of a Redis lock; false with a WARNING when this session does not hold it';

-- Read-write locks (Redisson RReadWriteLock layout) and multi-locks.

CREATE FUNCTION redis_read_lock_acquire(name text,
                                        wait interval DEFAULT NULL,
                                        lease interval DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redis_read_lock_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_read_lock_acquire(text, interval, interval) IS
'take a session-scope, reentrant shared hold of a Redis read-write lock (Redisson readLock()); wait and lease as redis_lock_acquire';

CREATE FUNCTION redis_write_lock_acquire(name text,
                                         wait interval DEFAULT NULL,
                                         lease interval DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redis_write_lock_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_write_lock_acquire(text, interval, interval) IS
'take a session-scope, reentrant exclusive hold of a Redis read-write lock (Redisson writeLock()); a sole reader upgrades at once; wait and lease as redis_lock_acquire';

CREATE FUNCTION redis_xact_read_lock_acquire(name text,
                                             wait interval DEFAULT NULL,
                                             lease interval DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redis_xact_read_lock_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_xact_read_lock_acquire(text, interval, interval) IS
'take a transaction-scope shared hold of a Redis read-write lock, released at COMMIT or ROLLBACK; arguments as redis_read_lock_acquire';

CREATE FUNCTION redis_xact_write_lock_acquire(name text,
                                              wait interval DEFAULT NULL,
                                              lease interval DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redis_xact_write_lock_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_xact_write_lock_acquire(text, interval, interval) IS
'take a transaction-scope exclusive hold of a Redis read-write lock, released at COMMIT or ROLLBACK; arguments as redis_write_lock_acquire';

CREATE FUNCTION redis_read_lock_release(name text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redis_read_lock_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_read_lock_release(text) IS
'drop one session-scope read hold of a Redis read-write lock; false with a WARNING when this session does not hold it';

CREATE FUNCTION redis_write_lock_release(name text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redis_write_lock_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_write_lock_release(text) IS
'drop one session-scope write hold of a Redis read-write lock; false with a WARNING when this session does not hold it';

CREATE FUNCTION redis_lock_acquire_all(names text[],
                                       wait interval DEFAULT NULL,
                                       lease interval DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redis_lock_acquire_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_lock_acquire_all(text[], interval, interval) IS
'take every named Redis lock or none (at most 32 names), each as a session-scope hold that redis_lock_release drops; wait and lease as redis_lock_acquire';

CREATE FUNCTION redis_xact_lock_acquire_all(names text[],
                                            wait interval DEFAULT NULL,
                                            lease interval DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redis_xact_lock_acquire_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_xact_lock_acquire_all(text[], interval, interval) IS
'take every named Redis lock or none, at transaction scope (released at COMMIT or ROLLBACK); arguments as redis_lock_acquire_all';

CREATE FUNCTION redis_lock_release_all()
RETURNS integer
AS 'MODULE_PATHNAME', 'redis_lock_release_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_lock_release_all() IS
'release every session-scope Redis lock of this session; returns how many locks were released';

CREATE FUNCTION redis_lock_force_release(name text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redis_lock_force_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_lock_force_release(text) IS
'delete a Redis lock whoever holds it and wake its waiters (Redisson forceUnlock); not granted to PUBLIC';

REVOKE ALL ON FUNCTION redis_lock_force_release(text) FROM PUBLIC;

CREATE FUNCTION redis_lock_status(name text,
                                  OUT locked boolean,
                                  OUT holders text[],
                                  OUT hold_count integer,
                                  OUT ttl interval,
                                  OUT queue_length integer,
                                  OUT fencing_token bigint,
                                  OUT held_by_me boolean,
                                  OUT mode text,
                                  OUT rw_mode text)
RETURNS record
AS 'MODULE_PATHNAME', 'redis_lock_status'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_lock_status(text) IS
'what Redis says about a lock now: locked, holder owner ids, hold count, remaining lease, fair-queue length, last fencing token, whether this session holds it, and the mode (single, sentinel, cluster or redlock), and for a read-write lock whether it is held for read or write (holders then lists readers as <owner> and writers as <owner>:write); with redlock, what a majority of masters agree on';

CREATE FUNCTION redis_lock_nodes(name text,
                                 OUT node text,
                                 OUT locked boolean,
                                 OUT holders text[],
                                 OUT hold_count integer,
                                 OUT ttl interval,
                                 OUT queue_length integer,
                                 OUT fencing_token bigint,
                                 OUT held_by_me boolean,
                                 OUT error text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'redis_lock_nodes'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_lock_nodes(text) IS
'what each redlock master says about a lock now (error says why a master did not answer); one row for a single server or cluster';

CREATE FUNCTION redis_lock_fencing_token(name text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'redis_lock_fencing_token'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_lock_fencing_token(text) IS
'fencing token of this session''s current hold of a lock (increases with every fresh acquisition); NULL when not held';

CREATE FUNCTION redis_lock_owner_id()
RETURNS text
AS 'MODULE_PATHNAME', 'redis_lock_owner_id'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_lock_owner_id() IS
'this session''s owner id ("<server instance uuid>:<session number>"), the field it writes in lock hashes';

-- Views over shared memory (need shared_preload_libraries = 'redislock').
-- Readable by everyone, as pg_locks is; no Redis setting appears in them.

CREATE FUNCTION redis_locks(OUT pid integer,
                            OUT name text,
                            OUT scope text,
                            OUT mode text,
                            OUT hold_count integer,
                            OUT lease interval,
                            OUT renewal text,
                            OUT fencing_token bigint,
                            OUT acquired_at timestamptz,
                            OUT renewed_at timestamptz,
                            OUT state text,
                            OUT owner_id text,
                            OUT masters text,
                            OUT kind text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'redis_locks'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION redis_locks() IS
'locks held by the sessions of this server, from shared memory; see view redis_locks';

CREATE VIEW redis_locks AS
    SELECT pid, name, kind, scope, mode, hold_count, lease, renewal, fencing_token,
           acquired_at, renewed_at, state, owner_id, masters
    FROM redis_locks();

COMMENT ON VIEW redis_locks IS
'every Redis lock held by a session of this server: pid, name, kind (lock, read or write), scope (session/transaction), mode (fair/nonfair), hold count, lease, renewal (watchdog/fixed), fencing token, acquired at, last renewed at, state (held/expired/lost/releasing/unsettled), owner id, and with Redlock how many masters had the hold at the last acquisition or renewal (e.g. 5/5)';

CREATE FUNCTION redis_lock_stats(OUT acquires bigint,
                                 OUT reentries bigint,
                                 OUT waits bigint,
                                 OUT wait_time_ms bigint,
                                 OUT timeouts bigint,
                                 OUT releases bigint,
                                 OUT renewals bigint,
                                 OUT renewal_failures bigint,
                                 OUT lost_locks bigint,
                                 OUT worker_released bigint,
                                 OUT redis_errors bigint,
                                 OUT mode text)
RETURNS record
AS 'MODULE_PATHNAME', 'redis_lock_stats'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION redis_lock_stats() IS
'counters of redislock on this server since start; see view redis_lock_stats';

CREATE VIEW redis_lock_stats AS SELECT * FROM redis_lock_stats();

COMMENT ON VIEW redis_lock_stats IS
'redislock counters since server start: fresh acquisitions, reentries, waits and total wait time, waits that ended without the lock, releases, watchdog renewals and failed renewals, locks found lost, locks the worker released for ended sessions, Redis errors; and the mode in use (single, sentinel, cluster or redlock)';

GRANT SELECT ON redis_locks, redis_lock_stats TO PUBLIC;

-- Who waits for whom (deadlock detection, see redislock.deadlock_timeout).
-- The holders come from Redis at the time of the query.

CREATE FUNCTION redis_lock_waits(OUT pid integer,
                                 OUT name text,
                                 OUT kind text,
                                 OUT wait_started timestamptz,
                                 OUT holders text[],
                                 OUT holder_pids integer[])
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'redis_lock_waits'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_lock_waits() IS
'sessions of this server waiting for a Redis lock and who they wait for; see view redis_lock_waits';

CREATE VIEW redis_lock_waits AS SELECT * FROM redis_lock_waits();

COMMENT ON VIEW redis_lock_waits IS
'every session of this server waiting for a Redis lock: pid, name (a multi-lock wait shows its first), kind (lock, read or write), when the wait started, the owner ids it waits for as Redis says now (holders; for a fair waiter of a free lock, those queued ahead; for a reader, a waiting writer), and the pids of those that are sessions of this server';

GRANT SELECT ON redis_lock_waits TO PUBLIC;

CREATE FUNCTION redis_lock_blocking_pids(pid integer)
RETURNS integer[]
AS 'MODULE_PATHNAME', 'redis_lock_blocking_pids'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_lock_blocking_pids(integer) IS
'pids of the sessions of this server that the session with this pid waits for in Redis, like pg_blocking_pids; empty when it does not wait for a Redis lock';
