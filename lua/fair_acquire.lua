-- fair_acquire.lua: take or re-enter a lock in FIFO order (Redisson
-- RFairLock layout), or join the queue of waiters.
-- KEYS[1]  lock hash <name>
-- KEYS[2]  waiter queue redisson_lock_queue:{<name>} (list of owner ids)
-- KEYS[3]  waiter deadlines redisson_lock_timeout:{<name>} (zset, ms)
-- KEYS[4]  fencing counter redisson_lock_token:{<name>}
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id
-- ARGV[3]  hold count the owner has after this call (absolute)
-- ARGV[4]  thread wait time in ms (redislock.fair_wait_timeout): the slot
--          this waiter adds to the deadlines of those queued behind it
-- ARGV[5]  '1' to join (or stay in) the queue when the lock is busy
-- The fencing counter never gets a TTL (see acquire.lua).
-- Returns {1, token, fresh} when taken (as acquire.lua), or
--         {0, pttl, head}: not taken; head = 1 when the caller is first in
--         the queue, so the lock's expiry is worth waking up for.
--
-- The queue arithmetic is Redisson's (RedissonFairLock.tryLockInnerAsync),
-- so that Java and SQL waiters in one queue agree on every deadline:
-- - a new waiter's deadline is the last waiter's deadline + its thread wait
--   time, or now + the lock's pttl + its thread wait time when none waits;
-- - whoever takes the lock subtracts its thread wait time from every
--   queued deadline (release.lua does the same for those behind a waiter
--   that gives up);
-- - a head whose deadline has passed is dropped; a head without one is not.
-- Both subtractions use the remover's own wait time, so they only stay
-- right when every client uses the same one: redislock.fair_wait_timeout
-- must equal the Java side's fairLockWaitTimeout (300 s unless set; 5 s
-- before Redisson 3.13.3).
-- One addition Redisson never makes: a SQL waiter that calls again while
-- queued is live, so it moves its deadline to at least now + ARGV[4] and
-- shifts every deadline behind it by as much, keeping the gaps Redisson's
-- arithmetic relies on; a waiter that stops calling is dropped as Redisson
-- drops one. A Java waiter behind thus only gets more time: its retry reply
-- (its deadline - wait time - now before 3.32) never turns negative on our
-- account.
--
-- The clock is the Redis server's (TIME), where Redisson passes each JVM's
-- currentTimeMillis: every PostgreSQL node then judges deadlines by one
-- clock whatever host it runs on, and the lock's pttl that starts an empty
-- queue is measured by that same clock. A non-empty queue's deadlines are
-- sums (last + wait time) that no clock enters; only the stale-head test
-- and the empty-queue start read it, so a JVM whose clock is off from
-- Redis's by d sees deadlines d early or late, as two JVMs off from each
-- other by d do.
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
local wait = tonumber(ARGV[4])
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

while true do
    local head = redis.call('lindex', KEYS[2], 0)
    if not head then
        break
    end
    local deadline = redis.call('zscore', KEYS[3], head)
    if not deadline or tonumber(deadline) > now then
        break
    end
    redis.call('zrem', KEYS[3], head)
    redis.call('lpop', KEYS[2])
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
    local queued = redis.call('zrange', KEYS[3], 0, -1)
    for i = 1, #queued do
        redis.call('zincrby', KEYS[3], -wait, queued[i])
    end
    return {1, token, 1}
end

local pttl = redis.call('pttl', KEYS[1])
if ARGV[5] ~= '1' then
    return {0, pttl, 0}
end
local mine = redis.call('zscore', KEYS[3], owner)
if mine then
    local shift = now + wait - tonumber(mine)
    if shift > 0 then
        local queue = redis.call('lrange', KEYS[2], 0, -1)
        local behind = false
        for i = 1, #queue do
            behind = behind or queue[i] == owner
            if behind and redis.call('zscore', KEYS[3], queue[i]) then
                redis.call('zincrby', KEYS[3], shift, queue[i])
            end
        end
    end
else
    local last = redis.call('lindex', KEYS[2], -1)
    local base = last and redis.call('zscore', KEYS[3], last)
    if base then
        base = tonumber(base)
    else
        base = now + pttl
    end
    redis.call('zadd', KEYS[3], base + wait, owner)
    redis.call('rpush', KEYS[2], owner)
end
if redis.call('lindex', KEYS[2], 0) == owner then
    return {0, pttl, 1}
end
return {0, pttl, 0}
