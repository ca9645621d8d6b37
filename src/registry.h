/*
 * registry.h
 *	  Shared memory of redislock: the table of locks held by the sessions of
 *	  this server, the counters behind redis_lock_stats, the instance id and
 *	  the session counter that make owner ids unique.
 *
 * src/registry.h
 */
#ifndef REDISLOCK_REGISTRY_H
#define REDISLOCK_REGISTRY_H

#include "datatype/timestamp.h"
#include "storage/latch.h"

#include "redislock.h"

typedef enum RLSlotState
{
	RL_SLOT_FREE,
	RL_SLOT_RESERVED,			/* a session is acquiring, or an idle one
								 * left it unsettled; not held */
	RL_SLOT_HELD,
	RL_SLOT_LOST,				/* Redis no longer has our hold */
	RL_SLOT_ORPHANED			/* session ended without releasing: the
								 * worker releases it */
} RLSlotState;

typedef struct RLSlot
{
	uint8		state;			/* RLSlotState */
	uint8		kind;			/* RLKind */
	bool		fair;
	bool		watchdog;
	bool		unsettled;		/* Redis may hold more than the holds below
								 * (a call's outcome is unknown) while the
								 * session is idle: the worker trims it */
	bool		worker_busy;	/* the worker is settling it */
	bool		releasing;		/* the session is giving back its last hold:
								 * a renewal finding none is that release */
	int			pid;
	Oid			role;			/* counted against this role's share */
	int			procno;			/* the holder's PGPROC */
	uint64		session;		/* the holder's session number */
	uint32		generation;		/* bumped on reuse, so the worker never
								 * updates a slot that changed hands */
	uint32		epoch;			/* bumped on every fresh hold, so that a
								 * result about an earlier hold is not applied
								 * to a new one */
	int32		session_holds;
	int32		xact_holds;
	int64		lease_ms;
	int64		token;
	TimestampTz acquired_at;
	TimestampTz renewed_at;		/* last time Redis got the full lease, as
								 * confirmed by its answer: with lease_ms,
								 * what the watchdog and re-entries trust */
	TimestampTz horizon;		/* how long a request sent for the hold,
								 * answered or not, may keep it in Redis:
								 * what an orphaned hold is released until */
	TimestampTz kept_at;		/* a fixed-lease read hold: last time the
								 * worker kept its hash alive */
	int16		masters;		/* Redlock: masters that had the hold then */
	char		owner[RL_OWNER_MAX];
	char		name[RL_NAME_MAX + 1];
	int			next_free;
} RLSlot;

typedef enum RLStat
{
	RL_STAT_ACQUIRES,
	RL_STAT_REENTRIES,
	RL_STAT_WAITS,
	RL_STAT_WAIT_TIME_MS,
	RL_STAT_TIMEOUTS,
	RL_STAT_RELEASES,
	RL_STAT_RENEWALS,
	RL_STAT_RENEWAL_FAILURES,
	RL_STAT_LOST,
	RL_STAT_WORKER_RELEASED,
	RL_STAT_REDIS_ERRORS,
	RL_STAT_DEADLOCK_CHECKS,	/* after mode in redis_lock_stats: 1.1 */
	RL_STAT_COUNT
} RLStat;

/* What a session publishes about one of its locks. */
typedef struct RLSlotInfo
{
	int32		session_holds;
	int32		xact_holds;
	bool		fair;
	bool		watchdog;
	int64		lease_ms;
	int64		token;
	TimestampTz acquired_at;
	bool		fresh;			/* just taken anew: held again even if lost */
	TimestampTz renewed_at;		/* Redis just got the full lease from a
								 * request sent then; 0: it did not */
	int16		masters;		/* Redlock: masters that granted it */
} RLSlotInfo;

/* A copy of one slot, taken under the lock, for the worker and views. */
typedef struct RLSlotCopy
{
	int			index;
	RLSlot		slot;
} RLSlotCopy;

/*
 * What a session of this server waits for, published while it waits (the
 * redis_lock_waits view, redis_lock_blocking_pids). A multi-lock's names
 * are stored NUL-separated as far as they fit.
 */
#define RL_WAIT_NAMES_MAX (2 * (RL_NAME_MAX + 1))

typedef struct RLWaitCopy
{
	int			pid;
	uint8		kind;			/* RLKind */
	bool		fair;
	int16		nnames;			/* names the wait is for */
	int16		nstored;		/* how many of them are in names */
	TimestampTz started;
	char		owner[RL_OWNER_MAX];
	char		names[RL_WAIT_NAMES_MAX];
} RLWaitCopy;

extern int	rl_max_locks;

extern void rl_registry_request(void);
extern void rl_registry_startup(void);
extern bool rl_registry_attached(void);
extern void rl_registry_owner_id(char *buf, size_t size);
extern int	rl_registry_nprocs(void);
extern uint64 rl_registry_my_session(void);

extern int	rl_registry_reserve(RLKind kind, const char *name, const char *owner,
								int64 lease_ms, uint32 *generation);
extern void rl_registry_attempt(int index, uint32 generation, int64 lease_ms);
extern uint32 rl_registry_publish(int index, uint32 generation,
								  const RLSlotInfo *info);
extern void rl_registry_free(int index, uint32 generation);
extern void rl_registry_orphan(int index, uint32 generation);
extern void rl_registry_wake_worker(void);
extern bool rl_registry_is_lost(int index, uint32 generation);
extern bool rl_registry_lease_alive(int index, uint32 generation);
extern TimestampTz rl_registry_lapse_at(const RLSlot *s);
extern bool rl_registry_lapsed(const RLSlot *s, TimestampTz now);
extern void rl_registry_releasing(int index, uint32 generation, bool releasing);
extern bool rl_registry_mark_lost(int index, uint32 generation, uint32 epoch);
extern void rl_registry_renewed(int index, uint32 generation, uint32 epoch,
								TimestampTz when, bool full, int masters);
extern void rl_registry_set_unsettled(int index, uint32 generation);
extern bool rl_registry_begin_io(int index, uint32 generation,
								 TimestampTz until);

extern int	rl_registry_snapshot(RLSlotCopy **copies);
extern bool rl_registry_session_alive(const RLSlot *s);
extern bool rl_registry_claim(int index, const RLSlot *seen);
extern void rl_registry_unclaim(int index, uint32 generation, bool settled);
extern void rl_registry_set_worker(Latch *latch);
extern void rl_registry_set_renewed_server(uint32 identity);
extern uint32 rl_registry_renewed_server(void);
extern void rl_registry_cycle_begin(void);
extern TimestampTz rl_registry_cycle_end(TimestampTz next);

extern uint64 rl_registry_proc_session(int procno);
extern uint64 rl_registry_session_of(const char *owner);

/* registry_waits.c: the wait table */
extern void rl_registry_waits_request(void);
extern void rl_registry_waits_startup(void);
extern void rl_registry_wait_begin(RLKind kind, bool fair, int n,
								   const char *const *names, TimestampTz started);
extern void rl_registry_wait_end(void);
extern int	rl_registry_wait_snapshot(RLWaitCopy **copies);
extern int	rl_registry_owner_pid(const char *owner);

/* Whether a session waits, as rl_registry_owner_wait() knows it. */
typedef enum RLOwnerWait
{
	RL_OWNER_ELSEWHERE,			/* not a session of this server */
	RL_OWNER_IDLE,				/* ours, and not waiting (or ended) */
	RL_OWNER_WAITS				/* ours, and waiting */
} RLOwnerWait;

extern RLOwnerWait rl_registry_owner_wait(const char *owner,
										  TimestampTz *started);

extern void rl_stat_add(RLStat stat, uint64 n);
extern uint64 rl_stat_get(RLStat stat);

#endif							/* REDISLOCK_REGISTRY_H */
