/*
 * registry.c
 *	  Shared memory of redislock, present when the library is preloaded: the
 *	  table of locks held by this server's sessions (read by the watchdog
 *	  worker and the redis_locks view), counters, and owner-id material.
 *
 * Owner ids are "<instance id>:<session number>". The instance id is drawn
 * anew whenever shared memory is (re)initialised, so after a crash-restart no
 * new session can reuse the owner id of a dead one; the counter never reuses
 * a number while the server runs, unlike PIDs. Each process slot (PGPROC)
 * records the session number of the backend using it, so the worker can tell
 * whether the holder of a slot is still alive.
 *
 * The worker works from copies of the slots without holding the lock. Where
 * its request could undo a session's (trimming a hold of unknown outcome),
 * it first claims the slot (worker_busy), and the session waits for that
 * claim to end before it sends a request about that lock itself: the two
 * then reach Redis in that order.
 *
 * src/registry.c
 */
#include "postgres.h"

#include "access/twophase.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "conn.h"
#include "redislock.h"
#include "registry.h"

typedef struct RegistryShared
{
	char		instance_id[37];
	pg_atomic_uint64 next_session;
	pg_atomic_uint64 stats[RL_STAT_COUNT];
	LWLock	   *lock;			/* guards everything below */
	ConditionVariable worker_done;	/* a claim of the worker ended */
	Latch	   *worker_latch;
	pg_atomic_uint32 worker_called;	/* a session woke the worker since its
									 * last snapshot */
	pg_atomic_uint32 renewed_server;	/* rl_server_identity() of the
										 * settings the worker renews with */
	TimestampTz worker_wake;	/* when the worker plans to look next */
	bool		worker_cycling; /* it works from a snapshot now */
	TimestampTz due_meanwhile;	/* earliest renewal due among the locks
								 * published since that snapshot */
	int			free_head;
	int			nslots;
	RLSlot		slots[FLEXIBLE_ARRAY_MEMBER];
} RegistryShared;

int			rl_max_locks = 4096;

static RegistryShared *shared = NULL;
static uint64 *proc_sessions = NULL;	/* by pgprocno: session number or 0 */

static uint64 my_session = 0;

/*
 * Entries of the table taken by the sessions of each role, under the
 * registry's lock: one role must not take the whole table from the others
 * (redislock.max_locks_per_role). At most one entry per slot in use.
 */
typedef struct RoleCount
{
	Oid			role;
	int32		slots;
} RoleCount;

static HTAB *role_counts = NULL;

static Size
registry_size(void)
{
	return add_size(offsetof(RegistryShared, slots),
					mul_size(sizeof(RLSlot), rl_max_locks));
}

/* Every PGPROC, as ProcGlobal counts them. */
int
rl_registry_nprocs(void)
{
	return MaxBackends + NUM_AUXILIARY_PROCS + max_prepared_xacts;
}

void
rl_registry_request(void)
{
	RequestAddinShmemSpace(registry_size());
	RequestAddinShmemSpace(mul_size(sizeof(uint64), rl_registry_nprocs()));
	RequestAddinShmemSpace(hash_estimate_size(rl_max_locks, sizeof(RoleCount)));
	RequestNamedLWLockTranche("redislock", 1);
}

/* Formats 16 random bytes as a version-4 UUID. */
static void
random_uuid(char *out)
{
	uint8		b[16];

	if (!pg_strong_random(b, sizeof(b)))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate random values")));
	b[6] = (b[6] & 0x0f) | 0x40;
	b[8] = (b[8] & 0x3f) | 0x80;
	snprintf(out, 37,
			 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
			 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
			 b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

void
rl_registry_startup(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	shared = ShmemInitStruct("redislock", registry_size(), &found);
	if (!found)
	{
		random_uuid(shared->instance_id);
		pg_atomic_init_u64(&shared->next_session, 1);
		for (int i = 0; i < RL_STAT_COUNT; i++)
			pg_atomic_init_u64(&shared->stats[i], 0);
		shared->lock = &(GetNamedLWLockTranche("redislock"))->lock;
		ConditionVariableInit(&shared->worker_done);
		shared->worker_latch = NULL;
		pg_atomic_init_u32(&shared->worker_called, 0);
		/* the postmaster's settings are the worker's until it reloads */
		pg_atomic_init_u32(&shared->renewed_server, rl_server_identity());
		shared->worker_wake = DT_NOEND;
		shared->worker_cycling = false;
		shared->due_meanwhile = DT_NOEND;
		shared->nslots = rl_max_locks;
		for (int i = 0; i < rl_max_locks; i++)
		{
			memset(&shared->slots[i], 0, sizeof(RLSlot));
			shared->slots[i].next_free = i + 1 < rl_max_locks ? i + 1 : -1;
		}
		shared->free_head = rl_max_locks > 0 ? 0 : -1;
	}
	proc_sessions = ShmemInitStruct("redislock sessions",
									sizeof(uint64) * rl_registry_nprocs(), &found);
	if (!found)
		memset(proc_sessions, 0, sizeof(uint64) * rl_registry_nprocs());
	{
		HASHCTL		info;

		info.keysize = sizeof(Oid);
		info.entrysize = sizeof(RoleCount);
		role_counts = RL_ShmemInitHash("redislock roles", rl_max_locks,
									   &info, HASH_ELEM | HASH_BLOBS);
	}
	LWLockRelease(AddinShmemInitLock);
}

/* The process slot no longer runs this session (on_shmem_exit). */
static void
forget_session(int code, Datum arg)
{
	if (MyProc != NULL)
		proc_sessions[RL_MY_PROCNO] = 0;
}

bool
rl_registry_attached(void)
{
	return shared != NULL;
}

/*
 * This session's number, drawn on first use (shared memory exists only
 * once the backend runs, so not at load) by whatever needs it first: its
 * owner id, a reservation, a wait. Every slot and wait entry of the
 * session records it, and the worker takes a slot whose number its
 * process slot no longer shows for one of an ended session: a slot taken
 * before the number was drawn would look ended the moment it was.
 */
static uint64
session_number(void)
{
	if (my_session == 0)
	{
		Assert(shared != NULL && MyProc != NULL);
		my_session = pg_atomic_fetch_add_u64(&shared->next_session, 1);
		proc_sessions[RL_MY_PROCNO] = my_session;
		on_shmem_exit(forget_session, (Datum) 0);
	}
	Assert(my_session != 0 && proc_sessions[RL_MY_PROCNO] == my_session);
	return my_session;
}

/* This session's number (drawn now if not yet): preloaded only. */
uint64
rl_registry_my_session(void)
{
	return session_number();
}

/*
 * This session's owner id. Without shared memory (not preloaded) the
 * backend draws its own random instance id, which is unique just as well.
 */
void
rl_registry_owner_id(char *buf, size_t size)
{
	char		own[37];

	if (shared && MyProc != NULL)
	{
		snprintf(buf, size, "%s:" UINT64_FORMAT, shared->instance_id,
				 session_number());
		return;
	}
	random_uuid(own);
	snprintf(buf, size, "%s:%d", own, MyProcPid);
}

/* The share of the table one role may take: redislock.max_locks_per_role. */
static int
role_share(void)
{
	return rl_max_locks_per_role >= 0 ? rl_max_locks_per_role :
		Max(shared->nslots / 4, 1);
}

/*
 * Counts one more slot for role (under the registry's lock); false, counting
 * nothing, when the role has its share already. A superuser has no share.
 */
static bool
count_role_slot(Oid role, bool limited, int *taken)
{
	RoleCount  *rc = hash_search(role_counts, &role, HASH_FIND, NULL);

	*taken = rc ? rc->slots : 0;
	if (limited && *taken >= role_share())
		return false;
	if (rc == NULL)
	{
		/*
		 * Never full (an entry per slot at most, all allocated at start);
		 * HASH_ENTER_NULL all the same, since we hold the registry's lock.
		 */
		rc = hash_search(role_counts, &role, HASH_ENTER_NULL, NULL);
		if (rc == NULL)
			return false;
		rc->slots = 0;
	}
	rc->slots++;
	return true;
}

/* Gives back one slot of role's share (under the registry's lock). */
static void
uncount_role_slot(Oid role)
{
	RoleCount  *rc = hash_search(role_counts, &role, HASH_FIND, NULL);

	Assert(rc != NULL && rc->slots > 0);
	if (rc != NULL && --rc->slots <= 0)
		hash_search(role_counts, &role, HASH_REMOVE, NULL);
}

pg_noreturn static void
role_share_exceeded(Oid role, int taken)
{
	const char *rolename = GetUserNameFromId(role, true);

	ereport(ERROR,
			(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
			 errmsg("too many Redis locks held by role \"%s\"",
					rolename ? rolename : "?"),
			 errdetail("The sessions of this role hold or wait for %d distinct Redis locks; redislock.max_locks_per_role is %d%s.",
					   taken, role_share(),
					   rl_max_locks_per_role < 0 ? " (a quarter of redislock.max_locks)" : ""),
			 errhint("Release some with redis_lock_release() or redis_lock_release_all(), or ask a superuser to raise redislock.max_locks_per_role for this role (ALTER ROLE ... SET redislock.max_locks_per_role).")));
}

/*
 * The slot index as the session that reserved it (generation) left it, or
 * NULL if it changed hands since: the worker frees the slots of sessions it
 * takes for ended. Only the session itself calls this, under the lock or
 * for a field only it writes.
 */
static RLSlot *
own_slot(int index, uint32 generation)
{
	RLSlot	   *s;

	Assert(index >= 0 && index < shared->nslots);
	s = &shared->slots[index];
	if (s->generation != generation)
		return NULL;
	Assert(s->state != RL_SLOT_FREE);
	Assert(my_session != 0 && s->session == my_session &&
		   s->procno == RL_MY_PROCNO);
	return s;
}

/*
 * Takes a slot for a lock this session is about to acquire, before anything
 * is sent to Redis, so that a full table fails cleanly. lease_ms is the
 * lease the acquisition asks for: should the session end before it knows
 * the outcome, the worker releases the lock until that lease is over.
 * Returns -1 when not preloaded.
 */
int
rl_registry_reserve(RLKind kind, const char *name, const char *owner, int64 lease_ms,
					uint32 *generation)
{
	RLSlot	   *s;
	int			index;
	uint64		session;
	Oid			role = GetSessionUserId();
	bool		limited = !superuser_arg(role);
	int			taken;

	if (shared == NULL)
		return -1;
	session = session_number();
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	index = shared->free_head;
	if (index >= 0 && !count_role_slot(role, limited, &taken))
	{
		LWLockRelease(shared->lock);
		role_share_exceeded(role, taken);
	}
	if (index < 0)
	{
		LWLockRelease(shared->lock);
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many Redis locks held on this server"),
				 errdetail("All %d entries of the shared lock table are in use.",
						   shared->nslots),
				 errhint("Raise redislock.max_locks (needs a restart).")));
	}
	s = &shared->slots[index];
	Assert(s->state == RL_SLOT_FREE);
	shared->free_head = s->next_free;
	s->generation++;
	s->state = RL_SLOT_RESERVED;
	s->kind = (uint8) kind;
	s->pid = MyProcPid;
	s->role = role;
	s->procno = RL_MY_PROCNO;
	s->session = session;
	s->unsettled = false;
	s->worker_busy = false;
	s->releasing = false;
	s->session_holds = 0;
	s->xact_holds = 0;
	s->fair = false;
	s->watchdog = false;
	s->lease_ms = lease_ms;
	s->token = 0;
	s->acquired_at = 0;
	s->renewed_at = GetCurrentTimestamp();
	s->kept_at = s->renewed_at;
	s->horizon = TimestampTzPlusMilliseconds(s->renewed_at, lease_ms);
	strlcpy(s->owner, owner, sizeof(s->owner));
	strlcpy(s->name, name, sizeof(s->name));
	*generation = s->generation;
	LWLockRelease(shared->lock);
	return index;
}

/*
 * Before an acquisition that may set a longer lease than the slot shows
 * (re-entry with a longer fixed lease): should its outcome stay unknown and
 * the session end, the worker must go on releasing for that long. Only the
 * horizon moves: the lease and renewal time that the watchdog and local
 * re-entries trust change when Redis has answered (rl_registry_publish),
 * never on the strength of a request it may refuse or never see.
 */
void
rl_registry_attempt(int index, uint32 generation, int64 lease_ms)
{
	RLSlot	   *s;

	if (index < 0)
		return;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	s = own_slot(index, generation);
	if (s != NULL)
		s->horizon = Max(s->horizon,
						 TimestampTzPlusMilliseconds(GetCurrentTimestamp(), lease_ms));
	LWLockRelease(shared->lock);
}

/*
 * Publishes what this session now holds of the lock in slot index. Returns
 * the slot's epoch, bumped when the hold is fresh; 0 if the slot changed
 * hands, which nothing of ours is then written to.
 */
uint32
rl_registry_publish(int index, uint32 generation, const RLSlotInfo *info)
{
	RLSlot	   *s;
	bool		wake_worker = false;
	uint32		epoch;

	if (index < 0)
		return 0;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	s = own_slot(index, generation);
	if (s == NULL)
	{
		LWLockRelease(shared->lock);
		return 0;
	}
	/*
	 * A new hold, and also a re-entry that set the lease in Redis: a renewal
	 * the worker built before it, from the old lease, is then not recorded
	 * over it (renew.lua never shortens what Redis has).
	 */
	if (info->fresh || info->renewed_at != 0)
		s->epoch++;
	s->session_holds = info->session_holds;
	s->xact_holds = info->xact_holds;
	s->fair = info->fair;
	s->watchdog = info->watchdog;
	s->lease_ms = info->lease_ms;
	s->token = info->token;
	s->acquired_at = info->acquired_at;
	s->releasing = false;
	if (info->renewed_at != 0)
	{
		/* the lease runs from when it was asked for, not when answered */
		s->renewed_at = info->renewed_at;
		s->kept_at = s->renewed_at;
		s->horizon = Max(s->horizon,
						 TimestampTzPlusMilliseconds(s->renewed_at, s->lease_ms));
		s->masters = info->masters;
	}
	if (info->fresh || (s->state != RL_SLOT_LOST && info->session_holds + info->xact_holds > 0))
		s->state = RL_SLOT_HELD;
	else if (s->state != RL_SLOT_LOST)
		s->state = RL_SLOT_RESERVED;

	/*
	 * A lease due before the worker's planned wake-up needs it awake (and a
	 * fixed-lease read hold whose hash the worker keeps alive, see
	 * worker.c). One published while the worker works from a snapshot that
	 * lacks it is noted for the end of that cycle instead.
	 */
	if (s->state == RL_SLOT_HELD && info->renewed_at != 0 &&
		(s->watchdog || s->kind == RL_KIND_READ))
	{
		TimestampTz due = TimestampTzPlusMilliseconds(s->renewed_at,
													  s->watchdog ? s->lease_ms / 3 :
													  Min(s->lease_ms, rl_watchdog_timeout) / 3);

		if (shared->worker_cycling)
			shared->due_meanwhile = Min(shared->due_meanwhile, due);
		else if (due < shared->worker_wake)
			wake_worker = true;
	}
	epoch = s->epoch;
	LWLockRelease(shared->lock);
	if (wake_worker)
		rl_registry_wake_worker();
	return epoch;
}

/*
 * Frees slot index, unless it changed hands since the caller took it: the
 * worker frees the slots of ended sessions, and an ending session frees
 * what it could release itself, so both may try.
 */
void
rl_registry_free(int index, uint32 generation)
{
	RLSlot	   *s;

	if (index < 0)
		return;
	s = &shared->slots[index];
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (s->generation == generation && s->state != RL_SLOT_FREE)
	{
		uncount_role_slot(s->role);
		s->state = RL_SLOT_FREE;
		s->generation++;
		s->next_free = shared->free_head;
		shared->free_head = index;
	}
	LWLockRelease(shared->lock);
}

/*
 * Hands a lock of a session that is ending to the worker, which releases it
 * unless the session still manages to. The owner id dies with the session,
 * so nothing else can be holding under it: the worker may release it
 * blindly.
 */
void
rl_registry_orphan(int index, uint32 generation)
{
	RLSlot	   *s;

	if (index < 0)
		return;
	s = &shared->slots[index];
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (s->generation == generation && s->state != RL_SLOT_FREE)
	{
		/*
		 * A request of the session may have set the lease in Redis up to
		 * now, whatever the slot showed: release for a whole lease from now.
		 */
		s->state = RL_SLOT_ORPHANED;
		s->horizon = Max(s->horizon,
						 TimestampTzPlusMilliseconds(GetCurrentTimestamp(), s->lease_ms));
	}
	LWLockRelease(shared->lock);
}

/*
 * Wakes the worker. Its latch alone could be consumed by a wait inside one
 * of its own round trips, so a flag says it too.
 */
void
rl_registry_wake_worker(void)
{
	Latch	   *latch = shared ? shared->worker_latch : NULL;

	if (latch)
	{
		pg_atomic_write_u32(&shared->worker_called, 1);
		SetLatch(latch);
	}
}

/*
 * When the hold of s is lost by time: its lease, counted from when the
 * request that Redis last confirmed was sent, less a margin for the drift
 * of the clocks (as Redlock counts a lock's validity).
 */
TimestampTz
rl_registry_lapse_at(const RLSlot *s)
{
	int64		drift = s->lease_ms * rl_redlock_drift / 1000 + 2;

	return TimestampTzPlusMilliseconds(s->renewed_at, s->lease_ms - drift);
}

/*
 * Whether a held slot's lease has run out without a renewal that Redis
 * confirmed. The hold is lost then, whether or not Redis answers: nothing
 * keeps another client from taking the lock.
 */
bool
rl_registry_lapsed(const RLSlot *s, TimestampTz now)
{
	return s->state == RL_SLOT_HELD && s->session_holds + s->xact_holds > 0 &&
		rl_registry_lapse_at(s) <= now;
}

/*
 * Whether the hold of slot index is surely still in Redis as far as this
 * server knows: not marked lost, and its lease, counted from the last time
 * Redis got it in full, not run out (a renewal may be stuck).
 */
bool
rl_registry_lease_alive(int index, uint32 generation)
{
	bool		alive;
	RLSlot	   *s;

	if (index < 0)
		return false;
	LWLockAcquire(shared->lock, LW_SHARED);
	s = own_slot(index, generation);
	alive = s != NULL && s->state == RL_SLOT_HELD &&
		!rl_registry_lapsed(s, GetCurrentTimestamp());
	LWLockRelease(shared->lock);
	return alive;
}

/*
 * Whether the hold of slot index is lost: marked so, its lease run out
 * without a confirmed renewal, or the slot changed hands (only the worker
 * takes a session's slot, after releasing its hold).
 */
bool
rl_registry_is_lost(int index, uint32 generation)
{
	RLSlot	   *s;
	bool		lost;

	if (index < 0)
		return false;
	LWLockAcquire(shared->lock, LW_SHARED);
	s = own_slot(index, generation);
	lost = s == NULL || s->state == RL_SLOT_LOST ||
		rl_registry_lapsed(s, GetCurrentTimestamp());
	LWLockRelease(shared->lock);
	return lost;
}

/*
 * The session is about to give back its last hold of slot index, or has
 * failed to. Until it publishes the outcome (or frees the slot), a renewal
 * that finds no hold in Redis may have run after the release: that is the
 * release, not a loss, and the worker must not report it.
 *
 * No trip through the lock (it was one of five per acquire + release): only
 * the session that owns the slot writes the flag, and the worker reads it
 * under the lock only after Redis answered a renewal. The barrier puts the
 * write before the release request the caller sends next, so a renewal
 * answered after that release finds the flag set.
 */
void
rl_registry_releasing(int index, uint32 generation, bool releasing)
{
	volatile RLSlot *s;

	if (index < 0)
		return;
	s = own_slot(index, generation);
	if (s == NULL)
		return;
	s->releasing = releasing;
	pg_memory_barrier();
}

/*
 * Marks a slot lost, unless it changed hands, was taken anew or is being
 * released since the caller looked. Returns whether this call made it lost.
 */
bool
rl_registry_mark_lost(int index, uint32 generation, uint32 epoch)
{
	RLSlot	   *s = &shared->slots[index];
	bool		marked = false;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (s->generation == generation && s->epoch == epoch &&
		s->state == RL_SLOT_HELD && !s->releasing)
	{
		s->state = RL_SLOT_LOST;
		marked = true;
	}
	LWLockRelease(shared->lock);
	return marked;
}

/*
 * Records a renewal sent at when, unless the slot changed hands or was
 * taken anew since: a watchdog hold got its full lease (on masters
 * masters), or, with full false, a fixed-lease read hold had its hash kept
 * alive.
 */
void
rl_registry_renewed(int index, uint32 generation, uint32 epoch,
					TimestampTz when, bool full, int masters)
{
	RLSlot	   *s = &shared->slots[index];

	/*
	 * Only a renewal sent before the lease ran out counts: Redis finding
	 * our hold then proves it kept it all along (nothing else puts our
	 * field back). One sent later does not bring the hold back.
	 */
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (s->generation == generation && s->epoch == epoch &&
		s->state == RL_SLOT_HELD && when < rl_registry_lapse_at(s))
	{
		s->kept_at = when;
		if (full)
		{
			s->renewed_at = when;
			s->masters = (int16) masters;
		}
	}
	LWLockRelease(shared->lock);
}

/*
 * A session whose call ended with the outcome in Redis unknown (Redis did
 * not answer) and that may stay idle for long: the worker trims Redis to
 * what the slot shows.
 */
void
rl_registry_set_unsettled(int index, uint32 generation)
{
	RLSlot	   *s;

	if (index < 0)
		return;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	s = own_slot(index, generation);
	if (s != NULL)
		s->unsettled = true;
	LWLockRelease(shared->lock);
	rl_registry_wake_worker();
}

/*
 * Takes over the slot from the worker if it has no claim on it. A slot that
 * changed hands is no longer the worker's to settle for us: nothing to wait
 * for.
 */
static bool
take_over(int index, uint32 generation)
{
	RLSlot	   *s;
	bool		free;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	s = own_slot(index, generation);
	free = s == NULL || !s->worker_busy;
	if (s != NULL && free)
		s->unsettled = false;
	LWLockRelease(shared->lock);
	return free;
}

/*
 * Before the session itself sends a request about the lock in slot index,
 * which it handed to the worker to settle: it waits until a request the
 * worker has claimed the slot for is answered, so that ours reaches Redis
 * after it, and takes over from the worker (unsettled ends). The wait ends
 * by interrupt, or at until; false then, and the session must not send: the
 * worker keeps the lock to settle.
 */
bool
rl_registry_begin_io(int index, uint32 generation, TimestampTz until)
{
	bool		ok;

	if (index < 0)
		return true;
	if (take_over(index, generation))
		return true;

	/* a request it retained is sent again at once, not at its next pass */
	rl_registry_wake_worker();
	ConditionVariablePrepareToSleep(&shared->worker_done);
	for (;;)
	{
		long		ms = (long) ((until - GetCurrentTimestamp()) / 1000);

		ok = take_over(index, generation);
		if (ok || ms <= 0)
			break;
		(void) ConditionVariableTimedSleep(&shared->worker_done, ms, RL_WAIT_EVENT);
	}
	ConditionVariableCancelSleep();
	return ok;
}

/*
 * Copies every slot the worker may have to act on (palloc'd array in
 * *copies): held, lost, orphaned, and reserved ones left unsettled. The copy
 * is taken under a shared lock and used without it, so renewal round trips
 * never block sessions.
 */
int
rl_registry_snapshot(RLSlotCopy **copies)
{
	int			n = 0;

	*copies = palloc(sizeof(RLSlotCopy) * Max(shared->nslots, 1));
	LWLockAcquire(shared->lock, LW_SHARED);
	for (int i = 0; i < shared->nslots; i++)
	{
		if (shared->slots[i].state == RL_SLOT_FREE ||
			(shared->slots[i].state == RL_SLOT_RESERVED &&
			 !shared->slots[i].unsettled))
			continue;
		(*copies)[n].index = i;
		(*copies)[n].slot = shared->slots[i];
		n++;
	}
	LWLockRelease(shared->lock);
	return n;
}

/*
 * Is the session that holds s still running? Its PID alone could have been
 * reused by a newer backend, so its session number must match too.
 */
bool
rl_registry_session_alive(const RLSlot *s)
{
	/* no slot is reserved before its session has a number */
	Assert(s->session != 0);
	/* a session number is never reused, and its process slot forgets it */
	return proc_sessions[s->procno] == s->session;
}

/*
 * The worker claims slot index to trim a hold of unknown outcome to what
 * the copy seen shows: allowed while still unsettled with those holds.
 */
bool
rl_registry_claim(int index, const RLSlot *seen)
{
	RLSlot	   *s = &shared->slots[index];
	bool		ok;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	ok = s->generation == seen->generation && !s->worker_busy &&
		s->unsettled && s->epoch == seen->epoch &&
		s->session_holds + s->xact_holds == seen->session_holds + seen->xact_holds;
	if (ok)
		s->worker_busy = true;
	LWLockRelease(shared->lock);
	return ok;
}

/* Ends a claim; settled: Redis now matches the slot's holds. */
void
rl_registry_unclaim(int index, uint32 generation, bool settled)
{
	RLSlot	   *s = &shared->slots[index];

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (s->generation == generation)
	{
		s->worker_busy = false;
		if (settled)
			s->unsettled = false;
	}
	LWLockRelease(shared->lock);
	ConditionVariableBroadcast(&shared->worker_done);
}

/*
 * The worker starts or stops. A worker that died in a cycle (an ERROR there
 * is FATAL) leaves claims behind that nobody else would end.
 */
void
rl_registry_set_worker(Latch *latch)
{
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	shared->worker_latch = latch;
	shared->worker_cycling = false;
	for (int i = 0; i < shared->nslots; i++)
		shared->slots[i].worker_busy = false;
	LWLockRelease(shared->lock);
	ConditionVariableBroadcast(&shared->worker_done);
}

/* The worker (re)read its settings: leases are renewed on that Redis now. */
void
rl_registry_set_renewed_server(uint32 identity)
{
	pg_atomic_write_u32(&shared->renewed_server, identity);
}

/* rl_server_identity() of the Redis the worker renews leases on. */
uint32
rl_registry_renewed_server(void)
{
	return pg_atomic_read_u32(&shared->renewed_server);
}

/* The worker is about to take its snapshot. */
void
rl_registry_cycle_begin(void)
{
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	shared->worker_cycling = true;
	shared->due_meanwhile = DT_NOEND;
	LWLockRelease(shared->lock);
	pg_atomic_write_u32(&shared->worker_called, 0);
}

/*
 * The worker is done with its snapshot and plans to look again at next.
 * Returns when it must look again: sooner if a lock published meanwhile is
 * due before, at once if a session asked for it meanwhile.
 */
TimestampTz
rl_registry_cycle_end(TimestampTz next)
{
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	next = Min(next, shared->due_meanwhile);
	shared->worker_cycling = false;
	shared->worker_wake = next;
	LWLockRelease(shared->lock);
	if (pg_atomic_read_u32(&shared->worker_called) != 0)
		return 0;
	return next;
}

/*
 * The session number of process slot procno (0: none), for the wait table
 * (registry_waits.c): an entry there counts only while it shows that number.
 */
uint64
rl_registry_proc_session(int procno)
{
	Assert(procno >= 0 && procno < rl_registry_nprocs());
	return proc_sessions[procno];
}

/* The session number of an owner id of this server, or 0. */
uint64
rl_registry_session_of(const char *owner)
{
	size_t		idlen;
	char	   *end;
	uint64		session;

	/* not preloaded: no session of this server is known by its number */
	if (shared == NULL)
		return 0;
	idlen = strlen(shared->instance_id);
	if (strncmp(owner, shared->instance_id, idlen) != 0 || owner[idlen] != ':')
		return 0;
	errno = 0;
	session = strtou64(owner + idlen + 1, &end, 10);
	if (errno != 0 || *end != '\0')
		return 0;
	return session;
}

/*
 * The pid of the session of this server with that owner id, or 0: another
 * server's session, a Redisson client, or a session that has ended.
 */
int
rl_registry_owner_pid(const char *owner)
{
	uint64		session = rl_registry_session_of(owner);

	if (session == 0)
		return 0;
	for (int i = 0; i < rl_registry_nprocs(); i++)
		if (proc_sessions[i] == session)
			return ProcGlobal->allProcs[i].pid;
	return 0;
}

void
rl_stat_add(RLStat stat, uint64 n)
{
	if (shared)
		pg_atomic_fetch_add_u64(&shared->stats[stat], n);
}

uint64
rl_stat_get(RLStat stat)
{
	return shared ? pg_atomic_read_u64(&shared->stats[stat]) : 0;
}
