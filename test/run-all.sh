#!/usr/bin/env bash
# Runs every redislock test on a Debian machine (12, 13 or sid), from nothing:
#   installs missing packages, builds and installs the extension, starts a
#   throwaway redis-server, runs pg_regress (test/sql, test/expected) against a
#   temporary PostgreSQL instance, then the multi-session TAP tests
#   (test/t/*.pl; each starts its own Redis and PostgreSQL through
#   test/lib/RedisLockTest.pm).  Stops everything it started, exits non-zero
#   if anything failed, and ends with the line
#       redislock: N passed, M failed
#   (N, M count pg_regress tests, "make installcheck" run on its own, TAP
#   test files, the static checks and the fault suite's runs).  A TAP file
#   that skips itself (pg_cron missing, say) counts as neither: the summary
#   says "run-all: SKIPPED K TAP file(s)" and names each with its reason.  The static
#   checks (tools/check-guc-init.pl, tools/check-meta.py,
#   tools/check-doc-links.py, tools/check-docs.py) run in every mode.
#   Last comes the fault suite, test/faults/run.sh (faults, partitions,
#   bad input, valgrind).
#
# Usage: bash test/run-all.sh [--regress-only | --tap-only] [--no-deps]
#                             [--no-build | --installed] [--no-faults]
#                             [--smoke] [TAP files...]
#   --installed: test the redislock already installed into that PostgreSQL
#   (the Debian package, say): no build, no make install, and it fails at
#   once if redislock is not installed there.  .ci/run uses it after
#   installing the .deb it built, so the binary users get is the one tested.
#   --smoke: of the TAP files, only the smoke subset (SMOKE_TAP below: one
#   or two files per area).  CI runs everything on the assert-enabled build
#   (test/cassert/ci.sh) and, against the installed package,
#   --installed --smoke --no-faults.
#   TAP files: names or paths of test/t/*.pl files to run instead of all
#   (the fault suite then does not run).
# A TAP file or pg_regress run that passes although its server log shows an
# assertion failure (TRAP:), a process that died of SIGABRT, SIGSEGV,
# SIGBUS, SIGILL or SIGFPE, or what an assert-enabled server warns of (a
# write past a palloc chunk, a corrupt memory context, a resource left
# open at commit: "... leak", "... still active") counts as failed, named
# <test>(crash).
# Environment:
#   REDISLOCK_KEEP=1             keep the work dir (and TAP data dirs)
#   REDISLOCK_REDISSON_VERSIONS='4.7.0'  the Redisson versions the real client's
#                                tests run (default: all of test/lib/RealRedisson.pm)
#   REDISLOCK_TAP_SKIP='5*'       when running all TAP files, leave out those whose
#                                names match one of these globs (.ci/run runs the
#                                real Redisson client's files in a lane of their own)
#   REDISLOCK_TAP_TIMEOUT=1200   seconds per TAP file (test 500 runs eight Redisson versions)
#   REDISLOCK_REGRESS_TIMEOUT=600  seconds for pg_regress
#   REDISLOCK_PEERS_CACHE=DIR    where test/peers/build.sh builds the other real lock
#                                clients' drivers (default /var/cache/redislock/peers)
#   REDISLOCK_INTEROP_OUT=DIR    the real-Redisson tests (5xx) write their results
#                                per primitive and version to DIR/<test>.tsv, for
#                                tools/interop-table.pl (DIR writable by postgres)
#   REDISLOCK_PRIOR_PASSED, REDISLOCK_PRIOR_FAILED, REDISLOCK_PRIOR_FAILED_NAMES
#                                counts (and names) of checks the caller ran first,
#                                added to the closing line (.ci/run: package build,
#                                lintian, install), so that one line counts all
#   REDISLOCK_PRIOR_SKIPPED_NAMES  TAP files the caller's other runs skipped, one
#                                "<file>: <reason>" a line, named in the summary
#                                with this run's (.ci/run: the PostgreSQL 16 cell's)
#   REDISLOCK_PGBIN=DIR          bin directory of the PostgreSQL to build against
#                                and test with (default: that of the pg_config on
#                                PATH, else the newest /usr/lib/postgresql/N/bin;
#                                a relocated copy lets two checkouts test at once)
#   REDISLOCK_REDIS_SERVER=BIN   the Redis server the tests start: redis-server
#                                (default) or valkey-server; REDISLOCK_REDIS_CLI
#                                its client (default: the one that comes with it)
#
# PostgreSQL refuses to run as root, so when run as root every server and
# test runs as the "postgres" user in a postgres-owned copy of sql/,
# lua/, test/, docs/ and contrib/ (the repo itself may be unreadable to
# postgres).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TAP_TIMEOUT=${REDISLOCK_TAP_TIMEOUT:-1200}
REGRESS_TIMEOUT=${REDISLOCK_REGRESS_TIMEOUT:-600}

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }

DO_REGRESS=1 DO_TAP=1 DO_DEPS=1 DO_BUILD=1 DO_FAULTS=1 INSTALLED=0 SMOKE=0
TAP_ARGS=()
while [ $# -gt 0 ]; do
    case "$1" in
        --regress-only) DO_TAP=0 DO_FAULTS=0 ;;
        --tap-only) DO_REGRESS=0 DO_FAULTS=0 ;;
        --no-faults) DO_FAULTS=0 ;;
        --smoke) SMOKE=1 ;;
        --no-deps) DO_DEPS=0 ;;
        --no-build) DO_BUILD=0 ;;
        --installed) DO_BUILD=0 INSTALLED=1 ;;
        -h|--help) usage; exit 0 ;;
        -*) echo "run-all: unknown option $1" >&2; usage >&2; exit 2 ;;
        *) TAP_ARGS+=("$1") ;;
    esac
    shift
done

# The smoke subset: every area once, and what depends on how the package
# installed the extension.  Core waits and pub/sub wake-ups (010), every way
# a wait ends by interrupt (030) and by session/transaction end (040), the
# Lua scripts against a Redisson client (050), Redis failures (070), the
# preloaded watchdog worker (110), Sentinel discovery (195), Redlock (200),
# Cluster (210), the upgrade scripts the package ships (280), TLS through
# the package's OpenSSL (300), read-write locks (320), multi-locks (340),
# semaphores, expiring permits and latches shared with a Redisson client
# (350), the deadlock detector (370), pgbouncer (385), the shared
# listener (390), and pg_cron jobs (405: Debian's postgresql-15-cron goes
# with Debian's server, not with the assert-enabled build, where 405
# skips), and the docs against the package's catalog (440, 10 s).  About 5
# minutes of the TAP suite's 30.
SMOKE_TAP=(010_blocking 030_cancel 040_session_end 050_redisson_compat
           070_redis_failures 110_worker 195_sentinel_discovery_cancel
           200_redlock 210_cluster 280_upgrade 300_tls 320_rwlock
           340_multilock 350_semaphore_redisson 370_deadlock 385_pgbouncer
           390_listener 405_pg_cron 440_docs_catalog)

PASSED=${REDISLOCK_PRIOR_PASSED:-0}
FAILED=${REDISLOCK_PRIOR_FAILED:-0}
FAILED_NAMES=()
# TAP files that skipped themselves (plan skip_all: a package such as pg_cron
# is missing): counted apart and named with their reasons in the summary.
SKIPPED=0
SKIPPED_NAMES=()
# shellcheck disable=SC2206  # names are single words
[ -n "${REDISLOCK_PRIOR_FAILED_NAMES:-}" ] && FAILED_NAMES=(${REDISLOCK_PRIOR_FAILED_NAMES})
if [ -n "${REDISLOCK_PRIOR_SKIPPED_NAMES:-}" ]; then
    mapfile -t SKIPPED_NAMES <<< "$REDISLOCK_PRIOR_SKIPPED_NAMES"
    SKIPPED=${#SKIPPED_NAMES[@]}
fi
WORK=
REDIS_PID=

SUMMARY_PRINTED=0

log() { printf '\n=== run-all: %s\n' "$*"; }

# shellcheck source=lib/common.sh
. "$ROOT/test/lib/common.sh"


# run_logged FILE CMD...: run_waited, showing the output live and copying it
# to FILE; returns only once the copy is complete (bounded), so that later
# output does not interleave with it.
run_logged() {
    local out=$1 rc=0 tee_pid
    shift
    exec 4> >(tee "$out")
    tee_pid=$!
    run_waited "$@" >&4 2>&1 || rc=$?
    exec 4>&-
    # tee ends when every writer is gone; a leftover daemon holding the pipe
    # must not stall us.
    for _ in $(seq 1 50); do kill -0 "$tee_pid" 2>/dev/null || break; sleep 0.1; done
    kill "$tee_pid" 2>/dev/null || true
    return "$rc"
}

summary() {
    [ "$SUMMARY_PRINTED" = 1 ] && return
    SUMMARY_PRINTED=1
    if [ "$SKIPPED" -gt 0 ]; then
        echo
        echo "run-all: SKIPPED $SKIPPED TAP file(s), not counted as passed:"
        printf 'run-all: SKIPPED (not counted): %s\n' "${SKIPPED_NAMES[@]}"
    fi
    if [ ${#FAILED_NAMES[@]} -gt 0 ]; then
        echo
        echo "run-all: FAILED: ${FAILED_NAMES[*]}"
    fi
    echo "redislock: $PASSED passed, $FAILED failed"
}


cleanup() {
    local rc=$?
    set +e
    trap - EXIT INT TERM HUP
    # The running step (prove / pg_regress under timeout): timeout forwards
    # TERM to its whole process group.
    stop_child
    kill_pid_if "$REDIS_PID" "$REDIS_COMM*"
    if [ -n "$WORK" ] && [ -d "$WORK" ]; then
        stop_leftovers "$WORK" run-all
        if [ "${REDISLOCK_KEEP:-0}" = 1 ]; then
            echo "run-all: work dir kept: $WORK"
        else
            rm -rf "$WORK"
            [ "$FAILED" -gt 0 ] && echo "run-all: (REDISLOCK_KEEP=1 keeps the work dir for inspection)"
        fi
    fi
    if [ "$rc" -ne 0 ] && { [ "$FAILED" -eq 0 ] || [ "$rc" -gt 128 ]; }; then
        # Died outside a counted test (build, setup, interrupt): still a failure.
        FAILED=$((FAILED + 1))
        FAILED_NAMES+=("run-all(exit $rc)")
    fi
    summary
    [ "$FAILED" -gt 0 ] && exit 1
    exit "$rc"
}
trap cleanup EXIT
trap 'echo "run-all: interrupted" >&2; exit 130' INT
trap 'echo "run-all: terminated" >&2; exit 143' TERM HUP

# --- 1. dependencies -------------------------------------------------------
if [ "$DO_DEPS" = 1 ]; then
    log "installing missing packages"
    bash "$ROOT/test/setup-deps.sh"
fi
if ! pg_paths; then
    FAILED_NAMES+=("postgresql"); FAILED=$((FAILED + 1)); exit 1
fi
redis_paths    # setup-deps may just have installed it
log "PostgreSQL $("$PG_CONFIG" --version | sed 's/^PostgreSQL //') in $PGBIN; $("$REDIS_SERVER" --version | cut -d' ' -f1-3)"

# --- 2. build and install ----------------------------------------------------
if [ "$DO_BUILD" = 1 ]; then
    if [ ! -f "$ROOT/Makefile" ]; then
        if [ "$DO_REGRESS" = 0 ]; then
            log "WARNING: no Makefile in $ROOT: extension not built; running TAP tests anyway"
        else
            echo "run-all: no Makefile in $ROOT: the extension source is missing, nothing to build" >&2
            FAILED_NAMES+=("build")
            FAILED=$((FAILED + 1))
            exit 1
        fi
    else
        log "building (make clean; make; make install)"
        if ! { make -C "$ROOT" PG_CONFIG="$PG_CONFIG" clean &&
               make -C "$ROOT" PG_CONFIG="$PG_CONFIG" &&
               "${SUDO[@]}" make -C "$ROOT" PG_CONFIG="$PG_CONFIG" install; }; then
            echo "run-all: BUILD FAILED" >&2
            FAILED_NAMES+=("build")
            FAILED=$((FAILED + 1))
            exit 1
        fi
    fi
fi

# --installed: say what is installed, and stop at once if nothing is.
if [ "$INSTALLED" = 1 ]; then
    SHAREDIR=$("$PG_CONFIG" --sharedir) PKGLIBDIR=$("$PG_CONFIG" --pkglibdir)
    if [ ! -f "$SHAREDIR/extension/redislock.control" ] || [ ! -f "$PKGLIBDIR/redislock.so" ]; then
        echo "run-all: --installed, but redislock is not installed in $SHAREDIR and $PKGLIBDIR" >&2
        FAILED_NAMES+=("installed")
        FAILED=$((FAILED + 1))
        exit 1
    fi
    owner=$(dpkg-query -S "$PKGLIBDIR/redislock.so" 2>/dev/null | cut -d: -f1 || true)
    log "testing the installed redislock: $PKGLIBDIR/redislock.so (${owner:+package }${owner:-not from a package})"
fi

# --- 3. work dir owned by the server user ------------------------------------
WORK=$(mktemp -d /tmp/redislock-test.XXXXXX)
for d in sql lua test docs contrib; do    # docs, contrib: tests 405, 437, 440, 441, 445
    [ -d "$ROOT/$d" ] && cp -r "$ROOT/$d" "$WORK/"
done
for f in README.md; do                    # test 445
    [ -f "$ROOT/$f" ] && cp "$ROOT/$f" "$WORK/"
done
for f in Makefile redislock.control; do    # for "make installcheck"
    [ -f "$ROOT/$f" ] && cp "$ROOT/$f" "$WORK/"
done
mkdir -p "$WORK/regress" "$WORK/redis"
[ "$(id -u)" -eq 0 ] && chown -R "$RUN_USER:" "$WORK"
cd "$WORK"
log "work dir $WORK (servers run as $RUN_USER)"

# --- 4. pg_regress ---------------------------------------------------------------
regress_list() {
    local out
    # Preferred: the Makefile says which tests (target regress-list).
    if out=$(make -s -C "$ROOT" PG_CONFIG="$PG_CONFIG" regress-list 2>/dev/null) && [ -n "${out//[[:space:]]/}" ]; then
        echo $out; return
    fi
    # Makefile without that target: print its $(REGRESS) through an extra makefile.
    if [ -f "$ROOT/Makefile" ] &&
       out=$(make -s -C "$ROOT" PG_CONFIG="$PG_CONFIG" -f Makefile \
                 -f <(printf 'redislock-print-regress:\n\t@echo $(REGRESS)\n') \
                 redislock-print-regress 2>/dev/null) && [ -n "${out//[[:space:]]/}" ]; then
        echo $out; return
    fi
    # Last resort: every pg_regress input.
    local f
    for f in "$ROOT"/test/sql/*.sql; do
        [ -e "$f" ] || continue
        basename "$f" .sql
    done | tr '\n' ' '
}

start_redis() {
    local port=$1
    run_redis=("${AS_PG[@]}" "$REDIS_SERVER" --port "$port" --bind 127.0.0.1 --save ''
               --appendonly no --daemonize no --dir "$WORK/redis"
               --pidfile "$WORK/redis/redis.pid" --logfile "$WORK/redis/redis.log")
    "${run_redis[@]}" &
    REDIS_PID=$!
    for _ in $(seq 1 200); do    # up to ~20 s
        if [ "$("$REDIS_CLI" -h 127.0.0.1 -p "$port" ping 2>/dev/null)" = PONG ]; then return 0; fi
        if ! kill -0 "$REDIS_PID" 2>/dev/null; then break; fi
        sleep 0.1
    done
    echo "run-all: $REDIS_SERVER on port $port did not come up:" >&2
    tail -n 20 "$WORK/redis/redis.log" >&2 || true
    return 1
}

run_regress() {
    local tests
    tests=$(regress_list)
    if [ -z "${tests//[[:space:]]/}" ]; then
        log "WARNING: no pg_regress tests found (no regress-list target, no REGRESS, no test/sql/*.sql)"
        return 0
    fi
    local rport pgport
    rport=$(free_port)
    pgport=$(free_port "$rport")
    log "starting $REDIS_SERVER on 127.0.0.1:$rport"
    if ! start_redis "$rport"; then
        FAILED=$((FAILED + 1)); FAILED_NAMES+=("regress(redis start)"); return 0
    fi
    # the configuration "make installcheck" uses (test/regress.conf), and this Redis
    { cat "$ROOT/test/regress.conf"; echo "redislock.url = 'redis://127.0.0.1:$rport'"; } \
        > "$WORK/regress/redislock.conf"
    [ "$(id -u)" -eq 0 ] && chown "$RUN_USER:" "$WORK/regress/redislock.conf"

    log "pg_regress: $tests"
    local rc=0
    # --encoding/--no-locale: the test database is UTF8 with locale C
    # whatever the machine's locale (without one, initdb picks SQL_ASCII and
    # the UTF-8 names in sql/api.sql would be other bytes; ORDER BY name
    # would follow the machine's collation).
    # shellcheck disable=SC2086  # the test list is meant to split
    run_logged "$WORK/regress/pg_regress.stdout" \
        timeout -k 10 "$REGRESS_TIMEOUT" "${AS_PG[@]}" "$PG_REGRESS" \
        --temp-instance="$WORK/regress/tmp_instance" \
        --temp-config="$WORK/regress/redislock.conf" \
        --encoding=UTF8 --no-locale \
        --port="$pgport" \
        --inputdir="$WORK/test" --outputdir="$WORK/regress" \
        --bindir="$PGBIN" --dbname=contrib_regression \
        $tests || rc=$?

    kill_pid_if "$REDIS_PID" "$REDIS_COMM*"; REDIS_PID=

    # Count per test from pg_regress' own lines: up to PostgreSQL 15
    # "test foo ... ok" / "     foo ... FAILED" / "... failed (ignored)",
    # from 16 on TAP: "ok 1         - foo   12 ms" / "not ok 2     + foo".
    local ok bad
    ok=$(grep -cE '^ *(test +)?[^ ]+ +\.\.\. +ok( |$)|^ok +[0-9]+ +[-+] ' "$WORK/regress/pg_regress.stdout" || true)
    bad=$(grep -cE '^ *(test +)?[^ ]+ +\.\.\. +(FAILED|failed)|^not ok +[0-9]+ ' "$WORK/regress/pg_regress.stdout" || true)
    if [ "$rc" -ne 0 ] && [ "$bad" -eq 0 ]; then
        # pg_regress died before judging tests (initdb, server start, timeout):
        # every test not reported ok failed.
        local n; n=$(echo $tests | wc -w)
        bad=$(( n > ok ? n - ok : 1 ))
        [ "$rc" -eq 124 ] && echo "run-all: pg_regress timed out after ${REGRESS_TIMEOUT}s" >&2
    fi
    PASSED=$((PASSED + ok)); FAILED=$((FAILED + bad))
    if crashes "$WORK/regress/log/postmaster.log"; then
        FAILED=$((FAILED + 1)); FAILED_NAMES+=("pg_regress(crash)")
    fi
    if [ "$rc" -ne 0 ] || [ "$bad" -ne 0 ]; then
        FAILED_NAMES+=("pg_regress")
        if [ -s "$WORK/regress/regression.diffs" ]; then
            log "regression.diffs"
            cat "$WORK/regress/regression.diffs"
        fi
        if [ -f "$WORK/regress/log/postmaster.log" ]; then
            log "tail of postmaster.log"
            tail -n 40 "$WORK/regress/log/postmaster.log"
        fi
        log "tail of redis.log"
        tail -n 20 "$WORK/redis/redis.log" 2>/dev/null || true
    fi
}

# crashes LOG...: true (and prints them) if a server log shows an assertion
# failure, a process that died of a signal no test sends on purpose, or a
# memory or resource check of an assert-enabled server that failed.
crashes() {
    local lg found=1
    for lg in "$@"; do
        [ -f "$lg" ] || continue
        if grep -E 'TRAP:|terminated by signal (4|6|7|8|11)[^0-9]|detected write past chunk end|problem in alloc set|WARNING: .*( leak|still active)' "$lg"; then
            echo "run-all: ^ in ${lg#"$WORK"/}" >&2
            found=0
        fi
    done
    return "$found"
}

# "make installcheck" on its own, as a user runs it (test/installcheck.sh
# starts its own Redis): one more count.
run_installcheck() {
    [ -f "$WORK/Makefile" ] || return 0
    log "make installcheck"
    local rc=0
    run_logged "$WORK/installcheck.out" \
        timeout -k 10 "$REGRESS_TIMEOUT" "${AS_PG[@]}" make -C "$WORK" PG_CONFIG="$PG_CONFIG" installcheck || rc=$?
    if [ "$rc" -eq 0 ]; then
        PASSED=$((PASSED + 1))
    else
        FAILED=$((FAILED + 1)); FAILED_NAMES+=("make-installcheck")
        [ -s "$WORK/regression.diffs" ] && cat "$WORK/regression.diffs"
    fi
}

# --- 5. TAP ------------------------------------------------------------------------
run_tap() {
    local files=() f b
    if [ ${#TAP_ARGS[@]} -gt 0 ]; then
        for f in "${TAP_ARGS[@]}"; do
            b=$(basename "$f")
            [ -f "$WORK/test/t/$b" ] || { echo "run-all: no such TAP test: $f" >&2; FAILED=$((FAILED + 1)); FAILED_NAMES+=("$b(missing)"); continue; }
            files+=("test/t/$b")
        done
    elif [ "$SMOKE" = 1 ]; then
        for b in "${SMOKE_TAP[@]}"; do files+=("test/t/$b.pl"); done
    else
        local skip_glob
        for f in "$WORK"/test/t/*.pl; do
            [ -e "$f" ] || continue
            for skip_glob in ${REDISLOCK_TAP_SKIP:-}; do
                # shellcheck disable=SC2053  # a glob, on purpose
                [[ $(basename "$f") == $skip_glob ]] && continue 2
            done
            files+=("test/t/$(basename "$f")")
        done
    fi
    if [ ${#files[@]} -eq 0 ]; then
        log "WARNING: no TAP tests to run"
        return 0
    fi
    # TESTDIR for PostgreSQL 15's PostgreSQL::Test::Utils, TESTDATADIR and
    # TESTLOGDIR for 16's and later (without them, relative paths that a
    # server started in its own directory cannot open)
    local env=(PATH="$PGBIN:$PATH" TESTDIR="$WORK" PG_REGRESS="$PG_REGRESS"
               TESTDATADIR="$WORK/tmp_check" TESTLOGDIR="$WORK/tmp_check/log"
               PERL5LIB="$WORK/test/lib:$PG_PERL_LIB${PERL5LIB:+:$PERL5LIB}"
               REDISLOCK_TEST_WORKDIR="$WORK")
    # test 405 and the 5xx_redisson_real ones: every version
    if build_redisson "$WORK" ALL "${files[@]}"; then
        [ ${#REDISSON_ENV[@]} -eq 0 ] || PASSED=$((PASSED + 1))
    else
        FAILED=$((FAILED + 1)); FAILED_NAMES+=("redisson-java(build)")
    fi
    env+=("${REDISSON_ENV[@]}")
    # the 53x and 54x ones: redsync, node redlock, redis-py, ShedLock, Spring
    if build_peers "$WORK" "${files[@]}"; then
        [ ${#PEERS_ENV[@]} -eq 0 ] || PASSED=$((PASSED + 1))
    else
        FAILED=$((FAILED + 1)); FAILED_NAMES+=("peers(build)")
    fi
    env+=("${PEERS_ENV[@]}")
    [ "${REDISLOCK_KEEP:-0}" = 1 ] && env+=(PG_TEST_NOCLEAN=1)
    for f in "${files[@]}"; do
        b=$(basename "$f" .pl)
        log "TAP $f"
        local rc=0 t0=$SECONDS
        run_logged "$WORK/tap_$b.out" \
            timeout -k 10 "$TAP_TIMEOUT" "${AS_PG[@]}" "${env[@]}" \
            prove -v -I "$WORK/test/lib" -I "$PG_PERL_LIB" "$f" || rc=$?
        echo "run-all: $b: exit $rc after $((SECONDS - t0)) s"
        local skip crashed=0
        crashes "$WORK"/tmp_check/log/"${b}"_*.log && crashed=1
        # prove -v reports a file's skip_all as "<file> .. skipped: <reason>"
        skip=$(sed -n 's/^[^ ]*\.pl \.\.* skipped: *//p' "$WORK/tap_$b.out" | head -n 1)
        if [ "$rc" -eq 0 ] && [ "$crashed" = 0 ] && [ -n "$skip" ]; then
            SKIPPED=$((SKIPPED + 1)); SKIPPED_NAMES+=("$b: $skip")
            echo "run-all: SKIPPED $f: $skip" >&2
        elif [ "$rc" -eq 0 ] && [ "$crashed" = 0 ]; then
            PASSED=$((PASSED + 1))
        elif [ "$rc" -eq 0 ]; then
            FAILED=$((FAILED + 1)); FAILED_NAMES+=("$b(crash)")
        else
            FAILED=$((FAILED + 1)); FAILED_NAMES+=("$b")
            [ "$rc" -eq 124 ] && echo "run-all: $f timed out after ${TAP_TIMEOUT}s" >&2
            local lg
            for lg in "$WORK/tmp_check/log/regress_log_$b" "$WORK"/tmp_check/log/"${b}"_*.log \
                      "$WORK"/tmp_check/log/redis_"${b}"_*.log; do
                [ -f "$lg" ] || continue
                log "tail of ${lg#"$WORK"/}"
                tail -n 60 "$lg"
            done
        fi
    done
}

# The fault suite has its own runner; its closing line carries its counts.
run_faults() {
    local args=(--no-build) out rc=0
    [ "$DO_DEPS" = 1 ] || args+=(--no-deps)
    log "fault suite: bash test/faults/run.sh ${args[*]}"
    out=$(mktemp)
    bash "$ROOT/test/faults/run.sh" "${args[@]}" 2>&1 | tee "$out" || rc=$?
    local line
    line=$(grep -E '^faults: [0-9]+ passed, [0-9]+ failed$' "$out" | tail -n 1 || true)
    rm -f "$out"
    if [ -n "$line" ]; then
        local p f
        p=$(echo "$line" | sed -E 's/^faults: ([0-9]+) passed.*/\1/')
        f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed$/\1/')
        PASSED=$((PASSED + p)); FAILED=$((FAILED + f))
        [ "$f" -gt 0 ] && FAILED_NAMES+=("faults")
    fi
    if [ -z "$line" ] || { [ "$rc" -ne 0 ] && [ "${f:-1}" -eq 0 ]; }; then
        FAILED=$((FAILED + 1)); FAILED_NAMES+=("faults(runner)")
    fi
}

# Assert-enabled PostgreSQL 16+ builds abort when a setting's C variable
# does not start out equal to its boot value (check_GUC_init).
# META.json is valid PGXN metadata and its version is redislock.control's
# (tools/check-meta.py, Debian's python3 and python3-jsonschema).  The links
# of README.md and docs/ name files and headings that exist
# (tools/check-doc-links.py).  The ACL of docs/security.md grants what
# lua/*.lua runs, and the Errors table of docs/sql-reference.md has every
# SQLSTATE src/*.c raises (tools/check-docs.py).
run_static_checks() {
    log "static check: tools/check-guc-init.pl"
    if perl "$ROOT/tools/check-guc-init.pl" "$ROOT"/src/*.c; then
        PASSED=$((PASSED + 1))
    else
        FAILED=$((FAILED + 1)); FAILED_NAMES+=("check-guc-init")
    fi
    if [ -f "$ROOT/META.json" ]; then
        log "static check: tools/check-meta.py"
        local py=python3
        [ -x /usr/bin/python3 ] && py=/usr/bin/python3
        if "$py" "$ROOT/tools/check-meta.py" "$ROOT"; then
            PASSED=$((PASSED + 1))
        else
            FAILED=$((FAILED + 1)); FAILED_NAMES+=("check-meta")
        fi
    fi
    log "static check: tools/check-doc-links.py"
    if python3 "$ROOT/tools/check-doc-links.py" "$ROOT"; then
        PASSED=$((PASSED + 1))
    else
        FAILED=$((FAILED + 1)); FAILED_NAMES+=("check-doc-links")
    fi
    log "static check: tools/check-docs.py"
    if python3 "$ROOT/tools/check-docs.py" "$ROOT" "$("$PG_CONFIG" --includedir-server)/utils/errcodes.h"; then
        PASSED=$((PASSED + 1))
    else
        FAILED=$((FAILED + 1)); FAILED_NAMES+=("check-docs")
    fi
}

run_static_checks
if [ "$DO_REGRESS" = 1 ]; then run_regress; run_installcheck; fi
if [ "$DO_TAP" = 1 ]; then run_tap; fi
if [ "$DO_FAULTS" = 1 ] && [ ${#TAP_ARGS[@]} -eq 0 ]; then run_faults; fi

[ "$FAILED" -eq 0 ]
