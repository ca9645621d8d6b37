/*
 * worker.h
 *	  The "redislock watchdog" background worker.
 *
 * src/worker.h
 */
#ifndef REDISLOCK_WORKER_H
#define REDISLOCK_WORKER_H

extern void rl_worker_register(void);

#endif							/* REDISLOCK_WORKER_H */
