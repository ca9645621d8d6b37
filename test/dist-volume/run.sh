#!/usr/bin/env bash
# redislock from an extension directory of its own, as PostgreSQL 18 and
# later load it from an image volume (CloudNativePG) or a container layer:
#   bash test/dist-volume/run.sh
# Builds the directory with "make dist-volume" (the library with hiredis
# linked in, the control and SQL files), copies it to a root-owned
# directory the servers can only read, and, in a mount namespace of its
# own, hides every file of redislock and of hiredis in the system's
# directories (the PostgreSQL's pkglibdir and its bitcode, its
# sharedir/extension, every library directory of the dynamic linker's
# cache): an overlay on each such directory, the files removed in it, so
# that they are absent for this script's processes only (the system keeps
# them; an installed package stays installed).  Then runs
# test/dist-volume/t/*.pl as postgres with REDISLOCK_DIST_VOLUME naming the
# directory: PostgreSQL started with extension_control_path,
# dynamic_library_path and shared_preload_libraries pointing there.
# Ends with the line
#     dist-volume: N passed, M failed
# (the build, the hiding, each TAP file).  Run as root (mount namespace,
# overlays); PostgreSQL 18 or later (REDISLOCK_PGBIN, else the pg_config on
# PATH, as test/run-all.sh); a Redis server as for the TAP tests
# (REDISLOCK_REDIS_SERVER).  .ci's chroot cells of 18 and 19 run it
# (test/chroot/ci-cell.sh).  REDISLOCK_KEEP=1 keeps the work directory.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TAP_TIMEOUT=${REDISLOCK_TAP_TIMEOUT:-600}

if [ "$(id -u)" -ne 0 ]; then
    echo "dist-volume: must run as root (mount namespace, overlays; servers run as postgres)" >&2
    exit 2
fi
# Everything below in a private mount namespace: the overlays end with it.
if [ -z "${REDISLOCK_DIST_VOLUME_NS:-}" ]; then
    REDISLOCK_DIST_VOLUME_NS=1 exec unshare --mount --propagation private -- bash "$0" "$@"
fi

PASSED=0 FAILED=0 NAMES=()
WORK=
# shellcheck source=../lib/common.sh
. "$ROOT/test/lib/common.sh"
log() { printf '\n=== dist-volume: %s\n' "$*"; }
pass() { PASSED=$((PASSED + 1)); }
fail() { FAILED=$((FAILED + 1)); NAMES+=("$1"); }

cleanup() {
    local rc=$?
    set +e
    trap - EXIT INT TERM HUP
    stop_child
    if [ -n "$WORK" ] && [ -d "$WORK" ]; then
        stop_leftovers "$WORK" dist-volume
        if [ "${REDISLOCK_KEEP:-0}" = 1 ] || [ "$FAILED" -gt 0 ] || [ "$rc" -ne 0 ]; then
            echo "dist-volume: work dir kept: $WORK"
        else
            rm -rf --one-file-system "$WORK"
        fi
    fi
    [ "$rc" -ne 0 ] && [ "$FAILED" -eq 0 ] && fail "run.sh(exit $rc)"
    [ ${#NAMES[@]} -gt 0 ] && echo "dist-volume: FAILED: ${NAMES[*]}"
    echo "dist-volume: $PASSED passed, $FAILED failed"
    [ "$FAILED" -eq 0 ]
    exit $?
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

pg_paths || { fail postgresql; exit 1; }
if [ "$PG_MAJOR" -lt 18 ]; then
    echo "dist-volume: PostgreSQL $PG_MAJOR has no extension_control_path (18 and later)" >&2
    fail "postgresql-$PG_MAJOR"; exit 1
fi
WORK=$(mktemp -d /tmp/redislock-dist-volume.XXXXXX)
chmod 755 "$WORK"

# --- 1. the directory --------------------------------------------------------------
# Built in the tree, as "make" builds; copied to where the servers may read
# but not write, as a read-only volume.
log "make dist-volume (PostgreSQL $PG_MAJOR)"
VOLUME=$WORK/extensions/redislock
if make -C "$ROOT" -s PG_CONFIG="$PG_CONFIG" dist-volume; then
    mkdir -p "$WORK/extensions"
    cp -r "$ROOT/dist-volume/redislock" "$VOLUME"
    chmod -R a+rX,go-w "$WORK/extensions"
    find "$VOLUME" -type f | sort
    pass
else
    fail make-dist-volume; exit 1
fi

# --- 2. nothing of redislock or hiredis in the system's directories ---------------
# hide DIR PATTERN...: DIR's entries matching a pattern removed in an
# overlay of DIR (upper and work directories under WORK).
n=0
hide() {
    local dir=$1 p f found=()
    shift
    [ -d "$dir" ] || return 0
    for p in "$@"; do
        for f in "$dir"/$p; do [ -e "$f" ] || [ -L "$f" ] && found+=("$f"); done
    done
    [ ${#found[@]} -gt 0 ] || return 0
    n=$((n + 1))
    mkdir -p "$WORK/overlay/$n/upper" "$WORK/overlay/$n/work"
    mount -t overlay "redislock-hide-$n" \
        -o "lowerdir=$dir,upperdir=$WORK/overlay/$n/upper,workdir=$WORK/overlay/$n/work" "$dir" &&
        rm -rf "${found[@]}" &&
        echo "dist-volume: hidden in $dir: ${found[*]##*/}"
}
log "hiding redislock and hiredis from the system's directories"
PKGLIBDIR=$("$PG_CONFIG" --pkglibdir)
SHAREDIR=$("$PG_CONFIG" --sharedir)
libdirs=$( { ldconfig -p | sed -n 's|.* => \(.*\)/[^/]*$|\1|p'; echo /usr/lib /usr/local/lib; } | sort -u)
hok=1
hide "$PKGLIBDIR" 'redislock*' || hok=0
hide "$PKGLIBDIR/bitcode" 'redislock*' || hok=0
hide "$SHAREDIR/extension" 'redislock*' || hok=0
for d in $libdirs; do hide "$d" 'libhiredis*' || hok=0; done
left=$(find "$PKGLIBDIR" "$SHAREDIR/extension" $libdirs -maxdepth 2 \
            \( -name 'redislock*' -o -name 'libhiredis*' \) 2>/dev/null || true)
if [ "$hok" = 1 ] && [ -z "$left" ]; then
    pass
else
    echo "dist-volume: still there: ${left:-(an overlay failed)}" >&2
    fail hide; exit 1
fi

# --- 3. the TAP tests, as postgres ------------------------------------------------
mkdir -p "$WORK/tests"
cp -r "$ROOT/test" "$ROOT/sql" "$ROOT/lua" "$WORK/tests/"
chown -R postgres: "$WORK/tests"
cd "$WORK/tests"
env=(PATH="$PGBIN:$PATH" TESTDIR="$WORK/tests" PG_REGRESS="$PG_REGRESS"
     TESTDATADIR="$WORK/tests/tmp_check" TESTLOGDIR="$WORK/tests/tmp_check/log"
     PERL5LIB="$WORK/tests/test/lib:$WORK/tests/test/redisson:$PG_PERL_LIB${PERL5LIB:+:$PERL5LIB}"
     REDISLOCK_TEST_WORKDIR="$WORK/tests" REDISLOCK_DIST_VOLUME="$VOLUME")
[ "${REDISLOCK_KEEP:-0}" = 1 ] && env+=(PG_TEST_NOCLEAN=1)
for f in test/dist-volume/t/*.pl; do
    b=$(basename "$f" .pl)
    log "TAP $f (PostgreSQL $PG_MAJOR, $REDIS_SERVER)"
    rc=0
    run_waited timeout -k 10 "$TAP_TIMEOUT" "${AS_PG[@]}" "${env[@]}" prove -v "$f" || rc=$?
    if [ "$rc" -eq 0 ]; then
        pass
    else
        fail "$b"
        for lg in "$WORK"/tests/tmp_check/log/*"$b"*; do
            [ -f "$lg" ] || continue
            log "tail of ${lg#"$WORK"/}"; tail -n 40 "$lg"
        done
    fi
done
