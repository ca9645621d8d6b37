/*
 * status.c
 *	  What Redis says about a lock, for redis_lock_status() and
 *	  redis_lock_nodes(): one server's view, or with Redlock each master's
 *	  and what a majority of them agree on.
 *
 * src/status.c
 */
#include "postgres.h"

#include <hiredis/hiredis.h>

#include "conn.h"
#include "lock_int.h"
#include "plain.h"
#include "registry.h"
#include "route.h"
#include "scripts.h"

static void
status_eval(RLEval *e, const char *name)
{
	memset(e, 0, sizeof(*e));
	e->script = &rl_script_status;
	e->nkeys = 4;
	e->keys[0] = name;
	e->keys[1] = queue_key(name);
	e->keys[2] = token_key(name);
	e->keys[3] = rl_plain_primitive.fencing_key(name);
	e->nargs = 1;
	e->args[0] = rl_layout == RL_LAYOUT_PLAIN ? "plain" : "redisson";
}

/* Reads status.lua's reply into st. */
static void
parse_status(const RLReply *r, const char *name, RLStatus *st)
{
	RLReply    *hash;

	rl_expect_reply(r->type == REDIS_REPLY_ARRAY && r->elements == 6 &&
					r->element[0]->type == REDIS_REPLY_ARRAY &&
					r->element[0]->elements % 2 == 0 &&
					is_array_of(r->element[0], r->element[0]->elements, REDIS_REPLY_STRING) &&
					is_int(r->element[1]) && is_int(r->element[2]) &&
					(r->element[3]->type == REDIS_REPLY_STRING ||
					 r->element[3]->type == REDIS_REPLY_NIL) &&
					(r->element[4]->type == REDIS_REPLY_STRING ||
					 r->element[4]->type == REDIS_REPLY_NIL) &&
					r->element[5]->type == REDIS_REPLY_STRING,
					RL_OP_STATUS, name);

	memset(st, 0, sizeof(*st));
	st->mode = rl_mode_name();
	st->layout = r->element[5]->str;
	hash = r->element[0];
	st->nholders = hash->elements / 2;
	st->holders = palloc(sizeof(char *) * Max(st->nholders, 1));
	for (int i = 0; i < st->nholders; i++)
	{
		st->holders[i] = hash->element[2 * i]->str;
		st->hold_count += strtoll(hash->element[2 * i + 1]->str, NULL, 10);
		if (strcmp(st->holders[i], rl_owner_id()) == 0 ||
			strcmp(st->holders[i], rl_write_primitive.field(rl_owner_id())) == 0)
			st->held_by_me = true;
	}
	if (r->element[4]->type == REDIS_REPLY_STRING)
		st->rw_mode = r->element[4]->str;
	st->locked = st->nholders > 0;
	st->ttl_ms = r->element[1]->integer >= 0 ? r->element[1]->integer : -1;
	st->queue_length = r->element[2]->integer;
	if (r->element[3]->type == REDIS_REPLY_STRING)
	{
		st->has_token = true;
		st->token = strtoll(r->element[3]->str, NULL, 10);
	}
}

/*
 * status.lua's reply about name on the single server or the cluster. While
 * the lock's cluster slot is migrating its keys may sit on two nodes, and
 * no script can read them all (TRYAGAIN): then the lock's hash alone is
 * read, where the cluster sends it, and a NOTICE names the slot.
 */
static RLReply *
status_reply(const char *name)
{
	RLEval		e;
	RLReply    *r;

	status_eval(&e, name);
	if (!rl_run(1, &e, &r))
	{
		rl_stat_add(RL_STAT_REDIS_ERRORS, 1);
		if (rl_cmd_conn.failure != RLF_MIGRATING)
			rl_report(&rl_cmd_conn, ERROR);
		ereport(NOTICE,
				(errmsg("hash slot %d of Redis lock \"%s\" is migrating between cluster nodes",
						rl_route_slot(name), name),
				 errdetail("Its holders and lease are reported; its queue length (0) and fencing token (NULL) are not read until the slot settles.")));
		e.nkeys = 1;
		return rl_eval_one(&e, RL_OP_STATUS, name, NULL);
	}
	if (r->type == REDIS_REPLY_ERROR)
	{
		rl_stat_add(RL_STAT_REDIS_ERRORS, 1);
		rl_reply_error(r, RL_OP_STATUS, name);
	}
	return r;
}

/*
 * Every Redlock master's view of a lock (one row per master). Outside
 * Redlock, the single view of the server or cluster.
 */
int
rl_lock_node_status(const char *name, RLNodeStatus **out)
{
	RLEval		e;
	RLReply  ***per;
	RLNodeStatus *nodes;
	int			n;

	rl_settle(false);
	status_eval(&e, name);
	if (rl_mode() != RL_MODE_REDLOCK)
	{
		nodes = palloc0(sizeof(RLNodeStatus));
		nodes[0].node = rl_server_desc();
		parse_status(status_reply(name), name, &nodes[0].st);
		*out = nodes;
		return 1;
	}
	n = rl_redlock_size();
	per = palloc0(sizeof(RLReply **) * n);
	nodes = palloc0(sizeof(RLNodeStatus) * n);
	(void) rl_run_all(1, &e, per);
	for (int i = 0; i < n; i++)
	{
		nodes[i].node = rl_redlock_conn(i)->node.desc;
		if (per[i] == NULL)
			nodes[i].error = rl_failure_text(rl_redlock_conn(i));
		else if (rl_is_not_lock(per[i][0]))
			rl_reply_error(per[i][0], RL_OP_STATUS, name);
		else if (per[i][0]->type == REDIS_REPLY_ERROR)
			nodes[i].error = per[i][0]->str;
		else
			parse_status(per[i][0], name, &nodes[i].st);
	}
	*out = nodes;
	return n;
}

/*
 * A Redlock lock's status is what a majority of masters agree on: the
 * owners present on a majority hold it; its ttl is the shortest among them.
 * A read-write lock may have any number of readers, so the owners that can
 * reach a majority are counted from the replies, not from the masters.
 */
static void
redlock_status(const char *name, RLStatus *st)
{
	RLNodeStatus *nodes;
	int			n = rl_lock_node_status(name, &nodes);
	int			nanswered = 0;
	int			maxholders = 0;

	memset(st, 0, sizeof(*st));
	st->mode = rl_mode_name();
	st->layout = rl_layout == RL_LAYOUT_PLAIN ? "plain" : "redisson";
	for (int i = 0; i < n; i++)
		if (nodes[i].error == NULL)
		{
			maxholders += nodes[i].st.nholders;
			if (nodes[i].st.locked)
				st->layout = nodes[i].st.layout;
		}
	st->holders = palloc(sizeof(char *) * Max(maxholders, 1));
	st->ttl_ms = -1;
	for (int i = 0; i < n; i++)
	{
		if (nodes[i].error != NULL)
			continue;
		nanswered++;
		if (nodes[i].st.has_token)
		{
			st->has_token = true;
			st->token = Max(st->token, nodes[i].st.token);
		}
		for (int h = 0; h < nodes[i].st.nholders; h++)
		{
			const char *owner = nodes[i].st.holders[h];
			int			votes = 0;
			bool		seen = false;

			for (int k = 0; k < st->nholders && !seen; k++)
				seen = strcmp(st->holders[k], owner) == 0;
			for (int j = 0; j < n && !seen; j++)
				for (int k = 0; nodes[j].error == NULL && k < nodes[j].st.nholders; k++)
					votes += strcmp(nodes[j].st.holders[k], owner) == 0 ? 1 : 0;
			if (seen || votes < rl_redlock_quorum())
				continue;
			st->holders[st->nholders++] = pstrdup(owner);
			st->hold_count = Max(st->hold_count, nodes[i].st.hold_count);
			st->held_by_me |= strcmp(owner, rl_owner_id()) == 0;
		}
		if (nodes[i].st.locked && nodes[i].st.ttl_ms >= 0 &&
			(st->ttl_ms < 0 || nodes[i].st.ttl_ms < st->ttl_ms))
			st->ttl_ms = nodes[i].st.ttl_ms;
	}
	if (nanswered < rl_redlock_quorum())
	{
		(void) rl_redlock_no_majority();
		rl_report(&rl_cmd_conn, ERROR);
	}
	st->locked = st->nholders > 0;
	if (!st->locked)
		st->ttl_ms = -1;
}

void
rl_lock_status(const char *name, RLStatus *st)
{
	if (rl_mode() == RL_MODE_REDLOCK)
	{
		redlock_status(name, st);
		return;
	}
	rl_settle(false);
	parse_status(status_reply(name), name, st);
}
