-- Redisson RedissonFairLock.unlockInnerAsync.
-- Source: redisson/src/main/java/org/redisson/RedissonFairLock.java, unlockInnerAsync
--
-- KEYS[1] = lock name
-- KEYS[2] = queue    redisson_lock_queue:{<name>}
-- KEYS[3] = timeouts redisson_lock_timeout:{<name>}
-- KEYS[4] = channel  redisson_lock__channel:{<name>}   (the message goes to KEYS[4] .. ':' .. <next owner id>)
-- KEYS[5] = unlock latch redisson_unlock_latch:{<name>}:<request id> (newer Redisson; DEL'd by the client after)
-- ARGV[1] = unlock message, 0
-- ARGV[2] = lease time in ms (internalLockLeaseTime)
-- ARGV[3] = owner id
-- ARGV[4] = current time in ms (client clock)
-- ARGV[5] = publish command: "PUBLISH" ("SPUBLISH" with sharded pub/sub in a cluster)
-- ARGV[6] = latch ttl in ms
--
-- Returns nil = not held by this owner; 0 = still held (count > 0); 1 = released
-- (or the lock did not exist at all: then too the queue head is woken).
local val = redis.call('get', KEYS[5]);
if val ~= false then
    return tonumber(val);
end;

while true do
    local firstThreadId2 = redis.call('lindex', KEYS[2], 0);
    if firstThreadId2 == false then
        break;
    end;
    local timeout = redis.call('zscore', KEYS[3], firstThreadId2);
    if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[4]) then
        redis.call('zrem', KEYS[3], firstThreadId2);
        redis.call('lpop', KEYS[2]);
    else
        break;
    end;
end;

if (redis.call('exists', KEYS[1]) == 0) then
    local nextThreadId = redis.call('lindex', KEYS[2], 0);
    if nextThreadId ~= false then
        redis.call(ARGV[5], KEYS[4] .. ':' .. nextThreadId, ARGV[1]);
    end;
    redis.call('set', KEYS[5], 1, 'px', ARGV[6]);
    return 1;
end;
if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then
    return nil;
end;
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
if (counter > 0) then
    redis.call('pexpire', KEYS[1], ARGV[2]);
    redis.call('set', KEYS[5], 0, 'px', ARGV[6]);
    return 0;
end;

redis.call('del', KEYS[1]);
redis.call('set', KEYS[5], 1, 'px', ARGV[6]);
local nextThreadId = redis.call('lindex', KEYS[2], 0);
if nextThreadId ~= false then
    redis.call(ARGV[5], KEYS[4] .. ':' .. nextThreadId, ARGV[1]);
end;
return 1;
