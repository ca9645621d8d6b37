/*
 * listener.c
 *	  The "redislock listener" background worker: one subscriber connection
 *	  per Redis server (per cluster node, per Redlock master) for all the
 *	  waiting sessions of this PostgreSQL server. It subscribes the channels
 *	  the board (wakeup.c) asks for and passes the messages on to it.
 *
 * A channel nobody waits on any more stays subscribed for a while, so that
 * a busy lock is not subscribed anew for every wait. Each channel has at
 * most one SUBSCRIBE or UNSUBSCRIBE unanswered on a connection, so replies
 * match up without counting. When a connection drops, its channels go back
 * to pending on the board (their waiters retry once subscribed anew); when
 * it cannot be opened, they fail and their waiters subscribe by themselves.
 *
 * Behind sentinels it also watches one sentinel for +switch-master and
 * tells every process (rl_master_switched) to reopen its connections on the
 * new master at once: the old one takes writes until it is demoted.
 *
 * src/listener.c
 */
#include "postgres.h"

#include <hiredis/hiredis.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "conn_int.h"
#include "master_switch.h"
#include "route.h"
#include "wakeup.h"

/* Connections at most: the server, every cluster node, every master. */
#define MAX_LINKS 64

/*
 * How soon to try again after a connection could not be opened, doubling
 * up to RETRY_MAX_MS while it fails (an open blocks the listener for up to
 * connect_timeout, holding up the messages of the other connections); and
 * the least time between two opens of one connection.
 */
#define RETRY_MS 1000
#define RETRY_MAX_MS 30000
#define REOPEN_MS 100

/* How long a channel nobody waits on stays subscribed. */
#define LINGER_MS 10000

/* How often the board is looked at when nothing calls (lingering). */
#define SCAN_MS 1000

/* Channels per SUBSCRIBE or UNSUBSCRIBE. */
#define BATCH 64

/* Where the sentinels announce a new master. */
#define SWITCH_CHANNEL "+switch-master"

PGDLLEXPORT void redislock_listener_main(Datum arg);

typedef enum SubState
{
	SUB_NONE,
	SUB_SUBSCRIBING,
	SUB_SUBSCRIBED,
	SUB_UNSUBSCRIBING
} SubState;

typedef struct Link
{
	RLConn		conn;
	bool		failed;			/* could not be opened: its channels fail */
	int			backoff_ms;		/* wait after the next failure */
	TimestampTz retry_at;		/* when it may be opened again */
} Link;

typedef struct Channel
{
	char		name[RL_CHANNEL_MAX];	/* hash key */
	int			link;			/* where it is heard; -1: not routed yet
								 * (every link with Redlock) */
	bool		unroutable;		/* the cluster map did not say where */
	TimestampTz route_at;		/* when to ask it again */
	TimestampTz wanted_at;		/* last scan that found a waiter for it */
	uint8		state[MAX_LINKS];	/* SubState on each link */
} Channel;

static Link links[MAX_LINKS];
static int	nlinks = 0;

/* Behind sentinels: the subscription to +switch-master on one of them. */
static Link watch;
static int	watch_next = 0;		/* the sentinel to try next */

static RLMode mode;
static uint64 links_generation = 0;
static HTAB *channels = NULL;
static TimestampTz scan_time = 0;
static bool changed = false;	/* a channel changed state: scan again */
static bool blocked = false;	/* waited on the network: a latch set then
								 * was reset (conn.c), so look at the board */
static bool unreachable = false;

/* Logs an outage once when it starts and once when it ends. */
static void
note_redis(bool ok, RLConn *c)
{
	if (!ok && !unreachable)
		ereport(WARNING,
				(errmsg("redislock listener cannot reach Redis"),
				 errdetail_internal("%s", rl_failure_text(c)),
				 errhint("Waiting sessions subscribe by themselves meanwhile; the listener tries again after %d ms, then less often, at least every %d ms.",
						 RETRY_MS, RETRY_MAX_MS)));
	else if (ok && unreachable)
		ereport(LOG,
				(errmsg("redislock listener reached Redis server \"%s\" again",
						rl_conn_desc(c))));
	unreachable = !ok;
}

/* Every channel loses its subscriptions on link i (-1: on all links). */
static void
forget_subscriptions(int i)
{
	HASH_SEQ_STATUS seq;
	Channel    *ch;

	hash_seq_init(&seq, channels);
	while ((ch = hash_seq_search(&seq)) != NULL)
	{
		for (int l = 0; l < MAX_LINKS; l++)
			if ((i < 0 || l == i) && ch->state[l] != SUB_NONE)
			{
				ch->state[l] = SUB_NONE;
				changed = true;
			}
		if (i < 0 || (mode == RL_MODE_CLUSTER && ch->link == i))
			ch->link = -1;
	}
}

static void
drop_link(int i)
{
	rl_disconnect(&links[i].conn);
	forget_subscriptions(i);
}

static void
init_link(Link *l, const RLNode *node)
{
	memset(l, 0, sizeof(*l));
	l->conn.role = "listener";
	if (node != NULL)
	{
		l->conn.pinned = true;
		l->conn.node = *node;
	}
}

/* Builds the links of the current settings, dropping any old ones. */
static void
reset_links(void)
{
	const RLNode *nodes;
	int			n;
	const char *problem;

	for (int i = 0; i < nlinks; i++)
		rl_disconnect(&links[i].conn);
	rl_disconnect(&watch.conn);
	memset(&watch, 0, sizeof(watch));
	watch_next = 0;
	nlinks = 0;
	forget_subscriptions(-1);
	links_generation = rl_settings_generation;
	(void) rl_config(&mode, &nodes, &n, &problem);
	if (mode == RL_MODE_REDLOCK)
	{
		for (int i = 0; i < n && i < MAX_LINKS; i++)
			init_link(&links[nlinks++], &nodes[i]);
	}
	else if (mode != RL_MODE_CLUSTER)
		init_link(&links[nlinks++], NULL);
}

/*
 * The link to a cluster node, made on first use in a free entry (one that
 * names no node); -1 if too many.
 */
static int
cluster_link(const RLNode *node, bool sharded)
{
	int			free = -1;

	for (int i = 0; i < nlinks; i++)
	{
		if (links[i].conn.sharded == sharded &&
			strcmp(links[i].conn.node.desc, node->desc) == 0)
			return i;
		if (free < 0 && links[i].conn.node.desc[0] == '\0')
			free = i;
	}
	if (free < 0 && nlinks == MAX_LINKS)
		return -1;
	if (free < 0)
		free = nlinks++;
	init_link(&links[free], node);
	links[free].conn.sharded = sharded;
	return free;
}

/*
 * Cluster: frees the links no channel is heard or routed on whose node the
 * slot map no longer names (an address the node left), so that nodes that
 * come back at new addresses, over and over, do not fill the table.
 */
static void
free_unneeded_links(void)
{
	HASH_SEQ_STATUS seq;
	Channel    *ch;
	bool		used[MAX_LINKS] = {false};

	if (mode != RL_MODE_CLUSTER)
		return;
	hash_seq_init(&seq, channels);
	while ((ch = hash_seq_search(&seq)) != NULL)
	{
		if (ch->link >= 0)
			used[ch->link] = true;
		for (int i = 0; i < nlinks; i++)
			used[i] |= ch->state[i] != SUB_NONE;
	}
	for (int i = 0; i < nlinks; i++)
		if (!used[i] && links[i].conn.node.desc[0] != '\0' &&
			!rl_route_node_in_map(&links[i].conn.node))
		{
			rl_disconnect(&links[i].conn);
			init_link(&links[i], NULL);
		}
	while (nlinks > 0 && links[nlinks - 1].conn.node.desc[0] == '\0')
		nlinks--;
}

/* Where a channel stands, as the board shows it to its waiters. */
static RLChannelState
channel_state(const Channel *ch)
{
	int			subscribed = 0;
	int			pending = 0;
	int			failed = 0;

	if (mode != RL_MODE_REDLOCK)
	{
		if (ch->unroutable || (ch->link >= 0 && links[ch->link].failed))
			return RL_CHANNEL_FAILED;
		if (ch->link >= 0 && ch->state[ch->link] == SUB_SUBSCRIBED)
			return RL_CHANNEL_READY;
		return RL_CHANNEL_PENDING;
	}

	/*
	 * Redlock: a release publishes only on the masters where it was held,
	 * a majority for a held lock. READY needs every master that can be
	 * reached subscribed (none pending), and at least enough of them to
	 * share one with every majority (rl_redlock_heard_needed); with more
	 * masters failed, the waiters subscribe by themselves, and retry on
	 * their own time if they cannot hear enough masters either.
	 */
	if (nlinks == 0)
		return RL_CHANNEL_FAILED;
	for (int i = 0; i < nlinks; i++)
	{
		if (links[i].failed)
			failed++;
		else if (ch->state[i] == SUB_SUBSCRIBED)
			subscribed++;
		else
			pending++;
	}
	if (pending == 0 && subscribed >= rl_redlock_heard_needed(nlinks))
		return RL_CHANNEL_READY;
	if (nlinks - failed < rl_redlock_heard_needed(nlinks))
		return RL_CHANNEL_FAILED;
	return RL_CHANNEL_PENDING;
}

/* rl_wakeup_scan's callback: notes the channel as wanted, says its state. */
static RLChannelState
scan_channel(const char *name, void *arg)
{
	bool		found;
	Channel    *ch = hash_search(channels, name, HASH_ENTER, &found);

	if (!found)
	{
		memset(ch->state, 0, sizeof(ch->state));
		ch->link = -1;
		ch->unroutable = false;
		ch->route_at = 0;
	}
	ch->wanted_at = scan_time;
	return channel_state(ch);
}

/* Routes a channel to its link (cluster); false if it cannot be now. */
static void
route_channel(Channel *ch, TimestampTz now)
{
	RLNode		node;
	bool		sharded;
	bool		was = ch->unroutable;

	if (mode == RL_MODE_REDLOCK)
		return;
	if (mode != RL_MODE_CLUSTER)
		ch->link = 0;
	if (ch->link >= 0 || (ch->unroutable && now < ch->route_at))
		return;
	ch->unroutable = !rl_route_channel(ch->name, &node, &sharded) ||
		(ch->link = cluster_link(&node, sharded)) < 0;
	ch->route_at = TimestampTzPlusMilliseconds(now, RETRY_MS);
	changed |= ch->unroutable != was;
}

/*
 * Link i cannot be used now: its channels fail (their waiters subscribe by
 * themselves) until it is tried again, later after each failure.
 */
static void
fail_link(int i)
{
	Link	   *l = &links[i];

	note_redis(false, &l->conn);
	drop_link(i);
	if (!l->failed)
		changed = true;
	l->failed = true;
	l->backoff_ms = Min(Max(l->backoff_ms * 2, RETRY_MS), RETRY_MAX_MS);
	l->retry_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), l->backoff_ms);
	if (mode == RL_MODE_CLUSTER)
		rl_route_forget_map();
}

/* Opens link i if it is down and may be tried; false if not open. */
static bool
open_link(int i, TimestampTz now)
{
	Link	   *l = &links[i];

	if (l->conn.sock != NULL)
		return true;
	if (now < l->retry_at)
		return false;
	blocked = true;
	l->retry_at = TimestampTzPlusMilliseconds(now, REOPEN_MS);
	if (rl_ensure_open(&l->conn, rl_command_deadline()))
	{
		l->conn.subscribed = true;
		if (l->failed)
			changed = true;
		l->failed = false;
		l->backoff_ms = 0;
		note_redis(true, &l->conn);
		return true;
	}
	fail_link(i);
	return false;
}

/*
 * Sends (S)SUBSCRIBE or (S)UNSUBSCRIBE on link i for the n channels, moving
 * them to state to; a link that breaks is dropped. Sharded channels go one
 * per command (pipelined), as Redis wants all of one command's channels in
 * one slot.
 */
static void
send_batch(int i, bool subscribe, int n, Channel **batch, SubState to)
{
	RLConn	   *c = &links[i].conn;
	int			ncmds = c->sharded ? n : 1;
	RLCommand  *cmds;

	if (n == 0 || c->sock == NULL)
		return;
	blocked = true;
	cmds = palloc0(sizeof(RLCommand) * ncmds);
	for (int k = 0; k < n; k++)
	{
		RLCommand  *cmd = &cmds[c->sharded ? k : 0];

		if (cmd->argc == 0 && subscribe)
			rl_set_arg(cmd, c->sharded ? "SSUBSCRIBE" : "SUBSCRIBE",
					   c->sharded ? 10 : 9);
		else if (cmd->argc == 0)
			rl_set_arg(cmd, c->sharded ? "SUNSUBSCRIBE" : "UNSUBSCRIBE",
					   c->sharded ? 12 : 11);
		rl_set_arg(cmd, batch[k]->name, strlen(batch[k]->name));
	}
	if (!rl_queue_commands(c, ncmds, cmds) || !rl_flush(c, rl_command_deadline()))
	{
		drop_link(i);
		return;
	}
	for (int k = 0; k < n; k++)
		batch[k]->state[i] = to;
}

/*
 * Sends what each link needs: SUBSCRIBE for wanted channels not subscribed
 * there, UNSUBSCRIBE for channels nobody has wanted for LINGER_MS, which
 * leave the table once unsubscribed everywhere.
 */
static void
sync_link(int i, TimestampTz now)
{
	HASH_SEQ_STATUS seq;
	Channel    *ch;
	Channel    *subs[BATCH];
	Channel    *unsubs[BATCH];
	int			nsubs = 0;
	int			nunsubs = 0;
	TimestampTz idle_before = TimestampTzPlusMilliseconds(now, -LINGER_MS);
	bool		opened = false;

	hash_seq_init(&seq, channels);
	while ((ch = hash_seq_search(&seq)) != NULL)
	{
		bool		wanted = ch->wanted_at == scan_time;

		if (mode != RL_MODE_REDLOCK && ch->link != i)
			continue;
		if (wanted && ch->state[i] == SUB_NONE)
		{
			if (!opened && !(opened = open_link(i, now)))
				continue;
			subs[nsubs++] = ch;
		}
		else if (!wanted && ch->wanted_at < idle_before &&
				 ch->state[i] == SUB_SUBSCRIBED)
			unsubs[nunsubs++] = ch;
		if (nsubs == BATCH)
		{
			send_batch(i, true, nsubs, subs, SUB_SUBSCRIBING);
			nsubs = 0;
		}
		if (nunsubs == BATCH)
		{
			send_batch(i, false, nunsubs, unsubs, SUB_UNSUBSCRIBING);
			nunsubs = 0;
		}
		if (links[i].conn.sock == NULL && opened)
		{
			hash_seq_term(&seq);
			return;
		}
	}
	send_batch(i, true, nsubs, subs, SUB_SUBSCRIBING);
	send_batch(i, false, nunsubs, unsubs, SUB_UNSUBSCRIBING);
}

/*
 * Routes new channels, syncs every link, forgets channels and cluster links
 * done with.
 */
static void
sync_all(TimestampTz now)
{
	HASH_SEQ_STATUS seq;
	Channel    *ch;
	TimestampTz idle_before = TimestampTzPlusMilliseconds(now, -LINGER_MS);

	hash_seq_init(&seq, channels);
	while ((ch = hash_seq_search(&seq)) != NULL)
	{
		bool		idle = true;

		if (ch->wanted_at == scan_time)
		{
			route_channel(ch, now);
			continue;
		}
		for (int i = 0; i < nlinks; i++)
			idle &= ch->state[i] == SUB_NONE;
		if (idle && ch->wanted_at < idle_before)
			(void) hash_search(channels, ch->name, HASH_REMOVE, NULL);
	}
	free_unneeded_links();
	for (int i = 0; i < nlinks; i++)
		sync_link(i, now);
}

/* Is r a pub/sub reply of kind (or its sharded form) with a channel? */
static bool
reply_is(const redisReply *r, const char *kind)
{
	const char *k;

	if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
		r->element[0]->type != REDIS_REPLY_STRING ||
		r->element[1]->type != REDIS_REPLY_STRING)
		return false;
	k = r->element[0]->str;
	if (k[0] == 's' && strcmp(k + 1, kind) == 0)
		return true;
	return strcmp(k, kind) == 0;
}

/*
 * Acts on one reply from link i; false for an error reply, a refused
 * subscription (an ACL, or on a cluster a slot that moved: route again):
 * the link fails for a while and its waiters subscribe by themselves.
 */
static bool
take_reply(int i, const redisReply *r)
{
	Channel    *ch;

	if (r->type == REDIS_REPLY_ERROR)
	{
		rl_fail(&links[i].conn, RLF_PROTOCOL,
				"The server refused to subscribe: %s", r->str);
		if (mode == RL_MODE_CLUSTER)
			rl_route_forget_map();
		return false;
	}
	if (reply_is(r, "message"))
	{
		const redisReply *payload = r->element[2];

		rl_wakeup_message(r->element[1]->str,
						  payload->type == REDIS_REPLY_STRING &&
						  strcmp(payload->str, "0") == 0);
		return true;
	}
	if (r->element == NULL || r->elements < 2 ||
		r->element[1]->type != REDIS_REPLY_STRING ||
		r->element[1]->len >= RL_CHANNEL_MAX)
		return true;
	ch = hash_search(channels, r->element[1]->str, HASH_FIND, NULL);
	if (ch == NULL)
		return true;
	if (reply_is(r, "subscribe") && ch->state[i] == SUB_SUBSCRIBING)
	{
		ch->state[i] = SUB_SUBSCRIBED;
		changed = true;
	}
	else if (reply_is(r, "unsubscribe"))
	{
		/* unasked: Redis dropped a sharded channel whose slot moved */
		if (ch->state[i] != SUB_UNSUBSCRIBING)
		{
			rl_route_forget_map();
			if (mode == RL_MODE_CLUSTER)
				ch->link = -1;
			changed = true;
		}
		ch->state[i] = SUB_NONE;
	}
	return true;
}

/* Takes in what link i has received, reading the socket first if read. */
static void
drain_link(int i, bool read)
{
	RLSocket   *s = links[i].conn.sock;
	bool		ok = true;
	bool		refused = false;

	if (read && rl_sock_read(s) == RL_IO_FAILED)
		ok = false;
	while (ok)
	{
		void	   *r = NULL;

		if (!rl_sock_reply(s, &r))
			ok = false;
		else if (r == NULL)
			break;
		else
		{
			ok = take_reply(i, r);
			refused = !ok;
			freeReplyObject(r);
		}
	}
	if (refused)
		fail_link(i);
	else if (!ok)
	{
		ereport(LOG,
				(errmsg("redislock listener lost its connection to Redis server \"%s\"",
						rl_conn_desc(&links[i].conn)),
				 errdetail_internal("%s", refused ? rl_failure_text(&links[i].conn) :
									rl_sock_error(s))));
		drop_link(i);
	}
}

/*
 * The master may have moved: every process reopens its connections found
 * through sentinels, this one too, and its subscriptions move with it
 * (their waiters retry once subscribed there).
 */
static void
follow_switch(const char *master, const char *from_host, int from_port)
{
	rl_master_switched(master, from_host, from_port);
	for (int i = 0; i < nlinks; i++)
		if (!links[i].conn.pinned && links[i].conn.sock != NULL)
			drop_link(i);
	changed = true;
}

/*
 * The watch on a sentinel failed (what says how): the next sentinel is
 * tried later, less often while they fail. Logged once per outage.
 */
static void
watch_failed(const char *what)
{
	if (watch.backoff_ms == 0)
		ereport(LOG,
				(errmsg("redislock listener cannot watch sentinel \"%s\" for master switches",
						watch.conn.node.desc),
				 errdetail_internal("%s", what),
				 errhint("Until it can, sessions follow a failover only when the old master breaks or refuses writes.")));
	rl_disconnect(&watch.conn);
	watch_next++;
	watch.backoff_ms = Min(Max(watch.backoff_ms * 2, RETRY_MS), RETRY_MAX_MS);
	watch.retry_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), watch.backoff_ms);
	changed = true;
}

/*
 * Behind sentinels, subscribes to +switch-master on a sentinel if not yet
 * (the next one after a failure).
 */
static void
open_watch(TimestampTz now)
{
	RLCommand	cmd;
	int			backoff_ms = watch.backoff_ms;

	if (mode != RL_MODE_SENTINEL || rl_nsentinels == 0 ||
		watch.conn.sock != NULL || now < watch.retry_at)
		return;
	blocked = true;
	init_link(&watch, &rl_sentinel_nodes[watch_next % rl_nsentinels]);
	watch.conn.to_sentinel = true;
	watch.backoff_ms = backoff_ms;
	memset(&cmd, 0, sizeof(cmd));
	rl_set_arg(&cmd, "SUBSCRIBE", 9);
	rl_set_arg(&cmd, SWITCH_CHANNEL, strlen(SWITCH_CHANNEL));
	if (rl_ensure_open(&watch.conn, rl_command_deadline()) &&
		rl_queue_commands(&watch.conn, 1, &cmd) &&
		rl_flush(&watch.conn, rl_command_deadline()))
		watch.conn.subscribed = true;
	else
		watch_failed(rl_failure_text(&watch.conn));
}

/* A +switch-master message: "<name> <old ip> <old port> <new ip> <new port>". */
static void
take_switch(const char *payload)
{
	char		name[256];
	char		from_host[256];
	int			from_port;
	char		to_host[256];
	int			to_port;

	if (sscanf(payload, "%255s %255s %d %255s %d", name, from_host, &from_port,
			   to_host, &to_port) != 5 ||
		strcmp(name, rl_sentinel_master) != 0)
		return;
	ereport(LOG,
			(errmsg("redislock listener: the sentinels moved master \"%s\" from %s:%d to %s:%d",
					name, from_host, from_port, to_host, to_port)));
	follow_switch(name, from_host, from_port);
}

/*
 * Takes in what the watched sentinel sent; a broken watch is reopened. Once
 * subscribed, every process is told that a switch may have passed unheard
 * while no sentinel was watched.
 */
static void
drain_watch(void)
{
	RLSocket   *s = watch.conn.sock;
	char	   *problem = NULL;

	if (rl_sock_read(s) == RL_IO_FAILED)
		problem = pstrdup(rl_sock_error(s));
	while (problem == NULL)
	{
		void	   *v = NULL;
		redisReply *r;

		if (!rl_sock_reply(s, &v))
		{
			problem = pstrdup(rl_sock_error(s));
			break;
		}
		if (v == NULL)
			break;
		r = v;
		if (r->type == REDIS_REPLY_ERROR)
			problem = psprintf("The sentinel refused to subscribe: %s", r->str);
		else if (reply_is(r, "subscribe"))
		{
			watch.backoff_ms = 0;
			follow_switch(NULL, NULL, 0);
		}
		else if (reply_is(r, "message") &&
				 strcmp(r->element[1]->str, SWITCH_CHANNEL) == 0 &&
				 r->element[2]->type == REDIS_REPLY_STRING)
			take_switch(r->element[2]->str);
		freeReplyObject(r);
	}
	if (problem != NULL)
		watch_failed(problem);
}

/* Waits for the latch, a reply on any link, or timeout_ms. */
static void
wait_for_events(long timeout_ms)
{
	WaitEvent	events[MAX_LINKS + 3];
	WaitEventSet *wes;
	int			nev;

	for (int i = 0; i < nlinks; i++)
		if (links[i].conn.sock != NULL)
			drain_link(i, false);
	if (changed)
		return;
	wes = RL_CreateWaitEventSet(CurrentMemoryContext, nlinks + 3);
	AddWaitEventToSet(wes, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(wes, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	if (watch.conn.sock != NULL)
		AddWaitEventToSet(wes, rl_sock_read_wants(watch.conn.sock),
						  rl_sock_fd(watch.conn.sock), NULL, &watch);
	for (int i = 0; i < nlinks; i++)
		if (links[i].conn.sock != NULL)
			AddWaitEventToSet(wes, rl_sock_read_wants(links[i].conn.sock),
							  rl_sock_fd(links[i].conn.sock), NULL,
							  (void *) (intptr_t) (i + 1));
	nev = WaitEventSetWait(wes, timeout_ms, events, lengthof(events),
						   RL_WAIT_EVENT);
	FreeWaitEventSet(wes);
	for (int e = 0; e < nev; e++)
	{
		int			i = (int) (intptr_t) events[e].user_data - 1;

		if (events[e].events & WL_LATCH_SET)
		{
			ResetLatch(MyLatch);
			changed = true;
		}
		else if (events[e].user_data == &watch)
		{
			if (watch.conn.sock != NULL)
				drain_watch();
		}
		else if (i >= 0 && links[i].conn.sock != NULL)
			drain_link(i, true);
	}
}

/* How long to sleep: until a retry is due, or the next look at the board. */
static long
sleep_ms(TimestampTz now)
{
	TimestampTz until = TimestampTzPlusMilliseconds(now, SCAN_MS);

	for (int i = 0; i < nlinks; i++)
		if (links[i].conn.sock == NULL && links[i].retry_at > now)
			until = Min(until, links[i].retry_at);
	if (mode == RL_MODE_SENTINEL && watch.conn.sock == NULL && watch.retry_at > now)
		until = Min(until, watch.retry_at);
	return Max((long) ((until - now) / 1000), 1);
}

static void
detach_listener(int code, Datum arg)
{
	/* an ERROR (out of memory) may have left the board's lock held */
	LWLockReleaseAll();
	rl_wakeup_detach();
	for (int i = 0; i < nlinks; i++)
		rl_disconnect(&links[i].conn);
	rl_disconnect(&watch.conn);
}

void
redislock_listener_main(Datum arg)
{
	HASHCTL		ctl;
	MemoryContext loop_context;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_activity(STATE_RUNNING, "listening for Redis unlock messages");

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = RL_CHANNEL_MAX;
	ctl.entrysize = sizeof(Channel);
	channels = hash_create("redislock listener channels", 256, &ctl,
						   HASH_ELEM | HASH_STRINGS);
	loop_context = AllocSetContextCreate(TopMemoryContext,
										 "redislock listener loop",
										 ALLOCSET_DEFAULT_SIZES);
	reset_links();
	before_shmem_exit(detach_listener, (Datum) 0);
	rl_wakeup_attach(MyLatch);
	changed = true;

	while (!ShutdownRequestPending)
	{
		MemoryContext old = MemoryContextSwitchTo(loop_context);
		TimestampTz now = GetCurrentTimestamp();

		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		if (links_generation != rl_settings_generation)
		{
			reset_links();
			rl_wakeup_attach(MyLatch);
		}
		if (changed || now - scan_time >= SCAN_MS * 1000L)
		{
			changed = false;
			scan_time = now;
			rl_wakeup_scan(scan_channel, NULL);
		}
		blocked = false;
		open_watch(now);
		sync_all(now);
		changed |= blocked;
		if (!changed)
			wait_for_events(sleep_ms(now));
		MemoryContextSwitchTo(old);
		MemoryContextReset(loop_context);
		CHECK_FOR_INTERRUPTS();
	}

	/* Exit code 1: restart, as waiters fall back to a connection each. */
	proc_exit(1);
}
