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
extern const RedisScript rl_script_fair_acquire;
extern const RedisScript rl_script_force_release;
extern const RedisScript rl_script_raise_token;
extern const RedisScript rl_script_release;
extern const RedisScript rl_script_renew;
extern const RedisScript rl_script_status;

#endif							/* REDISLOCK_SCRIPTS_H */
