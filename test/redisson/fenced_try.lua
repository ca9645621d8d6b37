-- Redisson RedissonFencedLock.tryLockInnerAsync(leaseTime, unit, threadId), EVAL_LONG_LIST.
-- Source: redisson/src/main/java/org/redisson/RedissonFencedLock.java
--
-- KEYS[1] = lock name
-- KEYS[2] = token counter  redisson_lock_token:{<name>}
-- ARGV[1] = lease time in ms
-- ARGV[2] = owner id
--
-- Returns {-1, token} when acquired, {pttl, -1} otherwise.
-- Note: Redisson INCRs the token on every acquisition, reentrant ones included.
if (redis.call('exists', KEYS[1]) == 0
        or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then
    local token = redis.call('incr', KEYS[2]);
    redis.call('hincrby', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return {-1, token};
end;
return {redis.call('pttl', KEYS[1]), -1};
