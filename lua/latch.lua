-- latch.lua: a count-down latch (Redisson RCountDownLatch layout).
-- KEYS[1]  latch <name>: a string, the count; absent when it is 0
-- KEYS[2]  try_set and count_down: this call's record
--          {<name>}:redislock_call:<random id>, which holds the outcome
--          for a while so that a request sent again (after a reply lost to
--          a broken connection or a failover) is answered, not applied
--          twice: a second count-down would open the latch early
-- ARGV[1]  'count': read it; 'try_set': set to ARGV[2] if absent, with the
--          message 1 (a new count); 'count_down': decrement it, delete it
--          at 0, with the message 0 there (as Redisson's countDown)
-- ARGV[2]  try_set: the count
-- ARGV[3]  publish command: 'publish' or 'spublish'; '' when the caller
--          publishes the message itself: on a cluster, a name with braces
--          puts the channel in another slot (Redisson builds it by
--          concatenation), which a script may not publish to
-- ARGV[4]  channel redisson_countdownlatch__channel__{<name>}: an argument,
--          not a key, for the same reason
-- ARGV[5]  with KEYS[2]: how long the call's record lives, ms
-- Returns {result, message}: result is the count after the call (count,
-- count_down) or 1/0 (try_set: set or not); message is what was (or is to
-- be) published, -1 for none; the error "NOTA count-down latch" when the
-- key holds data of another shape.
local t = redis.call('type', KEYS[1]).ok
if t ~= 'none' and (t ~= 'string' or
    not string.match(redis.call('get', KEYS[1]), '^%-?%d+$')) then
    return redis.error_reply('NOTA count-down latch')
end
if KEYS[2] then
    local done = redis.call('get', KEYS[2])
    if done then
        local result, message = string.match(done, '^(%-?%d+),(%-?%d+)$')
        return {tonumber(result), tonumber(message)}
    end
end
local function outcome(result, message)
    if KEYS[2] then
        redis.call('set', KEYS[2], result .. ',' .. message, 'px', ARGV[5])
    end
    if message >= 0 and ARGV[3] ~= '' then
        redis.call(ARGV[3], ARGV[4], message)
    end
    return {result, message}
end
local op = ARGV[1]
if op == 'count' then
    return {math.max(tonumber(redis.call('get', KEYS[1]) or 0), 0), -1}
end
if op == 'try_set' then
    if t ~= 'none' then
        return outcome(0, -1)
    end
    redis.call('set', KEYS[1], ARGV[2])
    return outcome(1, 1)
end
if t == 'none' then
    return outcome(0, -1)
end
local v = redis.call('decr', KEYS[1])
if v <= 0 then
    redis.call('del', KEYS[1])
end
if v == 0 then
    return outcome(0, 0)
end
return outcome(math.max(v, 0), -1)
