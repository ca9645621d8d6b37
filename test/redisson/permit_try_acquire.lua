-- Redisson RedissonPermitExpirableSemaphore.tryAcquireAsync(List<String> ids, long timeoutDate)
-- (each attempt of acquire(), tryAcquire(), with or without wait and lease).
-- Source: redisson/src/main/java/org/redisson/RedissonPermitExpirableSemaphore.java,
--         tryAcquireAsync(List, long) (syncedEvalNoRetry, EVAL_STRING, ByteArrayCodec)
--
-- KEYS[1] = semaphore name (a string: the number of available permits)
-- KEYS[2] = timeout zset  {<name>}:timeout  (suffixName(name, "timeout")):
--           member = an acquired permit id as 16 raw bytes, score = its
--           expiry, epoch ms of the client's clock (922337203685477 = none)
-- KEYS[3] = channel  redisson_sc:{<name>}
-- ARGV[1] = permits wanted (n)
-- ARGV[2] = score for the new ids: now + lease ms, or 922337203685477
-- ARGV[3] = now, epoch ms (System.currentTimeMillis)
-- ARGV[4] = "922337203685477" (nonExpirableTimeout, Long.MAX_VALUE / 10000)
-- ARGV[5] = publish command: "PUBLISH" ("SPUBLISH" with sharded pub/sub)
-- ARGV[6..5+n] = the n new permit ids, 16 raw bytes each (hex-decoded)
--
-- First reclaims at most n expired permits (score <= now): ZREM, INCRBY
-- their number, publish the new value if > 0.  Returns "OK" = acquired
-- (value DECRBY n, the ids ZADDed with ARGV[2], the zset PEXPIREd to the
-- value key's pttl if it has one); ":<score>" = not enough permits, the
-- nearest expiry of an acquired permit (retry then); nil = not enough
-- permits and none will expire (wait for a message).
local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1]);
if #expiredIds > 0 then
    redis.call('zrem', KEYS[2], unpack(expiredIds));
    local value = redis.call('incrby', KEYS[1], #expiredIds);
    if tonumber(value) > 0 then
        redis.call(ARGV[5], KEYS[3], value);
    end;
end;
local value = redis.call('get', KEYS[1]);
if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then
    redis.call('decrby', KEYS[1], ARGV[1]);
    for i = 6, #ARGV, 1 do
        redis.call('zadd', KEYS[2], ARGV[2], ARGV[i]);
    end;

    local ttl = redis.call('pttl', KEYS[1]);
    if ttl > 0 then
        redis.call('pexpire', KEYS[2], ttl);
    end;

    return 'OK';
end;
local v = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES');
if v[1] ~= nil and v[2] ~= ARGV[4] then
    return ':' .. tostring(v[2]);
end
return nil;
