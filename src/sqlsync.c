/*
 * sqlsync.c
 *	  SQL-callable functions of semaphores, expiring permits and count-down
 *	  latches: argument checks, then a call into semaphore.c or latch.c.
 *
 * src/sqlsync.c
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/builtins.h"

#include "redislock.h"
#include "semaphore.h"
#include "sqlapi.h"

PG_FUNCTION_INFO_V1(redis_semaphore_try_set_permits);
PG_FUNCTION_INFO_V1(redis_semaphore_add_permits);
PG_FUNCTION_INFO_V1(redis_semaphore_acquire);
PG_FUNCTION_INFO_V1(redis_xact_semaphore_acquire);
PG_FUNCTION_INFO_V1(redis_semaphore_release);
PG_FUNCTION_INFO_V1(redis_semaphore_available);
PG_FUNCTION_INFO_V1(redis_permit_try_set_permits);
PG_FUNCTION_INFO_V1(redis_permit_set_permits);
PG_FUNCTION_INFO_V1(redis_permit_available);
PG_FUNCTION_INFO_V1(redis_permit_acquire);
PG_FUNCTION_INFO_V1(redis_xact_permit_acquire);
PG_FUNCTION_INFO_V1(redis_permit_release);
PG_FUNCTION_INFO_V1(redis_latch_try_set_count);
PG_FUNCTION_INFO_V1(redis_latch_count_down);
PG_FUNCTION_INFO_V1(redis_latch_count);
PG_FUNCTION_INFO_V1(redis_latch_await);

/* 2^53 - 1: Lua numbers are doubles, exact only up to there */
#define LATCH_COUNT_MAX INT64CONST(9007199254740991)

#define semaphore_name_arg(fcinfo, argno) rl_object_name_arg((fcinfo), (argno), "semaphore")
#define latch_name_arg(fcinfo, argno) rl_object_name_arg((fcinfo), (argno), "latch")

static void
not_null(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", argname)));
}

/* Permits taken or given back in one call: 1 to RL_PERMITS_MAX. */
static int32
permits_arg(FunctionCallInfo fcinfo, int argno)
{
	int32		permits;

	not_null(fcinfo, argno, "permits");
	permits = PG_GETARG_INT32(argno);
	if (permits <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("permits must be greater than zero")));
	if (permits > RL_PERMITS_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("permits must be at most %d", RL_PERMITS_MAX)));
	return permits;
}

/* The size of a pool: zero or more. */
static int32
pool_arg(FunctionCallInfo fcinfo, int argno)
{
	int32		permits;

	not_null(fcinfo, argno, "permits");
	permits = PG_GETARG_INT32(argno);
	if (permits < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("permits must not be negative")));
	return permits;
}

/* Redis counts in 64 bits; SQL's integer is Redisson's int. */
static Datum
permits_result(int64 available, const char *name)
{
	if (available < PG_INT32_MIN || available > PG_INT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("Redis semaphore \"%s\" has " INT64_FORMAT " permits available, out of the range of integer",
						name, available)));
	return Int32GetDatum((int32) available);
}

/* A permit id as redis_permit_acquire() returns it, in lower case. */
static char *
permit_id_arg(FunctionCallInfo fcinfo, int argno)
{
	char	   *id;

	not_null(fcinfo, argno, "permit id");
	id = text_to_cstring(PG_GETARG_TEXT_PP(argno));
	if (strlen(id) != RL_PERMIT_ID_HEX ||
		strspn(id, "0123456789abcdefABCDEF") != RL_PERMIT_ID_HEX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid permit id \"%s\"", id),
				 errdetail("A permit id is %d hexadecimal digits, as redis_permit_acquire() returns it.",
						   RL_PERMIT_ID_HEX)));
	for (char *p = id; *p; p++)
		*p = pg_ascii_tolower((unsigned char) *p);
	return id;
}

Datum
redis_semaphore_try_set_permits(PG_FUNCTION_ARGS)
{
	char	   *name = semaphore_name_arg(fcinfo, 0);

	rl_require_redisson_layout("Redis semaphores");
	PG_RETURN_BOOL(rl_semaphore_set(name, false, "try_set", pool_arg(fcinfo, 1)));
}

Datum
redis_semaphore_add_permits(PG_FUNCTION_ARGS)
{
	char	   *name = semaphore_name_arg(fcinfo, 0);

	not_null(fcinfo, 1, "delta");
	rl_require_redisson_layout("Redis semaphores");
	(void) rl_semaphore_set(name, false, "add", PG_GETARG_INT32(1));
	PG_RETURN_VOID();
}

static Datum
semaphore_acquire(FunctionCallInfo fcinfo, RLScope scope)
{
	char	   *name = semaphore_name_arg(fcinfo, 0);
	int32		permits = permits_arg(fcinfo, 1);
	int64		wait_ms = rl_wait_arg(fcinfo, 2);
	bool		taken;

	rl_require_redisson_layout("Redis semaphores");
	taken = rl_semaphore_acquire(name, permits, scope, wait_ms);

	PG_RETURN_BOOL(rl_warn_session_lock(taken, scope, name,
										"redis_xact_semaphore_acquire"));
}

Datum
redis_semaphore_acquire(PG_FUNCTION_ARGS)
{
	return semaphore_acquire(fcinfo, RL_SCOPE_SESSION);
}

Datum
redis_xact_semaphore_acquire(PG_FUNCTION_ARGS)
{
	return semaphore_acquire(fcinfo, RL_SCOPE_XACT);
}

Datum
redis_semaphore_release(PG_FUNCTION_ARGS)
{
	char	   *name = semaphore_name_arg(fcinfo, 0);

	PG_RETURN_BOOL(rl_semaphore_release(name, permits_arg(fcinfo, 1)));
}

Datum
redis_semaphore_available(PG_FUNCTION_ARGS)
{
	char	   *name = semaphore_name_arg(fcinfo, 0);

	return permits_result(rl_semaphore_available(name, false), name);
}

Datum
redis_permit_try_set_permits(PG_FUNCTION_ARGS)
{
	char	   *name = semaphore_name_arg(fcinfo, 0);

	rl_require_redisson_layout("Redis expiring permits");
	PG_RETURN_BOOL(rl_semaphore_set(name, true, "try_set", pool_arg(fcinfo, 1)));
}

Datum
redis_permit_set_permits(PG_FUNCTION_ARGS)
{
	char	   *name = semaphore_name_arg(fcinfo, 0);

	rl_require_redisson_layout("Redis expiring permits");
	(void) rl_semaphore_set(name, true, "set", pool_arg(fcinfo, 1));
	PG_RETURN_VOID();
}

Datum
redis_permit_available(PG_FUNCTION_ARGS)
{
	char	   *name = semaphore_name_arg(fcinfo, 0);

	return permits_result(rl_semaphore_available(name, true), name);
}

static Datum
permit_acquire(FunctionCallInfo fcinfo, RLScope scope)
{
	char	   *name = semaphore_name_arg(fcinfo, 0);
	int64		wait_ms = rl_wait_arg(fcinfo, 1);
	char	   *id;

	rl_require_redisson_layout("Redis expiring permits");
	id = rl_permit_acquire(name, scope, wait_ms, rl_lease_arg(fcinfo, 2));

	if (!rl_warn_session_lock(id != NULL, scope, name,
							  "redis_xact_permit_acquire"))
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(id));
}

Datum
redis_permit_acquire(PG_FUNCTION_ARGS)
{
	return permit_acquire(fcinfo, RL_SCOPE_SESSION);
}

Datum
redis_xact_permit_acquire(PG_FUNCTION_ARGS)
{
	return permit_acquire(fcinfo, RL_SCOPE_XACT);
}

Datum
redis_permit_release(PG_FUNCTION_ARGS)
{
	char	   *name = semaphore_name_arg(fcinfo, 0);

	PG_RETURN_BOOL(rl_permit_release(name, permit_id_arg(fcinfo, 1)));
}

Datum
redis_latch_try_set_count(PG_FUNCTION_ARGS)
{
	char	   *name = latch_name_arg(fcinfo, 0);
	int64		count;

	rl_require_redisson_layout("Redis count-down latches");
	not_null(fcinfo, 1, "count");
	count = PG_GETARG_INT64(1);
	if (count <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("count must be greater than zero"),
				 errhint("A latch whose count is zero is open: it needs no key in Redis.")));
	if (count > LATCH_COUNT_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("count must be at most " INT64_FORMAT, LATCH_COUNT_MAX),
				 errdetail("Redis scripts count in double precision, exact only up to that.")));
	PG_RETURN_BOOL(rl_latch_try_set(name, count));
}

Datum
redis_latch_count_down(PG_FUNCTION_ARGS)
{
	char	   *name = latch_name_arg(fcinfo, 0);

	rl_require_redisson_layout("Redis count-down latches");
	PG_RETURN_INT64(rl_latch_count_down(name));
}

Datum
redis_latch_count(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(rl_latch_count(latch_name_arg(fcinfo, 0)));
}

Datum
redis_latch_await(PG_FUNCTION_ARGS)
{
	char	   *name = latch_name_arg(fcinfo, 0);

	rl_require_redisson_layout("Redis count-down latches");
	PG_RETURN_BOOL(rl_latch_await(name, rl_wait_arg(fcinfo, 1)));
}
