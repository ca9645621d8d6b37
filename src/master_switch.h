/*
 * master_switch.h
 *	  The board of Sentinel master switches (master_switch.c).
 *
 * src/master_switch.h
 */
#ifndef REDISLOCK_MASTER_SWITCH_H
#define REDISLOCK_MASTER_SWITCH_H

extern void rl_master_switch_request(void);
extern void rl_master_switch_startup(void);
extern uint64 rl_master_epoch(void);
extern void rl_master_switched(const char *master, const char *from_host,
							   int from_port);
extern bool rl_master_left(const char *host, int port);

#endif							/* REDISLOCK_MASTER_SWITCH_H */
