/*
 * channel.h
 *	  The kinds of pub/sub channel a waiter hears, and how each is routed.
 *
 * src/channel.h
 */
#ifndef REDISLOCK_CHANNEL_H
#define REDISLOCK_CHANNEL_H

extern void rl_channel_route(const char *channel, bool own_sharded,
							 const char **key, bool *sharded);

#endif							/* REDISLOCK_CHANNEL_H */
