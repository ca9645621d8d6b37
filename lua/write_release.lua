-- write_release.lua: drop write holds of one owner (Redisson
-- RReadWriteLock writeLock().unlock() layout), and with leave its mark as
-- a waiting writer.
-- KEYS[1]  lock hash <name>
-- KEYS[2]  channel redisson_rwlock:{<name>}
-- KEYS[3]  redislock_rwlock_writer:{<name>} (see read_acquire.lua)
-- ARGV[1]  owner id
-- ARGV[2]  write count to keep (0 = release); never raises the count
-- ARGV[3]  publish command: 'publish' or 'spublish'
-- ARGV[4]  '1' to also remove the owner's mark as a waiting writer (it gave
--          up waiting), waking the readers the mark kept out
-- Returns the owner's write count before the call (0: it held none).
-- The last write hold publishes "1", which wakes every Redisson waiter.
-- Where the owner still has read holds (a downgrade) the lock turns to read
-- mode; Redisson publishes nothing then, we publish "1" too, so that
-- waiting readers come in at once instead of at their retry.
local field = ARGV[1] .. ':write'
local keep = tonumber(ARGV[2])
local wake = false
if ARGV[4] == '1' and redis.call('get', KEYS[3]) == ARGV[1] then
    redis.call('del', KEYS[3])
    wake = true
end

local before = 0
if redis.call('type', KEYS[1]).ok == 'hash' and
   redis.call('hget', KEYS[1], 'mode') == 'write' then
    before = tonumber(redis.call('hget', KEYS[1], field) or 0)
end
if before > keep and keep > 0 then
    redis.call('hset', KEYS[1], field, keep)
elseif before > keep then
    redis.call('hdel', KEYS[1], field)
    if redis.call('hlen', KEYS[1]) == 1 then
        redis.call('del', KEYS[1])
    else
        redis.call('hset', KEYS[1], 'mode', 'read')
    end
    wake = true
end
if wake then
    redis.call(ARGV[3], KEYS[2], '1')
end
return before
