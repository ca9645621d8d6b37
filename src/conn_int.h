/*
 * conn_int.h
 *	  Shared by config.c, conn.c, conn_io.c, pipeline.c, pubsub.c and report.c, not
 *	  seen by the layers above (they use conn.h): parsed settings, steps of
 *	  a request.
 *
 * src/conn_int.h
 */
#ifndef REDISLOCK_CONN_INT_H
#define REDISLOCK_CONN_INT_H

#include <hiredis/hiredis.h>

#include "transport.h"

#include "conn.h"
#include "scripts.h"

/* Where to connect, parsed from redislock.url. */
typedef struct RLServer
{
	char		host[256];
	int			port;
	char		unix_path[256];
	char		user[128];
	char		password[256];
	int			db;
	bool		tls;			/* rediss:// */
	char		desc[300];		/* host:port or unix:path, never secrets */
} RLServer;

/* Where the replies to rl_build_setup()'s commands are. */
typedef struct RLSetup
{
	int			n;
	int			id_reply;
	int			role_reply;
} RLSetup;

#define RL_SETUP_MAX (5 + RL_NSCRIPTS)

/* Behind sentinels, a failed request is tried again after this pause. */
#define RETRY_PAUSE_MS 100

/*
 * The retries of one request (rl_worth_retrying): its deadline, and the
 * failure of the last whole try, reported if the deadline cuts the next
 * one short.
 */
typedef struct RLRetry
{
	TimestampTz until;
	bool		reused;			/* the first try ran on an open connection */
	RLFailure	failure;
	char		errserver[300];
	char		errdetail[1024];
	const char *errhint;
} RLRetry;

/* config.c: the settings as rl_load_server() last read them */
extern RLServer rl_server;
extern RLNode rl_sentinel_nodes[RL_MAX_NODES];
extern int	rl_nsentinels;
extern int	rl_sentinel_first;
extern bool rl_server_ok;
extern char rl_server_problem[256];
extern const char *rl_server_hint;

extern void rl_load_server(void);

/* report.c: why a call on c failed, for its caller to report */
extern bool rl_fail(RLConn *c, RLFailure failure, const char *fmt,...) pg_attribute_printf(3, 4);

/* conn_io.c: one connection's steps, for conn.c, pipeline.c and pubsub.c */
extern TimestampTz rl_after_ms(int ms);
extern long rl_ms_until(TimestampTz until);
extern bool rl_open_socket(RLConn *c, const RLNode *node, const char *unix_path,
						   TimestampTz until);
extern bool rl_connected(RLConn *c);
extern bool rl_stream_failed(RLConn *c);
extern const char *const rl_handshake_hint;
extern bool rl_invalid_reply(RLConn *c);
extern int	rl_build_setup(RLConn *c, RLCommand *cmds, char *db, char *stale,
						   RLSetup *st);
extern bool rl_check_setup(RLConn *c, const RLSetup *st, RLReply **replies);
extern bool rl_connect_socket(RLConn *c, const RLNode *node,
							  const char *unix_path, TimestampTz until);
extern bool rl_setup_session(RLConn *c, TimestampTz until);
extern bool rl_round_trip(RLConn *c, int ncmds, const RLCommand *cmds,
						  RLReply **replies, TimestampTz until);
extern bool rl_queue_commands(RLConn *c, int ncmds, const RLCommand *cmds);
extern bool rl_flush(RLConn *c, TimestampTz until);
extern bool rl_read_reply(RLConn *c, TimestampTz until, bool timeout_is_error,
						  redisReply **out);
extern RLReply *rl_copy_reply(const redisReply *r);

/* conn.c: opening where the settings say, and retrying */
extern bool rl_ensure_open(RLConn *c, TimestampTz until);
extern void rl_retry_init(RLRetry *r, RLConn *c, TimestampTz until);
extern bool rl_worth_retrying(RLConn *c, RLRetry *r);

#endif							/* REDISLOCK_CONN_INT_H */
