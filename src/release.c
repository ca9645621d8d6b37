/*
 * release.c
 *	  Giving holds back at session scope: one lock's holds (a semaphore's
 *	  permits), every hold of the session, and a force release of anyone's
 *	  lock. A release whose reply never comes leaves the lock marked dirty
 *	  and hands the trim to the worker (settle.c); one repeated after that
 *	  reports the release the first call did.
 *
 * src/release.c
 */
#include "postgres.h"

#include <hiredis/hiredis.h>

#include "utils/hsearch.h"

#include "conn.h"
#include "lock_int.h"
#include "plain.h"
#include "redislock.h"
#include "registry.h"
#include "route.h"
#include "scripts.h"

/*
 * Whether the call under way is a release: one that finds a hold lost
 * warns, and leaves redislock.on_lock_lost to act on work done under a
 * lock, not on giving it back.
 */
bool		rl_releasing_call = false;

bool
rl_lock_release(const char *name, RLKind kind)
{
	return rl_lock_release_n(name, kind, NULL, 1);
}

/*
 * Gives back n session-scope holds of one kind (a semaphore's permits; one
 * for everything else). Returns false, with a WARNING, when the session
 * does not have them or Redis no longer had them.
 */
static bool release_n(const char *name, RLKind kind, const char *id, int32 n);
static int	release_all(void);

bool
rl_lock_release_n(const char *name, RLKind kind, const char *id, int32 n)
{
	volatile bool done = false;

	rl_releasing_call = true;
	PG_TRY();
	{
		done = release_n(name, kind, id, n);
	}
	PG_CATCH();
	{
		rl_releasing_call = false;
		PG_RE_THROW();
	}
	PG_END_TRY();
	rl_releasing_call = false;
	return done;
}

int
rl_lock_release_all(void)
{
	volatile int released = 0;

	rl_releasing_call = true;
	PG_TRY();
	{
		released = release_all();
	}
	PG_CATCH();
	{
		rl_releasing_call = false;
		PG_RE_THROW();
	}
	PG_END_TRY();
	rl_releasing_call = false;
	return released;
}

static bool
release_n(const char *name, RLKind kind, const char *id, int32 n)
{
	LocalLock  *ll = rl_local_find_id(name, kind, id);
	int32		keep;
	int64		before;
	bool		again;
	bool		delayed;

	/* redis_lock_release() gives back an exclusive lock of either layout */
	if (kind == RL_KIND_LOCK && (ll == NULL || total_holds(ll) == 0) &&
		rl_local_find(name, RL_KIND_PLAIN) != NULL)
	{
		kind = RL_KIND_PLAIN;
		ll = rl_local_find(name, kind);
	}

	if (ll != NULL && ll->session_holds > 0 && ll->session_holds < n)
	{
		ereport(WARNING,
				(errmsg("this session holds only %d of the %d permits of %s \"%s\" it gives back",
						ll->session_holds, n, rl_primitive(kind)->noun, name),
				 errdetail("Nothing was given back.")));
		return false;
	}
	if (ll == NULL || ll->session_holds == 0)
	{
		if (ll != NULL && ll->xact_holds > 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("%s \"%s\" is held at transaction scope",
							rl_primitive(kind)->noun, name),
					 errhint("Transaction-scope locks are released at COMMIT or ROLLBACK.")));
		if (id != NULL)
			ereport(WARNING,
					(errmsg("this session holds no such permit of Redis semaphore \"%s\"",
							name),
					 errdetail("The permit id is %s.", id)));
		else
			ereport(WARNING,
					(errmsg("you don't own %s \"%s\"", rl_primitive(kind)->noun, name)));
		return false;
	}
	rl_settle(false);
	keep = total_holds(ll) - n;
	if (keep > 0 && keep >= ll->redis_holds && rl_held_quietly(ll))
	{
		ll->session_holds -= n;
		Assert(ll->session_holds >= 0);
		rl_stat_add(RL_STAT_RELEASES, 1);
		rl_publish(ll, false, 0);
		return true;
	}

	/*
	 * Until the reply is in, Redis may or may not have applied the release.
	 * If it never comes, the caller gets an ERROR and may well repeat the
	 * call: finding the hold gone then means the first call released it.
	 */
	again = ll->releasing;
	rl_mark_dirty(ll);
	ll->releasing = true;
	delayed = !rl_trim_in_redis(1, &ll, &keep, &before, false);
	if (delayed && !rl_release_delayed(1, &ll))
		rl_report(&rl_cmd_conn, ERROR);
	if (!delayed)
		rl_set_flags(ll, false, ll->queued);
	ll->releasing = false;
	if (!delayed && before == 0 && !again)
	{
		ll->session_holds = 0;
		rl_forget_if_unused(ll);
		ereport(WARNING,
				(errmsg("%s \"%s\" was no longer held", rl_primitive(kind)->noun, name),
				 errdetail("Its lease ran out or it was force-released.")));
		return false;
	}
	ll->session_holds -= n;
	Assert(ll->session_holds >= 0);
	rl_stat_add(RL_STAT_RELEASES, 1);
	rl_publish_or_forget(ll);
	/* once the slot shows what remains: the worker trims Redis to that */
	if (delayed)
		rl_hand_unsettled_to_worker();
	return true;
}

static int
release_all(void)
{
	HASH_SEQ_STATUS seq;
	LocalLock  *ll;
	LocalLock **locks;
	int32	   *keep;
	int64	   *before;
	int			n = 0;
	int			released = 0;
	bool		delayed;

	rl_settle(false);
	if (hash_get_num_entries(rl_local_locks) == 0)
		return 0;
	locks = palloc(sizeof(LocalLock *) * hash_get_num_entries(rl_local_locks));
	keep = palloc(sizeof(int32) * hash_get_num_entries(rl_local_locks));
	before = palloc(sizeof(int64) * hash_get_num_entries(rl_local_locks));
	hash_seq_init(&seq, rl_local_locks);
	while ((ll = hash_seq_search(&seq)) != NULL)
	{
		if (ll->session_holds == 0)
			continue;
		keep[n] = ll->xact_holds;
		locks[n++] = ll;
		rl_mark_dirty(ll);			/* until the reply is in */
	}
	delayed = n > 0 && !rl_trim_in_redis(n, locks, keep, before, false);
	if (delayed && !rl_release_delayed(n, locks))
		rl_report(&rl_cmd_conn, ERROR);
	for (int i = 0; i < n; i++)
	{
		if (delayed)
			before[i] = 1;		/* given back, if later */
		else
			rl_set_flags(locks[i], false, locks[i]->queued);
		if (before[i] > 0)
		{
			released++;
			rl_stat_add(RL_STAT_RELEASES, 1);
		}
		else
			ereport(WARNING,
					(errmsg("%s \"%s\" was no longer held",
							rl_primitive(locks[i]->kind)->noun, locks[i]->name),
					 errdetail("Its lease ran out or it was force-released.")));
		locks[i]->session_holds = 0;
		rl_publish_or_forget(locks[i]);
	}
	if (delayed)
		rl_hand_unsettled_to_worker();
	return released;
}

bool
rl_lock_force_release(const char *name)
{
	RLEval		e;
	RLReply    *r;

	rl_settle(false);
	memset(&e, 0, sizeof(e));
	e.script = &rl_script_force_release;
	e.nkeys = 5;
	e.keys[0] = name;
	e.keys[1] = channel_key(name);
	e.keys[2] = queue_key(name);
	e.keys[3] = rwlock_channel_key(name);
	e.keys[4] = timeouts_key(name);
	e.args[0] = rl_publish_command();
	e.args[1] = "0";
	e.nargs = 2;
	if (rl_layout == RL_LAYOUT_PLAIN)
	{
		/* a string at name is a plain lock: delete it and announce it */
		e.nkeys = 6;
		e.keys[5] = rl_plain_channel(name);
		e.args[1] = "1";
		e.nargs += rl_plain_peer_channels(name, e.args + 2,
										  RL_EVAL_MAX_ARGS - 2);
	}
	if (rl_mode() == RL_MODE_REDLOCK)
	{
		RLReply  ***per = palloc0(sizeof(RLReply **) * rl_redlock_size());
		bool		deleted = false;

		if (!rl_run_majority(1, &e, per))
			rl_report(&rl_cmd_conn, ERROR);
		for (int node = 0; node < rl_redlock_size(); node++)
			if (per[node] != NULL)
			{
				if (per[node][0]->type == REDIS_REPLY_ERROR)
					rl_reply_error(per[node][0], RL_OP_FORCE_RELEASE, name);
				deleted |= is_int(per[node][0]) && per[node][0]->integer == 1;
			}
		return deleted;
	}
	r = rl_eval_one(&e, RL_OP_FORCE_RELEASE, name, NULL);
	rl_expect_reply(is_int(r), RL_OP_FORCE_RELEASE, name);
	return r->integer == 1;
}
