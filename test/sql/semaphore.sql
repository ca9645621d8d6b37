-- Semaphores, expiring permits and count-down latches on one session, with
-- a second session (dblink) for real contention; waits of 0 (one attempt)
-- keep it quick.
SET statement_timeout = '60s';
SELECT dblink_connect('sem',
    format('dbname=%s port=%s host=%s', current_database(), current_setting('port'),
           split_part(current_setting('unix_socket_directories'), ',', 1)));

-- A pool of 3: set once, shared with the other session.
SELECT redis_semaphore_available('sem:a') AS before_set;
SELECT redis_semaphore_try_set_permits('sem:a', 3);
SELECT redis_semaphore_try_set_permits('sem:a', 5) AS set_again;
SELECT redis_semaphore_acquire('sem:a', 2);
SELECT redis_semaphore_available('sem:a');
SELECT * FROM dblink('sem', $$SELECT redis_semaphore_acquire('sem:a', 2, '0')$$) AS t(ok boolean);
SELECT * FROM dblink('sem', $$SELECT redis_semaphore_acquire('sem:a', 1, '0')$$) AS t(ok boolean);
SELECT redis_semaphore_available('sem:a');
SELECT kind, hold_count, scope, renewal FROM redis_locks WHERE name = 'sem:a' ORDER BY pid = pg_backend_pid();
-- more permits than this session holds: nothing is given back
SELECT redis_semaphore_release('sem:a', 3);
SELECT redis_semaphore_release('sem:a', 1), redis_semaphore_available('sem:a');
SELECT redis_semaphore_acquire('sem:a', 1, '0') AS again;
SELECT redis_semaphore_release('sem:a', 2), redis_semaphore_available('sem:a');
SELECT redis_semaphore_release('sem:a') AS none_left;
-- the other session's permit comes back when it ends
SELECT dblink_disconnect('sem');
SELECT dblink_connect('sem',
    format('dbname=%s port=%s host=%s', current_database(), current_setting('port'),
           split_part(current_setting('unix_socket_directories'), ',', 1)));
SELECT redis_semaphore_available('sem:a') AS after_other_session_ended;

-- The pool can grow and shrink; a negative pool makes acquirers wait.
SELECT redis_semaphore_add_permits('sem:a', 2), redis_semaphore_available('sem:a');
SELECT redis_semaphore_add_permits('sem:a', -6), redis_semaphore_available('sem:a');
SELECT redis_semaphore_acquire('sem:a', 1, '0') AS from_empty_pool;
SELECT redis_semaphore_add_permits('sem:a', 4), redis_semaphore_available('sem:a');

-- Transaction scope: back at COMMIT, ROLLBACK and subtransaction abort.
BEGIN;
SELECT redis_xact_semaphore_acquire('sem:a', 2);
SELECT redis_semaphore_available('sem:a'), hold_count, scope FROM redis_locks WHERE name = 'sem:a';
SELECT redis_semaphore_release('sem:a') AS release_xact_scope;
COMMIT;
SELECT redis_semaphore_available('sem:a') AS after_commit;
BEGIN;
SELECT redis_xact_semaphore_acquire('sem:a', 1);
SAVEPOINT s;
SELECT redis_xact_semaphore_acquire('sem:a', 2);
SELECT redis_semaphore_available('sem:a') AS inside;
ROLLBACK TO SAVEPOINT s;
SELECT redis_semaphore_available('sem:a') AS after_subxact_abort;
ROLLBACK;
SELECT redis_semaphore_available('sem:a') AS after_rollback;
-- session and transaction permits of one semaphore add up
BEGIN;
SELECT redis_semaphore_acquire('sem:a'), redis_xact_semaphore_acquire('sem:a');
SELECT hold_count, scope FROM redis_locks WHERE name = 'sem:a';
COMMIT;
SELECT hold_count, scope FROM redis_locks WHERE name = 'sem:a';
SELECT redis_lock_release_all() AS released_all, redis_semaphore_available('sem:a');

-- Expiring permits: ids are 32 hex digits; a lease ends them.
SELECT redis_permit_try_set_permits('sem:p', 2), redis_permit_try_set_permits('sem:p', 9) AS again;
SELECT redis_permit_acquire('sem:p') AS id1 \gset
SELECT length(:'id1'), :'id1' ~ '^[0-9a-f]{32}$' AS hex;
SELECT redis_permit_acquire('sem:p', '0', '1 hour') AS id2 \gset
SELECT redis_permit_acquire('sem:p', '0') IS NULL AS none_left;
SELECT * FROM dblink('sem', $$SELECT redis_permit_acquire('sem:p', '0') IS NULL$$) AS t(none boolean);
SELECT kind, hold_count, renewal, owner_id IN (:'id1', :'id2') AS owner_is_permit FROM redis_locks WHERE name = 'sem:p' ORDER BY renewal;
SELECT redis_permit_available('sem:p');
SELECT redis_permit_release('sem:p', upper(:'id1')) AS upper_case_accepted;
\set VERBOSITY terse
SELECT redis_permit_release('sem:p', :'id1') AS twice;
\set VERBOSITY default
SELECT redis_permit_release('sem:p', :'id2');
SELECT redis_permit_available('sem:p');
SELECT redis_permit_set_permits('sem:p', 5), redis_permit_available('sem:p');
BEGIN;
SELECT redis_xact_permit_acquire('sem:p') IS NOT NULL AS xact_permit;
SELECT redis_permit_available('sem:p');
COMMIT;
SELECT redis_permit_available('sem:p') AS after_commit;

-- Count-down latch.
SELECT redis_latch_count('sem:l'), redis_latch_await('sem:l', '0') AS open_when_absent;
SELECT redis_latch_try_set_count('sem:l', 2), redis_latch_try_set_count('sem:l', 5) AS again;
SELECT redis_latch_await('sem:l', '0') AS closed;
SELECT * FROM dblink('sem', $$SELECT redis_latch_count_down('sem:l')$$) AS t(count bigint);
SELECT redis_latch_count('sem:l');
SELECT redis_latch_count_down('sem:l'), redis_latch_count_down('sem:l') AS past_zero;
SELECT redis_latch_await('sem:l', '0') AS open;

-- Bad input: a clear ERROR, nothing changed.
SELECT rl_try($$SELECT redis_semaphore_acquire(NULL)::text$$);
SELECT rl_try($$SELECT redis_semaphore_acquire('')::text$$);
SELECT rl_try($$SELECT redis_semaphore_acquire(repeat('x', 513))::text$$);
SELECT rl_try($$SELECT redis_semaphore_acquire('sem:a', 0)::text$$);
SELECT rl_try($$SELECT redis_semaphore_acquire('sem:a', -1)::text$$);
SELECT rl_try($$SELECT redis_semaphore_acquire('sem:a', NULL)::text$$);
SELECT rl_try($$SELECT redis_semaphore_acquire('sem:a', 1000001)::text$$);
SELECT rl_try($$SELECT redis_semaphore_acquire('sem:a', 1, '-1 s')::text$$);
SELECT rl_try($$SELECT redis_semaphore_release('sem:a', 0)::text$$);
SELECT rl_try($$SELECT redis_semaphore_try_set_permits('sem:n', -1)::text$$);
SELECT rl_try($$SELECT redis_semaphore_try_set_permits('sem:n', NULL)::text$$);
SELECT rl_try($$SELECT redis_semaphore_add_permits('sem:n', NULL)::text$$);
SELECT rl_try($$SELECT redis_permit_set_permits('sem:n', -3)::text$$);
SELECT rl_try($$SELECT redis_permit_acquire('sem:p', '0', '0')::text$$);
SELECT rl_try($$SELECT redis_permit_acquire('sem:p', '0', '10 ms')::text$$);
SELECT rl_try($$SELECT redis_permit_release('sem:p', 'xyz')::text$$);
SELECT rl_try($$SELECT redis_permit_release('sem:p', repeat('g', 32))::text$$);
SELECT rl_try($$SELECT redis_permit_release('sem:p', NULL)::text$$);
SELECT rl_try($$SELECT redis_latch_try_set_count('sem:n', 0)::text$$);
SELECT rl_try($$SELECT redis_latch_try_set_count('sem:n', -5)::text$$);
SELECT rl_try($$SELECT redis_latch_try_set_count('sem:n', NULL)::text$$);
SELECT rl_try($$SELECT redis_latch_count(NULL)::text$$);
SELECT redis_semaphore_available('sem:n'), redis_permit_available('sem:n'), redis_latch_count('sem:n');
-- a key of another shape: a lock where a semaphore or latch is expected
SELECT redis_lock_acquire('sem:lock');
SELECT rl_try($$SELECT redis_semaphore_acquire('sem:lock', 1, '0')::text$$);
SELECT rl_try($$SELECT redis_semaphore_available('sem:lock')::text$$);
SELECT rl_try($$SELECT redis_permit_acquire('sem:lock', '0')::text$$);
SELECT rl_try($$SELECT redis_semaphore_try_set_permits('sem:lock', 1)::text$$);
SELECT rl_try($$SELECT redis_latch_count_down('sem:lock')::text$$);
SELECT rl_try($$SELECT redis_latch_await('sem:lock', '0')::text$$);
SELECT locked, held_by_me FROM redis_lock_status('sem:lock');
SELECT redis_lock_release('sem:lock');
-- and a semaphore where a lock is expected
SELECT rl_try($$SELECT redis_lock_acquire('sem:a', '0')::text$$);
SELECT count(*) AS entries_left FROM redis_locks WHERE pid = pg_backend_pid();

SELECT dblink_disconnect('sem');
