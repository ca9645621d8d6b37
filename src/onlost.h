/*
 * onlost.h
 *	  redislock.on_lock_lost: what is done to a session whose hold Redis no
 *	  longer has, the moment that is known.
 *
 * src/onlost.h
 */
#ifndef REDISLOCK_ONLOST_H
#define REDISLOCK_ONLOST_H

#include "registry.h"

typedef enum RLOnLost
{
	RL_ON_LOST_WARN,			/* a WARNING, a lost row, a refused COMMIT */
	RL_ON_LOST_CANCEL,			/* and the running statement is cancelled */
	RL_ON_LOST_TERMINATE		/* and the session is terminated */
} RLOnLost;

extern int	rl_on_lock_lost;

extern void rl_onlost_request(void);
extern void rl_onlost_startup(void);
extern void rl_onlost_init(void);
extern void rl_onlost_publish(void);
extern RLOnLost rl_onlost_act(const RLSlot *s, const char *noun);
extern RLOnLost rl_onlost_act_self(const char *noun, const char *name);

#endif							/* REDISLOCK_ONLOST_H */
