-- sem_available.lua: the permits a semaphore has available now (Redisson
-- RSemaphore availablePermits, after giving back the permits of owners
-- whose record expired, see sem_acquire.lua).
-- KEYS[1]  semaphore <name>
-- KEYS[2]  redislock_semaphore_holders:{<name>}
-- KEYS[3]  redislock_semaphore_timeout:{<name>}
-- KEYS[4]  channel redisson_sc:{<name>}
-- ARGV[1]  publish command
-- Expiries are by the Redis server's clock (see sem_acquire.lua).
-- Returns the count (0 when the key is absent), or the error
-- "NOTA semaphore" when the key holds data of another shape.
local t = redis.call('type', KEYS[1]).ok
if t ~= 'none' and (t ~= 'string' or
    not string.match(redis.call('get', KEYS[1]), '^%-?%d+$')) then
    return redis.error_reply('NOTA semaphore')
end
if redis.call('type', KEYS[2]).ok == 'hash' and
    redis.call('type', KEYS[3]).ok == 'zset' then
    local time = redis.call('time')
    local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
    local expired = redis.call('zrangebyscore', KEYS[3], '-inf', now)
    local back = 0
    for _, o in ipairs(expired) do
        back = back + tonumber(redis.call('hget', KEYS[2], o) or 0)
        redis.call('hdel', KEYS[2], o)
        redis.call('zrem', KEYS[3], o)
    end
    if back > 0 then
        redis.call(ARGV[1], KEYS[4], redis.call('incrby', KEYS[1], back))
    end
end
return tonumber(redis.call('get', KEYS[1]) or 0)
