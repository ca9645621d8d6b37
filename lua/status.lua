-- status.lua: one consistent snapshot of a lock for redis_lock_status().
-- Any user may ask about any name, so keys that do not hold a lock are
-- refused here, inside Redis: their content never reaches the caller.
-- KEYS[1]  lock hash <name>
-- KEYS[2]  waiter queue redisson_lock_queue:{<name>}
-- KEYS[3]  fencing counter redisson_lock_token:{<name>}
-- KEYS[4]  the plain layout's counter redislock_plain_token:{<name>}
-- Returns {{owner, count, ...}, pttl, queue length, fencing counter or
--         false, read-write mode or false, layout}, or the error "NOTLOCK"
--         when a key has another shape. A lock of the plain layout is a
--         string (its holder's token, shown as the holder with count 1),
--         reported only when it looks like one: at most 256 printable
--         characters without spaces, so that other strings stay unread. A lock
--         hash holds owner ids "<id>:<number>" with positive integer counts;
--         a Redisson read-write lock also has the field "mode" (read or
--         write) and its writers "<id>:<number>:write", which are reported
--         as holders too. The queue is a list; the counter an integer.
local function kind(key)
    return redis.call('type', key)['ok']
end

local function not_lock()
    return redis.error_reply('NOTLOCK the key does not hold a lock')
end

-- With KEYS[1] alone (a cluster slot in migration, see status.c) the queue
-- and the counter are not read: length 0, no counter.
local lock = kind(KEYS[1])
if lock == 'string' then
    local value = redis.call('get', KEYS[1])
    if #value > 256 or not string.match(value, '^[%w%p]+$') then
        return not_lock()
    end
    local plain = KEYS[4] and redis.call('get', KEYS[4])
    if plain and not string.match(plain, '^%d+$') then
        return not_lock()
    end
    return {{value, '1'}, redis.call('pttl', KEYS[1]), 0, plain or false,
            false, 'plain'}
end
local queue = KEYS[2] and kind(KEYS[2]) or 'none'
local counter = KEYS[3] and kind(KEYS[3]) or 'none'
if (lock ~= 'none' and lock ~= 'hash') or
    (queue ~= 'none' and queue ~= 'list') or
    (counter ~= 'none' and counter ~= 'string') then
    return not_lock()
end
local token = KEYS[3] and redis.call('get', KEYS[3])
if token and not string.match(token, '^%d+$') then
    return not_lock()
end

local fields = redis.call('hgetall', KEYS[1])
local holders = {}
local rwlock = false
local writers = false
for i = 1, #fields, 2 do
    local field, value = fields[i], fields[i + 1]
    if field == 'mode' then
        if value ~= 'read' and value ~= 'write' then
            return not_lock()
        end
        rwlock = value
    elseif string.match(value, '^[1-9]%d*$') and
        (string.match(field, '^.+:%d+$') or string.match(field, '^.+:%d+:write$')) then
        writers = writers or string.sub(field, -6) == ':write'
        holders[#holders + 1] = field
        holders[#holders + 1] = value
    else
        return not_lock()
    end
end
if writers and not rwlock then
    return not_lock()
end

return {holders, redis.call('pttl', KEYS[1]),
        KEYS[2] and redis.call('llen', KEYS[2]) or 0, token or false, rwlock,
        'redisson'}
