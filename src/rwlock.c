/*
 * rwlock.c
 *	  Read and write holds of a read-write lock in Redisson's RReadWriteLock
 *	  layout: the two primitives (their scripts, keys, channel and fields)
 *	  that the engine (lock.c, wait.c), the scopes and the worker use.
 *
 * src/rwlock.c
 */
#include "postgres.h"

#include "lock_int.h"
#include "redislock.h"
#include "route.h"
#include "scripts.h"

/* {name}: reader r's hold n lives in <this>:<r>:rwlock_timeout:n */
static char *
readers_prefix(const char *name)
{
	if (strchr(name, '{') != NULL)
		return pstrdup(name);
	return psprintf("{%s}", name);
}

/* {name}:<owner>:rwlock_timeout, the prefix of owner's timeout keys */
static char *
timeout_prefix(const char *name, const char *owner)
{
	return rl_suffixed_key(name, psprintf("%s:rwlock_timeout", owner));
}

#define writer_mark_key(name) rl_prefixed_key("redislock_rwlock_writer", (name))

/* A read hold is the field of its owner id, a write hold "<owner>:write". */
static const char *
read_field(const char *owner)
{
	return owner;
}

static const char *
write_field(const char *owner)
{
	return psprintf("%s:write", owner);
}

static void
read_verify(RLCommand *cmd, const char *name, const char *owner)
{
	rl_verify_hexists(cmd, name, read_field(owner));
}

static void
write_verify(RLCommand *cmd, const char *name, const char *owner)
{
	rl_verify_hexists(cmd, name, write_field(owner));
}

/* Both are announced on redisson_rwlock:{name}; there is no fair mode. */
static char *
rw_channel(const char *name, bool fair)
{
	return rwlock_channel_key(name);
}

/*
 * Redis counts one read hold per session, however many the session holds
 * (they are counted in the session, as local re-entries of locks are):
 * Redisson 3.44-3.52's read renewal fails for every client of a lock where
 * any reader's count is above 1, and a nested hold's own timeout key is
 * renewed by nothing after 3.52 while the hash lives. A nested hold sets
 * the one key's lease again, never shorter (read_acquire.lua); the last
 * release gives it back.
 */
#define REDIS_READ_HOLDS(n) Min((n), 1)

/* A read hold bringing our count to target. */
static void
read_acquire_eval(RLEval *e, LocalLock *ll, int64 lease_ms, int32 target,
				  bool fair, bool enqueue)
{
	const char *owner = rl_owner_id();

	Assert(target >= 1);

	e->script = &rl_script_read_acquire;
	e->nkeys = 3;
	e->keys[0] = ll->name;
	e->keys[1] = timeout_prefix(ll->name, owner);
	e->keys[2] = writer_mark_key(ll->name);
	e->nargs = 3;
	e->args[0] = rl_int64_arg(lease_ms);
	e->args[1] = owner;
	e->args[2] = rl_int64_arg(REDIS_READ_HOLDS(target));
}

/*
 * A write hold bringing our count to target. A writer that will wait
 * (enqueue) leaves its mark if it must, so that new readers of ours let it
 * pass (see read_acquire.lua); the mark lives as a fair queue entry does,
 * and like one it is marked "queued" here until the writer has the lock or
 * has taken its mark back (write_release.lua with leave).
 */
static void
write_acquire_eval(RLEval *e, LocalLock *ll, int64 lease_ms, int32 target,
				   bool fair, bool enqueue)
{
	e->script = &rl_script_write_acquire;
	e->nkeys = 3;
	e->keys[0] = ll->name;
	e->keys[1] = token_key(ll->name);
	e->keys[2] = writer_mark_key(ll->name);
	e->nargs = 4;
	e->args[0] = rl_int64_arg(lease_ms);
	e->args[1] = rl_owner_id();
	e->args[2] = rl_int64_arg(target);
	e->args[3] = rl_int64_arg(enqueue ? rl_fair_wait_timeout : 0);
	if (enqueue)
		rl_set_flags(ll, ll->dirty, true);
}

/* A trim of owner's read holds to keep; the last live reader publishes 0. */
static void
read_release_eval(RLEval *e, const char *name, const char *owner,
				  int32 keep, bool leave, int64 mark_ms)
{
	memset(e, 0, sizeof(*e));
	e->script = &rl_script_read_release;
	e->nkeys = 5;
	e->keys[0] = name;
	e->keys[1] = rwlock_channel_key(name);
	e->keys[2] = timeout_prefix(name, owner);
	e->keys[3] = readers_prefix(name);
	e->keys[4] = writer_mark_key(name);
	e->nargs = 3;
	e->args[0] = owner;
	e->args[1] = rl_int64_arg(REDIS_READ_HOLDS(keep));
	e->args[2] = rl_publish_command();
}

/*
 * A trim of owner's write holds to keep (the last one publishes 1); with
 * leave, owner also gives up its mark as a waiting writer.
 */
static void
write_release_eval(RLEval *e, const char *name, const char *owner,
				   int32 keep, bool leave, int64 mark_ms)
{
	memset(e, 0, sizeof(*e));
	e->script = &rl_script_write_release;
	e->nkeys = 3;
	e->keys[0] = name;
	e->keys[1] = rwlock_channel_key(name);
	e->keys[2] = writer_mark_key(name);
	e->nargs = 4;
	e->args[0] = owner;
	e->args[1] = rl_int64_arg(keep);
	e->args[2] = rl_publish_command();
	e->args[3] = leave ? "1" : "0";
}

/*
 * The worker's renewal of read holds: their own timeout keys and the hash
 * get at least lease_ms (a watchdog hold's lease, what remains of a fixed
 * one's).
 */
static void
read_renew_eval(RLEval *e, const char *name, const char *owner,
				int64 lease_ms, int32 holds, bool restore)
{
	memset(e, 0, sizeof(*e));
	e->script = &rl_script_read_renew;
	e->nkeys = 2;
	e->keys[0] = name;
	e->keys[1] = timeout_prefix(name, owner);
	e->nargs = 2;
	e->args[0] = rl_int64_arg(lease_ms);
	e->args[1] = owner;
}

/* A write hold is renewed as an exclusive lock is: renew.lua on its field. */
static void
write_renew_eval(RLEval *e, const char *name, const char *owner,
				 int64 lease_ms, int32 holds, bool restore)
{
	memset(e, 0, sizeof(*e));
	e->script = &rl_script_renew;
	e->nkeys = 1;
	e->keys[0] = name;
	e->nargs = 2;
	e->args[0] = rl_int64_arg(lease_ms);
	e->args[1] = write_field(owner);
}

/*
 * Readers share a hold that each Redlock master would count on its own: a
 * master that missed a release cannot be told from a live reader, so
 * neither kind is offered with Redlock.
 */
#define RW_NO_REDLOCK "Readers share a hold that each master counts on its own: masters that lost or missed a release cannot be told apart from live readers, so a majority does not make a writer's hold exclusive."

/*
 * A read hold's field stays in the hash after its lease for as long as
 * other readers keep the hash, and writers, Redisson's and ours, wait for
 * it: an ended session's read holds are given back even past their lease.
 */
const RLPrimitive rl_read_primitive = {
	.label = "read",
	.noun = "Redis read lock",
	.plural = "Redis read-write locks",
	.no_redlock = RW_NO_REDLOCK,
	.waiter_place = false,
	.owned = true,
	.outlives_lease = true,
	.acquire = read_acquire_eval,
	.release = read_release_eval,
	.renew = read_renew_eval,
	.channel = rw_channel,
	.field = read_field,
	.verify = read_verify,
	.verified = rl_verified_int,
};

const RLPrimitive rl_write_primitive = {
	.label = "write",
	.noun = "Redis write lock",
	.plural = "Redis read-write locks",
	.no_redlock = RW_NO_REDLOCK,
	.waiter_place = true,
	.owned = true,
	.acquire = write_acquire_eval,
	.release = write_release_eval,
	.renew = write_renew_eval,
	.channel = rw_channel,
	.field = write_field,
	.verify = write_verify,
	.verified = rl_verified_int,
};
