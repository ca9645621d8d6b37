-- wait_edge.lua: publish (or refresh) the wait-for edge of a waiting owner,
-- for the deadlock checks of every server (see src/deadlock.c).
-- KEYS[1]  redislock_waits:{<owner id>}
-- ARGV[1]  how long the edge lives unless refreshed, in ms
-- ARGV[2..] field, value, ...: server, pid, started, kind, fair, every
--          and ttl (the owner's check interval and ARGV[1]: how old the
--          edge is follows from its PTTL), n, name1 .. name<n> (what the
--          owner waits for)
-- The hash is written whole each time, so a refresh can never mix the
-- fields of two waits. Returns 1.
redis.call('del', KEYS[1])
redis.call('hset', KEYS[1], unpack(ARGV, 2))
redis.call('pexpire', KEYS[1], ARGV[1])
return 1
