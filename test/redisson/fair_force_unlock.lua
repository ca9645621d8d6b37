-- Redisson RedissonFairLock.forceUnlockAsync.
-- Source: redisson/src/main/java/org/redisson/RedissonFairLock.java, forceUnlockAsync
--
-- KEYS[1] = lock name
-- KEYS[2] = queue    redisson_lock_queue:{<name>}
-- KEYS[3] = timeouts redisson_lock_timeout:{<name>}
-- KEYS[4] = channel  redisson_lock__channel:{<name>}
-- ARGV[1] = unlock message, 0
-- ARGV[2] = current time in ms
-- ARGV[3] = publish command: "PUBLISH" ("SPUBLISH" with sharded pub/sub in a cluster)
--
-- Returns 1 if the lock existed and was deleted (queue head woken), else 0.
while true do
    local firstThreadId2 = redis.call('lindex', KEYS[2], 0);
    if firstThreadId2 == false then
        break;
    end;
    local timeout = redis.call('zscore', KEYS[3], firstThreadId2);
    if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[2]) then
        redis.call('zrem', KEYS[3], firstThreadId2);
        redis.call('lpop', KEYS[2]);
    else
        break;
    end;
end;

if (redis.call('del', KEYS[1]) == 1) then
    local nextThreadId = redis.call('lindex', KEYS[2], 0);
    if nextThreadId ~= false then
        redis.call(ARGV[3], KEYS[4] .. ':' .. nextThreadId, ARGV[1]);
    end;
    return 1;
end;
return 0;
