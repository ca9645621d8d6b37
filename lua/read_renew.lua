-- read_renew.lua: keep an owner's read holds in Redis for what they are
-- owed. As Redisson 4.4+'s ReadLockTask, only the owner's own timeout keys
-- are touched, so a crashed reader's holds still run out. A watchdog hold
-- is owed its full lease; a fixed-lease hold what remains of its lease:
-- Redisson's read renewal before 4.4 PEXPIREs every reader's timeout keys
-- to its own lease, and any Redisson reader's renewal or unlock sets the
-- hash to its own lease, so either may have been cut shorter and is put
-- back here. Nothing is shortened.
-- KEYS[1]  lock hash <name>
-- KEYS[2]  the owner's timeout key prefix {<name>}:<owner>:rwlock_timeout
-- ARGV[1]  what the owner's holds are owed, in milliseconds (> 0)
-- ARGV[2]  owner id
-- Returns 1 when kept, 0 when the owner holds no read hold (lost).
if redis.call('type', KEYS[1]).ok ~= 'hash' then
    return 0
end
local count = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or 0)
if count == 0 then
    return 0
end
local owed = tonumber(ARGV[1])
for n = 1, count do
    local key = KEYS[2] .. ':' .. n
    if redis.call('pttl', key) < owed then
        redis.call('set', key, '1', 'px', owed)
    end
end
if redis.call('pttl', KEYS[1]) < owed then
    redis.call('pexpire', KEYS[1], owed)
end
return 1
