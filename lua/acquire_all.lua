-- acquire_all.lua: take or re-enter several exclusive locks (Redisson RLock
-- layout) at once, all of them or none: nobody ever sees a part taken.
-- KEYS[2i-1]  lock hash of name i
-- KEYS[2i]    its fencing counter redisson_lock_token:{<name i>}
-- ARGV[1]     lease in milliseconds
-- ARGV[2]     owner id
-- ARGV[2+i]   the owner's hold count of name i after this call (absolute,
--             so that a retry after a lost reply is harmless)
-- The fencing counters never get a TTL (see acquire.lua).
-- Returns {1, token 1, fresh 1, token 2, fresh 2, ...} when all are taken;
--         {0, pttl, i}: name i is held by another owner (pttl of it, ms),
--         and nothing was changed; the error "LAYOUT plain" when a key is a
--         string: a lock of the plain layout, unless it holds an integer (a
--         Redisson semaphore's or latch's count: WRONGTYPE, see acquire.lua).
-- a plain lock's value (see acquire.lua)
local function is_token(v)
    return #v <= 256 and string.match(v, '^[%w%p]+$') ~= nil and
        string.match(v, '^%-?%d+$') == nil
end

local owner = ARGV[2]
local n = #KEYS / 2
for i = 1, n do
    local name = KEYS[2 * i - 1]
    local held = redis.pcall('hexists', name, owner)
    if type(held) == 'table' then
        if string.find(held['err'] or '', 'WRONGTYPE', 1, true) and
           redis.call('type', name)['ok'] == 'string' and
           is_token(redis.call('get', name)) then
            return redis.error_reply('LAYOUT plain')
        end
        redis.call('hexists', name, owner)    -- raised as in acquire.lua
    end
    if held == 0 and redis.call('exists', name) == 1 then
        return {0, redis.call('pttl', name), i}
    end
end
-- Redis keeps a script's earlier writes when a later command fails, so
-- every fencing counter goes first: if one cannot be incremented, no lock
-- has been written.
local out = {1}
for i = 1, n do
    local held = redis.call('hexists', KEYS[2 * i - 1], owner) == 1
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
    local name = KEYS[2 * i - 1]
    redis.call('persist', KEYS[2 * i])
    redis.call('hset', name, owner, ARGV[2 + i])
    redis.call('pexpire', name, ARGV[1])
end
return out
