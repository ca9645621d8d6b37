/*
 * worker.h
 *	  redislock's background workers: the watchdog (worker.c) and the
 *	  listener (listener.c).
 *
 * src/worker.h
 */
#ifndef REDISLOCK_WORKER_H
#define REDISLOCK_WORKER_H

extern void rl_workers_register(void);

#endif							/* REDISLOCK_WORKER_H */
