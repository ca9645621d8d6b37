-- Redisson RedissonCountDownLatch.deleteAsync.
-- Source: redisson/src/main/java/org/redisson/RedissonCountDownLatch.java,
--         deleteAsync (evalWriteAsync, EVAL_BOOLEAN)
--
-- KEYS[1] = latch name
-- KEYS[2] = channel  redisson_countdownlatch__channel__{<name>}
-- ARGV[1] = 1 (NEW_COUNT_MESSAGE: it *closes* waiters' latches, it does not open them)
-- ARGV[2] = publish command
--
-- Returns 1 = the key was deleted and "1" published; 0 = there was none.
if redis.call('del', KEYS[1]) == 1 then
    redis.call(ARGV[2], KEYS[2], ARGV[1]);
    return 1
else
    return 0
end
