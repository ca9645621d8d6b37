-- Redisson RedissonPermitExpirableSemaphore.setPermitsAsync(int permits).
-- Source: redisson/src/main/java/org/redisson/RedissonPermitExpirableSemaphore.java,
--         setPermitsAsync (syncedEvalWithRetry, EVAL_VOID)
--
-- KEYS[1] = semaphore name
-- KEYS[2] = channel  redisson_sc:{<name>}
-- KEYS[3] = timeout zset  {<name>}:timeout
-- ARGV[1] = total permits wanted
-- ARGV[2] = publish command
--
-- Key absent: SET ARGV[1], publish ARGV[1].  Else max = available + ZCOUNT
-- of the zset (expired permits are not reclaimed: they count as acquired);
-- if max differs from ARGV[1], INCRBY ARGV[1] - max and publish ARGV[1].
-- Returns nothing.
local available = redis.call('get', KEYS[1]);
if (available == false) then
    redis.call('set', KEYS[1], ARGV[1]);
    redis.call(ARGV[2], KEYS[2], ARGV[1]);
    return;
end;
local acquired = redis.call('zcount', KEYS[3], 0, '+inf');
local maximum = (acquired == false and 0 or acquired) + tonumber(available);
if (maximum == tonumber(ARGV[1])) then
    return;
end;
redis.call('incrby', KEYS[1], tonumber(ARGV[1]) - maximum);
redis.call(ARGV[2], KEYS[2], ARGV[1]);
