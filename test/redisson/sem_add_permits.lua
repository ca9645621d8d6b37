-- Redisson RedissonSemaphore.addPermitsAsync(int permits).
-- Source: redisson/src/main/java/org/redisson/RedissonSemaphore.java,
--         addPermitsAsync (syncedEvalWithRetry, EVAL_VOID)
--
-- KEYS[1] = semaphore name
-- KEYS[2] = channel  redisson_sc:{<name>}
-- ARGV[1] = permits to add (may be negative)
-- ARGV[2] = publish command
--
-- SETs value + ARGV[1] (absent = 0; a plain SET: any TTL is dropped) and
-- publishes the new value, even when it is <= 0.  Returns nothing.
local value = redis.call('get', KEYS[1]);
if (value == false) then
    value = 0;
end;
redis.call('set', KEYS[1], value + ARGV[1]);
redis.call(ARGV[2], KEYS[2], value + ARGV[1]);
