-- Redisson RedissonPermitExpirableSemaphore.tryReleaseAsync(List<String> permitsIds)
-- (all-or-nothing since 3.41.0, #6343; also release(List)).
-- Source: redisson/src/main/java/org/redisson/RedissonPermitExpirableSemaphore.java,
--         tryReleaseAsync(List) (syncedEvalWithRetry, EVAL_INTEGER)
--
-- KEYS[1] = semaphore name
-- KEYS[2] = channel  redisson_sc:{<name>}
-- KEYS[3] = timeout zset  {<name>}:timeout
-- ARGV[1] = number of ids
-- ARGV[2] = now, epoch ms
-- ARGV[3] = publish command
-- ARGV[4..] = permit ids, 16 raw bytes each
--
-- Returns 0 and changes nothing if any id is missing or expired; else
-- reclaims expired permits first: every member of the zset with a score <= now is removed, the value INCRBYed by their number and, if it is then > 0, the value published, then removes the ids, INCRBYs the value by the number
-- removed and publishes that number (not the total); returns it.
for i = 4, #ARGV, 1 do
    local expire = redis.call('zscore', KEYS[3], ARGV[i]);
    if expire== false or tonumber(expire) <= tonumber(ARGV[2]) then
        return 0;
    end;
end;
local expiredIds = redis.call('zrangebyscore', KEYS[3], 0, ARGV[2], 'limit', 0, -1);
if #expiredIds > 0 then
    redis.call('zrem', KEYS[3], unpack(expiredIds));
    local value = redis.call('incrby', KEYS[1], #expiredIds);
    if tonumber(value) > 0 then
        redis.call(ARGV[3], KEYS[2], value);
    end;
end;
local keys = {};
for i = 4, #ARGV, 1 do
    table.insert(keys, ARGV[i]);
end;
local removed = redis.call('zrem', KEYS[3], unpack(keys));
redis.call('incrby', KEYS[1], removed);
redis.call(ARGV[3], KEYS[2], removed);
return removed;
