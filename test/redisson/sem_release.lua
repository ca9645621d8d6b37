-- Redisson RedissonSemaphore.releaseAsync(int permits).
-- Source: redisson/src/main/java/org/redisson/RedissonSemaphore.java,
--         releaseAsync(int) (syncedEvalNoRetry, EVAL_VOID, StringCodec)
--
-- KEYS[1] = semaphore name
-- KEYS[2] = channel  redisson_sc:{<name>}
-- ARGV[1] = permits released (no upper bound: unchecked, as the JDK's)
-- ARGV[2] = publish command: "PUBLISH" ("SPUBLISH" with sharded pub/sub)
--
-- INCRBY (creates the key, keeps its TTL) and publishes the new total.
-- Returns nothing (nil).
local value = redis.call('incrby', KEYS[1], ARGV[1]);
redis.call(ARGV[2], KEYS[2], value);
