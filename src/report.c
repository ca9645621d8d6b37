/*
 * report.c
 *	  Failures of Redis calls as PostgreSQL errors: what each call records
 *	  on its connection (rl_fail), and the fixed message, SQLSTATE, detail
 *	  and hint it is raised with (rl_report, rl_reply_error).
 *
 * As postgres_fdw does, the primary message is fixed per kind of failure
 * or operation and names the server; the words of Redis, OpenSSL or the
 * system go to the detail.
 *
 * src/report.c
 */
#include "postgres.h"

#include <hiredis/hiredis.h>

#include "conn_int.h"
#include "redislock.h"

/* Where c connects, for messages: never includes secrets. */
const char *
rl_conn_desc(const RLConn *c)
{
	return c->pinned ? c->node.desc : rl_server.desc;
}

/* status.lua's refusal of a key that does not hold a lock */
bool
rl_is_not_lock(const RLReply *r)
{
	return r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOTLOCK", 7) == 0;
}

/*
 * Records why c failed: the failure selects the message and SQLSTATE (see
 * rl_report), fmt gives the detail. Always returns false for the caller to
 * pass on.
 */
bool
rl_fail(RLConn *c, RLFailure failure, const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(c->errdetail, sizeof(c->errdetail), fmt, ap);
	va_end(ap);
	strlcpy(c->errserver, rl_conn_desc(c), sizeof(c->errserver));
	c->failure = failure;
	c->errhint = NULL;
	return false;
}

/* rl_fail() naming another server than c's own (a cluster, the masters). */
bool
rl_fail_on(RLConn *c, RLFailure failure, const char *server, const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(c->errdetail, sizeof(c->errdetail), fmt, ap);
	va_end(ap);
	strlcpy(c->errserver, server, sizeof(c->errserver));
	c->failure = failure;
	c->errhint = NULL;
	return false;
}

/*
 * The primary message of each failure: fixed per kind, naming the server;
 * the reason goes to the detail.
 */
static const char *const failure_message[] = {
	[RLF_NONE] = "request to Redis server \"%s\" failed",
	[RLF_CONFIG] = "redislock is not configured",
	[RLF_CONNECT] = "could not connect to Redis server \"%s\"",
	[RLF_SETUP] = "could not connect to Redis server \"%s\"",
	[RLF_TIMEOUT] = "Redis server \"%s\" did not answer within redislock.command_timeout",
	[RLF_IO] = "lost connection to Redis server \"%s\"",
	[RLF_PROTOCOL] = "invalid reply from Redis server \"%s\"",
	[RLF_FAILOVER] = "Redis server \"%s\" is failing over",
	[RLF_CLUSTER] = "%s could not serve the request",
	[RLF_MAJORITY] = "too few of %s answered",
};

static int
failure_sqlstate(RLFailure failure)
{
	switch (failure)
	{
		case RLF_CONFIG:
			return ERRCODE_INVALID_PARAMETER_VALUE;
		case RLF_CONNECT:
		case RLF_SETUP:
			return ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION;
		case RLF_PROTOCOL:
			return ERRCODE_PROTOCOL_VIOLATION;
		default:
			return ERRCODE_CONNECTION_FAILURE;
	}
}

/* The failure of c as one line, "message: detail", to quote elsewhere. */
char *
rl_failure_text(const RLConn *c)
{
	char	   *msg = psprintf(failure_message[c->failure], c->errserver);

	return c->errdetail[0] != '\0' ? psprintf("%s: %s", msg, c->errdetail) : msg;
}

/* Raises (or logs) the failure recorded on c. */
void
rl_report(RLConn *c, int elevel)
{
	const char *hint = c->errhint;

	if (hint == NULL && c->failure == RLF_SETUP)
		hint = "Check redislock.url and redislock.password.";
	if (hint == NULL && c->failure == RLF_CONFIG)
		hint = "Set redislock.url, e.g. 'redis://127.0.0.1:6379', in postgresql.conf.";
	ereport(elevel,
			(errcode(failure_sqlstate(c->failure)),
			 errmsg(failure_message[c->failure], c->errserver),
			 c->errdetail[0] != '\0' ? errdetail_internal("%s", c->errdetail) : 0,
			 hint != NULL ? errhint("%s", hint) : 0));
}

/* The fixed message of a refused operation on lock name. */
int
rl_op_errmsg(RLOp op, const char *name)
{
	switch (op)
	{
		case RL_OP_ACQUIRE:
			return errmsg("could not acquire Redis lock \"%s\"", name);
		case RL_OP_RELEASE:
			return errmsg("could not release Redis lock \"%s\"", name);
		case RL_OP_FORCE_RELEASE:
			return errmsg("could not force-release Redis lock \"%s\"", name);
		case RL_OP_STATUS:
			return errmsg("could not read the status of Redis lock \"%s\"", name);
		case RL_OP_VERIFY:
			return errmsg("could not verify Redis lock \"%s\" before COMMIT", name);
		case RL_OP_SEMAPHORE:
			return errmsg("Redis request on semaphore \"%s\" failed", name);
		case RL_OP_LATCH:
			return errmsg("Redis request on count-down latch \"%s\" failed", name);
	}
	return errmsg("Redis request on lock \"%s\" failed", name);
}

/* Raises a Redis error reply as an ERROR naming the lock and the server. */
void
rl_reply_error(const RLReply *reply, RLOp op, const char *name)
{
	bool		wrongtype = strncmp(reply->str, "WRONGTYPE", 9) == 0;
	bool		oom = strncmp(reply->str, "OOM", 3) == 0;
	bool		auth = strncmp(reply->str, "NOAUTH", 6) == 0 ||
		strncmp(reply->str, "NOPERM", 6) == 0;

	if (strncmp(reply->str, "NOTA ", 5) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("Redis key \"%s\" is not a %s", name, reply->str + 5),
				 errdetail("The key holds data of another shape."),
				 errhint("Some other application, or another kind of redislock object, uses that name.")));
	if (rl_is_not_lock(reply))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("Redis key \"%s\" is not a lock", name),
				 errdetail("The key, its fair queue or its fencing counter holds data of another shape; redislock does not show it."),
				 errhint("Some other application uses that name.")));
	ereport(ERROR,
			(errcode(auth ? ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION :
					 wrongtype ? ERRCODE_WRONG_OBJECT_TYPE :
					 oom ? ERRCODE_OUT_OF_MEMORY :
					 ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
			 rl_op_errmsg(op, name),
			 errdetail_internal("Redis server \"%s\" answered: %s",
								rl_server_desc(), reply->str),
			 auth ? errhint("Check redislock.url and redislock.password.") :
			 wrongtype ?
			 errhint("The Redis key \"%s\" exists and is not a lock hash; some other application uses that name.", name) :
			 oom ? errhint("Redis reached maxmemory; free memory or raise maxmemory.") : 0));
}
