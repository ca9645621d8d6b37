/*
 * conn.c
 *	  Redis connections as the layers above use them: opened where the
 *	  settings say (the master found behind sentinels), and requests run on
 *	  them, retried across a failover, scripts by EVALSHA with a NOSCRIPT
 *	  fallback.
 *
 * One connection's own steps (socket, setup, round trips, every wait) are
 * conn_io.c's. A Redlock master that answers after the majority keeps its
 * connection: its late replies are skipped on the next use (flight_abandon
 * in pipeline.c). Where to connect comes from config.c. Pipelines on
 * several connections at once are run by pipeline.c, subscriptions by
 * pubsub.c.
 *
 * src/conn.c
 */
#include "postgres.h"

#include <hiredis/hiredis.h>

#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "conn_int.h"
#include "master_switch.h"
#include "redislock.h"
#include "scripts.h"

RLConn		rl_cmd_conn = {.role = "command"};
RLConn		rl_sub_conn = {.role = "subscriber"};

/*
 * One sentinel's answer to cmds on a throwaway connection, closed before
 * returning, also when an interrupt raises an ERROR out of the wait: a
 * cancel must not leave its socket and wait set behind. The connection is
 * static so that the error path sees what the wait left in it.
 */
static bool
ask_sentinel(const RLNode *sentinel, int n, const RLCommand *cmds,
			 RLReply **replies, TimestampTz until, char *problem, size_t size,
			 const char **hint)
{
	static RLConn probe = {.role = "sentinel", .pinned = true, .to_sentinel = true};
	bool		ok;

	probe.node = *sentinel;
	PG_TRY();
	{
		ok = rl_connect_socket(&probe, sentinel, NULL, until) &&
			rl_round_trip(&probe, n, cmds, replies, until);
	}
	PG_CATCH();
	{
		rl_disconnect(&probe);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (!ok)
	{
		snprintf(problem, size, "sentinel %s: %s", sentinel->desc,
				 rl_failure_text(&probe));
		*hint = probe.errhint;
	}
	rl_disconnect(&probe);
	return ok;
}

/* The master is host:port, as a sentinel said. */
static void
set_master(const char *host, int port)
{
	strlcpy(rl_server.host, host, sizeof(rl_server.host));
	rl_server.port = port;
	snprintf(rl_server.desc, sizeof(rl_server.desc), "%s:%d, master %s",
			 rl_server.host, rl_server.port, rl_sentinel_master);
}

/*
 * Asks the sentinels, in turn, where the master is; the one that answered
 * last is asked first. Every new connection asks again, so a failover is
 * followed as soon as the listener hears of it, or the old connection
 * breaks or refuses writes. A sentinel that still names the master the
 * latest switch left lags behind the others: that answer is taken only if
 * no other sentinel gives one.
 */
static bool
discover_master(RLConn *c, TimestampTz until)
{
	char		problem[256] = "no sentinel answered";
	const char *hint = NULL;
	bool		refused = false;	/* the last problem: our password */
	char		lag_host[sizeof(rl_server.host)];	/* the left master, if */
	int			lag_port = 0;	/* a sentinel named it */

	for (int i = 0; i < rl_nsentinels; i++)
	{
		int			k = (rl_sentinel_first + i) % rl_nsentinels;
		RLCommand	cmds[2];
		RLReply    *replies[2];
		RLReply    *r;
		int			n = 0;
		TimestampTz one = Min(until, rl_after_ms(Max(rl_connect_timeout / rl_nsentinels, 200)));

		memset(cmds, 0, sizeof(cmds));
		if (rl_sentinel_password && rl_sentinel_password[0] != '\0')
		{
			rl_set_arg(&cmds[n], "AUTH", 4);
			rl_set_arg(&cmds[n], rl_sentinel_password, strlen(rl_sentinel_password));
			n++;
		}
		rl_set_arg(&cmds[n], "SENTINEL", 8);
		rl_set_arg(&cmds[n], "get-master-addr-by-name", 23);
		rl_set_arg(&cmds[n], rl_sentinel_master, strlen(rl_sentinel_master));
		n++;
		refused = false;
		if (!ask_sentinel(&rl_sentinel_nodes[k], n, cmds, replies, one,
						  problem, sizeof(problem), &hint))
			continue;
		hint = NULL;
		if (n == 2 && replies[0]->type == REDIS_REPLY_ERROR)
		{
			snprintf(problem, sizeof(problem), "sentinel %s refused the password: %s",
					 rl_sentinel_nodes[k].desc, replies[0]->str);
			hint = "Check redislock.sentinel_password.";
			refused = true;
			continue;
		}
		r = replies[n - 1];
		if (r->type == REDIS_REPLY_ERROR)
		{
			snprintf(problem, sizeof(problem), "sentinel %s: %s",
					 rl_sentinel_nodes[k].desc, r->str);
			continue;
		}
		if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
			r->element[0]->type == REDIS_REPLY_STRING &&
			r->element[1]->type == REDIS_REPLY_STRING &&
			r->element[0]->len < sizeof(rl_server.host))
		{
			int			port = atoi(r->element[1]->str);

			if (!rl_master_left(r->element[0]->str, port))
			{
				set_master(r->element[0]->str, port);
				rl_sentinel_first = k;
				return true;
			}
			if (lag_port == 0)
			{
				strlcpy(lag_host, r->element[0]->str, sizeof(lag_host));
				lag_port = port;
			}
			continue;
		}
		snprintf(problem, sizeof(problem), "sentinel %s:%d does not know master \"%s\"",
				 rl_sentinel_nodes[k].host, rl_sentinel_nodes[k].port, rl_sentinel_master);
	}
	if (lag_port != 0)
	{
		set_master(lag_host, lag_port);
		return true;
	}
	/* a refused password stays refused: no use trying again */
	rl_fail(c, refused ? RLF_SETUP : RLF_CONNECT,
			"No sentinel of redislock.sentinels could name master \"%s\": %s",
			rl_sentinel_master, problem);
	c->errhint = hint;
	return false;
}

/*
 * Opens c if needed, by until at the latest; a connection left out of sync
 * is reopened. Behind sentinels, the master is looked up first.
 */
bool
rl_ensure_open(RLConn *c, TimestampTz until)
{
	RLNode		master;

	if (rl_healthy(c))
		return true;
	rl_disconnect(c);
	rl_load_server();
	if (!rl_server_ok)
		return rl_fail_config(c);
	c->generation = rl_settings_generation;
	until = Min(until, rl_after_ms(rl_connect_timeout));
	if (c->pinned)
	{
		if (rl_connect_socket(c, &c->node, NULL, until) && rl_setup_session(c, until))
			return true;
		rl_disconnect(c);
		return false;
	}
	/* read first: a switch heard while we connect reopens c once more */
	c->master_epoch = rl_master_epoch();
	if (rl_nsentinels > 0 && !discover_master(c, until))
		return false;
	strlcpy(master.host, rl_server.host, sizeof(master.host));
	master.port = rl_server.port;
	if (rl_connect_socket(c, &master, rl_server.unix_path, until) && rl_setup_session(c, until))
		return true;
	rl_disconnect(c);
	return false;
}

/*
 * Behind sentinels, a reply saying the server is no longer (or not yet) a
 * writable master means a failover: a failure, to be retried on the master
 * the sentinels name next.
 */
static bool
failover_reply(RLConn *c, int n, RLReply **replies)
{
	if (rl_nsentinels == 0)
		return false;
	for (int i = 0; i < n; i++)
		if (replies[i]->type == REDIS_REPLY_ERROR &&
			(strncmp(replies[i]->str, "READONLY", 8) == 0 ||
			 strncmp(replies[i]->str, "MASTERDOWN", 10) == 0 ||
			 strncmp(replies[i]->str, "LOADING", 7) == 0))
			return !rl_fail(c, RLF_FAILOVER, "The server answered: %s",
							replies[i]->str);
	return false;
}

/* Starts the retries of one request on c, to end by until. */
void
rl_retry_init(RLRetry *r, RLConn *c, TimestampTz until)
{
	r->until = until;
	r->reused = rl_healthy(c);
	r->failure = RLF_NONE;
}

static bool
failover_may_cure(RLFailure f)
{
	return f == RLF_IO || f == RLF_CONNECT || f == RLF_FAILOVER;
}

/*
 * Whether a request that failed on c should be sent again. Every request
 * redislock makes is safe to repeat. Redis may have closed an idle
 * connection (restart, client timeout) and we learn it only now: once more
 * on a new connection. Behind sentinels a failover takes a few seconds: a
 * lost or refused connection, or a server that is not the master, is tried
 * again every 100 ms until the command timeout. Never after a timeout, which
 * would only stretch the wait, nor when the server refused our credentials
 * or does not speak Redis. A try that the deadline cut short says nothing
 * about the servers: the failure reported is then the one before it.
 */
bool
rl_worth_retrying(RLConn *c, RLRetry *r)
{
	if (r->failure != RLF_NONE && GetCurrentTimestamp() >= r->until)
	{
		c->failure = r->failure;
		memcpy(c->errserver, r->errserver, sizeof(c->errserver));
		memcpy(c->errdetail, r->errdetail, sizeof(c->errdetail));
		c->errhint = r->errhint;
		return false;
	}
	if (c->failure == RLF_IO && r->reused)
	{
		r->reused = false;
		return true;
	}
	if (rl_nsentinels == 0 || !failover_may_cure(c->failure) ||
		GetCurrentTimestamp() + RETRY_PAUSE_MS * 1000 >= r->until)
		return false;
	r->failure = c->failure;
	memcpy(r->errserver, c->errserver, sizeof(r->errserver));
	memcpy(r->errdetail, c->errdetail, sizeof(r->errdetail));
	r->errhint = c->errhint;
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_POSTMASTER_DEATH,
					 RETRY_PAUSE_MS, RL_WAIT_EVENT);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
	return GetCurrentTimestamp() < r->until;
}

/*
 * Runs cmds as one pipeline on c and returns their replies (palloc'd in the
 * current memory context). On failure, c's failure fields say why and the
 * connection is closed; the caller decides between rl_report and carrying on.
 * Redis error replies are replies, not failures.
 */
bool
rl_exec(RLConn *c, int ncmds, const RLCommand *cmds, RLReply **replies)
{
	RLRetry		retry;

	rl_retry_init(&retry, c, rl_after_ms(rl_command_timeout));
	c->maybe_delivered = false;
	for (;;)
	{
		c->failure = RLF_NONE;
		if (rl_ensure_open(c, retry.until))
		{
			c->maybe_delivered = true;
			if (rl_round_trip(c, ncmds, cmds, replies, retry.until) &&
				!failover_reply(c, ncmds, replies))
				return true;
		}
		rl_disconnect(c);
		if (!rl_worth_retrying(c, &retry))
			return false;
	}
}

/*
 * Fills cmd with an EVALSHA of e, or with body an EVAL carrying the script
 * itself: for a node that may not have it, EVAL both runs and caches it.
 */
void
rl_build_eval(RLCommand *cmd, const RLEval *e, bool body)
{
	static const char *const numkeys[] = {"0", "1", "2", "3", "4", "5"};
	const char *nkeys;

	Assert(e->nkeys >= 0 && e->nkeys <= RL_EVAL_MAX_KEYS);
	nkeys = e->nkeys < (int) lengthof(numkeys) ? numkeys[e->nkeys] :
		psprintf("%d", e->nkeys);
	cmd->argc = 0;				/* only the first argc arguments are read */
	if (body)
	{
		rl_set_arg(cmd, "EVAL", 4);
		rl_set_arg(cmd, e->script->body, strlen(e->script->body));
	}
	else
	{
		rl_set_arg(cmd, "EVALSHA", 7);
		rl_set_arg(cmd, e->script->sha, strlen(e->script->sha));
	}
	rl_set_arg(cmd, nkeys, strlen(nkeys));
	for (int k = 0; k < e->nkeys; k++)
		rl_set_arg(cmd, e->keys[k], strlen(e->keys[k]));
	for (int a = 0; a < e->nargs; a++)
		rl_set_arg(cmd, e->args[a], strlen(e->args[a]));
}

bool
rl_is_noscript(const RLReply *r)
{
	return r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0;
}

/*
 * Second pipeline of rl_eval(): SCRIPT LOAD for each distinct forgotten
 * script, then the calls that failed with NOSCRIPT. A refused load (an ACL
 * without SCRIPT LOAD, SCRIPT renamed away) becomes the reply of its calls:
 * their NOSCRIPT again would hide why.
 */
static bool
eval_again(RLConn *c, const RLEval *evals, const RLCommand *cmds,
		   const int *retry, int nretry, RLReply **replies)
{
	RLCommand  *again = palloc0(sizeof(RLCommand) * nretry * 2);
	RLReply   **again_replies = palloc(sizeof(RLReply *) * nretry * 2);
	int		   *load_of = palloc(sizeof(int) * nretry);
	int			nloads = 0;

	for (int j = 0; j < nretry; j++)
	{
		const RedisScript *s = evals[retry[j]].script;

		load_of[j] = -1;
		for (int k = 0; k < j && load_of[j] < 0; k++)
			if (evals[retry[k]].script == s)
				load_of[j] = load_of[k];
		if (load_of[j] >= 0)
			continue;
		load_of[j] = nloads;
		rl_set_arg(&again[nloads], "SCRIPT", 6);
		rl_set_arg(&again[nloads], "LOAD", 4);
		rl_set_arg(&again[nloads], s->body, strlen(s->body));
		nloads++;
	}
	for (int j = 0; j < nretry; j++)
		again[nloads + j] = cmds[retry[j]];
	if (!rl_exec(c, nloads + nretry, again, again_replies))
		return false;
	for (int j = 0; j < nretry; j++)
	{
		RLReply    *load = again_replies[load_of[j]];

		replies[retry[j]] = load->type == REDIS_REPLY_ERROR ? load :
			again_replies[nloads + j];
	}
	return true;
}

/*
 * Runs n scripts as one pipeline of EVALSHA. Scripts Redis has forgotten
 * (restart, SCRIPT FLUSH) are loaded and those calls run again, once, in a
 * second pipeline; all our scripts are safe to repeat.
 */
bool
rl_eval(RLConn *c, int n, const RLEval *evals, RLReply **replies)
{
	RLCommand  *cmds = palloc(sizeof(RLCommand) * n);
	int		   *retry = palloc(sizeof(int) * n);
	int			nretry = 0;

	for (int i = 0; i < n; i++)
		rl_build_eval(&cmds[i], &evals[i], false);
	if (!rl_exec(c, n, cmds, replies))
		return false;
	for (int i = 0; i < n; i++)
		if (rl_is_noscript(replies[i]))
			retry[nretry++] = i;
	return nretry == 0 || eval_again(c, evals, cmds, retry, nretry, replies);
}
