/*
 * compat.h
 *	  What differs between the PostgreSQL majors redislock builds on (15 to
 *	  19): every test of PG_VERSION_NUM in the C code is here, so that the
 *	  rest reads as one version.
 *
 * src/compat.h
 */
#ifndef RL_COMPAT_H
#define RL_COMPAT_H

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/wait_event.h"

/*
 * 18 replaced the postfix pg_attribute_noreturn() by the prefix pg_noreturn
 * (C11 _Noreturn); before, the same attribute is allowed in front.
 */
#ifndef pg_noreturn
#define pg_noreturn pg_attribute_noreturn()
#endif

/*
 * An intended fall through from one case to the next: 19's c.h names it
 * pg_fallthrough, and 19's -Wimplicit-fallthrough=5 accepts nothing else (a
 * comment no longer does).  Before 19 it is defined here, as the same
 * attribute where the compiler has it.
 */
#ifndef pg_fallthrough
#if __has_attribute(fallthrough)
#define pg_fallthrough __attribute__((fallthrough))
#else
#define pg_fallthrough
#endif
#endif

/*
 * 19 sizes a shared hash table by one number, its maximum, where before it
 * took an initial and a maximum size: ours are made at their full size.
 */
#if PG_VERSION_NUM >= 190000
#define RL_ShmemInitHash(name, nelems, info, flags) \
	ShmemInitHash((name), (nelems), (info), (flags))
#else
#define RL_ShmemInitHash(name, nelems, info, flags) \
	ShmemInitHash((name), (nelems), (nelems), (info), (flags))
#endif

/*
 * 17 dropped PGPROC.pgprocno: a backend's number is MyProcNumber, that of
 * another PGPROC GetNumberFromPGProc().
 */
#if PG_VERSION_NUM >= 170000
#define RL_MY_PROCNO MyProcNumber
#else
#define RL_MY_PROCNO (MyProc->pgprocno)
#endif

/*
 * 17 tracks a wait event set by a resource owner and allocates it in
 * TopMemoryContext instead of the caller's context.  Ours are freed by the
 * code that made them (some are made where no resource owner may be used,
 * as in exit callbacks), so none is tracked, as before 17; the context
 * argument matters only before 17.
 */
#if PG_VERSION_NUM >= 170000
#define RL_CreateWaitEventSet(cxt, nevents) CreateWaitEventSet(NULL, (nevents))
#else
#define RL_CreateWaitEventSet(cxt, nevents) CreateWaitEventSet((cxt), (nevents))
#endif

/*
 * The wait event of every wait on Redis, on a lock's release or on our
 * worker: from 17 on a named one, so that pg_stat_activity shows
 * "RedisLock" rather than "Extension".  The name is registered in shared
 * memory on the first wait of each process; a wait while the process exits
 * (shared memory may already be gone) keeps the generic one.
 */
#if PG_VERSION_NUM >= 170000
static inline uint32
rl_wait_event(void)
{
	static uint32 named = 0;

	if (named == 0 && MyProc != NULL && !proc_exit_inprogress)
		named = WaitEventExtensionNew("RedisLock");
	return named != 0 ? named : PG_WAIT_EXTENSION;
}
#define RL_WAIT_EVENT rl_wait_event()
#else
#define RL_WAIT_EVENT PG_WAIT_EXTENSION
#endif

#endif							/* RL_COMPAT_H */
