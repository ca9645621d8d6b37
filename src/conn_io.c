/*
 * conn_io.c
 *	  One Redis connection's own steps: opening its socket (with TLS),
 *	  setting it up, sending a pipeline and reading the replies, every wait
 *	  on the process latch under our deadlines, so that cancel, timeouts and
 *	  termination always get through.
 *
 * The byte stream (socket, TLS, reply reader) is transport.c's; nothing
 * there blocks. A reply interrupted half-way leaves the stream out of sync;
 * rl_healthy() then says no and conn.c drops and reopens the connection.
 * Which server to open, and what to do when a request fails, is conn.c's.
 *
 * src/conn_io.c
 */
#include "postgres.h"

#include <limits.h>
#include <hiredis/hiredis.h>

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "conn_int.h"
#include "master_switch.h"
#include "redislock.h"
#include "transport.h"

typedef enum WaitResult
{
	WAIT_READY,
	WAIT_TIMEOUT,
	WAIT_FAILED
} WaitResult;

/* When a request started now must be over: redislock.command_timeout. */
TimestampTz
rl_command_deadline(void)
{
	return rl_after_ms(rl_command_timeout);
}

long
rl_ms_until(TimestampTz until)
{
	TimestampTz now;

	if (until == DT_NOEND)
		return -1;
	now = GetCurrentTimestamp();
	if (until <= now)
		return 0;
	return (long) Min((until - now + 999) / 1000, (TimestampTz) INT_MAX);
}

/*
 * When set, nothing this process does with Redis may wait past it: cleanup
 * paths run with interrupts held, and must end soon whatever the timeouts;
 * a lock wait's requests end with the wait (wait.c). Limits nest: each one
 * narrows the one in force, and is undone with rl_unlimit_waits().
 */
static TimestampTz wait_limit = 0;

/* Narrows the limit to until; returns the one in force, to restore. */
TimestampTz
rl_limit_waits(TimestampTz until)
{
	TimestampTz previous = wait_limit;

	wait_limit = previous != 0 ? Min(previous, until) : until;
	return previous;
}

void
rl_unlimit_waits(TimestampTz previous)
{
	wait_limit = previous;
}

/* The limit in force, 0 if none. */
TimestampTz
rl_waits_limit(void)
{
	return wait_limit;
}

TimestampTz
rl_after_ms(int ms)
{
	TimestampTz t = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), ms);

	return wait_limit != 0 ? Min(t, wait_limit) : t;
}

/*
 * Sleeps until the socket is ready for events, until is reached, or an
 * interrupt arrives (handled by CHECK_FOR_INTERRUPTS, which may not return).
 */
static WaitResult
wait_socket(RLConn *c, uint32 events, TimestampTz until)
{
	for (;;)
	{
		WaitEvent	ev;
		long		timeout = rl_ms_until(until);
		int			n;

		if (timeout == 0)
			return WAIT_TIMEOUT;
		if (c->sock_events != events)
		{
			ModifyWaitEvent(c->wes, c->sock_pos, events, NULL);
			c->sock_events = events;
		}
		n = WaitEventSetWait(c->wes, timeout, &ev, 1, RL_WAIT_EVENT);
		if (n == 0)
			continue;
		if (ev.events & WL_LATCH_SET)
		{
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
			continue;
		}
		if (ev.events & WL_POSTMASTER_DEATH)
		{
			if (!proc_exit_inprogress)
				proc_exit(1);
			rl_fail(c, RLF_IO, "The postmaster died.");
			return WAIT_FAILED;
		}
		if (ev.events & events)
			return WAIT_READY;
	}
}

void
rl_disconnect(RLConn *c)
{
	if (c->wes)
		FreeWaitEventSet(c->wes);
	if (c->sock)
	{
		/*
		 * A request whose outcome we gave up on must never take effect
		 * later. Reset the connection so that bytes still unsent (a
		 * partitioned network) die with it, and have the next connection
		 * kill this one in Redis, dropping what reached it unread.
		 */
		bool		abandoned = c->in_flight || c->owed > 0;

		if (abandoned && c->client_id > 0)
			c->stale_client_id = c->client_id;
		rl_sock_close(c->sock, abandoned);
	}
	c->client_id = 0;
	c->wes = NULL;
	c->sock = NULL;
	c->in_flight = false;
	c->owed = 0;
	c->subscribed = false;
	c->nchannels = 0;
	c->channels = NULL;
}

/*
 * Is c open, set up, in sync and opened with the current settings (and,
 * found through sentinels, since the latest master switch)? A connect or
 * TLS handshake cut short by an interrupt leaves an open socket that was
 * never set up (no AUTH, no CLIENT ID): not healthy.
 */
bool
rl_healthy(RLConn *c)
{
	return c->sock != NULL && c->ready && !c->in_flight &&
		c->generation == rl_settings_generation &&
		(c->pinned || rl_nsentinels == 0 || c->master_epoch == rl_master_epoch());
}

/* How run_step() ended. */
typedef enum StepResult
{
	STEP_DONE,
	STEP_BROKEN,				/* the stream failed: rl_sock_error says why */
	STEP_TIMEOUT,
	STEP_WAIT_FAILED			/* the wait failed: c says why */
} StepResult;

/*
 * Runs a step on c's stream (a flush, the TLS handshake) until it is done,
 * waiting on the latch for the socket event it asks for, by until.
 */
static StepResult
run_step(RLConn *c, RLIo (*step) (RLSocket *s), TimestampTz until)
{
	for (;;)
	{
		switch (step(c->sock))
		{
			case RL_IO_DONE:
				return STEP_DONE;
			case RL_IO_FAILED:
				return STEP_BROKEN;
			case RL_IO_WAIT:
				break;
		}
		switch (wait_socket(c, rl_sock_wants(c->sock), until))
		{
			case WAIT_READY:
				break;
			case WAIT_TIMEOUT:
				return STEP_TIMEOUT;
			case WAIT_FAILED:
				return STEP_WAIT_FAILED;
		}
	}
}

bool
rl_flush(RLConn *c, TimestampTz until)
{
	switch (run_step(c, rl_sock_flush, until))
	{
		case STEP_DONE:
			return true;
		case STEP_BROKEN:
			return rl_stream_failed(c);
		case STEP_TIMEOUT:
			return rl_fail(c, RLF_TIMEOUT,
						   "No answer within %d ms.", rl_command_timeout);
		case STEP_WAIT_FAILED:
			break;
	}
	return false;
}

/*
 * Reads one reply. With timeout_is_error false, running out of time returns
 * false with failure RLF_NONE: waiting for pub/sub messages uses that.
 */
bool
rl_read_reply(RLConn *c, TimestampTz until, bool timeout_is_error, redisReply **out)
{
	for (;;)
	{
		void	   *r = NULL;

		if (!rl_sock_reply(c->sock, &r))
			return rl_invalid_reply(c);
		if (r != NULL && c->owed > 0)
		{
			c->owed--;
			freeReplyObject(r);
			continue;
		}
		if (r != NULL)
		{
			*out = r;
			return true;
		}
		switch (wait_socket(c, rl_sock_read_wants(c->sock), until))
		{
			case WAIT_READY:
				break;
			case WAIT_TIMEOUT:
				if (!timeout_is_error)
					return rl_fail(c, RLF_NONE, "timeout");
				return rl_fail(c, RLF_TIMEOUT,
							   "No answer within %d ms.", rl_command_timeout);
			case WAIT_FAILED:
				return false;
		}
		if (rl_sock_read(c->sock) == RL_IO_FAILED)
			return rl_stream_failed(c);
	}
}

/* A deep copy of r in the current memory context (NULL stays NULL). */
RLReply *
rl_reply_dup(const RLReply *r)
{
	RLReply    *out;

	if (r == NULL)
		return NULL;
	out = palloc(sizeof(RLReply));
	*out = *r;
	if (r->str != NULL)
	{
		out->str = palloc(r->len + 1);
		memcpy(out->str, r->str, r->len + 1);
	}
	if (r->element != NULL)
	{
		out->element = palloc0(sizeof(RLReply *) * Max(r->elements, 1));
		for (size_t i = 0; i < r->elements; i++)
			out->element[i] = rl_reply_dup(r->element[i]);
	}
	return out;
}

RLReply *
rl_copy_reply(const redisReply *r)
{
	RLReply    *out = palloc0(sizeof(RLReply));

	out->type = r->type;
	out->integer = r->integer;
	if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS ||
		r->type == REDIS_REPLY_ERROR)
	{
		out->str = palloc(r->len + 1);
		memcpy(out->str, r->str, r->len);
		out->str[r->len] = '\0';
		out->len = r->len;
	}
	else if (r->type == REDIS_REPLY_ARRAY)
	{
		out->elements = r->elements;
		out->element = palloc0(sizeof(RLReply *) * Max(r->elements, 1));
		for (size_t i = 0; i < r->elements; i++)
			out->element[i] = rl_copy_reply(r->element[i]);
	}
	return out;
}

static void
append_resp_header(StringInfo buf, char kind, size_t n)
{
	char		digits[MAXINT8LEN + 1];

	appendStringInfoChar(buf, kind);
	appendBinaryStringInfo(buf, digits, pg_ulltoa_n((uint64) n, digits));
	appendBinaryStringInfo(buf, "\r\n", 2);
}

/*
 * Queues cmds on c in the Redis protocol, formatted here by copying: the
 * printf-style formatting of redisAppendCommandArgv showed in profiles of
 * the lock hot path. One append carries a whole pipeline.
 */
bool
rl_queue_commands(RLConn *c, int ncmds, const RLCommand *cmds)
{
	StringInfoData buf;
	bool		ok;

	initStringInfo(&buf);
	for (int i = 0; i < ncmds; i++)
	{
		append_resp_header(&buf, '*', cmds[i].argc);
		for (int a = 0; a < cmds[i].argc; a++)
		{
			append_resp_header(&buf, '$', cmds[i].argvlen[a]);
			appendBinaryStringInfo(&buf, cmds[i].argv[a], cmds[i].argvlen[a]);
			appendBinaryStringInfo(&buf, "\r\n", 2);
		}
	}
	ok = rl_sock_queue(c->sock, buf.data, buf.len);
	pfree(buf.data);
	if (!ok)
		return rl_fail(c, RLF_IO, "Out of memory for the request.");
	return true;
}

/* Sends cmds and reads their replies as one pipeline. */
bool
rl_round_trip(RLConn *c, int ncmds, const RLCommand *cmds, RLReply **replies,
		   TimestampTz until)
{
	if (!rl_queue_commands(c, ncmds, cmds))
		return false;
	c->in_flight = true;
	if (!rl_flush(c, until))
		return false;
	for (int i = 0; i < ncmds; i++)
	{
		redisReply *r;

		if (!rl_read_reply(c, until, true, &r))
			return false;
		replies[i] = rl_copy_reply(r);
		freeReplyObject(r);
	}
	c->in_flight = false;
	return true;
}

void
rl_set_arg(RLCommand *cmd, const char *arg, size_t len)
{
	Assert(cmd->argc < RL_MAX_ARGS);
	cmd->argv[cmd->argc] = arg;
	cmd->argvlen[cmd->argc] = len;
	cmd->argc++;
}

/*
 * The commands that start every connection, sent in its first pipeline:
 * AUTH, SELECT, learn our CLIENT ID, behind sentinels check that the server
 * is (still) the master, and kill the connection we gave up on before (see
 * rl_disconnect), so that nothing it sent can run after our requests (to a
 * sentinel, only its AUTH and CLIENT ID). With
 * preload_scripts, load every script: a request left to a straggler (see
 * flight_abandon) must not fail with NOSCRIPT where nobody reads the reply
 * (a refused load just leaves the usual NOSCRIPT retry).
 * Returns how many; stale must outlive the pipeline.
 */
int
rl_build_setup(RLConn *c, RLCommand *cmds, char *db, char *stale, RLSetup *st)
{
	int			n = 0;

	memset(cmds, 0, sizeof(RLCommand) * RL_SETUP_MAX);
	if (c->to_sentinel)
	{
		if (rl_sentinel_password && rl_sentinel_password[0] != '\0')
		{
			rl_set_arg(&cmds[n], "AUTH", 4);
			rl_set_arg(&cmds[n], rl_sentinel_password, strlen(rl_sentinel_password));
			n++;
		}
	}
	else if (rl_server.password[0] != '\0')
	{
		rl_set_arg(&cmds[n], "AUTH", 4);
		if (rl_server.user[0] != '\0')
			rl_set_arg(&cmds[n], rl_server.user, strlen(rl_server.user));
		rl_set_arg(&cmds[n], rl_server.password, strlen(rl_server.password));
		n++;
	}
	if (rl_server.db != 0 && !c->to_sentinel)
	{
		snprintf(db, 16, "%d", rl_server.db);
		rl_set_arg(&cmds[n], "SELECT", 6);
		rl_set_arg(&cmds[n], db, strlen(db));
		n++;
	}
	st->id_reply = n;
	rl_set_arg(&cmds[n], "CLIENT", 6);
	rl_set_arg(&cmds[n], "ID", 2);
	n++;
	st->role_reply = -1;
	if (rl_nsentinels > 0 && !c->pinned)
	{
		/* the sentinels' answer may predate a failover */
		st->role_reply = n;
		rl_set_arg(&cmds[n], "ROLE", 4);
		n++;
	}
	if (c->stale_client_id > 0)
	{
		snprintf(stale, 24, "%lld", c->stale_client_id);
		rl_set_arg(&cmds[n], "CLIENT", 6);
		rl_set_arg(&cmds[n], "KILL", 4);
		rl_set_arg(&cmds[n], "ID", 2);
		rl_set_arg(&cmds[n], stale, strlen(stale));
		n++;
	}
	for (int i = 0; c->preload_scripts && i < RL_NSCRIPTS; i++)
	{
		rl_set_arg(&cmds[n], "SCRIPT", 6);
		rl_set_arg(&cmds[n], "LOAD", 4);
		rl_set_arg(&cmds[n], rl_scripts[i]->body, strlen(rl_scripts[i]->body));
		n++;
	}
	st->n = n;
	return n;
}

/* Checks the replies to rl_build_setup()'s commands. */
bool
rl_check_setup(RLConn *c, const RLSetup *st, RLReply **replies)
{
	/* CLIENT may be denied by an ACL: then we do without. */
	for (int i = 0; i < st->id_reply; i++)
		if (replies[i]->type == REDIS_REPLY_ERROR)
		{
			rl_fail(c, RLF_SETUP, "The server refused the connection setup: %s",
					replies[i]->str);
			c->errhint = rl_refusal_hint(replies[i]->str);
			return false;
		}
	/* an ACL without ROLE: name it, rather than wait for a failover */
	if (st->role_reply >= 0 &&
		replies[st->role_reply]->type == REDIS_REPLY_ERROR &&
		rl_is_refusal(replies[st->role_reply]->str))
	{
		rl_fail(c, RLF_SETUP, "The server refused the connection setup: %s",
				replies[st->role_reply]->str);
		c->errhint = rl_refusal_hint(replies[st->role_reply]->str);
		return false;
	}
	c->ready = true;
	if (replies[st->id_reply]->type == REDIS_REPLY_INTEGER)
		c->client_id = replies[st->id_reply]->integer;
	c->stale_client_id = 0;
	if (st->role_reply >= 0 &&
		!(replies[st->role_reply]->type == REDIS_REPLY_ARRAY &&
		  replies[st->role_reply]->elements > 0 &&
		  replies[st->role_reply]->element[0]->type == REDIS_REPLY_STRING &&
		  strcmp(replies[st->role_reply]->element[0]->str, "master") == 0))
		return rl_fail(c, RLF_FAILOVER,
					   "The server is not a master yet: a failover is in progress.");
	return true;
}

/*
 * Can this process have had a command run by a Redis server? Not before a
 * connection's setup (AUTH, SELECT) was accepted; a pipeline sends its
 * commands behind the setup, so its connect counts.
 */
bool		rl_redis_reached = false;

/* Sets up a new connection in one round trip; see rl_build_setup(). */
bool
rl_setup_session(RLConn *c, TimestampTz until)
{
	RLCommand	cmds[RL_SETUP_MAX];
	RLReply    *replies[RL_SETUP_MAX];
	char		db[16];
	char		stale[24];
	RLSetup		st;

	rl_build_setup(c, cmds, db, stale, &st);
	if (!rl_round_trip(c, st.n, cmds, replies, until))
	{
		if (c->failure == RLF_TIMEOUT)
			rl_fail(c, RLF_CONNECT,
					"The connection setup got no answer within redislock.connect_timeout (%d ms).",
					rl_connect_timeout);
		return false;
	}
	if (!rl_check_setup(c, &st, replies))
		return false;
	rl_redis_reached = true;
	return true;
}

/* Does c speak TLS? rediss:// for Redis servers, sentinel_tls for sentinels. */
static bool
wants_tls(const RLConn *c)
{
	return c->to_sentinel ? rl_sentinel_tls : rl_server.tls;
}

/*
 * Starts a non-blocking connect to the node (or unix path); the socket
 * becomes writable once it connected or failed (see rl_connected()). A host
 * name is resolved by until at the latest (see resolve.c).
 */
bool
rl_open_socket(RLConn *c, const RLNode *node, const char *unix_path,
			   TimestampTz until)
{
	char		problem[512];

	c->sock = rl_sock_open(node->host, node->port, unix_path, until,
						   problem, sizeof(problem));
	if (c->sock == NULL)
		return rl_fail(c, RLF_CONNECT, "%s", problem);
	strlcpy(c->host, node->host, sizeof(c->host));
	c->ready = false;
	c->wes = RL_CreateWaitEventSet(TopMemoryContext, 3);
	AddWaitEventToSet(c->wes, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	/* a single-user backend has no postmaster to watch */
	if (IsUnderPostmaster)
		AddWaitEventToSet(c->wes, WL_POSTMASTER_DEATH, PGINVALID_SOCKET, NULL, NULL);
	c->sock_pos = AddWaitEventToSet(c->wes, WL_SOCKET_WRITEABLE,
									rl_sock_fd(c->sock), NULL, NULL);
	c->sock_events = WL_SOCKET_WRITEABLE;
	return true;
}

/*
 * Once the socket of rl_open_socket() is writable: did the connect succeed?
 * A TLS connection then needs rl_sock_handshake() before anything is sent.
 */
bool
rl_connected(RLConn *c)
{
	char		problem[512];

	if (!rl_sock_connected(c->sock, wants_tls(c), c->host, problem, sizeof(problem)))
		return rl_fail(c, RLF_CONNECT, "%s", problem);
	return true;
}

static bool tls_answer(RLConn *c);

static const char *
plain_hint(const RLConn *c)
{
	return c->to_sentinel ?
		"If the sentinels speak TLS, set redislock.sentinel_tls to on." :
		"If the server speaks TLS on that port, use a rediss:// URL in redislock.url.";
}

/*
 * The stream of c broke (rl_sock_* said RL_IO_FAILED). Before the setup
 * replies came, that is a failure to connect, with the reason TLS gave.
 * A TLS server that reads our plain request closes the connection at once,
 * usually resetting it: the only sign, so say what it may mean.
 */
bool
rl_stream_failed(RLConn *c)
{
	const char *hint = rl_sock_hint(c->sock);

	if (c->ready)
		return rl_fail(c, RLF_IO, "%s", rl_sock_error(c->sock));
	if (rl_sock_got_tls_record(c->sock))
		return tls_answer(c);
	rl_fail(c, RLF_CONNECT, "%s", rl_sock_error(c->sock));
	if (hint == NULL && !rl_sock_is_tls(c->sock) && !rl_sock_got_bytes(c->sock) &&
		(c->pinned || rl_server.unix_path[0] == '\0'))
		hint = plain_hint(c);
	c->errhint = hint;
	return false;
}

/* What c received is not RESP: maybe a TLS server on a plain connection. */
bool
rl_invalid_reply(RLConn *c)
{
	if (!c->ready && rl_sock_got_tls_record(c->sock))
		return tls_answer(c);
	return rl_fail(c, RLF_PROTOCOL, "%s", rl_sock_error(c->sock));
}

/* A plain connection got a TLS record back: the port expects TLS. */
static bool
tls_answer(RLConn *c)
{
	rl_fail(c, RLF_CONNECT,
			"The server answered with TLS.");
	c->errhint = plain_hint(c);
	return false;
}

/* Runs the TLS handshake of a connected socket (no-op without TLS). */
const char *const rl_handshake_hint =
"A server without TLS on that port does not answer a TLS handshake: check the port, or use a redis:// URL.";

static bool
handshake(RLConn *c, TimestampTz until)
{
	switch (run_step(c, rl_sock_handshake, until))
	{
		case STEP_DONE:
			return true;
		case STEP_BROKEN:
			rl_fail(c, RLF_CONNECT, "%s", rl_sock_error(c->sock));
			c->errhint = rl_sock_hint(c->sock);
			break;
		case STEP_TIMEOUT:
			rl_fail(c, RLF_CONNECT,
					"The TLS handshake did not finish within redislock.connect_timeout (%d ms).", rl_connect_timeout);
			c->errhint = rl_handshake_hint;
			break;
		case STEP_WAIT_FAILED:
			break;
	}
	return false;
}


/*
 * Opens a socket to the node (or unix path) and waits until it connects
 * and, with TLS, until the server is verified.
 */
bool
rl_connect_socket(RLConn *c, const RLNode *node, const char *unix_path,
				  TimestampTz until)
{
	if (!rl_open_socket(c, node, unix_path, until))
		return false;
	switch (wait_socket(c, WL_SOCKET_WRITEABLE, until))
	{
		case WAIT_READY:
			break;
		case WAIT_TIMEOUT:
			return rl_fail(c, RLF_CONNECT,
						   "No answer within redislock.connect_timeout (%d ms).", rl_connect_timeout);
		case WAIT_FAILED:
			return false;
	}
	return rl_connected(c) && handshake(c, until);
}

