/*
 * plain.c
 *	  The plain layout: a lock is one string key, the name itself, holding
 *	  its holder's token (SET NX PX; given back and renewed only while the
 *	  key still holds that token), as redis.io's lock pattern, redsync, node
 *	  redlock, redis-py, ShedLock and Spring Integration write it. This file
 *	  is that layout's table of operations for the engine (its keys, its
 *	  scripts, its wake-up channels); the engine is the Redisson layout's
 *	  (lock.c), so sessions, leases, the watchdog, scopes and settling work
 *	  alike. Reentrancy is counted in the session: Redis keeps one value.
 *
 * Waking a waiter: the other clients announce nothing when they give a
 * lock back (Spring Integration's pub/sub registry excepted), so a waiter
 * listens where a release can be heard, and polls where it cannot:
 * - redislock's own channel, which every SQL release publishes on;
 * - the key's keyspace notifications ("del", "expired"...), when the server
 *   has them on (notify-keyspace-events with K, g and x), which hear every
 *   client's release and every expiry;
 * - Spring Integration's "<registry>-channel:<name>" for names of the
 *   registries named in redislock.spring_registries.
 * With Redlock a waiter hears SQL releases only; on a Redis Cluster all
 * three (the keyspace channel at the key's node, Spring's classic channel
 * beside it: route.c).
 * Without keyspace notifications the wait also polls, with a jittered
 * back-off of at most RL_PLAIN_POLL_MAX_MS between tries, as redsync and
 * redis-py poll; a lease that ends is waited for to its end anyway. With
 * them it still polls, backing off to at most NOTIFY_RECHECK_MS: some
 * releases publish no event it hears (FLUSHDB, notifications turned off
 * during the wait), and a waiter must not sleep out its wait over them.
 *
 * src/plain.c
 */
#include "postgres.h"

#include <hiredis/hiredis.h>

#include "utils/varlena.h"

#include "conn.h"
#include "lock_int.h"
#include "plain.h"
#include "redislock.h"
#include "route.h"
#include "scripts.h"

char	   *rl_spring_registries = NULL;
int			rl_layout = RL_LAYOUT_REDISSON;

/*
 * The longest pause of a waiter that hears keyspace notifications: a few
 * releases publish no event (a FLUSHDB, notifications turned off meanwhile).
 */
#define NOTIFY_RECHECK_MS 10000

/* redislock's own fencing counter of a plain lock (SQL holders only) */
static char *
plain_token_key(const char *name)
{
	return rl_prefixed_key("redislock_plain_token", name);
}

/* where every SQL release of a plain lock is announced */
static char *
plain_channel_key(const char *name)
{
	return rl_prefixed_key("redislock_plain__channel", name);
}

/*
 * The channels of the Spring Integration registries (redislock.
 * spring_registries) that name belongs to: "<registry>-channel:<name>" for
 * a name "<registry>:<lock key>", where RedisLockRegistry's pub/sub lock
 * type announces its releases and listens for them.
 */
static int
spring_channels(const char *name, const char **out, int max)
{
	char	   *list;
	List	   *regs;
	ListCell   *lc;
	int			n = 0;

	if (rl_spring_registries == NULL || rl_spring_registries[0] == '\0')
		return 0;
	list = pstrdup(rl_spring_registries);
	if (!SplitGUCList(list, ',', &regs))
		return 0;				/* the check hook refused it already */
	foreach(lc, regs)
	{
		const char *reg = lfirst(lc);
		size_t		len = strlen(reg);

		if (n < max && strncmp(name, reg, len) == 0 && name[len] == ':')
			out[n++] = psprintf("%s-channel:%s", reg, name);
	}
	return n;
}

/*
 * check hook of redislock.spring_registries: a comma-separated list of
 * registry keys, kept as written (Spring's keys are case-sensitive), each
 * once and short enough for its channels.
 */
bool
rl_check_spring_registries(char **newval, void **extra, GucSource source)
{
	char	   *list = pstrdup(*newval);
	List	   *regs;
	ListCell   *lc;
	bool		ok = SplitGUCList(list, ',', &regs);

	if (!ok)
		GUC_check_errdetail("List syntax is invalid.");
	else if (list_length(regs) > RL_PLAIN_MAX_REGISTRIES)
	{
		GUC_check_errdetail("At most %d registries can be named.",
							RL_PLAIN_MAX_REGISTRIES);
		ok = false;
	}
	foreach(lc, ok ? regs : NIL)
	{
		const char *reg = lfirst(lc);

		if (strlen(reg) == 0 || strlen(reg) > RL_PLAIN_REGISTRY_MAX)
		{
			GUC_check_errdetail("A registry key has 1 to %d bytes.",
								RL_PLAIN_REGISTRY_MAX);
			ok = false;
			break;
		}
		for (ListCell *prev = list_head(regs); prev != lc; prev = lnext(regs, prev))
			if (strcmp(lfirst(prev), reg) == 0)
			{
				GUC_check_errdetail("Registry key \"%s\" is named twice.", reg);
				ok = false;
			}
		if (!ok)
			break;
	}
	list_free(regs);
	pfree(list);
	return ok;
}

/*
 * Whether the server of name has keyspace notifications on for deletions
 * and expiries: notify-keyspace-events with K, and g and x (or A, which
 * has both). CONFIG may be refused (an ACL, a managed service): then the
 * waiter polls. Asked at the start of each wait (one round trip among the
 * several of a wait), so that a change of the setting or of the cluster
 * node serving the name is seen at once.
 */
static bool
notifications_on(const char *name)
{
	RLCommand	cmd;
	RLReply    *r;
	const char *keys[1] = {name};
	const char *flags;

	/*
	 * A Redlock waiter listens on one master only. On a cluster the
	 * setting of the key's node counts: its notifications are its own.
	 */
	if (rl_mode() == RL_MODE_REDLOCK)
		return false;
	memset(&cmd, 0, sizeof(cmd));
	rl_set_arg(&cmd, "CONFIG", 6);
	rl_set_arg(&cmd, "GET", 3);
	rl_set_arg(&cmd, "notify-keyspace-events", 22);
	if (!rl_run_cmds(1, &cmd, keys, &r) || r->type != REDIS_REPLY_ARRAY ||
		r->elements != 2 || r->element[1]->type != REDIS_REPLY_STRING)
		return false;
	flags = r->element[1]->str;
	return strchr(flags, 'K') != NULL &&
		(strchr(flags, 'A') != NULL ||
		 (strchr(flags, 'g') != NULL && strchr(flags, 'x') != NULL));
}

/*
 * Where a waiter for plain lock name listens, in *out (the first is
 * redislock's own, the one a Redlock waiter listens on); returns how many.
 * *poll_ms gets the longest pause between tries without a message: long
 * when keyspace notifications hear almost every release.
 */
int
rl_plain_wake_channels(const char *name, const char ***out, int *poll_ms)
{
	const char **channels = palloc(sizeof(char *) * (2 + RL_PLAIN_MAX_REGISTRIES));
	int			n = 0;
	bool		notified = notifications_on(name);

	channels[n++] = plain_channel_key(name);
	if (notified)
		channels[n++] = psprintf("__keyspace@%d__:%s", rl_keyspace_db(), name);
	n += spring_channels(name, channels + n, RL_PLAIN_MAX_REGISTRIES);
	*out = channels;
	*poll_ms = notified ? NOTIFY_RECHECK_MS : RL_PLAIN_POLL_MAX_MS;
	return n;
}

static void
plain_acquire_eval(RLEval *e, LocalLock *ll, int64 lease_ms, int32 target,
				   bool fair, bool enqueue)
{
	e->script = &rl_script_plain_acquire;
	e->nkeys = 2;
	e->keys[0] = ll->name;
	e->keys[1] = plain_token_key(ll->name);
	e->nargs = 3;
	e->args[0] = rl_int64_arg(lease_ms);
	e->args[1] = rl_owner_id();
	e->args[2] = rl_int64_arg(target);
}

/*
 * Fills e with plain_release.lua: keep 0 deletes the key if it holds our
 * token and announces it (on our channel and the Spring registry's); more
 * asks whether it still does. With Redlock, a watchdog-mode hold's release
 * leaves a release mark, as the Redisson layout's does (see lock.c).
 */
static void
plain_release_eval(RLEval *e, const char *name, const char *owner,
				   int32 keep, bool leave, int64 mark_ms)
{
	memset(e, 0, sizeof(*e));
	e->script = &rl_script_plain_release;
	e->nkeys = 2;
	e->keys[0] = name;
	e->keys[1] = plain_channel_key(name);
	e->args[0] = owner;
	e->args[1] = rl_int64_arg(keep);
	e->args[2] = rl_publish_command();
	e->args[3] = "0";
	if (keep == 0 && mark_ms > 0 && rl_mode() == RL_MODE_REDLOCK)
	{
		e->nkeys = 3;
		e->keys[2] = rl_released_key(name, owner);
		e->args[3] = rl_int64_arg(Max(mark_ms, RL_RELEASE_MARK_MIN_MS));
	}
	e->nargs = 4 + (keep == 0 ?
					spring_channels(name, e->args + 4, RL_PLAIN_MAX_REGISTRIES) : 0);
}

/* The renewal of a plain lock: plain_renew.lua. */
static void
plain_renew_eval(RLEval *e, const char *name, const char *owner,
				 int64 lease_ms, int32 holds, bool restore)
{
	rl_owner_renew_eval(e, &rl_script_plain_renew, name, owner, lease_ms,
						holds, restore);
}

static char *
plain_channel(const char *name, bool fair)
{
	return plain_channel_key(name);
}

static const char *
plain_field(const char *owner)
{
	return owner;
}

/*
 * The commit guard's check: plain_release.lua keeping our hold, which
 * answers 1 while the key holds our token and changes nothing. Sent with
 * its body (EVAL): the guard's commands are not retried after NOSCRIPT.
 */
static void
plain_verify(RLCommand *cmd, const char *name, const char *owner)
{
	RLEval		e;

	plain_release_eval(&e, name, owner, 1, false, 0);
	rl_build_eval(cmd, &e, true);
}

/* Adds the channels of peers that listen for releases of name to e's args. */
int
rl_plain_peer_channels(const char *name, const char **out, int max)
{
	return spring_channels(name, out, Min(max, RL_PLAIN_MAX_REGISTRIES));
}

char *
rl_plain_channel(const char *name)
{
	return plain_channel_key(name);
}

const RLPrimitive rl_plain_primitive = {
	.label = "lock",
	.noun = "Redis lock",
	.plural = "Redis locks",
	.layout = "plain",
	.no_redlock = NULL,
	.waiter_place = false,
	.owned = true,
	.acquire = plain_acquire_eval,
	.acquire_all = &rl_script_plain_acquire_all,
	.release = plain_release_eval,
	.renew = plain_renew_eval,
	.channel = plain_channel,
	.field = plain_field,
	.fencing_key = plain_token_key,
	.verify = plain_verify,
	.verified = rl_verified_int,
};
