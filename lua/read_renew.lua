-- read_renew.lua: give an owner's read holds their full lease again (the
-- watchdog; as Redisson 4.4+'s ReadLockTask, only the owner's own
-- timeout keys are renewed, so a crashed reader's holds still run out).
-- KEYS[1]  lock hash <name>
-- KEYS[2]  the owner's timeout key prefix {<name>}:<owner>:rwlock_timeout
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id
-- Returns 1 when renewed, 0 when the owner holds no read hold (lost).
if redis.call('type', KEYS[1]).ok ~= 'hash' then
    return 0
end
local count = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or 0)
if count == 0 then
    return 0
end
for n = 1, count do
    redis.call('set', KEYS[2] .. ':' .. n, '1', 'px', ARGV[1])
end
if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], ARGV[1])
end
return 1
