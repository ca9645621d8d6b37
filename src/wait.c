/*
 * wait.c
 *	  The wait engine every primitive uses: subscribe where releases are
 *	  announced, try, sleep until a message, the blocker's lease end, the
 *	  refresh of our place or the deadline; try again.
 *
 * src/wait.c
 */
#include "postgres.h"

#include <limits.h>

#include "common/pg_prng.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "compat.h"
#include "conn.h"
#include "deadlock.h"
#include "lock_int.h"
#include "redislock.h"
#include "registry.h"
#include "route.h"
#include "wakeup.h"

/*
 * The deadline of the acquisition call under way (rl_wait_call), else
 * DT_NOEND: a wait inside it ends then at the latest.
 */
static TimestampTz call_deadline = DT_NOEND;

/*
 * When a wait of req begun at start must end, if ever; *by_lock_timeout
 * says whether lock_timeout set it (wait => NULL).
 */
static TimestampTz
wait_deadline(const RLAcquireRequest *req, TimestampTz start,
			  bool *by_lock_timeout)
{
	*by_lock_timeout = false;
	if (req->wait_ms > 0 && req->wait_ms < RL_MAX_LEASE_MS)
		return TimestampTzPlusMilliseconds(start, req->wait_ms);
	if (req->wait_ms < 0 && LockTimeout > 0)
	{
		*by_lock_timeout = true;
		return TimestampTzPlusMilliseconds(start, LockTimeout);
	}
	return DT_NOEND;
}

/*
 * When to retry if no unlock message comes: when the holder's lease runs
 * out (only the queue head can use that in fair mode), at the latest when
 * our place (fair queue entry, waiting writer's mark) needs renewing, and
 * never after the deadline.
 */
static TimestampTz
next_retry(const Attempt *a, bool fair, bool has_place, TimestampTz deadline)
{
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz wake = deadline;

	if (a->pttl >= 0 && (!fair || a->head))
		wake = Min(wake, TimestampTzPlusMilliseconds(now, a->pttl));
	if (a->pttl == -2 && !fair)
		wake = now;
	if (has_place)
		wake = Min(wake, TimestampTzPlusMilliseconds(now, rl_fair_wait_timeout / 3));
	return wake;
}

/*
 * When our place (fair queue entry, waiting writer's mark) must be
 * renewed, after an attempt at then; never without one.
 */
static TimestampTz
next_place_refresh(const RLWait *w, TimestampTz then)
{
	return w->has_place ?
		TimestampTzPlusMilliseconds(then, rl_fair_wait_timeout / 3) : DT_NOEND;
}

/* Sleeps until then, or less if interrupted; for when no message can come. */
static void
sleep_until(TimestampTz until)
{
	long		ms = (long) Min((until - GetCurrentTimestamp()) / 1000, INT_MAX);

	if (ms > 0)
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 ms, RL_WAIT_EVENT);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
}

/*
 * How often a Redlock waiter that cannot hear enough masters (see
 * rl_redlock_subscribe) tries again, as no message may reach it.
 */
#define DEAF_RETRY_MS 1000

/* Where this wait hears of releases. */
typedef struct Hearing
{
	bool		board;			/* through the server's listener (wakeup.c) */
	bool		deaf;			/* Redlock, by itself: too few masters */
	TimestampTz ready_by;		/* until when to wait for the listener to
								 * subscribe; DT_NOBEGIN while it has */
} Hearing;

/*
 * Makes sure a message will wake us before we try: through the server's
 * listener if it has our channels subscribed, else on our own subscriber
 * connection, which we fall back to for good in this wait when the
 * listener cannot serve it (not running, no Redis connection, no room, not
 * subscribed within command_timeout). Sets *again when a message may have
 * been missed (the listener subscribed anew after a drop, or we did): the
 * attempt that must follow is the one that took the listener's mark.
 * Returns false, *again set, if until comes before the listener has
 * subscribed: the caller tries now (our place in a queue must not lapse
 * meanwhile) and again once it can hear.
 */
static bool
ensure_subscribed(const RLWait *w, TimestampTz until, Hearing *h, bool *again)
{
	if (h->board)
	{
		int			ready;

		if (h->ready_by == DT_NOBEGIN)
			h->ready_by = rl_command_deadline();
		ready = rl_wakeup_ready(Min(until, h->ready_by));
		if (ready > 0)
		{
			h->ready_by = DT_NOBEGIN;
			*again |= ready > 1;
			return true;
		}
		if (ready == 0 && GetCurrentTimestamp() < h->ready_by)
		{
			*again = true;
			return false;
		}
		rl_wakeup_end(false);
		h->board = false;
		*again = true;
	}
	if (rl_mode() == RL_MODE_REDLOCK)
		h->deaf = !rl_redlock_subscribe(w->channels[0]);
	else if (!rl_sub_conn.subscribed)
	{
		if (!rl_route_subscribe(rl_route_subscribable(w->nchannels, w->channels),
								w->channels))
			rl_report(&rl_sub_conn, ERROR);
		*again = true;
	}
	return true;
}

/*
 * Sleeps until a message, retry_at, or a deadlock check due at check_at.
 * Returns whether to try again: a message came, retry_at has come, or
 * (listener) a message may have been missed.
 */
static bool
sleep_for_message(const Hearing *h, const Attempt *a, TimestampTz retry_at,
				  TimestampTz check_at, TimestampTz deadline)
{
	TimestampTz until;

	/*
	 * Woken only because a deadlock check is due: nothing changed that
	 * another attempt could find, so go straight to the check.
	 */
	if (h->board)
		return rl_wakeup_sleep(Min(retry_at, check_at)) != 0 ||
			GetCurrentTimestamp() >= retry_at;
	if (rl_mode() != RL_MODE_REDLOCK)
		return rl_wait_message(&rl_sub_conn, Min(retry_at, check_at)) != 0 ||
			GetCurrentTimestamp() >= retry_at;
	until = next_retry(a, false, false, deadline);
	if (h->deaf)
		until = Min(until, TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   DEAF_RETRY_MS));
	if (rl_redlock_wait_message(until) < 0)
		sleep_until(until);
	return true;
}

/*
 * The pause before the next try of a polling waiter: a back-off from 25 ms
 * doubling up to max_ms, each jittered down by up to half, so that waiters
 * that started together do not try together (as redsync and redis-py
 * poll). The worst case between a release and the try that sees it is
 * max_ms.
 */
static int
poll_pause(int max_ms, int tries)
{
	int			base = Min(25 << Min(tries, 8), max_ms);

	return base - (int) (pg_prng_uint64(&pg_global_prng_state) % (base / 2 + 1));
}

/*
 * The wait engine: subscribe to the channels where releases are announced
 * first, then try, then sleep until a message, the blocker's lease end, the
 * refresh of our place or our deadline. Subscribing before retrying is what
 * rules out a lost wake-up. The server's listener subscribes for all its
 * waiting sessions (wakeup.c); without it each waiter subscribes on a
 * connection of its own. Returns whether w->attempt took it; on a timeout
 * or an ERROR, w->give_up (if any) first gives back our place.
 *
 * A primitive whose room can grow without a message (RLPrimitive
 * silent_growth) also tries again every w->recheck_ms, so that such a
 * change is seen within that bound rather than at the deadline.
 *
 * Where a release may be announced nowhere (the plain layout without
 * keyspace notifications), it also polls: see poll_pause.
 *
 * A wait blocked for redislock.deadlock_timeout checks for a deadlock
 * (deadlock.c), and again each deadlock_timeout while still blocked; until
 * then it costs one timestamp comparison per round.
 *
 * A wait may last for hours: each round (its attempt, its check, its sleep)
 * allocates in a context of its own, reset when the next round begins, so
 * that the caller's context does not grow with the length of the wait. What
 * outlives the round is copied out of it: the WAIT reply of the attempt
 * that took it (a->wait). Attempts keep nothing else allocated: the rest of
 * what they report is plain values, in *a or in arrays of the caller.
 */
bool
rl_wait(const RLWait *w, const RLAcquireRequest *req, Attempt *a)
{
	TimestampTz start = GetCurrentTimestamp();
	TimestampTz deadline;
	bool		by_lock_timeout;
	bool		redlock = rl_mode() == RL_MODE_REDLOCK;
	volatile bool acquired = false;
	TimestampTz check_at;
	MemoryContext caller = CurrentMemoryContext;
	MemoryContext round = AllocSetContextCreate(caller, "redislock wait round",
												ALLOCSET_DEFAULT_SIZES);

	deadline = Min(wait_deadline(req, start, &by_lock_timeout), call_deadline);

	check_at = rl_deadlock_wait_begin(&w->wait_for, start);
	PG_TRY();
	{
		Hearing		h = {rl_wakeup_begin(w->nchannels, w->channels, w->wake_one),
		false, DT_NOBEGIN};
		bool		again = true;
		int			tries = 0;
		TimestampTz retry_at = deadline;
		TimestampTz place_at = next_place_refresh(w, start);
		TimestampTz now;

		for (;;)
		{
			bool		heard;

			MemoryContextSwitchTo(caller);
			MemoryContextReset(round);
			MemoryContextSwitchTo(round);
			heard = ensure_subscribed(w, Min(deadline, place_at), &h, &again);
			if (again)
			{
				w->attempt(w->arg, a);
				if (a->acquired)
				{
					acquired = true;
					break;
				}
				retry_at = next_retry(a, w->fair, w->has_place, deadline);
				if (w->recheck_ms > 0)
					retry_at = Min(retry_at,
								   TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
															   w->recheck_ms));
				if (w->poll_ms > 0)
					retry_at = Min(retry_at,
								   TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
															   poll_pause(w->poll_ms, tries)));
				tries++;
				place_at = next_place_refresh(w, GetCurrentTimestamp());
			}
			now = GetCurrentTimestamp();
			if (now >= deadline)
				break;
			if (now >= check_at)
				check_at = rl_deadlock_check(&w->wait_for);
			if (heard)
				again = sleep_for_message(&h, a, retry_at, check_at, deadline);
		}
		MemoryContextSwitchTo(caller);
		/* taken: by this round's attempt, whose reply is still there */
		a->wait = acquired ? rl_reply_dup(a->wait) : NULL;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(caller);
		MemoryContextDelete(round);
		a->wait = NULL;
		rl_wakeup_end(false);
		rl_disconnect(&rl_sub_conn);
		rl_redlock_unsubscribe(true);
		if (w->give_up)
			w->give_up(w->arg);
		rl_deadlock_wait_end();
		PG_RE_THROW();
	}
	PG_END_TRY();
	MemoryContextDelete(round);

	rl_wakeup_end(acquired);
	rl_deadlock_wait_end();
	if (redlock)
		rl_redlock_unsubscribe(false);
	else
		rl_unsubscribe(&rl_sub_conn);
	rl_stat_add(RL_STAT_WAITS, 1);
	rl_stat_add(RL_STAT_WAIT_TIME_MS,
				(GetCurrentTimestamp() - start) / 1000);
	if (!acquired)
	{
		rl_stat_add(RL_STAT_TIMEOUTS, 1);
		if (w->give_up)
			w->give_up(w->arg);
	}
	if (!acquired && by_lock_timeout)
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg_internal("%s", w->timeout_msg),
				 errdetail("lock_timeout (%d ms) expired while waiting.", LockTimeout)));
	return acquired;
}

/*
 * Runs take(arg), an acquisition call of req that may wait (its first
 * attempt, its wait, what it does once taken), so that it ends at its wait
 * time whatever a server does: no request it sends may outlive the
 * deadline by more than RL_WAIT_OVERRUN_MS (the last attempt, a give-up).
 * A cluster slot in migration is waited out meanwhile, not an error. A
 * Redis failure at or past the deadline (a request still in flight, a
 * slot still migrating) ends the call as its wait would have ended: false,
 * or lock_timeout's ERROR. Whatever the cut-off request left undecided is
 * marked dirty by those who sent it, and settled by this session's next
 * call or by the worker, so nothing stays held that the call did not take.
 * Without a deadline (no wait, or an endless one) take() runs as it is,
 * each request bounded by command_timeout.
 */
bool
rl_wait_call(const RLAcquireRequest *req, const char *timeout_msg,
			 bool (*take) (void *arg), void *arg)
{
	bool		by_lock_timeout;
	TimestampTz deadline = wait_deadline(req, GetCurrentTimestamp(),
										 &by_lock_timeout);
	TimestampTz outer_deadline = call_deadline;
	TimestampTz limit;
	TimestampTz patience;
	MemoryContext caller = CurrentMemoryContext;
	int			holdoff = InterruptHoldoffCount;
	int			cancel_holdoff = QueryCancelHoldoffCount;
	volatile bool taken = false;
	ErrorData  *edata = NULL;

	if (req->wait_ms == 0 || deadline == DT_NOEND)
		return take(arg);
	deadline = Min(deadline, outer_deadline);
	limit = rl_limit_waits(TimestampTzPlusMilliseconds(deadline,
													   RL_WAIT_OVERRUN_MS));
	patience = rl_route_wait_out(rl_waits_limit());
	call_deadline = deadline;
	PG_TRY();
	{
		taken = take(arg);
	}
	PG_CATCH();
	{
		rl_unlimit_waits(limit);
		(void) rl_route_wait_out(patience);
		call_deadline = outer_deadline;
		MemoryContextSwitchTo(caller);
		edata = CopyErrorData();

		/* only a Redis failure the deadline caused; cancel, bad input go on */
		if (edata->elevel != ERROR || GetCurrentTimestamp() < deadline ||
			ERRCODE_TO_CATEGORY(edata->sqlerrcode) != ERRCODE_CONNECTION_EXCEPTION)
			PG_RE_THROW();
		FlushErrorState();
		InterruptHoldoffCount = holdoff;
		QueryCancelHoldoffCount = cancel_holdoff;
	}
	PG_END_TRY();
	rl_unlimit_waits(limit);
	(void) rl_route_wait_out(patience);
	call_deadline = outer_deadline;
	if (edata == NULL)
		return taken;
	rl_stat_add(RL_STAT_TIMEOUTS, 1);
	ereport(DEBUG1,
			(errmsg_internal("redislock wait ended at its deadline with a request unanswered"),
			 edata->detail != NULL ?
			 errdetail_internal("%s: %s", edata->message, edata->detail) :
			 errdetail_internal("%s", edata->message)));
	FreeErrorData(edata);
	if (by_lock_timeout)
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg_internal("%s", timeout_msg),
				 errdetail("lock_timeout (%d ms) expired while waiting.", LockTimeout)));
	return false;
}
