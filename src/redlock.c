/*
 * redlock.c
 *	  Taking a lock with Redlock: one attempt on every master at once, the
 *	  majority and validity that make it ours, the fencing token committed
 *	  on a majority, and when to try again.
 *
 * src/redlock.c
 */
#include "postgres.h"

#include <hiredis/hiredis.h>

#include "common/pg_prng.h"
#include "utils/timestamp.h"

#include "conn.h"
#include "lock_int.h"
#include "redislock.h"
#include "registry.h"
#include "route.h"
#include "scripts.h"

/* Is r the reply acquire.lua gives: {1, token, fresh} or {0, pttl}? */
static bool
is_acquire_reply(const RLReply *r)
{
	return r->type == REDIS_REPLY_ARRAY && r->elements >= 2 &&
		is_array_of(r, r->elements, REDIS_REPLY_INTEGER);
}

/*
 * Commits the fencing token of a fresh Redlock acquisition: the largest
 * counter of the majority that granted it, written back to every master
 * that has less. The previous holder left its token on a majority too, and
 * two majorities overlap, so tokens strictly increase from holder to holder
 * as long as no master of that overlap lost its data in between. When a
 * majority already returned that very value (counters in step, the usual
 * case) it is on a majority already and this round trip is skipped.
 */
static bool
commit_token(LocalLock *ll, int64 token)
{
	RLEval		e;
	RLReply  ***per = palloc0(sizeof(RLReply **) * rl_redlock_size());
	int			nraised = 0;

	memset(&e, 0, sizeof(e));
	e.script = &rl_script_raise_token;
	e.nkeys = 1;
	e.keys[0] = rl_primitive(ll->kind)->fencing_key(ll->name);
	e.nargs = 1;
	e.args[0] = rl_int64_arg(token);
	(void) rl_run_all(1, &e, per);
	for (int node = 0; node < rl_redlock_size(); node++)
		if (per[node] != NULL && is_int(per[node][0]) && per[node][0]->integer == token)
			nraised++;
	return nraised >= rl_redlock_quorum();
}

/*
 * When a Redlock attempt failed, when to try again: once enough masters
 * are free by the refusals' lease ends, or after a short random delay when
 * nobody seems to hold a majority (contenders split the votes and are
 * rolling back). The jitter keeps contenders from colliding again.
 */
static int64
redlock_retry_ms(int64 *pttls, int nrefused, int nfree)
{
	int			need = rl_redlock_quorum() - nfree;
	int64		jitter = (int64) (pg_prng_uint64(&pg_global_prng_state) % 50);

	if (need <= 0 || nrefused < rl_redlock_quorum())
		return 10 + jitter;
	for (int i = 1; i < nrefused; i++)
		for (int j = i; j > 0 && pttls[j - 1] > pttls[j]; j--)
		{
			int64		t = pttls[j];

			pttls[j] = pttls[j - 1];
			pttls[j - 1] = t;
		}
	return Max(pttls[need - 1], 0) + jitter;
}

/*
 * One Redlock attempt of n locks: e, an acquisition script of n names
 * ({1, token 1, fresh 1, ...} or {0, pttl[, i]}: name i is another's; the
 * script of one name refuses with {0, pttl}, which names that one), on
 * every master at once. Taken when a majority granted it within its
 * validity (lease minus the time it took minus clock drift) and the fencing
 * tokens of the fresh locks are committed; else given back on every
 * master. Once taken, token[i] and fresh[i] are each lock's; refused[i]
 * says whether no majority can have our hold of lock i any more: more than
 * a minority named it another's.
 */
static void
redlock_attempt_n(const RLEval *e, int n, LocalLock **locks, int64 lease_ms,
				  int64 *token, bool *fresh, bool *refused, Attempt *out)
{
	int			nnodes = rl_redlock_size();
	RLReply  ***per = palloc0(sizeof(RLReply **) * nnodes);
	int64	   *pttls = palloc(sizeof(int64) * nnodes);
	int		   *at_token = palloc0(sizeof(int) * n);
	int		   *held_before = palloc0(sizeof(int) * n);
	int		   *named = palloc0(sizeof(int) * n);
	TimestampTz start = GetCurrentTimestamp();
	int			granted = 0;
	int			nrefused = 0;
	int64		drift = lease_ms * rl_redlock_drift / 1000 + 2;
	RLReply    *error = NULL;
	bool		committed = true;

	memset(token, 0, sizeof(int64) * n);
	memset(fresh, 0, sizeof(bool) * n);
	for (int i = 0; i < n; i++)
		rl_mark_dirty(locks[i]);
	if (!rl_run_majority(1, e, per))
	{
		rl_stat_add(RL_STAT_REDIS_ERRORS, 1);
		rl_report(&rl_cmd_conn, ERROR);
	}
	for (int node = 0; node < nnodes; node++)
	{
		RLReply    *r;

		if (per[node] == NULL)
			continue;
		r = per[node][0];
		if (!is_acquire_reply(r) ||
			(r->element[0]->integer == 1 && r->elements != 1 + 2 * (size_t) n))
		{
			error = error ? error : r;
			continue;
		}
		if (r->element[0]->integer != 1)
		{
			/* a master names the first name it found another's: a floor */
			int64		i = 1;

			if (n > 1)
				i = r->elements > 2 ? r->element[2]->integer : 0;
			pttls[nrefused++] = r->element[1]->integer;
			if (i >= 1 && i <= n)
				named[i - 1]++;
			continue;
		}
		granted++;
		for (int i = 0; i < n; i++)
		{
			int64		t = r->element[1 + 2 * i]->integer;

			if (t > token[i])
				at_token[i] = 0;
			if (t >= token[i])
				at_token[i]++;
			token[i] = Max(token[i], t);
			held_before[i] += r->element[2 + 2 * i]->integer == 0 ? 1 : 0;
		}
	}

	memset(out, 0, sizeof(*out));
	out->sent = start;
	for (int i = 0; i < n; i++)
		refused[i] = named[i] > nnodes - rl_redlock_quorum();
	if (granted >= rl_redlock_quorum())
		for (int i = 0; i < n && committed; i++)
		{
			fresh[i] = held_before[i] < rl_redlock_quorum();
			if (!fresh[i])
				token[i] = locks[i]->token;
			else if (at_token[i] < rl_redlock_quorum())
				committed = commit_token(locks[i], token[i]);
		}
	if (granted >= rl_redlock_quorum() && committed &&
		(GetCurrentTimestamp() - start) / 1000 + drift < lease_ms)
	{
		out->acquired = true;
		out->masters = granted;
		for (int i = 0; i < n; i++)
			rl_set_flags(locks[i], false, false);
		return;
	}

	/* not ours: give back what we got, on every master */
	{
		int32	   *keep = palloc(sizeof(int32) * n);
		int64	   *before = palloc(sizeof(int64) * n);

		for (int i = 0; i < n; i++)
			keep[i] = total_holds(locks[i]);
		if (rl_trim_in_redis(n, locks, keep, before, true))
			for (int i = 0; i < n; i++)
				rl_set_flags(locks[i], false, locks[i]->queued);
	}
	if (error != NULL && error->type == REDIS_REPLY_ERROR &&
		granted + nrefused < rl_redlock_quorum())
		rl_reply_error(error, RL_OP_ACQUIRE, locks[0]->name);
	rl_expect_reply(granted + nrefused >= rl_redlock_quorum(), RL_OP_ACQUIRE,
					locks[0]->name);
	out->pttl = redlock_retry_ms(pttls, nrefused, nnodes - nrefused);
}

/*
 * One Redlock acquisition attempt of one lock: the acquisition script of
 * its layout (acquire.lua, plain_acquire.lua), taking our release mark
 * away, by redlock_attempt_n.
 */
void
rl_redlock_attempt(LocalLock *ll, int64 lease_ms, int32 target, Attempt *out)
{
	RLEval		e;
	int64		token;
	bool		fresh = false;
	bool		refused;

	memset(&e, 0, sizeof(e));
	rl_primitive(ll->kind)->acquire(&e, ll, lease_ms, target, false, false);
	e.keys[e.nkeys++] = rl_released_key(ll->name, rl_owner_id());
	redlock_attempt_n(&e, 1, &ll, lease_ms, &token, &fresh, &refused, out);
	out->refused = refused;
	out->fresh = fresh;
	if (out->acquired)
		out->token = token;
}

/*
 * One Redlock attempt of a multi-lock of the plain layout (what node redlock
 * does for a lock of several resources): e, plain_acquire_all.lua, each
 * master taking all n keys or none, by redlock_attempt_n. A name that no
 * majority can hold for us any more is lost, as on a single server.
 */
void
rl_redlock_attempt_all(const RLEval *e, int n, LocalLock **locks,
					   int64 lease_ms, int64 *token, bool *fresh, Attempt *out)
{
	bool	   *refused = palloc(sizeof(bool) * n);

	redlock_attempt_n(e, n, locks, lease_ms, token, fresh, refused, out);
	for (int i = 0; i < n; i++)
		if (refused[i])
			rl_lost_by_answer(locks[i]);
}

