/*
 * resolve.c
 *	  Host names of Redis servers looked up without blocking the process.
 *
 * A blocking getaddrinfo() host names with a blocking getaddrinfo(): a slow DNS
 * server would stretch a connect far beyond redislock.connect_timeout, deaf
 * to cancel and termination, and stall the watchdog. Here a name is
 * resolved by glibc's getaddrinfo_a() in its helper thread (which blocks
 * every signal) while this process waits on its latch. Numeric addresses
 * need no lookup. Nothing is cached: each new connection looks
 * the name up again, so DNS changes are followed.
 *
 * A lookup given up on (timeout, cancel) cannot be stopped once the helper
 * thread runs it: it is left to finish and freed by a later call.
 *
 * src/resolve.c
 */
#include "postgres.h"

#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "compat.h"
#include "redislock.h"
#include "resolve.h"

/* How often a lookup in progress is looked at: it has no fd to wait on. */
#define LOOKUP_POLL_MS 5

/*
 * One getaddrinfo_a() request. malloc'd, not palloc'd: the helper thread
 * may still write to it after any memory context is gone.
 */
struct RLLookup
{
	struct gaicb cb;
	struct addrinfo hints;
	char		host[256];
	char		port[8];
	struct RLLookup *next;
};

/* Lookups given up on while the helper thread was running them. */
static RLLookup *abandoned = NULL;

void
rl_lookup_free(RLLookup *l)
{
	if (l->cb.ar_result != NULL)
		freeaddrinfo(l->cb.ar_result);
	free(l);
}

/* Frees the abandoned lookups that have finished since. */
static void
reap_abandoned(void)
{
	RLLookup	  **p = &abandoned;

	while (*p != NULL)
	{
		RLLookup	   *l = *p;

		if (gai_error(&l->cb) == EAI_INPROGRESS)
			p = &l->next;
		else
		{
			*p = l->next;
			rl_lookup_free(l);
		}
	}
}

/* Stops waiting for l: cancelled if still queued, else left to finish. */
static void
abandon(RLLookup *l)
{
	if (gai_cancel(&l->cb) == EAI_NOTCANCELED)
	{
		l->next = abandoned;
		abandoned = l;
	}
	else
		rl_lookup_free(l);
}

static long
ms_left(TimestampTz until)
{
	TimestampTz now = GetCurrentTimestamp();

	return until <= now ? 0 : (long) Min((until - now + 999) / 1000, (TimestampTz) INT_MAX);
}

/*
 * Waits until l is done or until has come, serving interrupts; an ERROR
 * they raise abandons l on its way out. True when l is done.
 */
static bool
wait_lookup(RLLookup *l, TimestampTz until)
{
	bool		done;

	PG_TRY();
	{
		while (gai_error(&l->cb) == EAI_INPROGRESS)
		{
			long		timeout = ms_left(until);
			int			rc;

			if (timeout == 0)
				break;
			rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_POSTMASTER_DEATH,
						   Min(timeout, LOOKUP_POLL_MS), RL_WAIT_EVENT);
			ResetLatch(MyLatch);
			if (rc & WL_POSTMASTER_DEATH)
			{
				if (!proc_exit_inprogress)
					proc_exit(1);
				break;
			}
			CHECK_FOR_INTERRUPTS();
		}
		done = gai_error(&l->cb) != EAI_INPROGRESS;
	}
	PG_CATCH();
	{
		abandon(l);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return done;
}

/*
 * The addresses of host:port, by until at the latest, in an RLLookup to free
 * with rl_lookup_free(); NULL with problem set on failure.
 */
RLLookup *
rl_resolve(const char *host, int port, TimestampTz until, char *problem, size_t size)
{
	RLLookup	   *l = calloc(1, sizeof(RLLookup));
	struct gaicb *list[1];
	int			rc;

	if (l == NULL)
	{
		snprintf(problem, size, "out of memory");
		return NULL;
	}
	strlcpy(l->host, host, sizeof(l->host));
	snprintf(l->port, sizeof(l->port), "%d", port);
	l->hints.ai_family = AF_UNSPEC;
	l->hints.ai_socktype = SOCK_STREAM;
	l->hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
	if (getaddrinfo(l->host, l->port, &l->hints, &l->cb.ar_result) == 0)
		return l;
	l->cb.ar_result = NULL;
	l->hints.ai_flags = AI_NUMERICSERV;
	l->cb.ar_name = l->host;
	l->cb.ar_service = l->port;
	l->cb.ar_request = &l->hints;
	list[0] = &l->cb;
	reap_abandoned();
	rc = getaddrinfo_a(GAI_NOWAIT, list, 1, NULL);
	if (rc != 0)
	{
		snprintf(problem, size, "could not resolve host name \"%s\": %s",
				 host, gai_strerror(rc));
		free(l);
		return NULL;
	}
	if (!wait_lookup(l, until))
	{
		abandon(l);
		snprintf(problem, size,
				 "the DNS lookup of \"%s\" did not finish within redislock.connect_timeout (%d ms)",
				 host, rl_connect_timeout);
		return NULL;
	}
	rc = gai_error(&l->cb);
	if (rc != 0)
	{
		snprintf(problem, size, "could not resolve host name \"%s\": %s",
				 host, gai_strerror(rc));
		rl_lookup_free(l);
		return NULL;
	}
	return l;
}

const struct addrinfo *
rl_lookup_addrs(const RLLookup *l)
{
	return l->cb.ar_result;
}
