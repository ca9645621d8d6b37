-- release.lua: drop holds of one owner, optionally leave the fair queue, and
-- wake waiters when the lock becomes free.
-- KEYS[1]  lock hash <name>
-- KEYS[2]  unlock channel redisson_lock__channel:{<name>}
-- KEYS[3]  waiter queue redisson_lock_queue:{<name>}
-- KEYS[4]  waiter deadlines redisson_lock_timeout:{<name>}
-- ARGV[1]  owner id
-- ARGV[2]  hold count to keep (0 = release). Never raises the count, so the
--          same call can be repeated after a lost reply, and can also trim
--          holds that a failed acquisition may have left.
-- ARGV[3]  '0', or the owner's thread wait time in ms (see fair_acquire.lua)
--          to also remove it from the fair queue: as Redisson's
--          acquireFailedAsync, every waiter behind it gets that much
--          earlier deadlines, the slot the owner had added to them
-- ARGV[4]  publish command: 'publish', or 'spublish' on a cluster with
--          sharded pub/sub (as Redisson chooses)
-- KEYS[5]  Redlock only, with keep 0: the owner's release mark
--          redislock_released:{<name>}:<owner>, which renew.lua checks
--          before it puts a hold back on a master that lost it, so that a
--          renewal arriving after this release cannot bring the lock back
-- ARGV[5]  how long the mark lives, in ms
-- Returns the owner's hold count before the call (0: it did not hold it).
--
-- A release publishes "0" on the main channel (Redisson RLock waiters) and on
-- "<channel>:<owner id at the queue head>" (Redisson RFairLock waiters).
local owner = ARGV[1]
local keep = tonumber(ARGV[2])
local leave = tonumber(ARGV[3])
if leave == 0 then
    leave = nil
end

if KEYS[5] and keep == 0 then
    redis.call('set', KEYS[5], '1', 'px', ARGV[5])
end

if leave then
    local queue = redis.call('lrange', KEYS[3], 0, -1)
    local behind = false
    for i = 1, #queue do
        if behind then
            redis.call('zincrby', KEYS[4], -leave, queue[i])
        end
        behind = behind or queue[i] == owner
    end
    redis.call('zrem', KEYS[4], owner)
    redis.call('lrem', KEYS[3], 0, owner)
end

local before = tonumber(redis.call('hget', KEYS[1], owner) or 0)
if before > 0 and keep > 0 then
    if before > keep then
        redis.call('hset', KEYS[1], owner, keep)
    end
    return before
end
if before > 0 then
    redis.call('del', KEYS[1])
    redis.call(ARGV[4], KEYS[2], '0')
elseif not leave or redis.call('exists', KEYS[1]) == 1 then
    return before
end

-- wake the first fair waiter that is still alive, dropping silent ones
-- (by Redis's clock, see fair_acquire.lua; as Redisson's unlock, a head
-- without a deadline is kept)
local head = redis.call('lindex', KEYS[3], 0)
if not head then
    return before
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
while head do
    local deadline = redis.call('zscore', KEYS[4], head)
    if not deadline or tonumber(deadline) > now then
        redis.call(ARGV[4], KEYS[2] .. ':' .. head, '0')
        break
    end
    redis.call('lpop', KEYS[3])
    redis.call('zrem', KEYS[4], head)
    head = redis.call('lindex', KEYS[3], 0)
end
return before
