-- sem_renew.lua: the watchdog's renewal of one owner's record of permits
-- (see sem_acquire.lua); it also gives back the permits of owners whose
-- record expired (a crashed server's), so that a live server's worker
-- frees them even when no one acquires.
-- KEYS[1]  semaphore <name>
-- KEYS[2]  redislock_semaphore_holders:{<name>}
-- KEYS[3]  redislock_semaphore_timeout:{<name>}
-- KEYS[4]  channel redisson_sc:{<name>}
-- ARGV[1]  lease of the record, ms
-- ARGV[2]  owner id
-- ARGV[3]  publish command
-- Expiries are by the Redis server's clock (see sem_acquire.lua).
-- Returns 1 when renewed, 0 when the owner holds no permits any more (its
-- record expired and its permits went back: they are lost).
local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
if redis.call('type', KEYS[2]).ok ~= 'hash' or
    redis.call('type', KEYS[3]).ok ~= 'zset' then
    return 0
end
local expired = redis.call('zrangebyscore', KEYS[3], '-inf', now)
local back = 0
for _, o in ipairs(expired) do
    back = back + tonumber(redis.call('hget', KEYS[2], o) or 0)
    redis.call('hdel', KEYS[2], o)
    redis.call('zrem', KEYS[3], o)
end
if back > 0 then
    redis.call(ARGV[3], KEYS[4], redis.call('incrby', KEYS[1], back))
end
if redis.call('hexists', KEYS[2], ARGV[2]) == 0 then
    return 0
end
redis.call('zadd', KEYS[3], now + tonumber(ARGV[1]), ARGV[2])
return 1
