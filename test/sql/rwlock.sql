-- Read-write locks and multi-locks on one session, with a second session
-- (dblink) for real contention; waits of 0 (one attempt) keep it quick.
SELECT dblink_connect('rw',
    format('dbname=%s port=%s host=%s', current_database(), current_setting('port'),
           split_part(current_setting('unix_socket_directories'), ',', 1)));

-- Readers share, a writer excludes them and is excluded by them.
SELECT redis_read_lock_acquire('rw:a');
SELECT * FROM dblink('rw', $$SELECT redis_read_lock_acquire('rw:a', '0')$$) AS t(ok boolean);
SELECT locked, hold_count, held_by_me, rw_mode, cardinality(holders) AS nholders
FROM redis_lock_status('rw:a');
SELECT * FROM dblink('rw', $$SELECT redis_write_lock_acquire('rw:a', '0')$$) AS t(ok boolean);
SELECT redis_write_lock_acquire('rw:a', '0') AS upgrade_with_another_reader;
SELECT * FROM dblink('rw', $$SELECT redis_read_lock_release('rw:a')$$) AS t(ok boolean);

-- A sole reader upgrades at once; then it holds both, and the other
-- session can take neither.
SELECT redis_write_lock_acquire('rw:a', '0') AS sole_reader_upgrades;
SELECT rw_mode, held_by_me FROM redis_lock_status('rw:a');
SELECT * FROM dblink('rw', $$SELECT redis_read_lock_acquire('rw:a', '0')$$) AS t(ok boolean);
SELECT kind, hold_count, scope FROM redis_locks WHERE name = 'rw:a' ORDER BY kind;
-- releasing the write hold leaves the read hold (a downgrade)
SELECT redis_write_lock_release('rw:a');
SELECT rw_mode FROM redis_lock_status('rw:a');
SELECT * FROM dblink('rw', $$SELECT redis_read_lock_acquire('rw:a', '0'), redis_read_lock_release('rw:a')$$) AS t(ok boolean, released boolean);
SELECT redis_read_lock_release('rw:a');
SELECT locked FROM redis_lock_status('rw:a');

-- Reentry stacks; a write hold then a read hold (downgrade) is allowed.
SELECT redis_write_lock_acquire('rw:w'), redis_write_lock_acquire('rw:w', '0');
SELECT redis_read_lock_acquire('rw:w', '0') AS downgrade;
SELECT kind, hold_count FROM redis_locks WHERE name = 'rw:w' ORDER BY kind;
SELECT redis_lock_fencing_token('rw:w') IS NOT NULL AS writer_has_token;
SELECT redis_write_lock_release('rw:w'), redis_write_lock_release('rw:w');
SELECT redis_read_lock_release('rw:w');
SELECT redis_lock_fencing_token('rw:w') IS NULL AS no_token_after;
-- a reader gets no fencing token
SELECT redis_read_lock_acquire('rw:r');
SELECT redis_lock_fencing_token('rw:r') IS NULL AS reader_has_no_token;
SELECT redis_read_lock_release('rw:r');

-- Releasing what is not held: false with a WARNING.
SELECT redis_read_lock_release('rw:none');
SELECT redis_write_lock_release('rw:none');

-- One name is either an exclusive lock or a read-write lock.
SELECT redis_lock_acquire('rw:x');
SELECT rl_try($$SELECT redis_read_lock_acquire('rw:x')::text$$);
SELECT redis_lock_release('rw:x');
SELECT redis_write_lock_acquire('rw:x');
SELECT rl_try($$SELECT redis_lock_acquire('rw:x')::text$$);
SELECT redis_write_lock_release('rw:x');
-- across sessions the layouts exclude each other in Redis
SELECT * FROM dblink('rw', $$SELECT redis_lock_acquire('rw:y')$$) AS t(ok boolean);
SELECT redis_read_lock_acquire('rw:y', '0') AS read_of_exclusive_lock;
SELECT redis_write_lock_acquire('rw:y', '0') AS write_of_exclusive_lock;
SELECT * FROM dblink('rw', $$SELECT redis_lock_release('rw:y')$$) AS t(ok boolean);

-- Transaction scope: released at COMMIT and at ROLLBACK.
BEGIN;
SELECT redis_xact_read_lock_acquire('rw:t');
SELECT redis_xact_write_lock_acquire('rw:t2');
SELECT kind, scope FROM redis_locks WHERE name IN ('rw:t', 'rw:t2') ORDER BY name;
SELECT rl_try($$SELECT redis_read_lock_release('rw:t')::text$$);
COMMIT;
SELECT count(*) FROM redis_locks WHERE name IN ('rw:t', 'rw:t2');
BEGIN;
SELECT redis_xact_write_lock_acquire('rw:t');
ROLLBACK;
SELECT locked FROM redis_lock_status('rw:t');

-- Multi-locks: all or none.
SELECT redis_lock_acquire_all(ARRAY['m:b', 'm:a', 'm:c']);
SELECT name, kind, hold_count FROM redis_locks WHERE name LIKE 'm:%' ORDER BY name;
SELECT * FROM dblink('rw', $$SELECT redis_lock_acquire_all(ARRAY['m:z', 'm:c'], '0')$$) AS t(ok boolean);
SELECT locked FROM redis_lock_status('m:z');
SELECT redis_lock_release('m:b');
SELECT redis_lock_acquire_all(ARRAY['m:a', 'm:b'], '0') AS reentry_and_fresh;
SELECT name, hold_count FROM redis_locks WHERE name LIKE 'm:%' ORDER BY name;
SELECT redis_lock_release_all();
SELECT count(*) FROM redis_locks WHERE name LIKE 'm:%';
BEGIN;
SELECT redis_xact_lock_acquire_all(ARRAY['m:1', 'm:2']);
SELECT count(*) FROM redis_locks WHERE name LIKE 'm:_' AND scope = 'transaction';
COMMIT;
SELECT count(*) FROM redis_locks WHERE name LIKE 'm:%';

-- Bad input: a clear error, and nothing taken.
SELECT rl_try($$SELECT redis_read_lock_acquire(NULL)::text$$);
SELECT rl_try($$SELECT redis_write_lock_acquire('')::text$$);
SELECT rl_try($$SELECT redis_read_lock_acquire(repeat('n', 513))::text$$);
SELECT rl_try($$SELECT redis_write_lock_acquire('bad', '-1 s')::text$$);
SELECT rl_try($$SELECT redis_xact_read_lock_acquire('bad', NULL, '0')::text$$);
SELECT rl_try($$SELECT redis_xact_write_lock_acquire('bad', NULL, '99 ms')::text$$);
SELECT rl_try($$SELECT redis_read_lock_release(NULL)::text$$);
SELECT rl_try($$SELECT redis_write_lock_release('')::text$$);
SELECT rl_try($$SELECT redis_lock_acquire_all(NULL)::text$$);
SELECT rl_try($$SELECT redis_lock_acquire_all('{}')::text$$);
SELECT rl_try($$SELECT redis_lock_acquire_all(ARRAY['a', NULL])::text$$);
SELECT rl_try($$SELECT redis_lock_acquire_all(ARRAY['a', ''])::text$$);
SELECT rl_try($$SELECT redis_lock_acquire_all(ARRAY['a', repeat('n', 513)])::text$$);
SELECT rl_try($$SELECT redis_lock_acquire_all(ARRAY['a', 'b', 'a'])::text$$);
SELECT rl_try($$SELECT redis_lock_acquire_all(ARRAY[['a', 'b'], ['c', 'd']])::text$$);
SELECT rl_try($$SELECT redis_lock_acquire_all(array_agg('n' || i))::text FROM generate_series(1, 33) i$$);
SELECT rl_try($$SELECT redis_lock_acquire_all(ARRAY['a'], NULL, '0')::text$$);
SELECT rl_try($$SELECT redis_xact_lock_acquire_all(ARRAY['a'], '-1 s')::text$$);
SELECT count(*) FROM redis_locks;
SELECT locked FROM redis_lock_status('a');

SELECT dblink_disconnect('rw');
