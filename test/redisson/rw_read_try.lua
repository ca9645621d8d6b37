-- Redisson RedissonReadLock.tryLockInnerAsync (RReadWriteLock.readLock()).
-- Source: redisson/src/main/java/org/redisson/RedissonReadLock.java,
--         tryLockInnerAsync; key names from getReadWriteTimeoutNamePrefix
--         (RedissonObject.suffixName) and getWriteLockName.
--
-- KEYS[1] = lock name (a hash: mode, and one count field per holder)
-- KEYS[2] = timeout prefix  {<name>}:<uuid>:<thread id>:rwlock_timeout
--           (<name>:<uuid>:<thread id>:rwlock_timeout if name contains "{");
--           the n-th nested read hold gets the string key KEYS[2]:n = 1, PX lease
-- ARGV[1] = lease time in ms (explicit leaseTime, or lockWatchdogTimeout)
-- ARGV[2] = reader field "<client uuid>:<thread id>"
-- ARGV[3] = the same thread's writer field "<client uuid>:<thread id>:write"
--           (a thread holding the write lock may also take the read lock)
--
-- Returns nil = acquired; else the lock's pttl (a writer of another
-- thread holds it; also the caller's own read->write upgrade never gets here).
local mode = redis.call('hget', KEYS[1], 'mode');
if (mode == false) then
    redis.call('hset', KEYS[1], 'mode', 'read');
    redis.call('hset', KEYS[1], ARGV[2], 1);
    redis.call('set', KEYS[2] .. ':1', 1);
    redis.call('pexpire', KEYS[2] .. ':1', ARGV[1]);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;
if (mode == 'read') or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
    local ind = redis.call('hincrby', KEYS[1], ARGV[2], 1);
    local key = KEYS[2] .. ':' .. ind;
    redis.call('set', key, 1);
    redis.call('pexpire', key, ARGV[1]);
    local remainTime = redis.call('pttl', KEYS[1]);
    redis.call('pexpire', KEYS[1], math.max(remainTime, ARGV[1]));
    return nil;
end;
return redis.call('pttl', KEYS[1]);
