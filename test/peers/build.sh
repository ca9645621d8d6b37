#!/usr/bin/env bash
# Builds the real-client peer drivers (test/peers/README.md) into
#   $REDISLOCK_PEERS_CACHE/<client>-<stamp>/   (default /var/cache/redislock/peers)
# one directory per client and source stamp (a digest of test/peers/<client>/,
# the same one test/lib/LockPeer.pm computes and checks): a client whose
# directory is complete (its stamp file written) is not rebuilt, so a cached
# run needs no network and takes well under a second.  Downloads are cached
# beside them (go/mod, go/build, npm-cache, pip-cache).
#   redsync  Go: go build of test/peers/redsync (go.mod/go.sum pinned)
#   redlock  node: npm ci of test/peers/redlock (package-lock.json pinned)
#   redispy  Python: a venv of $REDISLOCK_PEERS_PYTHON (default
#            /usr/bin/python3, which the postgres user can run) with
#            requirements.txt (== pins)
#   java     ShedLock and Spring Integration: bash test/peers/java/build.sh
#            when that file exists (its own cache layout: java/classpath)
#
# Usage: bash test/peers/build.sh [--force] [client...]   (default: all)
# Prints one line per client: "build.sh: <client>: up to date|built in N s (dir)".
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${REDISLOCK_PEERS_CACHE:-/var/cache/redislock/peers}
export REDISLOCK_PEERS_CACHE=$CACHE
ALL=(redsync redlock redispy java)

FORCE=0
WANT=()
for a in "$@"; do
    case "$a" in
        --force) FORCE=1 ;;
        redsync|redlock|redispy|java) WANT+=("$a") ;;
        *) echo "usage: $0 [--force] [redsync|redlock|redispy|java ...]" >&2; exit 2 ;;
    esac
done
EXPLICIT=${#WANT[@]}
[ "$EXPLICIT" -gt 0 ] || WANT=("${ALL[@]}")

# A client's stamp: the sha256 of every file's relative path and text, in
# byte order (LockPeer.pm's source_stamp computes the same).
stamp() {
    (cd "$HERE/$1" && find . -type f ! -path '*/node_modules/*' ! -path '*/__pycache__/*' |
        sed 's|^\./||' | LC_ALL=C sort |
        while read -r f; do printf '%s\n' "$f"; cat "$f"; done | sha256sum | cut -d' ' -f1)
}

need_tool() {
    command -v "$1" >/dev/null 2>&1 && return 0
    echo "build.sh: $2: '$1' not found (bash test/setup-deps.sh installs it)" >&2
    return 1
}

build_redsync() {
    local dir=$1
    need_tool go redsync || return 1
    # the machine's Go, never a downloaded toolchain; module and build
    # caches in the peers cache (GOFLAGS=-modcacherw: removable by rm -rf)
    (cd "$HERE/redsync" &&
        GOMODCACHE=$CACHE/go/mod GOCACHE=$CACHE/go/build GOTOOLCHAIN=local GOFLAGS=-modcacherw \
        go build -trimpath -o "$dir/redsync-driver" .) >&2
}

build_redlock() {
    local dir=$1
    need_tool node redlock || return 1
    need_tool npm redlock || return 1
    cp "$HERE/redlock/package.json" "$HERE/redlock/package-lock.json" "$HERE/redlock/driver.js" "$dir/"
    (cd "$dir" && npm ci --no-audit --no-fund --omit=dev --prefer-offline --loglevel=error \
        --cache "$CACHE/npm-cache") >&2
}

build_redispy() {
    local dir=$1 py=${REDISLOCK_PEERS_PYTHON:-}
    if [ -z "$py" ]; then
        if [ -x /usr/bin/python3 ]; then py=/usr/bin/python3; else py=python3; fi
    fi
    need_tool "$py" redispy || return 1
    "$py" -m venv "$dir/venv" >&2
    PIP_CACHE_DIR=$CACHE/pip-cache "$dir/venv/bin/python" -m pip install --disable-pip-version-check \
        --no-input -q -r "$HERE/redispy/requirements.txt" >&2
    cp "$HERE/redispy/driver.py" "$dir/"
}

# the Go of the official tarball, where a fresh machine has it but its
# PATH does not name it
command -v go >/dev/null 2>&1 || [ ! -x /usr/local/go/bin/go ] || PATH=$PATH:/usr/local/go/bin

mkdir -p "$CACHE"
# one build at a time per cache (CI's lanes may call this together)
exec 9>"$CACHE/.build.lock"
flock 9

rc=0
for c in "${WANT[@]}"; do
    if [ "$c" = java ]; then
        if [ -f "$HERE/java/build.sh" ]; then
            bash "$HERE/java/build.sh" $([ "$FORCE" = 1 ] && echo --force) || { echo "build.sh: java: BUILD FAILED" >&2; rc=1; }
        elif [ "$EXPLICIT" -gt 0 ]; then
            echo "build.sh: java: no test/peers/java/build.sh in this tree" >&2; rc=1
        else
            echo "build.sh: java: skipped (no test/peers/java/build.sh in this tree)"
        fi
        continue
    fi
    s=$(stamp "$c")
    dir=$CACHE/$c-${s:0:12}
    if [ "$FORCE" = 0 ] && [ -f "$dir/stamp" ] && [ "$(cat "$dir/stamp")" = "$s" ]; then
        echo "build.sh: $c: up to date ($dir)"
        continue
    fi
    start=$(date +%s)
    # built in place (a venv does not survive a move); the stamp, written
    # last, is what marks it complete
    rm -rf "$dir"
    mkdir -p "$dir"
    if ! "build_$c" "$dir"; then
        echo "build.sh: $c: BUILD FAILED" >&2
        rm -rf "$dir"; rc=1; continue
    fi
    echo "$s" > "$dir/stamp"
    chmod -R a+rX "$dir"    # the tests run as postgres when run-all.sh runs as root
    # keep the three newest builds of this client (other checkouts' sources)
    ls -dt "$CACHE/$c"-* 2>/dev/null | tail -n +4 | while read -r old; do rm -rf "$old"; done
    echo "build.sh: $c: built in $(( $(date +%s) - start )) s ($dir)"
done
chmod a+rX "$CACHE" 2>/dev/null || true
exit $rc
