-- read_renew.lua: give an owner's read holds their full lease again (the
-- watchdog; as Redisson 4.4+'s ReadLockTask, only the owner's own
-- timeout keys are renewed, so a crashed reader's holds still run out).
-- With lease 0 (a fixed-lease hold, never renewed) only the hash is kept
-- alive as long as the owner's own timeout keys: another client's renewal
-- (Redisson's ReadLockTask sets the hash to its own lease) may have cut it
-- shorter, and the hash must not vanish under a hold that has not ended.
-- KEYS[1]  lock hash <name>
-- KEYS[2]  the owner's timeout key prefix {<name>}:<owner>:rwlock_timeout
-- ARGV[1]  lease in milliseconds, or 0 (see above)
-- ARGV[2]  owner id
-- Returns 1 when renewed (or kept), 0 when the owner holds no read hold
-- (lost).
if redis.call('type', KEYS[1]).ok ~= 'hash' then
    return 0
end
local count = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or 0)
if count == 0 then
    return 0
end
local lease = tonumber(ARGV[1])
if lease == 0 then
    for n = 1, count do
        local t = redis.call('pttl', KEYS[2] .. ':' .. n)
        if t > lease then
            lease = t
        end
    end
else
    for n = 1, count do
        redis.call('set', KEYS[2] .. ':' .. n, '1', 'px', ARGV[1])
    end
end
if lease > 0 and redis.call('pttl', KEYS[1]) < lease then
    redis.call('pexpire', KEYS[1], lease)
end
return 1
