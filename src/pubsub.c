/*
 * pubsub.c
 *	  Subscriptions to unlock channels and the sleeps of lock waits on them,
 *	  on one connection or on several at once (one per Redlock master).
 *
 * src/pubsub.c
 */
#include "postgres.h"

#include <hiredis/hiredis.h>

#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/wait_event.h"

#include "compat.h"
#include "conn_int.h"
#include "redislock.h"

static bool subscribe_once(RLConn *c, int nchannels,
						   const char *const *channels, TimestampTz until);

/* Is r a pub/sub reply of this kind for one of c's channels? */
static bool
pubsub_reply_is(RLConn *c, const redisReply *r, const char *kind)
{
	if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
		r->element[0]->type != REDIS_REPLY_STRING ||
		r->element[1]->type != REDIS_REPLY_STRING ||
		strcmp(r->element[0]->str, kind) != 0)
		return false;
	for (int i = 0; i < c->nchannels; i++)
		if (strcmp(r->element[1]->str, c->channels[i]) == 0)
			return true;
	return false;
}

/*
 * Subscribes c to channels and returns once Redis confirmed them all: only
 * then may the caller retry the lock without risking a lost wake-up. Replies
 * left from an earlier wait (its UNSUBSCRIBE, late messages) are skipped.
 * The channel strings must stay valid until rl_unsubscribe.
 */
bool
rl_subscribe(RLConn *c, int nchannels, const char *const *channels)
{
	RLRetry		retry;

	rl_retry_init(&retry, c, rl_after_ms(rl_command_timeout));
	while (!subscribe_once(c, nchannels, channels, retry.until))
	{
		if (!rl_worth_retrying(c, &retry))
			return false;
	}
	return true;
}

/* rl_subscribe() on the current connection, or a new one if there is none. */
static bool
subscribe_once(RLConn *c, int nchannels, const char *const *channels,
			   TimestampTz until)
{
	RLCommand	cmd;
	int			confirmed = 0;

	c->failure = RLF_NONE;
	if (!rl_ensure_open(c, until))
		return false;
	memset(&cmd, 0, sizeof(cmd));
	if (c->sharded)
		rl_set_arg(&cmd, "SSUBSCRIBE", 10);
	else
		rl_set_arg(&cmd, "SUBSCRIBE", 9);
	for (int i = 0; i < nchannels; i++)
		rl_set_arg(&cmd, channels[i], strlen(channels[i]));
	if (!rl_queue_commands(c, 1, &cmd))
	{
		rl_disconnect(c);
		return false;
	}
	c->in_flight = true;
	c->subscribed = true;
	c->nchannels = nchannels;
	c->channels = channels;
	if (!rl_flush(c, until))
	{
		rl_disconnect(c);
		return false;
	}
	while (confirmed < nchannels)
	{
		redisReply *r;

		if (!rl_read_reply(c, until, true, &r))
		{
			rl_disconnect(c);
			return false;
		}
		if (r->type == REDIS_REPLY_ERROR)
		{
			/*
			 * MOVED: a cluster node that does not serve the channel's slot, a
			 * failure of the cluster, which the message names; the node goes
			 * to the detail.
			 */
			if (strncmp(r->str, "MOVED", 5) == 0)
				rl_fail_on(c, RLF_CLUSTER, rl_server_desc(),
						   "Redis server \"%s\" refused to subscribe: %s",
						   rl_conn_desc(c), r->str);
			else
			{
				rl_fail(c, strncmp(r->str, "NOPERM", 6) == 0 ? RLF_DENIED : RLF_PROTOCOL,
						"The server refused to subscribe: %s", r->str);
				c->errhint = rl_refusal_hint(r->str);
			}
			freeReplyObject(r);
			rl_disconnect(c);
			return false;
		}
		if (pubsub_reply_is(c, r, c->sharded ? "ssubscribe" : "subscribe"))
			confirmed++;
		freeReplyObject(r);
	}
	return true;
}

/*
 * What a pub/sub reply on c means for a waiter: 1 a message on one of its
 * channels, -1 the server dropped the subscription (a sharded channel whose
 * slot moved to another node), 0 anything else.
 */
static int
pubsub_event(RLConn *c, const redisReply *r)
{
	if (pubsub_reply_is(c, r, c->sharded ? "smessage" : "message"))
		return 1;
	if (c->sharded && pubsub_reply_is(c, r, "sunsubscribe"))
		return -1;
	return 0;
}

/*
 * Sleeps until a message arrives on one of the subscribed channels or until
 * the given time. Returns 1 for a message, 0 when the time came, -1 when the
 * connection failed or the subscription was dropped (it is then closed;
 * subscribe again).
 */
int
rl_wait_message(RLConn *c, TimestampTz until)
{
	for (;;)
	{
		redisReply *r;
		int			event;

		if (!rl_read_reply(c, until, false, &r))
		{
			if (c->failure == RLF_NONE)
				return 0;
			rl_disconnect(c);
			return -1;
		}
		event = pubsub_event(c, r);
		freeReplyObject(r);
		if (event < 0)
			rl_disconnect(c);
		if (event != 0)
			return event;
	}
}

/* Takes in what c has received; 1 for a message, -1 when c broke. */
static int
drain_messages(RLConn *c, bool read)
{
	int			result = 0;

	if (read && rl_sock_read(c->sock) == RL_IO_FAILED)
		result = -1;
	while (result == 0)
	{
		void	   *r = NULL;

		if (!rl_sock_reply(c->sock, &r))
			result = -1;
		else if (r == NULL)
			break;
		else
		{
			result = pubsub_event(c, r);
			freeReplyObject(r);
		}
	}
	if (result < 0)
		rl_disconnect(c);
	return result;
}

/*
 * rl_wait_message() over several subscribed connections (one per Redlock
 * master): returns 1 on a message from any, or when one of them dropped
 * while we slept (a release may have been published where we no longer
 * listen: the caller subscribes anew, counts what it hears again and tries),
 * 0 when the time came, -1 when none was subscribed to begin with.
 */
int
rl_wait_message_any(int nconns, RLConn **conns, TimestampTz until)
{
	WaitEvent  *events = palloc(sizeof(WaitEvent) * (nconns + 2));
	int			first_live = 0;

	for (int i = 0; i < nconns; i++)
		first_live += conns[i]->subscribed ? 1 : 0;
	for (;;)
	{
		WaitEventSet *wes;
		int			nlive = 0;
		int			nev;
		int			result = 0;
		long		timeout;

		for (int i = 0; i < nconns && result != 1; i++)
			if (conns[i]->subscribed && drain_messages(conns[i], false) == 1)
				result = 1;
		if (result == 1)
			return 1;
		for (int i = 0; i < nconns; i++)
			nlive += conns[i]->subscribed ? 1 : 0;
		if (nlive < first_live)
			return 1;
		if (nlive == 0)
			return -1;
		timeout = rl_ms_until(until);
		if (timeout == 0)
			return 0;

		wes = RL_CreateWaitEventSet(CurrentMemoryContext, nlive + 2);
		AddWaitEventToSet(wes, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
		/* a single-user backend has no postmaster to watch */
		if (IsUnderPostmaster)
			AddWaitEventToSet(wes, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
		for (int i = 0; i < nconns; i++)
			if (conns[i]->subscribed)
				AddWaitEventToSet(wes, rl_sock_read_wants(conns[i]->sock),
								  rl_sock_fd(conns[i]->sock), NULL, conns[i]);
		nev = WaitEventSetWait(wes, timeout, events, nlive + 2, RL_WAIT_EVENT);
		FreeWaitEventSet(wes);
		for (int e = 0; e < nev; e++)
		{
			if (events[e].events & WL_LATCH_SET)
			{
				ResetLatch(MyLatch);
				CHECK_FOR_INTERRUPTS();
			}
			else if (((RLConn *) events[e].user_data)->subscribed &&
					 drain_messages(events[e].user_data, true) == 1)
				result = 1;
		}
		if (result == 1)
			return 1;
	}
}

/*
 * Ends the subscription without waiting for Redis to confirm: the next
 * rl_subscribe skips the confirmation and anything that arrived meanwhile.
 */
void
rl_unsubscribe(RLConn *c)
{
	RLCommand	cmd;

	if (c->sock == NULL || !c->subscribed)
		return;
	memset(&cmd, 0, sizeof(cmd));
	if (c->sharded)
		rl_set_arg(&cmd, "SUNSUBSCRIBE", 12);
	else
		rl_set_arg(&cmd, "UNSUBSCRIBE", 11);
	if (!rl_queue_commands(c, 1, &cmd) || rl_sock_flush(c->sock) != RL_IO_DONE)
	{
		rl_disconnect(c);
		return;
	}
	c->subscribed = false;
	c->in_flight = false;
	c->nchannels = 0;
	c->channels = NULL;
}
