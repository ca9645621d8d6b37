/*
 * route.c
 *	  Where each Redis request goes: the one server (directly or behind
 *	  sentinels), the cluster node that serves its key's hash slot, or every
 *	  Redlock master at once (the fan-out itself is in fanout.c).
 *
 * A cluster's slot map comes from CLUSTER SLOTS and is corrected by MOVED
 * replies; ASK sends one request to the importing node during a slot
 * migration. The nodes known are those of the last slot map (plus seeds and
 * redirection targets met since): each map replaces them, so nodes that
 * come back at new addresses do not pile up. Requests for different nodes
 * go out in parallel. Failures are copied to rl_cmd_conn, so that callers
 * report them as on one server.
 *
 * src/route.c
 */
#include "postgres.h"

#include <hiredis/hiredis.h>

#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "channel.h"
#include "compat.h"
#include "redislock.h"
#include "route.h"

#define CLUSTER_SLOTS 16384

/* MOVED redirections one request may follow before we call the cluster unstable. */
#define MAX_REDIRECTS 16

/* Pause between tries while a cluster fails over or a slot is in flux. */
#define RETRY_MS 100

/* The cluster as this backend knows it. */
static RLConn **cluster_nodes = NULL;	/* in TopMemoryContext */
static int	ncluster_nodes = 0;
static int	cluster_nodes_size = 0;
static int16 *slot_owner = NULL;	/* index into cluster_nodes, or -1 */
static bool map_loaded = false;
static bool cluster_sharded = false;	/* SPUBLISH/SSUBSCRIBE usable */
static bool cluster_unanswered = false; /* a node that may have received a
										 * request of the last rl_run() failed */
static uint64 cluster_generation = 0;

/*
 * Until when a request whose slot is migrating (TRYAGAIN) is tried again:
 * the end of the wait under way (rl_route_wait_out), else 0 and only
 * command_timeout.
 */
static TimestampTz migration_patience = 0;

/* CRC16-CCITT (XMODEM), as Redis Cluster hashes keys. */
static uint16
crc16(const char *buf, size_t len)
{
	uint16		crc = 0;

	for (size_t i = 0; i < len; i++)
	{
		crc ^= (uint16) ((unsigned char) buf[i]) << 8;
		for (int b = 0; b < 8; b++)
			crc = (crc & 0x8000) ? (uint16) ((crc << 1) ^ 0x1021) : (uint16) (crc << 1);
	}
	return crc;
}

/* The hash slot of a key: only its {hash tag} counts, if it has one. */
static int
key_slot(const char *key)
{
	size_t		len = strlen(key);
	const char *open = memchr(key, '{', len);

	if (open != NULL)
	{
		const char *close = memchr(open + 1, '}', len - (open + 1 - key));

		if (close != NULL && close > open + 1)
			return crc16(open + 1, close - open - 1) % CLUSTER_SLOTS;
	}
	return crc16(key, len) % CLUSTER_SLOTS;
}

int
rl_route_slot(const char *key)
{
	return key_slot(key);
}

RLMode
rl_mode(void)
{
	RLMode		mode;
	const RLNode *nodes;
	int			n;
	const char *problem;

	(void) rl_config(&mode, &nodes, &n, &problem);
	return mode;
}

const char *
rl_mode_name(void)
{
	switch (rl_mode())
	{
		case RL_MODE_SINGLE:
			return "single";
		case RL_MODE_SENTINEL:
			return "sentinel";
		case RL_MODE_CLUSTER:
			return "cluster";
		case RL_MODE_REDLOCK:
			return "redlock";
	}
	return "single";
}

static void
copy_failure(RLConn *to, const RLConn *from)
{
	to->failure = from->failure;
	strlcpy(to->errserver, from->errserver, sizeof(to->errserver));
	strlcpy(to->errdetail, from->errdetail, sizeof(to->errdetail));
	to->errhint = from->errhint;
}

/* Copies the failure of c to rl_cmd_conn, where callers look for it. */
static bool
failed_on(const RLConn *c)
{
	if (c != &rl_cmd_conn)
		copy_failure(&rl_cmd_conn, c);
	return false;
}

static void
pause_briefly(void)
{
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 RETRY_MS, RL_WAIT_EVENT);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
}

/* Closes and frees a node's connection. */
static void
drop_node(RLConn *c)
{
	rl_disconnect(c);
	pfree(c);
}

/* Drops what we knew of the cluster when the settings changed. */
static void
cluster_check_settings(void)
{
	if (cluster_generation == rl_settings_generation)
		return;
	for (int i = 0; i < ncluster_nodes; i++)
		drop_node(cluster_nodes[i]);
	ncluster_nodes = 0;
	map_loaded = false;
	cluster_generation = rl_settings_generation;
	if (slot_owner == NULL)
		slot_owner = MemoryContextAlloc(TopMemoryContext,
										sizeof(int16) * CLUSTER_SLOTS);
	for (int s = 0; s < CLUSTER_SLOTS; s++)
		slot_owner[s] = -1;
}

/* The index of host:port in nodes, or -1. */
static int
find_node(RLConn **nodes, int n, const char *host, int port)
{
	for (int i = 0; i < n; i++)
		if (nodes[i] != NULL && nodes[i]->node.port == port &&
			strcmp(nodes[i]->node.host, host) == 0)
			return i;
	return -1;
}

static RLConn *
new_node(const char *host, int port)
{
	RLConn	   *c = MemoryContextAllocZero(TopMemoryContext, sizeof(RLConn));

	c->role = "cluster";
	c->pinned = true;
	strlcpy(c->node.host, host, sizeof(c->node.host));
	c->node.port = port;
	snprintf(c->node.desc, sizeof(c->node.desc), "%s:%d", host, port);
	return c;
}

/*
 * The node at host:port, added to those we know if new (the table grows as
 * needed; the next slot map trims it); -1 for a host name too long.
 */
static int
cluster_node(const char *host, int port)
{
	int			i = find_node(cluster_nodes, ncluster_nodes, host, port);

	if (i >= 0)
		return i;
	if (strlen(host) >= sizeof(cluster_nodes[0]->node.host) ||
		ncluster_nodes == PG_INT16_MAX)
		return -1;
	if (ncluster_nodes == cluster_nodes_size)
	{
		cluster_nodes_size = Max(cluster_nodes_size * 2, 16);
		cluster_nodes = cluster_nodes == NULL ?
			MemoryContextAlloc(TopMemoryContext, sizeof(RLConn *) * cluster_nodes_size) :
			repalloc(cluster_nodes, sizeof(RLConn *) * cluster_nodes_size);
	}
	cluster_nodes[ncluster_nodes] = new_node(host, port);
	return ncluster_nodes++;
}

/*
 * Is r a CLUSTER SLOTS reply we can read? Entries are [first slot, last
 * slot, [host, port, id...], replicas...].
 */
static bool
slots_reply_ok(const RLReply *r)
{
	if (r->type != REDIS_REPLY_ARRAY)
		return false;
	for (size_t e = 0; e < r->elements; e++)
	{
		const RLReply *range = r->element[e];
		const RLReply *master;

		if (range->type != REDIS_REPLY_ARRAY || range->elements < 3 ||
			range->element[0]->type != REDIS_REPLY_INTEGER ||
			range->element[1]->type != REDIS_REPLY_INTEGER ||
			range->element[2]->type != REDIS_REPLY_ARRAY ||
			range->element[2]->elements < 2)
			return false;
		master = range->element[2];
		if (master->element[0]->type != REDIS_REPLY_STRING ||
			master->element[1]->type != REDIS_REPLY_INTEGER ||
			master->element[0]->len >= sizeof(cluster_nodes[0]->node.host))
			return false;
	}
	return true;
}

/*
 * Replaces the slot map and the nodes we know with those of a CLUSTER SLOTS
 * reply (checked by slots_reply_ok) from the node at index asked; an empty
 * host means that node. Connections to nodes still in the map are kept, the
 * others closed.
 */
static void
load_slots(int asked, const RLReply *r)
{
	RLNode		self = cluster_nodes[asked]->node;
	int			size = Max((int) r->elements, 16);
	RLConn	  **fresh = MemoryContextAlloc(TopMemoryContext, sizeof(RLConn *) * size);
	int			n = 0;

	for (int s = 0; s < CLUSTER_SLOTS; s++)
		slot_owner[s] = -1;
	for (size_t e = 0; e < r->elements; e++)
	{
		const RLReply *range = r->element[e];
		const RLReply *master = range->element[2];
		const char *host = master->element[0]->len == 0 ?
			self.host : master->element[0]->str;
		int			port = master->element[0]->len == 0 ?
			self.port : (int) master->element[1]->integer;
		int			owner = find_node(fresh, n, host, port);

		if (owner < 0)
		{
			int			old = find_node(cluster_nodes, ncluster_nodes, host, port);

			owner = n++;
			fresh[owner] = old >= 0 ? cluster_nodes[old] : new_node(host, port);
			if (old >= 0)
				cluster_nodes[old] = NULL;
		}
		for (long long s = range->element[0]->integer;
			 s <= range->element[1]->integer && s < CLUSTER_SLOTS; s++)
			if (s >= 0)
				slot_owner[s] = (int16) owner;
	}
	for (int i = 0; i < ncluster_nodes; i++)
		if (cluster_nodes[i] != NULL)
			drop_node(cluster_nodes[i]);
	pfree(cluster_nodes);
	cluster_nodes = fresh;
	ncluster_nodes = n;
	cluster_nodes_size = size;
}

/* The node whose slot map was loaded last: the first asked next time. */
static int	map_source = 0;

/* The least time a node gets to answer CLUSTER SLOTS. */
#define MIN_NODE_SHARE_MS 200

/*
 * Loads the slot map, asking the nodes we know and then the seeds of
 * redislock.cluster_nodes until one answers or command_timeout has passed. In the same round trip we learn
 * whether the cluster has sharded pub/sub (Redis 7).
 */
static bool
refresh_map(void)
{
	RLMode		mode;
	const RLNode *seeds;
	int			nseeds;
	const char *problem;
	RLCommand	cmds[2];
	TimestampTz until = rl_command_deadline();

	if (!rl_config(&mode, &seeds, &nseeds, &problem))
		return rl_fail_config(&rl_cmd_conn);
	cluster_check_settings();
	for (int k = 0; k < nseeds; k++)
		(void) cluster_node(seeds[k].host, seeds[k].port);

	memset(cmds, 0, sizeof(cmds));
	rl_set_arg(&cmds[0], "CLUSTER", 7);
	rl_set_arg(&cmds[0], "SLOTS", 5);
	rl_set_arg(&cmds[1], "COMMAND", 7);
	rl_set_arg(&cmds[1], "INFO", 4);
	rl_set_arg(&cmds[1], "SPUBLISH", 8);
	rl_cmd_conn.failure = RLF_NONE;
	for (int k = 0; k < ncluster_nodes && GetCurrentTimestamp() < until; k++)
	{
		/*
		 * From the node that answered last, each node with its share of the
		 * time: one that is stopped must not take all of it (the watchdog
		 * would renew nothing while its leases run out).
		 */
		int			i = (map_source + k) % ncluster_nodes;
		RLConn	   *c = cluster_nodes[i];
		RLReply    *replies[2];
		TimestampTz share;
		TimestampTz old;
		bool		ok;

		share = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
											Max(rl_command_timeout / ncluster_nodes,
												MIN_NODE_SHARE_MS));
		old = rl_limit_waits(Min(until, share));
		ok = rl_exec(c, 2, cmds, replies);
		rl_unlimit_waits(old);
		if (!ok)
		{
			failed_on(c);
			continue;
		}
		if (replies[0]->type == REDIS_REPLY_ERROR)
		{
			rl_fail_on(&rl_cmd_conn, RLF_CLUSTER, rl_server_desc(),
					   "Redis server \"%s\" cannot serve as a cluster node: %s",
					   c->node.desc, replies[0]->str);
			/* an ACL without CLUSTER SLOTS: say what to grant */
			rl_cmd_conn.errhint = rl_refusal_hint(replies[0]->str);
			return false;
		}
		if (!slots_reply_ok(replies[0]))
			return rl_fail_on(&rl_cmd_conn, RLF_PROTOCOL, c->node.desc,
							  "Unexpected reply to CLUSTER SLOTS.");
		if (replies[1]->type == REDIS_REPLY_ERROR)
		{
			/*
			 * Guessing would let processes that asked before an ACL change
			 * and processes that ask after it disagree on the pub/sub kind,
			 * and a waiter would then never hear its release.
			 */
			rl_fail_on(&rl_cmd_conn, RLF_CLUSTER, rl_server_desc(),
					   "Redis server \"%s\" did not say whether it has sharded pub/sub: %s",
					   c->node.desc, replies[1]->str);
			rl_cmd_conn.errhint = rl_refusal_hint(replies[1]->str);
			return false;
		}
		map_source = i;
		load_slots(i, replies[0]);
		cluster_sharded = replies[1]->type == REDIS_REPLY_ARRAY &&
			replies[1]->elements > 0 &&
			replies[1]->element[0]->type == REDIS_REPLY_ARRAY;
		map_loaded = true;
		return true;
	}
	if (rl_cmd_conn.failure == RLF_NONE)
	{
		rl_fail_on(&rl_cmd_conn, RLF_CONFIG, rl_server_desc(),
				   "redislock.cluster_nodes names no node");
		rl_cmd_conn.errhint = "Name the host:port of one or more nodes of the cluster.";
		return false;
	}
	return rl_fail_on(&rl_cmd_conn, rl_cmd_conn.failure, rl_server_desc(),
					  "No node of the Redis cluster answered; the last: %s",
					  rl_failure_text(&rl_cmd_conn));
}

/* Loads the slot map if we have none (that rebuilds the node table). */
static bool
ensure_map(void)
{
	cluster_check_settings();
	return map_loaded || refresh_map();
}

/* The node serving slot, loading the map if needed; -1 if none does. */
static int
slot_node(int slot)
{
	if (!ensure_map())
		return -2;
	return slot_owner[slot];
}

/* Parses the "<slot> <host>:<port>" of a MOVED or ASK error reply. */
static bool
redirect_target(const char *err, int *slot, RLNode *to)
{
	const char *p = strchr(err, ' ');
	const char *addr;
	const char *colon;

	if (p == NULL)
		return false;
	*slot = atoi(p + 1);
	addr = strchr(p + 1, ' ');
	if (addr == NULL || *slot < 0 || *slot >= CLUSTER_SLOTS)
		return false;
	addr++;
	colon = strrchr(addr, ':');
	if (colon == NULL || (size_t) (colon - addr) >= sizeof(to->host))
		return false;
	memcpy(to->host, addr, colon - addr);
	to->host[colon - addr] = '\0';
	to->port = atoi(colon + 1);
	return to->port > 0;
}

/*
 * One pending request of cluster_exec(). An ASK target is kept as an
 * address: the node table may be rebuilt before the request goes out.
 */
typedef struct Pending
{
	int			index;			/* into the caller's commands */
	int			ncmds;			/* it and the keyless ones that ride with it */
	int			slot;
	bool		ask;			/* an ASK sent it to ask_to */
	RLNode		ask_to;
	int			redirects;
} Pending;

/*
 * Sends the pending requests, each to the node of its slot (or its ASK
 * target, preceded by ASKING), one pipeline per node, all nodes at once.
 * Replies that are redirections or say the cluster is in flux put the
 * request back on the pending list. Returns false if a node failed.
 */
static bool
cluster_round(int npending, Pending *pending, const RLCommand *cmds,
			  RLReply **replies, int *nleft, bool *retry_later, TimestampTz until)
{
	RLBatch    *batches;
	Pending    *next = palloc(sizeof(Pending) * Max(npending, 1));
	int		   *batch_of;
	int		  **origin = palloc0(sizeof(int *) * Max(npending, 1));
	int			nbatches = 0;
	int			left = 0;
	int			room = 0;
	bool		ok = true;

	/* before any node is looked up: loading the map rebuilds the table */
	if (!ensure_map())
		return false;
	batches = palloc0(sizeof(RLBatch) * Max(npending, 1));
	/* ASK targets may add a node each */
	batch_of = palloc(sizeof(int) * (ncluster_nodes + npending));
	for (int i = 0; i < ncluster_nodes + npending; i++)
		batch_of[i] = -1;
	for (int p = 0; p < npending; p++)
		room += pending[p].ncmds + 1;	/* + ASKING */
	for (int p = 0; p < npending; p++)
	{
		int			node = pending[p].ask ?
			cluster_node(pending[p].ask_to.host, pending[p].ask_to.port) :
			slot_owner[pending[p].slot];
		RLBatch    *b;

		if (node < 0)
			return rl_fail_on(&rl_cmd_conn, RLF_CLUSTER, rl_server_desc(),
							  "Hash slot %d is not served by any node.",
							  pending[p].slot);
		if (batch_of[node] < 0)
		{
			batch_of[node] = nbatches;
			batches[nbatches].conn = cluster_nodes[node];
			batches[nbatches].cmds = palloc0(sizeof(RLCommand) * room);
			batches[nbatches].replies = palloc(sizeof(RLReply *) * room);
			origin[nbatches] = palloc(sizeof(int) * room);
			nbatches++;
		}
		b = &batches[batch_of[node]];
		if (pending[p].ask)
		{
			RLCommand  *asking = (RLCommand *) &b->cmds[b->ncmds];

			rl_set_arg(asking, "ASKING", 6);
			origin[batch_of[node]][b->ncmds++] = -1;
		}
		for (int c = 0; c < pending[p].ncmds; c++)
		{
			((RLCommand *) b->cmds)[b->ncmds] = cmds[pending[p].index + c];
			origin[batch_of[node]][b->ncmds++] = c == 0 ? p : -1;
		}
	}

	(void) rl_exec_parallel(nbatches, batches, until, nbatches);

	for (int bi = 0; bi < nbatches; bi++)
	{
		RLBatch    *b = &batches[bi];

		for (int k = 0; k < b->ncmds; k++)
		{
			int			p = origin[bi][k];
			Pending    *pd;
			RLReply    *r;
			int			slot;

			if (p < 0)
				continue;
			pd = &pending[p];
			if (!b->ok)
			{
				/* the node may be failing over: ask the cluster again */
				cluster_unanswered |= b->conn->maybe_delivered;
				pd->ask = false;
				next[left++] = *pd;
				*retry_later = true;
				map_loaded = false;
				ok = failed_on(b->conn);
				continue;
			}
			r = b->replies[k];
			pd->ask = false;
			if (r->type == REDIS_REPLY_ERROR &&
				(strncmp(r->str, "MOVED ", 6) == 0 || strncmp(r->str, "ASK ", 4) == 0))
			{
				RLNode		to;
				bool		valid = redirect_target(r->str, &slot, &to);
				int			target = -1;

				/* only MOVED counts: ASK then TRYAGAIN repeats until a migration ends */
				if (valid && r->str[0] == 'M')
					target = cluster_node(to.host, to.port);
				if (!valid || (r->str[0] == 'M' && (target < 0 || ++pd->redirects > MAX_REDIRECTS)))
					return rl_fail_on(&rl_cmd_conn, RLF_CLUSTER, rl_server_desc(),
									  "The cluster keeps redirecting a request for hash slot %d: %s",
									  pd->slot, r->str);
				if (r->str[0] == 'M')
				{
					slot_owner[slot] = (int16) target;
					map_loaded = false;
				}
				else
				{
					pd->ask = true;
					pd->ask_to = to;
				}
				next[left++] = *pd;
			}
			else if (r->type == REDIS_REPLY_ERROR &&
					 strncmp(r->str, "TRYAGAIN", 8) == 0)
			{
				rl_fail_on(&rl_cmd_conn, RLF_MIGRATING, rl_server_desc(),
						   "Hash slot %d is migrating between cluster nodes: %s",
						   pd->slot, r->str);
				next[left++] = *pd;
				*retry_later = true;
			}
			else if (r->type == REDIS_REPLY_ERROR &&
					 strncmp(r->str, "CLUSTERDOWN", 11) == 0)
			{
				rl_fail_on(&rl_cmd_conn, RLF_CLUSTER, rl_server_desc(),
						   "Hash slot %d cannot be served now: %s",
						   pd->slot, r->str);
				next[left++] = *pd;
				*retry_later = true;
				map_loaded = false;
			}
			else
				for (int c = 0; c < pd->ncmds; c++)
					replies[pd->index + c] = b->replies[k + c];
		}
	}
	memcpy(pending, next, sizeof(Pending) * left);
	*nleft = left;
	return ok;
}

/*
 * Sets when the wait under way ends (0: no wait): until then a slot in
 * migration is waited out, not only for command_timeout. Returns the value
 * it replaces, for the caller to restore.
 */
TimestampTz
rl_route_wait_out(TimestampTz until)
{
	TimestampTz previous = migration_patience;

	migration_patience = until;
	return previous;
}

/*
 * Runs cmds on the cluster, each on the node serving keys[i], following
 * MOVED and ASK, and retrying every RETRY_MS while nodes fail over or the
 * cluster is down, until redislock.command_timeout. A slot in migration
 * (TRYAGAIN) is waited out until the end of a wait under way (see
 * rl_route_wait_out): command_timeout then counts from the last round that
 * met only the migration, so any other failure still ends it. A command
 * whose key is NULL rides with the command before it: same node, same
 * pipeline, and sent again with it whenever that one is redirected or
 * retried.
 */
static bool
cluster_exec(int n, const RLCommand *cmds, const char *const *keys, RLReply **replies)
{
	Pending    *pending = palloc(sizeof(Pending) * Max(n, 1));
	int			npending = 0;
	TimestampTz until = rl_command_deadline();

	Assert(n == 0 || keys[0] != NULL);
	for (int i = 0; i < n; i++)
	{
		if (keys[i] == NULL)
		{
			pending[npending - 1].ncmds++;
			continue;
		}
		pending[npending].index = i;
		pending[npending].ncmds = 1;
		pending[npending].slot = key_slot(keys[i]);
		pending[npending].ask = false;
		pending[npending].redirects = 0;
		npending++;
	}
	rl_cmd_conn.failure = RLF_NONE;
	while (npending > 0)
	{
		bool		retry_later = false;
		int			left = 0;

		if (!cluster_round(npending, pending, cmds, replies, &left, &retry_later, until) &&
			!retry_later)
			return false;
		npending = left;
		if (npending == 0)
			return true;
		/* while a wait lasts, a round that met only a migration is not counted */
		if (rl_cmd_conn.failure == RLF_MIGRATING && migration_patience != 0)
			until = Max(until, Min(rl_command_deadline(), migration_patience));
		if (GetCurrentTimestamp() + RETRY_MS * 1000 >= until)
			return rl_cmd_conn.failure != RLF_NONE ? false :
				rl_fail_on(&rl_cmd_conn, RLF_CLUSTER, rl_server_desc(),
						   "The cluster did not settle within redislock.command_timeout (%d ms).",
						   rl_command_timeout);
		if (retry_later)
			pause_briefly();
	}
	return true;
}

/* rl_run() on a cluster: EVALSHA, and EVAL where a node lacks the script. */
static bool
cluster_eval(int n, const RLEval *evals, RLReply **replies)
{
	RLCommand  *cmds = palloc(sizeof(RLCommand) * Max(n, 1));
	const char **keys = palloc(sizeof(char *) * Max(n, 1));
	int		   *retry = palloc(sizeof(int) * Max(n, 1));
	int			nretry = 0;
	RLReply   **again;

	for (int i = 0; i < n; i++)
	{
		rl_build_eval(&cmds[i], &evals[i], false);
		keys[i] = evals[i].keys[0];
	}
	if (!cluster_exec(n, cmds, keys, replies))
		return false;
	for (int i = 0; i < n; i++)
		if (rl_is_noscript(replies[i]))
		{
			rl_build_eval(&cmds[nretry], &evals[i], true);
			keys[nretry] = evals[i].keys[0];
			retry[nretry++] = i;
		}
	if (nretry == 0)
		return true;
	again = palloc(sizeof(RLReply *) * nretry);
	if (!cluster_exec(nretry, cmds, keys, again))
		return false;
	for (int j = 0; j < nretry; j++)
		replies[retry[j]] = again[j];
	return true;
}

/*
 * Runs scripts on the single server or the cluster (not Redlock, whose
 * callers need every node's reply: rl_run_all). On failure, rl_cmd_conn
 * says why.
 */
bool
rl_run(int n, const RLEval *evals, RLReply **replies)
{
	Assert(rl_mode() != RL_MODE_REDLOCK);
	cluster_unanswered = false;
	if (rl_mode() == RL_MODE_CLUSTER)
		return cluster_eval(n, evals, replies);
	return rl_eval(&rl_cmd_conn, n, evals, replies);
}

/* Runs plain commands; on a cluster each goes where keys[i] lives. */
bool
rl_run_cmds(int n, const RLCommand *cmds, const char *const *keys, RLReply **replies)
{
	Assert(rl_mode() != RL_MODE_REDLOCK);
	if (rl_mode() == RL_MODE_CLUSTER)
		return cluster_exec(n, cmds, keys, replies);
	return rl_exec(&rl_cmd_conn, n, cmds, replies);
}

/*
 * Runs script e and then the keyless command then in one pipeline on the
 * connection that serves e's key, and fills replies[0] and replies[1]. The
 * two are never separated: a retry on a new connection or a new master, or
 * after a cluster redirection, sends both again, so that then (a WAIT) always
 * follows the script's writes on the connection that made them. A script
 * Redis has forgotten is sent again as EVAL, with then after it.
 */
bool
rl_run_then(const RLEval *e, const RLCommand *then, RLReply **replies)
{
	RLCommand	cmds[2];
	const char *keys[2] = {e->keys[0], NULL};

	Assert(rl_mode() != RL_MODE_REDLOCK);
	for (int body = 0; body < 2; body++)
	{
		rl_build_eval(&cmds[0], e, body == 1);
		cmds[1] = *then;
		if (!rl_run_cmds(2, cmds, keys, replies))
			return false;
		if (!rl_is_noscript(replies[0]))
			break;
	}
	return true;
}

/*
 * The command scripts publish unlock messages with: SPUBLISH on a cluster
 * with sharded pub/sub (as Redisson does there), else PUBLISH.
 */
const char *
rl_publish_command(void)
{
	if (rl_mode() != RL_MODE_CLUSTER || rl_cluster_pubsub == RL_PUBSUB_CLASSIC)
		return "publish";
	cluster_check_settings();
	if (!map_loaded)
		(void) refresh_map();
	return cluster_sharded ? "spublish" : "publish";
}

/* Do all n keys hash to one cluster slot? */
bool
rl_same_slot(int n, const char *const *keys)
{
	for (int i = 1; i < n; i++)
		if (key_slot(keys[i]) != key_slot(keys[0]))
			return false;
	return true;
}

/*
 * Where a channel is heard on a cluster (channel.c): *key gets what routes
 * it and *sharded whether it is a sharded subscription.
 */
static void
channel_route(const char *channel, const char **key, bool *sharded)
{
	rl_channel_route(channel, strcmp(rl_publish_command(), "spublish") == 0,
					 key, sharded);
}

/*
 * How many of the n channels of a wait, from the first, one subscriber
 * connection can hear: on a cluster those heard where the first is (its
 * slot, its kind of subscription); the others are left to the listener.
 */
int
rl_route_subscribable(int n, const char *const *channels)
{
	const char *key0;
	bool		sharded0;
	int			k = 1;

	if (rl_mode() != RL_MODE_CLUSTER)
		return n;
	channel_route(channels[0], &key0, &sharded0);
	for (; k < n; k++)
	{
		const char *key;
		bool		sharded;

		channel_route(channels[k], &key, &sharded);
		if (sharded != sharded0 || key_slot(key) != key_slot(key0))
			break;
	}
	return k;
}

/*
 * Subscribes rl_sub_conn to n channels, which must stay valid until it
 * unsubscribes. On a cluster the subscriber connects to the node serving
 * their slot (one slot for all): sharded subscriptions must, and a classic
 * one may go anywhere, messages being broadcast.
 */
bool
rl_route_subscribe(int n, const char *const *channels)
{
	const char *channel;
	bool		sharded;
	TimestampTz until = rl_command_deadline();

	Assert(rl_route_subscribable(n, channels) == n);
	channel_route(channels[0], &channel, &sharded);
	if (rl_mode() != RL_MODE_CLUSTER)
	{
		if (rl_sub_conn.pinned)
			rl_disconnect(&rl_sub_conn);
		rl_sub_conn.pinned = false;
		rl_sub_conn.sharded = false;
		return rl_subscribe(&rl_sub_conn, n, channels);
	}
	for (;;)
	{
		int			node = slot_node(key_slot(channel));

		if (node == -2)
		{
			copy_failure(&rl_sub_conn, &rl_cmd_conn);
			return false;
		}
		if (node < 0)
		{
			return rl_fail_on(&rl_sub_conn, RLF_CLUSTER, rl_server_desc(),
							  "Hash slot %d is not served by any node.",
							  key_slot(channel));
		}
		if (!rl_sub_conn.pinned || rl_sub_conn.sharded != sharded ||
			strcmp(rl_sub_conn.node.desc, cluster_nodes[node]->node.desc) != 0)
		{
			rl_disconnect(&rl_sub_conn);
			rl_sub_conn.pinned = true;
			rl_sub_conn.sharded = sharded;
			rl_sub_conn.node = cluster_nodes[node]->node;
		}
		if (rl_subscribe(&rl_sub_conn, n, channels))
			return true;
		if (GetCurrentTimestamp() + RETRY_MS * 1000 >= until ||
			(rl_sub_conn.failure != RLF_CLUSTER && rl_sub_conn.failure != RLF_IO &&
			 rl_sub_conn.failure != RLF_CONNECT))
			return false;
		map_loaded = false;
		pause_briefly();
	}
}

/*
 * Where one listener for the whole server hears channel on a cluster: the
 * node serving its slot, as rl_route_subscribe picks it, and whether with
 * sharded pub/sub. False when the map cannot say; the next call loads it
 * anew.
 */
bool
rl_route_channel(const char *channel, RLNode *node, bool *sharded)
{
	int			n;
	const char *key;

	channel_route(channel, &key, sharded);
	n = slot_node(key_slot(key));
	if (n < 0)
	{
		map_loaded = false;
		return false;
	}
	*node = cluster_nodes[n]->node;
	return true;
}

/*
 * Does the slot map name node? Nodes left out of it are not needed any
 * more. True when no map is loaded: nothing says the node left.
 */
bool
rl_route_node_in_map(const RLNode *node)
{
	return !map_loaded ||
		find_node(cluster_nodes, ncluster_nodes, node->host, node->port) >= 0;
}

/* A subscription was refused or dropped: the slot map may be stale. */
void
rl_route_forget_map(void)
{
	map_loaded = false;
}

/*
 * Did every node that may have received the last request (rl_run*() or
 * rl_run_all()) answer it? Only then can it not be applied later: on a new
 * connection, the one it replaces is killed before its first request, and a
 * connection that was kept answers in order. A node we could not connect to
 * never received it.
 */
bool
rl_last_run_complete(void)
{
	switch (rl_mode())
	{
		case RL_MODE_REDLOCK:
			return rl_redlock_run_complete();
		case RL_MODE_CLUSTER:
			return !cluster_unanswered;
		default:
			return rl_cmd_conn.failure == RLF_NONE || !rl_cmd_conn.maybe_delivered;
	}
}

/*
 * Runs scripts where the locks live: rl_run(), or with Redlock on every
 * master, each reply being what a majority agrees on. votes[i], if given,
 * gets how many Redlock masters agreed (0 outside Redlock).
 */
bool
rl_run_agreed(int n, const RLEval *evals, RLAgree how, RLReply **replies,
			  int *votes)
{
	if (votes != NULL)
		memset(votes, 0, sizeof(int) * n);
	if (rl_mode() != RL_MODE_REDLOCK)
		return rl_run(n, evals, replies);
	return rl_redlock_run_agreed(n, evals, how, replies, votes);
}

/* rl_run_agreed() for plain commands, each about keys[i]. */
bool
rl_run_cmds_agreed(int n, const RLCommand *cmds, const char *const *keys,
				   RLAgree how, RLReply **replies)
{
	if (rl_mode() != RL_MODE_REDLOCK)
		return rl_run_cmds(n, cmds, keys, replies);
	return rl_redlock_run_cmds_agreed(n, cmds, how, replies);
}
