/*
 * registry.c
 *	  Shared memory of redislock, present when the library is preloaded: a
 *	  random id for this server instance and a counter that numbers sessions.
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
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "registry.h"
#include "redislock.h"

typedef struct RegistryShared
{
	char		instance_id[37];
	pg_atomic_uint64 next_session;
} RegistryShared;

static RegistryShared *shared = NULL;

void
rl_registry_request(void)
{
	RequestAddinShmemSpace(MAXALIGN(sizeof(RegistryShared)));
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
	shared = ShmemInitStruct("redislock", sizeof(RegistryShared), &found);
	if (!found)
	{
		random_uuid(shared->instance_id);
		pg_atomic_init_u64(&shared->next_session, 1);
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
