/*
 * transport.h
 *	  TCP sockets to Redis: host names resolved without blocking the
 *	  process, connects started in non-blocking mode; socket options.
 *
 * src/transport.h
 */
#ifndef REDISLOCK_TRANSPORT_H
#define REDISLOCK_TRANSPORT_H

#include "datatype/timestamp.h"

extern int	rl_tcp_connect(const char *host, int port, TimestampTz until,
						   char *problem, size_t size);
extern int	rl_socket_error(int fd);
extern void rl_socket_reset(int fd);

#endif							/* REDISLOCK_TRANSPORT_H */
