/*
 * wakeup.h
 *	  The shared board of waiting sessions and the channels they wait on,
 *	  through which one listener per server wakes them (listener.c).
 *
 * src/wakeup.h
 */
#ifndef REDISLOCK_WAKEUP_H
#define REDISLOCK_WAKEUP_H

#include "datatype/timestamp.h"
#include "storage/latch.h"

#include "redislock.h"

/* Longest channel name: Redisson's prefixes, a name and a fair owner id. */
#define RL_CHANNEL_MAX (RL_NAME_MAX + RL_OWNER_MAX + 64)

/* What the listener knows of a channel (see rl_wakeup_scan). */
typedef enum RLChannelState
{
	RL_CHANNEL_PENDING,			/* being subscribed */
	RL_CHANNEL_READY,			/* subscribed: messages reach the board */
	RL_CHANNEL_FAILED			/* cannot be subscribed now */
} RLChannelState;

extern void rl_wakeup_request(void);
extern void rl_wakeup_startup(void);

/* sessions (wait.c) */
extern bool rl_wakeup_begin(int n, const char *const *channels, bool wake_one);
extern int	rl_wakeup_ready(TimestampTz until);
extern int	rl_wakeup_sleep(TimestampTz until);
extern void rl_wakeup_end(bool acquired);

/* the listener (listener.c) */
extern void rl_wakeup_attach(Latch *latch);
extern void rl_wakeup_detach(void);
extern void rl_wakeup_scan(RLChannelState (*state) (const char *channel, void *arg),
						   void *arg);
extern void rl_wakeup_message(const char *channel, bool wake_one);

#endif							/* REDISLOCK_WAKEUP_H */
