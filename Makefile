# redislock: PGXS build. Links Debian's libhiredis and OpenSSL, and compiles lua/*.lua into
# a generated header so the scripts ship inside the library.

MODULE_big = redislock
OBJS = \
	src/config.o \
	src/conn.o \
	src/deadlock.o \
	src/fanout.o \
	src/holds.o \
	src/lock.o \
	src/multilock.o \
	src/pipeline.o \
	src/pubsub.o \
	src/redislock.o \
	src/redlock.o \
	src/registry.o \
	src/report.o \
	src/resolve.o \
	src/route.o \
	src/rwlock.o \
	src/scripts.o \
	src/secrets.o \
	src/sqlapi.o \
	src/status.o \
	src/tls.o \
	src/transport.o \
	src/views.o \
	src/wait.o \
	src/worker.o \
	src/xact.o

EXTENSION = redislock
EXTVERSION = $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" $(EXTENSION).control)
# sql/redislock.sql is the newest version's script; the full scripts of
# older versions and the upgrade scripts are installed as they are, so that
# every released version can be installed and updated (as pgvector does)
DATA = sql/redislock--1.0.sql $(wildcard sql/redislock--*--*.sql)
DATA_built = sql/$(EXTENSION)--$(EXTVERSION).sql
PGFILEDESC = "redislock - Redis-backed distributed locks"

REGRESS = setup api scope badinput views rwlock

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

sql/$(EXTENSION)--$(EXTVERSION).sql: sql/$(EXTENSION).sql
	cp $< $@

src/lua_scripts.h: $(LUA) tools/lua2c.sh
	sh tools/lua2c.sh $(LUA) > $@.tmp && mv $@.tmp $@

# Used by test/run-all.sh, which runs pg_regress itself against its own Redis.
regress-list:
	@echo $(REGRESS)

.PHONY: regress-list
