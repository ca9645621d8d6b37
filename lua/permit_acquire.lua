-- permit_acquire.lua: take one expiring permit (Redisson
-- RPermitExpirableSemaphore layout and tryAcquire steps).
-- KEYS[1]  <name>: a string, the permits available
-- KEYS[2]  {<name>}:timeout: zset, raw 16-byte permit id -> expiry, epoch ms
-- KEYS[3]  channel redisson_sc:{<name>}
-- ARGV[1]  the permit id, 32 hex characters (stored as its 16 raw bytes,
--          as Redisson 3.17+ stores them)
-- ARGV[2]  its expiry, epoch ms
-- ARGV[3]  now, epoch ms, by the caller's clock (as Redisson's scripts)
-- ARGV[4]  publish command: 'publish' or 'spublish'
-- Returns {1, 0, fresh}: taken (fresh = 0 when an earlier try, whose reply
--         was lost, took this id already); {0, ms}: none available; ms
--         until the first permit out expires and comes back, or -1 when
--         none will (Redisson's no-lease score); an error "NOTA semaphore"
--         when a key holds data of another shape.
local NO_LEASE = 922337203685477
local t = redis.call('type', KEYS[1]).ok
if t ~= 'none' and (t ~= 'string' or
    not string.match(redis.call('get', KEYS[1]), '^%-?%d+$')) then
    return redis.error_reply('NOTA semaphore')
end
t = redis.call('type', KEYS[2]).ok
if t ~= 'none' and t ~= 'zset' then
    return redis.error_reply('NOTA semaphore')
end
local id = (string.gsub(ARGV[1], '..', function(h)
    return string.char(tonumber(h, 16))
end))
local now = tonumber(ARGV[3])

-- expired permits go back to the pool, as Redisson's scripts do
local expired = redis.call('zrangebyscore', KEYS[2], 0, now)
if #expired > 0 then
    for _, e in ipairs(expired) do
        redis.call('zrem', KEYS[2], e)
    end
    local value = redis.call('incrby', KEYS[1], #expired)
    if value > 0 then
        redis.call(ARGV[4], KEYS[3], value)
    end
end
if redis.call('zscore', KEYS[2], id) then
    redis.call('zadd', KEYS[2], ARGV[2], id)
    return {1, 0, 0}
end
if tonumber(redis.call('get', KEYS[1]) or 0) >= 1 then
    redis.call('decrby', KEYS[1], 1)
    redis.call('zadd', KEYS[2], ARGV[2], id)
    local ttl = redis.call('pttl', KEYS[1])
    if ttl > 0 then
        redis.call('pexpire', KEYS[2], ttl)
    end
    return {1, 0, 1}
end
local first = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if first[2] ~= nil and tonumber(first[2]) ~= NO_LEASE then
    return {0, math.max(tonumber(first[2]) - now, 0)}
end
return {0, -1}
