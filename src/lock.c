/*
 * lock.c
 *	  Acquire for one session: the exclusive lock's scripts, the steps every
 *	  primitive shares (attempt, wait, record). Releases are in release.c,
 *	  the table of holds in holds.c, trims and settling in settle.c, waiting
 *	  in wait.c, transaction scopes and the session's end in xact.c.
 *
 * Redis holds the truth (hash field = our owner id, value = hold count); the
 * local table mirrors it. Every script takes the hold count we want Redis to
 * have rather than a +1/-1, so a call whose reply was lost can be repeated.
 * When a call fails half-way the lock is marked "dirty" and the next call of
 * this session, or its exit, trims Redis back to the local count; a session
 * that stays idle after such a failure hands that trim to the worker.
 *
 * src/lock.c
 */
#include "postgres.h"

#include <hiredis/hiredis.h>

#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "compat.h"
#include "conn.h"
#include "lock_int.h"
#include "onlost.h"
#include "plain.h"
#include "redislock.h"
#include "registry.h"
#include "route.h"
#include "scripts.h"

/*
 * Where a waiter is woken: the unlock channel, or for a fair waiter
 * Redisson's "<channel>:<owner id>".
 */
static char *
lock_channel(const char *name, bool fair)
{
	if (fair)
		return psprintf("%s:%s", channel_key(name), rl_owner_id());
	return channel_key(name);
}

/* An exclusive hold is the field of its owner id. */
static const char *
lock_field(const char *owner)
{
	return owner;
}

static void
lock_verify(RLCommand *cmd, const char *name, const char *owner)
{
	rl_verify_hexists(cmd, name, lock_field(owner));
}


/*
 * Fills e with a call of release.lua: trim owner's holds of the lock to keep
 * and, with leave, take owner out of its fair queue. With Redlock, a release
 * of a watchdog-mode hold (mark_ms: its lease, else 0) leaves the owner's
 * release mark, so that no renewal under way can put the hold back.
 */
static void
lock_release_eval(RLEval *e, const char *name, const char *owner,
				  int32 keep, bool leave, int64 mark_ms)
{
	memset(e, 0, sizeof(*e));
	e->script = &rl_script_release;
	e->nkeys = 4;
	e->keys[0] = name;
	e->keys[1] = channel_key(name);
	e->keys[2] = queue_key(name);
	e->keys[3] = timeouts_key(name);
	e->nargs = 4;
	e->args[0] = owner;
	e->args[1] = rl_int64_arg(keep);
	e->args[2] = leave ? rl_int64_arg(rl_fair_wait_timeout) : "0";
	e->args[3] = rl_publish_command();
	if (keep == 0 && mark_ms > 0 && rl_mode() == RL_MODE_REDLOCK)
	{
		e->nkeys = 5;
		e->keys[4] = rl_released_key(name, owner);
		e->nargs = 5;
		e->args[4] = rl_int64_arg(Max(mark_ms, RL_RELEASE_MARK_MIN_MS));
	}
}

/*
 * Fills e with a watchdog's renewal of one hold by script (renew.lua or
 * plain_renew.lua, which take the same keys and arguments). With restore
 * (Redlock), a master that lost the hold while the lock is free there gets
 * it back with holds.
 */
void
rl_owner_renew_eval(RLEval *e, const RedisScript *script, const char *name,
					const char *owner, int64 lease_ms, int32 holds, bool restore)
{
	memset(e, 0, sizeof(*e));
	e->script = script;
	e->nkeys = 1;
	e->keys[0] = name;
	e->nargs = 2;
	e->args[0] = rl_int64_arg(lease_ms);
	e->args[1] = owner;
	if (restore)
	{
		e->nkeys = 2;
		e->keys[1] = rl_released_key(name, owner);
		e->nargs = 3;
		e->args[2] = rl_int64_arg(Max(holds, 1));
	}
}

/* The exclusive lock's renewal: renew.lua. */
static void
lock_renew_eval(RLEval *e, const char *name, const char *owner,
				int64 lease_ms, int32 holds, bool restore)
{
	rl_owner_renew_eval(e, &rl_script_renew, name, owner, lease_ms, holds,
						restore);
}

/*
 * Runs one script on the command connection and returns its reply; Redis
 * failures and error replies are raised. Once Redis has answered, the
 * outcome is known, so a lock marked dirty for this call is clean again.
 */
RLReply *
rl_eval_one(const RLEval *e, RLOp op, const char *name, LocalLock *pending)
{
	RLReply    *r;

	if (!rl_run(1, e, &r))
	{
		rl_stat_add(RL_STAT_REDIS_ERRORS, 1);
		rl_report(&rl_cmd_conn, ERROR);
	}
	if (pending)
		rl_set_flags(pending, false, pending->queued);
	if (r->type == REDIS_REPLY_ERROR)
	{
		rl_stat_add(RL_STAT_REDIS_ERRORS, 1);
		rl_reply_error(r, op, name);
	}
	return r;
}

/* The WAIT timeout of redislock.sync_replicas, in ms. */
static int
replica_wait_ms(void)
{
	return Max(rl_command_timeout * 3 / 4, 1);
}

/*
 * Runs acquisition e. With redislock.sync_replicas, WAIT goes right behind
 * it in the same pipeline, so the WAIT counts the replicas that have this
 * very write, on the master that made it (sent on their own, a WAIT retried
 * on a new connection after a failover would count replicas of nothing);
 * *wait gets its reply, else NULL. Returns the script's reply, which may
 * be an error reply; raises when Redis could not be reached. The n locks
 * it acquires, marked dirty by the caller, are clean again when it cannot
 * have reached Redis (unusable settings, or no server ever connected to):
 * there is nothing to settle, at exit or later.
 */
RLReply *
rl_run_acquisition(const RLEval *e, RLReply **wait, int n, LocalLock **locks)
{
	RLReply    *replies[2] = {NULL, NULL};
	bool		ok;

	if (rl_sync_replicas > 0)
	{
		RLCommand	cmd;
		char	   *nreplicas = psprintf("%d", rl_sync_replicas);
		char	   *timeout = psprintf("%d", replica_wait_ms());

		memset(&cmd, 0, sizeof(cmd));
		rl_set_arg(&cmd, "WAIT", 4);
		rl_set_arg(&cmd, nreplicas, strlen(nreplicas));
		rl_set_arg(&cmd, timeout, strlen(timeout));
		ok = rl_run_then(e, &cmd, replies);
	}
	else
		ok = rl_run(1, e, replies);
	if (!ok)
	{
		rl_stat_add(RL_STAT_REDIS_ERRORS, 1);
		if (rl_cmd_conn.failure == RLF_CONFIG || !rl_redis_reached)
			for (int i = 0; i < n; i++)
				rl_set_flags(locks[i], false, locks[i]->queued);
		rl_report(&rl_cmd_conn, ERROR);
	}
	*wait = replies[1];
	return replies[0];
}

/*
 * Raises the error of an acquisition of name that the replicas did not
 * confirm (wait: the WAIT reply), given back or not.
 */
pg_noreturn void
rl_replicas_unconfirmed(const RLReply *r, const char *name, bool given_back)
{
	/* WAIT renamed away or denied: no replica will ever confirm */
	if (r->type == REDIS_REPLY_ERROR && rl_is_refusal(r->str))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("redislock.sync_replicas needs the WAIT command, which Redis server \"%s\" refuses",
						rl_server_desc()),
				 errdetail("WAIT after acquiring Redis lock \"%s\" failed: %s; %s.",
						   name, r->str,
						   given_back ? "the lock was given back" :
						   "it is given back on this session's next call or by the redislock worker"),
				 errhint("Set redislock.sync_replicas = 0 for this server (some managed services have no WAIT), or make WAIT available to the Redis user.")));
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("Redis lock \"%s\" was not confirmed by %d replicas",
					name, rl_sync_replicas),
			 r->type == REDIS_REPLY_INTEGER ?
			 errdetail("Only %lld replicas acknowledged it within %d ms; %s.",
					   r->integer, replica_wait_ms(),
					   given_back ? "the lock was given back" :
					   "it is given back on this session's next call or by the redislock worker") :
			 errdetail("WAIT failed: %s; %s.", r->str,
					   given_back ? "the lock was given back" :
					   "it is given back on this session's next call or by the redislock worker"),
			 errhint("Check the replicas of the Redis server, or lower redislock.sync_replicas.")));
}

/*
 * Fills e with the acquisition of an exclusive lock: acquire.lua, or
 * fair_acquire.lua, which with enqueue puts us in the queue if we must wait.
 */
static void
lock_acquire_eval(RLEval *e, LocalLock *ll, int64 lease_ms, int32 target,
				  bool fair, bool enqueue)
{
	e->args[0] = rl_int64_arg(lease_ms);
	e->args[1] = rl_owner_id();
	e->args[2] = rl_int64_arg(target);
	e->keys[0] = ll->name;
	if (fair)
	{
		e->script = &rl_script_fair_acquire;
		e->nkeys = 4;
		e->keys[1] = queue_key(ll->name);
		e->keys[2] = timeouts_key(ll->name);
		e->keys[3] = token_key(ll->name);
		e->nargs = 5;
		e->args[3] = rl_int64_arg(rl_fair_wait_timeout);
		e->args[4] = enqueue ? "1" : "0";
		if (enqueue)
			rl_set_flags(ll, ll->dirty, true);
	}
	else
	{
		e->script = &rl_script_acquire;
		e->nkeys = 2;
		e->keys[1] = token_key(ll->name);
		e->nargs = 3;
	}
}

const RLPrimitive rl_lock_primitive = {
	.label = "lock",
	.noun = "Redis lock",
	.plural = "Redis locks",
	.layout = "redisson",
	.no_redlock = NULL,
	.waiter_place = false,
	.owned = true,
	.acquire = lock_acquire_eval,
	.acquire_all = &rl_script_acquire_all,
	.release = lock_release_eval,
	.renew = lock_renew_eval,
	.channel = lock_channel,
	.field = lock_field,
	.fencing_key = rl_lock_token_key,
	.verify = lock_verify,
	.verified = rl_verified_int,
};

/*
 * Runs one acquisition attempt; raises on failure. With enqueue, a waiter
 * that must wait keeps its place: in the fair queue, or as a writer that
 * new readers of ours let pass.
 */
static void
attempt(LocalLock *ll, int64 lease_ms, int32 target,
		bool fair, bool enqueue, Attempt *out)
{
	RLEval		e;
	RLReply    *r;

	if (rl_mode() == RL_MODE_REDLOCK)
	{
		rl_redlock_attempt(ll, lease_ms, target, out);
		return;
	}
	memset(&e, 0, sizeof(e));
	rl_primitive(ll->kind)->acquire(&e, ll, lease_ms, target, fair, enqueue);

	/* Until the reply is in, Redis may or may not count the new hold. */
	rl_mark_dirty(ll);
	memset(out, 0, sizeof(*out));
	out->sent = GetCurrentTimestamp();
	r = rl_run_acquisition(&e, &out->wait, 1, &ll);
	rl_set_flags(ll, false, ll->queued);	/* Redis answered */
	if (r->type == REDIS_REPLY_ERROR)
	{
		rl_stat_add(RL_STAT_REDIS_ERRORS, 1);
		rl_reply_error(r, RL_OP_ACQUIRE, ll->name);
	}
	rl_expect_reply(is_array_of(r, r->type == REDIS_REPLY_ARRAY ? r->elements : 2,
								REDIS_REPLY_INTEGER) && r->elements >= 2,
					RL_OP_ACQUIRE, ll->name);
	out->acquired = r->element[0]->integer == 1;
	if (out->acquired)
	{
		out->token = r->element[1]->integer;
		out->fresh = r->elements > 2 && r->element[2]->integer == 1;
		rl_set_flags(ll, ll->dirty, false);
	}
	else
	{
		out->pttl = r->element[1]->integer;
		out->head = r->elements > 2 && r->element[2]->integer == 1;
		out->refused = true;
	}
}

/*
 * Redis answered that the hold of ll this session counts is gone (it
 * refused a re-entry: another owner has the lock; or a trim found no hold
 * of ours), however long its lease seemed to have left: it is lost now, as
 * when the watchdog finds it missing (the row, the token, the WARNING,
 * redislock.on_lock_lost), and nothing of the session may go on trusting
 * it (a later re-entry goes to Redis).
 */
void
rl_lost_by_answer(LocalLock *ll)
{
	const RLPrimitive *prim = rl_primitive(ll->kind);
	RLOnLost	done;

	if (total_holds(ll) == 0 || ll->slot < 0)
		return;
	/* a fixed lease that ran out is over, as asked, not lost */
	if (!ll->watchdog && !rl_registry_lease_alive(ll->slot, ll->generation))
		return;
	if (!rl_registry_mark_lost(ll->slot, ll->generation, ll->epoch))
		return;
	rl_stat_add(RL_STAT_LOST, 1);
	ereport(WARNING,
			(errmsg("%s \"%s\" held by this session was lost", prim->noun, ll->name),
			 errdetail("Redis no longer has this session's hold: the lease ran out, it was force-released, or Redis lost its data.")));
	/* a release has nothing to stop: it says the hold was no longer there */
	if (rl_releasing_call)
		return;
	done = rl_onlost_act_self(prim->noun, ll->name);
	if (done == RL_ON_LOST_CANCEL)
		ereport(LOG,
				(errmsg("canceling the running statement, whose redislock.on_lock_lost is \"cancel\"")));
	else if (done == RL_ON_LOST_TERMINATE)
		ereport(LOG,
				(errmsg("terminating the session, whose redislock.on_lock_lost is \"terminate\"")));
}

/*
 * Gives up this session's place after an interrupted wait: its fair queue
 * entry, or its mark as a waiting writer. Never throws.
 */
static void
give_up_place_quietly(LocalLock *ll)
{
	int32		keep = total_holds(ll);
	int64		before;

	if (rl_mode() != RL_MODE_CLUSTER && !rl_healthy(&rl_cmd_conn))
		return;
	if (rl_trim_quietly(1, &ll, &keep, &before))
		rl_set_flags(ll, ll->dirty, false);
}

/* One lock's wait: what rl_wait() calls back. */
typedef struct LockWait
{
	LocalLock  *ll;
	int64		lease_ms;
	int32		target;
	bool		fair;
} LockWait;

static void
lock_wait_attempt(void *arg, Attempt *a)
{
	LockWait   *lw = arg;

	attempt(lw->ll, lw->lease_ms, lw->target, lw->fair,
			lw->fair || rl_primitive(lw->ll->kind)->waiter_place, a);
}

static void
lock_wait_give_up(void *arg)
{
	LockWait   *lw = arg;

	if (lw->ll->queued)
		give_up_place_quietly(lw->ll);
}

/* Waits for the lock of entry ll; returns whether it was taken. */
static bool
wait_for_lock(LocalLock *ll, const RLAcquireRequest *req,
			  int64 lease_ms, int32 target, Attempt *a)
{
	const RLPrimitive *prim = rl_primitive(ll->kind);
	LockWait	lw = {ll, lease_ms, target, req->fair};
	const char *channel = prim->channel(ll->name, req->fair);
	const char *name = ll->name;
	RLWait		w;

	memset(&w, 0, sizeof(w));
	w.timeout_msg = psprintf("could not obtain %s \"%s\"", prim->noun, ll->name);
	w.nchannels = 1;
	w.channels = &channel;
	if (ll->kind == RL_KIND_PLAIN)
		w.nchannels = rl_plain_wake_channels(ll->name, (const char ***) &w.channels,
											 &w.poll_ms);
	w.attempt = lock_wait_attempt;
	w.give_up = lock_wait_give_up;
	w.arg = &lw;
	w.fair = req->fair;
	w.has_place = req->fair || prim->waiter_place;
	w.wake_one = ll->kind == RL_KIND_LOCK;
	w.recheck_ms = prim->silent_growth ? rl_semaphore_recheck : 0;
	w.wait_for.kind = ll->kind;
	w.wait_for.fair = req->fair;
	w.wait_for.n = 1;
	w.wait_for.names = &name;
	return rl_wait(&w, req, a);
}

/* Counts a hold just taken, here and in the registry. */
void
rl_record_hold(LocalLock *ll, const RLAcquireRequest *req, int64 lease_ms,
			const Attempt *a)
{
	/*
	 * Not fresh yet nothing held locally: our first attempt took it but its
	 * reply was lost, and a repeat found it held by us.
	 */
	bool		first = a->fresh || total_holds(ll) == 0;

	/*
	 * What Redis now keeps counts from this request, unless a read or write
	 * hold's script kept a longer lease it had (it never shortens one):
	 * then the lease as last confirmed still stands.
	 */
	TimestampTz renewed = first || rl_kind_exclusive(ll->kind) ||
		lease_ms >= ll->lease_ms ? a->sent : 0;

	if (first)
	{
		if (a->fresh && total_holds(ll) > 0)
			ereport(WARNING,
					(errmsg("%s \"%s\" had been lost and was acquired again",
							rl_primitive(ll->kind)->noun, ll->name),
					 a->token > 0 ?
					 errdetail("Its lease ran out or it was force-released while this session held it; the new fencing token is " INT64_FORMAT ".",
							   a->token) :
					 errdetail("Its lease ran out or it was taken away while this session held it.")));
		ll->token = a->token;
		ll->acquired_at = a->sent;
		ll->watchdog = false;
	}

	/*
	 * A re-entry sets the lease again, as in Redisson; the scripts of read
	 * and write holds never shorten it, so neither does their entry.
	 */
	if (first || rl_kind_exclusive(ll->kind))
		ll->lease_ms = lease_ms;
	else
		ll->lease_ms = Max(ll->lease_ms, lease_ms);
	ll->masters = a->masters;
	ll->watchdog |= (req->lease_ms == 0);
	ll->fair = req->fair;
	if (req->scope == RL_SCOPE_XACT)
		rl_add_xact_hold(ll, req->count);
	else
		ll->session_holds += req->count;
	ll->redis_holds = total_holds(ll);
	rl_publish(ll, a->fresh, renewed);
	rl_stat_add(a->fresh ? RL_STAT_ACQUIRES : RL_STAT_REENTRIES, 1);
}

/*
 * With redislock.sync_replicas = N, an acquisition counts only once N
 * replicas have it: otherwise a failover could hand the lock to another
 * client. a->wait is the WAIT sent with the acquisition that succeeded. If
 * the replicas did not confirm in time, Redis is trimmed back to keep, the
 * holds the session had before (a semaphore acquisition takes several).
 */
static void
confirm_on_replicas(LocalLock *ll, int32 keep, const Attempt *a)
{
	const RLReply *r = a->wait;
	int64		before;
	bool		given_back;

	Assert(r != NULL);
	if (r->type == REDIS_REPLY_INTEGER && r->integer >= rl_sync_replicas)
		return;

	rl_mark_dirty(ll);
	given_back = rl_trim_in_redis(1, &ll, &keep, &before, true);
	if (given_back)
		rl_set_flags(ll, false, ll->queued);
	rl_replicas_unconfirmed(r, ll->name, given_back);
}

/*
 * Takes or waits for a hold of entry ll that brings Redis to target holds,
 * without counting it yet (rl_record_hold does); returns whether taken.
 */
bool
rl_take_hold(LocalLock *ll, const RLAcquireRequest *req, int32 target,
			 Attempt *a)
{
	int64		lease_ms = req->lease_ms > 0 ? req->lease_ms : rl_watchdog_timeout;

	/* a hold known lost that Redis still counts is taken anew, not re-entered */
	bool		was_lost = total_holds(ll) > 0 &&
		rl_registry_is_lost(ll->slot, ll->generation);

	attempt(ll, lease_ms, target, req->fair,
			(req->fair || rl_primitive(req->kind)->waiter_place) &&
			req->wait_ms != 0, a);
	if (a->refused && rl_primitive(ll->kind)->owned)
		rl_lost_by_answer(ll);
	if (!a->acquired &&
		(req->wait_ms == 0 || !wait_for_lock(ll, req, lease_ms, target, a)))
		return false;
	a->fresh |= was_lost;
	if (rl_sync_replicas > 0 && rl_mode() != RL_MODE_REDLOCK)
		confirm_on_replicas(ll, target - req->count, a);
	return true;
}

/*
 * Whether the session may count one more hold of, or give one back to, an
 * exclusive lock it holds without asking Redis: only session-scope holds in
 * watchdog mode, where a round trip would change nothing Redis keeps (the
 * watchdog sets the lease; the hash count is ours alone), and only while
 * Redis is known to have our hold: nothing unsettled, not marked lost, and
 * the lease not run out since Redis last got it in full (a renewal that is
 * stuck or late may not have been marked lost yet).
 * A release is quiet only while Redis counts no more holds than remain
 * (redis_holds), so Redis never counts more holds than the session has:
 * it counts the holds that went to Redis, normally just the first, which
 * the last release gives back. A fixed lease goes to Redis, as in Redisson
 * each acquisition and release sets the lease again.
 */
bool
rl_held_quietly(const LocalLock *ll)
{
	return rl_kind_exclusive(ll->kind) && ll->watchdog && ll->session_holds > 0 &&
		!ll->dirty && !ll->queued && !ll->releasing && !ll->unsettled &&
		rl_registry_lease_alive(ll->slot, ll->generation);
}

/* Takes or waits for the lock of entry ll; returns whether it was taken. */
static bool
take(LocalLock *ll, const RLAcquireRequest *req)
{
	Attempt		a;
	int64		lease_ms = req->lease_ms > 0 ? req->lease_ms : rl_watchdog_timeout;
	int32		target = total_holds(ll) + req->count;

	if (req->scope == RL_SCOPE_SESSION && req->lease_ms == 0 && rl_held_quietly(ll))
	{
		ll->session_holds += req->count;
		rl_publish(ll, false, 0);
		rl_stat_add(RL_STAT_REENTRIES, 1);
		return true;
	}
	rl_settle_lock(ll);
	if (total_holds(ll) > 0 && lease_ms > ll->lease_ms)
		rl_registry_attempt(ll->slot, ll->generation, lease_ms);
	if (!rl_take_hold(ll, req, target, &a))
		return false;
	rl_record_hold(ll, req, lease_ms, &a);
	return true;
}

/* take() as rl_wait_call() runs it. */
typedef struct Take
{
	LocalLock  *ll;
	const RLAcquireRequest *req;
} Take;

static bool
take_step(void *arg)
{
	Take	   *t = arg;

	return take(t->ll, t->req);
}

/* Refuses a primitive that does not work with Redlock, saying why. */
void
rl_check_redlock(const RLPrimitive *prim)
{
	if (prim->no_redlock != NULL && rl_mode() == RL_MODE_REDLOCK)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s are not supported with Redlock", prim->plural),
				 errdetail("%s", prim->no_redlock),
				 errhint("Use a single server, sentinels or a cluster for %s.",
						 prim->plural)));
}
/*
 * Whether the worker renews leases on the Redis this session uses. Right
 * after a reload this session may have read the new settings while the
 * worker has not yet: wake it and give it RELOAD_GRACE_MS to catch up
 * before taking the settings for the session's own (it reads them at the
 * top of its loop, after any cycle under way).
 */
#define RELOAD_GRACE_MS 2000

static bool
renewed_here(void)
{
	uint32		mine = rl_server_identity();
	TimestampTz until;

	if (mine == rl_registry_renewed_server())
		return true;
	rl_registry_wake_worker();
	until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), RELOAD_GRACE_MS);
	while (GetCurrentTimestamp() < until)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 10, RL_WAIT_EVENT);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (mine == rl_registry_renewed_server())
			return true;
	}
	return false;
}


/* What every acquisition checks before anything reaches Redis. */
void
rl_check_acquire(const RLAcquireRequest *req)
{
	/* A semaphore has no lease argument: only preloading helps it. */
	if (req->lease_ms == 0 && (!rl_registry_attached() || !IsUnderPostmaster))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 req->kind == RL_KIND_SEMAPHORE ?
				 errmsg("a Redis semaphore needs the redislock watchdog") :
				 errmsg("a %s without a lease needs the redislock watchdog",
						rl_primitive(req->kind)->noun),
				 !rl_registry_attached() ?
				 errdetail("Nothing would renew the lease: redislock is not in shared_preload_libraries.") :
				 errdetail("Nothing would renew the lease: background workers do not run in single-user mode."),
				 req->kind == RL_KIND_SEMAPHORE ?
				 (!rl_registry_attached() ?
				  errhint("Add redislock to shared_preload_libraries and restart.") : 0) :
				 !rl_registry_attached() ?
				 errhint("Add redislock to shared_preload_libraries and restart, or pass a fixed lease.") :
				 errhint("Pass a fixed lease.")));

	/*
	 * The worker renews with the server's settings: a hold on the Redis of
	 * this session's own would be marked lost there while it expires here.
	 * A semaphore's permits are always renewed, having no lease to give.
	 */
	if (req->lease_ms == 0 && !renewed_here())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 req->kind == RL_KIND_SEMAPHORE ?
				 errmsg("a Redis semaphore needs the server's Redis settings") :
				 errmsg("a %s without a lease needs the server's Redis settings",
						rl_primitive(req->kind)->noun),
				 errdetail("This session has Redis connection settings of its own (redislock.url, redislock.sentinels, redislock.sentinel_master, redislock.cluster_nodes or redislock.redlock_nodes); the redislock watchdog renews leases with the server's and would not find the hold."),
				 req->kind == RL_KIND_SEMAPHORE ?
				 errhint("Set the connection settings for the whole server (postgresql.conf or ALTER SYSTEM) instead.") :
				 errhint("Pass a fixed lease, or set the connection settings for the whole server (postgresql.conf or ALTER SYSTEM) instead.")));
	rl_check_redlock(rl_primitive(req->kind));
	rl_onlost_publish();
	if (req->fair && rl_mode() == RL_MODE_REDLOCK)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("fair Redis locks are not supported with Redlock"),
				 errdetail("A FIFO queue cannot be kept consistent across independent masters."),
				 errhint("Pass fair => false, or use a single server, sentinels or a cluster.")));
}

bool
rl_lock_acquire(const RLAcquireRequest *req)
{
	LocalLock  *volatile ll;
	bool		taken;

	rl_check_acquire(req);
	rl_settle(false);
	rl_register_exit_callback();
	if (req->scope == RL_SCOPE_XACT)
		rl_reserve_xact_holds(1);
	ll = rl_local_get(req->name, req->kind, req->id,
					  req->lease_ms > 0 ? req->lease_ms : rl_watchdog_timeout);

	/* An entry created for nothing must not keep its shared slot. */
	PG_TRY();
	{
		Take		t = {ll, req};

		taken = rl_wait_call(req,
							 psprintf("could not obtain %s \"%s\"",
									  rl_primitive(req->kind)->noun, req->name),
							 take_step, &t);
	}
	PG_CATCH();
	{
		rl_forget_if_unused(ll);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (!taken)
		rl_forget_if_unused(ll);
	return taken;
}

bool
rl_lock_fencing_token(const char *name, int64 *token)
{
	LocalLock  *ll = rl_local_find(name, RL_KIND_LOCK);

	/* a write hold is fenced like an exclusive lock; read holds are not */
	if (ll == NULL)
		ll = rl_local_find(name, RL_KIND_WRITE);
	if (ll == NULL)
		ll = rl_local_find(name, RL_KIND_PLAIN);

	if (ll == NULL || total_holds(ll) == 0 ||
		rl_registry_is_lost(ll->slot, ll->generation))
		return false;
	*token = ll->token;
	return true;
}
