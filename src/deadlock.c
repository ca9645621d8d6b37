/*
 * deadlock.c
 *	  Deadlock detection across every server that shares the Redis
 *	  deployment, and who waits for whom for the views.
 *
 * A wait that has lasted redislock.deadlock_timeout publishes its wait-for
 * edge: the hash redislock_waits:{<owner id>} (server, pid, started, kind,
 * fair, n, name1..name<n>, and every and ttl: its check interval and the
 * TTL it was written with), with a TTL that each check refreshes and that
 * the end of the wait deletes, so a waiter that dies leaves it for one TTL
 * at most. A wait that ends while Redis cannot take the delete (the command
 * connection out of sync after a cancel, say) leaves it to the session's
 * next call that reaches Redis (rl_deadlock_settle).
 *
 * Then the wait walks the graph, one level per two pipelined round trips:
 * the holders of the locks the level waits for (lua/wait_holders.lua: owner
 * fields, read and write holders, the owners queued ahead of a fair waiter
 * while the lock is free, a waiting writer's mark), then the edges of those
 * holders. A holder without an edge ends its branch: it runs, waits for
 * less than deadlock_timeout, or is not a redislock session (a Redisson
 * service: a cycle through one is not detected). The walk works the same in
 * single, Sentinel and Cluster modes, where edges and locks live on
 * different slots.
 *
 * Exactly one victim per cycle: the member with the largest owner id
 * (instance uuid, then session number). A walk only follows owners smaller
 * than the walker, so a session finds exactly the cycles in which it is the
 * largest; the other members keep waiting, and whatever the timing, two
 * sessions never abort for the same cycle. The largest member of a set of
 * deadlocked sessions always finds a cycle, so every deadlock ends. Where
 * cycles overlap, each one's largest member may abort.
 *
 * The walk reads the graph piece by piece while it changes. Before aborting,
 * the victim reads the whole cycle again in one round trip (every edge still
 * the same wait, every lock still held by the next member): a cycle seen
 * twice in a row is not an artefact of a holder that moved on meanwhile.
 * An edge alone does not prove a wait, as one can outlive its wait: every
 * member must also be seen waiting, a session of this server in the
 * registry (the same wait: its start), another server's by an edge
 * refreshed within its check interval (and half of one more, for the walk
 * that refreshes it). The victim's own holds cannot change while it walks.
 *
 * Not with Redlock: a hold there is a majority of independent masters, and
 * so would every edge have to be; waits are still shown in redis_lock_waits.
 *
 * src/deadlock.c
 */
#include "postgres.h"

#include <unistd.h>

#include <hiredis/hiredis.h>

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "postmaster/postmaster.h"
#include "storage/proc.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "cleanup.h"
#include "compat.h"
#include "conn.h"
#include "deadlock.h"
#include "lock_int.h"
#include "registry.h"
#include "route.h"
#include "scripts.h"

int			rl_deadlock_timeout = -1;

/* How far a walk goes: sessions looked at, and levels. */
#define WALK_MAX_NODES 256
#define WALK_MAX_DEPTH 32

/* The current wait of this session. */
static bool waiting = false;
static bool edge_published = false;
static TimestampTz wait_started;

/* An edge of an ended wait that Redis did not take the delete of. */
static bool edge_left = false;

/* One session seen by a walk, and how it was reached. */
typedef struct WalkNode
{
	char	   *owner;
	int			parent;			/* the node that waits for this one, or -1 */
	const char *via;			/* the name parent waits for that this holds */
	char	   *server;
	int			pid;
	char	   *started;		/* of its wait, as its edge says */
	RLKind		kind;
	bool		fair;
	int			n;
	char	  **names;
	bool		waits;			/* has an edge: its wait can be followed */
} WalkNode;

/* One request of a pipeline: a script or a plain command, and its key. */
typedef struct Request
{
	const RedisScript *script;	/* NULL: a plain command, argv as is */
	int			nkeys;
	int			argc;
	const char *argv[RL_MAX_ARGS];
	const char *key;
} Request;

static int
check_interval_ms(void)
{
	return rl_deadlock_timeout < 0 ? DeadlockTimeout : rl_deadlock_timeout;
}

/*
 * How long an edge lives unless refreshed: two check intervals and one
 * command timeout, so that a slow walk does not let it lapse between two
 * checks.
 */
static int64
edge_ttl_ms(void)
{
	return 2 * (int64) check_interval_ms() + rl_command_timeout;
}

static char *
edge_key(const char *owner)
{
	return psprintf("redislock_waits:{%s}", owner);
}

/* This server, as the report of a cycle names it. */
static const char *
server_identity(void)
{
	char		host[256];

	if (cluster_name != NULL && cluster_name[0] != '\0')
		return cluster_name;
	if (gethostname(host, sizeof(host)) != 0)
		strlcpy(host, "localhost", sizeof(host));
	host[sizeof(host) - 1] = '\0';
	return psprintf("%s:%d", host, PostPortNumber);
}

/* When a wait started, in ms since the Unix epoch: an edge's "started". */
static char *
started_text(TimestampTz started)
{
	return rl_int64_arg(started / 1000 +
						(int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) *
						SECS_PER_DAY * 1000);
}

static const char *
kind_label(RLKind kind)
{
	return rl_primitive(kind)->label;
}

static bool
parse_kind(const char *label, RLKind *kind)
{
	static const RLKind kinds[] = {RL_KIND_LOCK, RL_KIND_READ, RL_KIND_WRITE};

	for (int i = 0; i < (int) lengthof(kinds); i++)
		if (strcmp(label, kind_label(kinds[i])) == 0)
		{
			*kind = kinds[i];
			return true;
		}
	return false;
}

/*
 * The order that picks the victim: instance uuid, then session number (as
 * numbers: session 10 comes after session 9). Any total order would do;
 * every server must use the same one.
 */
static int
owner_cmp(const char *a, const char *b)
{
	const char *ca = strrchr(a, ':');
	const char *cb = strrchr(b, ':');
	size_t		la = ca ? (size_t) (ca - a) : strlen(a);
	size_t		lb = cb ? (size_t) (cb - b) : strlen(b);
	int			c = strncmp(a, b, Min(la, lb));
	uint64		na,
				nb;

	if (c != 0)
		return c;
	if (la != lb)
		return la < lb ? -1 : 1;
	na = ca ? strtou64(ca + 1, NULL, 10) : 0;
	nb = cb ? strtou64(cb + 1, NULL, 10) : 0;
	if (na != nb)
		return na < nb ? -1 : 1;
	return strcmp(a, b);
}

static void
add_arg(Request *r, const char *arg)
{
	Assert(r->argc < RL_MAX_ARGS - 3);
	r->argv[r->argc++] = arg;
}

/* A call of wait_holders.lua: who owner, waiting for name, waits for. */
static void
holders_request(Request *r, const char *owner, RLKind kind, bool fair,
				const char *name)
{
	memset(r, 0, sizeof(*r));
	r->script = &rl_script_wait_holders;
	r->nkeys = 3;
	r->key = name;
	add_arg(r, name);
	add_arg(r, queue_key(name));
	add_arg(r, rl_prefixed_key("redislock_rwlock_writer", name));
	add_arg(r, owner);
	add_arg(r, kind_label(kind));
	add_arg(r, fair ? "1" : "0");
}

static void
hgetall_request(Request *r, const char *owner)
{
	memset(r, 0, sizeof(*r));
	r->key = edge_key(owner);
	add_arg(r, "HGETALL");
	add_arg(r, r->key);
}

/* The fields of a read-write lock's hash: who holds it, and how. */
static void
lock_fields_request(Request *r, const char *name)
{
	memset(r, 0, sizeof(*r));
	r->key = name;
	add_arg(r, "HGETALL");
	add_arg(r, name);
}

/* Our own edge, written whole (wait_edge.lua). */
static void
edge_request(Request *r, const RLWaitFor *wf)
{
	memset(r, 0, sizeof(*r));
	r->script = &rl_script_wait_edge;
	r->nkeys = 1;
	r->key = edge_key(rl_owner_id());
	add_arg(r, r->key);
	add_arg(r, rl_int64_arg(edge_ttl_ms()));
	add_arg(r, "server");
	add_arg(r, server_identity());
	add_arg(r, "pid");
	add_arg(r, psprintf("%d", MyProcPid));
	add_arg(r, "started");
	add_arg(r, started_text(wait_started));
	add_arg(r, "kind");
	add_arg(r, kind_label(wf->kind));
	add_arg(r, "fair");
	add_arg(r, wf->fair ? "1" : "0");
	add_arg(r, "every");
	add_arg(r, psprintf("%d", check_interval_ms()));
	add_arg(r, "ttl");
	add_arg(r, rl_int64_arg(edge_ttl_ms()));
	add_arg(r, "n");
	add_arg(r, psprintf("%d", wf->n));
	for (int i = 0; i < wf->n; i++)
	{
		add_arg(r, psprintf("name%d", i + 1));
		add_arg(r, wf->names[i]);
	}
}

static void
build(RLCommand *cmd, const Request *r, bool body)
{
	char	   *nkeys = psprintf("%d", r->nkeys);

	cmd->argc = 0;
	if (r->script != NULL)
	{
		rl_set_arg(cmd, body ? "EVAL" : "EVALSHA", body ? 4 : 7);
		rl_set_arg(cmd, body ? r->script->body : r->script->sha,
				   strlen(body ? r->script->body : r->script->sha));
		rl_set_arg(cmd, nkeys, strlen(nkeys));
	}
	for (int i = 0; i < r->argc; i++)
		rl_set_arg(cmd, r->argv[i], strlen(r->argv[i]));
}

/*
 * Runs n requests in one pipeline, each where its key lives; returns false
 * when Redis could not be reached (see rl_cmd_conn). Every request here
 * reads, or writes our edge whole, so sending them all again after a
 * NOSCRIPT (Redis forgot the scripts) is harmless.
 */
static bool
run_requests(int n, const Request *reqs, RLReply **replies)
{
	RLCommand  *cmds = palloc(sizeof(RLCommand) * Max(n, 1));
	const char **keys = palloc(sizeof(char *) * Max(n, 1));
	bool		again = false;

	for (int body = 0; body < 2; body++)
	{
		for (int i = 0; i < n; i++)
		{
			build(&cmds[i], &reqs[i], body == 1);
			keys[i] = reqs[i].key;
		}
		if (!rl_run_cmds(n, cmds, keys, replies))
		{
			rl_stat_add(RL_STAT_REDIS_ERRORS, 1);
			return false;
		}
		for (int i = 0; i < n; i++)
			again |= rl_is_noscript(replies[i]);
		if (!again)
			break;
	}
	return true;
}

static void
run_or_raise(int n, const Request *reqs, RLReply **replies)
{
	if (!run_requests(n, reqs, replies))
		rl_report(&rl_cmd_conn, ERROR);
}

/* wait_holders.lua's reply: an array of owner ids, or an error. */
static bool
holders_ok(const RLReply *r)
{
	return r->type == REDIS_REPLY_ARRAY &&
		is_array_of(r, r->elements, REDIS_REPLY_STRING);
}

static void
bad_reply(const RLReply *r, const char *what)
{
	if (r->type == REDIS_REPLY_ERROR)
	{
		rl_report_refusal(r->str, what);
		ereport(ERROR,
				(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
				 errmsg("could not check Redis locks for a deadlock"),
				 errdetail_internal("Redis server \"%s\" answered %s: %s",
									rl_server_desc(), what, r->str)));
	}
	ereport(ERROR,
			(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
			 errmsg("could not check Redis locks for a deadlock"),
			 errdetail_internal("Redis server \"%s\" answered %s with an unexpected reply.",
								rl_server_desc(), what)));
}

static const char *
field(const RLReply *r, const char *name)
{
	for (size_t i = 0; i + 1 < r->elements; i += 2)
		if (r->element[i]->type == REDIS_REPLY_STRING &&
			r->element[i + 1]->type == REDIS_REPLY_STRING &&
			strcmp(r->element[i]->str, name) == 0)
			return r->element[i + 1]->str;
	return NULL;
}

/*
 * Reads an edge (HGETALL reply) into node; false when there is none or it
 * is not one we can follow (a kind this version does not know, or a key of
 * another type: a dead end, not a reason to fail the wait).
 */
static bool
parse_edge(const RLReply *r, WalkNode *node)
{
	const char *server,
			   *pid,
			   *started,
			   *kind,
			   *fair,
			   *n;
	int			count;

	if (r->type != REDIS_REPLY_ARRAY || r->elements == 0)
		return false;
	server = field(r, "server");
	pid = field(r, "pid");
	started = field(r, "started");
	kind = field(r, "kind");
	fair = field(r, "fair");
	n = field(r, "n");
	if (!server || !pid || !started || !kind || !fair || !n ||
		!parse_kind(kind, &node->kind))
		return false;
	count = atoi(n);
	if (count < 1 || count > RL_MULTI_MAX)
		return false;
	node->names = palloc(sizeof(char *) * count);
	for (int i = 0; i < count; i++)
	{
		const char *name = field(r, psprintf("name%d", i + 1));

		if (name == NULL)
			return false;
		node->names[i] = pstrdup(name);
	}
	node->server = pstrdup(server);
	node->pid = atoi(pid);
	node->started = pstrdup(started);
	node->fair = strcmp(fair, "1") == 0;
	node->n = count;
	node->waits = true;
	return true;
}

static bool
reply_has(const RLReply *r, const char *owner)
{
	for (size_t i = 0; i < r->elements; i++)
		if (r->element[i]->type == REDIS_REPLY_STRING &&
			strcmp(r->element[i]->str, owner) == 0)
			return true;
	return false;
}

static void
pttl_request(Request *r, const char *owner)
{
	memset(r, 0, sizeof(*r));
	r->key = edge_key(owner);
	add_arg(r, "PTTL");
	add_arg(r, r->key);
}

/*
 * Whether a member of a cycle is still in the wait its edge (HGETALL reply
 * edge, PTTL reply pttl) describes, the one that began at started: for a
 * session of this server the registry says; another server's must have
 * refreshed its edge within its check interval and half of one more (a
 * live waiter refreshes it at each check, as its walk begins).
 */
static bool
still_waits(const char *owner, const char *started, const RLReply *edge,
			const RLReply *pttl)
{
	TimestampTz since;
	const char *every;
	const char *ttl;
	int64		every_ms;

	switch (rl_registry_owner_wait(owner, &since))
	{
		case RL_OWNER_WAITS:
			return strcmp(started_text(since), started) == 0;
		case RL_OWNER_IDLE:
			return false;
		case RL_OWNER_ELSEWHERE:
			break;
	}
	every = field(edge, "every");
	ttl = field(edge, "ttl");
	if (every == NULL || ttl == NULL || pttl->type != REDIS_REPLY_INTEGER ||
		pttl->integer < 0)
		return false;
	every_ms = strtoi64(every, NULL, 10);
	return every_ms > 0 &&
		strtoi64(ttl, NULL, 10) - pttl->integer <= every_ms + every_ms / 2;
}

/*
 * How the next member of a cycle stands in the way of a wait for a read or
 * write hold, from the lock's fields: it reads, it writes, it holds the name
 * as an exclusive lock (no mode), or (a reader's wait) its waiting writer's
 * mark keeps new readers out.
 */
static const char *
rw_hold(const RLReply *fields, const char *owner)
{
	if (fields->type == REDIS_REPLY_ARRAY)
	{
		if (field(fields, psprintf("%s:write", owner)) != NULL)
			return "held for write";
		if (field(fields, owner) != NULL)
			return field(fields, "mode") != NULL ? "held for read" : "held";
	}
	return "kept from new readers by the waiting writer";
}

/*
 * Reads the cycle again in one round trip: every member after us still in
 * the same wait, and every lock of the cycle still held by the next member.
 * holds[i] says how the next member holds what member i waits for.
 */
static bool
cycle_confirmed(int k, WalkNode **cycle, const char **holds)
{
	Request    *reqs = palloc(sizeof(Request) * 4 * k);
	RLReply   **replies = palloc(sizeof(RLReply *) * 4 * k);
	int			n = 0;
	int			rw = 3 * k - 2;

	for (int i = 0; i < k; i++)
		holders_request(&reqs[n++], cycle[i]->owner, cycle[i]->kind,
						cycle[i]->fair, cycle[(i + 1) % k]->via);
	for (int i = 1; i < k; i++)
	{
		hgetall_request(&reqs[n++], cycle[i]->owner);
		pttl_request(&reqs[n++], cycle[i]->owner);
	}
	for (int i = 0; i < k; i++)
		if (cycle[i]->kind == RL_KIND_READ || cycle[i]->kind == RL_KIND_WRITE)
			lock_fields_request(&reqs[n++], cycle[(i + 1) % k]->via);
	run_or_raise(n, reqs, replies);
	for (int i = 0; i < k; i++)
		holds[i] = cycle[i]->kind == RL_KIND_READ || cycle[i]->kind == RL_KIND_WRITE ?
			rw_hold(replies[rw++], cycle[(i + 1) % k]->owner) : "held";
	for (int i = 0; i < k; i++)
	{
		if (!holders_ok(replies[i]))
			bad_reply(replies[i], "the holders of a lock");
		if (!reply_has(replies[i], cycle[(i + 1) % k]->owner))
			return false;
	}
	for (int i = 1; i < k; i++)
	{
		const RLReply *edge = replies[k + 2 * (i - 1)];
		const RLReply *pttl = replies[k + 2 * (i - 1) + 1];
		const char *started;

		if (edge->type != REDIS_REPLY_ARRAY)
			return false;
		started = field(edge, "started");
		if (started == NULL || strcmp(started, cycle[i]->started) != 0 ||
			!still_waits(cycle[i]->owner, started, edge, pttl))
			return false;
	}
	return true;
}

/* Raises 40P01 for the cycle, us first. */
pg_noreturn static void
report_cycle(int k, WalkNode **cycle, const char **holds);

static void
report_cycle(int k, WalkNode **cycle, const char **holds)
{
	StringInfoData d;

	initStringInfo(&d);
	for (int i = 0; i < k; i++)
	{
		WalkNode   *next = cycle[(i + 1) % k];

		if (i == 0)
			appendStringInfo(&d, "Session %d on server \"%s\" waits for ",
							 cycle[0]->pid, cycle[0]->server);
		else
			appendStringInfoString(&d, ", which waits for ");
		appendStringInfo(&d, "%s \"%s\" %s by session %d",
						 rl_primitive(cycle[i]->kind)->noun, next->via,
						 holds[i], next->pid);
		if (i + 1 < k)
			appendStringInfo(&d, " on server \"%s\"", next->server);
	}
	appendStringInfoChar(&d, '.');
	ereport(ERROR,
			(errcode(ERRCODE_T_R_DEADLOCK_DETECTED),
			 errmsg("deadlock detected"),
			 errdetail("%s", d.data),
			 errhint("Session-scope Redis locks this session took earlier stay held; release them or retry the transaction.")));
}

/*
 * Walks the graph from our wait, through owners smaller than ours only;
 * raises 40P01 when it comes back to us along a cycle confirmed by a second
 * reading. Level 0's round trip also publishes (or refreshes) our edge.
 */
static void
walk(const RLWaitFor *wf)
{
	WalkNode   *nodes = palloc0(sizeof(WalkNode) * WALK_MAX_NODES);
	int		   *frontier = palloc(sizeof(int) * WALK_MAX_NODES);
	int		   *next = palloc(sizeof(int) * WALK_MAX_NODES);
	int			nfrontier = 1;
	int			nnodes = 1;
	const char *me = rl_owner_id();

	nodes[0].owner = pstrdup(me);
	nodes[0].parent = -1;
	nodes[0].server = pstrdup(server_identity());
	nodes[0].pid = MyProcPid;
	nodes[0].started = started_text(wait_started);
	nodes[0].kind = wf->kind;
	nodes[0].fair = wf->fair;
	nodes[0].n = wf->n;
	nodes[0].names = (char **) wf->names;
	nodes[0].waits = true;
	frontier[0] = 0;

	for (int depth = 0; depth < WALK_MAX_DEPTH && nfrontier > 0; depth++)
	{
		int			nreq = 0;
		int			nnext = 0;
		int			first = nnodes;
		int			cap = depth == 0 ? 1 : 0;
		Request    *reqs;
		RLReply   **replies;
		int		   *of_node;
		int		   *of_name;

		for (int f = 0; f < nfrontier; f++)
			cap += nodes[frontier[f]].n;
		reqs = palloc(sizeof(Request) * cap);
		replies = palloc(sizeof(RLReply *) * cap);
		of_node = palloc(sizeof(int) * cap);
		of_name = palloc(sizeof(int) * cap);
		if (depth == 0)
		{
			edge_request(&reqs[nreq], wf);
			of_node[nreq++] = -1;
		}
		for (int f = 0; f < nfrontier; f++)
		{
			WalkNode   *w = &nodes[frontier[f]];

			for (int j = 0; j < w->n; j++)
			{
				holders_request(&reqs[nreq], w->owner, w->kind, w->fair,
								w->names[j]);
				of_node[nreq] = frontier[f];
				of_name[nreq++] = j;
			}
		}
		run_or_raise(nreq, reqs, replies);
		if (depth == 0)
		{
			if (replies[0]->type == REDIS_REPLY_ERROR)
				bad_reply(replies[0], "the wait-for edge of this session");
			edge_published = true;
			edge_left = false;	/* written over by this wait's */
		}

		/* the holders: back at us, or new sessions to look at */
		for (int q = depth == 0 ? 1 : 0; q < nreq; q++)
		{
			if (!holders_ok(replies[q]))
				bad_reply(replies[q], "the holders of a lock");
			for (size_t h = 0; h < replies[q]->elements; h++)
			{
				const char *holder = replies[q]->element[h]->str;
				bool		seen = false;

				if (strcmp(holder, me) == 0)
				{
					WalkNode   *path[WALK_MAX_DEPTH + 1];
					const char *holds[WALK_MAX_DEPTH + 1];
					int			k = 0;

					/* the path from us to the closing waiter, then us */
					for (int v = of_node[q]; v >= 0; v = nodes[v].parent)
						path[k++] = &nodes[v];
					for (int i = 0; i < k / 2; i++)
					{
						WalkNode   *t = path[i];

						path[i] = path[k - 1 - i];
						path[k - 1 - i] = t;
					}
					nodes[0].via = nodes[of_node[q]].names[of_name[q]];
					if (cycle_confirmed(k, path, holds))
						report_cycle(k, path, holds);
					continue;
				}
				if (owner_cmp(holder, me) > 0)
					continue;	/* that cycle is its largest member's */
				for (int v = 0; v < nnodes && !seen; v++)
					seen = strcmp(nodes[v].owner, holder) == 0;
				if (seen || nnodes == WALK_MAX_NODES)
					continue;
				nodes[nnodes].owner = pstrdup(holder);
				nodes[nnodes].parent = of_node[q];
				nodes[nnodes].via = nodes[of_node[q]].names[of_name[q]];
				nnodes++;
			}
		}
		if (nnodes == first)
			return;

		/* their edges: which of them wait, and for what */
		nreq = nnodes - first;
		reqs = palloc(sizeof(Request) * nreq);
		replies = palloc(sizeof(RLReply *) * nreq);
		for (int v = first; v < nnodes; v++)
			hgetall_request(&reqs[v - first], nodes[v].owner);
		run_or_raise(nreq, reqs, replies);
		for (int v = first; v < nnodes; v++)
			if (parse_edge(replies[v - first], &nodes[v]))
				next[nnext++] = v;
		memcpy(frontier, next, sizeof(int) * nnext);
		nfrontier = nnext;
	}
}

/*
 * A wait begins (the hook every primitive's wait goes through): publishes
 * it in the registry for redis_lock_waits, and returns when the first
 * deadlock check is due (DT_NOEND: never). Nothing reaches Redis before
 * then.
 */
TimestampTz
rl_deadlock_wait_begin(const RLWaitFor *wf, TimestampTz start)
{
	waiting = true;
	edge_published = false;
	wait_started = start;
	rl_registry_wait_begin(wf->kind, wf->fair, wf->n, wf->names, start);
	if (check_interval_ms() <= 0 || rl_mode() == RL_MODE_REDLOCK)
		return DT_NOEND;
	return TimestampTzPlusMilliseconds(start, check_interval_ms());
}

/*
 * A check of the wait that is still blocked: publishes or refreshes our
 * edge and walks the graph; raises 40P01 if we are a cycle's victim.
 * Returns when the next check is due.
 */
TimestampTz
rl_deadlock_check(const RLWaitFor *wf)
{
	Assert(waiting);
	rl_stat_add(RL_STAT_DEADLOCK_CHECKS, 1);
	walk(wf);
	if (check_interval_ms() <= 0)
		return DT_NOEND;
	return TimestampTzPlusMilliseconds(GetCurrentTimestamp(), check_interval_ms());
}

static void
delete_request(Request *r)
{
	memset(r, 0, sizeof(*r));
	r->key = edge_key(rl_owner_id());
	add_arg(r, "DEL");
	add_arg(r, r->key);
}

static bool
delete_edge(void *arg)
{
	Request		r;
	RLReply    *reply;

	delete_request(&r);
	return run_requests(1, &r, &reply);
}

/*
 * The wait ended, whichever way: our edge goes (if the wait published
 * one), quietly and within CLEANUP_MS, since this may run on the way out
 * of an ERROR; if Redis cannot take it now, the session's next call that
 * reaches Redis deletes it (or its TTL removes it first). Until then no
 * cycle through it is confirmed: the registry says we no longer wait.
 */
void
rl_deadlock_wait_end(void)
{
	if (!waiting)
		return;
	waiting = false;
	rl_registry_wait_end();
	if (!edge_published)
		return;
	edge_published = false;
	edge_left = (rl_mode() != RL_MODE_CLUSTER && !rl_healthy(&rl_cmd_conn)) ||
		!rl_quietly(delete_edge, NULL);
}

/*
 * At the start of a SQL call: deletes the edge an ended wait left behind,
 * quietly (rl_quietly), so that a call Redis need not answer (a local
 * re-entry, say) is not failed by it; if Redis cannot take it now, it is
 * left for the next call. Nothing is confirmed through it meanwhile: the
 * registry says we no longer wait.
 */
void
rl_deadlock_settle(void)
{
	if (!edge_left)
		return;
	Assert(!waiting);
	edge_left = !rl_quietly(delete_edge, NULL);
}

/*
 * Who each of n waiting sessions of this server waits for: holders[i] gets
 * the owner ids (nholders[i] of them), from one pipelined round trip.
 * Returns false when that is not known: Redis could not be reached (the
 * views still list the waits), or Redlock, where it takes a majority.
 */
bool
rl_waits_holders(int n, const RLWaitCopy *waits, char ***holders, int *nholders)
{
	int			nreq = 0;
	Request    *reqs;
	RLReply   **replies;

	if (rl_mode() == RL_MODE_REDLOCK)
		return false;
	for (int i = 0; i < n; i++)
		nreq += waits[i].nstored;
	reqs = palloc(sizeof(Request) * Max(nreq, 1));
	replies = palloc(sizeof(RLReply *) * Max(nreq, 1));
	nreq = 0;
	for (int i = 0; i < n; i++)
	{
		const char *name = waits[i].names;

		for (int j = 0; j < waits[i].nstored; j++)
		{
			holders_request(&reqs[nreq++], waits[i].owner,
							(RLKind) waits[i].kind, waits[i].fair, name);
			name += strlen(name) + 1;
		}
	}
	if (nreq > 0 && !run_requests(nreq, reqs, replies))
		return false;
	for (int q = 0; q < nreq; q++)
		if (!holders_ok(replies[q]))
			return false;		/* an error reply (OOM, BUSY): not known */
	nreq = 0;
	for (int i = 0; i < n; i++)
	{
		int			cap = 0;

		for (int j = 0; j < waits[i].nstored; j++)
			cap += replies[nreq + j]->elements;
		holders[i] = palloc(sizeof(char *) * Max(cap, 1));
		nholders[i] = 0;
		for (int j = 0; j < waits[i].nstored; j++, nreq++)
		{
			for (size_t h = 0; h < replies[nreq]->elements; h++)
			{
				const char *owner = replies[nreq]->element[h]->str;
				bool		seen = false;

				for (int k = 0; k < nholders[i] && !seen; k++)
					seen = strcmp(holders[i][k], owner) == 0;
				if (!seen)
					holders[i][nholders[i]++] = pstrdup(owner);
			}
		}
	}
	return true;
}
