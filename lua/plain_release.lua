-- plain_release.lua: give back a lock of the plain layout, only if the key
-- still holds our token, and wake its waiters.
-- KEYS[1]  the lock <name>
-- KEYS[2]  redislock's wake channel redislock_plain__channel:{<name>}
-- KEYS[3]  Redlock only, with keep 0: our release mark
--          redislock_released:{<name>}:<owner> (see release.lua)
-- ARGV[1]  our token (owner id)
-- ARGV[2]  holds to keep: 0 deletes the key; more only asks whether it is
--          still ours (the count lives in the session)
-- ARGV[3]  publish command: 'publish' or 'spublish' (see release.lua)
-- ARGV[4]  with KEYS[3]: how long the mark lives, in ms
-- ARGV[5...] channels of peers that wait on a message of their own:
--          Spring Integration's "<registry>-channel:<name>", which gets the
--          name as its message (as RedisLockRegistry's unlock publishes)
-- Returns 1 when the key held our token, 0 when not (nothing is touched:
-- the key is another holder's, or gone). A deletion also reaches keyspace
-- notification subscribers (a "del" event), which the other clients'
-- waiters do not listen to, but redislock's do.
local keep = tonumber(ARGV[2])
if KEYS[3] and keep == 0 then
    redis.call('set', KEYS[3], '1', 'px', ARGV[4])
end
if redis.call('type', KEYS[1])['ok'] ~= 'string' or
   redis.call('get', KEYS[1]) ~= ARGV[1] then
    return 0
end
if keep > 0 then
    return 1
end
redis.call('del', KEYS[1])
redis.call(ARGV[3], KEYS[2], '0')
for i = 5, #ARGV do
    redis.call('publish', ARGV[i], KEYS[1])
end
return 1
