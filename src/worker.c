/*
 * worker.c
 *	  The "redislock watchdog" background worker: renews watchdog-mode leases
 *	  in pipelined batches, marks locks that Redis no longer has as lost, and
 *	  releases the locks of sessions that ended without reaching Redis.
 *
 * It works from a copy of the shared lock table taken under a shared lock,
 * so sessions never wait for a Redis round trip of the worker; slot
 * generations make sure a result is applied only to the slot it was for.
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

#include "conn.h"
#include "lock.h"
#include "registry.h"
#include "route.h"
#include "worker.h"

/* Renewals sent in one pipeline: one round trip per batch, not per lock. */
#define RENEW_BATCH 1000

/* How soon to try again after Redis could not be reached. */
#define RETRY_MS 1000

/* Longest sleep with nothing due, so a lost latch wake-up costs little. */
#define IDLE_MS 10000

PGDLLEXPORT void redislock_worker_main(Datum arg);

static bool redis_unreachable = false;

void
rl_worker_register(void)
{
	BackgroundWorker bgw;

	memset(&bgw, 0, sizeof(bgw));
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	bgw.bgw_start_time = BgWorkerStart_ConsistentState;
	bgw.bgw_restart_time = 5;
	strlcpy(bgw.bgw_library_name, "redislock", BGW_MAXLEN);
	strlcpy(bgw.bgw_function_name, "redislock_worker_main", BGW_MAXLEN);
	strlcpy(bgw.bgw_name, "redislock watchdog", BGW_MAXLEN);
	strlcpy(bgw.bgw_type, "redislock watchdog", BGW_MAXLEN);
	RegisterBackgroundWorker(&bgw);
}

/* Logs a Redis outage once when it starts and once when it ends. */
static void
note_redis(bool ok)
{
	if (!ok && !redis_unreachable)
		ereport(WARNING,
				(errmsg("redislock watchdog cannot reach redis: %s", rl_cmd_conn.errmsg),
				 errdetail("Renewals and releases are retried every %d ms.", RETRY_MS)));
	else if (ok && redis_unreachable)
		ereport(LOG,
				(errmsg("redislock watchdog reached redis server at %s again",
						rl_server_desc())));
	redis_unreachable = !ok;
}

/* Renews one batch in a single round trip; false if Redis was unreachable. */
static bool
renew_batch(RLSlotCopy **items, int n)
{
	RLEval	   *evals = palloc0(sizeof(RLEval) * n);
	RLReply   **replies = palloc(sizeof(RLReply *) * n);
	int		   *masters = palloc(sizeof(int) * n);
	TimestampTz sent = GetCurrentTimestamp();

	for (int i = 0; i < n; i++)
		rl_renew_eval(&evals[i], items[i]->slot.name, items[i]->slot.owner,
					  items[i]->slot.lease_ms,
					  items[i]->slot.session_holds + items[i]->slot.xact_holds);
	/*
	 * With Redlock a lock stays held when a majority of masters still had it
	 * (renew.lua's 1); masters that had lost it and got it back (2) do not
	 * count, the majority must come from holds that never lapsed.
	 */
	if (!rl_run_agreed(n, evals, RL_AGREE_ONE, replies, masters))
	{
		rl_stat_add(RL_STAT_RENEWAL_FAILURES, n);
		rl_stat_add(RL_STAT_REDIS_ERRORS, 1);
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
					(errmsg("could not renew redis lock \"%s\": %s", s->name, replies[i]->str)));
		}
		else if (replies[i]->type != REDIS_REPLY_INTEGER)
			rl_stat_add(RL_STAT_RENEWAL_FAILURES, 1);
		else if (replies[i]->integer == 1)
		{
			rl_registry_renewed(items[i]->index, s->generation, sent, masters[i]);
			rl_stat_add(RL_STAT_RENEWALS, 1);
		}
		else if (rl_registry_mark_lost(items[i]->index, s->generation))
		{
			rl_stat_add(RL_STAT_LOST, 1);
			ereport(WARNING,
					(errmsg("redis lock \"%s\" held by the session with PID %d was lost",
							s->name, s->pid),
					 errdetail("Redis no longer has the hold: the lease ran out, the lock was force-released, or Redis lost its data.")));
		}
	}
	return true;
}

/* Releases the locks of ended sessions; false if Redis was unreachable. */
static bool
release_orphans(RLSlotCopy **items, int n)
{
	RLEval	   *evals = palloc0(sizeof(RLEval) * n);
	RLReply   **replies = palloc(sizeof(RLReply *) * n);

	for (int i = 0; i < n; i++)
	{
		rl_release_eval(&evals[i], items[i]->slot.name, items[i]->slot.owner, 0, true);
	}
	if (!rl_run_agreed(n, evals, RL_AGREE_MAX, replies, NULL))
	{
		rl_stat_add(RL_STAT_REDIS_ERRORS, 1);
		return false;
	}
	for (int i = 0; i < n; i++)
	{
		if (replies[i]->type == REDIS_REPLY_ERROR)
			ereport(WARNING,
					(errmsg("could not release redis lock \"%s\" of an ended session: %s",
							items[i]->slot.name, replies[i]->str)));
		else if (replies[i]->type == REDIS_REPLY_INTEGER && replies[i]->integer > 0)
		{
			rl_stat_add(RL_STAT_WORKER_RELEASED, 1);
			ereport(LOG,
					(errmsg("released redis lock \"%s\" of the ended session with PID %d",
							items[i]->slot.name, items[i]->slot.pid)));
		}
		rl_registry_free(items[i]->index);
	}
	return true;
}

/*
 * One pass over the table: renew what is due, release what ended sessions
 * left behind. Returns how long to sleep before the next pass.
 */
static long
run_cycle(void)
{
	RLSlotCopy *copies;
	int			n = rl_registry_snapshot(&copies);
	RLSlotCopy **due = palloc(sizeof(RLSlotCopy *) * Max(n, 1));
	RLSlotCopy **orphans = palloc(sizeof(RLSlotCopy *) * Max(n, 1));
	int			ndue = 0;
	int			norphans = 0;
	bool		ok = true;
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz next = TimestampTzPlusMilliseconds(now, IDLE_MS);
	long		sleep_ms;

	for (int i = 0; i < n; i++)
	{
		RLSlot	   *s = &copies[i].slot;
		TimestampTz lease_end = TimestampTzPlusMilliseconds(s->renewed_at, s->lease_ms);

		if (s->state == RL_SLOT_ORPHANED)
		{
			if (lease_end <= now)
				rl_registry_free(copies[i].index);
			else
				orphans[norphans++] = &copies[i];
		}
		else if (s->state == RL_SLOT_HELD && s->watchdog &&
				 s->session_holds + s->xact_holds > 0)
		{
			TimestampTz due_at = TimestampTzPlusMilliseconds(s->renewed_at, s->lease_ms / 3);

			/*
			 * Renewing up to a sixth of the lease early lets locks taken at
			 * slightly different times share one batch from then on.
			 */
			if (TimestampTzPlusMilliseconds(due_at, -s->lease_ms / 6) <= now)
			{
				due[ndue++] = &copies[i];
				next = Min(next, TimestampTzPlusMilliseconds(now, s->lease_ms / 3));
			}
			else
				next = Min(next, due_at);
		}
	}

	for (int start = 0; start < ndue && ok; start += RENEW_BATCH)
		ok = renew_batch(due + start, Min(RENEW_BATCH, ndue - start));
	if (ok && norphans > 0)
		ok = release_orphans(orphans, norphans);
	note_redis(ok);
	if (!ok || norphans > 0)
		next = Min(next, TimestampTzPlusMilliseconds(now, RETRY_MS));

	rl_registry_set_worker_wake(next);
	now = GetCurrentTimestamp();
	sleep_ms = next > now ? (long) ((next - now + 999) / 1000) : 0;
	return sleep_ms;
}

static void
detach_worker(int code, Datum arg)
{
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
	pgstat_report_activity(STATE_RUNNING, "renewing redis locks");

	rl_registry_set_worker(MyLatch);
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
		}
		old = MemoryContextSwitchTo(cycle_context);
		sleep_ms = run_cycle();
		MemoryContextSwitchTo(old);
		MemoryContextReset(cycle_context);

		if (sleep_ms > 0)
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 sleep_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	rl_disconnect(&rl_cmd_conn);
	for (int i = 0; i < rl_redlock_size(); i++)
		rl_disconnect(rl_redlock_conn(i));

	/*
	 * Exit code 1 asks the postmaster for a restart: leases lapse while no
	 * watchdog runs, so one stopped by pg_terminate_backend must come back.
	 * At server shutdown nothing is restarted anyway.
	 */
	proc_exit(1);
}
