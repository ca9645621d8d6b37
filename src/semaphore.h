/*
 * semaphore.h
 *	  Semaphores, expiring permits (semaphore.c) and count-down latches
 *	  (latch.c): what the SQL entry points of sqlsync.c call.
 *
 * src/semaphore.h
 */
#ifndef REDISLOCK_SEMAPHORE_H
#define REDISLOCK_SEMAPHORE_H

#include "lock.h"

extern bool rl_semaphore_set(const char *name, bool expiring, const char *op,
							 int32 permits);
extern int64 rl_semaphore_available(const char *name, bool expiring);
extern bool rl_semaphore_acquire(const char *name, int32 permits,
								 RLScope scope, int64 wait_ms);
extern bool rl_semaphore_release(const char *name, int32 permits);
extern char *rl_permit_acquire(const char *name, RLScope scope,
							   int64 wait_ms, int64 lease_ms);
extern bool rl_permit_release(const char *name, const char *id);

extern bool rl_latch_try_set(const char *name, int64 count);
extern int64 rl_latch_count_down(const char *name);
extern int64 rl_latch_count(const char *name);
extern bool rl_latch_await(const char *name, int64 wait_ms);

#endif							/* REDISLOCK_SEMAPHORE_H */
