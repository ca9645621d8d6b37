/* redislock--1.1--1.2.sql: from 1.1 to 1.2 */

\echo Use "ALTER EXTENSION redislock UPDATE TO '1.2'" to load this file. \quit

-- 1.2 adds the plain key layout: the lock functions take a trailing layout
-- argument (calls written for 1.1 work unchanged), and the status functions
-- and views gain a layout column. A function whose arguments or result
-- change is made again (a user's object depending on it, such as a view
-- over redis_locks or a BEGIN ATOMIC body calling redis_lock_acquire, has
-- to be dropped first); comments and privileges as a fresh install has them,
-- so GRANTs or REVOKEs made on them after installing 1.1 must be made again.
DROP FUNCTION redis_lock_acquire(text, interval, interval, boolean);
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

DROP FUNCTION redis_xact_lock_acquire(text, interval, interval, boolean);
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

DROP FUNCTION redis_lock_acquire_all(text[], interval, interval);
CREATE FUNCTION redis_lock_acquire_all(names text[],
                                       wait interval DEFAULT NULL,
                                       lease interval DEFAULT NULL,
                                       layout text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redis_lock_acquire_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_lock_acquire_all(text[], interval, interval, text) IS
'take every named Redis lock or none (at most 32 names), each as a session-scope hold that redis_lock_release drops; wait, lease and layout as redis_lock_acquire';

DROP FUNCTION redis_xact_lock_acquire_all(text[], interval, interval);
CREATE FUNCTION redis_xact_lock_acquire_all(names text[],
                                            wait interval DEFAULT NULL,
                                            lease interval DEFAULT NULL,
                                            layout text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redis_xact_lock_acquire_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION redis_xact_lock_acquire_all(text[], interval, interval, text) IS
'take every named Redis lock or none, at transaction scope (released at COMMIT or ROLLBACK); arguments as redis_lock_acquire_all';

DROP FUNCTION redis_lock_status(text);
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

DROP FUNCTION redis_lock_nodes(text);
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

DROP VIEW redis_locks;
DROP FUNCTION redis_locks();

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

GRANT SELECT ON redis_locks TO PUBLIC;

DROP VIEW redis_lock_waits;
DROP FUNCTION redis_lock_waits();

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
