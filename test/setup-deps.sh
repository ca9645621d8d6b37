#!/usr/bin/env bash
# Install what building and testing redislock needs on Debian (12, 13, sid),
# if missing.  Idempotent: does nothing (no apt-get update either) when all is
# installed.
#   PostgreSQL: the major of REDISLOCK_PGBIN's pg_config when that is set,
#     else REDISLOCK_PG_MAJOR, else the distribution's default (the one the
#     "postgresql" package depends on: 15 on Debian 12, 17 on 13, 18 on sid).
#   Redis: valkey-server when REDISLOCK_REDIS_SERVER names it, else
#     redis-server and redis-sentinel.
set -euo pipefail

if [ -n "${REDISLOCK_PGBIN:-}" ] && [ -x "$REDISLOCK_PGBIN/pg_config" ]; then
    PG_MAJOR=$("$REDISLOCK_PGBIN/pg_config" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
elif [ -n "${REDISLOCK_PG_MAJOR:-}" ]; then
    PG_MAJOR=$REDISLOCK_PG_MAJOR
else
    PG_MAJOR=$(apt-cache depends postgresql 2>/dev/null | sed -n 's/^ *Depends: postgresql-\([0-9][0-9]*\)$/\1/p' | head -n 1)
    PG_MAJOR=${PG_MAJOR:-15}
fi
case "$(basename "${REDISLOCK_REDIS_SERVER:-redis-server}")" in
    valkey*) REDIS_PACKAGES=(valkey-server) ;;
    *) REDIS_PACKAGES=(redis-server redis-sentinel) ;;
esac

PACKAGES=(
    postgresql-"$PG_MAJOR"               # server + pg_regress' temp instances
    postgresql-server-dev-"$PG_MAJOR"    # PGXS, server headers, pg_regress, PostgreSQL::Test::*
    libhiredis-dev              # the Redis client library the extension links
    libssl-dev                  # OpenSSL headers: TLS to Redis (src/tls.c, src/transport.c)
    "${REDIS_PACKAGES[@]}"      # throwaway Redis (and sentinels) for the tests
    pgbouncer                   # test 385: locks through a transaction pooler
    postgresql-15-cron          # test 405: pg_cron jobs taking locks (skipped, counted, without it)
    gdb                         # tests 393, 398: hold a waiter or the listener at one point
    iproute2                    # tests 215, 398: ss, which process owns a connection to Redis
    openjdk-17-jdk-headless maven  # tests 500, 505: the real Redisson client (test/redisson-java)
    libipc-run-perl             # PostgreSQL::Test::Utils needs IPC::Run
    libdbd-pg-perl              # multi-session TAP tests (RedisLockTest::Session)
    libredis-perl               # Redis client for Perl tests
    libio-socket-ssl-perl       # FakeRedisson over TLS (rediss) in the TLS tests
    openssl                     # the TLS tests' certificates (RedisLockTest::TLS)
    gnuplot-nox                 # benchmark plots
    python3-jsonschema          # tools/check-meta.py: META.json against the PGXN schema
    prometheus-postgres-exporter  # test 441: the exporter runs contrib/postgres_exporter's queries
    libyaml-libyaml-perl        # test 441: YAML::XS reads that query file
    make gcc                    # building (usually present with -server-dev)
)

missing=()
for p in "${PACKAGES[@]}"; do
    # "install ok installed" is the only state that means the package is usable.
    if [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" != "install ok installed" ]; then
        missing+=("$p")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    echo "setup-deps: all packages present"
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
elif command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
else
    echo "setup-deps: missing ${missing[*]} and not root, no sudo" >&2
    exit 1
fi

echo "setup-deps: installing ${missing[*]}"
"${SUDO[@]}" apt-get update
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"

# Debian's postgresql package creates and starts a "NN/main" cluster on 5432,
# its pgbouncer package a service on 6432 and prometheus-postgres-exporter one
# on 9187 (where an init system runs them).  The tests use none of them (they
# start their own); leave them alone (stopping them is the admin's call).
