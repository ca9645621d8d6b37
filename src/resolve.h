/*
 * resolve.h
 *	  Host name lookups that wait on the process latch, not in libc.
 *
 * src/resolve.h
 */
#ifndef REDISLOCK_RESOLVE_H
#define REDISLOCK_RESOLVE_H

#include <netdb.h>

#include "datatype/timestamp.h"

typedef struct RLLookup RLLookup;

extern RLLookup *rl_resolve(const char *host, int port, TimestampTz until,
						  char *problem, size_t size);
extern const struct addrinfo *rl_lookup_addrs(const RLLookup *l);
extern void rl_lookup_free(RLLookup *l);

#endif							/* REDISLOCK_RESOLVE_H */
