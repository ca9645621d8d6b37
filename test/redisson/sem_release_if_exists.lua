-- Redisson RedissonSemaphore.releaseIfExistsAsync(int permits) (4.0.0+).
-- Source: redisson/src/main/java/org/redisson/RedissonSemaphore.java,
--         releaseIfExistsAsync (syncedEvalNoRetry, EVAL_BOOLEAN, StringCodec)
--
-- KEYS[1] = semaphore name
-- KEYS[2] = channel  redisson_sc:{<name>}
-- ARGV[1] = permits released
-- ARGV[2] = publish command
--
-- Returns 0 (the key does not exist: nothing done) or 1 (INCRBY, the new
-- total published).
if redis.call('exists', KEYS[1]) == 0 then
    return 0
end
local value = redis.call('incrby', KEYS[1], ARGV[1])
redis.call(ARGV[2], KEYS[2], value)
return 1
