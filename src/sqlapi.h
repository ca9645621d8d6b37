/*
 * sqlapi.h
 *	  The argument checks that every SQL entry point shares (sqlapi.c), for
 *	  the entry points of the other primitives (sqlsync.c).
 *
 * src/sqlapi.h
 */
#ifndef REDISLOCK_SQLAPI_H
#define REDISLOCK_SQLAPI_H

#include "fmgr.h"

#include "lock.h"

extern char *rl_object_name_arg(FunctionCallInfo fcinfo, int argno,
								const char *what);
extern char *rl_name_arg(FunctionCallInfo fcinfo, int argno);
extern void rl_require_redisson_layout(const char *what);
extern int64 rl_wait_arg(FunctionCallInfo fcinfo, int argno);
extern int64 rl_lease_arg(FunctionCallInfo fcinfo, int argno);
extern bool rl_warn_session_lock(bool acquired, RLScope scope,
								 const char *name, const char *xact_function);

#endif							/* REDISLOCK_SQLAPI_H */
