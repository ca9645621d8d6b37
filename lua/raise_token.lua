-- raise_token.lua: make a Redlock master's fencing counter at least the
-- token just handed out, so that the next holder's majority, which overlaps
-- ours, counts on from there even through masters that lag or lost data.
-- KEYS[1]  fencing counter redisson_lock_token:{<name>}
-- ARGV[1]  the token given to the new holder
-- The counter never gets a TTL (see acquire.lua); SET drops an old one.
-- Returns the counter after the call.
local have = tonumber(redis.call('get', KEYS[1])) or 0
local want = tonumber(ARGV[1])
if have < want then
    redis.call('set', KEYS[1], ARGV[1])
    return want
end
return have
