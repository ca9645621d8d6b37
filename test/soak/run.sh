#!/usr/bin/env bash
# redislock chaos soak: SQL sessions and Redisson-protocol clients run random
# operations on every primitive while faults are injected, for N minutes,
# checking the invariants online and at the end (test/soak/README.md).
# Starts its own Redis (AOF on) and PostgreSQL on loopback through the test
# harness (test/lib/RedisLockTest.pm), stops everything it started on every
# exit path, exits non-zero on any violation, and ends with the line
#     soak: N passed, M failed
# (one run = one check, as test/faults/run.sh counts its runs).
#
# Usage: bash test/soak/run.sh [--minutes N] [--seed S] [--faults LIST]
#                              [--prime] [--round SPEC] [--no-deps]
#                              [--no-build | --installed]
#   --minutes N   how long the operations run (default 3; the ending and the
#                 final checks take up to about 2 more minutes)
#   --seed S      replay: every worker, client and the fault driver draw the
#                 same decisions (timing, so the interleaving, still differs)
#   --faults LIST all (default), none, or a comma list of listener, pubsub,
#                 pause, stop-holder, stop-watchdog, restart, reentry,
#                 release-error
#   --prime       each new session's first redislock call is a lock taken and
#                 released at once (keeps first-call defects out of the way)
#   --round SPEC  fix decisions of every reentry / release-error round, e.g.
#                 kind=lock,loss=force,taker=redisson (kind lock|fair|xact|
#                 read|write|multi|permit|sem, loss force|delete|lapse,
#                 taker sql|redisson, both 0|1); the rest is drawn
#   --no-build    do not build and install (make; make install, no clean)
#   --installed   test the redislock installed into that PostgreSQL: no build,
#                 and fail at once if it is not installed
# Environment:
#   REDISLOCK_PGBIN=DIR   bin directory of the PostgreSQL to use (default:
#                         that of pg_config on PATH, else the newest
#                         installed; test/lib/common.sh's pg_paths)
#   REDISLOCK_KEEP=1      keep the work dir (logs, data dirs); it is kept
#                         anyway when the soak failed
#   REDISLOCK_SOAK_SQL=8, REDISLOCK_SOAK_JAVA=3   SQL workers, Redisson clients
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

MINUTES=3 SEED='' FAULTS=all PRIME=0 ROUND='' DO_DEPS=1 DO_BUILD=1 INSTALLED=0
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case "$1" in
        --minutes) MINUTES=${2:?--minutes needs a value}; shift ;;
        --seed) SEED=${2:?--seed needs a value}; shift ;;
        --faults) FAULTS=${2:?--faults needs a value}; shift ;;
        --prime) PRIME=1 ;;
        --round) ROUND=${2:?--round needs a value}; shift ;;
        --no-deps) DO_DEPS=0 ;;
        --no-build) DO_BUILD=0 ;;
        --installed) DO_BUILD=0 INSTALLED=1 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "soak: unknown argument $1" >&2; usage >&2; exit 2 ;;
    esac
    shift
done
[[ "$MINUTES" =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "soak: --minutes must be a number" >&2; exit 2; }
[ -z "$SEED" ] || [[ "$SEED" =~ ^[0-9]+$ ]] || { echo "soak: --seed must be a non-negative integer" >&2; exit 2; }

PASSED=0 FAILED=0 WORK='' SUMMARY_PRINTED=0
# shellcheck source=../lib/common.sh
. "$ROOT/test/lib/common.sh"
pg_paths || exit 2

log() { printf '\n=== soak: %s\n' "$*"; }

summary() {
    [ "$SUMMARY_PRINTED" = 1 ] && return
    SUMMARY_PRINTED=1
    echo "soak: $PASSED passed, $FAILED failed"
}

cleanup() {
    local rc=$?
    set +e
    trap - EXIT INT TERM HUP
    # A process the driver stopped (SIGSTOP) must run again before anything
    # is stopped: a stopped postmaster child would hold up the shutdown.
    if [ -n "$WORK" ] && [ -f "$WORK/stopped.pids" ]; then
        while read -r pid; do
            [[ "$pid" =~ ^[0-9]+$ ]] && kill -CONT "$pid" 2>/dev/null
        done < "$WORK/stopped.pids"
    fi
    stop_child
    if [ -n "$WORK" ] && [ -d "$WORK" ]; then
        stop_leftovers "$WORK" soak
        if [ "${REDISLOCK_KEEP:-0}" = 1 ] || [ "$FAILED" -gt 0 ] || [ "$rc" -ne 0 ]; then
            echo "soak: work dir kept: $WORK (server logs in tmp_check/log/)"
        else
            rm -rf "$WORK"
        fi
    fi
    if [ "$rc" -ne 0 ] && [ "$FAILED" -eq 0 ]; then
        FAILED=$((FAILED + 1))
    fi
    summary
    [ "$FAILED" -gt 0 ] && exit 1
    exit "$rc"
}
trap cleanup EXIT
trap 'echo "soak: interrupted" >&2; exit 130' INT
trap 'echo "soak: terminated" >&2; exit 143' TERM HUP

if [ "$DO_DEPS" = 1 ]; then
    log "dependencies"
    if [ "$(id -u)" -eq 0 ]; then
        bash "$ROOT/test/setup-deps.sh"
    else
        echo "soak: not root: not installing packages (test/setup-deps.sh needs root)"
    fi
fi

if [ "$DO_BUILD" = 1 ]; then
    log "build and install"
    make -C "$ROOT" PG_CONFIG="$PG_CONFIG" && "${SUDO[@]}" make -C "$ROOT" PG_CONFIG="$PG_CONFIG" install \
        || { echo "soak: BUILD FAILED" >&2; FAILED=1; exit 1; }
fi
if [ "$INSTALLED" = 1 ]; then
    if [ ! -f "$("$PG_CONFIG" --sharedir)/extension/redislock.control" ] ||
       [ ! -f "$("$PG_CONFIG" --pkglibdir)/redislock.so" ]; then
        echo "soak: --installed, but redislock is not installed into $PGBIN's PostgreSQL" >&2
        FAILED=1; exit 1
    fi
fi

# A work dir owned by the server user (PostgreSQL refuses root): the
# harness, the Redisson scripts and the driver are copied there.
WORK=$(mktemp -d /tmp/redislock-soak.XXXXXX)
for d in sql lua test; do cp -r "$ROOT/$d" "$WORK/"; done
[ "$(id -u)" -eq 0 ] && chown -R "$RUN_USER:" "$WORK"
chmod 755 "$WORK"
cd "$WORK"
log "work dir $WORK (servers run as $RUN_USER)"

args=(--minutes "$MINUTES" --faults "$FAULTS" --sql "${REDISLOCK_SOAK_SQL:-8}" --java "${REDISLOCK_SOAK_JAVA:-3}")
[ -n "$SEED" ] && args+=(--seed "$SEED")
[ "$PRIME" = 1 ] && args+=(--prime)
[ -n "$ROUND" ] && args+=(--round "$ROUND")
# TESTDIR for PostgreSQL 15's PostgreSQL::Test::Utils, TESTDATADIR and
# TESTLOGDIR for 16's and later
env=(PATH="$PGBIN:$PATH" TESTDIR="$WORK" PG_REGRESS="$PG_REGRESS"
     TESTDATADIR="$WORK/tmp_check" TESTLOGDIR="$WORK/tmp_check/log"
     PERL5LIB="$WORK/test/lib:$WORK/test/redisson:$WORK/test/soak:$PG_PERL_LIB${PERL5LIB:+:$PERL5LIB}"
     REDISLOCK_TEST_WORKDIR="$WORK" SOAK_STOPPED_FILE="$WORK/stopped.pids")
[ "${REDISLOCK_KEEP:-0}" = 1 ] && env+=(PG_TEST_NOCLEAN=1)
# hard bound: the run, the ending (at most about 3 minutes), slack
limit=$(perl -e 'print int($ARGV[0] * 60 + 420)' "$MINUTES")
log "driver: test/soak/soak.pl ${args[*]} (hard limit ${limit}s)"
rc=0
run_waited timeout -k 20 "$limit" "${AS_PG[@]}" "${env[@]}" perl "$WORK/test/soak/soak.pl" "${args[@]}" || rc=$?
if [ "$rc" -eq 0 ]; then
    PASSED=$((PASSED + 1))
else
    FAILED=$((FAILED + 1))
    [ "$rc" -eq 124 ] && echo "soak: the driver did not finish within ${limit}s" >&2
    for lg in "$WORK"/tmp_check/log/*soak*.log; do
        [ -f "$lg" ] || continue
        log "crash/error lines of ${lg#"$WORK"/}"
        grep -E 'terminated by signal|TRAP:|PANIC:|ERROR:|WARNING:' "$lg" | tail -n 30 || true
    done
fi
exit 0
