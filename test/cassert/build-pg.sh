#!/usr/bin/env bash
# Builds (once per machine) an assert-enabled, valgrind-aware PostgreSQL 15
# from Debian 12's own source package, for the assert build's test runs
# (test/cassert/ci.sh) and the valgrind run over pg_regress
# (test/faults/valgrind-regress.sh): every Assert of PostgreSQL and of
# redislock runs, and memcheck sees reads and writes past a palloc chunk
# (USE_VALGRIND marks chunk boundaries; Debian's binaries cannot).
#
#   - adds a deb-src entry for bookworm (its own file in
#     /etc/apt/sources.list.d) when no deb-src entry for bookworm exists;
#   - apt-get source postgresql-15 in a temporary directory (Debian's
#     patches applied);
#   - configure --enable-cassert --enable-debug --enable-tap-tests
#     CFLAGS="-Og -g -DUSE_VALGRIND", without LLVM, ICU, readline;
#   - make install of the server, the client programs, contrib/dblink
#     (pg_regress' setup uses it), pg_regress and PostgreSQL::Test::*, where
#     PGXS puts them (lib/pgxs/src/test/{regress,perl} under the prefix);
#   - packs the result as $CACHE/postgresql-<source version>-cassert.tar.gz.
# A later run finds the prefix (or unpacks the tarball) and takes seconds.
#
# Usage (as root, Debian 12): bash test/cassert/build-pg.sh [--rebuild]
# Prints the bin directory of the build (for REDISLOCK_PGBIN) as the only
# line on stdout; progress goes to stderr.
# Environment:
#   REDISLOCK_CASSERT_CACHE=/var/cache/redislock   where prefix and tarball live
#   REDISLOCK_CASSERT_JOBS=$(nproc)                make -j
set -euo pipefail
# CI exports PG_CFLAGS (-Werror ...) for redislock's own build; PostgreSQL's
# makefiles would add it to PostgreSQL's build too (contrib's dblink then
# fails on -Wsign-compare), so none of these reach this build.
unset PG_CFLAGS PG_CPPFLAGS PG_LDFLAGS

CACHE=${REDISLOCK_CASSERT_CACHE:-/var/cache/redislock}
JOBS=${REDISLOCK_CASSERT_JOBS:-$(nproc)}
REBUILD=0
case "${1:-}" in
    --rebuild) REBUILD=1 ;;
    '') ;;
    *) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac

say() { echo "build-pg: $*" >&2; }
if [ "$(id -u)" -ne 0 ]; then
    say "must run as root (apt-get, $CACHE)"; exit 2
fi

# One build at a time on a machine: a second run waits, then finds it cached.
mkdir -p "$CACHE"
chmod 755 "$CACHE"
exec 9> "$CACHE/.cassert-build.lock"
flock 9

# --- the source version ----------------------------------------------------------
# A deb-src entry for bookworm: in a one-line list or a deb822 .sources file.
have_src() {
    local f
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] && grep -qE '^[[:space:]]*deb-src[[:space:]].*[[:space:]]bookworm([[:space:]]|$)' "$f" && return 0
    done
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        # a stanza whose Types has deb-src and whose Suites has bookworm
        awk 'BEGIN { RS = ""; FS = "\n" }
             /(^|\n)Types:[^\n]*deb-src/ && /(^|\n)Suites:[^\n]*bookworm([ \t\n]|$)/ { found = 1 }
             END { exit !found }' "$f" && return 0
    done
    return 1
}
src_versions() {    # newest first
    apt-cache showsrc postgresql-15 2>/dev/null | sed -n 's/^Version: //p' | sort -Vru
}
updated=0
if ! have_src; then
    say "adding /etc/apt/sources.list.d/redislock-bookworm-src.sources (deb-src for bookworm)"
    cat > /etc/apt/sources.list.d/redislock-bookworm-src.sources <<'EOF'
# Debian 12 source packages: redislock's test/cassert/build-pg.sh builds
# PostgreSQL 15 from them with assertions enabled.
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    apt-get update >&2; updated=1
fi
VERSIONS=$(src_versions)
if [ -z "$VERSIONS" ] && [ "$updated" = 0 ]; then
    apt-get update >&2; updated=1
    VERSIONS=$(src_versions)
fi
if [ -z "$VERSIONS" ]; then
    say "apt-cache showsrc postgresql-15 finds no source package"; exit 1
fi

# use_version V: the names of V's build; true if it is ready (built here
# before, or unpacked from its tarball).
use_version() {
    VERSION=$1
    # The source version names the build: "+" and "~" are kept out of the path.
    KEY=postgresql-$(printf '%s' "$VERSION" | tr -c 'A-Za-z0-9.\n-' '_')-cassert
    PREFIX=$CACHE/$KEY
    TARBALL=$CACHE/$KEY.tar.gz
    STAMP=$PREFIX/.redislock-cassert    # written last: a complete build
    [ "$REBUILD" = 0 ] || return 1
    [ -f "$STAMP" ] && [ -x "$PREFIX/bin/postgres" ] && return 0
    [ -f "$TARBALL" ] || return 1
    say "unpacking $TARBALL"
    rm -rf "$PREFIX"
    tar xzf "$TARBALL" -C "$CACHE" && [ -f "$STAMP" ] && return 0
    say "$TARBALL is incomplete: building again"
    return 1
}

TMP=$(mktemp -d /tmp/redislock-pgsrc.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
chmod 755 "$TMP"
# _apt (apt's download user) must be able to write there
chown _apt "$TMP" 2>/dev/null || true
# The newest source version the archive serves: a mirror may list a
# security update's source yet not serve it; the next older one then.
SRC=
for v in $VERSIONS; do
    if use_version "$v"; then
        say "PostgreSQL $VERSION (cassert) ready in $PREFIX"
        echo "$PREFIX/bin"; exit 0
    fi
    say "apt-get source postgresql-15=$v in $TMP"
    if (cd "$TMP" && apt-get source -q "postgresql-15=$v") > "$TMP/source.log" 2>&1; then
        SRC=$(find "$TMP" -mindepth 1 -maxdepth 1 -type d -name 'postgresql-15-*' | head -n 1)
        break
    fi
    say "could not fetch the source of $v: $(grep -m1 '^E:' "$TMP/source.log" || tail -n 1 "$TMP/source.log")"
done
[ -n "$SRC" ] && [ -x "$SRC/configure" ] || { say "no unpacked source in $TMP"; exit 1; }

# --- build ----------------------------------------------------------------------------
start=$(date +%s)
# What configure and make need for this configuration, and no more: zlib
# (pg_dump/pg_basebackup link it), IPC::Run (--enable-tap-tests checks for
# it), valgrind's headers (USE_VALGRIND), dpkg-dev (apt-get source unpacks).
need=()
for p in gcc make bison flex perl pkg-config zlib1g-dev libipc-run-perl valgrind dpkg-dev; do
    [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" = "install ok installed" ] || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    say "installing ${need[*]}"
    [ "$updated" = 1 ] || apt-get update >&2
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends "${need[@]}" >&2
fi

rm -rf "$PREFIX"
say "configure (prefix $PREFIX)"
# -Og: debuggable stacks, yet valgrind's pg_regress run stays within its
# time bound.  Debian's own -fstack-protector etc. are left out: this build
# is for finding our bugs, not for shipping.
(cd "$SRC" && ./configure --prefix="$PREFIX" \
    --enable-cassert --enable-debug --enable-tap-tests \
    --without-llvm --without-icu --without-readline \
    CFLAGS="-Og -g -DUSE_VALGRIND" > "$TMP/configure.log" 2>&1) ||
    { tail -n 30 "$TMP/configure.log" >&2; say "configure failed"; exit 1; }
say "make -j$JOBS"
(cd "$SRC" && make -s -j"$JOBS" > "$TMP/make.log" 2>&1 &&
    make -s -j"$JOBS" -C contrib/dblink >> "$TMP/make.log" 2>&1) ||
    { tail -n 40 "$TMP/make.log" >&2; say "make failed"; exit 1; }
say "make install"
(cd "$SRC" && make -s install > "$TMP/install.log" 2>&1 &&
    make -s -C contrib/dblink install >> "$TMP/install.log" 2>&1 &&
    make -s -C src/test/regress install >> "$TMP/install.log" 2>&1 &&
    make -s -C src/test/perl install >> "$TMP/install.log" 2>&1) ||
    { tail -n 40 "$TMP/install.log" >&2; say "make install failed"; exit 1; }

# the layout test/run-all.sh expects relative to the bin directory
for f in bin/pg_config bin/postgres lib/pgxs/src/test/regress/pg_regress \
         lib/pgxs/src/test/perl/PostgreSQL/Test/Cluster.pm lib/dblink.so; do
    [ -e "$PREFIX/$f" ] || { say "missing after install: $PREFIX/$f"; exit 1; }
done
grep -q '^#define USE_ASSERT_CHECKING 1' "$("$PREFIX/bin/pg_config" --includedir-server)/pg_config.h" ||
    { say "USE_ASSERT_CHECKING is not defined in the installed pg_config.h"; exit 1; }
printf 'source %s\nbuilt %s in %ss\n' "$VERSION" "$(date -u +%FT%TZ)" "$(( $(date +%s) - start ))" > "$STAMP"
say "packing $TARBALL"
tar czf "$TARBALL.tmp" -C "$CACHE" "$KEY" && mv "$TARBALL.tmp" "$TARBALL"
say "PostgreSQL $VERSION (cassert) built in $(( $(date +%s) - start ))s: $PREFIX"
echo "$PREFIX/bin"
