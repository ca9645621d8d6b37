-- force_release.lua: delete a lock whoever holds it and wake its waiters
-- (Redisson forceUnlock).
-- KEYS[1]  lock hash <name>
-- KEYS[2]  unlock channel redisson_lock__channel:{<name>}
-- KEYS[3]  waiter queue redisson_lock_queue:{<name>}
-- KEYS[4]  read-write lock channel redisson_rwlock:{<name>}: a read-write
--          lock's waiters are woken there with "1" (every waiter, as
--          Redisson's write forceUnlock)
-- KEYS[5]  waiter deadlines redisson_lock_timeout:{<name>}
-- ARGV[1]  publish command: 'publish' or 'spublish' (see release.lua)
-- ARGV[2]  '1' when the caller's layout is plain: a string key is then a
--          lock of the plain layout, deleted and announced on KEYS[6] and
--          on the peers' channels ARGV[3...] (see plain_release.lua)
-- KEYS[6]  with ARGV[2] '1': redislock_plain__channel:{<name>}
-- Returns 1 when a lock was deleted, 0 when there was none. Refuses to delete
-- a key that is not a lock hash: it belongs to something else. A string
-- holding an integer is taken for a Redisson semaphore's or count-down
-- latch's count, not a lock of the plain layout (whose values are tokens);
-- a string that is no token (spaces, over 256 bytes) is refused too.
local kind = redis.call('type', KEYS[1])['ok']
if kind == 'none' then
    return 0
end
if kind == 'string' then
    local value = redis.call('get', KEYS[1])
    if string.match(value, '^%-?%d+$') then
        kind = 'count'
    elseif #value > 256 or not string.match(value, '^[%w%p]+$') then
        -- not a token (see status.lua): another application's data
        return redis.error_reply('NOTLOCK the key does not hold a lock')
    end
end
if kind == 'string' and ARGV[2] == '1' then
    redis.call('del', KEYS[1])
    redis.call(ARGV[1], KEYS[6], '0')
    for i = 3, #ARGV do
        redis.call('publish', ARGV[i], KEYS[1])
    end
    return 1
end
if kind == 'string' then
    return redis.error_reply('LAYOUT plain')
end
if kind == 'count' then
    return redis.error_reply('WRONGTYPE key holds a string, not a lock hash')
end
if kind ~= 'hash' then
    return redis.error_reply('WRONGTYPE key holds a ' .. kind .. ', not a lock hash')
end
local rwlock = redis.call('hexists', KEYS[1], 'mode') == 1
redis.call('del', KEYS[1])
if rwlock then
    redis.call(ARGV[1], KEYS[4], '1')
    return 1
end
redis.call(ARGV[1], KEYS[2], '0')
-- as Redisson's forceUnlock: drop the heads whose place ran out (by
-- Redis's clock, see fair_acquire.lua) and wake the first live one; a
-- message to a dropped head would wake nobody who may take the lock
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local head = redis.call('lindex', KEYS[3], 0)
while head do
    local deadline = redis.call('zscore', KEYS[5], head)
    if not deadline or tonumber(deadline) > now then
        redis.call(ARGV[1], KEYS[2] .. ':' .. head, '0')
        break
    end
    redis.call('zrem', KEYS[5], head)
    redis.call('lpop', KEYS[3])
    head = redis.call('lindex', KEYS[3], 0)
end
return 1
