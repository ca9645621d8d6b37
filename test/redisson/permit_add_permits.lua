-- Redisson RedissonPermitExpirableSemaphore.addPermitsAsync(int permits).
-- Source: redisson/src/main/java/org/redisson/RedissonPermitExpirableSemaphore.java,
--         addPermitsAsync (syncedEvalWithRetry, EVAL_VOID)
--
-- KEYS[1] = semaphore name
-- KEYS[2] = channel  redisson_sc:{<name>}
-- ARGV[1] = permits to add (may be negative)
-- ARGV[2] = publish command
--
-- SETs value + ARGV[1] (absent = 0; drops any TTL); publishes the delta
-- ARGV[1] (not the total, unlike RSemaphore) only if it is > 0.
local value = redis.call('get', KEYS[1]);
if (value == false) then
    value = 0;
end;
redis.call('set', KEYS[1], tonumber(value) + tonumber(ARGV[1]));
if tonumber(ARGV[1]) > 0 then
    redis.call(ARGV[2], KEYS[2], ARGV[1]);
end;
