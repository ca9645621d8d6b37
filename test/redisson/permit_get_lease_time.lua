-- Redisson RedissonPermitExpirableSemaphore.getLeaseTimeAsync(String permitId) (3.41.0+).
-- Source: redisson/src/main/java/org/redisson/RedissonPermitExpirableSemaphore.java,
--         getLeaseTimeAsync (evalWriteAsync, EVAL_LONG)
--
-- KEYS[1] = semaphore name
-- KEYS[2] = timeout zset  {<name>}:timeout
-- KEYS[3] = channel  redisson_sc:{<name>}
-- ARGV[1] = permit id, 16 raw bytes
-- ARGV[2] = 922337203685477 (nonExpirableTimeout)
-- ARGV[3] = now, epoch ms
-- ARGV[4] = publish command
--
-- reclaims expired permits first: every member of the zset with a score <= now is removed, the value INCRBYed by their number and, if it is then > 0, the value published.  Returns -1 (no lease), score - now (ms left), or 0 (no
-- such id: Java throws IllegalArgumentException).
local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, -1);
if #expiredIds > 0 then
    redis.call('zrem', KEYS[2], unpack(expiredIds));
    local value = redis.call('incrby', KEYS[1], #expiredIds);
    if tonumber(value) > 0 then
        redis.call(ARGV[4], KEYS[3], value);
    end;
end;

local value = redis.call('zscore', KEYS[2], ARGV[1]);
if (value ~= false) then
    return tonumber(value) == tonumber(ARGV[2]) and -1 or tonumber(value) - tonumber(ARGV[3]);
end;
return 0;
