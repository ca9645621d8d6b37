-- Redisson RedissonPermitExpirableSemaphore.availablePermitsAsync.
-- Source: redisson/src/main/java/org/redisson/RedissonPermitExpirableSemaphore.java,
--         availablePermitsAsync (evalWriteAsync, EVAL_INTEGER)
--
-- KEYS[1] = semaphore name
-- KEYS[2] = timeout zset  {<name>}:timeout
-- KEYS[3] = channel  redisson_sc:{<name>}
-- ARGV[1] = now, epoch ms
-- ARGV[2] = publish command
--
-- reclaims expired permits first: every member of the zset with a score <= now is removed, the value INCRBYed by their number and, if it is then > 0, the value published.  Returns the available permits (0 if the key is absent).
local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[1], 'limit', 0, -1);
if #expiredIds > 0 then
    redis.call('zrem', KEYS[2], unpack(expiredIds));
    local value = redis.call('incrby', KEYS[1], #expiredIds);
    if tonumber(value) > 0 then
        redis.call(ARGV[2], KEYS[3], value);
    end;
    return value;
end;
local ret = redis.call('get', KEYS[1]);
return ret == false and 0 or ret;
