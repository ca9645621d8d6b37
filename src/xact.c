/*
 * xact.c
 *	  Transaction-scope holds and their end at COMMIT/ROLLBACK and
 *	  subtransaction abort, the commit guard, and the session's exit path.
 *
 * What runs after COMMIT, at abort and at exit must not throw and must not
 * wait long: it is bounded by CLEANUP_MS whatever the settings, and an
 * ending session hands its locks to the worker before it talks to Redis.
 *
 * src/xact.c
 */
#include "postgres.h"

#include <hiredis/hiredis.h>

#include "access/xact.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/memutils.h"

#include "cleanup.h"
#include "compat.h"
#include "conn.h"
#include "lock_int.h"
#include "onlost.h"
#include "redislock.h"
#include "registry.h"
#include "route.h"

/* Transaction-scope holds taken at once and the subtransaction that took them. */
typedef struct XactHold
{
	SubTransactionId subid;
	LocalLock  *lock;
	int32		count;			/* a semaphore's permits; else 1 */
} XactHold;

static XactHold *xact_holds = NULL;
static LocalLock **xact_ended = NULL;	/* room for end_xact_holds(), which
										 * must not allocate after COMMIT */
static int	nxact_holds = 0;
static int	max_xact_holds = 0;
static bool exit_callback_registered = false;

static void release_at_exit(int code, Datum arg);

void
rl_reserve_xact_holds(int n)
{
	if (nxact_holds + n <= max_xact_holds)
		return;
	if (xact_holds == NULL)
	{
		max_xact_holds = Max(16, n);
		xact_holds = MemoryContextAlloc(TopMemoryContext,
										sizeof(XactHold) * max_xact_holds);
		xact_ended = MemoryContextAlloc(TopMemoryContext,
										sizeof(LocalLock *) * max_xact_holds);
		return;
	}
	max_xact_holds = Max(max_xact_holds * 2, nxact_holds + n);
	xact_holds = repalloc(xact_holds, sizeof(XactHold) * max_xact_holds);
	xact_ended = repalloc(xact_ended, sizeof(LocalLock *) * max_xact_holds);
}

/* Records n transaction-scope holds of ll, taken in this subtransaction. */
void
rl_add_xact_hold(LocalLock *ll, int32 n)
{
	xact_holds[nxact_holds].subid = GetCurrentSubTransactionId();
	xact_holds[nxact_holds].lock = ll;
	xact_holds[nxact_holds].count = n;
	nxact_holds++;
	ll->xact_holds += n;
}

/*
 * rl_settle_locks() from a path that must not throw and must not wait long:
 * after COMMIT (where an ERROR would be a PANIC), at abort, at exit. Redis
 * gets CLEANUP_MS at most; an error is reported as a WARNING, and what is
 * left unsettled goes to the worker. At exit an ERROR would become FATAL
 * before it could be caught, which is why the exit path has handed its
 * locks to the worker before calling this.
 */
static void
settle_locks_quietly(int n, LocalLock **locks)
{
	MemoryContext old;
	int			holdoff = InterruptHoldoffCount;
	int			cancel_holdoff = QueryCancelHoldoffCount;
	TimestampTz limit;

	HOLD_INTERRUPTS();
	old = MemoryContextSwitchTo(rl_cleanup_context);
	limit = rl_limit_waits(TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   CLEANUP_MS));
	PG_TRY();
	{
		(void) rl_settle_locks(n, locks, true);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(rl_cleanup_context);
		edata = CopyErrorData();
		FlushErrorState();
		InterruptHoldoffCount = holdoff + 1;
		QueryCancelHoldoffCount = cancel_holdoff;
		ereport(WARNING,
				(errmsg("could not release the Redis locks of this session"),
				 edata->detail != NULL ?
				 errdetail_internal("%s: %s", edata->message, edata->detail) :
				 errdetail_internal("%s", edata->message),
				 errhint("They are released on the next call of this session, by the redislock worker, or expire when their lease ends.")));
	}
	PG_END_TRY();
	rl_unlimit_waits(limit);
	MemoryContextSwitchTo(old);
	MemoryContextReset(rl_cleanup_context);
	if (!proc_exit_inprogress)
		rl_hand_unsettled_to_worker();
	RESUME_INTERRUPTS();
}

/*
 * Ends the transaction-scope holds taken in subtransaction subid, or all of
 * them when subid is invalid, and releases them in Redis in one round trip.
 */
static void
end_xact_holds(SubTransactionId subid)
{
	LocalLock **ended = xact_ended;
	int			nended = 0;
	int			kept = 0;

	for (int i = 0; i < nxact_holds; i++)
	{
		XactHold   *h = &xact_holds[i];
		bool		seen = false;

		if (subid != InvalidSubTransactionId && h->subid != subid)
		{
			xact_holds[kept++] = *h;
			continue;
		}
		h->lock->xact_holds -= h->count;
		Assert(h->lock->xact_holds >= 0);
		rl_publish(h->lock, false, 0);
		rl_stat_add(RL_STAT_RELEASES, 1);
		rl_mark_dirty(h->lock);
		for (int j = 0; j < nended && !seen; j++)
			seen = ended[j] == h->lock;
		if (!seen)
			ended[nended++] = h->lock;
	}
	nxact_holds = kept;
	if (nended > 0)
		settle_locks_quietly(nended, ended);
	else
		MemoryContextReset(rl_cleanup_context);
}

void
rl_register_exit_callback(void)
{
	if (exit_callback_registered)
		return;
	before_shmem_exit(release_at_exit, (Datum) 0);
	exit_callback_registered = true;
}

/* A session that ends gives its locks back at once, not after the lease. */
static void
release_at_exit(int code, Datum arg)
{
	HASH_SEQ_STATUS seq;
	LocalLock  *ll;
	LocalLock **locks;
	int			n = 0;

	if (hash_get_num_entries(rl_local_locks) == 0)
		return;
	nxact_holds = 0;

	/*
	 * The worker's first: whatever goes wrong below (an ERROR here is a
	 * FATAL), no slot is left looking held by a live session.
	 */
	hash_seq_init(&seq, rl_local_locks);
	while ((ll = hash_seq_search(&seq)) != NULL)
		rl_registry_orphan(ll->slot, ll->generation);

	locks = MemoryContextAlloc(rl_cleanup_context,
							   sizeof(LocalLock *) * hash_get_num_entries(rl_local_locks));
	hash_seq_init(&seq, rl_local_locks);
	while ((ll = hash_seq_search(&seq)) != NULL)
	{
		ll->session_holds = 0;
		ll->xact_holds = 0;
		rl_mark_dirty(ll);
		locks[n++] = ll;
	}
	settle_locks_quietly(n, locks);

	/* What is still here could not be released: the worker takes over. */
	if (hash_get_num_entries(rl_local_locks) > 0)
		rl_registry_wake_worker();
}

/*
 * The COMMIT fails; with redislock.on_lock_lost = terminate the session found
 * the loss itself, so it ends as the worker would have ended it.
 */
pg_noreturn static void
lost_before_commit(LocalLock *ll)
{
	ereport(rl_on_lock_lost == RL_ON_LOST_TERMINATE ? FATAL : ERROR,
			(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
			 errmsg("%s \"%s\" was lost before COMMIT",
					rl_primitive(ll->kind)->noun, ll->name),
			 errdetail("Redis no longer has this session's hold (lease ran out, force-released, or Redis lost its data), so the transaction's work was not done under the lock."),
			 errhint("Retry the transaction, or set redislock.verify_on_commit = off to commit such work anyway.")));
	pg_unreachable();
}

/*
 * The commit guard: a transaction that wrote data while this session holds
 * locks commits only if Redis still has every one of those holds, checked in
 * one pipelined round trip. Read-only transactions have nothing to protect.
 */
static void
verify_before_commit(void)
{
	HASH_SEQ_STATUS seq;
	LocalLock  *ll;
	LocalLock **held;
	RLCommand  *cmds;
	const char **keys;
	RLReply   **replies;
	int			n = 0;

	if (!rl_verify_on_commit || hash_get_num_entries(rl_local_locks) == 0 ||
		!TransactionIdIsValid(GetTopTransactionIdIfAny()))
		return;

	held = palloc(sizeof(LocalLock *) * hash_get_num_entries(rl_local_locks));
	hash_seq_init(&seq, rl_local_locks);
	while ((ll = hash_seq_search(&seq)) != NULL)
	{
		if (total_holds(ll) == 0)
			continue;
		if (rl_registry_is_lost(ll->slot, ll->generation))
		{
			hash_seq_term(&seq);
			lost_before_commit(ll);
		}
		held[n++] = ll;
	}
	if (n == 0)
		return;

	cmds = palloc0(sizeof(RLCommand) * n);
	keys = palloc(sizeof(char *) * n);
	replies = palloc(sizeof(RLReply *) * n);
	for (int i = 0; i < n; i++)
	{
		keys[i] = held[i]->name;
		rl_primitive((RLKind) held[i]->kind)->verify(&cmds[i], held[i]->name,
													 rl_hold_owner(held[i]));
	}
	/* with Redlock, a hold counts as present when a majority has it */
	if (!rl_run_cmds_agreed(n, cmds, keys, RL_AGREE_ONE, replies))
	{
		rl_stat_add(RL_STAT_REDIS_ERRORS, 1);
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not verify the Redis locks of this session before COMMIT"),
				 errdetail_internal("%s", rl_failure_text(&rl_cmd_conn)),
				 errhint("Set redislock.verify_on_commit = off to commit without the check.")));
	}
	for (int i = 0; i < n; i++)
	{
		if (replies[i]->type == REDIS_REPLY_ERROR)
			rl_reply_error(replies[i], RL_OP_VERIFY, held[i]->name);
		if (rl_primitive((RLKind) held[i]->kind)->verified(replies[i]))
			continue;
		if (held[i]->slot >= 0 &&
			rl_registry_mark_lost(held[i]->slot, held[i]->generation,
								  held[i]->epoch))
			rl_stat_add(RL_STAT_LOST, 1);
		lost_before_commit(held[i]);
	}
}

static void
xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			verify_before_commit();
			break;
		case XACT_EVENT_PRE_PREPARE:
			if (nxact_holds > 0)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot PREPARE a transaction that holds Redis transaction-scope locks")));
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_ABORT:
			if (nxact_holds > 0)
				end_xact_holds(InvalidSubTransactionId);
			rl_hand_unsettled_to_worker();
			break;
		default:
			break;
	}
}

static void
subxact_callback(SubXactEvent event, SubTransactionId mySubid,
				 SubTransactionId parentSubid, void *arg)
{
	switch (event)
	{
		case SUBXACT_EVENT_ABORT_SUB:
			if (nxact_holds > 0)
				end_xact_holds(mySubid);
			rl_hand_unsettled_to_worker();
			break;
		case SUBXACT_EVENT_COMMIT_SUB:
			for (int i = 0; i < nxact_holds; i++)
				if (xact_holds[i].subid == mySubid)
					xact_holds[i].subid = parentSubid;
			break;
		default:
			break;
	}
}

void
rl_lock_init(void)
{
	RegisterXactCallback(xact_callback, NULL);
	RegisterSubXactCallback(subxact_callback, NULL);
}
