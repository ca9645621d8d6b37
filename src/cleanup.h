/*
 * cleanup.h
 *	  What paths that give up or unwind (after COMMIT, at abort, at exit, at
 *	  the end of a wait) run under: a memory context of their own and a
 *	  bound on how long Redis may take, both ready before any such path can
 *	  run. The bottom of the engine: it calls only the connection layer.
 *
 * src/cleanup.h
 */
#ifndef REDISLOCK_CLEANUP_H
#define REDISLOCK_CLEANUP_H

#include "utils/palloc.h"

/*
 * The longest a cleanup path (after COMMIT, at abort, at exit) may wait for
 * Redis in all, whatever redislock.connect_timeout and command_timeout say:
 * it runs with interrupts held, so it must not make a backend unkillable.
 * What it cannot finish is left to the next call or to the worker.
 */
#define CLEANUP_MS 2000			/* per cleanup step */

/* Reset after every cleanup step; made when the library is loaded. */
extern MemoryContext rl_cleanup_context;

extern void rl_cleanup_init(void);
extern bool rl_quietly(bool (*step) (void *arg), void *arg);

#endif							/* REDISLOCK_CLEANUP_H */
