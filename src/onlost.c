/*
 * onlost.c
 *	  redislock.on_lock_lost: each session says in shared memory what it
 *	  wants done when it loses a hold; the watchdog, the moment a renewal
 *	  finds a hold gone, leaves the session a notice naming the lock and
 *	  cancels its statement (SIGINT) or terminates it (SIGTERM), as
 *	  pg_cancel_backend() and pg_terminate_backend() do.
 *
 * A signal is the only way to stop a session that runs no code of ours (in
 * pg_sleep, a long query, a procedure between COMMITs). PostgreSQL then
 * raises its own error, "due to user request" or "due to administrator
 * command"; the session's emit_log_hook puts the lost lock into that error
 * when the notice is for this session and, for a cancel, for the statement
 * that ran when the loss was found: a cancel that reaches an idle session
 * does nothing, and a later cancel must not be blamed on it.
 *
 * src/onlost.c
 */
#include "postgres.h"

#include <signal.h>

#include "access/xact.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/elog.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "onlost.h"
#include "registry.h"

int			rl_on_lock_lost = RL_ON_LOST_WARN;

/* Longest noun of a kind of hold ("Redis semaphore permit" and the like). */
#define RL_NOUN_MAX 48

/* What the worker tells a session it signalled. */
typedef struct LostNotice
{
	uint64		session;		/* the session it is for */
	uint32		mode;			/* RLOnLost: what the worker did */
	TimestampTz at;				/* when it signalled */
	char		noun[RL_NOUN_MAX];
	char		name[RL_NAME_MAX + 1];
} LostNotice;

/*
 * By pgprocno. The session there writes session and mode; the worker writes
 * the notice between two increments of seq (odd while it writes), so that
 * the session can tell a notice read half-way through a write.
 */
typedef struct LostEntry
{
	pg_atomic_uint64 session;	/* the session that published mode */
	pg_atomic_uint32 mode;		/* its RLOnLost */
	pg_atomic_uint32 seq;
	LostNotice	notice;
} LostEntry;

static LostEntry *entries = NULL;
static uint64 published = 0;	/* this session's number, once it published */
static uint32 used_seq = 0;		/* the last notice this session put into an
								 * error */
static emit_log_hook_type prev_emit_log_hook = NULL;

void
rl_onlost_request(void)
{
	RequestAddinShmemSpace(mul_size(sizeof(LostEntry), rl_registry_nprocs()));
}

void
rl_onlost_startup(void)
{
	bool		found;

	entries = ShmemInitStruct("redislock on_lock_lost",
							  sizeof(LostEntry) * rl_registry_nprocs(), &found);
	if (!found)
		for (int i = 0; i < rl_registry_nprocs(); i++)
		{
			pg_atomic_init_u64(&entries[i].session, 0);
			pg_atomic_init_u32(&entries[i].mode, RL_ON_LOST_WARN);
			pg_atomic_init_u32(&entries[i].seq, 0);
		}
}

static void
publish_mode(int mode)
{
	LostEntry  *e = &entries[RL_MY_PROCNO];

	pg_atomic_write_u32(&e->mode, (uint32) mode);
	pg_write_barrier();
	published = rl_registry_my_session();
	pg_atomic_write_u64(&e->session, published);
}

/*
 * Before every acquisition: the worker reads the mode of a hold's session
 * from here, so it must be there before the session holds anything.
 */
void
rl_onlost_publish(void)
{
	if (entries != NULL && MyProc != NULL)
		publish_mode(rl_on_lock_lost);
}

/*
 * A new value of the setting applies at once to the holds already taken
 * (SET, RESET, and the end of a SET LOCAL or of a transaction that set it).
 * Called before the variable itself changes.
 */
static void
assign_on_lock_lost(int newval, void *extra)
{
	if (published != 0 && entries != NULL && MyProc != NULL)
		publish_mode(newval);
}

/*
 * Leaves the session of entry e (session, pid) the notice of its lost hold
 * and signals it, if it asked for more than a WARNING. Returns what it did.
 */
static RLOnLost
act(LostEntry *e, uint64 session, int procno, int pid, const char *noun,
	const char *name)
{
	RLOnLost	mode;

	if (pg_atomic_read_u64(&e->session) != session)
		return RL_ON_LOST_WARN;
	pg_read_barrier();
	mode = (RLOnLost) pg_atomic_read_u32(&e->mode);
	if (mode == RL_ON_LOST_WARN)
		return mode;

	pg_atomic_fetch_add_u32(&e->seq, 1);
	e->notice.session = session;
	e->notice.mode = (uint32) mode;
	e->notice.at = GetCurrentTimestamp();
	strlcpy(e->notice.noun, noun, sizeof(e->notice.noun));
	strlcpy(e->notice.name, name, sizeof(e->notice.name));
	pg_atomic_fetch_add_u32(&e->seq, 1);

	/*
	 * As pg_signal_backend(): to the process group, so that a program the
	 * session runs (COPY TO PROGRAM) gets it too. The PID checked against
	 * the process slot keeps a PID reused since the snapshot from being hit.
	 */
	if (GetPGProcByNumber(procno)->pid == pid)
		(void) kill(-pid, mode == RL_ON_LOST_CANCEL ? SIGINT : SIGTERM);
	return mode;
}

/*
 * The worker found the hold of slot s gone: does to its session what the
 * session asked for. Returns what that was.
 */
RLOnLost
rl_onlost_act(const RLSlot *s, const char *noun)
{
	Assert(entries != NULL && s->procno >= 0 && s->procno < rl_registry_nprocs());
	if (!rl_registry_session_alive(s))
		return RL_ON_LOST_WARN;
	return act(&entries[s->procno], s->session, s->procno, s->pid, noun,
			   s->name);
}

/*
 * The session itself learnt from Redis's answer that its hold of name is
 * gone (Redis refused a re-entry: another owner has the lock): the same as
 * the worker would do, the signal reaching this very session.
 */
RLOnLost
rl_onlost_act_self(const char *noun, const char *name)
{
	if (entries == NULL || MyProc == NULL || published == 0)
		return RL_ON_LOST_WARN;
	return act(&entries[RL_MY_PROCNO], published, RL_MY_PROCNO, MyProcPid,
			   noun, name);
}

/*
 * The notice meant for this error, copied into *copy, if any: a cancel or
 * termination that the worker's signal caused. *seq identifies it.
 */
static bool
notice_for(const ErrorData *edata, LostNotice *copy, uint32 *seq)
{
	LostEntry  *e = &entries[RL_MY_PROCNO];

	*seq = pg_atomic_read_u32(&e->seq);
	if (*seq == used_seq || *seq % 2 != 0)
		return false;
	pg_read_barrier();
	*copy = e->notice;
	pg_read_barrier();
	if (pg_atomic_read_u32(&e->seq) != *seq ||
		copy->session != published)
		return false;
	if (copy->mode == RL_ON_LOST_CANCEL)
		return edata->sqlerrcode == ERRCODE_QUERY_CANCELED &&
			strcmp(edata->message_id, "canceling statement due to user request") == 0 &&
			GetCurrentStatementStartTimestamp() <= copy->at;
	return edata->sqlerrcode == ERRCODE_ADMIN_SHUTDOWN &&
		strcmp(edata->message_id, "terminating connection due to administrator command") == 0;
}

/*
 * Puts the lost lock into the error that the worker's signal raised. Only
 * reports that go to the server log reach an emit_log_hook (log_min_messages
 * at ERROR or below, the default); the worker's WARNING names the lock and
 * the session in any case.
 */
static void
name_lost_lock(ErrorData *edata)
{
	LostNotice	copy;
	uint32		seq;

	if (published != 0 && edata->elevel >= ERROR && edata->message_id != NULL &&
		notice_for(edata, &copy, &seq))
	{
		bool		cancel = copy.mode == RL_ON_LOST_CANCEL;

		used_seq = seq;
		edata->message = cancel ?
			psprintf("canceling statement because %s \"%s\" was lost",
					 copy.noun, copy.name) :
			psprintf("terminating connection because %s \"%s\" was lost",
					 copy.noun, copy.name);
		edata->detail = psprintf("Redis no longer has this session's hold (the lease ran out, it was force-released, or Redis lost its data); redislock.on_lock_lost is \"%s\".",
								 cancel ? "cancel" : "terminate");
		edata->hint = pstrdup("What the session did since then was not protected by the lock: take it again before going on.");
	}
	if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
}

static const struct config_enum_entry on_lock_lost_options[] = {
	{"warn", RL_ON_LOST_WARN, false},
	{"cancel", RL_ON_LOST_CANCEL, false},
	{"terminate", RL_ON_LOST_TERMINATE, false},
	{NULL, 0, false}
};

void
rl_onlost_init(void)
{
	DefineCustomEnumVariable("redislock.on_lock_lost",
							 "What happens to a session when Redis no longer has one of its holds.",
							 "warn: a WARNING, the lock shows as lost and COMMIT of a writing transaction fails; cancel: also cancels the running statement at once; terminate: also ends the session at once.",
							 &rl_on_lock_lost,
							 RL_ON_LOST_WARN,
							 on_lock_lost_options,
							 PGC_USERSET,
							 0,
							 NULL, assign_on_lock_lost, NULL);
	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = name_lost_lock;
}
