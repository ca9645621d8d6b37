-- Redisson RedissonPermitExpirableSemaphore.tryReleaseAsync(String permitId)
-- (also release(id), which throws IllegalArgumentException on 0).
-- Source: redisson/src/main/java/org/redisson/RedissonPermitExpirableSemaphore.java,
--         tryReleaseAsync(String) (syncedEvalWithRetry, EVAL_BOOLEAN)
--
-- KEYS[1] = semaphore name
-- KEYS[2] = channel  redisson_sc:{<name>}
-- KEYS[3] = timeout zset  {<name>}:timeout
-- ARGV[1] = permit id, 16 raw bytes
-- ARGV[2] = 1 (the permits one id stands for)
-- ARGV[3] = now, epoch ms
-- ARGV[4] = publish command
--
-- Returns 0 = the id is not in the zset (nothing done), or it was but had
-- expired (score <= now: it is still removed, the value INCRBYed and the new
-- value published); 1 = released: removed, INCRBY 1, the new value published.
local expire = redis.call('zscore', KEYS[3], ARGV[1]);
local removed = redis.call('zrem', KEYS[3], ARGV[1]);
if tonumber(removed) ~= 1 then
    return 0;
end;
local value = redis.call('incrby', KEYS[1], ARGV[2]);
redis.call(ARGV[4], KEYS[2], value);
if tonumber(expire) <= tonumber(ARGV[3]) then
    return 0;
end;
return 1;
