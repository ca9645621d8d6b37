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

/* How the replies of the Redlock masters fold into one (rl_run_agreed). */
typedef enum RLAgree
{
	RL_AGREE_ONE,				/* 1 when a majority replied 1, else 0 */
	RL_AGREE_MAX				/* the largest positive reply when a majority
								 * replied a positive integer, else 0 */
} RLAgree;

extern bool rl_run(int n, const RLEval *evals, RLReply **replies);
extern bool rl_run_agreed(int n, const RLEval *evals, RLAgree how,
						  RLReply **replies, int *votes);
extern bool rl_run_cmds_agreed(int n, const RLCommand *cmds,
							   const char *const *keys, RLAgree how,
							   RLReply **replies);
extern bool rl_run_cmds(int n, const RLCommand *cmds, const char *const *keys,
						RLReply **replies);
extern bool rl_run_then(const RLEval *e, const RLCommand *then,
						RLReply **replies);
extern int	rl_route_subscribable(int n, const char *const *channels);
extern bool rl_route_subscribe(int n, const char *const *channels);
extern bool rl_same_slot(int n, const char *const *keys);
extern bool rl_route_channel(const char *channel, RLNode *node, bool *sharded);
extern void rl_route_forget_map(void);
extern bool rl_route_node_in_map(const RLNode *node);
extern TimestampTz rl_route_wait_out(TimestampTz until);
extern int	rl_route_slot(const char *key);

/* fanout.c: the Redlock masters */
extern int	rl_redlock_size(void);
extern int	rl_redlock_quorum(void);
extern int	rl_redlock_heard_needed(int n);
extern RLConn *rl_redlock_conn(int i);
extern int	rl_run_all(int n, const RLEval *evals, RLReply ***replies);
extern bool rl_run_majority(int n, const RLEval *evals, RLReply ***replies);
extern bool rl_redlock_no_majority(void);
extern bool rl_last_run_complete(void);
extern bool rl_redlock_subscribe(const char *channel);
extern int	rl_redlock_wait_message(TimestampTz until);
extern void rl_redlock_unsubscribe(bool drop);
extern bool rl_redlock_run_agreed(int n, const RLEval *evals, RLAgree how,
								  RLReply **replies, int *votes);
extern bool rl_redlock_run_cmds_agreed(int n, const RLCommand *cmds,
									   RLAgree how, RLReply **replies);
extern bool rl_redlock_run_complete(void);

#endif							/* REDISLOCK_ROUTE_H */
