#!/usr/bin/env bash
# Builds the ShedLock + Spring Integration peer driver (Driver.java, the
# versions pinned in pom.xml) into
#   ${REDISLOCK_PEERS_CACHE:-/var/cache/redislock/peers}/java/
#     peers-driver.jar  lib/*.jar  classpath  stamp
# with Maven's downloads in $CACHE/java/m2, so that the tests run it as
#   java -cp "$(cat $CACHE/java/classpath)" redislock.peers.Driver <client> opt=value...
# A build whose stamp (a digest of this directory's files) is current is left
# alone, without calling Maven: once built, nothing here needs the network.
# A rebuild tries Maven offline first (everything already in m2), then online.
#
# Usage: bash test/peers/java/build.sh [--force] [--dir]
#   --dir: only print the directory the driver goes to
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${REDISLOCK_PEERS_CACHE:-/var/cache/redislock/peers}
DIR=$CACHE/java

FORCE=0
for a in "$@"; do
    case "$a" in
        --force) FORCE=1 ;;
        --dir) echo "$DIR"; exit 0 ;;
        *) echo "usage: $0 [--force] [--dir]" >&2; exit 2 ;;
    esac
done

# the stamp: a digest of every file here (path and text, in byte order of
# the paths), the one test/peers/build.sh and test/lib/LockPeer.pm compute
stamp() {
    (cd "$HERE" && find . -type f ! -path '*/node_modules/*' ! -path '*/__pycache__/*' |
        sed 's|^\./||' | LC_ALL=C sort |
        while read -r f; do printf '%s\n' "$f"; cat "$f"; done | sha256sum | cut -d' ' -f1)
}
STAMP=$(stamp)

# current: the stamp matches and every jar of the classpath is there
current() {
    [ -f "$DIR/stamp" ] && [ "$(cat "$DIR/stamp")" = "$STAMP" ] && [ -f "$DIR/classpath" ] || return 1
    local IFS=:
    for j in $(cat "$DIR/classpath"); do [ -f "$j" ] || return 1; done
}
if [ "$FORCE" = 0 ] && current; then
    echo "build.sh: java (shedlock, spring): up to date ($DIR)"
    exit 0
fi

command -v mvn >/dev/null || { echo "build.sh: java: mvn not found (apt-get install maven)" >&2; exit 1; }
start=$(date +%s)
mkdir -p "$DIR/m2"
tmp=$DIR/.build.$$
trap 'rm -rf "$tmp"' EXIT
rm -rf "$tmp"
mvn_package() {
    # -f: the project is built where it is; its output (driver.out) goes to
    # the cache, not into the tree
    mvn -B -q -Dstyle.color=never "$@" -Dmaven.repo.local="$DIR/m2" -f "$HERE/pom.xml" \
        -Ddriver.out="$tmp" package >&2
}
how=offline
if ! mvn_package -o 2>/dev/null; then
    how=online
    rm -rf "$tmp"
    mvn_package || { echo "build.sh: java: BUILD FAILED" >&2; exit 1; }
fi
rm -rf "$DIR/peers-driver.jar" "$DIR/lib" "$DIR/classpath" "$DIR/stamp"
mv "$tmp/peers-driver.jar" "$tmp/lib" "$DIR/"
# explicit jar names, not lib/*: the tests expand $(cat classpath) unquoted
{ printf '%s' "$DIR/peers-driver.jar"; for j in "$DIR"/lib/*.jar; do printf ':%s' "$j"; done; echo; } > "$DIR/classpath"
echo "$STAMP" > "$DIR/stamp"
chmod a+rX "$CACHE"; chmod -R a+rX "$DIR"
echo "build.sh: java (shedlock, spring): built $how in $(( $(date +%s) - start )) s ($DIR, $(ls "$DIR/lib" | wc -l) jars)"
