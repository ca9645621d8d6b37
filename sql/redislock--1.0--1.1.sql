/* redislock--1.0--1.1.sql: from 1.0 to 1.1 */

\echo Use "ALTER EXTENSION redislock UPDATE TO '1.1'" to load this file. \quit

-- redis_locks gains the kind of each hold. Its function's result changes,
-- so view and function are made again (a user's view over redis_locks has
-- to be dropped first); comments and privileges as a fresh install has them.

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
'every Redis lock held by a session of this server: pid, name, kind (lock), scope (session/transaction), mode (fair/nonfair), hold count, lease, renewal (watchdog/fixed), fencing token, acquired at, last renewed at, state (held/expired/lost/releasing/unsettled), owner id, and with Redlock how many masters had the hold at the last acquisition or renewal (e.g. 5/5)';

GRANT SELECT ON redis_locks TO PUBLIC;
