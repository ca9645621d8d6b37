/*
 * fanout.c
 *	  Redlock fan-out: a command and a subscriber connection to each master,
 *	  requests run on every master at once, the majority and the reply it
 *	  agrees on, and waits for an unlock message from any master.
 *
 * src/fanout.c
 */
#include "postgres.h"

#include <hiredis/hiredis.h>

#include "lib/stringinfo.h"
#include "utils/timestamp.h"

#include "redislock.h"
#include "route.h"

/* The Redlock masters: a command and a subscriber connection each. */
static RLConn redlock_cmd[RL_MAX_NODES];
static RLConn redlock_sub[RL_MAX_NODES];
static int	nredlock = 0;
static uint64 redlock_generation = 0;

/* Opens (lazily) the connections to the Redlock masters. */
static void
redlock_check_settings(void)
{
	RLMode		mode;
	const RLNode *nodes;
	int			n;
	const char *problem;

	if (redlock_generation == rl_settings_generation)
		return;
	for (int i = 0; i < nredlock; i++)
	{
		rl_disconnect(&redlock_cmd[i]);
		rl_disconnect(&redlock_sub[i]);
	}
	nredlock = 0;
	redlock_generation = rl_settings_generation;
	if (!rl_config(&mode, &nodes, &n, &problem) || mode != RL_MODE_REDLOCK)
		return;
	for (int i = 0; i < n; i++)
	{
		memset(&redlock_cmd[i], 0, sizeof(RLConn));
		memset(&redlock_sub[i], 0, sizeof(RLConn));
		redlock_cmd[i].role = "command";
		redlock_sub[i].role = "subscriber";
		redlock_cmd[i].pinned = redlock_sub[i].pinned = true;
		redlock_cmd[i].preload_scripts = true;
		redlock_cmd[i].node = redlock_sub[i].node = nodes[i];
	}
	nredlock = n;
}

int
rl_redlock_size(void)
{
	redlock_check_settings();
	return nredlock;
}

/* Redlock's majority: more than half of the masters. */
int
rl_redlock_quorum(void)
{
	return rl_redlock_size() / 2 + 1;
}

/*
 * How many of n masters a waiter must hear from to be sure of hearing a
 * release: n - quorum + 1, the least that shares a master with every
 * majority. A release publishes only on the masters where the hold was
 * (release.lua: a master without it stays silent), and a lock someone
 * holds was granted by a majority; a waiter subscribed on fewer masters
 * may hear nothing of it (with 3 masters: subscribed on one, the lock held
 * on the other two), and would sleep to the lease end with the lock free.
 */
int
rl_redlock_heard_needed(int n)
{
	return n - (n / 2 + 1) + 1;
}

RLConn *
rl_redlock_conn(int i)
{
	Assert(i >= 0 && i < nredlock);
	return &redlock_cmd[i];
}

/*
 * Runs the same commands on every Redlock master at once. replies[node] is
 * that node's replies, or NULL if it failed (its connection says why).
 * Returns how many nodes answered.
 */
static int
run_all_cmds(int n, const RLCommand *cmds, RLReply ***replies)
{
	int			nnodes = rl_redlock_size();
	RLBatch    *batches = palloc0(sizeof(RLBatch) * Max(nnodes, 1));
	int			nok;

	for (int i = 0; i < nnodes; i++)
	{
		batches[i].conn = &redlock_cmd[i];
		batches[i].ncmds = n;
		batches[i].cmds = cmds;
		batches[i].replies = palloc(sizeof(RLReply *) * Max(n, 1));
	}
	nok = rl_exec_parallel(nnodes, batches, rl_command_deadline(), rl_redlock_quorum());
	for (int i = 0; i < nnodes; i++)
		replies[i] = batches[i].ok ? batches[i].replies : NULL;
	return nok;
}

/*
 * run_all_cmds() for scripts: EVALSHA everywhere, then EVAL on the nodes
 * that lacked a script (a master restarted empty), again all at once.
 */
int
rl_run_all(int n, const RLEval *evals, RLReply ***replies)
{
	int			nnodes = rl_redlock_size();
	RLCommand  *cmds = palloc(sizeof(RLCommand) * Max(n, 1));
	RLBatch    *batches = palloc0(sizeof(RLBatch) * Max(nnodes, 1));
	int		  **retry = palloc0(sizeof(int *) * Max(nnodes, 1));
	int			nbatches = 0;
	int			nok;

	for (int i = 0; i < n; i++)
		rl_build_eval(&cmds[i], &evals[i], false);
	nok = run_all_cmds(n, cmds, replies);
	for (int node = 0; node < nnodes; node++)
	{
		RLBatch    *b = &batches[nbatches];
		RLCommand  *again = NULL;

		if (replies[node] == NULL)
			continue;
		for (int i = 0; i < n; i++)
		{
			if (!rl_is_noscript(replies[node][i]))
				continue;
			if (again == NULL)
			{
				again = palloc(sizeof(RLCommand) * n);
				retry[nbatches] = palloc(sizeof(int) * n);
				b->conn = &redlock_cmd[node];
				b->cmds = again;
				b->replies = palloc(sizeof(RLReply *) * n);
			}
			rl_build_eval(&again[b->ncmds], &evals[i], true);
			retry[nbatches][b->ncmds++] = i;
		}
		if (again != NULL)
			nbatches++;
	}
	if (nbatches == 0)
		return nok;
	(void) rl_exec_parallel(nbatches, batches, rl_command_deadline(), nbatches);
	for (int bi = 0; bi < nbatches; bi++)
	{
		int			node = batches[bi].conn - redlock_cmd;

		if (!batches[bi].ok)
		{
			replies[node] = NULL;
			nok--;
			continue;
		}
		for (int k = 0; k < batches[bi].ncmds; k++)
			replies[node][retry[bi][k]] = batches[bi].replies[k];
	}
	return nok;
}

/*
 * Says in rl_cmd_conn why fewer than a majority of the Redlock masters
 * answered the last request sent to all of them: each failed master and
 * its error. Returns false, for the caller to pass on.
 */
bool
rl_redlock_no_majority(void)
{
	StringInfoData buf;
	int			nok = 0;
	RLMode		mode;
	const RLNode *nodes;
	int			n;
	const char *problem;

	/* no masters at all: the settings name none we can use, say why */
	if (!rl_config(&mode, &nodes, &n, &problem))
		return rl_fail_config(&rl_cmd_conn);
	initStringInfo(&buf);
	for (int i = 0; i < nredlock; i++)
	{
		if (redlock_cmd[i].failure == RLF_NONE)
			nok++;
		else
			appendStringInfo(&buf, "; %s", rl_failure_text(&redlock_cmd[i]));
	}
	rl_fail_on(&rl_cmd_conn, RLF_MAJORITY, rl_server_desc(),
			   "Only %d of %d Redlock masters answered, %d needed%s.",
			   nok, nredlock, rl_redlock_quorum(), buf.data);
	pfree(buf.data);
	return false;
}

/*
 * rl_last_run_complete() with Redlock: did every master that may have
 * received the last request answer it?
 */
bool
rl_redlock_run_complete(void)
{
	for (int i = 0; i < nredlock; i++)
		if (redlock_cmd[i].failure != RLF_NONE && redlock_cmd[i].maybe_delivered)
			return false;
	return true;
}

/*
 * rl_run_all(), and false with the reason in rl_cmd_conn unless a majority
 * of the masters answered.
 */
bool
rl_run_majority(int n, const RLEval *evals, RLReply ***replies)
{
	return rl_run_all(n, evals, replies) >= rl_redlock_quorum() ||
		rl_redlock_no_majority();
}

/*
 * The reply to request i that a majority of the masters agree on (see
 * RLAgree), as an integer reply. When no majority agrees and a master
 * answered with an error, that error instead. *votes gets how many agreed.
 */
static RLReply *
agreed_reply(RLReply ***per, int i, RLAgree how, int *votes)
{
	int			nagree = 0;
	long long	best = 0;
	RLReply    *error = NULL;
	RLReply    *out;

	for (int node = 0; node < nredlock; node++)
	{
		RLReply    *r;

		if (per[node] == NULL)
			continue;
		r = per[node][i];
		if (r->type == REDIS_REPLY_INTEGER &&
			(how == RL_AGREE_MAX ? r->integer > 0 : r->integer == 1))
		{
			nagree++;
			best = Max(best, r->integer);
		}
		else if (r->type == REDIS_REPLY_ERROR && error == NULL)
			error = r;
	}
	if (votes != NULL)
		*votes = nagree;
	if (nagree < rl_redlock_quorum() && error != NULL)
		return error;
	out = palloc0(sizeof(RLReply));
	out->type = REDIS_REPLY_INTEGER;
	out->integer = nagree >= rl_redlock_quorum() ? best : 0;
	return out;
}

/*
 * rl_run_agreed() with Redlock: runs scripts on every master, each reply
 * being what a majority agrees on. votes[i], if given, gets how many agreed.
 */
bool
rl_redlock_run_agreed(int n, const RLEval *evals, RLAgree how,
					  RLReply **replies, int *votes)
{
	RLReply  ***per;

	per = palloc0(sizeof(RLReply **) * rl_redlock_size());
	if (!rl_run_majority(n, evals, per))
		return false;
	for (int i = 0; i < n; i++)
		replies[i] = agreed_reply(per, i, how, votes != NULL ? &votes[i] : NULL);
	return true;
}

/* rl_run_cmds_agreed() with Redlock: the same for plain commands. */
bool
rl_redlock_run_cmds_agreed(int n, const RLCommand *cmds, RLAgree how,
						   RLReply **replies)
{
	RLReply  ***per;

	per = palloc0(sizeof(RLReply **) * rl_redlock_size());
	if (run_all_cmds(n, cmds, per) < rl_redlock_quorum())
		return rl_redlock_no_majority();
	for (int i = 0; i < n; i++)
		replies[i] = agreed_reply(per, i, how, NULL);
	return true;
}

/*
 * Subscribes to channel on every Redlock master that can be reached, so
 * that an unlock on any of them wakes us. True if enough confirmed to hear
 * every release (rl_redlock_heard_needed); if not, no message can be
 * relied on, and the caller retries on its own time.
 */
bool
rl_redlock_subscribe(const char *channel)
{
	static const char *chan;
	int			nsubscribed = 0;

	chan = channel;
	for (int i = 0; i < rl_redlock_size(); i++)
	{
		if (redlock_sub[i].subscribed)
		{
			nsubscribed++;
			continue;
		}
		/* a master that just failed or lagged is left out of this wait */
		if (redlock_cmd[i].failure != RLF_NONE)
			continue;
		if (rl_subscribe(&redlock_sub[i], 1, &chan))
			nsubscribed++;
	}
	return nsubscribed >= rl_redlock_heard_needed(rl_redlock_size());
}

int
rl_redlock_wait_message(TimestampTz until)
{
	RLConn	   *conns[RL_MAX_NODES];

	for (int i = 0; i < rl_redlock_size(); i++)
		conns[i] = &redlock_sub[i];
	return rl_wait_message_any(rl_redlock_size(), conns, until);
}

/* Ends the wait's subscriptions; with drop, closes the connections. */
void
rl_redlock_unsubscribe(bool drop)
{
	for (int i = 0; i < nredlock; i++)
	{
		if (drop)
			rl_disconnect(&redlock_sub[i]);
		else
			rl_unsubscribe(&redlock_sub[i]);
	}
}
