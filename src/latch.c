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

/* Only what rl_check_redlock() needs to refuse latches with Redlock. */
static const RLPrimitive latch_primitive = {
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

/* Runs latch.lua's op on name; returns its integer reply. */
static int64
run_latch(const char *name, const char *op, int64 count)
{
	RLEval		e;
	RLReply    *r;

	rl_check_redlock(&latch_primitive);
	memset(&e, 0, sizeof(e));
	e.script = &rl_script_latch;
	e.nkeys = 1;
	e.keys[0] = name;
	e.nargs = 4;
	e.args[0] = op;
	e.args[1] = rl_int64_arg(count);
	e.args[2] = rl_publish_command();
	e.args[3] = latch_channel(name);
	r = rl_eval_one(&e, RL_OP_LATCH, name, NULL);
	rl_expect_reply(is_int(r), RL_OP_LATCH, name);
	return r->integer;
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

/* Waits until the count is zero; false when the wait ended first. */
bool
rl_latch_await(const char *name, int64 wait_ms)
{
	RLAcquireRequest req;
	RLWait		w;
	Attempt		a;
	const char *channel = latch_channel(name);

	latch_attempt((void *) name, &a);
	if (a.acquired || wait_ms == 0)
		return a.acquired;
	memset(&req, 0, sizeof(req));
	req.name = name;
	req.wait_ms = wait_ms;
	memset(&w, 0, sizeof(w));
	w.timeout_msg = psprintf("Redis count-down latch \"%s\" did not reach zero", name);
	w.nchannels = 1;
	w.channels = &channel;
	w.attempt = latch_attempt;
	w.arg = (void *) name;
	return rl_wait(&w, &req, &a);
}
