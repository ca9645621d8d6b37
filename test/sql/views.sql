-- redis_locks and redis_lock_stats read shared memory: what a session holds
-- shows at once, with its scope, mode, lease and state.
SELECT redis_lock_acquire('views:s'), redis_lock_acquire('views:s'),
       redis_lock_acquire('views:f', NULL, '1 min', true);
BEGIN;
SELECT redis_xact_lock_acquire('views:x'), redis_xact_lock_acquire('views:s');
SELECT name, scope, mode, hold_count, lease, renewal, state,
       pid = pg_backend_pid() AS mine,
       owner_id = redis_lock_owner_id() AS my_owner,
       fencing_token = redis_lock_fencing_token(name) AS token_matches,
       acquired_at <= renewed_at AS renewed_after_acquired
FROM redis_locks ORDER BY name;
COMMIT;
SELECT name, scope, hold_count FROM redis_locks ORDER BY name;
SELECT redis_lock_release_all();
SELECT count(*) AS still_listed FROM redis_locks WHERE pid = pg_backend_pid();

-- The mode the settings select.
SELECT mode FROM redis_lock_stats;

-- Counters move with what sessions do.
SELECT acquires AS a0, reentries AS e0, releases AS r0, timeouts AS t0
FROM redis_lock_stats \gset
SELECT redis_lock_acquire('views:c'), redis_lock_acquire('views:c'),
       redis_lock_release('views:c'), redis_lock_release('views:c');
SELECT acquires - :a0 AS acquires, reentries - :e0 AS reentries,
       releases - :r0 AS releases, timeouts - :t0 AS timeouts
FROM redis_lock_stats;

-- A fixed lease that ran out shows as expired; releasing it then is false
-- with a WARNING.
SELECT redis_lock_acquire('views:short', '0', '100 ms');
DO $$
BEGIN
    FOR i IN 1..200 LOOP
        EXIT WHEN (SELECT state FROM redis_locks WHERE name = 'views:short') = 'expired';
        PERFORM pg_sleep(0.05);
    END LOOP;
END $$;
SELECT state FROM redis_locks WHERE name = 'views:short';
SELECT redis_lock_release('views:short');
SELECT count(*) AS still_listed FROM redis_locks WHERE name = 'views:short';

-- Everyone may read the views; all carry comments.
SELECT c.relname, has_table_privilege('public', c.oid, 'SELECT') AS public_can_read,
       obj_description(c.oid, 'pg_class') IS NOT NULL AS commented
FROM pg_class c WHERE c.relname IN ('redis_locks', 'redis_lock_stats', 'redis_lock_waits') ORDER BY 1;

-- Nobody waits for a Redis lock here: redis_lock_waits is empty and
-- redis_lock_blocking_pids() gives an empty array, as pg_blocking_pids does.
SELECT count(*) AS waiting FROM redis_lock_waits;
SELECT redis_lock_blocking_pids(pg_backend_pid()) AS blocking;
SELECT redis_lock_blocking_pids(NULL) AS blocking_null;
SHOW redislock.deadlock_timeout;
