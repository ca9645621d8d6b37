-- latch.lua: a count-down latch (Redisson RCountDownLatch layout).
-- KEYS[1]  latch <name>: a string, the count; absent when it is 0
-- ARGV[1]  'count': read it; 'try_set': set to ARGV[2] if absent and
--          publish 1 (a new count); 'count_down': decrement it, delete it
--          at 0 and publish 0 there (as Redisson's countDown)
-- ARGV[2]  try_set: the count
-- ARGV[3]  publish command: 'publish' or 'spublish'
-- ARGV[4]  channel redisson_countdownlatch__channel__{<name>}: an argument,
--          not a key, since its hash tag is not the key's when the name
--          has braces (Redisson builds it by concatenation)
-- Returns the count after the call (count, count_down), 1 or 0 (try_set:
-- set or not); the error "NOTA count-down latch" when the key holds data
-- of another shape.
local t = redis.call('type', KEYS[1]).ok
if t ~= 'none' and (t ~= 'string' or
    not string.match(redis.call('get', KEYS[1]), '^%-?%d+$')) then
    return redis.error_reply('NOTA count-down latch')
end
local op = ARGV[1]
if op == 'count' then
    return math.max(tonumber(redis.call('get', KEYS[1]) or 0), 0)
end
if op == 'try_set' then
    if t ~= 'none' then
        return 0
    end
    redis.call('set', KEYS[1], ARGV[2])
    redis.call(ARGV[3], ARGV[4], 1)
    return 1
end
if t == 'none' then
    return 0
end
local v = redis.call('decr', KEYS[1])
if v <= 0 then
    redis.call('del', KEYS[1])
end
if v == 0 then
    redis.call(ARGV[3], ARGV[4], 0)
end
return math.max(v, 0)
