-- Redisson RedissonReadLock.isLocked (readLock().isLocked(), 3.24.0+ form).
-- Source: redisson/src/main/java/org/redisson/RedissonReadLock.java, isLocked
-- (writeLock().isLocked() is a plain HGET <name> mode == "write")
--
-- KEYS[1] = lock name
-- Returns 1 = read mode, or write mode with read holds besides the writer's
-- field (a writer that also took the read lock); else 0.
local mode = redis.call('hget', KEYS[1], 'mode');
if (mode == 'read') or (mode == 'write' and redis.call('hlen', KEYS[1]) > 2) then
    return 1;
end;
return 0;
