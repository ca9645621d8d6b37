-- renew.lua: give a held lock its full lease again (the watchdog's renewal,
-- as Redisson's renewExpiration).
-- KEYS[1]  lock hash <name>
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id
-- Returns 1 when renewed, 0 when the owner no longer holds the lock (it is
-- lost: expired, force-released, or Redis lost its data).
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('pexpire', KEYS[1], ARGV[1])
    return 1
end
return 0
