-- Redisson RedissonReadLock.unlockInnerAsync.
-- Source: redisson/src/main/java/org/redisson/RedissonReadLock.java,
--         unlockInnerAsync; getKeyPrefix; RedissonBaseLock.getUnlockLatchName
--
-- KEYS[1] = lock name
-- KEYS[2] = channel  redisson_rwlock:{<name>}  (shared with the write lock)
-- KEYS[3] = the caller's timeout prefix  {<name>}:<uuid>:<thread id>:rwlock_timeout
-- KEYS[4] = key prefix: KEYS[3] cut before ":<uuid>:<thread id>", i.e. {<name>}
--           (the bare name if it contains "{")
-- KEYS[5] = unlock latch  redisson_unlock_latch:{<name>}:<request id>
-- ARGV[1] = message 0 (LockPubSub.UNLOCK_MESSAGE: wakes one waiter per JVM)
-- ARGV[2] = reader field "<client uuid>:<thread id>"
-- ARGV[3] = publish command: "PUBLISH" ("SPUBLISH" with sharded pub/sub)
-- ARGV[4] = latch ttl in ms
--
-- Returns nil = not held by this thread (also when the lock is gone: "0"
-- is published then); 0 = a hold remains (ours, another reader's whose
-- rwlock_timeout keys live, or the write lock); 1 = released: the hash is
-- deleted (even if stale readers' fields remained) and "0" published.
local val = redis.call('get', KEYS[5]);
if val ~= false then
    return tonumber(val);
end;
local mode = redis.call('hget', KEYS[1], 'mode');
if (mode == false) then
    redis.call(ARGV[3], KEYS[2], ARGV[1]);
    redis.call('set', KEYS[5], 1, 'px', ARGV[4]);
    return nil;
end;
local lockExists = redis.call('hexists', KEYS[1], ARGV[2]);
if (lockExists == 0) then
    return nil;
end;
local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1);
if (counter == 0) then
    redis.call('hdel', KEYS[1], ARGV[2]);
end;
redis.call('del', KEYS[3] .. ':' .. (counter+1));
if (redis.call('hlen', KEYS[1]) > 1) then
    local maxRemainTime = -3;
    local keys = redis.call('hkeys', KEYS[1]);
    for n, key in ipairs(keys) do
        counter = tonumber(redis.call('hget', KEYS[1], key));
        if type(counter) == 'number' then
            for i=counter, 1, -1 do
                local remainTime = redis.call('pttl', KEYS[4] .. ':' .. key .. ':rwlock_timeout:' .. i);
                maxRemainTime = math.max(remainTime, maxRemainTime);
            end;
        end;
    end;
    if maxRemainTime > 0 then
        redis.call('pexpire', KEYS[1], maxRemainTime);
        redis.call('set', KEYS[5], 0, 'px', ARGV[4]);
        return 0;
    end;
    if mode == 'write' then
        redis.call('set', KEYS[5], 0, 'px', ARGV[4]);
        return 0;
    end;
end;
redis.call('del', KEYS[1]);
redis.call(ARGV[3], KEYS[2], ARGV[1]);
redis.call('set', KEYS[5], 1, 'px', ARGV[4]);
return 1;
