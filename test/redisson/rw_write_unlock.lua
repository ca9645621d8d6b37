-- Redisson RedissonWriteLock.unlockInnerAsync.
-- Source: redisson/src/main/java/org/redisson/RedissonWriteLock.java, unlockInnerAsync
--
-- KEYS[1] = lock name
-- KEYS[2] = channel  redisson_rwlock:{<name>}  (shared with the read lock)
-- KEYS[3] = unlock latch  redisson_unlock_latch:{<name>}:<request id>
-- ARGV[1] = message 1 (LockPubSub.READ_UNLOCK_MESSAGE: wakes every waiter)
-- ARGV[2] = lease time in ms (internalLockLeaseTime), re-applied when the
--           write count stays > 0
-- ARGV[3] = writer field "<client uuid>:<thread id>:write"
-- ARGV[4] = publish command: "PUBLISH" ("SPUBLISH" with sharded pub/sub)
-- ARGV[5] = latch ttl in ms
--
-- Returns nil = not held by this thread (also when the lock is gone: "1"
-- is published then; and in read mode); 0 = the write count stays > 0;
-- 1 = the write hold is released: the hash deleted and "1" published, or,
-- if the thread still holds reads (a downgrade), mode set to "read" and
-- nothing published.
local val = redis.call('get', KEYS[3]);
if val ~= false then
    return tonumber(val);
end;
local mode = redis.call('hget', KEYS[1], 'mode');
if (mode == false) then
    redis.call(ARGV[4], KEYS[2], ARGV[1]);
    redis.call('set', KEYS[3], 1, 'px', ARGV[5]);
    return nil;
end;
if (mode == 'write') then
    local lockExists = redis.call('hexists', KEYS[1], ARGV[3]);
    if (lockExists == 0) then
        return nil;
    else
        local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
        if (counter > 0) then
            redis.call('pexpire', KEYS[1], ARGV[2]);
            redis.call('set', KEYS[3], 0, 'px', ARGV[5]);
            return 0;
        else
            redis.call('hdel', KEYS[1], ARGV[3]);
            if (redis.call('hlen', KEYS[1]) == 1) then
                redis.call('del', KEYS[1]);
                redis.call(ARGV[4], KEYS[2], ARGV[1]);
            else
                -- has unlocked read-locks
                redis.call('hset', KEYS[1], 'mode', 'read');
            end;
            redis.call('set', KEYS[3], 1, 'px', ARGV[5]);
            return 1;
        end;
    end;
end;
return nil;
