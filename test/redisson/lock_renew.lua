-- Redisson watchdog renewal ("renewExpiration"), current batched form.
-- Source: redisson/src/main/java/org/redisson/renewal/LockTask.java, buildChunk
--   (older Redisson: RedissonBaseLock.renewExpirationAsync, the same check for
--    one key: if hexists(KEYS[1], ARGV[2]) then pexpire(KEYS[1], ARGV[1]) return 1 end return 0)
--
-- KEYS[1..n]  = lock names
-- ARGV[1]     = lease time in ms (internalLockLeaseTime)
-- ARGV[i + 1] = owner id holding KEYS[i]
--
-- Returns an array: 1 = renewed, 0 = the owner's field is gone (lock lost).
local result = {}
for i = 1, #KEYS, 1 do
    if (redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1) then
        redis.call('pexpire', KEYS[i], ARGV[1]);
        table.insert(result, 1);
    else
        table.insert(result, 0);
    end;
end;
return result;
