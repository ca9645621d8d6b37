-- read_acquire.lua: take or re-enter a shared hold of a read-write lock
-- (Redisson RReadWriteLock readLock() layout).
-- KEYS[1]  lock hash <name>: field mode = read|write, field <owner> = the
--          owner's read count, field <owner>:write = its write count
-- KEYS[2]  the owner's timeout key prefix {<name>}:<owner>:rwlock_timeout;
--          read hold n has the key <prefix>:n, alive while that hold is
-- KEYS[3]  redislock_rwlock_writer:{<name>}: set while a redislock writer
--          waits; new redislock readers stay out (Redisson's ignore it)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id "<uuid>:<session>"
-- ARGV[3]  the owner's read count after this call; an absolute count makes
--          a retry after a lost reply harmless. Each hold up to it gets at
--          least the lease (a re-entry sets it again, never shorter).
-- Returns {1, 0, fresh}: taken (fresh = 1 when the owner had no read hold
--         before); {0, pttl}: a writer holds it, or a redislock writer
--         waits (pttl of the lock or of that writer's mark).
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
local target = tonumber(ARGV[3])
local mode = redis.call('hget', KEYS[1], 'mode')
local count = tonumber(redis.call('hget', KEYS[1], owner) or 0)

if (mode == false and redis.call('exists', KEYS[1]) == 1) or foreign(KEYS[1]) then
    -- a hash without mode: an exclusive lock (RLock) of the same name
    return {0, redis.call('pttl', KEYS[1])}
end
if mode == 'write' and redis.call('hexists', KEYS[1], owner .. ':write') == 0 then
    return {0, redis.call('pttl', KEYS[1])}
end
if count == 0 and mode ~= 'write' then
    local pending = redis.call('pttl', KEYS[3])
    if pending > 0 then
        return {0, pending}
    end
end
if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'read')
end
for n = 1, target do
    local key = KEYS[2] .. ':' .. n
    if redis.call('pttl', key) < tonumber(ARGV[1]) then
        redis.call('set', key, '1', 'px', ARGV[1])
    end
end
if target > count then
    redis.call('hset', KEYS[1], owner, target)
end
local pttl = redis.call('pttl', KEYS[1])
if pttl < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], ARGV[1])
end
return {1, 0, count == 0 and 1 or 0}
