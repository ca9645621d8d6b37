/*
 * semaphore.c
 *	  Semaphores (Redisson RSemaphore layout) and expiring permits (Redisson
 *	  RPermitExpirableSemaphore layout): their two primitives on the engine,
 *	  and the calls that set a pool or read what it has available.
 *
 * A semaphore's permits are anonymous in Redisson's layout, which is why
 * they leak when a client dies. Ours are recorded per owner beside it, with
 * an expiry the watchdog renews, so they come back when the session ends,
 * from the worker, or when a dead server stops renewing them. An expiring
 * permit has its own id and expiry in Redisson's layout already: a permit
 * without a lease gets the watchdog's lease and is renewed like a lock.
 *
 * src/semaphore.c
 */
#include "postgres.h"

#include "utils/builtins.h"

#include "lock_int.h"
#include "redislock.h"
#include "route.h"
#include "scripts.h"
#include "semaphore.h"

#define sem_channel_key(name) rl_prefixed_key("redisson_sc", (name))
#define holders_key(name) rl_prefixed_key("redislock_semaphore_holders", (name))
#define holders_timeout_key(name) rl_prefixed_key("redislock_semaphore_timeout", (name))
#define permits_timeout_key(name) rl_suffixed_key((name), "timeout")

/* Both primitives wait on Redisson's redisson_sc:{name}; no fair mode. */
static char *
sem_channel(const char *name, bool fair)
{
	return sem_channel_key(name);
}

/* A semaphore script's keys: the pool, the record of holders, the channel. */
static void
sem_keys(RLEval *e, const char *name)
{
	e->nkeys = 4;
	e->keys[0] = name;
	e->keys[1] = holders_key(name);
	e->keys[2] = holders_timeout_key(name);
	e->keys[3] = sem_channel_key(name);
}

/* An expiring-permit script's keys: the pool, the permits out, the channel. */
static void
permit_keys(RLEval *e, const char *name)
{
	e->nkeys = 3;
	e->keys[0] = name;
	e->keys[1] = permits_timeout_key(name);
	e->keys[2] = sem_channel_key(name);
}

/* Permits that bring the owner's count to target. */
static void
sem_acquire_eval(RLEval *e, LocalLock *ll, int64 lease_ms, int32 target,
				 bool fair, bool enqueue)
{
	e->script = &rl_script_sem_acquire;
	sem_keys(e, ll->name);
	e->nargs = 4;
	e->args[0] = rl_int64_arg(lease_ms);
	e->args[1] = rl_owner_id();
	e->args[2] = rl_int64_arg(target);
	e->args[3] = rl_publish_command();
}

/* A trim of owner's permits to keep; what goes back is published. */
static void
sem_release_eval(RLEval *e, const char *name, const char *owner,
				 int32 keep, bool leave, int64 mark_ms)
{
	memset(e, 0, sizeof(*e));
	e->script = &rl_script_sem_release;
	sem_keys(e, name);
	e->nargs = 3;
	e->args[0] = owner;
	e->args[1] = rl_int64_arg(keep);
	e->args[2] = rl_publish_command();
}

/* The watchdog's renewal of owner's record of permits. */
static void
sem_renew_eval(RLEval *e, const char *name, const char *owner,
			   int64 lease_ms, int32 holds, bool restore)
{
	memset(e, 0, sizeof(*e));
	e->script = &rl_script_sem_renew;
	sem_keys(e, name);
	e->nargs = 3;
	e->args[0] = rl_int64_arg(lease_ms > 0 ? lease_ms : rl_watchdog_timeout);
	e->args[1] = owner;
	e->args[2] = rl_publish_command();
}

static void
sem_verify(RLCommand *cmd, const char *name, const char *owner)
{
	rl_verify_hexists(cmd, holders_key(name), owner);
}

/* One expiring permit, whose id the entry carries ("owner" below). */
static void
permit_acquire_eval(RLEval *e, LocalLock *ll, int64 lease_ms, int32 target,
					bool fair, bool enqueue)
{
	int64		now = rl_now_ms();

	e->script = &rl_script_permit_acquire;
	permit_keys(e, ll->name);
	e->nargs = 4;
	e->args[0] = ll->id;
	e->args[1] = rl_int64_arg(now + lease_ms);
	e->args[2] = rl_int64_arg(now);
	e->args[3] = rl_publish_command();
}

static void
permit_release_eval(RLEval *e, const char *name, const char *id,
					int32 keep, bool leave, int64 mark_ms)
{
	memset(e, 0, sizeof(*e));
	e->script = &rl_script_permit_release;
	permit_keys(e, name);
	e->nargs = 4;
	e->args[0] = id;
	e->args[1] = rl_int64_arg(keep);
	e->args[2] = rl_now_ms_arg();
	e->args[3] = rl_publish_command();
}

/* Redisson's updateLeaseTime: the watchdog's renewal of a permit. */
static void
permit_renew_eval(RLEval *e, const char *name, const char *id,
				  int64 lease_ms, int32 holds, bool restore)
{
	memset(e, 0, sizeof(*e));
	e->script = &rl_script_permit_renew;
	permit_keys(e, name);
	e->nargs = 4;
	e->args[0] = id;
	e->args[1] = rl_int64_arg(lease_ms > 0 ? lease_ms : rl_watchdog_timeout);
	e->args[2] = rl_now_ms_arg();
	e->args[3] = rl_publish_command();
}

/* The permit's score, read with its 16 raw bytes as Redisson stores them. */
static void
permit_verify(RLCommand *cmd, const char *name, const char *id)
{
	char	   *raw = palloc(RL_PERMIT_ID_BYTES);
	const char *key = permits_timeout_key(name);

	(void) hex_decode(id, RL_PERMIT_ID_HEX, raw);
	cmd->argc = 3;
	cmd->argv[0] = "ZSCORE";
	cmd->argvlen[0] = 6;
	cmd->argv[1] = key;
	cmd->argvlen[1] = strlen(key);
	cmd->argv[2] = raw;
	cmd->argvlen[2] = RL_PERMIT_ID_BYTES;
}

/* Still out, and not expired yet (scores are epoch ms). */
static bool
permit_verified(const RLReply *r)
{
	return r->type == REDIS_REPLY_STRING &&
		strtod(r->str, NULL) > (double) rl_now_ms();
}

const RLPrimitive rl_semaphore_primitive = {
	.label = "semaphore",
	.noun = "Redis semaphore",
	.plural = "Redis semaphores",
	.no_redlock = "Redisson has no Redlock semaphore, and a pool counted on each master on its own does not bound the holders.",
	.waiter_place = false,
	.outlives_lease = true,
	.silent_growth = true,
	.acquire = sem_acquire_eval,
	.release = sem_release_eval,
	.renew = sem_renew_eval,
	.channel = sem_channel,
	.field = NULL,
	.verify = sem_verify,
	.verified = rl_verified_int,
};

const RLPrimitive rl_permit_primitive = {
	.label = "permit",
	.noun = "Redis semaphore permit",
	.plural = "Redis semaphores",
	.no_redlock = "Redisson has no Redlock semaphore, and a pool counted on each master on its own does not bound the holders.",
	.waiter_place = false,
	.acquire = permit_acquire_eval,
	.release = permit_release_eval,
	.renew = permit_renew_eval,
	.channel = sem_channel,
	.field = NULL,
	.verify = permit_verify,
	.verified = permit_verified,
};

/* A call on a pool: one script, its integer reply. */
static int64
run_pool_script(const RLEval *e, const char *name)
{
	RLReply    *r;

	rl_check_redlock(&rl_semaphore_primitive);
	r = rl_eval_one(e, RL_OP_SEMAPHORE, name, NULL);
	rl_expect_reply(is_int(r), RL_OP_SEMAPHORE, name);
	return r->integer;
}

/*
 * Sets a pool (op "try_set", "set" or "add", see sem_set.lua); expiring
 * says which layout, as Redisson publishes differently for each.
 */
bool
rl_semaphore_set(const char *name, bool expiring, const char *op, int32 permits)
{
	RLEval		e;

	memset(&e, 0, sizeof(e));
	e.script = &rl_script_sem_set;
	e.nkeys = expiring ? 4 : 3;
	e.keys[0] = name;
	e.keys[1] = sem_channel_key(name);
	e.keys[2] = rl_call_key(name);
	if (expiring)
		e.keys[3] = permits_timeout_key(name);
	e.nargs = 4;
	e.args[0] = op;
	e.args[1] = rl_int64_arg(permits);
	e.args[2] = rl_publish_command();
	e.args[3] = rl_call_ttl_arg();
	return run_pool_script(&e, name) == 1;
}

/* The permits available now, after expired holds went back. */
int64
rl_semaphore_available(const char *name, bool expiring)
{
	RLEval		e;

	memset(&e, 0, sizeof(e));
	if (expiring)
	{
		e.script = &rl_script_permit_available;
		permit_keys(&e, name);
		e.nargs = 2;
		e.args[0] = rl_now_ms_arg();
		e.args[1] = rl_publish_command();
	}
	else
	{
		e.script = &rl_script_sem_available;
		sem_keys(&e, name);
		e.nargs = 1;
		e.args[0] = rl_publish_command();
	}
	return run_pool_script(&e, name);
}

/* Takes permits (waiting as wait_ms says); returns whether taken. */
bool
rl_semaphore_acquire(const char *name, int32 permits, RLScope scope,
					 int64 wait_ms)
{
	LocalLock  *ll = rl_local_find(name, RL_KIND_SEMAPHORE);
	RLAcquireRequest req;

	if (ll != NULL && total_holds(ll) > PG_INT32_MAX - permits)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("this session holds too many permits of Redis semaphore \"%s\"",
						name)));
	req.kind = RL_KIND_SEMAPHORE;
	req.name = name;
	req.scope = scope;
	req.wait_ms = wait_ms;
	req.lease_ms = 0;
	req.fair = false;
	req.count = permits;
	req.id = NULL;
	return rl_lock_acquire(&req);
}

bool
rl_semaphore_release(const char *name, int32 permits)
{
	rl_check_redlock(&rl_semaphore_primitive);
	return rl_lock_release_n(name, RL_KIND_SEMAPHORE, NULL, permits);
}

/*
 * Takes one expiring permit under a new id (16 random bytes, as Redisson's);
 * returns the id, or NULL when the wait ended first. Lease 0: the watchdog
 * renews it while the session holds it.
 */
char *
rl_permit_acquire(const char *name, RLScope scope, int64 wait_ms,
				  int64 lease_ms)
{
	char	   *id = rl_random_id();
	RLAcquireRequest req;

	req.kind = RL_KIND_PERMIT;
	req.name = name;
	req.scope = scope;
	req.wait_ms = wait_ms;
	req.lease_ms = lease_ms;
	req.fair = false;
	req.count = 1;
	req.id = id;
	return rl_lock_acquire(&req) ? id : NULL;
}

/* Gives back a permit this session took (id: 32 lower-case hex digits). */
bool
rl_permit_release(const char *name, const char *id)
{
	rl_check_redlock(&rl_permit_primitive);
	return rl_lock_release_n(name, RL_KIND_PERMIT, id, 1);
}
