-- Redisson RedissonReadLock.forceUnlockAsync.
-- Source: redisson/src/main/java/org/redisson/RedissonReadLock.java, forceUnlockAsync
--
-- KEYS[1] = lock name
-- KEYS[2] = channel  redisson_rwlock:{<name>}
-- ARGV[1] = message 0 (LockPubSub.UNLOCK_MESSAGE)
-- ARGV[2] = publish command: "PUBLISH" ("SPUBLISH" with sharded pub/sub)
--
-- Returns 1 = the lock was in read mode: hash deleted (rwlock_timeout keys
-- are left to expire), "0" published; 0 = not read-locked, nothing done.
if (redis.call('hget', KEYS[1], 'mode') == 'read') then
    redis.call('del', KEYS[1]);
    redis.call(ARGV[2], KEYS[2], ARGV[1]);
    return 1;
end;
return 0;
