-- Redisson RedissonLock.tryLockInnerAsync, EVAL_LONG variant (non-fair, reentrant).
-- Source: redisson/src/main/java/org/redisson/RedissonLock.java, tryLockInnerAsync
--
-- KEYS[1] = lock name (raw name, a hash)
-- ARGV[1] = lease time in ms (watchdog mode: lockWatchdogTimeout, 30000)
-- ARGV[2] = owner id "<client uuid>:<thread id>" (getLockName(threadId))
--
-- Returns nil when acquired (fresh or reentrant), else the PTTL (ms) of the lock.
if ((redis.call('exists', KEYS[1]) == 0)
        or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then
    redis.call('hincrby', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;
return redis.call('pttl', KEYS[1]);
