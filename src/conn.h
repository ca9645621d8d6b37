/*
 * conn.h
 *	  Redis connections of one process: non-blocking I/O under our own
 *	  timeouts, pipelined commands, EVALSHA with NOSCRIPT reload, and the
 *	  subscriber connection that lock waits sleep on.
 *
 * src/conn.h
 */
#ifndef REDISLOCK_CONN_H
#define REDISLOCK_CONN_H

#include "datatype/timestamp.h"

#define RL_MAX_ARGS 16

/* A reply copied out of hiredis into palloc'd memory. */
typedef struct RLReply
{
	int			type;			/* REDIS_REPLY_* */
	long long	integer;
	char	   *str;			/* STRING, STATUS, ERROR: NUL-terminated */
	size_t		len;
	size_t		elements;
	struct RLReply **element;
} RLReply;

typedef struct RLCommand
{
	int			argc;
	const char *argv[RL_MAX_ARGS];
	size_t		argvlen[RL_MAX_ARGS];
} RLCommand;

/* A Lua script compiled in from lua/ (see tools/lua2c.sh). */
typedef struct RedisScript
{
	const char *name;
	const char *sha;
	const char *body;
} RedisScript;

/* One EVALSHA call; keys and args are NUL-terminated strings. */
typedef struct RLEval
{
	const RedisScript *script;
	int			nkeys;
	int			nargs;
	const char *keys[5];
	const char *args[6];
} RLEval;

/* Why the last call on a connection failed; selects SQLSTATE and message. */
typedef enum RLFailure
{
	RLF_NONE,
	RLF_CONFIG,					/* redislock.url unusable */
	RLF_CONNECT,				/* could not connect (incl. connect timeout) */
	RLF_SETUP,					/* AUTH/SELECT refused */
	RLF_TIMEOUT,				/* no reply within command_timeout */
	RLF_IO,						/* connection lost */
	RLF_PROTOCOL,				/* the peer does not speak RESP */
	RLF_FAILOVER				/* behind sentinels: not the master (now) */
} RLFailure;

typedef struct RLConn
{
	const char *role;			/* "command" or "subscriber", for logs */
	struct redisContext *ctx;
	struct WaitEventSet *wes;
	int			sock_pos;
	uint32		sock_events;
	uint64		generation;		/* rl_settings_generation when opened */
	bool		in_flight;		/* a request or subscription was left
								 * half-done: the stream is out of sync */
	bool		subscribed;
	long long	client_id;		/* Redis' CLIENT ID of this connection */
	long long	stale_client_id;	/* of a connection dropped with a
									 * request in flight, to kill in Redis */
	int			nchannels;
	const char *const *channels;
	RLFailure	failure;
	char		errmsg[256];
} RLConn;

/* The backend's command connection and its subscriber connection. */
extern RLConn rl_cmd_conn;
extern RLConn rl_sub_conn;

extern bool rl_exec(RLConn *c, int ncmds, const RLCommand *cmds,
					RLReply **replies);
extern bool rl_eval(RLConn *c, int n, const RLEval *evals, RLReply **replies);
extern void rl_disconnect(RLConn *c);
extern bool rl_healthy(RLConn *c);

extern void rl_report(RLConn *c, int elevel) pg_attribute_cold;
extern void rl_reply_error(const RLReply *reply, const char *what,
						   const char *name) pg_attribute_noreturn();
extern const char *rl_server_desc(void);
extern bool rl_check_url(const char *url, char **detail);
extern bool rl_check_sentinels(const char *list, char **detail);

extern bool rl_subscribe(RLConn *c, int nchannels, const char *const *channels);
extern int	rl_wait_message(RLConn *c, TimestampTz until);
extern void rl_unsubscribe(RLConn *c);

#endif							/* REDISLOCK_CONN_H */
