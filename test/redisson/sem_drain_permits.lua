-- Redisson RedissonSemaphore.drainPermitsAsync.
-- Source: redisson/src/main/java/org/redisson/RedissonSemaphore.java,
--         drainPermitsAsync (syncedEvalWithRetry, EVAL_INTEGER)
--
-- KEYS[1] = semaphore name
--
-- Returns the permits taken: 0 if the key is absent, else its value (the key
-- SET to 0, dropping any TTL).  Publishes nothing.
local value = redis.call('get', KEYS[1]);
if (value == false) then
    return 0;
end;
redis.call('set', KEYS[1], 0);
return value;
