/*
 * scripts.h
 *	  The Lua scripts of lua/, compiled into the library at build time.
 *
 * src/scripts.h
 */
#ifndef REDISLOCK_SCRIPTS_H
#define REDISLOCK_SCRIPTS_H

#include "conn.h"

extern const RedisScript rl_script_acquire;
extern const RedisScript rl_script_acquire_all;
extern const RedisScript rl_script_fair_acquire;
extern const RedisScript rl_script_force_release;
extern const RedisScript rl_script_latch;
extern const RedisScript rl_script_permit_acquire;
extern const RedisScript rl_script_permit_available;
extern const RedisScript rl_script_permit_release;
extern const RedisScript rl_script_permit_renew;
extern const RedisScript rl_script_plain_acquire;
extern const RedisScript rl_script_plain_acquire_all;
extern const RedisScript rl_script_plain_release;
extern const RedisScript rl_script_plain_renew;
extern const RedisScript rl_script_raise_token;
extern const RedisScript rl_script_read_acquire;
extern const RedisScript rl_script_read_release;
extern const RedisScript rl_script_read_renew;
extern const RedisScript rl_script_release;
extern const RedisScript rl_script_renew;
extern const RedisScript rl_script_sem_acquire;
extern const RedisScript rl_script_sem_available;
extern const RedisScript rl_script_sem_release;
extern const RedisScript rl_script_sem_renew;
extern const RedisScript rl_script_sem_set;
extern const RedisScript rl_script_status;
extern const RedisScript rl_script_wait_edge;
extern const RedisScript rl_script_wait_holders;
extern const RedisScript rl_script_write_acquire;
extern const RedisScript rl_script_write_release;

/* Every script above, for connections that load them all when they open. */
#define RL_NSCRIPTS 29
extern const RedisScript *const rl_scripts[RL_NSCRIPTS];

#endif							/* REDISLOCK_SCRIPTS_H */
