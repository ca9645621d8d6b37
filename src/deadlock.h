/*
 * deadlock.h
 *	  Deadlock detection across servers: what the wait engine tells it, and
 *	  what the views ask of it.
 *
 * src/deadlock.h
 */
#ifndef REDISLOCK_DEADLOCK_H
#define REDISLOCK_DEADLOCK_H

#include "datatype/timestamp.h"

#include "redislock.h"
#include "registry.h"

/*
 * What one wait is for: n names of one kind (a multi-lock waits for all of
 * its names at once). A primitive joins the wait-for graph by handing this
 * to rl_wait() (RLWait.wait_for) and by teaching lua/wait_holders.lua who
 * holds its kind; semaphores are meant to join that way.
 */
typedef struct RLWaitFor
{
	RLKind		kind;
	bool		fair;			/* waits in a fair queue */
	int			n;
	const char *const *names;
} RLWaitFor;

/* redislock.deadlock_timeout: -1 = the server's deadlock_timeout, 0 = off */
extern int	rl_deadlock_timeout;

extern TimestampTz rl_deadlock_wait_begin(const RLWaitFor *wf, TimestampTz start);
extern TimestampTz rl_deadlock_check(const RLWaitFor *wf);
extern void rl_deadlock_wait_end(void);
extern void rl_deadlock_settle(void);

extern bool rl_waits_holders(int n, const RLWaitCopy *waits, char ***holders,
							 int *nholders);

#endif							/* REDISLOCK_DEADLOCK_H */
