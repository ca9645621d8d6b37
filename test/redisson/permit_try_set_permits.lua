-- Redisson RedissonPermitExpirableSemaphore.trySetPermitsAsync(int permits).
-- Source: redisson/src/main/java/org/redisson/RedissonPermitExpirableSemaphore.java,
--         trySetPermitsAsync (syncedEvalWithRetry, EVAL_BOOLEAN)
--
-- KEYS[1] = semaphore name
-- KEYS[2] = channel  redisson_sc:{<name>}
-- ARGV[1] = permits
-- ARGV[2] = publish command
--
-- Returns 1 = the key was absent: SET to ARGV[1], ARGV[1] published; else 0.
local value = redis.call('get', KEYS[1]);
if (value == false) then
    redis.call('set', KEYS[1], ARGV[1]);
    redis.call(ARGV[2], KEYS[2], ARGV[1]);
    return 1;
end;
return 0;
