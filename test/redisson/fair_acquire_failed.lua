-- Redisson RedissonFairLock.acquireFailedAsync: a fair waiter that gives up
-- (tryLock wait time over) leaves the queue.
-- Source: redisson/src/main/java/org/redisson/RedissonFairLock.java, acquireFailedAsync
--
-- KEYS[1] = queue    redisson_lock_queue:{<name>}
-- KEYS[2] = timeouts redisson_lock_timeout:{<name>}
-- ARGV[1] = owner id
-- ARGV[2] = thread wait time in ms (fairLockWaitTimeout, or tryLock waitTime when > 0)
--
-- Returns nothing (EVAL_VOID).
local queue = redis.call('lrange', KEYS[1], 0, -1);
local i = 1;
while i <= #queue and queue[i] ~= ARGV[1] do
    i = i + 1;
end;
i = i + 1;
while i <= #queue do
    redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), queue[i]);
    i = i + 1;
end;
redis.call('zrem', KEYS[2], ARGV[1]);
redis.call('lrem', KEYS[1], 0, ARGV[1]);
