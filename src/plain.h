/*
 * plain.h
 *	  The plain layout (plain.c): the setting that chooses a layout, and
 *	  how a waiter for a plain lock is woken.
 *
 * src/plain.h
 */
#ifndef REDISLOCK_PLAIN_H
#define REDISLOCK_PLAIN_H

#include "utils/guc.h"

typedef enum RLLayout
{
	RL_LAYOUT_REDISSON,
	RL_LAYOUT_PLAIN
} RLLayout;

/* The longest pause of a waiter that polls (no keyspace notifications). */
#define RL_PLAIN_POLL_MAX_MS 200

/* Spring Integration registries redislock.spring_registries may name. */
#define RL_PLAIN_MAX_REGISTRIES 8
#define RL_PLAIN_REGISTRY_MAX 64	/* bytes of one registry key */

extern int	rl_layout;
extern char *rl_spring_registries;

extern bool rl_check_spring_registries(char **newval, void **extra,
									   GucSource source);
extern int	rl_plain_wake_channels(const char *name, const char ***out,
								   int *poll_ms);
extern int	rl_plain_peer_channels(const char *name, const char **out, int max);
extern char *rl_plain_channel(const char *name);

#endif							/* REDISLOCK_PLAIN_H */
