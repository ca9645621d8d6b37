-- Redisson RedissonWriteLock.forceUnlockAsync.
-- Source: redisson/src/main/java/org/redisson/RedissonWriteLock.java, forceUnlockAsync
--
-- KEYS[1] = lock name
-- KEYS[2] = channel  redisson_rwlock:{<name>}
-- ARGV[1] = message 1 (LockPubSub.READ_UNLOCK_MESSAGE)
-- ARGV[2] = publish command: "PUBLISH" ("SPUBLISH" with sharded pub/sub)
--
-- Returns 1 = the lock was in write mode: the whole hash (read fields of a
-- downgrading writer included) deleted, "1" published; 0 = not write-locked.
if (redis.call('hget', KEYS[1], 'mode') == 'write') then
    redis.call('del', KEYS[1]);
    redis.call(ARGV[2], KEYS[2], ARGV[1]);
    return 1;
end;
return 0;
