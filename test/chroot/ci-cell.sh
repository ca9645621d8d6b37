#!/usr/bin/env bash
# One cell of the CI matrix: redislock's Debian package for the PostgreSQL of
# a Debian suite, built, installed and tested in a chroot of that suite
# (test/chroot/make.sh, cached):
#   bash test/chroot/ci-cell.sh SUITE SERVER [--full | --subset]
#     SUITE   trixie (PostgreSQL 17), sid (18) or experimental (sid with
#             Debian's experimental suite: 19)
#     SERVER  redis or valkey: the server of the TAP tests; pg_regress and
#             "make installcheck" run against the other one, so that every
#             cell tests its PostgreSQL with both
#     --full    every TAP test
#     --subset  the TAP tests named in SUBSET below (default)
# Steps, as .ci/run's on the host: dpkg-buildpackage -b -us -uc with every
# warning an error (PG_CFLAGS, checked on each object), debian/control made
# for the suite's PostgreSQL (pg_buildext updatecontrol); lintian (the
# host's) on the package, errors failing; the .deb installed
# with apt (its Depends must resolve); test/run-all.sh --installed; on
# PostgreSQL 18 and later, test/dist-volume/run.sh against the TAP tests'
# server (make dist-volume, and redislock loaded from that directory alone,
# the package's files and hiredis hidden).  The fault suite (network
# namespaces, valgrind) runs only in the host's cell.
# Run as root.  Ends with the line
#   ci-cell SUITE/SERVER: redislock: N passed, M failed
# counting the package build, the flags check, lintian, the install, the static
# checks (once per run-all: twice), pg_regress tests, make installcheck, TAP
# files and (18 and later) dist-volume's build, hiding and TAP file.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$(pwd)

# The subset: one test or more of every area, and every test whose outcome
# has differed between PostgreSQL, DBD::Pg or server versions (030 cancel,
# 090/095 PostgreSQL's wording, 160 crash wording, 215 cluster addresses,
# 380 encodings, 397 the wait event's name).  Areas: the harness (000),
# waits and wake-ups (010, 020), cancel (030), session end (040), Redisson's layout (050), Redis failures
# (070), settings and secrets (090, 095), the watchdog and leases (110, 130),
# crash restart (160), replicas (170), Sentinel (190), Redlock (200),
# Cluster (210, 215), TLS (300), read-write locks (320), multi-locks (340),
# semaphores (350), deadlocks (370), encodings (380), pgbouncer (385), the
# listener (390), single-user mode (395), wait events (397), database jobs
# (405 pg_cron, 410 procedures, 420 hot standbys: tested on every PostgreSQL
# whose pg_cron Debian packages).  About 6
# minutes where the whole suite takes 14.  test/pg16/ci.sh runs the same list.
SUBSET=(000_harness 010_blocking 020_fair_fifo 030_cancel 040_session_end
        050_redisson_compat 070_redis_failures 090_connection_settings 095_secrets
        110_worker 130_lost_and_commit_guard 135_on_lock_lost 160_crash_restart
        170_sync_replicas_and_limits 190_sentinel 200_redlock 210_cluster
        215_cluster_node_churn 300_tls 320_rwlock 340_multilock
        350_semaphore_redisson 370_deadlock 380_encodings 385_pgbouncer
        390_listener 395_single_user 397_wait_event
        405_pg_cron 410_procedures 420_hot_standby)


usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
[ $# -ge 2 ] || { usage >&2; exit 2; }
SUITE=$1 SERVER=$2 MODE=${3:---subset}
case "$SERVER" in
    redis) TAP_SERVER=redis-server REGRESS_SERVER=valkey-server ;;
    valkey) TAP_SERVER=valkey-server REGRESS_SERVER=redis-server ;;
    *) usage >&2; exit 2 ;;
esac
case "$MODE" in --full | --subset) ;; *) usage >&2; exit 2 ;; esac
TAG="ci-cell $SUITE/$SERVER"
export PG_CFLAGS="-Wall -Wextra -Werror -Wno-unused-parameter"

PASSED=0 FAILED=0 NAMES=() SKIPS=()
DIR= BUILD= PKG=
finish() {
    [ ${#SKIPS[@]} -gt 0 ] && printf '%s: SKIPPED (not counted): %s\n' "$TAG" "${SKIPS[@]}"
    [ ${#NAMES[@]} -gt 0 ] && echo "$TAG: FAILED: ${NAMES[*]}"
    echo "$TAG: redislock: $PASSED passed, $FAILED failed"
    [ "$FAILED" -eq 0 ]
}
pass() { PASSED=$((PASSED + 1)); }
fail() { FAILED=$((FAILED + 1)); NAMES+=("$1"); }
step() { printf '\n=== %s: %s (%s)\n' "$TAG" "$*" "$(date -u +%T)"; }
inside() { bash "$ROOT/test/chroot/run.sh" "$SUITE" "$@"; }

cleanup() {
    local rc=$?
    set +e
    trap - EXIT INT TERM HUP
    if [ -n "$PKG" ]; then
        inside env DEBIAN_FRONTEND=noninteractive apt-get purge -y -q "$PKG" > /dev/null 2>&1 ||
            echo "$TAG: could not purge $PKG" >&2
    fi
    [ -n "$BUILD" ] && [ "${REDISLOCK_KEEP:-0}" != 1 ] && rm -rf --one-file-system "$DIR$BUILD"
    if [ "$rc" -ne 0 ] && [ "$FAILED" -eq 0 ]; then fail "ci-cell(exit $rc)"; fi
    finish
    exit $?
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

[ "$(id -u)" -eq 0 ] || { echo "$TAG: must run as root" >&2; fail not-root; exit 1; }

step "chroot"
DIR=$(bash "$ROOT/test/chroot/make.sh" "$SUITE" | tail -n 1)
PGV=$(cat "$DIR/.redislock-pgversion")

# --- the package ------------------------------------------------------------
# Built in a copy of the tracked files (and any not yet committed).
VERSION=$(dpkg-parsechangelog -l debian/changelog -S Version)
BUILD=/build/redislock-ci
SRC=$BUILD/redislock-${VERSION%-*}
rm -rf --one-file-system "$DIR$BUILD"
mkdir -p "$DIR$SRC"
if git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
    git -C "$ROOT" ls-files -co --exclude-standard -z | tar cf - --null -T - | tar xf - -C "$DIR$SRC"
else
    tar cf - --exclude=.git . | tar xf - -C "$DIR$SRC"
fi

# The real Redisson client's driver (tests 050, 135, 210, 405 and 410 run
# the newest version): built on the host (.ci/run builds every version before
# the matrix starts) and run on the chroot's JRE; the chroot has no Maven, and
# build.sh finds it up to date by its stamp.
JAVA_CACHE=${REDISLOCK_REDISSON_CACHE:-/var/cache/redislock/redisson}
NEWEST=$(sed -n 's/^our @VERSIONS = qw(.* \([^ ]*\));$/\1/p' "$ROOT/test/lib/RealRedisson.pm")
JAVA_ENV=()
JAVA_DIR=$(REDISLOCK_REDISSON_CACHE=$JAVA_CACHE bash "$ROOT/test/redisson-java/build.sh" --dir "$NEWEST")
if [ -n "$NEWEST" ] && [ -f "$JAVA_DIR/stamp" ]; then
    mkdir -p "$DIR$BUILD/redisson"
    cp -r "$JAVA_DIR" "$DIR$BUILD/redisson/"
    chmod -R a+rX "$DIR$BUILD/redisson"
    JAVA_ENV=(REDISLOCK_REDISSON_CACHE="$BUILD/redisson" REDISLOCK_REDISSON_VERSIONS="$NEWEST")
fi

step "dpkg-buildpackage -b -us -uc (redislock $VERSION, PostgreSQL $PGV)"
brc=0
inside sh -c "cd '$SRC' && pg_buildext updatecontrol && dpkg-buildpackage -b -us -uc" 2>&1 |
    tee "$DIR$BUILD/build.log" || brc=$?
if [ "$brc" -eq 0 ]; then pass; else fail dpkg-buildpackage; exit 1; fi
ncc=$(grep -cE '^[^ ]*(gcc|cc|clang)[^ ]* .* -c -o src/[a-z_]+\.o ' "$DIR$BUILD/build.log" || true)
nwe=$(grep -E '^[^ ]*(gcc|cc|clang)[^ ]* .* -c -o src/[a-z_]+\.o ' "$DIR$BUILD/build.log" | grep -cF -- " $PG_CFLAGS " || true)
echo "$TAG: $nwe of $ncc objects compiled with PG_CFLAGS=\"$PG_CFLAGS\""
if [ "$ncc" -gt 0 ] && [ "$ncc" -eq "$nwe" ]; then pass; else fail pg_cflags; fi

DEB=$BUILD/postgresql-$PGV-redislock_${VERSION}_$(dpkg --print-architecture).deb
[ -f "$DIR$DEB" ] || { echo "$TAG: no $DEB" >&2; ls "$DIR$BUILD" >&2; fail deb; exit 1; }
PKG=postgresql-$PGV-redislock
dpkg-deb -I "$DIR$DEB" | sed -n 's/^ \(Package\|Version\|Depends\):/  \1:/p'
step "lintian on the package (the host's lintian, errors fail, as for 15's)"
if ! command -v lintian >/dev/null 2>&1; then
    SKIPS+=("lintian (not installed on the host)")
elif lintian --fail-on error --display-info "$DIR$BUILD"/redislock_"${VERSION}"_*.changes; then
    pass
else
    fail lintian
fi
step "installing ${DEB##*/}"
# with its debug symbols, which test 393's gdb needs (the library is stripped
# and, from PostgreSQL 16 on, its functions are hidden)
DBG=$BUILD/postgresql-$PGV-redislock-dbgsym_${VERSION}_$(dpkg --print-architecture).deb
DEBS=("$DEB")
[ -f "$DIR$DBG" ] && DEBS+=("$DBG")
if inside env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${DEBS[@]}"; then pass; else fail apt-install; exit 1; fi

# --- the tests --------------------------------------------------------------
# run_all SERVER ARGS...: test/run-all.sh --installed in the chroot against
# that server; its counts are added to ours.
run_all() {
    local server=$1 out rc=0 line
    shift
    out=$DIR$BUILD/run-all-$server.log
    inside env REDISLOCK_PGBIN="/usr/lib/postgresql/$PGV/bin" REDISLOCK_REDIS_SERVER="$server" "${JAVA_ENV[@]}" \
        bash "$SRC/test/run-all.sh" --installed --no-deps --no-faults "$@" 2>&1 | tee "$out" || rc=$?
    line=$(grep -E '^redislock: [0-9]+ passed, [0-9]+ failed$' "$out" | tail -n 1 || true)
    if [ -z "$line" ]; then
        fail "run-all($server, exit $rc)"; return
    fi
    PASSED=$((PASSED + $(echo "$line" | sed -E 's/^redislock: ([0-9]+) passed.*/\1/')))
    FAILED=$((FAILED + $(echo "$line" | sed -E 's/.* ([0-9]+) failed$/\1/')))
    # shellcheck disable=SC2207  # names are single words
    NAMES+=($(sed -n 's/^run-all: FAILED: //p' "$out" | tail -n 1))
    local skip
    while IFS= read -r skip; do SKIPS+=("$skip"); done < <(sed -n 's/^run-all: SKIPPED (not counted): //p' "$out")
}

step "pg_regress and make installcheck against $REGRESS_SERVER"
run_all "$REGRESS_SERVER" --regress-only

files=()
if [ "$MODE" = --subset ]; then
    for t in "${SUBSET[@]}"; do files+=("$t.pl"); done
else
    # every TAP test but the real Redisson client's, which runs once, on the
    # host (.ci/run): it needs Java, Maven and eight Redisson builds, and
    # what it tests does not depend on the PostgreSQL major
    # (test/t/5*.pl, as REDISLOCK_TAP_SKIP there)
    for f in test/t/*.pl; do
        b=$(basename "$f" .pl)
        [[ $b == 5* ]] || files+=("$b.pl")
    done
fi
step "TAP (${MODE#--}${files:+: ${#files[@]} files}) against $TAP_SERVER"
run_all "$TAP_SERVER" --tap-only "${files[@]}"

# --- the extension's own directory (extension_control_path: 18 and later) ----
if [ "$PGV" -ge 18 ]; then
    step "make dist-volume, test/dist-volume/run.sh against $TAP_SERVER"
    out=$DIR$BUILD/dist-volume.log
    inside env REDISLOCK_PGBIN="/usr/lib/postgresql/$PGV/bin" REDISLOCK_REDIS_SERVER="$TAP_SERVER" \
        bash "$SRC/test/dist-volume/run.sh" 2>&1 | tee "$out" || true
    line=$(grep -E '^dist-volume: [0-9]+ passed, [0-9]+ failed$' "$out" | tail -n 1 || true)
    if [ -z "$line" ]; then
        fail "dist-volume(no result)"
    else
        PASSED=$((PASSED + $(echo "$line" | sed -E 's/^dist-volume: ([0-9]+) passed.*/\1/')))
        FAILED=$((FAILED + $(echo "$line" | sed -E 's/.* ([0-9]+) failed$/\1/')))
        # shellcheck disable=SC2207  # names are single words
        NAMES+=($(sed -n 's/^dist-volume: FAILED: //p' "$out" | tail -n 1 | sed 's/[^ ]*/dist-volume:&/g'))
    fi
fi

[ "$FAILED" -eq 0 ]
