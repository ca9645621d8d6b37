/*
 * master_switch.c
 *	  The board of Sentinel master switches, in shared memory: the listener
 *	  posts each +switch-master it hears, and every process's connections
 *	  found through the sentinels compare the epoch they were opened at
 *	  (conn.c).
 *
 * src/master_switch.c
 */
#include "postgres.h"

#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"

#include "master_switch.h"
#include "redislock.h"

/*
 * The master switches the sentinels announced (+switch-master), as the
 * listener (listener.c) heard them. After SENTINEL FAILOVER the old master
 * takes writes until the sentinels demote it, seconds later: a connection
 * to it must not wait for a READONLY to move, or a lock taken there is also
 * free on the new master. So a connection found through the sentinels
 * remembers the epoch it was opened at, and one opened before the latest
 * switch is reopened on its next request. Without the preloaded library
 * there is no listener, and the epoch stays 0: a connection then follows
 * only when it breaks or is refused.
 */
typedef struct MasterSwitch
{
	pg_atomic_uint64 epoch;
	slock_t		mutex;			/* guards the rest */
	char		master[256];	/* redislock.sentinel_master of the switch */
	char		from_host[256]; /* the master it left, which sentinels that */
	int			from_port;		/* have not switched yet still name */
} MasterSwitch;

static MasterSwitch *master_switch = NULL;

void
rl_master_switch_request(void)
{
	RequestAddinShmemSpace(sizeof(MasterSwitch));
}

void
rl_master_switch_startup(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	master_switch = ShmemInitStruct("redislock master switch",
									sizeof(MasterSwitch), &found);
	if (!found)
	{
		memset(master_switch, 0, sizeof(MasterSwitch));
		pg_atomic_init_u64(&master_switch->epoch, 0);
		SpinLockInit(&master_switch->mutex);
	}
	LWLockRelease(AddinShmemInitLock);
}

uint64
rl_master_epoch(void)
{
	return master_switch != NULL ? pg_atomic_read_u64(&master_switch->epoch) : 0;
}

/*
 * The sentinels moved master (for the listener's redislock.sentinel_master)
 * away from from_host:from_port; master NULL: a switch may have gone
 * unheard. Every process reopens its connections found through sentinels.
 */
void
rl_master_switched(const char *master, const char *from_host, int from_port)
{
	if (master_switch == NULL)
		return;
	SpinLockAcquire(&master_switch->mutex);
	strlcpy(master_switch->master, master ? master : "",
			sizeof(master_switch->master));
	strlcpy(master_switch->from_host, from_host ? from_host : "",
			sizeof(master_switch->from_host));
	master_switch->from_port = from_port;
	SpinLockRelease(&master_switch->mutex);
	pg_atomic_fetch_add_u64(&master_switch->epoch, 1);
}

/*
 * Is host:port the master that the latest switch of rl_sentinel_master
 * left? A sentinel naming it has not heard of the switch yet.
 */
bool
rl_master_left(const char *host, int port)
{
	bool		left;

	if (master_switch == NULL)
		return false;
	SpinLockAcquire(&master_switch->mutex);
	left = master_switch->from_port == port &&
		strcmp(master_switch->from_host, host) == 0 &&
		strcmp(master_switch->master, rl_sentinel_master) == 0;
	SpinLockRelease(&master_switch->mutex);
	return left;
}
