# redislock: PGXS build. Links Debian's libhiredis and OpenSSL, and compiles lua/*.lua into
# a generated header so the scripts ship inside the library.
#
#   make && sudo make install     build and install (PG_CONFIG=... for another server)
#   make installcheck             pg_regress (test/sql, test/expected) on a temporary
#                                 instance with redislock preloaded, against a
#                                 redis-server started for the run (see test/installcheck.sh);
#                                 REDISLOCK_TEST_URL=redis://host:port uses that Redis instead
#   make dist-volume              dist-volume/redislock/{lib,share/extension}: the
#                                 library, with hiredis linked in statically, and the
#                                 control and SQL files, for extension_control_path and
#                                 dynamic_library_path (PostgreSQL 18+, image volumes;
#                                 docs/install.md)
#
# Builds in a separate directory too (make -f ../Makefile VPATH=..), as
# Debian's pg_buildext does: every source path goes through $(srcdir).

MODULE_big = redislock
OBJS = \
	src/channel.o \
	src/cleanup.o \
	src/config.o \
	src/conn.o \
	src/conn_io.o \
	src/deadlock.o \
	src/fanout.o \
	src/holds.o \
	src/latch.o \
	src/listener.o \
	src/lock.o \
	src/multilock.o \
	src/onlost.o \
	src/pipeline.o \
	src/plain.o \
	src/pubsub.o \
	src/redislock.o \
	src/redlock.o \
	src/registry.o \
	src/registry_waits.o \
	src/release.o \
	src/master_switch.o \
	src/report.o \
	src/resolve.o \
	src/route.o \
	src/rwlock.o \
	src/scripts.o \
	src/secrets.o \
	src/semaphore.o \
	src/settle.o \
	src/sqlapi.o \
	src/sqlsync.o \
	src/status.o \
	src/tls.o \
	src/transport.o \
	src/views.o \
	src/wakeup.o \
	src/wait.o \
	src/worker.o \
	src/xact.o

EXTENSION = redislock
EXTVERSION = $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" $(srcdir)/$(EXTENSION).control)
# sql/redislock.sql is the newest version's script; the full scripts of
# older versions and the upgrade scripts are installed as they are, so that
# every released version can be installed and updated (as pgvector does)
DATA = sql/redislock--1.0.sql sql/redislock--1.1.sql $(patsubst $(srcdir)/%,%,$(wildcard $(srcdir)/sql/redislock--*--*.sql))
DATA_built = sql/$(EXTENSION)--$(EXTVERSION).sql
PGFILEDESC = "redislock - Redis-backed distributed locks"

# pg_regress tests: test/sql/NAME.sql, expected output test/expected/NAME.out.
# "make installcheck" runs them on a temporary instance (as pg_cron's do) with
# test/regress.conf (shared_preload_libraries) and a Redis of its own; it needs
# the extension installed and a user other than root (initdb).
REGRESS = setup api scope badinput views rwlock semaphore pgwording
REGRESS_OPTS = --inputdir=$(srcdir)/test --temp-instance=./tmp_check \
	--temp-config=$(srcdir)/test/regress.conf --encoding=UTF8 --no-locale
# the installcheck below starts the Redis around pg_regress
NO_INSTALLCHECK = 1

# -Isrc: the generated src/lua_scripts.h, in the build directory
PG_CPPFLAGS = -Isrc -I$(srcdir)/src
# -lanl: getaddrinfo_a, in libc itself since glibc 2.34; OpenSSL for TLS
SHLIB_LINK = -lhiredis -lanl -lssl -lcrypto
EXTRA_CLEAN = src/lua_scripts.h src/lua_scripts.h.tmp tmp_redis/ dist-volume/

LUA = $(sort $(wildcard $(srcdir)/lua/*.lua))

# a separate build directory needs its own src/ for the objects
ifdef VPATH
$(shell mkdir -p src sql)
endif

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS does not track headers: rebuild every object when one changes.
$(OBJS): $(wildcard $(srcdir)/src/*.h)

src/scripts.o: src/lua_scripts.h

sql/$(EXTENSION)--$(EXTVERSION).sql: sql/$(EXTENSION).sql
	@mkdir -p sql
	cp $< $@

src/lua_scripts.h: $(LUA) tools/lua2c.sh
	@mkdir -p src
	sh $(srcdir)/tools/lua2c.sh $(LUA) > $@.tmp && mv $@.tmp $@

# Self-contained, as pg_cron's and pgvector's: test/installcheck.sh starts a
# redis-server on a free loopback port (or uses REDISLOCK_TEST_URL), adds
# redislock.url to the temporary instance's configuration, runs pg_regress
# and stops the Redis again.
installcheck:
	REDISLOCK_TEST_URL='$(REDISLOCK_TEST_URL)' $(SHELL) $(srcdir)/test/installcheck.sh \
		$(top_builddir)/src/test/regress/pg_regress --bindir='$(bindir)' \
		$(pg_regress_locale_flags) $(EXTRA_REGRESS_OPTS) $(REGRESS_OPTS) $(REGRESS)

# An extension directory of its own, as an image volume (CloudNativePG) or a
# container layer mounts it: share/extension holds what "make install" puts
# in the server's sharedir/extension, lib the library.  hiredis is linked in
# from its static archive (Debian's libhiredis-dev ships one, built as
# position-independent code), its symbols kept inside the library
# (--exclude-libs), so that the directory needs no hiredis package on the
# server; OpenSSL and glibc are the server's own.  The link is PGXS's, with
# -lhiredis replaced; HIREDIS_STATIC may name another archive.
DIST_VOLUME = dist-volume/$(EXTENSION)
HIREDIS_STATIC = -Wl,-Bstatic -lhiredis -Wl,-Bdynamic

dist-volume: all
	rm -rf $(DIST_VOLUME)
	$(MKDIR_P) $(DIST_VOLUME)/lib $(DIST_VOLUME)/share/extension
	$(LINK.shared) -o $(DIST_VOLUME)/lib/$(EXTENSION)$(DLSUFFIX) $(OBJS) $(LDFLAGS) $(LDFLAGS_SL) \
		-Wl,--exclude-libs,ALL $(patsubst -lhiredis,$(HIREDIS_STATIC),$(SHLIB_LINK))
	@if readelf -d $(DIST_VOLUME)/lib/$(EXTENSION)$(DLSUFFIX) | grep 'NEEDED.*hiredis'; then \
		echo "dist-volume: the library still needs a shared hiredis" >&2; exit 1; fi
	$(INSTALL_DATA) $(srcdir)/$(EXTENSION).control $(addprefix $(srcdir)/,$(DATA)) $(DATA_built) \
		$(DIST_VOLUME)/share/extension/

# Used by test/run-all.sh, which runs pg_regress itself against its own Redis.
regress-list:
	@echo $(REGRESS)

.PHONY: regress-list installcheck dist-volume
