-- Redisson RedissonPermitExpirableSemaphore.updateLeaseTimeAsync(String permitId, long leaseTime, TimeUnit unit).
-- Source: redisson/src/main/java/org/redisson/RedissonPermitExpirableSemaphore.java,
--         updateLeaseTimeAsync (syncedEvalWithRetry, EVAL_BOOLEAN)
--
-- KEYS[1] = semaphore name
-- KEYS[2] = timeout zset  {<name>}:timeout
-- KEYS[3] = channel  redisson_sc:{<name>}
-- ARGV[1] = permit id, 16 raw bytes
-- ARGV[2] = new score: now + lease ms (922337203685477 for a lease of -1)
-- ARGV[3] = now, epoch ms
-- ARGV[4] = publish command
--
-- reclaims expired permits first: every member of the zset with a score <= now is removed, the value INCRBYed by their number and, if it is then > 0, the value published.  Returns 1 = the id is (still) there: ZADDed with the new
-- score; 0 = it is not (released, or expired and just reclaimed).
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
    redis.call('zadd', KEYS[2], ARGV[2], ARGV[1]);
    return 1;
end;
return 0;
