/*
 * lock_int.h
 *	  What the files of the lock layer (lock.c, xact.c, status.c,
 *	  redlock.c) share: the session's table of held locks, the names of a
 *	  lock's Redis keys, and the helpers that keep Redis in line with it.
 *
 * src/lock_int.h
 */
#ifndef REDISLOCK_LOCK_INT_H
#define REDISLOCK_LOCK_INT_H

#include <hiredis/hiredis.h>

#include "utils/hsearch.h"

#include "compat.h"
#include "conn.h"
#include "deadlock.h"
#include "lock.h"
#include "redislock.h"

/* What this session holds of one lock. */
typedef struct LocalLock
{
	char		name[RL_NAME_MAX + 1];	/* hash key: name, zero-padded, */
	uint8		kind;			/* ... RLKind, */
	char		id[RL_PERMIT_ID_HEX + 1];	/* ... and a permit's id, else
											 * zeros */
	int32		session_holds;
	int32		xact_holds;
	int32		redis_holds;	/* what Redis counts for us, at most: less
								 * than our holds after a local re-entry */
	bool		dirty;			/* Redis may hold more than we count */
	bool		queued;			/* we may still stand in its fair queue */
	bool		releasing;		/* a release of one hold may or may not have
								 * been applied (its reply was lost) */
	bool		unsettled;		/* the worker was told to settle it */
	bool		watchdog;
	bool		fair;
	int64		lease_ms;
	int64		token;
	TimestampTz acquired_at;
	int			slot;			/* in the shared registry, -1 if none */
	uint32		generation;		/* of that slot */
	uint32		epoch;			/* of our hold in that slot */
	int			masters;		/* Redlock: masters that granted it */
} LocalLock;

/* The outcome of one acquisition attempt. */
typedef struct Attempt
{
	bool		acquired;
	bool		fresh;			/* taken anew, not re-entered */
	int64		token;
	int64		pttl;			/* holder's remaining lease, -1/-2 as PTTL */
	bool		head;			/* first in the fair queue */
	bool		refused;		/* Redis answered that another owner has
								 * it: any hold of ours there is gone */
	int			masters;		/* Redlock: masters that granted it */
	RLReply    *wait;			/* sync_replicas: the WAIT sent with it */
	TimestampTz sent;			/* when the request that took it was sent:
								 * its lease runs from then, however late
								 * the reply (WAIT) came */
} Attempt;

/*
 * One wait of rl_wait(): where releases are announced, and how to try
 * again and to give up.
 */
typedef struct RLWait
{
	const char *timeout_msg;	/* errmsg when lock_timeout ends the wait */
	int			nchannels;
	const char *const *channels;
	void		(*attempt) (void *arg, Attempt *a); /* sets a->acquired, and
													 * a->pttl if not */
	void		(*give_up) (void *arg); /* after a timeout or ERROR; quiet */
	void	   *arg;
	bool		fair;			/* only the queue head retries at the lease end */
	bool		has_place;		/* a place to refresh while waiting */
	bool		wake_one;		/* an unlock "0" wakes one waiter of ours */
	int			recheck_ms;		/* > 0: try again at least this often, for
								 * changes that publish nothing */
	int			poll_ms;		/* > 0: releases may be announced nowhere: poll
								 * with a jittered back-off up to this pause */
	RLWaitFor	wait_for;		/* for redis_lock_waits and deadlock checks */
} RLWait;

/* holds.c: the session's table of held locks, keyed by name and kind */
extern HTAB *rl_local_locks;

/* The Redis keys of a lock besides the hash itself (see rl_prefixed_key). */
extern char *rl_prefixed_key(const char *prefix, const char *name);
extern char *rl_suffixed_key(const char *name, const char *suffix);

#define channel_key(name) rl_prefixed_key("redisson_lock__channel", (name))
#define queue_key(name) rl_prefixed_key("redisson_lock_queue", (name))
#define timeouts_key(name) rl_prefixed_key("redisson_lock_timeout", (name))
#define token_key(name) rl_prefixed_key("redisson_lock_token", (name))
extern char *rl_released_key(const char *name, const char *owner);
extern char *rl_lock_token_key(const char *name);

/* An exclusive lock, of either key layout. */
static inline bool
rl_kind_exclusive(uint8 kind)
{
	return kind == RL_KIND_LOCK || kind == RL_KIND_PLAIN;
}

static inline int32
total_holds(const LocalLock *ll)
{
	return ll->session_holds + ll->xact_holds;
}

static inline bool
is_int(const RLReply *r)
{
	return r->type == REDIS_REPLY_INTEGER;
}

/* An array of at least n elements, the first n of the given type. */
static inline bool
is_array_of(const RLReply *r, size_t n, int type)
{
	if (r->type != REDIS_REPLY_ARRAY || r->elements < n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (r->element[i]->type != type)
			return false;
	return true;
}

/*
 * What the engine needs to know of one kind of hold (a primitive): its
 * scripts, where its releases are announced, its field in the lock hash (the
 * commit guard checks it), and whether a waiter keeps a place that it
 * refreshes while it waits (a fair queue entry is the exclusive lock's, with
 * fair; a waiting writer's mark is the write lock's, always). An acquisition
 * that may leave such a place marks the entry "queued"; the release script
 * with leave gives the place up, so settling, a given-up wait and the worker
 * take it back as they take a fair queue entry back.
 */
typedef struct RLPrimitive
{
	const char *label;			/* redis_locks.kind */
	const char *noun;			/* in messages: "Redis lock" */
	const char *plural;			/* "Redis locks" */
	const char *layout;			/* its key layout: "redisson" or "plain" */
	const char *no_redlock;		/* why it does not work with Redlock, or NULL */
	bool		waiter_place;	/* every waiter keeps a place */
	bool		outlives_lease; /* a dead owner's hold stays in Redis after
								 * its lease until redislock gives it back
								 * (nothing else frees it) */
	bool		owned;			/* Redis refuses an owner's re-entry only
								 * once its hold is gone */
	bool		silent_growth;	/* room can come without a message (Redisson
								 * before 3.16.2: RSemaphore.addPermits), so
								 * waiters re-check on their own */
	void		(*acquire) (RLEval *e, LocalLock *ll, int64 lease_ms,
							int32 target, bool fair, bool enqueue);
	const RedisScript *acquire_all;	/* several at once (see multilock.c),
									 * or NULL */
	void		(*release) (RLEval *e, const char *name, const char *owner,
							int32 keep, bool leave, int64 mark_ms);
	void		(*renew) (RLEval *e, const char *name, const char *owner,
						  int64 lease_ms, int32 holds, bool restore);
	char	   *(*channel) (const char *name, bool fair);
	const char *(*field) (const char *owner);
	char	   *(*fencing_key) (const char *name);	/* its fencing counter, or
													 * NULL */
	/* the commit guard's check that Redis still has owner's hold */
	void		(*verify) (RLCommand *cmd, const char *name, const char *owner);
	bool		(*verified) (const RLReply *r);
} RLPrimitive;

extern const RLPrimitive rl_lock_primitive; /* lock.c */
extern const RLPrimitive rl_read_primitive; /* rwlock.c */
extern const RLPrimitive rl_write_primitive;	/* rwlock.c */
extern const RLPrimitive rl_semaphore_primitive;	/* semaphore.c */
extern const RLPrimitive rl_permit_primitive;	/* semaphore.c */
extern const RLPrimitive rl_latch_primitive;	/* latch.c: waits only */
extern const RLPrimitive rl_plain_primitive;	/* plain.c */

/*
 * How long a release mark lives at least: longer than any request of the
 * worker can take (connect and command timeouts at their maximum, with
 * room), so that a renewal under way when the mark was written has reached
 * Redis or died before the mark goes.
 */
#define RL_RELEASE_MARK_MIN_MS (2 * (RL_MAX_CONNECT_TIMEOUT_MS + RL_MAX_COMMAND_TIMEOUT_MS))

/* holds.c: the session's table */
extern const RLPrimitive *rl_primitive(RLKind kind);
extern LocalLock *rl_local_find(const char *name, RLKind kind);
extern LocalLock *rl_local_find_id(const char *name, RLKind kind,
								   const char *id);
extern LocalLock *rl_local_get(const char *name, RLKind kind, const char *id,
							   int64 lease_ms);
extern const char *rl_hold_owner(const LocalLock *ll);
extern void rl_verify_hexists(RLCommand *cmd, const char *key,
							  const char *field);
extern bool rl_verified_int(const RLReply *r);
extern char *rl_call_key(const char *name);
extern char *rl_random_id(void);
extern char *rl_call_ttl_arg(void);
extern int64 rl_now_ms(void);
extern char *rl_now_ms_arg(void);
extern void rl_forget_if_unused(LocalLock *ll);
extern void rl_publish_or_forget(LocalLock *ll);
extern void rl_publish(LocalLock *ll, bool fresh, TimestampTz renewed);
extern void rl_set_flags(LocalLock *ll, bool dirty, bool queued);
extern void rl_mark_dirty(LocalLock *ll);
extern bool rl_holds_pending(void);
extern char *rl_int64_arg(int64 v);
extern void rl_expect_reply(bool ok, RLOp op, const char *name);

/* lock.c: the engine's Redis side */
extern bool rl_trim_in_redis(int n, LocalLock **locks, const int32 *keep,
							 int64 *before, bool quiet);
extern bool rl_trim_quietly(int n, LocalLock **locks, const int32 *keep,
							int64 *before);
extern bool rl_settle_locks(int n, LocalLock **locks, bool quiet);
extern void rl_settle_lock(LocalLock *ll);
extern void rl_hand_unsettled_to_worker(void);
extern bool rl_release_delayed(int n, LocalLock **locks);
extern void rl_settle(bool quiet);
extern RLReply *rl_eval_one(const RLEval *e, RLOp op,
							const char *name, LocalLock *pending);
extern void rl_check_redlock(const RLPrimitive *prim);
extern void rl_check_acquire(const RLAcquireRequest *req);
extern RLReply *rl_run_acquisition(const RLEval *e, RLReply **wait,
									int n, LocalLock **locks);
pg_noreturn extern void rl_replicas_unconfirmed(const RLReply *r, const char *name,
												bool given_back);
extern void rl_lost_by_answer(LocalLock *ll);
extern bool rl_held_quietly(const LocalLock *ll);
extern bool rl_releasing_call;
extern void rl_owner_renew_eval(RLEval *e, const RedisScript *script,
								const char *name, const char *owner,
								int64 lease_ms, int32 holds, bool restore);
extern bool rl_take_hold(LocalLock *ll, const RLAcquireRequest *req,
						 int32 target, Attempt *a);
extern void rl_record_hold(LocalLock *ll, const RLAcquireRequest *req,
						   int64 lease_ms, const Attempt *a);

/* wait.c */

/*
 * How long a request of a wait may outlive the wait's deadline: the
 * attempt in flight when it comes, the give-up of a fair waiter's place.
 */
#define RL_WAIT_OVERRUN_MS 100

extern bool rl_wait(const RLWait *w, const RLAcquireRequest *req,
					Attempt *a);
extern bool rl_wait_call(const RLAcquireRequest *req, const char *timeout_msg,
						 bool (*take) (void *arg), void *arg);

/* rwlock.c */
#define rwlock_channel_key(name) rl_prefixed_key("redisson_rwlock", (name))

/* redlock.c */
extern void rl_redlock_attempt(LocalLock *ll, int64 lease_ms, int32 target,
							   Attempt *out);
extern void rl_redlock_attempt_all(const RLEval *e, int n, LocalLock **locks,
								   int64 lease_ms, int64 *token, bool *fresh,
								   Attempt *out);

/* xact.c */
extern void rl_reserve_xact_holds(int n);
extern void rl_add_xact_hold(LocalLock *ll, int32 n);
extern void rl_register_exit_callback(void);

#endif							/* REDISLOCK_LOCK_INT_H */
