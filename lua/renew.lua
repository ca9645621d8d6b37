-- renew.lua: give a held lock its full lease again (the watchdog's renewal,
-- as Redisson's renewExpiration).
-- KEYS[1]  lock hash <name>
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id
-- ARGV[3]  Redlock only: the owner's hold count, to restore the hold on a
--          master that has lost it while the lock is free there
-- KEYS[2]  with ARGV[3]: the owner's release mark (see release.lua); a
--          hold the owner released is never restored
-- The lease is never shortened: a re-entry may have set a longer one since
-- the worker read the lease it sends.
-- Returns 1 when renewed, 0 when the owner no longer holds the lock (it is
-- lost: expired, force-released, or Redis lost its data), 2 when the hold
-- was restored (Redlock: a master restarted empty gets our hold back, so a
-- majority keeps overlapping ours).
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return 1
end
if ARGV[3] and redis.call('exists', KEYS[1]) == 0 and
   redis.call('exists', KEYS[2]) == 0 then
    redis.call('hset', KEYS[1], ARGV[2], ARGV[3])
    redis.call('pexpire', KEYS[1], ARGV[1])
    return 2
end
return 0
