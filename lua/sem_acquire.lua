-- sem_acquire.lua: take permits of a semaphore (Redisson RSemaphore layout)
-- for one owner, and record them beside it, so that they come back when
-- the owner ends or stops renewing (Redisson keeps no such record).
-- KEYS[1]  semaphore <name>: a string, the permits available
-- KEYS[2]  redislock_semaphore_holders:{<name>}: hash owner -> permits held
-- KEYS[3]  redislock_semaphore_timeout:{<name>}: zset owner -> the epoch ms
--          when its record expires unless renewed
-- KEYS[4]  channel redisson_sc:{<name>}
-- ARGV[1]  lease of the owner's record, ms
-- ARGV[2]  owner id "<uuid>:<session>"
-- ARGV[3]  the owner's permit count after this call; an absolute count
--          makes a retry after a lost reply harmless
-- ARGV[4]  publish command: 'publish' or 'spublish'
-- Expiries are by the Redis server's clock: these records are ours alone,
-- so no client's clock needs to agree with another's. An acquisition never
-- shortens the owner's record (a shorter lease asked later, say).
-- Returns {1, 0, fresh}: taken (fresh = 1 when the owner held none);
--         {0, ms}: too few permits; ms until the first record expires and
--         its permits come back, or -1; an error "NOTA semaphore" when a
--         key holds data of another shape.
local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local function shape_ok()
    local t = redis.call('type', KEYS[1]).ok
    if t ~= 'none' and (t ~= 'string' or
        not string.match(redis.call('get', KEYS[1]), '^%-?%d+$')) then
        return false
    end
    t = redis.call('type', KEYS[2]).ok
    if t ~= 'none' and t ~= 'hash' then
        return false
    end
    t = redis.call('type', KEYS[3]).ok
    return t == 'none' or t == 'zset'
end
-- the permits of owners whose record expired go back to the pool
local function reclaim()
    local expired = redis.call('zrangebyscore', KEYS[3], '-inf', now)
    local back = 0
    for _, o in ipairs(expired) do
        back = back + tonumber(redis.call('hget', KEYS[2], o) or 0)
        redis.call('hdel', KEYS[2], o)
        redis.call('zrem', KEYS[3], o)
    end
    if back > 0 then
        redis.call(ARGV[4], KEYS[4], redis.call('incrby', KEYS[1], back))
    end
end

if not shape_ok() then
    return redis.error_reply('NOTA semaphore')
end
reclaim()
local owner = ARGV[2]
local target = tonumber(ARGV[3])
local held = tonumber(redis.call('hget', KEYS[2], owner) or 0)
local expiry = now + tonumber(ARGV[1])
if held >= target then
    redis.call('zadd', KEYS[3], 'gt', expiry, owner)
    return {1, 0, 0}
end
local available = tonumber(redis.call('get', KEYS[1]) or 0)
if available >= target - held then
    redis.call('decrby', KEYS[1], target - held)
    redis.call('hset', KEYS[2], owner, target)
    redis.call('zadd', KEYS[3], 'gt', expiry, owner)
    return {1, 0, held == 0 and 1 or 0}
end
local first = redis.call('zrange', KEYS[3], 0, 0, 'withscores')
if first[2] ~= nil then
    return {0, math.max(tonumber(first[2]) - now, 0)}
end
return {0, -1}
