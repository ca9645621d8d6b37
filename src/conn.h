/*
 * conn.h
 *	  Redis connections of one process: non-blocking I/O under our own
 *	  timeouts, pipelined commands, EVALSHA with NOSCRIPT reload, and the
 *	  subscriber connection that lock waits sleep on.
 *
 * The interface of config.c (settings), conn.c (one connection, requests),
 * pipeline.c (several connections at once) and pubsub.c (subscriptions) for
 * the layers above; what only these files share is in conn_int.h.
 *
 * src/conn.h
 */
#ifndef REDISLOCK_CONN_H
#define REDISLOCK_CONN_H

#include "datatype/timestamp.h"

#include "compat.h"
#include "redislock.h"

/*
 * The most keys and arguments of one script call: a multi-lock has two keys
 * (the lock and its fencing counter) and one argument per name.
 */
#define RL_EVAL_MAX_KEYS (2 * RL_MULTI_MAX)
#define RL_EVAL_MAX_ARGS (4 + RL_MULTI_MAX)
#define RL_MAX_ARGS (3 + RL_EVAL_MAX_KEYS + RL_EVAL_MAX_ARGS)

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
	const char *keys[RL_EVAL_MAX_KEYS];
	const char *args[RL_EVAL_MAX_ARGS];
} RLEval;

/* A host:port: a sentinel, a cluster node or a Redlock master. */
typedef struct RLNode
{
	char		host[256];
	int			port;
	char		desc[272];		/* "host:port", for messages */
} RLNode;

#define RL_MAX_NODES 16

/* How the Redis deployment is laid out (which settings are set). */
typedef enum RLMode
{
	RL_MODE_SINGLE,
	RL_MODE_SENTINEL,
	RL_MODE_CLUSTER,
	RL_MODE_REDLOCK
} RLMode;

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
	RLF_FAILOVER,				/* behind sentinels: not the master (now) */
	RLF_CLUSTER,				/* cluster down, slot unserved, redirect loop */
	RLF_MIGRATING,				/* cluster: a slot in migration (TRYAGAIN) */
	RLF_MAJORITY,				/* Redlock: too few masters answered */
	RLF_DENIED					/* the Redis user's ACL refused a command */
} RLFailure;

typedef struct RLConn
{
	const char *role;			/* "command" or "subscriber", for logs */
	bool		pinned;			/* connects to node, not to redislock.url */
	bool		preload_scripts;	/* SCRIPT LOAD all of them when opened */
	bool		to_sentinel;	/* speaks to a sentinel: redislock.sentinel_tls */
	RLNode		node;
	char		host[256];		/* connected to: the name to verify in TLS */
	struct RLSocket *sock;
	struct WaitEventSet *wes;
	int			sock_pos;
	uint32		sock_events;
	uint64		generation;		/* rl_settings_generation when opened */
	uint64		master_epoch;	/* behind sentinels: the switches heard
								 * before it was opened (see conn.c) */
	bool		ready;			/* the connection setup was answered */
	bool		in_flight;		/* a request or subscription was left
								 * half-done: the stream is out of sync */
	bool		maybe_delivered;	/* the last request may have reached the
									 * server (it failed after connecting) */
	int			owed;			/* replies to requests given up on while a
								 * majority answered: skipped when they come */
	bool		subscribed;
	long long	client_id;		/* Redis' CLIENT ID of this connection */
	long long	stale_client_id;	/* of a connection dropped with a
									 * request in flight, to kill in Redis */
	bool		sharded;		/* subscribed with SSUBSCRIBE */
	int			nchannels;
	const char *const *channels;
	/* why the last call failed: see rl_report() for the messages */
	RLFailure	failure;
	char		errserver[300]; /* the server it failed on, for errmsg */
	char		errdetail[1024];	/* the reason, from Redis, OpenSSL or us */
	const char *errhint;		/* advice for the user, or NULL */
} RLConn;

/* One pipeline of rl_exec_parallel(): cmds sent on conn. */
typedef struct RLBatch
{
	RLConn	   *conn;
	int			ncmds;
	const RLCommand *cmds;
	RLReply   **replies;		/* ncmds of them, filled when ok */
	bool		ok;
} RLBatch;

/* conn.c */

/* The backend's command connection and its subscriber connection. */
extern RLConn rl_cmd_conn;
extern RLConn rl_sub_conn;

extern bool rl_exec(RLConn *c, int ncmds, const RLCommand *cmds,
					RLReply **replies);
extern bool rl_eval(RLConn *c, int n, const RLEval *evals, RLReply **replies);
extern TimestampTz rl_command_deadline(void);
extern TimestampTz rl_limit_waits(TimestampTz until);
extern void rl_unlimit_waits(TimestampTz previous);
extern TimestampTz rl_waits_limit(void);
extern void rl_build_eval(RLCommand *cmd, const RLEval *e, bool body);
extern RLReply *rl_reply_dup(const RLReply *r);
extern bool rl_is_noscript(const RLReply *r);
extern void rl_set_arg(RLCommand *cmd, const char *arg, size_t len);
extern void rl_disconnect(RLConn *c);
extern bool rl_healthy(RLConn *c);

/* What was asked of Redis, for the message of a refusal. */
typedef enum RLOp
{
	RL_OP_ACQUIRE,
	RL_OP_RELEASE,
	RL_OP_FORCE_RELEASE,
	RL_OP_STATUS,
	RL_OP_VERIFY,
	RL_OP_SEMAPHORE,
	RL_OP_LATCH
} RLOp;

/* report.c */
extern const char *rl_conn_desc(const RLConn *c);
extern bool rl_is_not_lock(const RLReply *r);
extern bool rl_is_refusal(const char *err);
extern const char *rl_refusal_hint(const char *err);
extern void rl_report_refusal(const char *err, const char *object);
extern bool rl_fail_on(RLConn *c, RLFailure failure, const char *server,
					   const char *fmt,...) pg_attribute_printf(4, 5);
extern bool rl_fail_config(RLConn *c);
extern bool rl_redis_reached;
extern char *rl_failure_text(const RLConn *c);
extern void rl_report(RLConn *c, int elevel) pg_attribute_cold;
extern int	rl_keyspace_db(void);
extern int	rl_op_errmsg(RLOp op, const char *name);
pg_noreturn extern void rl_reply_error(const RLReply *reply, RLOp op,
									   const char *name);

/* config.c */
extern bool rl_config(RLMode *mode, const RLNode **nodes, int *nnodes,
					  const char **problem);
extern const char *rl_server_desc(void);
extern uint32 rl_server_identity(void);
extern bool rl_check_url(const char *url, char **detail);
extern bool rl_check_nodes(const char *list, char **detail);

/* pipeline.c */
extern int	rl_exec_parallel(int nbatches, RLBatch *batches, TimestampTz until,
							 int enough);

/* pubsub.c */
extern bool rl_subscribe(RLConn *c, int nchannels, const char *const *channels);
extern int	rl_wait_message(RLConn *c, TimestampTz until);
extern int	rl_wait_message_any(int nconns, RLConn **conns, TimestampTz until);
extern void rl_unsubscribe(RLConn *c);

#endif							/* REDISLOCK_CONN_H */
