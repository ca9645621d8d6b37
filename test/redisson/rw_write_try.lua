-- Redisson RedissonWriteLock.tryLockInnerAsync (RReadWriteLock.writeLock()).
-- Source: redisson/src/main/java/org/redisson/RedissonWriteLock.java,
--         tryLockInnerAsync; getLockName (the owner id + ":write")
--
-- KEYS[1] = lock name (the hash the read lock uses too)
-- ARGV[1] = lease time in ms (explicit leaseTime, or lockWatchdogTimeout)
-- ARGV[2] = writer field "<client uuid>:<thread id>:write"
--
-- Returns nil = acquired (a reentry adds the lease to the remaining pttl);
-- else the lock's pttl: read mode (the caller's own read hold included:
-- no read->write upgrade) or another thread's write lock.
local mode = redis.call('hget', KEYS[1], 'mode');
if (mode == false) then
    redis.call('hset', KEYS[1], 'mode', 'write');
    redis.call('hset', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;
if (mode == 'write') then
    if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
        redis.call('hincrby', KEYS[1], ARGV[2], 1);
        local currentExpire = redis.call('pttl', KEYS[1]);
        redis.call('pexpire', KEYS[1], currentExpire + ARGV[1]);
        return nil;
    end;
end;
return redis.call('pttl', KEYS[1]);
