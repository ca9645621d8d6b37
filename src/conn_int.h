/*
 * conn_int.h
 *	  Shared by config.c and conn.c, not seen by the layers above (they
 *	  use conn.h): the parsed settings.
 *
 * src/conn_int.h
 */
#ifndef REDISLOCK_CONN_INT_H
#define REDISLOCK_CONN_INT_H

#include <hiredis/hiredis.h>

#include "conn.h"

/* Where to connect, parsed from redislock.url. */
typedef struct RLServer
{
	char		host[256];
	int			port;
	char		unix_path[256];
	char		user[128];
	char		password[256];
	int			db;
	char		desc[300];		/* host:port or unix:path, never secrets */
} RLServer;

/* config.c: the settings as rl_load_server() last read them */
extern RLServer rl_server;
extern RLNode rl_sentinel_nodes[RL_MAX_NODES];
extern int	rl_nsentinels;
extern int	rl_sentinel_first;
extern bool rl_server_ok;
extern char rl_server_problem[256];

extern void rl_load_server(void);

#endif							/* REDISLOCK_CONN_INT_H */
