-- permit_renew.lua: the watchdog's renewal of one expiring permit
-- (Redisson RPermitExpirableSemaphore updateLeaseTime).
-- KEYS[1]  <name>: a string, the permits available
-- KEYS[2]  {<name>}:timeout: zset of raw permit ids -> expiry, epoch ms
-- KEYS[3]  channel redisson_sc:{<name>}
-- ARGV[1]  the permit id, 32 hex characters
-- ARGV[2]  lease, ms
-- ARGV[3]  now, epoch ms
-- ARGV[4]  publish command
-- Returns 1 when renewed, 0 when the permit is no longer out (it expired
-- and went back to the pool, or was released by someone else: it is lost).
if redis.call('type', KEYS[2]).ok ~= 'zset' then
    return 0
end
local id = (string.gsub(ARGV[1], '..', function(h)
    return string.char(tonumber(h, 16))
end))
local now = tonumber(ARGV[3])
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
if not redis.call('zscore', KEYS[2], id) then
    return 0
end
redis.call('zadd', KEYS[2], now + tonumber(ARGV[2]), id)
return 1
