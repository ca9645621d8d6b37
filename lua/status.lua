-- status.lua: one consistent snapshot of a lock for redis_lock_status().
-- KEYS[1]  lock hash <name>
-- KEYS[2]  waiter queue redisson_lock_queue:{<name>}
-- KEYS[3]  fencing counter redisson_lock_token:{<name>}
-- Returns {hgetall of the lock (owner, count, ...), pttl, queue length,
--          fencing counter or false}.
return {
    redis.call('hgetall', KEYS[1]),
    redis.call('pttl', KEYS[1]),
    redis.call('llen', KEYS[2]),
    redis.call('get', KEYS[3])
}
