/* redislock.sql: Redis-backed distributed locks (Redisson layout), the newest
 * version; the Makefile installs it as redislock--<default_version>.sql */

\echo Use "CREATE EXTENSION redislock" to load this file. \quit

-- The lock functions change session state and talk to Redis: VOLATILE and
-- PARALLEL UNSAFE. They are not STRICT because a NULL name or fair flag must
-- be an error, while NULL wait and lease have a meaning.

CREATE FUNCTION redis_lock_acquire(name text,
                                   wait interval DEFAULT NULL,
                                   lease interval DEFAULT NULL,
                                   fair boolean DEFAULT false,
                                   layout text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redis_lock_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_lock_acquire(text, interval, interval, boolean, text) IS
'take a session-scope, reentrant Redis lock; wait NULL = until acquired, 0 = one attempt; lease NULL = watchdog lease; fair = FIFO among waiters; layout = redisson (a hash, as Redisson) or plain (one string key, as redsync, node redlock, redis-py, ShedLock, Spring Integration), NULL = redislock.layout; returns false when the wait ends without the lock';

CREATE FUNCTION redis_xact_lock_acquire(name text,
                                        wait interval DEFAULT NULL,
                                        lease interval DEFAULT NULL,
                                        fair boolean DEFAULT false,
                                        layout text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redis_xact_lock_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_xact_lock_acquire(text, interval, interval, boolean, text) IS
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
                                       lease interval DEFAULT NULL,
                                       layout text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redis_lock_acquire_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_lock_acquire_all(text[], interval, interval, text) IS
'take every named Redis lock or none (at most 32 names), each as a session-scope hold that redis_lock_release drops; wait, lease and layout as redis_lock_acquire';

CREATE FUNCTION redis_xact_lock_acquire_all(names text[],
                                            wait interval DEFAULT NULL,
                                            lease interval DEFAULT NULL,
                                            layout text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redis_xact_lock_acquire_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_xact_lock_acquire_all(text[], interval, interval, text) IS
'take every named Redis lock or none, at transaction scope (released at COMMIT or ROLLBACK); arguments as redis_lock_acquire_all';

-- Semaphores (Redisson RSemaphore layout), expiring permits (Redisson
-- RPermitExpirableSemaphore layout) and count-down latches (Redisson
-- RCountDownLatch layout). Permits a session takes come back when it ends.

CREATE FUNCTION redis_semaphore_try_set_permits(name text, permits integer)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redis_semaphore_try_set_permits'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_semaphore_try_set_permits(text, integer) IS
'give a Redis semaphore its pool of permits if it has none yet (Redisson trySetPermits); false when it exists';

CREATE FUNCTION redis_semaphore_add_permits(name text, delta integer)
RETURNS void
AS 'MODULE_PATHNAME', 'redis_semaphore_add_permits'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_semaphore_add_permits(text, integer) IS
'grow (or with a negative delta shrink) the pool of a Redis semaphore (Redisson addPermits)';

CREATE FUNCTION redis_semaphore_acquire(name text,
                                        permits integer DEFAULT 1,
                                        wait interval DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redis_semaphore_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_semaphore_acquire(text, integer, interval) IS
'take permits of a Redis semaphore for this session, waiting up to wait (NULL: until taken, bounded by lock_timeout and statement_timeout; 0: no wait); they come back by redis_semaphore_release or when the session ends';

CREATE FUNCTION redis_xact_semaphore_acquire(name text,
                                             permits integer DEFAULT 1,
                                             wait interval DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redis_xact_semaphore_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_xact_semaphore_acquire(text, integer, interval) IS
'take permits of a Redis semaphore for this transaction, given back at COMMIT or ROLLBACK; arguments as redis_semaphore_acquire';

CREATE FUNCTION redis_semaphore_release(name text, permits integer DEFAULT 1)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redis_semaphore_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_semaphore_release(text, integer) IS
'give back session-scope permits this session took of a Redis semaphore; false with a WARNING when it holds fewer';

CREATE FUNCTION redis_semaphore_available(name text)
RETURNS integer
AS 'MODULE_PATHNAME', 'redis_semaphore_available'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_semaphore_available(text) IS
'the permits a Redis semaphore has available now (0 when it does not exist)';

CREATE FUNCTION redis_permit_try_set_permits(name text, permits integer)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redis_permit_try_set_permits'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_permit_try_set_permits(text, integer) IS
'give a Redis semaphore of expiring permits its pool if it has none yet (Redisson RPermitExpirableSemaphore trySetPermits); false when it exists';

CREATE FUNCTION redis_permit_set_permits(name text, permits integer)
RETURNS void
AS 'MODULE_PATHNAME', 'redis_permit_set_permits'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_permit_set_permits(text, integer) IS
'make the pool of a Redis semaphore of expiring permits, available and out together, this size (Redisson setPermits)';

CREATE FUNCTION redis_permit_available(name text)
RETURNS integer
AS 'MODULE_PATHNAME', 'redis_permit_available'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_permit_available(text) IS
'the expiring permits available now, after expired ones went back (0 when the semaphore does not exist)';

CREATE FUNCTION redis_permit_acquire(name text,
                                     wait interval DEFAULT NULL,
                                     lease interval DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'redis_permit_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_permit_acquire(text, interval, interval) IS
'take one expiring permit for this session; returns its id (32 hex digits, as Redisson shows them) or NULL when the wait ended first; NULL lease: renewed by the watchdog while the session lives; wait as redis_semaphore_acquire';

CREATE FUNCTION redis_xact_permit_acquire(name text,
                                          wait interval DEFAULT NULL,
                                          lease interval DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'redis_xact_permit_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_xact_permit_acquire(text, interval, interval) IS
'take one expiring permit for this transaction, given back at COMMIT or ROLLBACK; arguments as redis_permit_acquire';

CREATE FUNCTION redis_permit_release(name text, permit_id text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redis_permit_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_permit_release(text, text) IS
'give back a session-scope expiring permit this session took; false with a WARNING when it is not, or no longer, held';

CREATE FUNCTION redis_latch_try_set_count(name text, count bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redis_latch_try_set_count'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_latch_try_set_count(text, bigint) IS
'set the count of a Redis count-down latch if it has none (Redisson trySetCount); false when it is set';

CREATE FUNCTION redis_latch_count_down(name text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'redis_latch_count_down'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_latch_count_down(text) IS
'count a Redis count-down latch down by one; at zero its waiters go on; returns the count after';

CREATE FUNCTION redis_latch_count(name text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'redis_latch_count'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_latch_count(text) IS
'the count of a Redis count-down latch now (0 when it does not exist)';

CREATE FUNCTION redis_latch_await(name text, wait interval DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redis_latch_await'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_latch_await(text, interval) IS
'wait until a Redis count-down latch reaches zero; false when the wait ended first; wait as redis_semaphore_acquire';

CREATE FUNCTION redis_lock_release_all()
RETURNS integer
AS 'MODULE_PATHNAME', 'redis_lock_release_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_lock_release_all() IS
'release every session-scope Redis lock, read or write hold and semaphore permit of this session; returns how many were released';

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
                                  OUT rw_mode text,
                                  OUT layout text)
RETURNS record
AS 'MODULE_PATHNAME', 'redis_lock_status'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_lock_status(text) IS
'what Redis says about a lock now: locked, holder owner ids, hold count, remaining lease, fair-queue length, last fencing token, whether this session holds it, and the mode (single, sentinel, cluster or redlock), for a read-write lock whether it is held for read or write (holders then lists readers as <owner> and writers as <owner>:write), and the key layout (redisson, or plain: a string key whose value is the holder''s token); with redlock, what a majority of masters agree on';

CREATE FUNCTION redis_lock_nodes(name text,
                                 OUT node text,
                                 OUT locked boolean,
                                 OUT holders text[],
                                 OUT hold_count integer,
                                 OUT ttl interval,
                                 OUT queue_length integer,
                                 OUT fencing_token bigint,
                                 OUT held_by_me boolean,
                                 OUT error text,
                                 OUT layout text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'redis_lock_nodes'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_lock_nodes(text) IS
'what each redlock master says about a lock now (error says why a master did not answer; layout as redis_lock_status); one row for a single server or cluster';

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
                            OUT kind text,
                            OUT layout text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'redis_locks'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION redis_locks() IS
'locks held by the sessions of this server, from shared memory; see view redis_locks';

CREATE VIEW redis_locks AS
    SELECT pid, name, kind, layout, scope, mode, hold_count, lease, renewal, fencing_token,
           acquired_at, renewed_at, state, owner_id, masters
    FROM redis_locks();

COMMENT ON VIEW redis_locks IS
'every Redis lock held by a session of this server: pid, name, kind (lock, read, write, semaphore or permit), layout (redisson, or plain for a lock kept as one string key), scope (session/transaction), mode (fair/nonfair), hold count, lease, renewal (watchdog/fixed), fencing token, acquired at, last renewed at, state (held/expired/lost/releasing/unsettled), owner id, and with Redlock how many masters had the hold at the last acquisition or renewal (e.g. 5/5)';

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
                                 OUT mode text,
                                 OUT deadlock_checks bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'redis_lock_stats'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION redis_lock_stats() IS
'counters of redislock on this server since start; see view redis_lock_stats';

CREATE VIEW redis_lock_stats AS SELECT * FROM redis_lock_stats();

COMMENT ON VIEW redis_lock_stats IS
'redislock counters since server start: fresh acquisitions, reentries, waits and total wait time, waits that ended without the lock, releases, watchdog renewals and failed renewals, locks found lost, locks the worker released for ended sessions, Redis errors; the mode in use (single, sentinel, cluster or redlock); and the deadlock checks of waiting sessions';

GRANT SELECT ON redis_locks, redis_lock_stats TO PUBLIC;

-- Who waits for whom (deadlock detection, see redislock.deadlock_timeout).
-- The holders come from Redis at the time of the query.

CREATE FUNCTION redis_lock_waits(OUT pid integer,
                                 OUT name text,
                                 OUT kind text,
                                 OUT wait_started timestamptz,
                                 OUT holders text[],
                                 OUT holder_pids integer[],
                                 OUT layout text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'redis_lock_waits'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_lock_waits() IS
'sessions of this server waiting for a Redis lock and who they wait for; see view redis_lock_waits';

CREATE VIEW redis_lock_waits AS SELECT * FROM redis_lock_waits();

COMMENT ON VIEW redis_lock_waits IS
'every session of this server waiting for a Redis lock: pid, name (a multi-lock wait shows its first), kind (lock, read or write), when the wait started, the owner ids it waits for as Redis says now (holders; for a fair waiter of a free lock, those queued ahead; for a reader, a waiting writer), the pids of those that are sessions of this server, and the layout of the lock (redisson or plain)';

GRANT SELECT ON redis_lock_waits TO PUBLIC;

CREATE FUNCTION redis_lock_blocking_pids(pid integer)
RETURNS integer[]
AS 'MODULE_PATHNAME', 'redis_lock_blocking_pids'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_lock_blocking_pids(integer) IS
'pids of the sessions of this server that the session with this pid waits for in Redis, like pg_blocking_pids; empty when it does not wait for a Redis lock';
