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
#include "lib/stringinfo.h"
#include "redislock.h"
#include "scripts.h"

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

/*
 * c cannot be used because of the settings: rl_server_problem says what is
 * wrong with them (the message), rl_server_hint what to do.
 */
bool
rl_fail_config(RLConn *c)
{
	rl_fail(c, RLF_CONFIG, "%s", rl_server_problem);
	c->errhint = rl_server_hint;
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
 * the reason goes to the detail. A configuration problem is the message
 * itself (see failure_headline).
 */
static const char *const failure_message[] = {
	[RLF_NONE] = "request to Redis server \"%s\" failed",
	[RLF_CONFIG] = "%s",
	[RLF_CONNECT] = "could not connect to Redis server \"%s\"",
	[RLF_SETUP] = "could not connect to Redis server \"%s\"",
	[RLF_TIMEOUT] = "Redis server \"%s\" did not answer within redislock.command_timeout",
	[RLF_IO] = "lost connection to Redis server \"%s\"",
	[RLF_PROTOCOL] = "invalid reply from Redis server \"%s\"",
	[RLF_FAILOVER] = "Redis server \"%s\" is failing over",
	[RLF_CLUSTER] = "%s could not serve the request",
	[RLF_MIGRATING] = "%s could not serve the request",
	[RLF_MAJORITY] = "too few of %s answered",
	[RLF_DENIED] = "Redis server \"%s\" refused a command redislock needs",
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
		case RLF_DENIED:
			return ERRCODE_INSUFFICIENT_PRIVILEGE;
		default:
			return ERRCODE_CONNECTION_FAILURE;
	}
}

/*
 * What the message of c's failure says, and whether errdetail is still to
 * be told: a configuration problem (a password file others may read, two
 * modes set) is itself the message, for it names what is wrong.
 */
static char *
failure_headline(const RLConn *c, bool *detail_left)
{
	*detail_left = c->failure != RLF_CONFIG && c->errdetail[0] != '\0';
	return psprintf(failure_message[c->failure],
					c->failure == RLF_CONFIG ? c->errdetail : c->errserver);
}

/* The failure of c as one line, "message: detail", to quote elsewhere. */
char *
rl_failure_text(const RLConn *c)
{
	bool		detail_left;
	char	   *msg = failure_headline(c, &detail_left);

	return detail_left ? psprintf("%s: %s", msg, c->errdetail) : msg;
}

/* Raises (or logs) the failure recorded on c. */
void
rl_report(RLConn *c, int elevel)
{
	const char *hint = c->errhint;
	bool		detail_left;
	char	   *msg = failure_headline(c, &detail_left);

	if (hint == NULL && c->failure == RLF_SETUP)
		hint = "Check redislock.url and redislock.password.";
	ereport(elevel,
			(errcode(failure_sqlstate(c->failure)),
			 errmsg_internal("%s", msg),
			 detail_left ? errdetail_internal("%s", c->errdetail) : 0,
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

/*
 * What a refusal of a restricted or managed Redis server means for
 * redislock, whatever the operation: each kind names what to change.
 */
typedef enum RLRefusal
{
	RLR_NONE,
	RLR_NO_SCRIPTING,			/* EVAL, EVALSHA or SCRIPT unknown: renamed, Lua off */
	RLR_SCRIPTING_DENIED,		/* the ACL lacks them */
	RLR_UNKNOWN_COMMAND,		/* another command renamed away */
	RLR_COMMAND_DENIED,			/* the ACL lacks another command */
	RLR_KEY_DENIED,				/* the ACL lacks the key pattern */
	RLR_CHANNEL_DENIED,			/* the ACL lacks the channel pattern */
	RLR_CROSSSLOT				/* a cluster endpoint used as one server */
} RLRefusal;

static bool
is_scripting_command(const char *command)
{
	return strcmp(command, "eval") == 0 || strcmp(command, "evalsha") == 0 ||
		strncmp(command, "script", 6) == 0;
}

/*
 * Classifies error reply err; command gets the command it quotes
 * ("unknown command 'x'", "no permissions to run the 'x' command"), lower
 * case, or "". Redis 7.0 words a refusal inside a script "The user executing
 * the script can't ..."; 7.2 and Valkey say NOPERM there too.
 */
static RLRefusal
classify_refusal(const char *err, char *command, size_t size)
{
	const char *q = strstr(err, "command '");
	/* Redis 7.0 inside a script; Valkey 9 and Redis 7.2 name the command */
	bool		denied = strncmp(err, "NOPERM", 6) == 0 ||
		strstr(err, "The user executing the script can't") != NULL ||
		strstr(err, "ACL failure in script") != NULL;
	size_t		n = 0;

	command[0] = '\0';
	if (q == NULL)
		q = strstr(err, "run the '");
	if (q != NULL)
	{
		for (q = strchr(q, '\'') + 1; *q != '\0' && *q != '\'' && n + 1 < size; q++)
			command[n++] = pg_ascii_tolower((unsigned char) *q);
		command[n] = '\0';
	}
	if (strncmp(err, "CROSSSLOT", 9) == 0)
		return RLR_CROSSSLOT;
	if (denied)
	{
		/* a named command first: "hkeys" is no key pattern */
		if (command[0] == '\0' && strstr(err, "channel") != NULL)
			return RLR_CHANNEL_DENIED;
		if (command[0] == '\0' && strstr(err, "key") != NULL)
			return RLR_KEY_DENIED;
		return is_scripting_command(command) ? RLR_SCRIPTING_DENIED :
			RLR_COMMAND_DENIED;
	}
	/* Valkey 9 without its Lua engine, to SCRIPT LOAD and EVAL */
	if (strstr(err, "Could not find scripting engine") != NULL)
		return RLR_NO_SCRIPTING;
	if (strncmp(err, "ERR unknown command", 19) == 0 ||
		strncmp(err, "ERR unknown subcommand", 22) == 0)
		return is_scripting_command(command) ? RLR_NO_SCRIPTING :
			RLR_UNKNOWN_COMMAND;
	return RLR_NONE;
}

/*
 * The commands of the script whose sha err quotes ("... script: <sha>, on
 * @user_script:1", Redis 7.0's refusal inside a script, which does not say
 * which command), as "+a +b ...", or NULL: what the user must be granted;
 * *name gets the script's name.
 */
static char *
script_commands(const char *err, const char **name)
{
	const char *at = strstr(err, "script: ");
	const RedisScript *script = NULL;
	StringInfoData buf;

	if (at == NULL)
		return NULL;
	at += strlen("script: ");
	for (int i = 0; i < RL_NSCRIPTS && script == NULL; i++)
		if (strncmp(at, rl_scripts[i]->sha, strlen(rl_scripts[i]->sha)) == 0)
			script = rl_scripts[i];
	if (script == NULL)
		return NULL;
	*name = script->name;
	initStringInfo(&buf);
	appendStringInfoChar(&buf, ' ');
	for (const char *p = script->body; (p = strstr(p, "redis.call(")) != NULL;)
	{
		const char *cmd = p + strlen("redis.call(");
		const char *end;
		char	   *word;

		p = cmd;
		if (*cmd != '\'')
		{
			/* the publish command comes as an argument */
			if (strstr(buf.data, " +publish ") == NULL)
				appendStringInfoString(&buf, "+publish +spublish ");
			continue;
		}
		cmd++;
		end = strchr(cmd, '\'');
		if (end == NULL)
			break;
		word = psprintf(" +%.*s ", (int) (end - cmd), cmd);
		if (strstr(buf.data, word) == NULL)
			appendStringInfoString(&buf, word + 1);
	}
	if (buf.len <= 1)
		return NULL;
	/* without the spaces around the list */
	buf.data[--buf.len] = '\0';
	return buf.data + 1;
}

/* The Redis user redislock connects as, for messages. */
static const char *
redis_user(void)
{
	return rl_server.user[0] != '\0' ? rl_server.user : "default";
}

/*
 * Raises err as the refusal it is, if it is one (else returns): object
 * names what was refused, e.g. "Redis lock \"x\"".
 */
void
rl_report_refusal(const char *err, const char *object)
{
	char		command[64];
	char	   *commands;
	const char *script;

	switch (classify_refusal(err, command, sizeof(command)))
	{
		case RLR_NONE:
			return;
		case RLR_NO_SCRIPTING:
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("redislock requires Lua scripting, which Redis server \"%s\" does not offer",
							rl_server_desc()),
					 errdetail_internal("Request on %s; the server answered: %s", object, err),
					 errhint("Make EVAL, EVALSHA and SCRIPT available on the server: not renamed away (rename-command) and, on Valkey, with Lua enabled.")));
			break;
		case RLR_SCRIPTING_DENIED:
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("redislock requires Lua scripting, which Redis user \"%s\" may not use",
							redis_user()),
					 errdetail_internal("Request on %s; Redis server \"%s\" answered: %s",
										object, rl_server_desc(), err),
					 errhint("Grant the user the scripting commands: ACL SETUSER %s +evalsha +eval +script|load.",
							 redis_user())));
			break;
		case RLR_UNKNOWN_COMMAND:
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("Redis server \"%s\" does not offer the command \"%s\", which redislock needs",
							rl_server_desc(), command),
					 errdetail_internal("Request on %s; the server answered: %s", object, err),
					 errhint("Do not rename or disable that command on the server.")));
			break;
		case RLR_COMMAND_DENIED:
			if (command[0] == '\0' &&
				(commands = script_commands(err, &script)) != NULL)
				ereport(ERROR,
						(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
						 errmsg("Redis user \"%s\" may not run one of the commands of redislock's script \"%s\"",
								redis_user(), script),
						 errdetail_internal("Request on %s; Redis server \"%s\" answered: %s",
											object, rl_server_desc(), err),
						 errhint("Grant them: ACL SETUSER %s %s.", redis_user(), commands)));
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 command[0] != '\0' ?
					 errmsg("Redis user \"%s\" may not run the command \"%s\", which redislock needs",
							redis_user(), command) :
					 errmsg("Redis user \"%s\" may not run a command that redislock's scripts need",
							redis_user()),
					 errdetail_internal("Request on %s; Redis server \"%s\" answered: %s",
										object, rl_server_desc(), err),
					 command[0] != '\0' ?
					 errhint("Grant it: ACL SETUSER %s +%s.", redis_user(), command) :
					 errhint("Grant the user every command of redislock's Redis ACL (see the documentation on least privilege).")));
			break;
		case RLR_KEY_DENIED:
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("Redis user \"%s\" may not access the keys of %s",
							redis_user(), object),
					 errdetail_internal("Redis server \"%s\" answered: %s", rl_server_desc(), err),
					 errhint("Grant the user key patterns that cover the name and its companion keys (redisson_*, redislock_* and {name}...; see the documentation on least privilege).")));
			break;
		case RLR_CHANNEL_DENIED:
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("Redis user \"%s\" may not use the pub/sub channels of %s",
							redis_user(), object),
					 errdetail_internal("Redis server \"%s\" answered: %s", rl_server_desc(), err),
					 errhint("Grant the user the channel patterns &redisson_lock__channel* &redisson_sc:* &redisson_countdownlatch__channel* (see the documentation on least privilege).")));
			break;
		case RLR_CROSSSLOT:
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("Redis server \"%s\" refused keys of different cluster slots in one request",
							rl_server_desc()),
					 errdetail_internal("Request on %s; the server answered: %s", object, err),
					 errhint("The server is a Redis Cluster endpoint: set redislock.cluster_nodes to it instead of redislock.url, or give the names one hash tag, e.g. '{batch}:a' and '{batch}:b'.")));
			break;
	}
}

/* Is err a refusal of what redislock needs (see RLRefusal)? */
bool
rl_is_refusal(const char *err)
{
	char		command[64];

	return classify_refusal(err, command, sizeof(command)) != RLR_NONE;
}

/*
 * The hint for a refusal, or NULL: for an ERROR raised elsewhere
 * (subscribing, connection setup) and for the WARNING of a cleanup step,
 * which must not raise one. Valid until the next call.
 */
const char *
rl_refusal_hint(const char *err)
{
	static char hint[1024];
	char		command[64];
	char	   *commands;
	const char *script;

	switch (classify_refusal(err, command, sizeof(command)))
	{
		case RLR_CHANNEL_DENIED:
			return "Grant the Redis user the channel patterns &redisson_lock__channel* &redisson_sc:* &redisson_countdownlatch__channel* (see the documentation on least privilege).";
		case RLR_COMMAND_DENIED:
			if (command[0] != '\0')
			{
				snprintf(hint, sizeof(hint), "Grant it: ACL SETUSER %s +%s.",
						 redis_user(), command);
				return hint;
			}
			if ((commands = script_commands(err, &script)) != NULL)
			{
				snprintf(hint, sizeof(hint), "Grant them: ACL SETUSER %s %s.",
						 redis_user(), commands);
				return hint;
			}
			return "Grant the Redis user every command of redislock's Redis ACL (see the documentation on least privilege).";
		case RLR_KEY_DENIED:
			return "Grant the Redis user the key patterns of redislock's Redis ACL (see the documentation on least privilege).";
		case RLR_UNKNOWN_COMMAND:
			return "Do not rename or disable the commands redislock needs on the server.";
		default:
			return NULL;
	}
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
	if (strncmp(reply->str, "LAYOUT ", 7) == 0)
	{
		bool		plain = strcmp(reply->str + 7, "plain") == 0;

		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("Redis lock \"%s\" has the %s layout", name, reply->str + 7),
				 errdetail(plain ?
						   "Its key is a string holding its holder's token (redsync, node redlock, redis-py, ShedLock, Spring Integration); this call uses the redisson layout, a hash." :
						   "Its key is a Redisson lock hash; this call uses the plain layout, a string."),
				 errhint("Pass layout => '%s', or SET redislock.layout = '%s', to take it.",
						 reply->str + 7, reply->str + 7)));
	}
	if (rl_is_not_lock(reply))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("Redis key \"%s\" is not a lock", name),
				 errdetail("The key, its fair queue or its fencing counter holds data of another shape; redislock does not show it."),
				 errhint("Some other application uses that name.")));
	rl_report_refusal(reply->str, psprintf(op == RL_OP_SEMAPHORE ? "semaphore \"%s\"" :
										op == RL_OP_LATCH ? "count-down latch \"%s\"" :
										"Redis lock \"%s\"", name));
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
			 errhint("The Redis key \"%s\" exists and is not a lock hash: a lock of the plain layout (a string; layout => 'plain'), or some other application's data.", name) :
			 oom ? errhint("Redis reached maxmemory; free memory or raise maxmemory.") : 0));
}
