/*
 * scripts.c
 *	  Holds the Lua scripts of lua/ (turned into C strings with their SHA1 by
 *	  tools/lua2c.sh), so EVALSHA works without reading files at run time.
 *
 * src/scripts.c
 */
#include "postgres.h"

#include "scripts.h"

#include "lua_scripts.h"

const RedisScript *const rl_scripts[RL_NSCRIPTS] = {
	&rl_script_acquire,
	&rl_script_acquire_all,
	&rl_script_fair_acquire,
	&rl_script_force_release,
	&rl_script_latch,
	&rl_script_permit_acquire,
	&rl_script_permit_available,
	&rl_script_permit_release,
	&rl_script_permit_renew,
	&rl_script_plain_acquire,
	&rl_script_plain_acquire_all,
	&rl_script_plain_release,
	&rl_script_plain_renew,
	&rl_script_raise_token,
	&rl_script_read_acquire,
	&rl_script_read_release,
	&rl_script_read_renew,
	&rl_script_release,
	&rl_script_renew,
	&rl_script_sem_acquire,
	&rl_script_sem_available,
	&rl_script_sem_release,
	&rl_script_sem_renew,
	&rl_script_sem_set,
	&rl_script_status,
	&rl_script_wait_edge,
	&rl_script_wait_holders,
	&rl_script_write_acquire,
	&rl_script_write_release,
};
