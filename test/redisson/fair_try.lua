-- Redisson RedissonFairLock.tryLockInnerAsync, EVAL_LONG variant.
-- Source: redisson/src/main/java/org/redisson/RedissonFairLock.java, tryLockInnerAsync
--
-- KEYS[1] = lock name
-- KEYS[2] = queue    redisson_lock_queue:{<name>}    (list of owner ids, FIFO)
-- KEYS[3] = timeouts redisson_lock_timeout:{<name>}  (zset owner id -> give-up time, ms)
-- ARGV[1] = lease time in ms
-- ARGV[2] = owner id "<client uuid>:<thread id>"
-- ARGV[3] = thread wait time in ms (Config.fairLockWaitTimeout, 300000 by default,
--           or the tryLock waitTime when > 0)
-- ARGV[4] = current time in ms (client clock, System.currentTimeMillis())
--
-- Returns nil when acquired (fresh or reentrant); otherwise a ttl (ms) and the
-- owner is (or stays) queued.  Note: a fresh fair acquisition does HSET ... 1.
while true do
    local firstThreadId2 = redis.call('lindex', KEYS[2], 0);
    if firstThreadId2 == false then
        break;
    end;
    local timeout = redis.call('zscore', KEYS[3], firstThreadId2);
    if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[4]) then
        redis.call('zrem', KEYS[3], firstThreadId2);
        redis.call('lpop', KEYS[2]);
    else
        break;
    end;
end;

if (redis.call('exists', KEYS[1]) == 0)
    and ((redis.call('exists', KEYS[2]) == 0)
        or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then
    redis.call('lpop', KEYS[2]);
    redis.call('zrem', KEYS[3], ARGV[2]);
    local keys = redis.call('zrange', KEYS[3], 0, -1);
    for i = 1, #keys, 1 do
        redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), keys[i]);
    end;
    redis.call('hset', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;

if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2],1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;

local timeout = redis.call('zscore', KEYS[3], ARGV[2]);
if timeout ~= false then
    local ttl = redis.call('pttl', KEYS[1]);
    return math.max(0, ttl);
end;

local lastThreadId = redis.call('lindex', KEYS[2], -1);
local ttl;
if lastThreadId ~= false and lastThreadId ~= ARGV[2] and redis.call('zscore', KEYS[3], lastThreadId) ~= false then
    ttl = tonumber(redis.call('zscore', KEYS[3], lastThreadId)) - tonumber(ARGV[4]);
else
    ttl = redis.call('pttl', KEYS[1]);
end;
local timeout = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4]);
if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then
    redis.call('rpush', KEYS[2], ARGV[2]);
end;
return ttl;
