#!/usr/bin/env bash
# CI's assert-enabled cell (.ci/run calls it before it tests the installed
# package; it runs on its own as well), as root on Debian 12:
#   1. test/cassert/build-pg.sh: PostgreSQL 15 from Debian's source package
#      with --enable-cassert and USE_VALGRIND, built once per machine and
#      cached under /var/cache/redislock;
#   2. REDISLOCK_PGBIN=<that build> bash test/run-all.sh --no-faults: builds
#      redislock against it (with PG_CFLAGS, if set) and runs the static
#      checks, pg_regress, make installcheck and the whole TAP suite on it
#      (a test whose server log shows a TRAP: fails);
#   3. REDISLOCK_PGBIN=<that build> bash test/faults/run.sh --valgrind-only:
#      pg_regress and the multi-node status paths under valgrind memcheck,
#      which on this build sees overruns inside palloc chunks.
# The package's own run (test/run-all.sh --installed --smoke --no-valgrind)
# keeps pg_regress, installcheck, the smoke TAP subset and the fault suite.
#
# Usage: bash test/cassert/ci.sh [COUNTS_FILE]
# Prints how long each part took and ends with the line
#     cassert: N passed, M failed
# With COUNTS_FILE, also writes CASSERT_PASSED, CASSERT_FAILED and
# CASSERT_NAMES (failed checks, space-separated) there as shell assignments,
# for .ci/run to add to its own counts; it is written whatever happens.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
COUNTS=${1:-}

PASSED=0 FAILED=0 NAMES=() TIMES=()
finish() {
    set +e
    local n
    for n in "${TIMES[@]}"; do echo "cassert: $n"; done
    [ ${#NAMES[@]} -gt 0 ] && echo "cassert: FAILED: ${NAMES[*]}"
    echo "cassert: $PASSED passed, $FAILED failed"
    [ -n "$COUNTS" ] && printf 'CASSERT_PASSED=%d\nCASSERT_FAILED=%d\nCASSERT_NAMES=%q\n' \
        "$PASSED" "$FAILED" "${NAMES[*]}" > "$COUNTS"
}
step() { printf '\n=== cassert: %s\n' "$*"; }

# add_counts OUT PREFIX NAME: add the closing line "PREFIX: N passed, M
# failed" of a runner's output OUT; no such line counts as one failure.
add_counts() {
    local out=$1 prefix=$2 name=$3 line p f
    line=$(grep -E "^$prefix: [0-9]+ passed, [0-9]+ failed$" "$out" | tail -n 1 || true)
    if [ -z "$line" ]; then
        FAILED=$((FAILED + 1)); NAMES+=("cassert/$name(no result)"); return
    fi
    p=$(echo "$line" | sed -E 's/^[^:]*: ([0-9]+) passed.*/\1/')
    f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed$/\1/')
    PASSED=$((PASSED + p)); FAILED=$((FAILED + f))
    # the runner's own list of what failed ("run-all: FAILED: a b")
    local listed n
    listed=$(sed -n -E 's/^(run-all|faults): FAILED: //p' "$out" | tail -n 1)
    for n in $listed; do NAMES+=("cassert/$n"); done
    [ "$f" -eq 0 ] || [ -n "$listed" ] || NAMES+=("cassert/$name")
}

OUT=$(mktemp -d /tmp/redislock-cassert.XXXXXX)
trap 'rc=$?; rm -rf "$OUT"; if [ "$rc" -ne 0 ] && [ "$FAILED" -eq 0 ]; then FAILED=1; NAMES+=("cassert(exit $rc)"); fi; finish' EXIT

step "PostgreSQL with assertions and USE_VALGRIND (test/cassert/build-pg.sh)"
t0=$SECONDS
if ! PGBIN=$(bash test/cassert/build-pg.sh); then
    FAILED=$((FAILED + 1)); NAMES+=("cassert/build-pg")
    exit 1
fi
PASSED=$((PASSED + 1))
TIMES+=("build-pg: $((SECONDS - t0)) s")
cat "$(dirname "$PGBIN")/.redislock-cassert" 2>/dev/null | sed 's/^/cassert: /'

step "REDISLOCK_PGBIN=$PGBIN bash test/run-all.sh --no-faults"
t0=$SECONDS
REDISLOCK_PGBIN=$PGBIN bash test/run-all.sh --no-faults 2>&1 | tee "$OUT/run-all.out" || true
add_counts "$OUT/run-all.out" redislock run-all
TIMES+=("run-all (pg_regress, installcheck, whole TAP suite): $((SECONDS - t0)) s")

step "REDISLOCK_PGBIN=$PGBIN bash test/faults/run.sh --valgrind-only"
t0=$SECONDS
REDISLOCK_PGBIN=$PGBIN bash test/faults/run.sh --no-deps --no-build --valgrind-only 2>&1 |
    tee "$OUT/faults.out" || true
add_counts "$OUT/faults.out" faults valgrind
TIMES+=("valgrind over pg_regress: $((SECONDS - t0)) s")

[ "$FAILED" -eq 0 ]
