-- Redisson RedissonCountDownLatch.trySetCountAsync(long count).
-- Source: redisson/src/main/java/org/redisson/RedissonCountDownLatch.java,
--         trySetCountAsync (evalWriteAsync, EVAL_BOOLEAN; no WAIT)
--
-- KEYS[1] = latch name (a string: the count; absent = 0)
-- KEYS[2] = channel  redisson_countdownlatch__channel__{<name>}  (string
--           concatenation, not prefixName: braces are added even when the
--           name has some)
-- ARGV[1] = 1 (CountDownLatchPubSub.NEW_COUNT_MESSAGE: closes waiters' latches)
-- ARGV[2] = count
-- ARGV[3] = publish command: "PUBLISH" ("SPUBLISH" with sharded pub/sub)
--
-- Returns 1 = the key was absent: SET to the count (no TTL, no check that
-- it is > 0) and "1" published; 0 = it exists: nothing done.
if redis.call('exists', KEYS[1]) == 0 then
    redis.call('set', KEYS[1], ARGV[2]);
    redis.call(ARGV[3], KEYS[2], ARGV[1]);
    return 1
else
    return 0
end
