-- sem_release.lua: give back permits of a semaphore that one owner holds
-- (Redisson RSemaphore layout, with redislock's record of holders).
-- KEYS[1]  semaphore <name>: a string, the permits available
-- KEYS[2]  redislock_semaphore_holders:{<name>}: hash owner -> permits held
-- KEYS[3]  redislock_semaphore_timeout:{<name>}: zset owner -> expiry
-- KEYS[4]  channel redisson_sc:{<name>}
-- ARGV[1]  owner id
-- ARGV[2]  permits to keep (0: all go back); never raises the count, so it
--          can be repeated after a lost reply
-- ARGV[3]  publish command: 'publish' or 'spublish'
-- Returns the owner's permit count before the call (0: it held none, or
-- its record had expired and its permits were already given back); the
-- error "NOTA semaphore", changing nothing, when the pool key holds data
-- of another shape.
-- Publishes the new total, as Redisson's release does.
local owner = ARGV[1]
local keep = tonumber(ARGV[2])
local t = redis.call('type', KEYS[1]).ok
if t ~= 'none' and (t ~= 'string' or
    not string.match(redis.call('get', KEYS[1]), '^%-?%d+$')) then
    return redis.error_reply('NOTA semaphore')
end
if redis.call('type', KEYS[2]).ok ~= 'hash' then
    return 0
end
local before = tonumber(redis.call('hget', KEYS[2], owner) or 0)
if before <= keep then
    return before
end
if keep > 0 then
    redis.call('hset', KEYS[2], owner, keep)
else
    redis.call('hdel', KEYS[2], owner)
    redis.call('zrem', KEYS[3], owner)
end
redis.call(ARGV[3], KEYS[4], redis.call('incrby', KEYS[1], before - keep))
return before
