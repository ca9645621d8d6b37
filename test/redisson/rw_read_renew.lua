-- Redisson read-lock watchdog renewal, current batched form (4.4.0+: each
-- JVM renews only its own holders' rwlock_timeout keys).
-- Source: redisson/src/main/java/org/redisson/renewal/ReadLockTask.java, buildChunk
--   (older Redisson: RedissonReadLock.renewExpirationAsync, which renewed
--    every holder's timeout keys, other JVMs' included)
--
-- KEYS[2i-1] = lock name;  KEYS[2i] = its key prefix {<name>} (the bare
--              name if it contains "{"), for each lock of the batch
-- ARGV[1]    = lease time in ms (internalLockLeaseTime = lockWatchdogTimeout)
-- then, per lock in KEYS order: a count m, and m reader fields
--              "<client uuid>:<thread id>" (this JVM's threads holding it)
--
-- Per lock: every listed holder still in the hash gets its timeout keys
-- <prefix>:<field>:rwlock_timeout:c, c = count..1, PEXPIREd to the lease;
-- if any was there, the hash is PEXPIREd to the lease too.
-- Returns an array: 1 = renewed, 0 = none of the holders is left.
local result = {}
local argIdx = 2
for i = 1, #KEYS, 2 do
    local anyAlive = false;
    local lockNamesCount = tonumber(ARGV[argIdx]);
    argIdx = argIdx + 1;
    for k = 1, lockNamesCount do
        local counter = redis.call('hget', KEYS[i], ARGV[argIdx]);
        if (counter ~= false) then
            anyAlive = true;
            for c=counter, 1, -1 do
                redis.call('pexpire', KEYS[i+1] .. ':' .. ARGV[argIdx] .. ':rwlock_timeout:' .. c, ARGV[1]);
            end;
        end;
        argIdx = argIdx + 1;
    end;
    if (anyAlive) then
        redis.call('pexpire', KEYS[i], ARGV[1]);
        table.insert(result, 1);
    else
        table.insert(result, 0);
    end;
end;
return result;
