-- Redisson RedissonCountDownLatch.countDownAsync.
-- Source: redisson/src/main/java/org/redisson/RedissonCountDownLatch.java,
--         countDownAsync (evalWriteNoRetryAsync, EVAL_BOOLEAN)
--
-- KEYS[1] = latch name
-- KEYS[2] = channel  redisson_countdownlatch__channel__{<name>}
-- ARGV[1] = 0 (CountDownLatchPubSub.ZERO_COUNT_MESSAGE: opens waiters' latches)
-- ARGV[2] = publish command
--
-- DECR; the key is deleted once the value is <= 0, and "0" published only
-- when it is exactly 0 (a DECR of a missing key gives -1: deleted, no
-- publish).  Returns nothing.
local v = redis.call('decr', KEYS[1]);
if v <= 0 then redis.call('del', KEYS[1]) end;
if v == 0 then redis.call(ARGV[2], KEYS[2], ARGV[1]) end;
