#!/usr/bin/env bash
# Runs redislock's benchmarks on a Debian 12 machine and writes their results
# into bench/ (RESULTS-<workload>.md). Starts its own Redis and PostgreSQL
# (through test/lib/RedisLockTest.pm) and stops them.
#
# Usage: bash bench/run.sh [workload...]     (default: every bench/*.pl)
# Not part of the test run: benchmarks report ratios, they assert nothing.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PGBIN=/usr/lib/postgresql/15/bin
PG_PERL_LIB=/usr/lib/postgresql/15/lib/pgxs/src/test/perl

bash "$ROOT/test/setup-deps.sh"
make -C "$ROOT" -s PG_CONFIG=$PGBIN/pg_config
make -C "$ROOT" -s install PG_CONFIG=$PGBIN/pg_config >/dev/null

workloads=("$@")
if [ ${#workloads[@]} -eq 0 ]; then
    for f in "$ROOT"/bench/*.pl; do workloads+=("$(basename "$f" .pl)"); done
fi

# PostgreSQL refuses to run as root: run as postgres in a copy it owns.
WORK=$(mktemp -d /tmp/redislock-bench.XXXXXX)
trap '[ "${REDISLOCK_KEEP:-0}" = 1 ] || rm -rf "$WORK"' EXIT
cp -r "$ROOT/bench" "$ROOT/test" "$WORK/"
if [ "$(id -u)" -eq 0 ]; then
    chown -R postgres: "$WORK"
    AS_PG=(setpriv --reuid=postgres --regid=postgres --init-groups env HOME=/tmp)
else
    AS_PG=(env)
fi

for w in "${workloads[@]}"; do
    echo "=== bench: $w"
    (cd "$WORK" && "${AS_PG[@]}" PATH="$PGBIN:$PATH" TESTDIR="$WORK" \
        PG_REGRESS=/usr/lib/postgresql/15/lib/pgxs/src/test/regress/pg_regress \
        PERL5LIB="$WORK/test/lib:$PG_PERL_LIB" \
        perl "bench/$w.pl" "bench/RESULTS-$w.md")
    cp "$WORK/bench/RESULTS-$w.md" "$ROOT/bench/"
    for png in "$WORK"/bench/*.png; do [ -e "$png" ] && cp "$png" "$ROOT/bench/"; done
    echo "=== bench: wrote bench/RESULTS-$w.md"
done
