-- fair_acquire.lua: take or re-enter a lock in FIFO order (Redisson
-- RFairLock layout), or join the queue of waiters.
-- KEYS[1]  lock hash <name>
-- KEYS[2]  waiter queue redisson_lock_queue:{<name>} (list of owner ids)
-- KEYS[3]  waiter deadlines redisson_lock_timeout:{<name>} (zset, ms)
-- KEYS[4]  fencing counter redisson_lock_token:{<name>}
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id
-- ARGV[3]  hold count the owner has after this call (absolute)
-- ARGV[4]  fair wait timeout in ms: how long this waiter keeps its place
--          without calling again
-- ARGV[5]  '1' to join (or stay in) the queue when the lock is busy
-- The fencing counter never gets a TTL (see acquire.lua).
-- Returns {1, token, fresh} when taken (as acquire.lua), or
--         {0, pttl, head}: not taken; head = 1 when the caller is first in
--         the queue, so the lock's expiry is worth waking up for.
--
-- Unlike Redisson, a waiter's deadline is refreshed on every call (now +
-- ARGV[4]) and others' deadlines are not shifted on acquisition: a live waiter
-- that keeps calling never loses its place, however long the holder keeps the
-- lock; only a silent one is dropped once it reaches the head.
local owner = ARGV[2]
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

while true do
    local head = redis.call('lindex', KEYS[2], 0)
    if not head then
        break
    end
    local deadline = redis.call('zscore', KEYS[3], head)
    if deadline and tonumber(deadline) > now then
        break
    end
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], head)
end

if redis.call('hexists', KEYS[1], owner) == 1 then
    redis.call('hset', KEYS[1], owner, ARGV[3])
    redis.call('pexpire', KEYS[1], ARGV[1])
    redis.call('persist', KEYS[4])
    return {1, tonumber(redis.call('get', KEYS[4])) or 0, 0}
end

local head = redis.call('lindex', KEYS[2], 0)
if redis.call('exists', KEYS[1]) == 0 and (not head or head == owner) then
    -- the counter first: if it cannot be incremented, nothing changes
    local token = redis.call('incr', KEYS[4])
    redis.call('persist', KEYS[4])
    redis.call('hset', KEYS[1], owner, ARGV[3])
    redis.call('pexpire', KEYS[1], ARGV[1])
    if head then
        redis.call('lpop', KEYS[2])
    end
    redis.call('zrem', KEYS[3], owner)
    return {1, token, 1}
end

local pttl = redis.call('pttl', KEYS[1])
if ARGV[5] ~= '1' then
    return {0, pttl, 0}
end
if redis.call('zadd', KEYS[3], now + tonumber(ARGV[4]), owner) == 1 then
    redis.call('rpush', KEYS[2], owner)
end
if redis.call('lindex', KEYS[2], 0) == owner then
    return {0, pttl, 1}
end
return {0, pttl, 0}
