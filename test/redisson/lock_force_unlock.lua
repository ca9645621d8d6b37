-- Redisson RedissonLock.forceUnlockAsync (non-fair).
-- Source: redisson/src/main/java/org/redisson/RedissonLock.java, forceUnlockAsync
--
-- KEYS[1] = lock name
-- KEYS[2] = channel  redisson_lock__channel:{<name>}
-- ARGV[1] = unlock message, 0
-- ARGV[2] = publish command: "PUBLISH" ("SPUBLISH" with sharded pub/sub in a cluster)
--
-- Returns 1 if the lock existed and was deleted (and "0" published), else 0.
if (redis.call('del', KEYS[1]) == 1) then
    redis.call(ARGV[2], KEYS[2], ARGV[1]);
    return 1
else
    return 0
end
