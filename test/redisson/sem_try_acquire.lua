-- Redisson RedissonSemaphore.tryAcquireAsync(int permits) (one attempt; also
-- each attempt of acquire() and tryAcquire(permits, waitTime)).
-- Source: redisson/src/main/java/org/redisson/RedissonSemaphore.java,
--         tryAcquireAsync0(int), called by tryAcquireAsync(int) (syncedEvalNoRetry, EVAL_BOOLEAN, LongCodec)
--
-- KEYS[1] = semaphore name (a string: the number of available permits)
-- ARGV[1] = permits wanted (Java rejects < 0 and answers 0 without a script)
--
-- Returns 1 = acquired (the value decremented by ARGV[1]), 0 = not enough
-- permits (a missing key counts as 0).  Publishes nothing.
local value = redis.call('get', KEYS[1]);
if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then
    local val = redis.call('decrby', KEYS[1], ARGV[1]);
    return 1;
end;
return 0;
