/*
 * registry.c
 *	  Shared memory of redislock, present when the library is preloaded: the
 *	  table of locks held by this server's sessions (read by the watchdog
 *	  worker and the redis_locks view), counters, and owner-id material.
 *
 * Owner ids are "<instance id>:<session number>". The instance id is drawn
 * anew whenever shared memory is (re)initialised, so after a crash-restart no
 * new session can reuse the owner id of a dead one; the counter never reuses
 * a number while the server runs, unlike PIDs.
 *
 * src/registry.c
 */
#include "postgres.h"

#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"

#include "registry.h"

typedef struct RegistryShared
{
	char		instance_id[37];
	pg_atomic_uint64 next_session;
	pg_atomic_uint64 stats[RL_STAT_COUNT];
	LWLock	   *lock;			/* guards everything below */
	Latch	   *worker_latch;
	TimestampTz worker_wake;	/* when the worker plans to look next */
	int			free_head;
	int			nslots;
	RLSlot		slots[FLEXIBLE_ARRAY_MEMBER];
} RegistryShared;

int			rl_max_locks = 4096;

static RegistryShared *shared = NULL;

static Size
registry_size(void)
{
	return add_size(offsetof(RegistryShared, slots),
					mul_size(sizeof(RLSlot), rl_max_locks));
}

void
rl_registry_request(void)
{
	RequestAddinShmemSpace(registry_size());
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
		shared->worker_latch = NULL;
		shared->worker_wake = DT_NOEND;
		shared->nslots = rl_max_locks;
		for (int i = 0; i < rl_max_locks; i++)
		{
			memset(&shared->slots[i], 0, sizeof(RLSlot));
			shared->slots[i].next_free = i + 1 < rl_max_locks ? i + 1 : -1;
		}
		shared->free_head = rl_max_locks > 0 ? 0 : -1;
	}
	LWLockRelease(AddinShmemInitLock);
}

bool
rl_registry_attached(void)
{
	return shared != NULL;
}

/*
 * A new owner id for this session. Without shared memory (not preloaded) the
 * backend draws its own random instance id, which is unique just as well.
 */
void
rl_registry_owner_id(char *buf, size_t size)
{
	char		own[37];

	if (shared)
	{
		snprintf(buf, size, "%s:" UINT64_FORMAT, shared->instance_id,
				 pg_atomic_fetch_add_u64(&shared->next_session, 1));
		return;
	}
	random_uuid(own);
	snprintf(buf, size, "%s:%d", own, MyProcPid);
}

/*
 * Takes a slot for a lock this session is about to acquire, before anything
 * is sent to Redis, so that a full table fails cleanly. Returns -1 when not
 * preloaded.
 */
int
rl_registry_reserve(const char *name, const char *owner, uint32 *generation)
{
	RLSlot	   *s;
	int			index;

	if (shared == NULL)
		return -1;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	index = shared->free_head;
	if (index < 0)
	{
		LWLockRelease(shared->lock);
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many redis locks held on this server"),
				 errdetail("All %d entries of the shared lock table are in use.",
						   shared->nslots),
				 errhint("Raise redislock.max_locks (needs a restart).")));
	}
	s = &shared->slots[index];
	shared->free_head = s->next_free;
	s->generation++;
	s->state = RL_SLOT_RESERVED;
	s->pid = MyProcPid;
	s->session_holds = 0;
	s->xact_holds = 0;
	s->fair = false;
	s->watchdog = false;
	s->lease_ms = 0;
	s->token = 0;
	s->acquired_at = 0;
	s->renewed_at = 0;
	strlcpy(s->owner, owner, sizeof(s->owner));
	strlcpy(s->name, name, sizeof(s->name));
	*generation = s->generation;
	LWLockRelease(shared->lock);
	return index;
}

/* Publishes what this session now holds of the lock in slot index. */
void
rl_registry_publish(int index, const RLSlotInfo *info)
{
	RLSlot	   *s;
	bool		wake_worker = false;

	if (index < 0)
		return;
	s = &shared->slots[index];
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	s->session_holds = info->session_holds;
	s->xact_holds = info->xact_holds;
	s->fair = info->fair;
	s->watchdog = info->watchdog;
	s->lease_ms = info->lease_ms;
	s->token = info->token;
	s->acquired_at = info->acquired_at;
	if (info->renewed)
	{
		s->renewed_at = GetCurrentTimestamp();
		s->masters = info->masters;
	}
	if (info->fresh || (s->state != RL_SLOT_LOST && info->session_holds + info->xact_holds > 0))
		s->state = RL_SLOT_HELD;
	else if (s->state != RL_SLOT_LOST)
		s->state = RL_SLOT_RESERVED;

	/* A lease shorter than the worker's current sleep needs it awake. */
	if (s->state == RL_SLOT_HELD && s->watchdog && info->renewed &&
		TimestampTzPlusMilliseconds(s->renewed_at, s->lease_ms / 3) < shared->worker_wake)
		wake_worker = true;
	LWLockRelease(shared->lock);
	if (wake_worker && shared->worker_latch)
		SetLatch(shared->worker_latch);
}

void
rl_registry_free(int index)
{
	RLSlot	   *s;

	if (index < 0)
		return;
	s = &shared->slots[index];
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	s->state = RL_SLOT_FREE;
	s->generation++;
	s->next_free = shared->free_head;
	shared->free_head = index;
	LWLockRelease(shared->lock);
}

/*
 * Hands a lock of a session that is ending, and could not release it, to
 * the worker. The owner id dies with the session, so nothing else can be
 * holding under it: the worker may release it blindly.
 */
void
rl_registry_orphan(int index)
{
	if (index < 0)
		return;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	shared->slots[index].state = RL_SLOT_ORPHANED;
	LWLockRelease(shared->lock);
	if (shared->worker_latch)
		SetLatch(shared->worker_latch);
}

bool
rl_registry_is_lost(int index)
{
	bool		lost;

	if (index < 0)
		return false;
	LWLockAcquire(shared->lock, LW_SHARED);
	lost = shared->slots[index].state == RL_SLOT_LOST;
	LWLockRelease(shared->lock);
	return lost;
}

/*
 * Marks a slot lost, unless it changed hands since the caller looked.
 * Returns whether this call made it lost.
 */
bool
rl_registry_mark_lost(int index, uint32 generation)
{
	RLSlot	   *s = &shared->slots[index];
	bool		marked = false;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (s->generation == generation && s->state == RL_SLOT_HELD)
	{
		s->state = RL_SLOT_LOST;
		marked = true;
	}
	LWLockRelease(shared->lock);
	return marked;
}

void
rl_registry_renewed(int index, uint32 generation, TimestampTz when, int masters)
{
	RLSlot	   *s = &shared->slots[index];

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (s->generation == generation && s->state == RL_SLOT_HELD)
	{
		s->renewed_at = when;
		s->masters = (int16) masters;
	}
	LWLockRelease(shared->lock);
}

/*
 * Copies every slot in use (palloc'd array in *copies). The copy is taken
 * under a shared lock and used without it, so renewal round trips never
 * block sessions.
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
			shared->slots[i].state == RL_SLOT_RESERVED)
			continue;
		(*copies)[n].index = i;
		(*copies)[n].slot = shared->slots[i];
		n++;
	}
	LWLockRelease(shared->lock);
	return n;
}

void
rl_registry_set_worker(Latch *latch)
{
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	shared->worker_latch = latch;
	LWLockRelease(shared->lock);
}

void
rl_registry_set_worker_wake(TimestampTz when)
{
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	shared->worker_wake = when;
	LWLockRelease(shared->lock);
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
