/*
 * pipeline.c
 *	  Pipelines on several connections at once (Redlock masters, cluster
 *	  nodes), a new connection opened and set up in the same flight.
 *
 * src/pipeline.c
 */
#include "postgres.h"

#include <hiredis/hiredis.h>

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "compat.h"
#include "conn_int.h"
#include "redislock.h"

/* Late replies a connection may owe before it is reset instead (see flight_abandon). */
#define RL_MAX_OWED 256

/* How far one batch of rl_exec_parallel() has got. */
typedef enum FlightState
{
	FLIGHT_CONNECTING,
	FLIGHT_HANDSHAKE,			/* TLS only */
	FLIGHT_WRITING,
	FLIGHT_READING,
	FLIGHT_DONE
} FlightState;

typedef struct Flight
{
	RLBatch    *b;
	FlightState state;
	RLSetup		setup;			/* n = 0 on a connection already set up */
	RLReply    *setup_replies[RL_SETUP_MAX];
	int			got;
	char		db[16];
	char		stale[24];
} Flight;

static void flight_step(Flight *f);

/* Still before the first request byte: bounded by connect_timeout. */
static bool
connecting(const Flight *f)
{
	return f->state == FLIGHT_CONNECTING || f->state == FLIGHT_HANDSHAKE;
}

static void
flight_fail(Flight *f)
{
	rl_disconnect(f->b->conn);
	f->state = FLIGHT_DONE;
}

/*
 * Queues a batch on its connection, opening it first if needed: a new
 * connection carries its setup commands in the same pipeline, so it costs
 * the connect and one round trip, as a reused one costs one round trip.
 */
static void
flight_start(Flight *f, RLBatch *b, TimestampTz connect_until)
{
	RLConn	   *c = b->conn;
	RLCommand	setup[RL_SETUP_MAX];

	Assert(c->pinned);
	memset(f, 0, sizeof(*f));
	f->b = b;
	b->ok = false;
	c->failure = RLF_NONE;
	f->state = FLIGHT_WRITING;
	if (!rl_healthy(c))
	{
		rl_disconnect(c);
		rl_load_server();
		if (!rl_server_ok)
		{
			rl_fail_config(c);
			f->state = FLIGHT_DONE;
			return;
		}
		c->generation = rl_settings_generation;
		if (!rl_open_socket(c, &c->node, NULL, connect_until) ||
			!rl_queue_commands(c, rl_build_setup(c, setup, f->db, f->stale, &f->setup), setup))
		{
			flight_fail(f);
			return;
		}
		f->state = FLIGHT_CONNECTING;
	}
	if (!rl_queue_commands(c, b->ncmds, b->cmds))
	{
		flight_fail(f);
		return;
	}
	c->in_flight = true;
	if (f->state == FLIGHT_WRITING)
		flight_step(f);
}

/* Takes in the replies that arrived for f; false when the stream broke. */
static bool
flight_read(Flight *f)
{
	RLConn	   *c = f->b->conn;

	if (rl_sock_read(c->sock) == RL_IO_FAILED)
		return rl_stream_failed(c);
	for (;;)
	{
		void	   *r = NULL;

		if (!rl_sock_reply(c->sock, &r))
			return rl_invalid_reply(c);
		if (r == NULL)
			return true;
		if (c->owed > 0)
		{
			c->owed--;
			freeReplyObject(r);
			continue;
		}
		if (f->got < f->setup.n)
			f->setup_replies[f->got] = rl_copy_reply(r);
		else
			f->b->replies[f->got - f->setup.n] = rl_copy_reply(r);
		freeReplyObject(r);
		if (++f->got < f->setup.n + f->b->ncmds)
			continue;
		c->in_flight = false;
		if (f->setup.n > 0 && !rl_check_setup(c, &f->setup, f->setup_replies))
			return false;
		f->b->ok = true;
		f->state = FLIGHT_DONE;
		return true;
	}
}

/* Moves f on after its socket became ready for what it waited for. */
static void
flight_step(Flight *f)
{
	RLConn	   *c = f->b->conn;

	switch (f->state)
	{
		case FLIGHT_CONNECTING:
			if (!rl_connected(c))
			{
				flight_fail(f);
				return;
			}
			rl_redis_reached = true;	/* the commands follow the setup */
			f->state = FLIGHT_HANDSHAKE;
			pg_fallthrough;
		case FLIGHT_HANDSHAKE:
			switch (rl_sock_handshake(c->sock))
			{
				case RL_IO_DONE:
					break;
				case RL_IO_WAIT:
					return;
				case RL_IO_FAILED:
					rl_fail(c, RLF_CONNECT, "%s", rl_sock_error(c->sock));
					c->errhint = rl_sock_hint(c->sock);
					flight_fail(f);
					return;
			}
			f->state = FLIGHT_WRITING;
			pg_fallthrough;
		case FLIGHT_WRITING:
			c->maybe_delivered = true;
			switch (rl_sock_flush(c->sock))
			{
				case RL_IO_DONE:
					f->state = FLIGHT_READING;
					break;
				case RL_IO_WAIT:
					break;
				case RL_IO_FAILED:
					rl_stream_failed(c);
					flight_fail(f);
					break;
			}
			return;
		case FLIGHT_READING:
			if (!flight_read(f))
				flight_fail(f);
			return;
		case FLIGHT_DONE:
			return;
	}
}

/*
 * Leaves a straggler's requests to finish on their own: a set-up connection
 * stays open and in sync, its late replies owed and skipped on the next use.
 * Requests on one connection run in order, so a release sent next still
 * applies after a late acquisition; resetting the connection instead would
 * drop both. False when the connection cannot be kept (still connecting or
 * in setup, refused the setup, or too far behind).
 */
static bool
flight_abandon(Flight *f)
{
	RLConn	   *c = f->b->conn;
	int			left = f->setup.n + f->b->ncmds - f->got;

	if (connecting(f) || f->got < f->setup.n ||
		c->owed + left > RL_MAX_OWED)
		return false;
	if (f->setup.n > 0 && !rl_check_setup(c, &f->setup, f->setup_replies))
		return false;
	c->owed += left;
	c->in_flight = false;
	f->state = FLIGHT_DONE;
	return true;
}

/*
 * Fails the flights whose time is up; connecting ones by connect_until.
 * With straggling, until was brought forward because enough others had
 * answered; those keep their connection (flight_abandon).
 */
static void
flights_expire(Flight *flights, int n, TimestampTz until, TimestampTz connect_until,
			   bool straggling)
{
	TimestampTz now = GetCurrentTimestamp();

	for (int i = 0; i < n; i++)
	{
		RLConn	   *c = flights[i].b->conn;

		if (flights[i].state == FLIGHT_DONE)
			continue;
		if (flights[i].state == FLIGHT_CONNECTING && now >= connect_until)
			rl_fail(c, RLF_CONNECT,
					"No answer within redislock.connect_timeout (%d ms).", rl_connect_timeout);
		else if (flights[i].state == FLIGHT_HANDSHAKE && now >= connect_until)
		{
			rl_fail(c, RLF_CONNECT,
					"The TLS handshake did not finish within redislock.connect_timeout (%d ms).", rl_connect_timeout);
			c->errhint = rl_handshake_hint;
		}
		else if (now >= until && straggling)
		{
			rl_fail(c, RLF_TIMEOUT,
					"No answer while a majority of the others answered.");
			if (flight_abandon(&flights[i]))
				continue;
		}
		else if (now >= until)
			rl_fail(c, RLF_TIMEOUT,
					"No answer within %d ms.", rl_command_timeout);
		else
			continue;
		flight_fail(&flights[i]);
	}
}

/* The socket event f waits for: TLS may need either in any state. */
static uint32
flight_events(const Flight *f)
{
	switch (f->state)
	{
		case FLIGHT_HANDSHAKE:
		case FLIGHT_WRITING:
			return rl_sock_wants(f->b->conn->sock);
		case FLIGHT_READING:
			return rl_sock_read_wants(f->b->conn->sock);
		default:
			return WL_SOCKET_WRITEABLE;
	}
}

/*
 * Drives all flights at once until each is done or out of time. A flight
 * that needs other socket events has its entry in the wait set changed; the
 * set is rebuilt only when a finished flight's socket fires (say the server
 * closed it), as a wait set cannot drop a socket. Interrupts are served
 * with no wait set open, so that an ERROR they raise leaks nothing.
 */
static void
flights_wait(Flight *flights, int n, TimestampTz until, TimestampTz connect_until,
			 int enough)
{
	WaitEvent  *events = palloc(sizeof(WaitEvent) * (n + 2));
	int		   *pos = palloc(sizeof(int) * Max(n, 1));
	TimestampTz start = GetCurrentTimestamp();
	bool		straggling = false;

	for (;;)
	{
		WaitEventSet *wes;
		TimestampTz deadline = until;
		int			nactive = 0;
		bool		rebuild = false;
		bool		interrupted = false;

		flights_expire(flights, n, until, connect_until, straggling);
		for (int i = 0; i < n; i++)
			nactive += flights[i].state != FLIGHT_DONE ? 1 : 0;
		if (nactive == 0)
			return;

		wes = RL_CreateWaitEventSet(CurrentMemoryContext, nactive + 2);
		AddWaitEventToSet(wes, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
		/* a single-user backend has no postmaster to watch */
		if (IsUnderPostmaster)
			AddWaitEventToSet(wes, WL_POSTMASTER_DEATH, PGINVALID_SOCKET, NULL, NULL);
		for (int i = 0; i < n; i++)
			if (flights[i].state != FLIGHT_DONE)
				pos[i] = AddWaitEventToSet(wes, flight_events(&flights[i]),
										   rl_sock_fd(flights[i].b->conn->sock), NULL, &flights[i]);
		while (!rebuild && !interrupted)
		{
			long		timeout;
			int			nev;
			bool		active = false;
			int			nok = 0;

			for (int i = 0; i < n; i++)
			{
				active |= flights[i].state != FLIGHT_DONE;
				nok += flights[i].b->ok ? 1 : 0;
				if (connecting(&flights[i]))
					deadline = Min(deadline, connect_until);
			}

			/*
			 * Once enough have answered, the others get as long again as
			 * those took (at least 5 ms): a silent server costs little more
			 * than a slow answer, not the whole command timeout.
			 */
			if (active && !straggling && nok >= enough)
			{
				TimestampTz now = GetCurrentTimestamp();

				straggling = true;
				until = Min(until, now + Max(now - start, 2500) * 2);
				connect_until = Min(connect_until, until);
				deadline = Min(deadline, until);
			}
			timeout = rl_ms_until(deadline);
			if (!active || timeout == 0)
				break;
			nev = WaitEventSetWait(wes, timeout, events, nactive + 2, RL_WAIT_EVENT);
			for (int e = 0; e < nev; e++)
			{
				Flight	   *f = events[e].user_data;

				if (events[e].events & WL_LATCH_SET)
				{
					ResetLatch(MyLatch);
					interrupted = true;
				}
				else if (events[e].events & WL_POSTMASTER_DEATH)
				{
					FreeWaitEventSet(wes);
					if (!proc_exit_inprogress)
						proc_exit(1);
					for (int i = 0; i < n; i++)
						if (flights[i].state != FLIGHT_DONE)
						{
							rl_fail(flights[i].b->conn, RLF_IO, "The postmaster died.");
							flight_fail(&flights[i]);
						}
					return;
				}
				else if (f->state == FLIGHT_DONE)
					rebuild = true;
				else
				{
					uint32		before = flight_events(f);

					flight_step(f);
					if (f->state != FLIGHT_DONE && flight_events(f) != before)
						ModifyWaitEvent(wes, pos[f - flights], flight_events(f), NULL);
				}
			}
		}
		FreeWaitEventSet(wes);
		if (interrupted)
			CHECK_FOR_INTERRUPTS();
	}
}

/*
 * Runs each batch as one pipeline on its own connection (all pinned to a
 * node), all at the same time: the whole costs about one round trip, not
 * one per node, and a dead or silent node delays none of the others beyond
 * the timeouts, and all are done by until. Once enough batches succeeded
 * the rest get only a short grace. A batch on a reused connection that Redis had closed is
 * sent once more on a new one. Returns how many batches succeeded; a failed
 * one has ok = false and its connection says why.
 */
int
rl_exec_parallel(int nbatches, RLBatch *batches, TimestampTz until, int enough)
{
	Flight	   *flights = palloc(sizeof(Flight) * Max(nbatches, 1));
	bool	   *reused = palloc(sizeof(bool) * Max(nbatches, 1));
	int			nok = 0;
	TimestampTz connect_until = Min(until, rl_after_ms(rl_connect_timeout));

	for (int i = 0; i < nbatches; i++)
	{
		reused[i] = rl_healthy(batches[i].conn);
		batches[i].conn->maybe_delivered = false;
		flight_start(&flights[i], &batches[i], connect_until);
	}
	flights_wait(flights, nbatches, until, connect_until, enough);
	connect_until = Min(until, rl_after_ms(rl_connect_timeout));
	for (int i = 0; i < nbatches; i++)
	{
		if (!batches[i].ok && reused[i] && batches[i].conn->failure == RLF_IO)
			flight_start(&flights[i], &batches[i], connect_until);
		else
			flights[i].state = FLIGHT_DONE;
	}
	flights_wait(flights, nbatches, until, connect_until, enough);
	for (int i = 0; i < nbatches; i++)
		nok += batches[i].ok ? 1 : 0;
	return nok;
}
