/*
 * multilock.c
 *	  redis_lock_acquire_all(): several exclusive locks taken together, all
 *	  or none. On one node (or one cluster slot) in one script, so nobody
 *	  sees a part taken and a waiter holds nothing; across cluster slots one
 *	  by one in a canonical order, giving back what the call took if one
 *	  fails.
 *
 * src/multilock.c
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/timestamp.h"

#include "lock_int.h"
#include "plain.h"
#include "redislock.h"
#include "registry.h"
#include "route.h"
#include "scripts.h"

/* One call: its locks (in canonical order) and the holds it asks for. */
typedef struct MultiLock
{
	const RLAcquireRequest *req;
	int			n;
	LocalLock **locks;
	int32	   *target;
	int64		lease_ms;
	int64	   *token;			/* filled when taken */
	bool	   *fresh;
	bool	   *was_lost;		/* held, but known lost before the call */
} MultiLock;

/*
 * One try of acquire_all.lua; a->acquired (and a->wait, the WAIT sent with
 * it), or a->pttl of the blocker.
 */
static void
attempt_all(void *arg, Attempt *a)
{
	MultiLock  *m = arg;
	RLEval		e;
	RLReply    *r;
	RLReply    *wait;
	TimestampTz sent;

	memset(&e, 0, sizeof(e));
	e.script = rl_primitive(m->req->kind)->acquire_all;
	e.nkeys = 2 * m->n;
	e.nargs = 2 + m->n;
	e.args[0] = rl_int64_arg(m->lease_ms);
	e.args[1] = rl_owner_id();
	for (int i = 0; i < m->n; i++)
	{
		e.keys[2 * i] = m->locks[i]->name;
		e.keys[2 * i + 1] = rl_primitive(m->req->kind)->fencing_key(m->locks[i]->name);
		e.args[2 + i] = rl_int64_arg(m->target[i]);
		rl_mark_dirty(m->locks[i]);
	}
	if (rl_mode() == RL_MODE_REDLOCK)
	{
		rl_redlock_attempt_all(&e, m->n, m->locks, m->lease_ms, m->token,
							   m->fresh, a);
		for (int i = 0; i < m->n; i++)
			m->fresh[i] |= m->was_lost[i];
		return;
	}
	sent = GetCurrentTimestamp();
	r = rl_run_acquisition(&e, &wait, m->n, m->locks);

	/* Redis answered: the outcome is known, whatever it is */
	for (int i = 0; i < m->n; i++)
		rl_set_flags(m->locks[i], false, false);
	if (r->type == REDIS_REPLY_ERROR)
	{
		rl_stat_add(RL_STAT_REDIS_ERRORS, 1);
		rl_reply_error(r, RL_OP_ACQUIRE, m->req->name);
	}
	rl_expect_reply(is_array_of(r, r->type == REDIS_REPLY_ARRAY ? r->elements : 2,
								REDIS_REPLY_INTEGER) && r->elements >= 2 &&
					(r->element[0]->integer == 0 ||
					 r->elements == 1 + 2 * (size_t) m->n),
					RL_OP_ACQUIRE, m->req->name);
	memset(a, 0, sizeof(*a));
	a->sent = sent;
	a->acquired = r->element[0]->integer == 1;
	a->wait = wait;
	if (!a->acquired)
	{
		a->pttl = r->element[1]->integer;
		/* the name another owner has: a hold of ours there is gone */
		if (r->elements > 2 && r->element[2]->integer >= 1 &&
			r->element[2]->integer <= m->n)
			rl_lost_by_answer(m->locks[r->element[2]->integer - 1]);
		return;
	}
	for (int i = 0; i < m->n; i++)
	{
		m->token[i] = r->element[1 + 2 * i]->integer;
		m->fresh[i] = r->element[2 + 2 * i]->integer == 1 || m->was_lost[i];
	}
}

/*
 * With redislock.sync_replicas, the set counts only once the replicas have
 * it (the WAIT sent with the script that took it); otherwise all of it is
 * given back and the call fails, as a single acquisition does.
 */
static void
confirm_on_replicas(MultiLock *m, const RLReply *wait)
{
	int32	   *keep = palloc(sizeof(int32) * m->n);
	int64	   *before = palloc(sizeof(int64) * m->n);
	bool		given_back;

	if (wait->type == REDIS_REPLY_INTEGER && wait->integer >= rl_sync_replicas)
		return;
	for (int i = 0; i < m->n; i++)
	{
		keep[i] = m->target[i] - 1;
		rl_mark_dirty(m->locks[i]);
	}
	given_back = rl_trim_in_redis(m->n, m->locks, keep, before, true);
	if (given_back)
		for (int i = 0; i < m->n; i++)
			rl_set_flags(m->locks[i], false, false);
	rl_replicas_unconfirmed(wait, m->req->name, given_back);
}

/*
 * Where a waiter for plain locks listens: every name's wake channels (see
 * rl_plain_wake_channels), polling as the most demanding of them needs. A
 * wait has at most RL_MULTI_MAX channels (what the listener serves): each
 * name's own channel first, then the others while there is room; a name
 * whose others do not fit is polled for as without notifications.
 */
static int
plain_channels(MultiLock *m, const char ***out, int *poll_ms)
{
	const char **all = palloc(sizeof(char *) * RL_MULTI_MAX);
	const char ***some = palloc(sizeof(const char **) * m->n);
	int		   *k = palloc(sizeof(int) * m->n);
	int			n = 0;

	*poll_ms = 0;
	for (int i = 0; i < m->n; i++)
	{
		int			pause;

		k[i] = rl_plain_wake_channels(m->locks[i]->name, &some[i], &pause);
		all[n++] = some[i][0];
		*poll_ms = *poll_ms == 0 ? pause : Min(*poll_ms, pause);
	}
	for (int i = 0; i < m->n; i++)
	{
		if (n + k[i] - 1 > RL_MULTI_MAX)
		{
			*poll_ms = RL_PLAIN_POLL_MAX_MS;
			continue;
		}
		for (int j = 1; j < k[i]; j++)
			all[n++] = some[i][j];
	}
	*out = all;
	return n;
}

/* All on one node: one script, and a wait on every name's channel. */
static bool
take_at_once(void *arg)
{
	MultiLock  *m = arg;
	Attempt		a;
	RLWait		w;
	const char **channels = palloc(sizeof(char *) * m->n);
	const char **names = palloc(sizeof(char *) * m->n);

	attempt_all(m, &a);
	if (!a.acquired && m->req->wait_ms != 0)
	{
		memset(&w, 0, sizeof(w));
		for (int i = 0; i < m->n; i++)
		{
			names[i] = m->locks[i]->name;
			channels[i] = channel_key(names[i]);
		}
		w.nchannels = m->n;
		if (m->req->kind == RL_KIND_PLAIN)
			w.nchannels = plain_channels(m, &channels, &w.poll_ms);
		w.timeout_msg = psprintf("could not obtain Redis lock \"%s\"", m->req->name);
		w.channels = channels;
		w.attempt = attempt_all;
		w.arg = m;
		w.wait_for.kind = m->req->kind;
		w.wait_for.n = m->n;
		w.wait_for.names = names;
		(void) rl_wait(&w, m->req, &a);
	}
	if (!a.acquired)
		return false;
	if (a.wait != NULL)
		confirm_on_replicas(m, a.wait);
	for (int i = 0; i < m->n; i++)
	{
		a.token = m->token[i];
		a.fresh = m->fresh[i];
		rl_record_hold(m->locks[i], m->req, m->lease_ms, &a);
	}
	return true;
}

/*
 * Gives back the session holds this call took of the first n locks and
 * recorded: each goes back to the holds it had before. With quiet (on the
 * way out of an ERROR) Redis gets CLEANUP_MS at most and a failure is only
 * logged. What could not be given back stays marked dirty: the next call or
 * the worker settles it, and it is never counted as held.
 */
static void
give_back(MultiLock *m, int n, bool quiet)
{
	int32	   *keep = palloc(sizeof(int32) * Max(n, 1));
	int64	   *before = palloc(sizeof(int64) * Max(n, 1));
	bool		done = true;

	if (n == 0)
		return;
	for (int i = 0; i < n; i++)
	{
		Assert(m->locks[i]->session_holds > 0);
		m->locks[i]->session_holds--;
		keep[i] = total_holds(m->locks[i]);
		rl_mark_dirty(m->locks[i]);
		rl_publish(m->locks[i], false, 0);
	}
	if (quiet)
	{
		done = rl_trim_quietly(n, m->locks, keep, before);
		if (!done)
			rl_hand_unsettled_to_worker();
	}
	else if (!rl_trim_in_redis(n, m->locks, keep, before, false))
		rl_report(&rl_cmd_conn, ERROR);
	if (!done)
		return;
	for (int i = 0; i < n; i++)
		rl_set_flags(m->locks[i], false, false);
}

/*
 * Gives every hold of the call its full lease again, as the last step: one
 * taken early may have run out while a later one was awaited (a fixed
 * lease, or the watchdog kept from Redis), or be close to it. Returns
 * whether Redis still had every one of them.
 */
static bool
all_renewed(MultiLock *m)
{
	RLEval	   *evals = palloc0(sizeof(RLEval) * m->n);
	RLReply   **replies = palloc(sizeof(RLReply *) * m->n);
	TimestampTz sent = GetCurrentTimestamp();

	for (int i = 0; i < m->n; i++)
		rl_renew_eval(&evals[i], m->req->kind, m->locks[i]->name, rl_owner_id(),
					  m->lease_ms, total_holds(m->locks[i]), false);
	if (!rl_run(m->n, evals, replies))
	{
		rl_stat_add(RL_STAT_REDIS_ERRORS, 1);
		rl_report(&rl_cmd_conn, ERROR);
	}
	for (int i = 0; i < m->n; i++)
		if (replies[i]->type != REDIS_REPLY_INTEGER || replies[i]->integer != 1)
			return false;
	for (int i = 0; i < m->n; i++)
		rl_publish(m->locks[i], false, sent);
	return true;
}

/*
 * Across cluster slots: one by one in canonical order, so that two calls
 * never wait for each other's locks in a cycle; the whole call shares one
 * deadline. Each lock is counted as a session hold as soon as it is taken,
 * so that the watchdog renews it while later ones are awaited; whatever
 * stops the call (timeout, ERROR, cancel) gives back those it took. If an
 * early hold was lost meanwhile, all are given back and the call starts
 * over. A transaction-scope call turns its holds into transaction holds at
 * the end.
 */
static bool
take_in_order(void *arg)
{
	MultiLock  *m = arg;
	RLAcquireRequest one = *m->req;
	volatile TimestampTz deadline = DT_NOEND;
	volatile int taken = 0;
	volatile bool all = false;
	volatile bool by_lock_timeout = m->req->wait_ms < 0 && LockTimeout > 0;

	/* one deadline for the whole call, lock_timeout's too */
	one.scope = RL_SCOPE_SESSION;
	if (m->req->wait_ms > 0)
		deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
											   m->req->wait_ms);
	else if (by_lock_timeout)
		deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
											   LockTimeout);
	while (!all)
	{
		taken = 0;
		PG_TRY();
		{
			for (; taken < m->n; taken++)
			{
				LocalLock  *ll = m->locks[taken];
				Attempt		a;

				if (deadline != DT_NOEND)
					one.wait_ms = Max((deadline - GetCurrentTimestamp()) / 1000, 0);
				one.name = ll->name;
				if (!rl_take_hold(ll, &one, total_holds(ll) + 1, &a))
					break;
				rl_record_hold(ll, &one, m->lease_ms, &a);
			}
			all = taken == m->n && all_renewed(m);
		}
		PG_CATCH();
		{
			give_back(m, taken, true);
			PG_RE_THROW();
		}
		PG_END_TRY();
		if (all)
			break;
		give_back(m, taken, false);
		if (taken < m->n || GetCurrentTimestamp() >= deadline)
		{
			if (by_lock_timeout)
				ereport(ERROR,
						(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
						 errmsg("could not obtain Redis lock \"%s\"", m->req->name),
						 errdetail("lock_timeout (%d ms) expired while waiting.",
								   LockTimeout)));
			return false;
		}
	}
	if (m->req->scope == RL_SCOPE_XACT)
		for (int i = 0; i < m->n; i++)
		{
			Assert(m->locks[i]->session_holds > 0);
			m->locks[i]->session_holds--;
			rl_add_xact_hold(m->locks[i], 1);
			rl_publish(m->locks[i], false, 0);
		}
	return true;
}

bool
rl_lock_acquire_all(const RLAcquireRequest *req, int n,
					const char *const *names)
{
	MultiLock	m;
	volatile int nlocks = 0;
	bool		taken = false;

	rl_check_acquire(req);
	if (rl_mode() == RL_MODE_REDLOCK && req->kind != RL_KIND_PLAIN)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("redis_lock_acquire_all() is not supported with Redlock for locks of the redisson layout"),
				 errdetail("Several locks cannot be taken at once on independent masters, and taken one by one each would need its own majority and validity."),
				 errhint("Take the locks one by one with redis_lock_acquire(), always in the same order, or use layout => 'plain', whose multi-locks take every name on each master at once (as node redlock does).")));
	rl_settle(false);
	rl_register_exit_callback();
	if (req->scope == RL_SCOPE_XACT)
		rl_reserve_xact_holds(n);
	m.req = req;
	m.n = n;
	/* in m, not a local: the PG_TRY below would need it volatile */
	m.lease_ms = req->lease_ms > 0 ? req->lease_ms : rl_watchdog_timeout;
	m.locks = palloc(sizeof(LocalLock *) * n);
	m.target = palloc(sizeof(int32) * n);
	m.token = palloc0(sizeof(int64) * n);
	m.fresh = palloc0(sizeof(bool) * n);
	m.was_lost = palloc0(sizeof(bool) * n);

	/* Entries created for nothing must not keep their shared slots. */
	PG_TRY();
	{
		for (; nlocks < n; nlocks++)
		{
			m.locks[nlocks] = rl_local_get(names[nlocks], req->kind, NULL, m.lease_ms);
			m.target[nlocks] = total_holds(m.locks[nlocks]) + 1;
			m.was_lost[nlocks] = m.target[nlocks] > 1 &&
				rl_registry_is_lost(m.locks[nlocks]->slot,
									m.locks[nlocks]->generation);
			if (m.target[nlocks] > 1 && m.lease_ms > m.locks[nlocks]->lease_ms)
				rl_registry_attempt(m.locks[nlocks]->slot,
									m.locks[nlocks]->generation, m.lease_ms);
		}
		for (int i = 0; i < n; i++)
			rl_settle_lock(m.locks[i]);
		taken = rl_wait_call(req,
							 psprintf("could not obtain Redis lock \"%s\"", req->name),
							 rl_mode() != RL_MODE_CLUSTER || rl_same_slot(n, names) ?
							 take_at_once : take_in_order, &m);
	}
	PG_CATCH();
	{
		for (int i = 0; i < nlocks; i++)
			rl_forget_if_unused(m.locks[i]);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (!taken)
		for (int i = 0; i < n; i++)
			rl_forget_if_unused(m.locks[i]);
	return taken;
}
