-- plain_acquire.lua: take or re-enter a lock of the plain layout: one string
-- key holding the holder's token, as redis.io's lock pattern, redsync, node
-- redlock, redis-py, ShedLock and Spring Integration write it.
-- KEYS[1]  the lock: <name> itself, a string = the holder's token
-- KEYS[2]  redislock's own fencing counter redislock_plain_token:{<name>}
--          (the other clients keep none: tokens order SQL holders only)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  our token: the owner id "<uuid>:<session>"
-- ARGV[3]  hold count after this call: counted in the session, unused here
--          (the same arguments as acquire.lua, so the engine calls both alike)
-- KEYS[3]  Redlock only: our release mark (see plain_release.lua), removed
--          when we take the lock, so that our new hold can be restored
-- Returns {1, token, fresh} when taken (fresh = 1: we did not hold it and
--         the counter was incremented), {0, pttl} when another holds it;
--         the error "LAYOUT redisson" when the key is a lock hash of the
--         Redisson layout (or an integer without expiry: a Redisson
--         semaphore's or count-down latch's count), "NOTLOCK" when it holds other data. A re-entry
--         sets the lease again, as a Redisson re-entry does.
local kind = redis.call('type', KEYS[1])['ok']
if kind == 'hash' then
    return redis.error_reply('LAYOUT redisson')
end
if kind ~= 'none' and kind ~= 'string' then
    return redis.error_reply('NOTLOCK the key does not hold a lock')
end
local value = redis.call('get', KEYS[1])
-- an integer without expiry is a Redisson semaphore's or latch's count
if value and string.match(value, '^%-?%d+$') and
   redis.call('pttl', KEYS[1]) == -1 then
    return redis.error_reply('LAYOUT redisson')
end
if value and value ~= ARGV[2] then
    return {0, redis.call('pttl', KEYS[1])}
end
-- the counter goes first: if it cannot be incremented, nothing is held
local token
if value then
    token = tonumber(redis.call('get', KEYS[2])) or 0
else
    token = redis.call('incr', KEYS[2])
end
redis.call('set', KEYS[1], ARGV[2], 'px', ARGV[1])
if KEYS[3] then
    redis.call('del', KEYS[3])
end
return {1, token, value and 0 or 1}
