-- Bad input: a clear error with the right SQLSTATE, and nothing changes.
SELECT rl_try($$SELECT redis_lock_acquire(NULL)::text$$);
SELECT rl_try($$SELECT redis_lock_acquire('')::text$$);
SELECT rl_try($$SELECT redis_lock_acquire(repeat('n', 513))::text$$);
SELECT rl_try($$SELECT redis_lock_acquire('bad', '-1 s')::text$$);
SELECT rl_try($$SELECT redis_lock_acquire('bad', '-1 day +1 hour')::text$$);
SELECT rl_try($$SELECT redis_lock_acquire('bad', NULL, '0')::text$$);
SELECT rl_try($$SELECT redis_lock_acquire('bad', NULL, '-5 s')::text$$);
SELECT rl_try($$SELECT redis_lock_acquire('bad', NULL, '99 ms')::text$$);
SELECT rl_try($$SELECT redis_lock_acquire('bad', NULL, '200 years')::text$$);
SELECT rl_try($$SELECT redis_lock_acquire('bad', '178000000 years')::text$$);
SELECT rl_try($$SELECT redis_lock_acquire('bad', NULL, NULL, NULL)::text$$);
SELECT rl_try($$SELECT redis_xact_lock_acquire(NULL)::text$$);
SELECT rl_try($$SELECT redis_xact_lock_acquire('bad', NULL, '0')::text$$);
SELECT rl_try($$SELECT redis_lock_release(NULL)::text$$);
SELECT rl_try($$SELECT redis_lock_release('')::text$$);
SELECT rl_try($$SELECT redis_lock_force_release(NULL)::text$$);
SELECT rl_try($$SELECT redis_lock_fencing_token('')::text$$);
SELECT rl_try($$SELECT (redis_lock_status(NULL)).locked::text$$);
SELECT rl_try($$SELECT (redis_lock_status(repeat('n', 600))).locked::text$$);
-- nothing was taken by any of these
SELECT locked, queue_length FROM redis_lock_status('bad');
SELECT redis_lock_release_all();

-- The smallest lease and a long wait bound are fine.
SELECT redis_lock_acquire('bad:edge', '1 year', '100 ms');
SELECT redis_lock_release('bad:edge') IS NOT NULL AS released_or_expired;

-- Connection settings are checked when set.
SELECT rl_try($$SET redislock.url = 'http://127.0.0.1'$$);
SELECT rl_try($$SET redislock.url = 'rediss://'$$);
SELECT rl_try($$SET redislock.url = 'redis://127.0.0.1:99999'$$);
SELECT rl_try($$SET redislock.url = 'redis://127.0.0.1:6379/x'$$);
SELECT rl_try($$SET redislock.url = 'unix://relative.sock'$$);
SELECT rl_try($$SET redislock.tls_verify = 'sometimes'$$);
SELECT rl_try($$SET redislock.tls_ca_file = '/nonexistent/ca.crt'$$);
SELECT rl_try($$SET redislock.tls_cert_file = '/nonexistent/client.crt'$$);
SELECT rl_try($$SET redislock.tls_key_file = '/nonexistent/client.key'$$);

-- A Redis that is not there: an error naming the server, never a hang.
SET redislock.url = 'redis://127.0.0.1:1';
SELECT rl_try($$SELECT redis_lock_acquire('bad:down', NULL, '1 min')::text$$);
-- (without a lease it is refused before Redis: the worker renews with the
-- server's settings, not this session's)
SELECT rl_try($$SELECT redis_lock_acquire('bad:down')::text$$);
SELECT rl_try($$SELECT (redis_lock_status('bad:down')).locked::text$$);
SELECT rl_try($$SELECT redis_lock_release('bad:down')::text$$);
RESET redislock.url;
-- and once it is reachable again, everything works
SELECT locked FROM redis_lock_status('bad:down');
SELECT redis_lock_acquire('bad:down', '0'), redis_lock_release('bad:down');
