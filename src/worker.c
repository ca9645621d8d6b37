/*
 * worker.c
 *	  The "redislock watchdog" background worker: renews watchdog-mode leases
 *	  in pipelined batches, marks locks that Redis no longer has as lost,
 *	  releases the locks of sessions that ended without reaching Redis, and
 *	  settles those that idle sessions left in an unknown state.
 *
 * It works from a copy of the shared lock table taken under a shared lock,
 * so sessions never wait for a Redis round trip of the worker; slot
 * generations and epochs make sure a result is applied only to the hold it
 * was for. A session that ended is recognised by its PID and session number,
 * so a reused PID does not keep a dead session's locks renewed.
 *
 * src/worker.c
 */
#include "postgres.h"

#include <hiredis/hiredis.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "conn.h"
#include "lock.h"
#include "onlost.h"
#include "registry.h"
#include "route.h"
#include "worker.h"

/* Renewals sent in one pipeline: one round trip per batch, not per lock. */
#define RENEW_BATCH 1000

/* How soon to try again after Redis could not be reached. */
#define RETRY_MS 1000

/* How long past the first lease to run out a renewal may still take. */
#define LAPSE_SLACK_MS 100

/* Holds whose leases run out sooner than this are renewed apart. */
#define NEAR_LAPSE_MS 1000

/* The first lapse the last cycle saw: what holds up its retained resends. */
static TimestampTz next_lapse = DT_NOEND;

/* Longest sleep with nothing due, so a lost latch wake-up costs little. */
#define IDLE_MS 10000

PGDLLEXPORT void redislock_worker_main(Datum arg);

static bool redis_unreachable = false;

/*
 * Slots claimed to settle them, whose request may have reached a node that
 * did not answer it. Such a request may still be applied later, so the
 * claim is kept, holding off the session's own requests, and the request is
 * sent again each cycle until every node it may have reached has answered
 * (a new connection first kills the one it replaces; a kept one answers in
 * order).
 */
typedef struct Retained
{
	int			index;
	RLSlot		slot;
} Retained;

static Retained *retained = NULL;
static int	nretained = 0;

/* Registers one of redislock's background workers. */
static void
register_worker(const char *name, const char *function, int restart_s)
{
	BackgroundWorker bgw;

	memset(&bgw, 0, sizeof(bgw));
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	bgw.bgw_start_time = BgWorkerStart_ConsistentState;
	bgw.bgw_restart_time = restart_s;
	strlcpy(bgw.bgw_library_name, "redislock", BGW_MAXLEN);
	strlcpy(bgw.bgw_function_name, function, BGW_MAXLEN);
	strlcpy(bgw.bgw_name, name, BGW_MAXLEN);
	strlcpy(bgw.bgw_type, name, BGW_MAXLEN);
	RegisterBackgroundWorker(&bgw);
}

/*
 * The watchdog, and the listener that holds the subscriptions of all
 * waiting sessions of the server (listener.c). Waiters fall back to their
 * own subscriptions while no listener runs: it comes back sooner.
 */
void
rl_workers_register(void)
{
	register_worker("redislock watchdog", "redislock_worker_main", 5);
	register_worker("redislock listener", "redislock_listener_main", 1);
}

/* Logs a Redis outage once when it starts and once when it ends. */
static void
note_redis(bool ok)
{
	if (!ok && !redis_unreachable)
		ereport(WARNING,
				(errmsg("redislock watchdog cannot reach Redis"),
				 errdetail_internal("%s", rl_failure_text(&rl_cmd_conn)),
				 errhint("Renewals and releases are retried every %d ms.", RETRY_MS)));
	else if (ok && redis_unreachable)
		ereport(LOG,
				(errmsg("redislock watchdog reached Redis server \"%s\" again",
						rl_server_desc())));
	redis_unreachable = !ok;
}

/* The holds a slot shows: what the worker renews, restores or trims to. */
static int32
slot_holds(const RLSlot *s)
{
	return s->session_holds + s->xact_holds;
}

/*
 * How often a held slot is renewed: a watchdog hold every third of its
 * lease. A fixed-lease read hold is never renewed, but its timeout keys and
 * the hash are kept at what remains of its lease (read_renew.lua), as often
 * as a watchdog hold would be: a Redisson reader's watchdog sets the hash,
 * and before 4.4 every reader's timeout keys, to its own lease, and once it
 * left, ours would run out early. Near its end a fixed hold is left alone
 * (0). Returns the period in ms and the time counted from.
 */
static int64
renewal_period(const RLSlot *s, TimestampTz now, TimestampTz *since)
{
	int64		period;

	if (s->state != RL_SLOT_HELD || slot_holds(s) == 0)
		return 0;
	if (s->watchdog)
	{
		*since = s->renewed_at;
		return s->lease_ms / 3;
	}
	if (s->kind != RL_KIND_READ)
		return 0;
	period = Min(s->lease_ms, rl_watchdog_timeout) / 3;
	if (TimestampTzPlusMilliseconds(s->renewed_at, s->lease_ms - period) <= now)
		return 0;
	*since = s->kept_at;
	return period;
}

/* When the hold of a copy is lost by time, if its lease is the watchdog's. */
static TimestampTz
first_lapse_of(const RLSlotCopy *c)
{
	return c->slot.watchdog ? rl_registry_lapse_at(&c->slot) : DT_NOEND;
}

static int
by_lapse(const void *a, const void *b)
{
	TimestampTz x = first_lapse_of(*(RLSlotCopy *const *) a);
	TimestampTz y = first_lapse_of(*(RLSlotCopy *const *) b);

	return x < y ? -1 : x > y ? 1 : 0;
}

/*
 * Holds the round trips that follow to lapse (DT_NOEND: no limit), in
 * place of the limit set before; the worker sets none of its own otherwise.
 */
static void
limit_to_lapse(TimestampTz lapse)
{
	rl_unlimit_waits(0);
	if (lapse != DT_NOEND)
		(void) rl_limit_waits(TimestampTzPlusMilliseconds(lapse, LAPSE_SLACK_MS));
}

/*
 * Trims the slot owner's holds to keep: to what the slot shows (settling a
 * hold of unknown outcome) or to 0 (an ended session's lock). A waiter that
 * gave up may still stand in a fair queue: it leaves it.
 */
static void
slot_release_eval(RLEval *e, const RLSlot *s, int32 keep)
{
	rl_release_eval(e, (RLKind) s->kind, s->name, s->owner, keep, true,
					s->watchdog ? s->lease_ms : 0);
}

static bool
is_retained(int index, uint32 generation)
{
	for (int i = 0; i < nretained; i++)
		if (retained[i].index == index && retained[i].slot.generation == generation)
			return true;
	return false;
}

/*
 * Ends the claims of n slots after their settling requests: at once when
 * every node they may have reached answered (settled[i]: the trim was
 * done), else they are retained, to be sent again.
 */
static void
end_claims(RLSlotCopy **items, int n, const bool *settled)
{
	if (rl_last_run_complete())
	{
		for (int i = 0; i < n; i++)
			rl_registry_unclaim(items[i]->index, items[i]->slot.generation, settled[i]);
		return;
	}
	retained = retained == NULL ?
		MemoryContextAlloc(TopMemoryContext, sizeof(Retained) * (nretained + n)) :
		repalloc(retained, sizeof(Retained) * (nretained + n));
	for (int i = 0; i < n; i++)
		if (!is_retained(items[i]->index, items[i]->slot.generation))
		{
			retained[nretained].index = items[i]->index;
			retained[nretained].slot = items[i]->slot;
			nretained++;
		}
}

/* Sends the retained requests again; false if Redis was unreachable. */
static bool
resend_retained(void)
{
	int			n = nretained;
	RLEval	   *evals = palloc0(sizeof(RLEval) * Max(n, 1));
	RLReply   **replies = palloc(sizeof(RLReply *) * Max(n, 1));
	bool		ok;

	if (n == 0)
		return true;
	for (int i = 0; i < n; i++)
		slot_release_eval(&evals[i], &retained[i].slot, slot_holds(&retained[i].slot));
	ok = rl_run_agreed(n, evals, RL_AGREE_MAX, replies, NULL);
	if (!rl_last_run_complete())
		return ok;
	for (int i = 0; i < n; i++)
		rl_registry_unclaim(retained[i].index, retained[i].slot.generation,
							ok && replies[i]->type != REDIS_REPLY_ERROR);
	nretained = 0;
	return ok;
}

/*
 * Puts the hold back on the Redlock masters that lost it (restarted empty),
 * for the locks that a majority still holds: renew.lua's restore. A restore
 * that reaches a master after the session released there finds the
 * release's mark and does nothing, so a released lock never comes back.
 */
static void
restore_holds(RLSlotCopy **items, int n)
{
	RLEval	   *evals = palloc0(sizeof(RLEval) * n);
	RLReply   **replies = palloc(sizeof(RLReply *) * n);
	int		   *masters = palloc(sizeof(int) * n);
	TimestampTz sent = GetCurrentTimestamp();

	for (int i = 0; i < n; i++)
		rl_renew_eval(&evals[i], (RLKind) items[i]->slot.kind,
					  items[i]->slot.name, items[i]->slot.owner,
					  items[i]->slot.lease_ms, slot_holds(&items[i]->slot), true);
	if (!rl_run_agreed(n, evals, RL_AGREE_MAX, replies, masters))
		return;
	for (int i = 0; i < n; i++)
		if (masters[i] >= rl_redlock_quorum())
			rl_registry_renewed(items[i]->index, items[i]->slot.generation,
								items[i]->slot.epoch, sent, true, masters[i]);
}

/*
 * What Redis must keep of a hold renewed at now: a watchdog hold's full
 * lease, a fixed-lease read hold what remains of the lease the session
 * counts on, from when it was asked for (so a bit less than Redis gave).
 */
static int64
owed_ms(const RLSlot *s, TimestampTz now)
{
	TimestampTz end = TimestampTzPlusMilliseconds(s->renewed_at, s->lease_ms);

	if (s->watchdog)
		return s->lease_ms;
	Assert(s->kind == RL_KIND_READ);
	/* a cycle that took long may send it just past the end: 1 ms is nothing */
	return Max((end - now) / 1000, 1);
}

/*
 * The worker found the hold of slot s gone (lapsed: its lease ran out with
 * no renewal that Redis confirmed; else a renewal found it missing): marks
 * it lost, unless it changed since the snapshot, says so and does to its
 * session what the session asked for.
 */
static void
report_lost(RLSlotCopy *item, bool lapsed)
{
	RLSlot	   *s = &item->slot;
	RLOnLost	done;

	if (!rl_registry_mark_lost(item->index, s->generation, s->epoch))
		return;
	done = rl_onlost_act(s, rl_kind_noun(s->kind));
	rl_stat_add(RL_STAT_LOST, 1);
	ereport(WARNING,
			(errmsg("%s \"%s\" held by the session with PID %d was lost",
					rl_kind_noun(s->kind), s->name, s->pid),
			 lapsed ?
			 errdetail("Its lease of %lld ms ran out before Redis confirmed a renewal: another client may hold it now.",
					   (long long) s->lease_ms) :
			 errdetail("Redis no longer has the hold: the lease ran out, the lock was force-released, or Redis lost its data.")));
	if (done == RL_ON_LOST_CANCEL)
		ereport(LOG,
				(errmsg("canceled the running statement, if any, of the session with PID %d, whose redislock.on_lock_lost is \"cancel\"",
						s->pid)));
	else if (done == RL_ON_LOST_TERMINATE)
		ereport(LOG,
				(errmsg("terminated the session with PID %d, whose redislock.on_lock_lost is \"terminate\"",
						s->pid)));
}

/* Renews one batch in a single round trip; false if Redis was unreachable. */
static bool
renew_batch(RLSlotCopy **items, int n)
{
	RLEval	   *evals = palloc0(sizeof(RLEval) * n);
	RLReply   **replies = palloc0(sizeof(RLReply *) * n);
	int		   *masters = palloc(sizeof(int) * n);
	RLSlotCopy **partial = palloc(sizeof(RLSlotCopy *) * n);
	int			npartial = 0;
	TimestampTz sent = GetCurrentTimestamp();

	for (int i = 0; i < n; i++)
		rl_renew_eval(&evals[i], (RLKind) items[i]->slot.kind,
					  items[i]->slot.name, items[i]->slot.owner,
					  owed_ms(&items[i]->slot, sent),
					  slot_holds(&items[i]->slot), false);

	/*
	 * With Redlock a lock stays held when a majority of masters still had it
	 * (renew.lua's 1); the others get it back afterwards (restore_holds).
	 */
	if (!rl_run_agreed(n, evals, RL_AGREE_ONE, replies, masters))
	{
		rl_stat_add(RL_STAT_RENEWAL_FAILURES, n);
		rl_stat_add(RL_STAT_REDIS_ERRORS, 1);

		/*
		 * Another node's failure (a cluster node down or migrating) must not
		 * cost the holds whose renewal Redis did confirm: unrecorded, their
		 * leases would run out here while Redis keeps renewing them. (With
		 * Redlock no renewal counts without a majority's votes.)
		 */
		if (rl_mode() != RL_MODE_REDLOCK)
			for (int i = 0; i < n; i++)
				if (replies[i] != NULL && replies[i]->type == REDIS_REPLY_INTEGER &&
					replies[i]->integer == 1)
					rl_registry_renewed(items[i]->index, items[i]->slot.generation,
										items[i]->slot.epoch, sent,
										items[i]->slot.watchdog, 0);
		return false;
	}
	for (int i = 0; i < n; i++)
	{
		RLSlot	   *s = &items[i]->slot;

		if (replies[i]->type == REDIS_REPLY_ERROR)
		{
			rl_stat_add(RL_STAT_RENEWAL_FAILURES, 1);
			rl_stat_add(RL_STAT_REDIS_ERRORS, 1);
			ereport(WARNING,
					(errmsg("could not renew %s \"%s\"", rl_kind_noun(s->kind), s->name),
					 errdetail_internal("Redis server \"%s\" answered: %s",
										rl_server_desc(), replies[i]->str)));
		}
		else if (replies[i]->type != REDIS_REPLY_INTEGER)
			rl_stat_add(RL_STAT_RENEWAL_FAILURES, 1);
		else if (replies[i]->integer == 1 && !s->watchdog)
			rl_registry_renewed(items[i]->index, s->generation, s->epoch, sent,
								false, 0);
		else if (replies[i]->integer == 1)
		{
			rl_registry_renewed(items[i]->index, s->generation, s->epoch, sent,
								true, masters[i]);
			rl_stat_add(RL_STAT_RENEWALS, 1);
			if (rl_mode() == RL_MODE_REDLOCK && masters[i] < rl_redlock_size())
				partial[npartial++] = items[i];
		}
		else
			report_lost(items[i], false);
	}
	if (npartial > 0)
		restore_holds(partial, npartial);
	return true;
}

/*
 * Releases the locks of ended sessions, or trims those of live sessions that
 * left them unsettled to the holds they show (settle); false if Redis was
 * unreachable. A live session's slot is claimed first, so that a call the
 * session starts meanwhile waits for our request to be answered.
 */
static bool
release_slots(RLSlotCopy **items, int n, bool settle)
{
	RLEval	   *evals = palloc0(sizeof(RLEval) * Max(n, 1));
	RLReply   **replies = palloc(sizeof(RLReply *) * Max(n, 1));
	RLSlotCopy **mine = palloc(sizeof(RLSlotCopy *) * Max(n, 1));
	bool	   *done = palloc0(sizeof(bool) * Max(n, 1));
	int			nmine = 0;
	bool		ok;

	for (int i = 0; i < n; i++)
		if (!settle || rl_registry_claim(items[i]->index, &items[i]->slot))
			mine[nmine++] = items[i];
	if (nmine == 0)
		return true;
	for (int i = 0; i < nmine; i++)
		slot_release_eval(&evals[i], &mine[i]->slot,
						  settle ? slot_holds(&mine[i]->slot) : 0);
	ok = rl_run_agreed(nmine, evals, RL_AGREE_MAX, replies, NULL);
	if (!ok)
		rl_stat_add(RL_STAT_REDIS_ERRORS, 1);
	for (int i = 0; i < nmine; i++)
	{
		RLSlot	   *s = &mine[i]->slot;

		done[i] = ok && replies[i]->type != REDIS_REPLY_ERROR;
		if (ok && !done[i])
			ereport(WARNING,
					(settle ?
					 errmsg("could not release %s \"%s\" of an idle session",
							rl_kind_noun(s->kind), s->name) :
					 errmsg("could not release %s \"%s\" of an ended session",
							rl_kind_noun(s->kind), s->name),
					 errdetail_internal("Redis server \"%s\" answered: %s",
										rl_server_desc(), replies[i]->str)));
		else if (done[i] && !settle && replies[i]->type == REDIS_REPLY_INTEGER &&
				 replies[i]->integer > 0)
		{
			rl_stat_add(RL_STAT_WORKER_RELEASED, 1);
			ereport(LOG,
					(errmsg("released %s \"%s\" of the ended session with PID %d",
							rl_kind_noun(s->kind), s->name, s->pid)));
		}
		if (!settle && ok)
			rl_registry_free(mine[i]->index, s->generation);
	}
	if (settle)
		end_claims(mine, nmine, done);
	return ok;
}

/*
 * One pass over the table: renew what is due, release what ended sessions
 * left behind, settle what idle sessions left unsettled. Returns how long
 * to sleep before the next pass.
 */
static long
run_cycle(void)
{
	RLSlotCopy *copies;
	int			n;
	RLSlotCopy **due;
	RLSlotCopy **orphans;
	RLSlotCopy **unsettled;
	int			ndue = 0;
	int			norphans = 0;
	int			nunsettled = 0;
	bool		ok = true;
	bool		resent;
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz next = TimestampTzPlusMilliseconds(now, IDLE_MS);
	TimestampTz first_lapse = DT_NOEND;
	long		sleep_ms;

	/* from the snapshot on, what sessions publish is noted for its end */
	rl_registry_cycle_begin();
	limit_to_lapse(next_lapse);
	resent = resend_retained();
	rl_unlimit_waits(0);
	n = rl_registry_snapshot(&copies);
	due = palloc(sizeof(RLSlotCopy *) * Max(n, 1));
	orphans = palloc(sizeof(RLSlotCopy *) * Max(n, 1));
	unsettled = palloc(sizeof(RLSlotCopy *) * Max(n, 1));

	for (int i = 0; i < n; i++)
	{
		RLSlot	   *s = &copies[i].slot;
		TimestampTz lease_end = TimestampTzPlusMilliseconds(s->renewed_at, s->lease_ms);
		TimestampTz since = 0;
		int64		period = renewal_period(s, now, &since);
		bool		renewing = period > 0;
		TimestampTz due_at = TimestampTzPlusMilliseconds(since, period);

		/*
		 * A lease that ran out with no renewal confirmed is lost, whatever
		 * Redis says later; a fixed lease that runs out is just over.
		 */
		if (s->watchdog && rl_registry_lapsed(s, now))
		{
			report_lost(&copies[i], true);
			continue;
		}
		if (s->watchdog && s->state == RL_SLOT_HELD && slot_holds(s) > 0)
		{
			first_lapse = Min(first_lapse, rl_registry_lapse_at(s));
			next = Min(next, rl_registry_lapse_at(s));
		}

		/*
		 * Renewing up to half a period early lets locks taken at slightly
		 * different times share one batch from then on.
		 */
		if (renewing && TimestampTzPlusMilliseconds(due_at, -period / 2) > now &&
			!s->unsettled)
		{
			next = Min(next, due_at);
			continue;
		}

		/* a session that died without handing its locks over */
		if (s->state != RL_SLOT_ORPHANED && !rl_registry_session_alive(s))
		{
			rl_registry_orphan(copies[i].index, s->generation);
			s->state = RL_SLOT_ORPHANED;
		}
		/*
		 * A hold whose lease ends in Redis by itself is left to it; one that
		 * outlives its lease (a semaphore's permits) is released until done.
		 */
		if (s->state == RL_SLOT_ORPHANED)
		{
			if (Max(lease_end, s->horizon) <= now && !rl_kind_outlives_lease(s->kind))
				rl_registry_free(copies[i].index, s->generation);
			else
				orphans[norphans++] = &copies[i];
			continue;
		}
		if (s->unsettled)
			unsettled[nunsettled++] = &copies[i];
		if (renewing)
		{
			due[ndue++] = &copies[i];
			next = Min(next, TimestampTzPlusMilliseconds(now, period));
		}
	}

	/*
	 * A request stuck on a silent server must not keep the worker from
	 * finding a lease run out: no round trip outlives the first one due to
	 * by more than LAPSE_SLACK_MS. Renewals go in the order their leases
	 * run out, each batch held to its own first, so that a hold close to
	 * its end does not cut short the renewals of the others.
	 */
	qsort(due, ndue, sizeof(RLSlotCopy *), by_lapse);
	for (int start = 0; start < ndue && ok;)
	{
		int			end = Min(start + RENEW_BATCH, ndue);

		if (first_lapse_of(due[start]) < TimestampTzPlusMilliseconds(now, NEAR_LAPSE_MS))
			while (end > start + 1 &&
				   first_lapse_of(due[end - 1]) >= TimestampTzPlusMilliseconds(now, NEAR_LAPSE_MS))
				end--;
		limit_to_lapse(first_lapse_of(due[start]));
		ok = renew_batch(due + start, end - start);
		start = end;
	}
	limit_to_lapse(first_lapse);
	if (ok && norphans > 0)
		ok = release_slots(orphans, norphans, false);
	if (ok && nunsettled > 0)
		ok = release_slots(unsettled, nunsettled, true);
	rl_unlimit_waits(0);
	next_lapse = first_lapse;
	ok = ok && resent;
	note_redis(ok);
	if (!ok || norphans > 0 || nunsettled > 0 || nretained > 0)
		next = Min(next, TimestampTzPlusMilliseconds(now, RETRY_MS));

	next = rl_registry_cycle_end(next);
	now = GetCurrentTimestamp();
	sleep_ms = next > now ? (long) ((next - now + 999) / 1000) : 0;
	return sleep_ms;
}

static void
detach_worker(int code, Datum arg)
{
	/*
	 * Even when leaving on an error: a request left unanswered is reset
	 * with its connection rather than delivered later, and only then are
	 * the claims it was sent for ended.
	 */
	rl_disconnect(&rl_cmd_conn);
	for (int i = 0; i < rl_redlock_size(); i++)
		rl_disconnect(rl_redlock_conn(i));
	rl_registry_set_worker(NULL);
}

void
redislock_worker_main(Datum arg)
{
	MemoryContext cycle_context;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_activity(STATE_RUNNING, "renewing Redis locks");

	rl_registry_set_worker(MyLatch);
	rl_registry_set_renewed_server(rl_server_identity());
	before_shmem_exit(detach_worker, (Datum) 0);
	cycle_context = AllocSetContextCreate(TopMemoryContext,
										  "redislock watchdog cycle",
										  ALLOCSET_DEFAULT_SIZES);

	while (!ShutdownRequestPending)
	{
		MemoryContext old;
		long		sleep_ms;

		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			rl_registry_set_renewed_server(rl_server_identity());
		}
		old = MemoryContextSwitchTo(cycle_context);
		sleep_ms = run_cycle();
		MemoryContextSwitchTo(old);
		MemoryContextReset(cycle_context);

		if (sleep_ms > 0)
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 sleep_ms, RL_WAIT_EVENT);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}

	/*
	 * Exit code 1 asks the postmaster for a restart: leases lapse while no
	 * watchdog runs, so one stopped by pg_terminate_backend must come back.
	 * At server shutdown nothing is restarted anyway.
	 */
	proc_exit(1);
}
