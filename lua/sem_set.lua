-- sem_set.lua: set or change the pool of a semaphore or of expiring
-- permits (Redisson RSemaphore / RPermitExpirableSemaphore trySetPermits,
-- setPermits and addPermits, with their messages).
-- KEYS[1]  <name>: a string, the permits available
-- KEYS[2]  channel redisson_sc:{<name>}
-- KEYS[3]  this call's record {<name>}:redislock_call:<random id>, which
--          holds the outcome for a while so that a request sent again
--          (after a reply lost to a broken connection or a failover) is
--          answered, not applied twice (an add would add twice)
-- KEYS[4]  expiring permits only: {<name>}:timeout, zset of permits out
-- ARGV[1]  'try_set': set to ARGV[2] if absent, publish it;
--          'set' (expiring permits): make available + out equal ARGV[2],
--          publish it if anything changed;
--          'add': add ARGV[2] (may be negative) and publish the new total,
--          or with KEYS[4] the delta when positive, as Redisson does
-- ARGV[2]  permits
-- ARGV[3]  publish command
-- ARGV[4]  how long the call's record lives, ms
-- Returns 1 when set, 0 when not (try_set of a key that exists), or the
-- error "NOTA semaphore" when a key holds data of another shape.
local t = redis.call('type', KEYS[1]).ok
if t ~= 'none' and (t ~= 'string' or
    not string.match(redis.call('get', KEYS[1]), '^%-?%d+$')) then
    return redis.error_reply('NOTA semaphore')
end
if KEYS[4] ~= nil then
    t = redis.call('type', KEYS[4]).ok
    if t ~= 'none' and t ~= 'zset' then
        return redis.error_reply('NOTA semaphore')
    end
end
local done = redis.call('get', KEYS[3])
if done then
    return tonumber(done)
end
local function outcome(result)
    redis.call('set', KEYS[3], result, 'px', ARGV[4])
    return result
end
local op = ARGV[1]
local permits = tonumber(ARGV[2])
local value = redis.call('get', KEYS[1])
if op == 'try_set' or (op == 'set' and value == false) then
    if value ~= false then
        return outcome(0)
    end
    redis.call('set', KEYS[1], permits)
    redis.call(ARGV[3], KEYS[2], permits)
    return outcome(1)
end
if op == 'set' then
    local max = tonumber(value) + redis.call('zcount', KEYS[4], '-inf', '+inf')
    if max ~= permits then
        redis.call('incrby', KEYS[1], permits - max)
        redis.call(ARGV[3], KEYS[2], permits)
    end
    return outcome(1)
end
local total = tonumber(value or 0) + permits
redis.call('set', KEYS[1], total)
if KEYS[4] == nil then
    redis.call(ARGV[3], KEYS[2], total)
elseif permits > 0 then
    redis.call(ARGV[3], KEYS[2], permits)
end
return outcome(1)
