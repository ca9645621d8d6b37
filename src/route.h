/*
 * route.h
 *	  Where each Redis request goes: the one server (directly or behind
 *	  sentinels), the cluster node that serves its key, or every Redlock
 *	  master at once.
 *
 * src/route.h
 */
#ifndef REDISLOCK_ROUTE_H
#define REDISLOCK_ROUTE_H

#include "conn.h"

extern RLMode rl_mode(void);
extern const char *rl_mode_name(void);
extern const char *rl_publish_command(void);

extern bool rl_run(int n, const RLEval *evals, RLReply **replies);
extern bool rl_run_cmds(int n, const RLCommand *cmds, const char *const *keys,
						RLReply **replies);
extern bool rl_route_subscribe(const char *channel);

extern int	rl_redlock_size(void);
extern int	rl_redlock_quorum(void);
extern RLConn *rl_redlock_conn(int i);
extern int	rl_run_all(int n, const RLEval *evals, RLReply ***replies);
extern int	rl_run_all_cmds(int n, const RLCommand *cmds, RLReply ***replies);
extern bool rl_redlock_subscribe(const char *channel);
extern int	rl_redlock_wait_message(TimestampTz until);
extern void rl_redlock_unsubscribe(bool drop);

#endif							/* REDISLOCK_ROUTE_H */
