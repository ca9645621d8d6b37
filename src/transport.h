/*
 * transport.h
 *	  TCP sockets to Redis: host names resolved without blocking the
 *	  process, connects started in non-blocking mode.
 *
 * src/transport.h
 */
#ifndef REDISLOCK_TRANSPORT_H
#define REDISLOCK_TRANSPORT_H

#include "datatype/timestamp.h"

extern int	rl_tcp_connect(const char *host, int port, TimestampTz until,
						   char *problem, size_t size);

#endif							/* REDISLOCK_TRANSPORT_H */
