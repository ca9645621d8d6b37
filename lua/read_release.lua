-- read_release.lua: drop read holds of one owner (Redisson
-- RReadWriteLock readLock().unlock() layout).
-- KEYS[1]  lock hash <name>
-- KEYS[2]  channel redisson_rwlock:{<name>}
-- KEYS[3]  the owner's timeout key prefix {<name>}:<owner>:rwlock_timeout
-- KEYS[4]  the readers' key prefix {<name>}
-- KEYS[5]  redislock_rwlock_writer:{<name>}, a waiting redislock writer's
--          mark: when it is itself the only reader left (it waits to
--          upgrade), it is told with "1"
-- ARGV[1]  owner id
-- ARGV[2]  read count to keep (0 = release); never raises the count, so it
--          can be repeated after a lost reply
-- ARGV[3]  publish command: 'publish' or 'spublish'
-- Returns the owner's read count before the call (0: it held none).
-- The last live reader deletes the lock and publishes "0", as Redisson's.
local owner = ARGV[1]
local keep = tonumber(ARGV[2])
if redis.call('type', KEYS[1]).ok ~= 'hash' then
    return 0
end
local before = tonumber(redis.call('hget', KEYS[1], owner) or 0)
if before <= keep then
    return before
end
for n = before, keep + 1, -1 do
    redis.call('del', KEYS[3] .. ':' .. n)
end
if keep > 0 then
    redis.call('hset', KEYS[1], owner, keep)
    return before
end
redis.call('hdel', KEYS[1], owner)
if redis.call('hget', KEYS[1], 'mode') == 'write' then
    -- the owner's own write hold remains (it had downgraded)
    return before
end

local remain = -3
local upgrader = redis.call('get', KEYS[5])
local others = false
local fields = redis.call('hgetall', KEYS[1])
for i = 1, #fields, 2 do
    local count = tonumber(fields[i + 1])
    if fields[i] ~= 'mode' and count then
        -- as for write_acquire.lua, a reader whose hold ran out counts
        others = others or fields[i] ~= upgrader
        for n = count, 1, -1 do
            local t = redis.call('pttl', KEYS[4] .. ':' .. fields[i] ..
                                 ':rwlock_timeout:' .. n)
            if t > remain then
                remain = t
            end
        end
    end
end
if remain > 0 then
    redis.call('pexpire', KEYS[1], remain)
    if upgrader and not others then
        redis.call(ARGV[3], KEYS[2], '1')
    end
    return before
end
redis.call('del', KEYS[1])
redis.call(ARGV[3], KEYS[2], '0')
return before
