-- permit_available.lua: the expiring permits available now (Redisson
-- RPermitExpirableSemaphore availablePermits: expired permits go back to
-- the pool first).
-- KEYS[1]  <name>: a string, the permits available
-- KEYS[2]  {<name>}:timeout: zset of raw permit ids -> expiry, epoch ms
-- KEYS[3]  channel redisson_sc:{<name>}
-- ARGV[1]  now, epoch ms
-- ARGV[2]  publish command
-- Returns the count (0 when the key is absent), or the error
-- "NOTA semaphore" when a key holds data of another shape.
local t = redis.call('type', KEYS[1]).ok
if t ~= 'none' and (t ~= 'string' or
    not string.match(redis.call('get', KEYS[1]), '^%-?%d+$')) then
    return redis.error_reply('NOTA semaphore')
end
t = redis.call('type', KEYS[2]).ok
if t ~= 'none' and t ~= 'zset' then
    return redis.error_reply('NOTA semaphore')
end
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[1])
if #expired > 0 then
    for _, e in ipairs(expired) do
        redis.call('zrem', KEYS[2], e)
    end
    local value = redis.call('incrby', KEYS[1], #expired)
    if value > 0 then
        redis.call(ARGV[2], KEYS[3], value)
    end
end
return tonumber(redis.call('get', KEYS[1]) or 0)
