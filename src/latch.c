/*
 * latch.c
 *	  Count-down latches in Redisson's RCountDownLatch layout: set, count
 *	  down, read, and wait for zero on the engine's wait loop.
 *
 * A latch holds nothing, so nothing is recorded or released for it; a
 * waiter re-reads the count whenever its subscription is (re)established,
 * which is what catches a zero it had no message for.
 *
 * src/latch.c
 */
#include "postgres.h"

#include "lock_int.h"
#include "redislock.h"
#include "route.h"
#include "scripts.h"
#include "semaphore.h"

/*
 * A latch is waited for, never held: its entry names it in messages and
 * in redis_lock_waits, and refuses it with Redlock.
 */
const RLPrimitive rl_latch_primitive = {
	.label = "latch",
	.noun = "Redis count-down latch",
	.plural = "Redis count-down latches",
	.no_redlock = "Redisson has no Redlock latch, and a count kept on each master on its own would open at different times.",
};

/*
 * Redisson builds the channel by concatenation, not with prefixName: with
 * braces in the name its hash tag is not the key's.
 */
static char *
latch_channel(const char *name)
{
	return psprintf("redisson_countdownlatch__channel__{%s}", name);
}

/*
 * Publishes message on a latch channel that lies in another cluster slot
 * than the latch, after the script changed the count. The count has
 * changed whatever happens here, so a failure is only a WARNING (waiters
 * then see the count when they next look), never an ERROR that would make
 * the caller count down twice.
 */
static void
publish_apart(const char *name, const char *channel, int64 message)
{
	RLCommand	cmd;
	RLReply    *r = NULL;
	const char *publish = rl_publish_command();
	char	   *msg = rl_int64_arg(message);

	memset(&cmd, 0, sizeof(cmd));
	rl_set_arg(&cmd, publish, strlen(publish));
	rl_set_arg(&cmd, channel, strlen(channel));
	rl_set_arg(&cmd, msg, strlen(msg));
	if (!rl_run_cmds(1, &cmd, &channel, &r) || r->type == REDIS_REPLY_ERROR)
		ereport(WARNING,
				(errmsg("could not announce the new count of Redis count-down latch \"%s\"",
						name),
				 errdetail_internal("%s", r != NULL && r->type == REDIS_REPLY_ERROR ?
									r->str : rl_failure_text(&rl_cmd_conn)),
				 errhint("Waiters see the count when they next look at it.")));
}

/* Runs latch.lua's op on name; returns its result. */
static int64
run_latch(const char *name, const char *op, int64 count)
{
	RLEval		e;
	RLReply    *r;
	const char *keys[2] = {name, latch_channel(name)};
	bool		apart = rl_mode() == RL_MODE_CLUSTER && !rl_same_slot(2, keys);

	rl_check_redlock(&rl_latch_primitive);
	memset(&e, 0, sizeof(e));
	e.script = &rl_script_latch;
	e.nkeys = 1;
	e.keys[0] = name;
	e.nargs = 4;
	e.args[0] = op;
	e.args[1] = rl_int64_arg(count);
	e.args[2] = apart ? "" : rl_publish_command();
	e.args[3] = keys[1];
	if (strcmp(op, "count") != 0)
	{
		e.nkeys = 2;
		e.keys[1] = rl_call_key(name);
		e.nargs = 5;
		e.args[4] = rl_call_ttl_arg();
	}
	r = rl_eval_one(&e, RL_OP_LATCH, name, NULL);
	rl_expect_reply(is_array_of(r, 2, REDIS_REPLY_INTEGER), RL_OP_LATCH, name);
	if (apart && r->element[1]->integer >= 0)
		publish_apart(name, keys[1], r->element[1]->integer);
	return r->element[0]->integer;
}

bool
rl_latch_try_set(const char *name, int64 count)
{
	return run_latch(name, "try_set", count) == 1;
}

int64
rl_latch_count_down(const char *name)
{
	return run_latch(name, "count_down", 0);
}

int64
rl_latch_count(const char *name)
{
	return run_latch(name, "count", 0);
}

/* One look at the count: open at zero; only a message says when to look again. */
static void
latch_attempt(void *arg, Attempt *a)
{
	memset(a, 0, sizeof(*a));
	a->acquired = rl_latch_count((const char *) arg) == 0;
	a->pttl = -1;
}

/* One await of a latch: its request and its wait. */
typedef struct Await
{
	RLAcquireRequest req;
	RLWait		w;
} Await;

static bool
await_step(void *arg)
{
	Await	   *aw = arg;
	Attempt		a;

	latch_attempt((void *) aw->req.name, &a);
	if (a.acquired || aw->req.wait_ms == 0)
		return a.acquired;
	return rl_wait(&aw->w, &aw->req, &a);
}

/* Waits until the count is zero; false when the wait ended first. */
bool
rl_latch_await(const char *name, int64 wait_ms)
{
	Await		aw;
	RLAcquireRequest *req = &aw.req;
	RLWait	   *w = &aw.w;
	const char *channel = latch_channel(name);

	memset(req, 0, sizeof(*req));
	req->name = name;
	req->wait_ms = wait_ms;
	memset(w, 0, sizeof(*w));
	w->timeout_msg = psprintf("Redis count-down latch \"%s\" did not reach zero", name);
	w->wait_for.kind = RL_KIND_LATCH;
	w->wait_for.n = 1;
	w->wait_for.names = &name;
	w->nchannels = 1;
	w->channels = &channel;
	w->attempt = latch_attempt;
	w->arg = (void *) name;
	return rl_wait_call(req, w->timeout_msg, await_step, &aw);
}
