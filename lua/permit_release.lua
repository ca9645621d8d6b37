-- permit_release.lua: give back one expiring permit (Redisson
-- RPermitExpirableSemaphore tryRelease(id)).
-- KEYS[1]  <name>: a string, the permits available
-- KEYS[2]  {<name>}:timeout: zset of raw permit ids -> expiry, epoch ms
-- KEYS[3]  channel redisson_sc:{<name>}
-- ARGV[1]  the permit id, 32 hex characters
-- ARGV[2]  permits of this id to keep: 0 releases it; 1 only reports
-- ARGV[3]  now, epoch ms
-- ARGV[4]  publish command
-- Returns 1 when the permit was out and had not expired, else 0; a
-- permit that had expired is still given back to the pool (as Redisson's);
-- the error "NOTA semaphore", changing nothing, when the pool key holds
-- data of another shape.
-- Publishes the new total, as Redisson's release does.
local t = redis.call('type', KEYS[1]).ok
if t ~= 'none' and (t ~= 'string' or
    not string.match(redis.call('get', KEYS[1]), '^%-?%d+$')) then
    return redis.error_reply('NOTA semaphore')
end
if redis.call('type', KEYS[2]).ok ~= 'zset' then
    return 0
end
local id = (string.gsub(ARGV[1], '..', function(h)
    return string.char(tonumber(h, 16))
end))
local score = redis.call('zscore', KEYS[2], id)
if not score then
    return 0
end
local live = tonumber(score) > tonumber(ARGV[3]) and 1 or 0
if tonumber(ARGV[2]) > 0 then
    return live
end
redis.call('zrem', KEYS[2], id)
redis.call(ARGV[4], KEYS[3], redis.call('incrby', KEYS[1], 1))
return live
