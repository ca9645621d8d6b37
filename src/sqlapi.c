/*
 * sqlapi.c
 *	  SQL-callable functions: argument checking and conversion, then a call
 *	  into lock.c. Bad input is rejected here, before anything reaches Redis.
 *
 * src/sqlapi.c
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "lock.h"
#include "sqlapi.h"
#include "plain.h"
#include "redislock.h"

PG_FUNCTION_INFO_V1(redis_lock_acquire);
PG_FUNCTION_INFO_V1(redis_xact_lock_acquire);
PG_FUNCTION_INFO_V1(redis_lock_release);
PG_FUNCTION_INFO_V1(redis_lock_release_all);
PG_FUNCTION_INFO_V1(redis_lock_force_release);
PG_FUNCTION_INFO_V1(redis_lock_status);
PG_FUNCTION_INFO_V1(redis_lock_nodes);

static void status_values(const RLStatus *st, Datum *values, bool *nulls);
PG_FUNCTION_INFO_V1(redis_read_lock_acquire);
PG_FUNCTION_INFO_V1(redis_write_lock_acquire);
PG_FUNCTION_INFO_V1(redis_xact_read_lock_acquire);
PG_FUNCTION_INFO_V1(redis_xact_write_lock_acquire);
PG_FUNCTION_INFO_V1(redis_read_lock_release);
PG_FUNCTION_INFO_V1(redis_write_lock_release);
PG_FUNCTION_INFO_V1(redis_lock_acquire_all);
PG_FUNCTION_INFO_V1(redis_xact_lock_acquire_all);
PG_FUNCTION_INFO_V1(redis_lock_fencing_token);
PG_FUNCTION_INFO_V1(redis_lock_owner_id);

/* The name of a lock, or of what (semaphore, latch) names the object. */
char *
rl_object_name_arg(FunctionCallInfo fcinfo, int argno, const char *what)
{
	text	   *t;
	int			len;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s name must not be null", what)));
	t = PG_GETARG_TEXT_PP(argno);
	len = VARSIZE_ANY_EXHDR(t);
	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s name must not be empty", what)));
	if (len > RL_NAME_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s name is too long", what),
				 errdetail("The name is %d bytes long; the limit is %d bytes.",
						   len, RL_NAME_MAX)));
	return text_to_cstring(t);
}

char *
rl_name_arg(FunctionCallInfo fcinfo, int argno)
{
	return rl_object_name_arg(fcinfo, argno, "lock");
}

/*
 * An interval in whole milliseconds, rounded up so that a positive interval
 * never becomes 0 (which means "do not wait"). Months count as 30 days.
 */
static int64
interval_ms(const Interval *iv, const char *argname)
{
	int64		days;
	int64		usecs;

	if (pg_mul_s64_overflow((int64) iv->month, DAYS_PER_MONTH, &days) ||
		pg_add_s64_overflow(days, (int64) iv->day, &days) ||
		pg_mul_s64_overflow(days, USECS_PER_DAY, &usecs) ||
		pg_add_s64_overflow(usecs, iv->time, &usecs))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("%s is out of range", argname)));
	if (usecs < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be negative", argname)));
	return usecs / 1000 + (usecs % 1000 != 0);
}

int64
rl_wait_arg(FunctionCallInfo fcinfo, int argno)
{
	if (PG_ARGISNULL(argno))
		return -1;
	return interval_ms(PG_GETARG_INTERVAL_P(argno), "wait");
}

int64
rl_lease_arg(FunctionCallInfo fcinfo, int argno)
{
	int64		ms;

	if (PG_ARGISNULL(argno))
		return 0;
	ms = interval_ms(PG_GETARG_INTERVAL_P(argno), "lease");
	if (ms == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease must be greater than zero"),
				 errhint("Pass NULL for a lease that the watchdog renews while the lock is held.")));
	if (ms < RL_MIN_LEASE_MS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease must be at least %d milliseconds", RL_MIN_LEASE_MS)));
	if (ms > RL_MAX_LEASE_MS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease must be at most 100 years")));
	return ms;
}

/*
 * redislock.warn_session_locks: behind a transaction pooler (PgBouncer in
 * pool_mode = transaction) a session-scope hold belongs to the server
 * connection, which the pooler hands to other clients once the transaction
 * ends, as it does with pg_advisory_lock. Nothing a backend sees tells
 * reliably that a pooler is in front (the pooler passes the client's
 * application_name on), so the user says so with the setting.
 */
static bool
warn_session_locks(bool acquired, RLScope scope, int n, const char **names,
				   const char *xact_function)
{
	StringInfoData list;

	if (!acquired || scope != RL_SCOPE_SESSION || !rl_warn_session_locks)
		return acquired;
	/* a multi-lock is named by its lock names, as its holds are */
	initStringInfo(&list);
	for (int i = 0; i < n; i++)
		appendStringInfo(&list, "%s\"%s\"", i > 0 ? ", " : "", names[i]);
	ereport(WARNING,
			(errcode(ERRCODE_WARNING),
			 n == 1 ?
			 errmsg("session-scope lock %s belongs to this server connection", list.data) :
			 errmsg("session-scope locks %s belong to this server connection", list.data),
			 errdetail("Behind a transaction pooler, other clients may run on this connection after this transaction and hold the lock too (redislock.warn_session_locks is on)."),
			 errhint("Use %s(), which releases the lock at COMMIT or ROLLBACK.",
					 xact_function)));
	pfree(list.data);
	return acquired;
}

bool
rl_warn_session_lock(bool acquired, RLScope scope, const char *name,
				  const char *xact_function)
{
	return warn_session_locks(acquired, scope, 1, &name, xact_function);
}

/*
 * The key layout an exclusive lock is taken in: the layout argument at
 * argno (1.2 on), NULL or absent = redislock.layout.
 */
static RLKind
layout_arg(FunctionCallInfo fcinfo, int argno)
{
	char	   *layout;

	if (PG_NARGS() <= argno || PG_ARGISNULL(argno))
		return rl_layout == RL_LAYOUT_PLAIN ? RL_KIND_PLAIN : RL_KIND_LOCK;
	layout = text_to_cstring(PG_GETARG_TEXT_PP(argno));
	if (strcmp(layout, "plain") == 0)
		return RL_KIND_PLAIN;
	if (strcmp(layout, "redisson") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid layout \"%s\"", layout),
				 errhint("The layouts are \"redisson\" (a hash per lock, as Redisson keeps it) and \"plain\" (one string key, as redsync, node redlock, redis-py, ShedLock and Spring Integration keep it).")));
	return RL_KIND_LOCK;
}

/*
 * Refuses what only the Redisson layout has (fair locks, read-write locks,
 * semaphores, expiring permits, latches) when redislock.layout is plain:
 * the lock clients of the plain layout have no such thing to share.
 */
void
rl_require_redisson_layout(const char *what)
{
	if (rl_layout == RL_LAYOUT_PLAIN)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s need the redisson layout", what),
				 errdetail("redislock.layout is \"plain\", whose locks are single string keys: exclusive locks, taken by redis_lock_acquire() and redis_lock_acquire_all()."),
				 errhint("SET redislock.layout = 'redisson' (or SET LOCAL) for this call.")));
}

static Datum
acquire(FunctionCallInfo fcinfo, RLScope scope)
{
	RLAcquireRequest req;

	req.count = 1;
	req.id = NULL;
	req.kind = layout_arg(fcinfo, 4);
	req.name = rl_name_arg(fcinfo, 0);
	req.scope = scope;
	req.wait_ms = rl_wait_arg(fcinfo, 1);
	req.lease_ms = rl_lease_arg(fcinfo, 2);
	if (PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("fair must not be null")));
	req.fair = PG_GETARG_BOOL(3);
	if (req.fair && req.kind == RL_KIND_PLAIN)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("fair locks need the redisson layout"),
				 errdetail("A lock of the plain layout is one string key: it has no queue of waiters."),
				 errhint("Pass fair => false, or layout => 'redisson'.")));
	PG_RETURN_BOOL(rl_warn_session_lock(rl_lock_acquire(&req), scope, req.name,
									 "redis_xact_lock_acquire"));
}

Datum
redis_lock_acquire(PG_FUNCTION_ARGS)
{
	return acquire(fcinfo, RL_SCOPE_SESSION);
}

Datum
redis_xact_lock_acquire(PG_FUNCTION_ARGS)
{
	return acquire(fcinfo, RL_SCOPE_XACT);
}

/* A read or write hold: (name, wait, lease), never fair. */
static Datum
rw_acquire(FunctionCallInfo fcinfo, RLKind kind, RLScope scope)
{
	RLAcquireRequest req;

	rl_require_redisson_layout("read-write locks");
	req.count = 1;
	req.id = NULL;
	req.kind = kind;
	req.name = rl_name_arg(fcinfo, 0);
	req.scope = scope;
	req.wait_ms = rl_wait_arg(fcinfo, 1);
	req.lease_ms = rl_lease_arg(fcinfo, 2);
	req.fair = false;
	PG_RETURN_BOOL(rl_warn_session_lock(rl_lock_acquire(&req), scope, req.name,
									 kind == RL_KIND_READ ?
									 "redis_xact_read_lock_acquire" :
									 "redis_xact_write_lock_acquire"));
}

Datum
redis_read_lock_acquire(PG_FUNCTION_ARGS)
{
	return rw_acquire(fcinfo, RL_KIND_READ, RL_SCOPE_SESSION);
}

Datum
redis_write_lock_acquire(PG_FUNCTION_ARGS)
{
	return rw_acquire(fcinfo, RL_KIND_WRITE, RL_SCOPE_SESSION);
}

Datum
redis_xact_read_lock_acquire(PG_FUNCTION_ARGS)
{
	return rw_acquire(fcinfo, RL_KIND_READ, RL_SCOPE_XACT);
}

Datum
redis_xact_write_lock_acquire(PG_FUNCTION_ARGS)
{
	return rw_acquire(fcinfo, RL_KIND_WRITE, RL_SCOPE_XACT);
}

Datum
redis_read_lock_release(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(rl_lock_release(rl_name_arg(fcinfo, 0), RL_KIND_READ));
}

Datum
redis_write_lock_release(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(rl_lock_release(rl_name_arg(fcinfo, 0), RL_KIND_WRITE));
}

static int
compare_names(const void *a, const void *b)
{
	return strcmp(*(const char *const *) a, *(const char *const *) b);
}

/*
 * The names of a multi-lock: a non-empty one-dimensional text array of at
 * most RL_MULTI_MAX valid names, without NULLs or duplicates. Returned in
 * the canonical (byte) order that every session takes them in.
 */
static const char **
names_arg(FunctionCallInfo fcinfo, int argno, int *n)
{
	ArrayType  *arr;
	Datum	   *elems;
	bool	   *nulls;
	const char **names;
	int			nelems;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("lock names must not be null")));
	arr = PG_GETARG_ARRAYTYPE_P(argno);
	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("lock names must be a one-dimensional array")));
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT,
					  &elems, &nulls, &nelems);
	if (nelems == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lock names must not be empty"),
				 errhint("Pass at least one name.")));
	if (nelems > RL_MULTI_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many lock names"),
				 errdetail("%d names were passed; one call takes at most %d.",
						   nelems, RL_MULTI_MAX)));
	names = palloc(sizeof(char *) * nelems);
	for (int i = 0; i < nelems; i++)
	{
		int			len;

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("lock names must not contain null")));
		len = VARSIZE_ANY_EXHDR(DatumGetTextPP(elems[i]));
		if (len == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("lock name must not be empty")));
		if (len > RL_NAME_MAX)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("lock name is too long"),
					 errdetail("The name is %d bytes long; the limit is %d bytes.",
							   len, RL_NAME_MAX)));
		names[i] = TextDatumGetCString(elems[i]);
	}
	qsort(names, nelems, sizeof(char *), compare_names);
	for (int i = 1; i < nelems; i++)
		if (strcmp(names[i - 1], names[i]) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("lock name \"%s\" appears more than once", names[i])));
	*n = nelems;
	return names;
}

static Datum
acquire_all(FunctionCallInfo fcinfo, RLScope scope)
{
	RLAcquireRequest req;
	const char **names;
	int			n;
	StringInfoData all;

	req.count = 1;
	req.id = NULL;
	names = names_arg(fcinfo, 0, &n);
	/* messages about the whole set name it as the array it came as */
	initStringInfo(&all);
	appendStringInfoChar(&all, '{');
	for (int i = 0; i < n; i++)
		appendStringInfo(&all, "%s%s", i > 0 ? "," : "", names[i]);
	appendStringInfoChar(&all, '}');
	req.kind = layout_arg(fcinfo, 3);
	req.name = all.data;
	req.scope = scope;
	req.wait_ms = rl_wait_arg(fcinfo, 1);
	req.lease_ms = rl_lease_arg(fcinfo, 2);
	req.fair = false;
	PG_RETURN_BOOL(warn_session_locks(rl_lock_acquire_all(&req, n, names),
									  scope, n, names,
									  "redis_xact_lock_acquire_all"));
}

Datum
redis_lock_acquire_all(PG_FUNCTION_ARGS)
{
	return acquire_all(fcinfo, RL_SCOPE_SESSION);
}

Datum
redis_xact_lock_acquire_all(PG_FUNCTION_ARGS)
{
	return acquire_all(fcinfo, RL_SCOPE_XACT);
}

Datum
redis_lock_release(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(rl_lock_release(rl_name_arg(fcinfo, 0), RL_KIND_LOCK));
}

Datum
redis_lock_release_all(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(rl_lock_release_all());
}

Datum
redis_lock_force_release(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(rl_lock_force_release(rl_name_arg(fcinfo, 0)));
}

Datum
redis_lock_fencing_token(PG_FUNCTION_ARGS)
{
	int64		token;

	if (!rl_lock_fencing_token(rl_name_arg(fcinfo, 0), &token))
		PG_RETURN_NULL();
	PG_RETURN_INT64(token);
}

Datum
redis_lock_owner_id(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(cstring_to_text(rl_owner_id()));
}

static Datum
holders_array(const RLStatus *st)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(st->nholders, 1));

	for (int i = 0; i < st->nholders; i++)
		elems[i] = rl_foreign_text(st->holders[i]);
	return PointerGetDatum(construct_array(elems, st->nholders, TEXTOID,
										   -1, false, TYPALIGN_INT));
}

Datum
redis_lock_status(PG_FUNCTION_ARGS)
{
	const char *name = rl_name_arg(fcinfo, 0);
	TupleDesc	tupdesc;
	RLStatus	st;
	Datum		values[10];
	bool		nulls[10] = {false};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	rl_lock_status(name, &st);
	status_values(&st, values, nulls);
	values[7] = CStringGetTextDatum(st.mode);
	/*
	 * 1.0 declares no rw_mode column, 1.1 no layout: heap_form_tuple takes
	 * as many as the version's row type has
	 */
	if (st.rw_mode != NULL)
		values[8] = rl_foreign_text(st.rw_mode);
	else
		nulls[8] = true;
	values[9] = CStringGetTextDatum(st.layout);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * Fills the first seven columns shared by redis_lock_status() and
 * redis_lock_nodes() from st.
 */
static void
status_values(const RLStatus *st, Datum *values, bool *nulls)
{

	values[0] = BoolGetDatum(st->locked);
	values[1] = holders_array(st);
	values[2] = Int32GetDatum((int32) Min(st->hold_count, PG_INT32_MAX));
	if (st->ttl_ms >= 0)
	{
		Interval   *ttl = palloc0(sizeof(Interval));

		ttl->time = st->ttl_ms * 1000;
		values[3] = IntervalPGetDatum(ttl);
	}
	else
		nulls[3] = true;
	values[4] = Int32GetDatum((int32) Min(st->queue_length, PG_INT32_MAX));
	values[5] = Int64GetDatum(st->token);
	nulls[5] = !st->has_token;
	values[6] = BoolGetDatum(st->held_by_me);
}

/* One row per Redlock master (or one for the server or cluster). */
Datum
redis_lock_nodes(PG_FUNCTION_ARGS)
{
	const char *name = rl_name_arg(fcinfo, 0);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	RLNodeStatus *nodes;
	int			n;

	InitMaterializedSRF(fcinfo, 0);
	n = rl_lock_node_status(name, &nodes);
	for (int i = 0; i < n; i++)
	{
		Datum		values[10];
		bool		nulls[10] = {false};

		values[0] = rl_foreign_text(nodes[i].node);
		if (nodes[i].error != NULL)
		{
			for (int k = 1; k < 8; k++)
				nulls[k] = true;
			values[8] = rl_foreign_text(nodes[i].error);
			nulls[9] = true;
		}
		else
		{
			status_values(&nodes[i].st, values + 1, nulls + 1);
			nulls[8] = true;
			values[9] = CStringGetTextDatum(nodes[i].st.layout);
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
