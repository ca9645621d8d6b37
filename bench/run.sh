#!/usr/bin/env bash
# Runs redislock's benchmarks on a Debian 12 machine and writes their results
# into bench/ (RESULTS-<workload>.md). Starts its own Redis and PostgreSQL
# (through test/lib/RedisLockTest.pm) and stops them.
#
# Usage: bash bench/run.sh [workload...]     (default: every bench/*.pl)
#        bash bench/run.sh --results-only    (only re-assemble RESULTS.md)
# Not part of the test run: benchmarks report ratios, they assert nothing.
# Then assembles bench/RESULTS.md from every bench/RESULTS-<workload>.md
# present, with the targets' verdicts first; charts are bench/*.png.
#
# Environment (see bench/BenchLib.pm; defaults give a run of ~10 minutes):
#   REDISLOCK_BENCH_SECONDS=5      seconds per pgbench run (workloads 1, 4)
#   REDISLOCK_BENCH_CLIENTS=1,2,4,8,32
#   REDISLOCK_BENCH_SCALE=1        multiplies the loop counts (2, 3, 6)
#   REDISLOCK_BENCH_REDIS_REQUESTS=40000   redis-benchmark -n
#   REDISLOCK_BENCH_PERF_SECONDS=5 perf profile of a backend (0 = none)
#   REDISLOCK_BENCH_WAIT_SECONDS=60 how long each waiter of waitmemory waits
#   REDISLOCK_BENCH_DEADLOCK_TIMEOUT  its redislock.deadlock_timeout (default:
#                                  the server's deadlock_timeout)
#   REDISLOCK_KEEP=1               keep the work directory
#   REDISLOCK_PGBIN=DIR            bin directory of the PostgreSQL to use (default:
#                                  that of the pg_config on PATH, test/lib/common.sh)
#   REDISLOCK_REDIS_SERVER=BIN     redis-server (default) or valkey-server
#   REDISLOCK_BENCH_JAVA_CLIENTS=1,4  javarate: Java threads / SQL clients
#   REDISLOCK_BENCH_ROUNDS=3       javarate: rounds alternating Java and SQL
#   REDISLOCK_BENCH_PLAIN_CLIENTS=1,4  plain: SQL sessions / redis-py threads /
#                                  redsync goroutines (REDISLOCK_BENCH_ROUNDS too)
#   REDISLOCK_PEERS_CACHE=DIR      plain: where test/peers/build.sh builds redis-py
#                                  and run.sh the redsync loop (default
#                                  /var/cache/redislock/peers)
#   REDISLOCK_BENCH_REDISSON=4.7.0 javarate: the Redisson version (built by
#                                  test/redisson-java/build.sh into
#                                  REDISLOCK_REDISSON_CACHE, default as in
#                                  test/run-all.sh)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=../test/lib/common.sh
. "$ROOT/test/lib/common.sh"

ONLY_RESULTS=0
if [ "${1:-}" = --results-only ]; then ONLY_RESULTS=1; shift; fi

bash "$ROOT/test/setup-deps.sh"
pg_paths
redis_paths
make -C "$ROOT" -s PG_CONFIG=$PGBIN/pg_config
make -C "$ROOT" -s install PG_CONFIG=$PGBIN/pg_config >/dev/null

workloads=("$@")
if [ ${#workloads[@]} -eq 0 ]; then
    for f in "$ROOT"/bench/*.pl; do workloads+=("$(basename "$f" .pl)"); done
fi

# javarate runs the real Redisson client: its build (test/redisson-java,
# cached as test/run-all.sh caches it, where postgres can read it).
REDISSON_ENV=()
[ "$ONLY_RESULTS" = 1 ] || case " ${workloads[*]} " in
    *" javarate "*)
        cache=${REDISLOCK_REDISSON_CACHE:-}
        if [ -z "$cache" ]; then
            if [ "$(id -u)" -eq 0 ]; then cache=/var/cache/redislock/redisson
            else cache=${XDG_CACHE_HOME:-$HOME/.cache}/redislock-redisson; fi
        fi
        REDISLOCK_REDISSON_CACHE=$cache bash "$ROOT/test/redisson-java/build.sh" "${REDISLOCK_BENCH_REDISSON:-4.7.0}"
        REDISSON_ENV=(REDISLOCK_REDISSON_CACHE="$cache")
        ;;
esac

# plain runs the real redis-py and redsync: test/peers' redis-py build, and
# the redsync loop of bench/plain-peers/redsync built beside it (the same
# caches, stamped by a digest of its sources, where postgres can read it).
PLAIN_ENV=()
[ "$ONLY_RESULTS" = 1 ] || case " ${workloads[*]} " in
    *" plain "*)
        pcache=${REDISLOCK_PEERS_CACHE:-/var/cache/redislock/peers}
        REDISLOCK_PEERS_CACHE=$pcache bash "$ROOT/test/peers/build.sh" redispy
        src=$ROOT/bench/plain-peers/redsync
        stamp=$(cd "$src" && LC_ALL=C ls | while read -r f; do printf '%s\n' "$f"; cat "$f"; done |
            sha256sum | cut -c1-12)
        bin=$pcache/bench-redsync-pairs-$stamp/redsync-pairs
        if [ ! -x "$bin" ]; then
            mkdir -p "$(dirname "$bin")"
            (cd "$src" && GOMODCACHE=$pcache/go/mod GOCACHE=$pcache/go/build GOTOOLCHAIN=local \
                GOFLAGS=-modcacherw go build -trimpath -o "$bin" .)
            chmod -R a+rX "$(dirname "$bin")"
        fi
        PLAIN_ENV=(REDISLOCK_PEERS_CACHE="$pcache" REDISLOCK_BENCH_REDSYNC_PAIRS="$bin")
        ;;
esac

# PostgreSQL refuses to run as root: run as postgres in a copy it owns.
WORK=$(mktemp -d /tmp/redislock-bench.XXXXXX)
trap '[ "${REDISLOCK_KEEP:-0}" = 1 ] || rm -rf "$WORK"' EXIT
cp -r "$ROOT/bench" "$ROOT/test" "$ROOT/lua" "$WORK/"
[ "$(id -u)" -eq 0 ] && chown -R postgres: "$WORK"

LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
[ "$ONLY_RESULTS" = 1 ] && workloads=()
for w in "${workloads[@]}"; do
    echo "=== bench: $w"
    if ! (cd "$WORK" && "${AS_PG[@]}" PATH="$PGBIN:$PATH" REDISLOCK_PGBIN="$PGBIN" TESTDIR="$WORK" \
        TESTDATADIR="$WORK/tmp_check" TESTLOGDIR="$WORK/tmp_check/log" PG_REGRESS="$PG_REGRESS" \
        PERL5LIB="$WORK/test/lib:$PG_PERL_LIB" "${REDISSON_ENV[@]}" "${PLAIN_ENV[@]}" \
        perl "bench/$w.pl" "bench/RESULTS-$w.md"); then
        echo "=== bench: $w FAILED; end of its log:" >&2
        tail -n 40 "$WORK/tmp_check/log/regress_log_$w" >&2 || true
        exit 1
    fi
    cp "$WORK/bench/RESULTS-$w.md" "$ROOT/bench/"
    for png in "$WORK"/bench/*.png; do [ -e "$png" ] && cp "$png" "$ROOT/bench/"; done
    echo "=== bench: wrote bench/RESULTS-$w.md"
done
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

# bench/RESULTS.md: the targets first, then every workload's section.
ORDER=(lockrate handoff reentry xact renewal memory waitmemory tls rwlock semaphore)
HEADER=$(mktemp)
if [ "$ONLY_RESULTS" = 1 ] && [ -e "$ROOT/bench/RESULTS.md" ]; then
    sed '/^## Targets/,$d' "$ROOT/bench/RESULTS.md" > "$HEADER"   # keep the run's header
else
{
    echo "# redislock benchmark results"
    echo
    echo "Written by \`bash bench/run.sh${*:+ $*}\` on $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "(workloads run: ${workloads[*]}; each section names the command and settings that produced it)."
    echo "Settings: REDISLOCK_BENCH_SECONDS=${REDISLOCK_BENCH_SECONDS:-5},"
    echo "REDISLOCK_BENCH_CLIENTS=${REDISLOCK_BENCH_CLIENTS:-1,2,4,8,32},"
    echo "REDISLOCK_BENCH_SCALE=${REDISLOCK_BENCH_SCALE:-1}. Load average (1/5/15 min) before: $LOAD_START,"
    echo "after: $LOAD_END — the machine was $(nproc) cores shared with anything else running then,"
    echo "so absolute numbers carry that noise; ratios measured in the same run are the point."
    echo
} > "$HEADER"
fi
{
    cat "$HEADER"
    echo "## Targets"
    echo
    for w in "${ORDER[@]}"; do
        f="$ROOT/bench/RESULTS-$w.md"
        [ -e "$f" ] && grep -h '^\*\*Target' "$f" | sed 's/^/- /'  || true
    done
    if [ -e "$ROOT/bench/FINDINGS.md" ]; then
        echo
        cat "$ROOT/bench/FINDINGS.md"
    fi
    for w in "${ORDER[@]}" $(ls "$ROOT"/bench/RESULTS-*.md 2>/dev/null | sed 's|.*/RESULTS-||; s|\.md$||'); do
        f="$ROOT/bench/RESULTS-$w.md"
        [ -e "$f" ] || continue
        case " ${DONE:-} " in *" $w "*) continue ;; esac
        DONE="${DONE:-} $w"
        echo
        if [ "$w" = renewal ]; then
            echo "## 5. Watchdog renewal (bench/RESULTS-renewal.md)"
            echo
            sed '1{/^# /d}' "$f"
        else
            cat "$f"
        fi
    done
} > "$ROOT/bench/RESULTS.md"
rm -f "$HEADER"
echo "=== bench: wrote bench/RESULTS.md"
