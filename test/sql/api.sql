-- The functions on one session, plus a second session (dblink) that holds
-- locks for real contention.
SELECT dblink_connect('other',
    format('dbname=%s port=%s host=%s', current_database(), current_setting('port'),
           split_part(current_setting('unix_socket_directories'), ',', 1)));

-- Acquire, reentry, release
SELECT redis_lock_acquire('api:a');
SELECT redis_lock_acquire('api:a', '0');
-- a watchdog-mode reentry is counted here, not in Redis (docs/sql-reference.md, Reentry)
SELECT hold_count, held_by_me, locked FROM redis_lock_status('api:a');
SELECT redis_lock_release('api:a');
SELECT hold_count, held_by_me, locked FROM redis_lock_status('api:a');
SELECT redis_lock_release('api:a');
SELECT locked FROM redis_lock_status('api:a');
-- releasing what is not held: false with a WARNING
SELECT redis_lock_release('api:a');
SELECT redis_lock_release('api:never');

-- Fencing tokens grow with every fresh acquisition, not with reentry.
SELECT redis_lock_fencing_token('api:t') IS NULL AS no_token_before;
SELECT redis_lock_acquire('api:t');
SELECT redis_lock_fencing_token('api:t') AS t1 \gset
SELECT redis_lock_acquire('api:t');
SELECT redis_lock_fencing_token('api:t') = :t1 AS reentry_keeps_token;
SELECT redis_lock_release('api:t'), redis_lock_release('api:t');
SELECT redis_lock_fencing_token('api:t') IS NULL AS no_token_after;
SELECT redis_lock_acquire('api:t');
SELECT redis_lock_fencing_token('api:t') > :t1 AS token_increased;
SELECT fencing_token = redis_lock_fencing_token('api:t') AS status_shows_token
FROM redis_lock_status('api:t');
SELECT redis_lock_release('api:t');

-- Another session holds the lock: one attempt fails, a bounded wait fails.
SELECT * FROM dblink('other', $$SELECT redis_lock_acquire('api:c', NULL, '10 min')$$) AS t(ok boolean);
SELECT redis_lock_acquire('api:c', '0');
SELECT redis_lock_acquire('api:c', '200 ms');
SELECT redis_lock_acquire('api:c', '200 ms', NULL, true);
SELECT locked, held_by_me, hold_count, queue_length,
       ttl > '9 min' AND ttl <= '10 min' AS ttl_is_lease
FROM redis_lock_status('api:c');
-- a fair waiter that gave up left the queue
SELECT queue_length FROM redis_lock_status('api:c');
-- lock_timeout bounds a wait without limit, with the lock-timeout SQLSTATE
SET lock_timeout = '200ms';
SELECT rl_try($$SELECT redis_lock_acquire('api:c')::text$$);
SELECT rl_try($$SELECT redis_lock_acquire('api:c', NULL, NULL, true)::text$$);
SELECT queue_length FROM redis_lock_status('api:c');
RESET lock_timeout;
-- statement_timeout and cancel end the wait as any query cancel
SET statement_timeout = '200ms';
SELECT redis_lock_acquire('api:c');
RESET statement_timeout;
-- the holder's release lets us in
SELECT * FROM dblink('other', $$SELECT redis_lock_release('api:c')$$) AS t(ok boolean);
SELECT redis_lock_acquire('api:c', '0');
SELECT * FROM dblink('other', $$SELECT redis_lock_acquire('api:c', '0')$$) AS t(ok boolean);
SELECT redis_lock_release('api:c');

-- release_all drops session holds of every lock, counting locks
SELECT redis_lock_acquire('api:r1'), redis_lock_acquire('api:r1'), redis_lock_acquire('api:r2');
SELECT redis_lock_release_all();
SELECT locked FROM redis_lock_status('api:r1');
SELECT locked FROM redis_lock_status('api:r2');
SELECT redis_lock_release_all();

-- force_release deletes a lock held by another session
SELECT * FROM dblink('other', $$SELECT redis_lock_acquire('api:f', NULL, '10 min')$$) AS t(ok boolean);
SELECT redis_lock_force_release('api:f');
SELECT redis_lock_force_release('api:f');
SELECT redis_lock_acquire('api:f', '0');
-- the former holder learns its lock is gone
SELECT * FROM dblink('other', $$SELECT redis_lock_release('api:f')$$) AS t(ok boolean);
SELECT redis_lock_release('api:f');

-- a session that ends releases its locks at once
SELECT * FROM dblink('other', $$SELECT redis_lock_acquire('api:e', NULL, '10 min')$$) AS t(ok boolean);
SELECT dblink_disconnect('other');
SELECT redis_lock_acquire('api:e', '30 s');
SELECT redis_lock_release('api:e');

-- Names are arbitrary text, sent as arguments: spaces, quotes, braces,
-- newlines, multibyte characters, and the longest allowed name.
SELECT redis_lock_acquire(n, '0'), (redis_lock_status(n)).held_by_me, redis_lock_release(n)
FROM (VALUES ('with space'), ('it''s "quoted"'), ('{tagged}name'), ('a}b{c'),
             (E'line1\nline2'), ('ключ-锁-🔒'), ('x'), (repeat('n', 512)),
             ('redis.call(''flushall'')'), ('--'), ('KEYS[1]')) AS v(n);
