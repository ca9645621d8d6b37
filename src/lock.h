/*
 * lock.h
 *	  Acquiring, waiting for and releasing Redis locks on behalf of one
 *	  session, and the session's own record of what it holds: what sqlapi.c,
 *	  worker.c and views.c use of lock.c, xact.c and status.c.
 *
 * src/lock.h
 */
#ifndef REDISLOCK_LOCK_H
#define REDISLOCK_LOCK_H

#include "datatype/timestamp.h"

#include "redislock.h"

typedef enum RLScope
{
	RL_SCOPE_SESSION,
	RL_SCOPE_XACT
} RLScope;

typedef struct RLAcquireRequest
{
	RLKind		kind;
	const char *name;
	RLScope		scope;
	int64		wait_ms;		/* -1: until acquired; 0: one attempt */
	int64		lease_ms;		/* 0: watchdog mode */
	bool		fair;
	int32		count;			/* holds taken at once: a semaphore's permits */
	const char *id;				/* a permit's id, else NULL */
} RLAcquireRequest;

/* What Redis says about one lock, for redis_lock_status(). */
typedef struct RLStatus
{
	bool		locked;
	int			nholders;
	char	  **holders;
	int64		hold_count;
	int64		ttl_ms;			/* -1: no expiry or not locked */
	int64		queue_length;
	bool		has_token;
	int64		token;
	bool		held_by_me;
	const char *mode;			/* single, sentinel, cluster or redlock */
	const char *rw_mode;		/* a read-write lock: read or write; else NULL */
	const char *layout;			/* redisson, or plain: a string key */
} RLStatus;

/* One Redlock master's view of a lock, for redis_lock_nodes(). */
typedef struct RLNodeStatus
{
	const char *node;			/* host:port */
	const char *error;			/* why it did not answer, or NULL */
	RLStatus	st;
} RLNodeStatus;

struct RLEval;

extern void rl_lock_init(void);
extern void rl_holds_init(void);
extern void rl_release_eval(struct RLEval *e, RLKind kind, const char *name,
							const char *owner, int32 keep, bool leave,
							int64 mark_ms);
extern void rl_renew_eval(struct RLEval *e, RLKind kind, const char *name,
						  const char *owner, int64 lease_ms, int32 holds,
						  bool restore);
extern bool rl_lock_acquire(const RLAcquireRequest *req);
extern bool rl_lock_acquire_all(const RLAcquireRequest *req, int n,
								const char *const *names);
extern bool rl_lock_release(const char *name, RLKind kind);
extern bool rl_lock_release_n(const char *name, RLKind kind, const char *id,
							  int32 n);
extern int	rl_lock_release_all(void);
extern bool rl_lock_force_release(const char *name);
extern bool rl_lock_fencing_token(const char *name, int64 *token);
extern void rl_lock_status(const char *name, RLStatus *status);
extern int	rl_lock_node_status(const char *name, RLNodeStatus **nodes);
extern const char *rl_owner_id(void);
extern const char *rl_kind_noun(uint8 kind);
extern bool rl_kind_outlives_lease(uint8 kind);

#endif							/* REDISLOCK_LOCK_H */
