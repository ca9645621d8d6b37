/*
 * rwlock.c
 *	  Read and write holds of a read-write lock in Redisson's RReadWriteLock
 *	  layout: the scripts that take, give back, renew and wait for them. The
 *	  wait engine, scopes and the worker are lock.c's, xact.c's, worker.c's.
 *
 * src/rwlock.c
 */
#include "postgres.h"

#include "lock_int.h"
#include "redislock.h"
#include "route.h"
#include "scripts.h"

/*
 * Redisson's suffixName(name, suffix): derived keys share the name's hash
 * slot, through the name's own hash tag if it has one.
 */
static char *
suffixed_key(const char *name, const char *suffix)
{
	if (strchr(name, '{') != NULL)
		return psprintf("%s:%s", name, suffix);
	return psprintf("{%s}:%s", name, suffix);
}

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
	return suffixed_key(name, psprintf("%s:rwlock_timeout", owner));
}

#define writer_mark_key(name) rl_prefixed_key("redislock_rwlock_writer", (name))

/* The field of owner's hold in the lock hash: the commit guard checks it. */
const char *
rl_hold_field(RLKind kind, const char *owner)
{
	return kind == RL_KIND_WRITE ? psprintf("%s:write", owner) : owner;
}

/*
 * Fills e with the acquisition of a read or write hold bringing our count
 * to target. A writer with mark_ms > 0 leaves its mark if it must wait, so
 * that new readers of ours let it pass (see read_acquire.lua).
 */
void
rl_rw_acquire_eval(RLEval *e, const LocalLock *ll, int64 lease_ms,
				   int32 target, int64 mark_ms)
{
	const char *owner = rl_owner_id();

	memset(e, 0, sizeof(*e));
	e->keys[0] = ll->name;
	e->args[0] = rl_int64_arg(lease_ms);
	e->args[1] = owner;
	e->args[2] = rl_int64_arg(target);
	if (ll->kind == RL_KIND_READ)
	{
		e->script = &rl_script_read_acquire;
		e->nkeys = 3;
		e->keys[1] = timeout_prefix(ll->name, owner);
		e->keys[2] = writer_mark_key(ll->name);
		e->nargs = 3;
		return;
	}
	e->script = &rl_script_write_acquire;
	e->nkeys = 4;
	e->keys[1] = token_key(ll->name);
	e->keys[2] = readers_prefix(ll->name);
	e->keys[3] = writer_mark_key(ll->name);
	e->nargs = 5;
	e->args[3] = rl_token_ttl_arg(lease_ms);
	e->args[4] = rl_int64_arg(mark_ms);
}

/* Fills e with a trim of owner's read or write holds to keep. */
void
rl_rw_release_eval(RLEval *e, RLKind kind, const char *name,
				   const char *owner, int32 keep)
{
	memset(e, 0, sizeof(*e));
	e->keys[0] = name;
	e->keys[1] = rwlock_channel_key(name);
	if (kind == RL_KIND_READ)
	{
		e->script = &rl_script_read_release;
		e->nkeys = 4;
		e->keys[2] = timeout_prefix(name, owner);
		e->keys[3] = readers_prefix(name);
	}
	else
	{
		e->script = &rl_script_write_release;
		e->nkeys = 2;
	}
	e->nargs = 3;
	e->args[0] = owner;
	e->args[1] = rl_int64_arg(keep);
	e->args[2] = rl_publish_command();
}

/*
 * Fills e with the watchdog's renewal of owner's hold: a write hold as an
 * exclusive lock's (renew.lua on its field), read holds with their own
 * timeout keys.
 */
void
rl_rw_renew_eval(RLEval *e, RLKind kind, const char *name, const char *owner,
				 int64 lease_ms)
{
	memset(e, 0, sizeof(*e));
	e->keys[0] = name;
	e->nargs = 2;
	e->args[0] = rl_int64_arg(lease_ms);
	if (kind == RL_KIND_WRITE)
	{
		e->script = &rl_script_renew;
		e->nkeys = 1;
		e->args[1] = rl_hold_field(kind, owner);
		return;
	}
	e->script = &rl_script_read_renew;
	e->nkeys = 2;
	e->keys[1] = timeout_prefix(name, owner);
	e->args[1] = owner;
}

/*
 * Fills e with a writer's withdrawal after giving up: its mark goes, and
 * the readers it kept out are told.
 */
void
rl_rw_withdraw_eval(RLEval *e, const char *name)
{
	memset(e, 0, sizeof(*e));
	e->script = &rl_script_write_withdraw;
	e->nkeys = 2;
	e->keys[0] = writer_mark_key(name);
	e->keys[1] = rwlock_channel_key(name);
	e->nargs = 2;
	e->args[0] = rl_owner_id();
	e->args[1] = rl_publish_command();
}
