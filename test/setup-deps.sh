#!/usr/bin/env bash
# Install what building and testing redislock needs on Debian 12, if missing.
# Idempotent: does nothing (no apt-get update either) when all is installed.
set -euo pipefail

PACKAGES=(
    postgresql-15               # server + pg_regress' temp instances
    postgresql-server-dev-15    # PGXS, server headers, pg_regress, PostgreSQL::Test::*
    libhiredis-dev              # the Redis client library the extension links
    libssl-dev                  # OpenSSL headers: TLS to Redis (src/tls.c, src/transport.c)
    redis-server                # throwaway Redis for the tests
    redis-sentinel              # multi-node tests
    pgbouncer                   # test 385: locks through a transaction pooler
    postgresql-15-cron          # test 405: pg_cron jobs taking locks (skipped, counted, without it)
    gdb                         # test 393: holds a waiter at one point of its wait
    libipc-run-perl             # PostgreSQL::Test::Utils needs IPC::Run
    libdbd-pg-perl              # multi-session TAP tests (RedisLockTest::Session)
    libredis-perl               # Redis client for Perl tests
    libio-socket-ssl-perl       # FakeRedisson over TLS (rediss) in the TLS tests
    openssl                     # the TLS tests' certificates (RedisLockTest::TLS)
    gnuplot-nox                 # benchmark plots
    python3-jsonschema          # tools/check-meta.py: META.json against the PGXN schema
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

# Debian's postgresql package creates and starts a "15/main" cluster on 5432,
# and its pgbouncer package a service on 6432 (where an init system runs it).
# The tests use neither (they start their own); leave them alone (stopping
# them is the admin's call).
