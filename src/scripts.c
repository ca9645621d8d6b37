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
