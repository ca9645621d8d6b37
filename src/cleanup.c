/*
 * cleanup.c
 *	  The frame every cleanup step runs in (see cleanup.h). Its memory
 *	  context is made when the library is loaded, not on the first use of
 *	  some primitive: a cleanup path can be the first thing a session runs
 *	  (a wait given up in the session's first call, say).
 *
 * src/cleanup.c
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "cleanup.h"
#include "conn.h"

MemoryContext rl_cleanup_context = NULL;

/* At load (_PG_init), before any SQL function or callback can run. */
void
rl_cleanup_init(void)
{
	Assert(rl_cleanup_context == NULL);
	rl_cleanup_context = AllocSetContextCreate(TopMemoryContext,
											   "redislock cleanup",
											   ALLOCSET_SMALL_SIZES);
}

/*
 * Runs step(arg) from a path that gives up or unwinds an ERROR: Redis gets
 * CLEANUP_MS at most, interrupts wait, what it allocates goes with the
 * cleanup context, and a failure is the step's to log. Returns its result.
 */
bool
rl_quietly(bool (*step) (void *arg), void *arg)
{
	MemoryContext old;
	volatile bool done = false;
	TimestampTz limit;

	Assert(rl_cleanup_context != NULL);
	old = MemoryContextSwitchTo(rl_cleanup_context);
	HOLD_INTERRUPTS();
	limit = rl_limit_waits(TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   CLEANUP_MS));
	PG_TRY();
	{
		done = step(arg);
	}
	PG_FINALLY();
	{
		rl_unlimit_waits(limit);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(old);
	MemoryContextReset(rl_cleanup_context);
	RESUME_INTERRUPTS();
	return done;
}
