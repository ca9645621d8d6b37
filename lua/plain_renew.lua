-- plain_renew.lua: the watchdog's renewal of a lock of the plain layout:
-- PEXPIRE only if the key still holds our token.
-- KEYS[1]  the lock <name>
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  our token (owner id)
-- ARGV[3]  Redlock only: restore the hold on a master that lost it while
--          the lock is free there (its value unused: one key, one holder)
-- KEYS[2]  with ARGV[3]: our release mark (see plain_release.lua); a hold
--          we released is never restored
-- The lease is never shortened (see renew.lua).
-- Returns 1 when renewed, 0 when the key is not ours (the hold is lost), 2
-- when restored.
local kind = redis.call('type', KEYS[1])['ok']
if kind == 'string' and redis.call('get', KEYS[1]) == ARGV[2] then
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return 1
end
if ARGV[3] and kind == 'none' and redis.call('exists', KEYS[2]) == 0 then
    redis.call('set', KEYS[1], ARGV[2], 'px', ARGV[1])
    return 2
end
return 0
