#!/usr/bin/env bash
# Builds the real-Redisson test driver (Driver.java) once per Redisson version,
# each against that version's own dependencies, into
#   $REDISLOCK_REDISSON_CACHE/<version>/{redisson-driver.jar,lib/*.jar,stamp}
# (default ${XDG_CACHE_HOME:-$HOME/.cache}/redislock-redisson).  Maven's
# downloads stay in ~/.m2.  A version whose stamp matches the current sources
# is not rebuilt.  test/lib/RealRedisson.pm reads the same directory and the
# same version list (VERSIONS below).
#
# Usage: bash test/redisson-java/build.sh [--force] [VERSION...]
# When the tests run as another user (test/run-all.sh as root runs them as
# postgres), give a cache directory that user can read, to both:
#   REDISLOCK_REDISSON_CACHE=/var/cache/redislock-redisson bash test/redisson-java/build.sh
#   REDISLOCK_REDISSON_CACHE=/var/cache/redislock-redisson bash test/run-all.sh ...
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${REDISLOCK_REDISSON_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/redislock-redisson}
VERSIONS=$(sed -n 's/^our @VERSIONS = qw(\(.*\));$/\1/p' "$HERE/../lib/RealRedisson.pm")
[ -n "$VERSIONS" ] || { echo "build.sh: no version list in test/lib/RealRedisson.pm" >&2; exit 2; }

FORCE=0 DIRS=0
WANT=()
for a in "$@"; do
    case "$a" in
        --force) FORCE=1 ;;
        --dir) DIRS=1 ;;
        -*) echo "usage: $0 [--force] [--dir] [VERSION...]" >&2; exit 2 ;;
        *) WANT+=("$a") ;;
    esac
done
[ ${#WANT[@]} -gt 0 ] || read -r -a WANT <<< "$VERSIONS"

# The stamp: a digest of the sources (RealRedisson.pm computes the same one
# and refuses a stale build).
stamp() {
    (cd "$HERE" && { echo pom.xml; find src -type f -name '*.java'; } | LC_ALL=C sort |
        while read -r f; do printf '%s\n' "$f"; cat "$f"; done | sha256sum | cut -d' ' -f1)
}
STAMP=$(stamp)
# one directory per version and source stamp: checkouts with different
# sources never use or overwrite each other's builds
if [ "$DIRS" = 1 ]; then    # --dir: only print where each driver goes
    for v in "${WANT[@]}"; do echo "$CACHE/$v-${STAMP:0:12}"; done
    exit 0
fi

mkdir -p "$CACHE"
rc=0
for v in "${WANT[@]}"; do
    dir=$CACHE/$v-${STAMP:0:12}
    if [ "$FORCE" = 0 ] && [ -f "$dir/stamp" ] && [ "$(cat "$dir/stamp")" = "$STAMP" ]; then
        echo "build.sh: Redisson $v: up to date ($dir)"
        continue
    fi
    start=$(date +%s)
    tmp=$CACHE/.build-$v.$$
    rm -rf "$tmp"
    # -f: the project is built where it is (target/ is its only output, and
    # it goes to the cache, not into the tree).
    if ! mvn -B -q -Dstyle.color=never -f "$HERE/pom.xml" -Dredisson.version="$v" -Ddriver.out="$tmp" package >&2; then
        echo "build.sh: Redisson $v: BUILD FAILED" >&2
        rm -rf "$tmp"; rc=1; continue
    fi
    # Redisson logs through SLF4J and ships no binding: add slf4j-simple of the
    # very slf4j-api version its pom chose (1.x and 2.x find bindings
    # differently); it writes to stderr.
    api=$(cd "$tmp/lib" && ls slf4j-api-*.jar 2>/dev/null | sed -n 's/^slf4j-api-\(.*\)\.jar$/\1/p' | head -n 1)
    if [ -n "$api" ]; then
        mvn -B -q -Dstyle.color=never -f "$HERE/pom.xml" dependency:copy -Dartifact="org.slf4j:slf4j-simple:$api" \
            -DoutputDirectory="$tmp/lib" -Dredisson.version="$v" -Ddriver.out="$tmp" >&2
    fi
    rm -rf "$dir"
    mkdir -p "$dir"
    mv "$tmp/redisson-driver.jar" "$tmp/lib" "$dir/"
    rm -rf "$tmp"
    echo "$STAMP" > "$dir/stamp"
    chmod -R a+rX "$dir"
    # keep the three newest builds of this version (other checkouts' sources)
    ls -dt "$CACHE/$v"-* 2>/dev/null | tail -n +4 | while read -r old; do rm -rf "$old"; done
    echo "build.sh: Redisson $v: built in $(( $(date +%s) - start )) s ($dir, slf4j-api ${api:-none})"
done
chmod a+rX "$CACHE"
exit $rc
