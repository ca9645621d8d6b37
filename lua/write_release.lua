-- write_release.lua: drop write holds of one owner (Redisson
-- RReadWriteLock writeLock().unlock() layout).
-- KEYS[1]  lock hash <name>
-- KEYS[2]  channel redisson_rwlock:{<name>}
-- ARGV[1]  owner id
-- ARGV[2]  write count to keep (0 = release); never raises the count
-- ARGV[3]  publish command: 'publish' or 'spublish'
-- Returns the owner's write count before the call (0: it held none).
-- The last write hold publishes "1", which wakes every Redisson waiter.
-- Where the owner still has read holds (a downgrade) the lock turns to read
-- mode; Redisson publishes nothing then, we publish "1" too, so that
-- waiting readers come in at once instead of at their retry.
local field = ARGV[1] .. ':write'
local keep = tonumber(ARGV[2])
if redis.call('type', KEYS[1]).ok ~= 'hash' or
   redis.call('hget', KEYS[1], 'mode') ~= 'write' then
    return 0
end
local before = tonumber(redis.call('hget', KEYS[1], field) or 0)
if before <= keep then
    return before
end
if keep > 0 then
    redis.call('hset', KEYS[1], field, keep)
    return before
end
redis.call('hdel', KEYS[1], field)
if redis.call('hlen', KEYS[1]) == 1 then
    redis.call('del', KEYS[1])
else
    redis.call('hset', KEYS[1], 'mode', 'read')
end
redis.call(ARGV[3], KEYS[2], '1')
return before
