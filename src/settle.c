/*
 * settle.c
 *	  Bringing Redis back in line with the session's table of holds: trims of
 *	  hold counts (one pipelined round trip for many locks), the settling of
 *	  locks left dirty or queued, quietly from cleanup paths too.
 *
 * src/settle.c
 */
#include "postgres.h"

#include <hiredis/hiredis.h>

#include "utils/hsearch.h"
#include "utils/timestamp.h"

#include "cleanup.h"
#include "conn.h"
#include "deadlock.h"
#include "lock_int.h"
#include "redislock.h"
#include "registry.h"
#include "route.h"

/* Tells the registry which of n locks lose their last hold (keep[i] 0). */
static void
mark_releasing(int n, LocalLock **locks, const int32 *keep, bool releasing)
{
	for (int i = 0; i < n; i++)
		if (keep[i] == 0)
			rl_registry_releasing(locks[i]->slot, locks[i]->generation,
								  releasing);
}

/*
 * Takes in Redis's reply to the trim of one lock; returns the holds Redis
 * had. An error reply means the trim was not applied: the lock keeps the
 * holds the session counts, is no longer being released (here or in the
 * registry), and the error is raised, or with quiet only logged.
 */
static int64
trim_reply(LocalLock *ll, int32 keep, const RLReply *r, bool quiet)
{
	if (r->type == REDIS_REPLY_ERROR)
	{
		const char *hint = rl_refusal_hint(r->str);

		ll->releasing = false;
		if (keep == 0)
			rl_registry_releasing(ll->slot, ll->generation, false);
		/* repeating cannot help: the lock is settled, as far as it can be */
		if (!quiet)
		{
			rl_set_flags(ll, false, false);
			rl_reply_error(r, RL_OP_RELEASE, ll->name);
		}
		ereport(WARNING,
				(rl_op_errmsg(RL_OP_RELEASE, ll->name),
				 errdetail_internal("Redis server \"%s\" answered: %s",
									rl_server_desc(), r->str),
				 hint ? errhint("%s", hint) : 0));
		return 0;
	}
	if (!is_int(r))
	{
		if (!quiet)
			rl_expect_reply(false, RL_OP_RELEASE, ll->name);
		return 0;
	}
	ll->redis_holds = (int32) Min(r->integer, keep);
	return r->integer;
}

/*
 * Trims this owner's hold count in Redis to keep[i] for each of n locks and
 * takes it out of their fair queues where it may stand, in one pipelined
 * round trip. before[i] gets the count Redis had. Returns false when Redis
 * could not be reached (see rl_cmd_conn); error replies are raised, or with
 * quiet only logged, and count as done since repeating cannot help. A lock
 * the worker is settling is not sent before the worker's request has been
 * answered (it would reach Redis in either order): false after the command
 * timeout. Where a lock's last hold goes, the registry knows it is being
 * released until the caller publishes the outcome or frees the slot, or
 * this call fails or Redis refuses that release.
 */
bool
rl_trim_in_redis(int n, LocalLock **locks, const int32 *keep, int64 *before,
				 bool quiet)
{
	RLEval	   *evals = palloc0(sizeof(RLEval) * n);
	RLReply   **replies = palloc(sizeof(RLReply *) * n);
	volatile bool sent;

	for (int i = 0; i < n; i++)
	{
		if (locks[i]->unsettled &&
			!rl_registry_begin_io(locks[i]->slot, locks[i]->generation,
								  rl_command_deadline()))
		{
			return rl_fail_on(&rl_cmd_conn, RLF_TIMEOUT, rl_server_desc(),
							  "The redislock worker's request to settle lock \"%s\" is still unanswered.",
							  locks[i]->name);
		}
		locks[i]->unsettled = false;
		rl_release_eval(&evals[i], locks[i]->kind, locks[i]->name,
						rl_hold_owner(locks[i]), keep[i],
						locks[i]->queued,
						locks[i]->watchdog ? locks[i]->lease_ms : 0);
	}
	mark_releasing(n, locks, keep, true);

	/*
	 * The flag must not outlive this call where the release did not happen:
	 * the worker would take a loss of the hold for the release and never
	 * report it. Any ERROR out of here (an error reply, a reply no script
	 * gives, an interrupt) leaves the session counting its holds, so Redis
	 * not having them is a loss again.
	 */
	PG_TRY();
	{
		sent = rl_run_agreed(n, evals, RL_AGREE_MAX, replies, NULL);
		if (sent)
			for (int i = 0; i < n; i++)
			{
				before[i] = trim_reply(locks[i], keep[i], replies[i], quiet);

				/*
				 * A hold we go on counting that Redis does not have is lost,
				 * unless a release whose reply never came explains it.
				 */
				if (!quiet && keep[i] > 0 && before[i] == 0 && !locks[i]->releasing)
					rl_lost_by_answer(locks[i]);
			}
	}
	PG_CATCH();
	{
		mark_releasing(n, locks, keep, false);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (!sent)
	{
		mark_releasing(n, locks, keep, false);
		rl_stat_add(RL_STAT_REDIS_ERRORS, 1);
		return false;
	}
	return true;
}

/*
 * Brings Redis in line with the local table for n locks. From SQL calls
 * (quiet = false) a failure is an ERROR, as the call needs Redis anyway; from
 * cleanup paths it is logged and the locks stay marked for a later try.
 * A cluster slot in migration is no ERROR: the locks go to the worker,
 * which settles them when the slot settles (a call about one of them
 * settles it first: rl_settle_lock).
 */
bool
rl_settle_locks(int n, LocalLock **locks, bool quiet)
{
	int32	   *keep = palloc(sizeof(int32) * Max(n, 1));
	int64	   *before = palloc(sizeof(int64) * Max(n, 1));

	for (int i = 0; i < n; i++)
		keep[i] = total_holds(locks[i]);
	if (n > 0 && !rl_trim_in_redis(n, locks, keep, before, quiet))
	{
		if (!quiet && rl_release_delayed(n, locks))
		{
			rl_hand_unsettled_to_worker();
			return false;
		}
		if (!quiet)
			rl_report(&rl_cmd_conn, ERROR);
		ereport(WARNING,
				(errmsg("could not release the Redis locks of this session"),
				 errdetail_internal("%s", rl_failure_text(&rl_cmd_conn)),
				 errhint("They are released on the next call of this session, by the redislock worker, or expire when their lease ends.")));
		return false;
	}
	for (int i = 0; i < n; i++)
	{
		rl_set_flags(locks[i], false, false);
		rl_forget_if_unused(locks[i]);
	}
	return true;
}

/*
 * Settles lock ll before a call acquires it, if it is dirty or may still
 * stand in a queue; a failure is an ERROR. Whatever was left to the worker
 * must reach Redis before the call's own request.
 */
void
rl_settle_lock(LocalLock *ll)
{
	int32		keep = total_holds(ll);
	int64		before;

	if (!ll->dirty && !ll->queued)
		return;
	if (!rl_trim_in_redis(1, &ll, &keep, &before, false))
		rl_report(&rl_cmd_conn, ERROR);
	rl_set_flags(ll, false, false);
}

/*
 * Settles every lock of this session that is dirty or may still be queued;
 * from SQL calls, also deletes a wait-for edge an ended wait left behind.
 * From SQL calls a lock handed to the worker is left to it while its
 * request is under way (a call about that lock waits for it: rl_settle_lock).
 */
void
rl_settle(bool quiet)
{
	HASH_SEQ_STATUS seq;
	LocalLock  *ll;
	LocalLock **locks;
	int			n = 0;

	if (!quiet)
		rl_deadlock_settle();
	if (!rl_holds_pending())
		return;
	locks = palloc(sizeof(LocalLock *) * Max(hash_get_num_entries(rl_local_locks), 1));
	hash_seq_init(&seq, rl_local_locks);
	while ((ll = hash_seq_search(&seq)) != NULL)
	{
		if (!ll->dirty && !ll->queued)
			continue;
		/* one the worker is settling right now stays its own */
		if (!quiet && ll->unsettled &&
			!rl_registry_begin_io(ll->slot, ll->generation, GetCurrentTimestamp()))
			continue;
		locks[n++] = ll;
	}
	(void) rl_settle_locks(n, locks, quiet);
}

/*
 * Tells the worker which locks this session leaves unsettled when a
 * (sub)transaction ends: the session may not call again for long (an idle
 * pooled connection, say), and the lock would stay held in Redis until then.
 */
void
rl_hand_unsettled_to_worker(void)
{
	HASH_SEQ_STATUS seq;
	LocalLock  *ll;

	if (!rl_holds_pending())
		return;
	hash_seq_init(&seq, rl_local_locks);
	while ((ll = hash_seq_search(&seq)) != NULL)
		if ((ll->dirty || ll->queued) && !ll->unsettled && ll->slot >= 0)
		{
			rl_registry_set_unsettled(ll->slot, ll->generation);
			ll->unsettled = true;
		}
}

/*
 * After a trim of n locks (a release, a settle) failed: whether only
 * because a cluster slot is migrating (TRYAGAIN past command_timeout). The
 * caller then goes on as if Redis had answered, and once it has published
 * what remains hands the locks, still dirty, to the worker
 * (rl_hand_unsettled_to_worker), which trims Redis to that when the slot
 * settles: a hold given back is never renewed again, so never reported
 * lost.
 */
bool
rl_release_delayed(int n, LocalLock **locks)
{
	if (rl_cmd_conn.failure != RLF_MIGRATING)
		return false;
	for (int i = 0; i < n; i++)
		if (locks[i]->slot < 0)
			return false;
	ereport(DEBUG1,
			(errmsg_internal("redislock release handed to the worker"),
			 errdetail_internal("%s", rl_failure_text(&rl_cmd_conn))));
	return true;
}

typedef struct Trim
{
	int			n;
	LocalLock **locks;
	const int32 *keep;
	int64	   *before;
} Trim;

static bool
trim_step(void *arg)
{
	Trim	   *t = arg;

	return rl_trim_in_redis(t->n, t->locks, t->keep, t->before, true);
}

/* rl_trim_in_redis() quietly (see rl_quietly); a failure is only logged. */
bool
rl_trim_quietly(int n, LocalLock **locks, const int32 *keep, int64 *before)
{
	Trim		t = {n, locks, keep, before};

	return rl_quietly(trim_step, &t);
}
