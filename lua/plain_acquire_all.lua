-- plain_acquire_all.lua: take or re-enter several locks of the plain layout
-- at once, all of them or none (what node redlock does for a lock of
-- several resources).
-- KEYS[2i-1]  lock i: <name i>, a string = the holder's token
-- KEYS[2i]    its fencing counter redislock_plain_token:{<name i>}
-- ARGV[1]     lease in milliseconds
-- ARGV[2]     our token (owner id)
-- ARGV[2+i]   hold count of name i after this call (unused; see
--             plain_acquire.lua)
-- Returns {1, token 1, fresh 1, token 2, fresh 2, ...} when all are taken;
--         {0, pttl, i}: name i is held by another (pttl of it, ms), and
--         nothing was changed; the errors of plain_acquire.lua.
local owner = ARGV[2]
local n = #KEYS / 2
for i = 1, n do
    local name = KEYS[2 * i - 1]
    local kind = redis.call('type', name)['ok']
    if kind == 'hash' then
        return redis.error_reply('LAYOUT redisson')
    end
    if kind ~= 'none' and kind ~= 'string' then
        return redis.error_reply('NOTLOCK the key does not hold a lock')
    end
    local value = redis.call('get', name)
    -- an integer without expiry is a Redisson semaphore's or latch's count
    if value and string.match(value, '^%-?%d+$') and
       redis.call('pttl', name) == -1 then
        return redis.error_reply('LAYOUT redisson')
    end
    if value and value ~= owner then
        return {0, redis.call('pttl', name), i}
    end
end
local out = {1}
for i = 1, n do
    local held = redis.call('get', KEYS[2 * i - 1]) == owner
    local token
    if held then
        token = tonumber(redis.call('get', KEYS[2 * i])) or 0
    else
        token = redis.call('incr', KEYS[2 * i])
    end
    out[#out + 1] = token
    out[#out + 1] = held and 0 or 1
end
for i = 1, n do
    redis.call('set', KEYS[2 * i - 1], owner, 'px', ARGV[1])
end
return out
