#!/usr/bin/env bash
# The CI matrix's chroot cells, after the host's own run (.ci/run: Debian 12,
# PostgreSQL 15, Redis 7, every test and the fault suite):
#   bash test/chroot/matrix.sh [HOST_RUN_LOG]
#     experimental  PostgreSQL 19 (sid with Debian's experimental suite):
#                   every TAP test against Valkey 9, pg_regress and make
#                   installcheck against Redis 8, the extension's own
#                   directory (test/dist-volume) against Valkey
#     sid           PostgreSQL 18: the TAP subset of ci-cell.sh against
#                   Redis 8, pg_regress and make installcheck against
#                   Valkey 9, the extension's own directory against Redis
#     trixie        PostgreSQL 17: the TAP subset against Redis 8.0,
#                   pg_regress and make installcheck against Valkey 8.1
# so that both servers are tested on every major.  Only the newest major
# runs every TAP test: one full cell and two subsets keep the lane beside
# the host's assert-enabled cell inside CI's hour (docs/testing.md has the
# times); Valkey has the full suite because Redis has it on the host
# (Redis 7, assert-enabled PostgreSQL 15).  The chroots are made (or taken
# from the cache) at the same time first, then the cells run one after the
# other (test/chroot/ci-cell.sh).  REDISLOCK_CI_CELLS (e.g.
# "experimental:valkey:--full sid:redis:--subset trixie:redis:--subset", the
# default) chooses the cells.
# Ends with a table of the cells and one line counting the host's run (the
# closing line in HOST_RUN_LOG, if given) and every cell:
#   redislock: N passed, M failed
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$(pwd)
CELLS=${REDISLOCK_CI_CELLS:-experimental:valkey:--full sid:redis:--subset trixie:redis:--subset}

PASSED=0 FAILED=0
ROWS=()
add_line() {    # add_line LABEL LINE: count a "... N passed, M failed" line
    local p f
    p=$(echo "$2" | sed -nE 's/.*: ([0-9]+) passed, ([0-9]+) failed$/\1/p')
    f=$(echo "$2" | sed -nE 's/.*: ([0-9]+) passed, ([0-9]+) failed$/\2/p')
    if [ -z "$p" ]; then
        FAILED=$((FAILED + 1)); ROWS+=("$1: no closing line (counted as 1 failed)"); return
    fi
    PASSED=$((PASSED + p)); FAILED=$((FAILED + f)); ROWS+=("$1: $p passed, $f failed$3")
}

if [ $# -ge 1 ] && [ -f "$1" ]; then
    add_line "host (bookworm, PostgreSQL 15, Redis 7)" \
        "$(grep -E '^redislock: [0-9]+ passed, [0-9]+ failed$' "$1" | tail -n 1 || true)" ""
fi

printf '\n=== matrix: chroots (%s)\n' "$(date -u +%T)"
t0=$(date +%s)
declare -A MADE
pids=()
for cell in $CELLS; do
    suite=${cell%%:*}
    [ -n "${MADE[$suite]:-}" ] && continue
    MADE[$suite]=1
    bash "$ROOT/test/chroot/make.sh" "$suite" > "/tmp/redislock-chroot-$suite.log" 2>&1 &
    pids+=("$!:$suite")
done
for ps in "${pids[@]}"; do
    if ! wait "${ps%%:*}"; then
        echo "matrix: making the ${ps#*:} chroot failed:" >&2
        tail -n 30 "/tmp/redislock-chroot-${ps#*:}.log" >&2
    fi
    cat "/tmp/redislock-chroot-${ps#*:}.log"
done
echo "matrix: chroots ready in $(( $(date +%s) - t0 )) s"

for cell in $CELLS; do
    IFS=: read -r suite server mode <<< "$cell"
    printf '\n=== matrix: cell %s %s %s (%s)\n' "$suite" "$server" "$mode" "$(date -u +%T)"
    t=$(date +%s)
    log=$(mktemp /tmp/redislock-cell.XXXXXX)
    # the chroot is made: the cell takes it as it is
    env -u REDISLOCK_CHROOT_REBUILD bash "$ROOT/test/chroot/ci-cell.sh" "$suite" "$server" "$mode" 2>&1 |
        tee "$log" || true
    add_line "$suite/$server ${mode#--} (PostgreSQL $(cat "${REDISLOCK_CHROOT_CACHE:-/var/cache/redislock}/$suite-root/.redislock-pgversion" 2>/dev/null || echo '?'))" \
        "$(grep -E '^ci-cell .*: redislock: [0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1 || true)" \
        ", $(( $(date +%s) - t )) s$(sed -n 's/^ci-cell [^:]*: FAILED: / - failed: /p' "$log" | tail -n 1)$(
            sed -n 's/^ci-cell [^:]*: SKIPPED (not counted): / - skipped: /p' "$log" | tr '\n' ' ')"
    rm -f "$log"
done

printf '\n=== matrix (%s s in all)\n' "$(( $(date +%s) - t0 ))"
printf '  %s\n' "${ROWS[@]}"
echo "redislock: $PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
