-- write_withdraw.lua: a waiting writer that gave up removes its mark (see
-- read_acquire.lua) and wakes the readers that the mark kept out.
-- KEYS[1]  redislock_rwlock_writer:{<name>}
-- KEYS[2]  channel redisson_rwlock:{<name>}
-- ARGV[1]  owner id
-- ARGV[2]  publish command: 'publish' or 'spublish'
-- Returns 1 when the mark was the owner's, else 0 (another writer's stays).
if redis.call('get', KEYS[1]) ~= ARGV[1] then
    return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[2], KEYS[2], '1')
return 1
