# redislock: PGXS build. Links Debian's libhiredis and OpenSSL, and compiles lua/*.lua into
# a generated header so the scripts ship inside the library.

MODULE_big = redislock
OBJS = \
	src/config.o \
	src/conn.o \
	src/fanout.o \
	src/lock.o \
	src/pipeline.o \
	src/pubsub.o \
	src/redislock.o \
	src/redlock.o \
	src/registry.o \
	src/resolve.o \
	src/route.o \
	src/scripts.o \
	src/secrets.o \
	src/sqlapi.o \
	src/status.o \
	src/tls.o \
	src/transport.o \
	src/views.o \
	src/worker.o \
	src/xact.o

EXTENSION = redislock
DATA = sql/redislock--1.0.sql
PGFILEDESC = "redislock - Redis-backed distributed locks"

REGRESS = setup api scope badinput views

PG_CPPFLAGS = -I$(srcdir)/src
# -lanl: getaddrinfo_a, in libc itself since glibc 2.34; OpenSSL for TLS
SHLIB_LINK = -lhiredis -lanl -lssl -lcrypto
EXTRA_CLEAN = src/lua_scripts.h

LUA = $(sort $(wildcard lua/*.lua))

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS does not track headers: rebuild every object when one changes.
$(OBJS): $(wildcard src/*.h)

src/scripts.o: src/lua_scripts.h

src/lua_scripts.h: $(LUA) tools/lua2c.sh
	sh tools/lua2c.sh $(LUA) > $@.tmp && mv $@.tmp $@

# Used by test/run-all.sh, which runs pg_regress itself against its own Redis.
regress-list:
	@echo $(REGRESS)

.PHONY: regress-list
