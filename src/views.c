/*
 * views.c
 *	  Set-returning functions behind the redis_locks, redis_lock_stats and
 *	  redis_lock_waits views: a copy of the shared lock table, the shared
 *	  counters, and who this server's waiting sessions wait for; and
 *	  redis_lock_blocking_pids().
 *
 * src/views.c
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "fmgr.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "deadlock.h"
#include "redislock.h"
#include "registry.h"
#include "route.h"

PG_FUNCTION_INFO_V1(redis_locks);
PG_FUNCTION_INFO_V1(redis_lock_stats);
PG_FUNCTION_INFO_V1(redis_lock_waits);
PG_FUNCTION_INFO_V1(redis_lock_blocking_pids);

#define LOCKS_COLS 15			/* 13 in version 1.0 (no kind), 14 in 1.1 (no layout) */

static void
require_preload(void)
{
	if (!rl_registry_attached())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("redislock must be loaded via shared_preload_libraries"),
				 errdetail("The views and redis_lock_blocking_pids() read the shared lock table, which exists only then."),
				 errhint("Add redislock to shared_preload_libraries and restart.")));
}

static Datum
interval_ms(int64 ms)
{
	Interval   *iv = palloc0(sizeof(Interval));

	iv->time = ms * 1000;
	return IntervalPGetDatum(iv);
}

/*
 * Names are bytes, and the shared lock table holds the names of every
 * database of the server: a lock taken in a LATIN1 database may have a name
 * that is not valid UTF-8, and a hash in Redis may have fields any client
 * wrote. Text that is not valid in the database encoding must not reach
 * SQL (string functions and clients trust it to be valid), so such bytes
 * are shown with every byte outside ASCII written \xNN. Bytes that are
 * valid here are shown as they are, even if another database reads them
 * as other characters: they are what Redis holds.
 */
Datum
rl_foreign_text(const char *bytes)
{
	StringInfoData buf;

	if (pg_verify_mbstr(GetDatabaseEncoding(), bytes, strlen(bytes), true))
		return CStringGetTextDatum(bytes);
	initStringInfo(&buf);
	for (const unsigned char *p = (const unsigned char *) bytes; *p != '\0'; p++)
	{
		if (IS_HIGHBIT_SET(*p))
			appendStringInfo(&buf, "\\x%02x", *p);
		else
			appendStringInfoChar(&buf, (char) *p);
	}
	return CStringGetTextDatum(buf.data);
}

static const char *
scope_text(const RLSlot *s)
{
	if (s->session_holds > 0 && s->xact_holds > 0)
		return "session+transaction";
	return s->xact_holds > 0 ? "transaction" : "session";
}

/*
 * A lease past its end with no renewal confirmed is lost at once, before
 * the worker reports it; a fixed one is reported as expired: nothing was
 * meant to renew it.
 */
static const char *
state_text(const RLSlot *s, TimestampTz now)
{
	switch ((RLSlotState) s->state)
	{
		case RL_SLOT_LOST:
			return "lost";
		case RL_SLOT_ORPHANED:
			return "releasing";
		case RL_SLOT_RESERVED:
			return "unsettled";	/* the worker settles it */
		default:
			if (rl_registry_lapsed(s, now))
				return s->watchdog ? "lost" : "expired";
			return "held";
	}
}

static const char *
kind_text(uint8 kind)
{
	switch ((RLKind) kind)
	{
		case RL_KIND_LOCK:
			return "lock";
		case RL_KIND_READ:
			return "read";
		case RL_KIND_WRITE:
			return "write";
		case RL_KIND_SEMAPHORE:
			return "semaphore";
		case RL_KIND_PERMIT:
			return "permit";
		case RL_KIND_LATCH:
			return "latch";
		case RL_KIND_PLAIN:
			return "lock";
	}
	return "unknown";
}

/* The key layout of a kind of hold: only exclusive locks have two. */
static const char *
layout_text(uint8 kind)
{
	return kind == RL_KIND_PLAIN ? "plain" : "redisson";
}

/*
 * The rows of the redis_locks view. The result's shape is the calling
 * version's: 1.0 declares no kind column, 1.1 no layout column
 * (tuplestore_putvalues takes only the declared columns' values from the
 * array).
 */
Datum
redis_locks(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	RLSlotCopy *copies;
	TimestampTz now = GetCurrentTimestamp();
	int			n;

	require_preload();
	InitMaterializedSRF(fcinfo, 0);
	n = rl_registry_snapshot(&copies);
	for (int i = 0; i < n; i++)
	{
		RLSlot	   *s = &copies[i].slot;
		Datum		values[LOCKS_COLS];
		bool		nulls[LOCKS_COLS] = {false};

		values[0] = Int32GetDatum(s->pid);
		values[1] = rl_foreign_text(s->name);
		values[2] = CStringGetTextDatum(scope_text(s));
		values[3] = CStringGetTextDatum(s->fair ? "fair" : "nonfair");
		values[4] = Int32GetDatum(s->session_holds + s->xact_holds);
		values[5] = interval_ms(s->lease_ms);
		values[6] = CStringGetTextDatum(s->watchdog ? "watchdog" : "fixed");
		values[7] = Int64GetDatum(s->token);
		values[8] = TimestampTzGetDatum(s->acquired_at);
		values[9] = TimestampTzGetDatum(s->renewed_at);
		values[10] = CStringGetTextDatum(state_text(s, now));
		values[11] = CStringGetTextDatum(s->owner);
		if (s->masters > 0 && rl_mode() == RL_MODE_REDLOCK)
			values[12] = CStringGetTextDatum(psprintf("%d/%d", s->masters,
													  rl_redlock_size()));
		else
			nulls[12] = true;
		values[13] = CStringGetTextDatum(kind_text(s->kind));
		values[14] = CStringGetTextDatum(layout_text(s->kind));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

Datum
redis_lock_stats(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[RL_STAT_COUNT + 1];
	bool		nulls[RL_STAT_COUNT + 1] = {false};

	require_preload();
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	for (int i = 0; i < RL_STAT_DEADLOCK_CHECKS; i++)
		values[i] = Int64GetDatum((int64) rl_stat_get((RLStat) i));
	/* the deployment these settings describe, as redis_lock_status() says */
	values[RL_STAT_DEADLOCK_CHECKS] = CStringGetTextDatum(rl_mode_name());
	/*
	 * Counters added since 1.0 follow mode; a 1.0 database declares none,
	 * and heap_form_tuple takes only the declared columns' values.
	 */
	for (int i = RL_STAT_DEADLOCK_CHECKS; i < RL_STAT_COUNT; i++)
		values[i + 1] = Int64GetDatum((int64) rl_stat_get((RLStat) i));
	Assert(tupdesc->natts == RL_STAT_DEADLOCK_CHECKS + 1 ||
		   tupdesc->natts == RL_STAT_COUNT + 1);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/* The pids of those of n owners that are sessions of this server. */
static ArrayType *
holder_pids(int n, char **owners)
{
	Datum	   *pids = palloc(sizeof(Datum) * Max(n, 1));
	int			npids = 0;

	for (int i = 0; i < n; i++)
	{
		int			pid = rl_registry_owner_pid(owners[i]);

		if (pid != 0)
			pids[npids++] = Int32GetDatum(pid);
	}
	return construct_array(pids, npids, INT4OID, sizeof(int32), true, TYPALIGN_INT);
}

static ArrayType *
text_array(int n, char **items)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		d[i] = rl_foreign_text(items[i]);
	return construct_array(d, n, TEXTOID, -1, false, TYPALIGN_INT);
}

/*
 * The rows of redis_lock_waits: one per waiting session of this server,
 * with who it waits for as Redis says now (one pipelined round trip for
 * all). A multi-lock wait shows its first name, and the holders of all of
 * its names the registry could keep; with Redlock, holders are not shown.
 */
Datum
redis_lock_waits(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	RLWaitCopy *waits;
	char	 ***holders;
	int		   *nholders;
	bool		known;
	int			n;

	require_preload();
	InitMaterializedSRF(fcinfo, 0);
	n = rl_registry_wait_snapshot(&waits);
	holders = palloc(sizeof(char **) * Max(n, 1));
	nholders = palloc(sizeof(int) * Max(n, 1));
	known = n > 0 && rl_waits_holders(n, waits, holders, nholders);
	for (int i = 0; i < n; i++)
	{
		Datum		values[7];
		bool		nulls[7] = {false};

		values[0] = Int32GetDatum(waits[i].pid);
		values[6] = CStringGetTextDatum(layout_text(waits[i].kind));
		values[1] = rl_foreign_text(waits[i].names);
		values[2] = CStringGetTextDatum(kind_text(waits[i].kind));
		values[3] = TimestampTzGetDatum(waits[i].started);
		if (known)
		{
			values[4] = PointerGetDatum(text_array(nholders[i], holders[i]));
			values[5] = PointerGetDatum(holder_pids(nholders[i], holders[i]));
		}
		else
			nulls[4] = nulls[5] = true;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * The pids of this server's sessions that the session with that pid waits
 * for in Redis, like pg_blocking_pids(): empty when it does not wait for a
 * Redis lock (or with Redlock).
 */
Datum
redis_lock_blocking_pids(PG_FUNCTION_ARGS)
{
	int			pid = PG_GETARG_INT32(0);
	RLWaitCopy *waits;
	char	  **holders;
	int			nholders;
	int			n;

	require_preload();
	n = rl_registry_wait_snapshot(&waits);
	for (int i = 0; i < n; i++)
		if (waits[i].pid == pid &&
			rl_waits_holders(1, &waits[i], &holders, &nholders))
			PG_RETURN_ARRAYTYPE_P(holder_pids(nholders, holders));
	PG_RETURN_ARRAYTYPE_P(construct_empty_array(INT4OID));
}
