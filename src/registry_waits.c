/*
 * registry_waits.c
 *	  The registry's wait table: what each session of this server waits for,
 *	  published at the start and end of every wait. The redis_lock_waits view
 *	  and redis_lock_blocking_pids show it; the deadlock detector asks it
 *	  whether a member of a cycle still waits.
 *
 * One entry per process slot, written only by the session there, under the
 * table's own lock (a wait's start and end must not queue behind the lock
 * table's traffic). An entry carries the session number it was written for:
 * it counts only while its process slot shows that number, so an entry left
 * behind by a session that ended in a wait (FATAL) is ignored, and the next
 * session in that slot never inherits it.
 *
 * src/registry_waits.c
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "redislock.h"
#include "registry.h"

typedef struct WaitEntry
{
	uint64		session;		/* 0: not waiting */
	RLWaitCopy	wait;
} WaitEntry;

static WaitEntry *proc_waits = NULL;	/* by pgprocno */
static LWLock *waits_lock = NULL;

void
rl_registry_waits_request(void)
{
	RequestAddinShmemSpace(mul_size(sizeof(WaitEntry), rl_registry_nprocs()));
	RequestNamedLWLockTranche("redislock waits", 1);
}

void
rl_registry_waits_startup(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	proc_waits = ShmemInitStruct("redislock waits",
								 sizeof(WaitEntry) * rl_registry_nprocs(), &found);
	if (!found)
		memset(proc_waits, 0, sizeof(WaitEntry) * rl_registry_nprocs());
	waits_lock = &(GetNamedLWLockTranche("redislock waits"))->lock;
	LWLockRelease(AddinShmemInitLock);
}

/*
 * Publishes what this session starts to wait for: n names of kind (as far
 * as they fit), since started. Cheap: no Redis, one short lock.
 */
void
rl_registry_wait_begin(RLKind kind, bool fair, int n, const char *const *names,
					   TimestampTz started)
{
	WaitEntry  *e;
	size_t		used = 0;
	int			stored = 0;
	uint64		session;
	char		owner[sizeof(e->wait.owner)];

	if (proc_waits == NULL || MyProc == NULL)
		return;
	session = rl_registry_my_session();
	rl_registry_owner_id(owner, sizeof(owner));
	e = &proc_waits[RL_MY_PROCNO];
	LWLockAcquire(waits_lock, LW_EXCLUSIVE);
	e->session = session;
	e->wait.pid = MyProcPid;
	e->wait.kind = (uint8) kind;
	e->wait.fair = fair;
	e->wait.nnames = (int16) n;
	e->wait.started = started;
	memcpy(e->wait.owner, owner, sizeof(owner));
	for (; stored < n; stored++)
	{
		size_t		len = strlen(names[stored]) + 1;

		if (used + len > sizeof(e->wait.names))
			break;
		memcpy(e->wait.names + used, names[stored], len);
		used += len;
	}
	e->wait.nstored = (int16) stored;
	LWLockRelease(waits_lock);
}

/* This session no longer waits. */
void
rl_registry_wait_end(void)
{
	if (proc_waits == NULL || MyProc == NULL)
		return;
	LWLockAcquire(waits_lock, LW_EXCLUSIVE);
	proc_waits[RL_MY_PROCNO].session = 0;
	LWLockRelease(waits_lock);
}

/*
 * Copies what every waiting session of this server waits for (palloc'd
 * array in *copies); a session that ended is left out.
 */
int
rl_registry_wait_snapshot(RLWaitCopy **copies)
{
	int			n = 0;

	*copies = palloc(sizeof(RLWaitCopy) * rl_registry_nprocs());
	if (proc_waits == NULL)
		return 0;
	LWLockAcquire(waits_lock, LW_SHARED);
	for (int i = 0; i < rl_registry_nprocs(); i++)
		if (proc_waits[i].session != 0 &&
			proc_waits[i].session == rl_registry_proc_session(i))
			(*copies)[n++] = proc_waits[i].wait;
	LWLockRelease(waits_lock);
	return n;
}

/*
 * Whether the session with that owner id waits now, if it is one of this
 * server's (*started: since when). A session of ours that has ended waits
 * for nothing.
 */
RLOwnerWait
rl_registry_owner_wait(const char *owner, TimestampTz *started)
{
	uint64		session = rl_registry_session_of(owner);
	RLOwnerWait result = RL_OWNER_IDLE;

	if (session == 0)
		return RL_OWNER_ELSEWHERE;
	LWLockAcquire(waits_lock, LW_SHARED);
	for (int i = 0; i < rl_registry_nprocs(); i++)
		if (proc_waits[i].session == session &&
			rl_registry_proc_session(i) == session)
		{
			*started = proc_waits[i].wait.started;
			result = RL_OWNER_WAITS;
			break;
		}
	LWLockRelease(waits_lock);
	return result;
}
