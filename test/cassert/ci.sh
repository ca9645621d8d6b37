#!/usr/bin/env bash
# CI's assert-enabled cell (.ci/run calls it before it tests the installed
# package; it runs on its own as well), as root on Debian 12:
#   1. test/cassert/build-pg.sh: PostgreSQL 15 from Debian's source package
#      with --enable-cassert and USE_VALGRIND, built once per machine and
#      cached under /var/cache/redislock;
#   2. REDISLOCK_PGBIN=<that build> bash test/run-all.sh: builds redislock
#      against it (with PG_CFLAGS, if set) and runs the static checks,
#      pg_regress, make installcheck, the whole TAP suite (a test whose
#      server log shows a TRAP: fails) and the fault suite, whose valgrind
#      run over pg_regress sees overruns inside palloc chunks on this build.
# The package's own run (test/run-all.sh --installed --smoke --no-faults)
# keeps pg_regress, installcheck and the smoke TAP subset.
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

# add_counts OUT: add run-all's closing line "redislock: N passed, M
# failed" in its output OUT, and the names of what failed; no such line
# counts as one failure.
add_counts() {
    local out=$1 line p f listed n
    line=$(grep -E "^redislock: [0-9]+ passed, [0-9]+ failed$" "$out" | tail -n 1 || true)
    if [ -z "$line" ]; then
        FAILED=$((FAILED + 1)); NAMES+=("cassert/run-all(no result)"); return
    fi
    p=$(echo "$line" | sed -E 's/^[^:]*: ([0-9]+) passed.*/\1/')
    f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed$/\1/')
    PASSED=$((PASSED + p)); FAILED=$((FAILED + f))
    listed=$(sed -n -E 's/^run-all: FAILED: //p' "$out" | tail -n 1)
    for n in $listed; do NAMES+=("cassert/$n"); done
    [ "$f" -eq 0 ] || [ -n "$listed" ] || NAMES+=("cassert/run-all")
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

step "REDISLOCK_PGBIN=$PGBIN bash test/run-all.sh"
t0=$SECONDS
REDISLOCK_PGBIN=$PGBIN bash test/run-all.sh 2>&1 | tee "$OUT/run-all.out" || true
add_counts "$OUT/run-all.out"
# where the time went: TAP files (run-all prints each one's), the rest
tap=$(sed -n -E 's/^run-all: [^ ]+: exit [0-9]+ after ([0-9]+) s$/\1/p' "$OUT/run-all.out" |
      awk '{ s += $1 } END { print s + 0 }')
TIMES+=("run-all: $((SECONDS - t0)) s, of which TAP files $tap s")

[ "$FAILED" -eq 0 ]
