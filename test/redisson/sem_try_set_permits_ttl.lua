-- Redisson RedissonSemaphore.trySetPermitsAsync(int permits, Duration timeToLive) (3.29.0+).
-- Source: redisson/src/main/java/org/redisson/RedissonSemaphore.java,
--         trySetPermitsAsync(int, Duration) (syncedEvalWithRetry, EVAL_BOOLEAN)
--
-- KEYS[1] = semaphore name
-- KEYS[2] = channel  redisson_sc:{<name>}
-- ARGV[1] = permits
-- ARGV[2] = publish command
-- ARGV[3] = time to live in ms
--
-- As sem_try_set_permits.lua, the key SET with PX ARGV[3].
local value = redis.call('get', KEYS[1]);
if (value == false) then
    redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[3]);
    redis.call(ARGV[2], KEYS[2], ARGV[1]);
    return 1;
end;
return 0;
