-- acquire.lua: take or re-enter a lock, non-fair (Redisson RLock layout).
-- KEYS[1]  lock hash <name>: field = owner id, value = hold count
-- KEYS[2]  fencing counter redisson_lock_token:{<name>}
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id "<uuid>:<session>"
-- ARGV[3]  hold count the owner has after this call; an absolute count (not
--          +1) makes a retry after a lost reply harmless
-- KEYS[3]  Redlock only: the owner's release mark (see release.lua), removed
--          when it takes the lock, so that its new hold can be restored
-- The fencing counter never gets a TTL, as in Redisson's RFencedLock, which
-- only INCRs it (INCR keeps a TTL, so Java acquisitions would never extend
-- one and the counter would vanish under a name in use, restarting tokens
-- at 1). PERSIST drops a TTL an earlier redislock version put on it.
-- Returns the error "LAYOUT plain" when the key is a string: a lock of the
-- plain layout, unless it holds an integer (a Redisson semaphore's or
-- count-down latch's count): then the WRONGTYPE error, as before 1.2.
-- Returns {1, token, fresh}: taken; fresh = 1 when the owner did not hold it
--         before (the fencing counter was incremented), token = the counter.
--         {0, pttl}: held by another owner; pttl of the lock in ms.
-- A plain lock's value is a token (see status.lua): printable, no spaces,
-- at most 256 bytes, not an integer (a Redisson semaphore's or latch's
-- count); any other string is some other application's.
local function is_token(v)
    return #v <= 256 and string.match(v, '^[%w%p]+$') ~= nil and
        string.match(v, '^%-?%d+$') == nil
end

local owner = ARGV[2]
local held = redis.pcall('hexists', KEYS[1], owner)
if type(held) == 'table' then
    -- a string here is a lock of the plain layout (plain_acquire.lua);
    -- any other error is raised again, as the script's own (an ACL's
    -- refusal names the script)
    if string.find(held['err'] or '', 'WRONGTYPE', 1, true) and
       redis.call('type', KEYS[1])['ok'] == 'string' and
       is_token(redis.call('get', KEYS[1])) then
        return redis.error_reply('LAYOUT plain')
    end
    redis.call('hexists', KEYS[1], owner)
end
held = held == 1
if not held and redis.call('exists', KEYS[1]) == 1 then
    return {0, redis.call('pttl', KEYS[1])}
end
-- Redis keeps a script's earlier writes when a later command fails, so the
-- counter goes first: if it cannot be incremented, nothing is held.
local token
if held then
    token = tonumber(redis.call('get', KEYS[2])) or 0
else
    token = redis.call('incr', KEYS[2])
end
redis.call('persist', KEYS[2])
redis.call('hset', KEYS[1], owner, ARGV[3])
redis.call('pexpire', KEYS[1], ARGV[1])
if KEYS[3] then
    redis.call('del', KEYS[3])
end
return {1, token, held and 0 or 1}
