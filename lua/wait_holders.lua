-- wait_holders.lua: who a waiter of a lock waits for, for the deadlock
-- check and the redis_lock_waits view (read only).
-- KEYS[1]  lock hash <name>
-- KEYS[2]  waiter queue redisson_lock_queue:{<name>} (fair locks)
-- KEYS[3]  redislock_rwlock_writer:{<name>}, a waiting writer's mark
-- ARGV[1]  the waiter's owner id
-- ARGV[2]  what it waits for: 'lock', 'read' or 'write'
-- ARGV[3]  '1' when it waits in the fair queue
-- Returns the owner ids it waits for, each once, never the waiter itself:
--   lock   the holder of a plain lock (a string: its token, when it is an
--          owner id); every holder of the hash (owner fields; a writer "<id>:write"
--          as <id>); with fair and the lock free, the owners queued ahead
--          of the waiter, who take it first (none if the waiter is not
--          queued: it holds the lock, or left). While it is held, the holders
--          alone: whoever is queued ahead waits for them too, so a cycle
--          through a queued owner is also one through the holder, and
--          counting the queue would make innocent queued sessions victims;
--   write  every holder but the waiter (its own read hold is an upgrade);
--   read   the writers while the lock is held for write (or is an
--          exclusive lock), else the owner of a waiting writer's mark,
--          which keeps new readers out (read_acquire.lua), unless the
--          waiter already reads.
-- A key of another shape holds nothing we can follow: {}. Another kind of
-- wait (a semaphore's, say) joins the deadlock checks with its case here and
-- its label in RLWait.wait_for (src/deadlock.h).
local waiter, kind = ARGV[1], ARGV[2]
local found, out = {}, {}

local function add(owner)
    if owner and owner ~= waiter and not found[owner] then
        found[owner] = true
        out[#out + 1] = owner
    end
end

local function owner_of(field)
    local w = string.match(field, '^(.+:%d+):write$')
    if w then
        return w
    end
    if string.match(field, '^.+:%d+$') then
        return field
    end
    return nil
end

local t = redis.call('type', KEYS[1])['ok']
if t == 'string' and kind == 'lock' then
    -- a lock of the plain layout: its holder's token (an owner id when
    -- the holder is a SQL session, which is all a deadlock can go through)
    add(owner_of(redis.call('get', KEYS[1])) and redis.call('get', KEYS[1]))
    return out
end
if t ~= 'hash' and t ~= 'none' then
    return out
end
local fields = redis.call('hgetall', KEYS[1])
local mode = false
local reads = false
for i = 1, #fields, 2 do
    if fields[i] == 'mode' then
        mode = fields[i + 1]
    elseif fields[i] == waiter then
        reads = true
    end
end

if kind == 'read' and (mode == 'read' or #fields == 0) then
    -- free or held for read: only a waiting writer keeps a new reader out
    if not reads and redis.call('type', KEYS[3])['ok'] == 'string' then
        add(redis.call('get', KEYS[3]))
    end
    return out
end
for i = 1, #fields, 2 do
    if fields[i] ~= 'mode' then
        add((owner_of(fields[i])))
    end
end
-- Only a waiter in the queue has owners ahead of it: one that holds the
-- lock (its edge outlives its wait by a round trip) or has left the queue
-- waits for nobody there.
if kind == 'lock' and ARGV[3] == '1' and #out == 0 and not reads and
    redis.call('type', KEYS[2])['ok'] == 'list' then
    local ahead = {}
    for _, owner in ipairs(redis.call('lrange', KEYS[2], 0, -1)) do
        if owner == waiter then
            for _, o in ipairs(ahead) do
                add(o)
            end
            break
        end
        ahead[#ahead + 1] = owner
    end
end
return out
