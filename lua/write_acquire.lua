-- write_acquire.lua: take or re-enter the exclusive hold of a read-write
-- lock (Redisson RReadWriteLock writeLock() layout), or upgrade the
-- owner's read hold when it is the only reader.
-- KEYS[1]  lock hash <name> (see read_acquire.lua)
-- KEYS[2]  fencing counter redisson_lock_token:{<name>}, shared with
--          exclusive locks of the name
-- KEYS[3]  redislock_rwlock_writer:{<name>}, this writer's mark while it
--          waits (see read_acquire.lua); removed when it takes the lock
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id
-- ARGV[3]  the owner's write count after this call (absolute, as above)
-- ARGV[4]  how long the waiting mark lives, in ms; 0: do not set it
-- The fencing counter never gets a TTL (see acquire.lua).
-- Returns {1, token, fresh} when taken; {0, pttl} when held by others.
-- A hash of another shape is not a lock: nothing here may change it, and
-- it counts as held by someone else. A read-write lock has mode read or
-- write and holders "<id>:<n>" / "<id>:<n>:write" with small positive counts.
local function foreign(key)
    local fields = redis.call('hgetall', key)
    for i = 1, #fields, 2 do
        local f, v = fields[i], fields[i + 1]
        if f == 'mode' then
            if v ~= 'read' and v ~= 'write' then
                return true
            end
        elseif not string.match(v, '^[1-9]%d?%d?%d?%d?$') or
            not (string.match(f, '^.+:%d+$') or string.match(f, '^.+:%d+:write$')) then
            return true
        end
    end
    return false
end

-- a string here holding a token is a lock of the plain layout (see
-- acquire.lua); other strings (a Redisson semaphore's or latch's count,
-- some application's data) Redis refuses below
if redis.call('type', KEYS[1])['ok'] == 'string' then
    local v = redis.call('get', KEYS[1])
    if #v <= 256 and string.match(v, '^[%w%p]+$') and
       not string.match(v, '^%-?%d+$') then
        return redis.error_reply('LAYOUT plain')
    end
end
local owner = ARGV[2]
local field = owner .. ':write'
local mode = redis.call('hget', KEYS[1], 'mode')

-- refused: wait at most pttl ms before trying again
local function blocked(pttl)
    if tonumber(ARGV[4]) > 0 then
        redis.call('set', KEYS[3], owner, 'px', ARGV[4])
    end
    return {0, pttl or redis.call('pttl', KEYS[1])}
end

-- whether a reader other than the owner has a field in the hash: as for
-- Redisson's writer, whose hold ran out (its timeout keys lapsed) still
-- counts while the hash lives; ours are given back when their session ends
local function other_readers()
    local fields = redis.call('hkeys', KEYS[1])
    for _, f in ipairs(fields) do
        if f ~= 'mode' and f ~= owner then
            return true
        end
    end
    return false
end

if (mode == false and redis.call('exists', KEYS[1]) == 1) or foreign(KEYS[1]) then
    return blocked()
end
if mode == 'write' and redis.call('hexists', KEYS[1], field) == 0 then
    return blocked()
end
if mode == 'read' and other_readers() then
    -- an upgrade waits for the other readers only, not for its own hold
    return blocked()
end

local held = mode == 'write'
local token
if held then
    token = tonumber(redis.call('get', KEYS[2])) or 0
else
    token = redis.call('incr', KEYS[2])
end
redis.call('persist', KEYS[2])
redis.call('hset', KEYS[1], 'mode', 'write')
if tonumber(redis.call('hget', KEYS[1], field) or 0) < tonumber(ARGV[3]) then
    redis.call('hset', KEYS[1], field, ARGV[3])
end
if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], ARGV[1])
end
if redis.call('get', KEYS[3]) == owner then
    redis.call('del', KEYS[3])
end
return {1, token, held and 0 or 1}
