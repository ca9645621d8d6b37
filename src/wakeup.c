/*
 * wakeup.c
 *	  The shared board of waiting sessions: each waiter puts up the channels
 *	  it waits on, the listener (listener.c) subscribes them once for the
 *	  whole server and wakes the waiters when a message comes.
 *
 * A waiter retries only once the listener says its channels are subscribed
 * (READY): any release after that attempt reaches the board. An unlock
 * message "0" on an exclusive lock's channel wakes one waiter, the one that
 * has waited longest, as Redisson wakes one thread of a JVM; every other
 * message wakes them all. A waiter that was woken but ends its wait without
 * the lock (cancel, timeout, an error) passes the wake on, so a wake is
 * never lost with it. Whenever the listener may have missed messages (its
 * connection dropped, it restarted) it takes READY back and gives it again
 * once subscribed anew, and the waiters retry then: the mark of such a
 * lapse is taken only by the waiter's look that is followed by a retry, so
 * a look that comes between two sleeps (a deadlock check's round) cannot
 * swallow it.
 *
 * src/wakeup.c
 */
#include "postgres.h"

#include <limits.h>

#include "common/hashfn.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "compat.h"
#include "wakeup.h"

typedef struct WakeEntry
{
	int			procno;			/* the waiter's PGPROC; -1: free */
	uint64		seq;			/* order of arrival: who waited longest */
	uint32		hash;
	bool		wake_one;		/* "0" wakes one waiter of this channel */
	pg_atomic_uint32 state;		/* RLChannelState, set by the listener, and
								 * LAPSED */
	pg_atomic_uint32 woken;		/* a message for this waiter came */
	char		channel[RL_CHANNEL_MAX];
} WakeEntry;

/*
 * In an entry's state with the RLChannelState: it was READY, then not, so
 * a message may have been missed however soon READY is back. One word, so
 * that the waiter can take the mark only while it sees READY (one
 * compare-and-swap, a full barrier before the attempt that acts on it),
 * and a lapse after that leaves the word other than READY for its next
 * look.
 */
#define STATE_MASK 0x0F
#define LAPSED 0x10

typedef struct WakeBoard
{
	LWLock	   *lock;			/* guards who owns which entry */
	Latch	   *listener;		/* NULL while no listener runs */
	uint32		settings;		/* settings_hash() of the listener's */
	uint64		next_seq;
	int			nentries;
	WakeEntry	entries[FLEXIBLE_ARRAY_MEMBER];
} WakeBoard;

static WakeBoard *board = NULL;

/* This session's entries while it waits. */
static int	my_entries[RL_MULTI_MAX];
static bool my_owed[RL_MULTI_MAX];	/* took a wake no finished attempt used */
static int	my_n = 0;
static bool exit_registered = false;

/* One entry per waiting backend, and room for multi-lock waits. */
static int
board_entries(void)
{
	return 2 * MaxBackends + RL_MULTI_MAX;
}

static Size
board_size(void)
{
	return add_size(offsetof(WakeBoard, entries),
					mul_size(sizeof(WakeEntry), board_entries()));
}

void
rl_wakeup_request(void)
{
	RequestAddinShmemSpace(board_size());
	RequestNamedLWLockTranche("redislock wakeup", 1);
}

void
rl_wakeup_startup(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	board = ShmemInitStruct("redislock wakeup", board_size(), &found);
	if (!found)
	{
		board->lock = &(GetNamedLWLockTranche("redislock wakeup"))->lock;
		board->listener = NULL;
		board->next_seq = 1;
		board->nentries = board_entries();
		for (int i = 0; i < board->nentries; i++)
		{
			board->entries[i].procno = -1;
			pg_atomic_init_u32(&board->entries[i].state, RL_CHANNEL_PENDING);
			pg_atomic_init_u32(&board->entries[i].woken, 0);
		}
	}
	LWLockRelease(AddinShmemInitLock);
}

static uint32
channel_hash(const char *channel)
{
	return hash_bytes((const unsigned char *) channel, strlen(channel));
}

/*
 * The settings that decide where unlock messages are heard. A session may
 * have its own (they are superuser settings, per role or database too): it
 * can use the listener only when they are the listener's.
 */
static uint32
settings_hash(void)
{
	const char *const parts[] = {rl_url, rl_sentinels, rl_sentinel_master,
	rl_cluster_nodes, rl_redlock_nodes};
	uint32		h = hash_uint32((uint32) rl_cluster_pubsub);

	for (int i = 0; i < (int) lengthof(parts); i++)
		h = hash_combine(h, parts[i] == NULL ? 0 :
						 hash_bytes((const unsigned char *) parts[i], strlen(parts[i])));
	return h;
}

/*
 * The listener's side of an entry's state: a waiter whose channel leaves
 * READY is marked lapsed, so that it retries once READY again even if it
 * never saw the state in between. Wakes the waiter on any change.
 */
static void
set_state(WakeEntry *e, RLChannelState state)
{
	uint32		old = pg_atomic_read_u32(&e->state);
	uint32		new;

	Assert(e->procno >= 0);
	do
	{
		if ((old & STATE_MASK) == (uint32) state)
			return;
		new = (uint32) state | (old & LAPSED) |
			((old & STATE_MASK) == RL_CHANNEL_READY ? LAPSED : 0);
	} while (!pg_atomic_compare_exchange_u32(&e->state, &old, new));
	SetLatch(&GetPGProcByNumber(e->procno)->procLatch);
}

static void
wake_entry(WakeEntry *e)
{
	pg_atomic_write_u32(&e->woken, 1);
	SetLatch(&GetPGProcByNumber(e->procno)->procLatch);
}

static bool
same_channel(const WakeEntry *e, uint32 hash, const char *channel)
{
	return e->procno >= 0 && e->hash == hash && strcmp(e->channel, channel) == 0;
}

/*
 * Wakes the waiter of channel that has waited longest among those not woken
 * yet, preferring one that is subscribed (it sleeps; the others retry soon
 * anyway), other than skip. Needs the board's lock.
 */
static void
wake_longest_waiting(uint32 hash, const char *channel, const WakeEntry *skip)
{
	WakeEntry  *best = NULL;
	bool		best_ready = false;

	for (int i = 0; i < board->nentries; i++)
	{
		WakeEntry  *e = &board->entries[i];
		bool		ready;

		if (e == skip || !same_channel(e, hash, channel) ||
			pg_atomic_read_u32(&e->woken) != 0)
			continue;
		ready = pg_atomic_read_u32(&e->state) == RL_CHANNEL_READY;
		if (best == NULL || (ready && !best_ready) ||
			(ready == best_ready && e->seq < best->seq))
		{
			best = e;
			best_ready = ready;
		}
	}
	if (best != NULL)
		wake_entry(best);
}

static void
end_at_exit(int code, Datum arg)
{
	rl_wakeup_end(false);
}

/*
 * Puts this session's wait on n channels up on the board and asks the
 * listener to subscribe them. Returns false when the waiter must subscribe
 * by itself: no listener runs (not preloaded, or it is down), this session
 * has Redis settings of its own, the board is full, or a channel name is
 * too long for it.
 */
bool
rl_wakeup_begin(int n, const char *const *channels, bool wake_one)
{
	Latch	   *listener;
	int			found = 0;

	Assert(my_n == 0);
	if (board == NULL || MyProc == NULL || n > RL_MULTI_MAX)
		return false;
	for (int i = 0; i < n; i++)
		if (strlen(channels[i]) >= RL_CHANNEL_MAX)
			return false;
	if (!exit_registered)
	{
		before_shmem_exit(end_at_exit, (Datum) 0);
		exit_registered = true;
	}

	LWLockAcquire(board->lock, LW_EXCLUSIVE);
	listener = board->listener;
	if (listener != NULL && board->settings != settings_hash())
		listener = NULL;
	for (int i = 0; listener != NULL && i < board->nentries && found < n; i++)
		if (board->entries[i].procno < 0)
			my_entries[found++] = i;
	if (found < n)
		listener = NULL;
	for (int i = 0; listener != NULL && i < n; i++)
	{
		WakeEntry  *e = &board->entries[my_entries[i]];

		e->procno = RL_MY_PROCNO;
		e->seq = board->next_seq++;
		e->hash = channel_hash(channels[i]);
		e->wake_one = wake_one;
		strlcpy(e->channel, channels[i], RL_CHANNEL_MAX);
		pg_atomic_write_u32(&e->state, RL_CHANNEL_PENDING);
		pg_atomic_write_u32(&e->woken, 0);
		my_owed[i] = false;
	}
	LWLockRelease(board->lock);
	if (listener == NULL)
		return false;
	my_n = n;
	SetLatch(listener);
	return true;
}

/* The least ready of this session's entries: READY only if all are. */
static RLChannelState
my_state(void)
{
	RLChannelState result = RL_CHANNEL_READY;

	for (int i = 0; i < my_n; i++)
	{
		RLChannelState s = pg_atomic_read_u32(&board->entries[my_entries[i]].state) & STATE_MASK;

		if (s == RL_CHANNEL_FAILED)
			return s;
		if (s == RL_CHANNEL_PENDING)
			result = s;
	}
	return result;
}

/* Waits on our latch until then at most; false when then has come. */
static bool
wait_latch_until(TimestampTz until)
{
	long		ms = (long) ((until - GetCurrentTimestamp()) / 1000);

	if (until != DT_NOEND && ms <= 0)
		return false;
	(void) WaitLatch(MyLatch,
					 WL_LATCH_SET | WL_EXIT_ON_PM_DEATH |
					 (until == DT_NOEND ? 0 : WL_TIMEOUT),
					 until == DT_NOEND ? -1 : Min(Max(ms, 1), INT_MAX),
					 RL_WAIT_EVENT);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
	return true;
}

/*
 * Takes the lapses of this session's entries if every one is READY; false
 * if one is not. *lapsed is set when one was taken.
 */
static bool
take_lapses(bool *lapsed)
{
	for (int i = 0; i < my_n; i++)
	{
		pg_atomic_uint32 *word = &board->entries[my_entries[i]].state;
		uint32		old = pg_atomic_read_u32(word);

		for (;;)
		{
			if ((old & STATE_MASK) != RL_CHANNEL_READY)
				return false;
			if ((old & LAPSED) == 0)
				break;
			if (pg_atomic_compare_exchange_u32(word, &old, RL_CHANNEL_READY))
			{
				*lapsed = true;
				break;
			}
		}
	}
	return true;
}

/*
 * Waits until the listener has subscribed every channel of this wait: 2
 * then if a message may have been missed since the last 2 (the listener
 * took READY back meanwhile: the caller must try again now, as this return
 * took the mark), 1 if not, 0 if it has not by until, -1 if it cannot
 * (subscribe by yourself). After 0 or -1 the caller tries again once it
 * can hear, whatever was taken here.
 */
int
rl_wakeup_ready(TimestampTz until)
{
	bool		lapsed = false;

	for (;;)
	{
		if (my_state() == RL_CHANNEL_FAILED)
			return -1;
		if (take_lapses(&lapsed))
			return lapsed ? 2 : 1;
		if (!wait_latch_until(until))
			return 0;
	}
}

/*
 * Sleeps until a message wakes this session (1), until then (0), or until
 * the listener takes back its subscription (-1: wait for rl_wakeup_ready
 * and retry, a message may have been missed). A wake taken here is owed
 * until the next sleep: the attempt in between uses it.
 */
int
rl_wakeup_sleep(TimestampTz until)
{
	for (int i = 0; i < my_n; i++)
		my_owed[i] = false;
	for (;;)
	{
		bool		woken = false;

		for (int i = 0; i < my_n; i++)
			if (pg_atomic_exchange_u32(&board->entries[my_entries[i]].woken, 0) != 0)
				woken = my_owed[i] = true;
		if (woken)
			return 1;
		/* the exchanges above were barriers: a lapse shows from here on */
		for (int i = 0; i < my_n; i++)
			if (pg_atomic_read_u32(&board->entries[my_entries[i]].state) !=
				RL_CHANNEL_READY)
				return -1;
		if (!wait_latch_until(until))
			return 0;
	}
}

/*
 * Takes this session's wait off the board. One that ends without the lock
 * passes on any wake it got and did not use, so that the next waiter
 * retries in its place. Never throws.
 */
void
rl_wakeup_end(bool acquired)
{
	if (my_n == 0)
		return;
	LWLockAcquire(board->lock, LW_EXCLUSIVE);
	for (int i = 0; i < my_n; i++)
	{
		WakeEntry  *e = &board->entries[my_entries[i]];

		if (!acquired && e->wake_one &&
			(my_owed[i] || pg_atomic_read_u32(&e->woken) != 0))
			wake_longest_waiting(e->hash, e->channel, e);
		e->procno = -1;
	}
	LWLockRelease(board->lock);
	my_n = 0;
}

/* Sets who listens, and every waiter's state, waking them to see it. */
static void
set_listener(Latch *latch, RLChannelState state)
{
	LWLockAcquire(board->lock, LW_EXCLUSIVE);
	board->listener = latch;
	board->settings = settings_hash();
	for (int i = 0; i < board->nentries; i++)
	{
		WakeEntry  *e = &board->entries[i];

		if (e->procno >= 0)
			set_state(e, state);
	}
	LWLockRelease(board->lock);
}

/*
 * The listener takes over the board, or has new settings. Waiters put up
 * before may have missed messages: they retry once subscribed anew.
 */
void
rl_wakeup_attach(Latch *latch)
{
	set_listener(latch, RL_CHANNEL_PENDING);
}

/* The listener leaves: every waiter subscribes by itself. */
void
rl_wakeup_detach(void)
{
	set_listener(NULL, RL_CHANNEL_FAILED);
}

/*
 * The listener's look at the board: state(channel, arg) says where each
 * waiter's channel stands (and tells the listener which channels are
 * wanted); a waiter whose channel changed state is woken to see it.
 */
void
rl_wakeup_scan(RLChannelState (*state) (const char *channel, void *arg),
			   void *arg)
{
	LWLockAcquire(board->lock, LW_SHARED);
	for (int i = 0; i < board->nentries; i++)
	{
		WakeEntry  *e = &board->entries[i];
		RLChannelState s;

		if (e->procno < 0)
			continue;
		s = state(e->channel, arg);
		set_state(e, s);
	}
	LWLockRelease(board->lock);
}

/*
 * A message came on channel: wake its waiters, or with wake_one (an
 * exclusive unlock, "0") the one that has waited longest.
 */
void
rl_wakeup_message(const char *channel, bool wake_one)
{
	uint32		hash = channel_hash(channel);
	bool		one = false;

	LWLockAcquire(board->lock, LW_SHARED);
	for (int i = 0; i < board->nentries; i++)
	{
		WakeEntry  *e = &board->entries[i];

		if (!same_channel(e, hash, channel))
			continue;
		if (wake_one && e->wake_one)
			one = true;
		else
			wake_entry(e);
	}
	if (one)
		wake_longest_waiting(hash, channel, NULL);
	LWLockRelease(board->lock);
}
