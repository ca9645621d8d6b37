-- Redisson RedissonLock.unlockInnerAsync (non-fair, reentrant).
-- Source: redisson/src/main/java/org/redisson/RedissonLock.java, unlockInnerAsync;
--         key names from RedissonBaseLock.getUnlockLatchName / RedissonLock.getChannelName
--
-- KEYS[1] = lock name
-- KEYS[2] = channel  redisson_lock__channel:{<name>}   (no braces added if name contains "{")
-- KEYS[3] = unlock latch  redisson_unlock_latch:{<name>}:<request id>
--           (newer Redisson: idempotency marker for retried unlocks; the client
--            DELs it right after the script returns)
-- ARGV[1] = unlock message, 0 (LockPubSub.UNLOCK_MESSAGE)
-- ARGV[2] = lease time in ms (internalLockLeaseTime), re-applied when count stays > 0
-- ARGV[3] = owner id "<client uuid>:<thread id>"
-- ARGV[4] = publish command: "PUBLISH" ("SPUBLISH" with sharded pub/sub in a cluster)
-- ARGV[5] = latch ttl in ms (timeout * retryAttempts; any positive number)
--
-- Returns nil = not held by this owner; 0 = count decremented, still held;
--         1 = released (key deleted, "0" published on KEYS[2]).
local val = redis.call('get', KEYS[3]);
if val ~= false then
    return tonumber(val);
end;
if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then
    return nil;
end;
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
if (counter > 0) then
    redis.call('pexpire', KEYS[1], ARGV[2]);
    redis.call('set', KEYS[3], 0, 'px', ARGV[5]);
    return 0;
else
    redis.call('del', KEYS[1]);
    redis.call(ARGV[4], KEYS[2], ARGV[1]);
    redis.call('set', KEYS[3], 1, 'px', ARGV[5]);
    return 1;
end;
