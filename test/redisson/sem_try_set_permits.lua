-- Redisson RedissonSemaphore.trySetPermitsAsync(int permits).
-- Source: redisson/src/main/java/org/redisson/RedissonSemaphore.java,
--         trySetPermitsAsync(int) (syncedEvalWithRetry, EVAL_BOOLEAN)
--
-- KEYS[1] = semaphore name
-- KEYS[2] = channel  redisson_sc:{<name>}
-- ARGV[1] = permits
-- ARGV[2] = publish command
--
-- Returns 1 = the key was absent: SET to ARGV[1] (no TTL) and ARGV[1]
-- published; 0 = the key exists (whatever its value): nothing done.
local value = redis.call('get', KEYS[1]);
if (value == false) then
    redis.call('set', KEYS[1], ARGV[1]);
    redis.call(ARGV[2], KEYS[2], ARGV[1]);
    return 1;
end;
return 0;
