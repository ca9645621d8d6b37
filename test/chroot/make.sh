#!/usr/bin/env bash
# Make (or reuse) a Debian chroot with what building, packaging and testing
# redislock needs, for the suite's default PostgreSQL:
#   bash test/chroot/make.sh SUITE            (trixie: PostgreSQL 17, sid: 18)
#   bash test/chroot/make.sh experimental     (sid with experimental: 19)
# Prints the chroot's folder on its last line.  Run as root; needs debootstrap.
# "experimental" is sid with Debian's experimental suite added: the newest
# postgresql-server-dev-NN there (19) and the packages built from the same
# source (libpq) are taken from experimental (apt pinning,
# /etc/apt/preferences.d/90redislock), everything else from sid, and
# postgresql-common is told to support that major
# (/etc/postgresql-common/supported_versions), as sid's does not know it
# yet.  pg_cron is installed where the suite packages it for the major;
# where not, test 405 skips and says so.
#
# Cache: the finished tree is kept as /var/cache/redislock/SUITE.tar.zst
# (REDISLOCK_CHROOT_CACHE); a tree or tarball older than a week
# (REDISLOCK_CHROOT_MAX_DAYS) is made again, so that the chroot follows the
# suite's updates.  REDISLOCK_CHROOT_REBUILD=1 forces it.
# Mirror: REDISLOCK_MIRROR, else the first Debian archive in the host's apt
# sources, else deb.debian.org.  Release files past their Valid-Until (sid's,
# on a snapshot mirror) are accepted.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
HERE=$(pwd)

[ $# -eq 1 ] || { echo "usage: $0 SUITE" >&2; exit 2; }
SUITE=$1
CACHE=${REDISLOCK_CHROOT_CACHE:-/var/cache/redislock}
DIR=${REDISLOCK_CHROOT_DIR:-$CACHE/$SUITE-root}
TARBALL=$CACHE/$SUITE.tar.zst
MAX_DAYS=${REDISLOCK_CHROOT_MAX_DAYS:-7}
READY=.redislock-ready

log() { echo "chroot/make($SUITE): $*" >&2; }
[ "$(id -u)" -eq 0 ] || { log "must run as root"; exit 1; }
mkdir -p "$CACHE"

fresh() {    # fresh FILE: exists and younger than MAX_DAYS
    [ -e "$1" ] && [ -n "$(find "$1" -maxdepth 0 -mmin -$((MAX_DAYS * 24 * 60)))" ]
}

# packages PGV: sets PACKAGES, what the tests need for PostgreSQL PGV
# (test/setup-deps.sh lists the same for the host), and PACKAGES_STAMP.
packages() {
    local cron=()
    bash "$HERE/run.sh" "$SUITE" apt-cache show "postgresql-$1-cron" > /dev/null 2>&1 &&
        cron=(postgresql-"$1"-cron)
    PACKAGES=(
        build-essential debhelper dpkg-dev fakeroot
        postgresql-"$1" postgresql-server-dev-"$1" postgresql-server-dev-all
        "${cron[@]}" gdb default-jre-headless
        libhiredis-dev libssl-dev
        redis-server redis-sentinel valkey-server valkey-sentinel redis-tools
        pgbouncer libipc-run-perl libdbd-pg-perl libredis-perl libio-socket-ssl-perl
        openssl python3-jsonschema procps iproute2 ca-certificates zstd
    )
    PACKAGES_STAMP=$(printf '%s\n' "${PACKAGES[@]}" | sha256sum | cut -c1-16)
}

# up_to_date: a cached tree made from another package list gets what it
# lacks (the list grows with the tests), without being made anew.
up_to_date() {
    local pgv
    pgv=$(cat "$DIR/.redislock-pgversion")
    packages "$pgv"
    [ "$(cat "$DIR/.redislock-packages" 2>/dev/null)" = "$PACKAGES_STAMP" ] && return 0
    log "installing what the package list added since the tree was made"
    bash "$HERE/run.sh" "$SUITE" apt-get update -qq
    bash "$HERE/run.sh" "$SUITE" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -q "${PACKAGES[@]}" > "$CACHE/$SUITE-install.log" 2>&1 || {
        tail -n 30 "$CACHE/$SUITE-install.log" >&2; log "apt-get install failed (log: $CACHE/$SUITE-install.log)"; exit 1; }
    bash "$HERE/run.sh" "$SUITE" apt-get clean
    echo "$PACKAGES_STAMP" > "$DIR/.redislock-packages"
}

if [ "${REDISLOCK_CHROOT_REBUILD:-0}" != 1 ]; then
    if fresh "$DIR/$READY"; then
        log "using $DIR (made $(cat "$DIR/$READY"))"
        up_to_date
        echo "$DIR"; exit 0
    fi
    if fresh "$TARBALL"; then
        log "unpacking $TARBALL"
        rm -rf --one-file-system "$DIR"
        mkdir -p "$DIR"
        tar -C "$DIR" --zstd -xpf "$TARBALL"
        up_to_date
        echo "$DIR"; exit 0
    fi
fi

command -v debootstrap >/dev/null || {
    log "installing debootstrap"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends debootstrap zstd >/dev/null
}
command -v zstd >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq zstd >/dev/null

# the suite debootstrap installs: experimental is an addition to sid
case "$SUITE" in experimental) BASE=sid ;; *) BASE=$SUITE ;; esac

MIRROR=${REDISLOCK_MIRROR:-}
if [ -z "$MIRROR" ]; then
    # deb822 "URIs:" and one-line "deb URI suite" sources; not the security archive
    MIRROR=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
        sed -n -e 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' \
               -e 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]*\).*/\2/p' |
        grep -E '/debian/?$' | head -n 1 || true)
    MIRROR=${MIRROR:-http://deb.debian.org/debian}
fi

# A base system debootstrapped less than a day ago is resumed (a make that
# was interrupted while installing packages); else made anew.
if [ -n "$(find "$DIR/.redislock-debootstrap" -maxdepth 0 -mmin -1440 2>/dev/null)" ] &&
   [ "${REDISLOCK_CHROOT_REBUILD:-0}" != 1 ]; then
    log "resuming in $DIR (debootstrapped $(cat "$DIR/.redislock-debootstrap"))"
else
    log "debootstrap from $MIRROR into $DIR"
    rm -rf --one-file-system "$DIR"
    mkdir -p "$DIR"
    debootstrap --variant=minbase "$BASE" "$DIR" "$MIRROR" > "$CACHE/$SUITE-debootstrap.log" 2>&1 || {
        tail -n 20 "$CACHE/$SUITE-debootstrap.log" >&2
        log "debootstrap failed (log: $CACHE/$SUITE-debootstrap.log)"; exit 1; }
    date -u +%FT%TZ > "$DIR/.redislock-debootstrap"
fi

echo "deb $MIRROR $BASE main" > "$DIR/etc/apt/sources.list"
[ "$SUITE" = "$BASE" ] || echo "deb $MIRROR $SUITE main" >> "$DIR/etc/apt/sources.list"
rm -f "$DIR/etc/apt/sources.list.d/"*
cat > "$DIR/etc/apt/apt.conf.d/90redislock" <<'CONF'
Acquire::Check-Valid-Until "false";
APT::Install-Recommends "false";
Acquire::Languages "none";
CONF
# no manual pages or documentation (nothing reads them; man-db's index alone
# takes a minute)
cat > "$DIR/etc/dpkg/dpkg.cfg.d/90redislock-nodoc" <<'CONF'
path-exclude /usr/share/man/*
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/info/*
CONF
# no service starts inside the chroot (postgresql's and redis's postinst would)
printf '#!/bin/sh\nexit 101\n' > "$DIR/usr/sbin/policy-rc.d"
chmod +x "$DIR/usr/sbin/policy-rc.d"

# The suite's default PostgreSQL major, and what run-all, the Debian build
# and the tests need (test/setup-deps.sh lists the same for the host).
bash "$HERE/run.sh" "$SUITE" apt-get update -qq
if [ "$SUITE" = "$BASE" ]; then
    PGV=$(bash "$HERE/run.sh" "$SUITE" apt-cache depends postgresql |
        sed -n 's/^ *Depends: postgresql-\([0-9][0-9]*\)$/\1/p' | head -n 1)
else    # the newest major the added suite carries
    PGV=$(bash "$HERE/run.sh" "$SUITE" apt-cache pkgnames postgresql-server-dev- |
        sed -n 's/^postgresql-server-dev-\([0-9][0-9]*\)$/\1/p' | sort -n | tail -n 1)
fi
[ -n "$PGV" ] || { log "no postgresql-NN in $SUITE"; exit 1; }
if [ "$SUITE" != "$BASE" ]; then
    # that major's packages, and libpq's (server-dev needs its libpq-dev),
    # from the added suite, whose own priority (NotAutomatic) is below the
    # base's; then the base's postgresql-common supports the major
    cat > "$DIR/etc/apt/preferences.d/90redislock" <<PREF
Package: /^postgresql-(client-|server-dev-|plpython3-|plperl-|pltcl-)?$PGV(-.*)?\$/ libpq5 libpq-dev
Pin: release a=$SUITE
Pin-Priority: 500
PREF
    mkdir -p "$DIR/etc/postgresql-common"
    echo "$PGV" > "$DIR/etc/postgresql-common/supported_versions"
fi
packages "$PGV"
log "installing PostgreSQL $PGV and ${#PACKAGES[@]} packages"
bash "$HERE/run.sh" "$SUITE" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q "${PACKAGES[@]}" > "$CACHE/$SUITE-install.log" 2>&1 || {
    tail -n 30 "$CACHE/$SUITE-install.log" >&2; log "apt-get install failed (log: $CACHE/$SUITE-install.log)"; exit 1; }
bash "$HERE/run.sh" "$SUITE" apt-get clean
# the packaged clusters are not used (the tests make their own)
bash "$HERE/run.sh" "$SUITE" sh -c 'for c in /etc/postgresql/*/main; do [ -d "$c" ] && pg_dropcluster "$(basename "$(dirname "$c")")" main; done; true'
echo "$PGV" > "$DIR/.redislock-pgversion"
echo "$PACKAGES_STAMP" > "$DIR/.redislock-packages"
date -u +%FT%TZ > "$DIR/$READY"

log "caching as $TARBALL"
tar -C "$DIR" --zstd -cpf "$TARBALL.tmp" --one-file-system . && mv "$TARBALL.tmp" "$TARBALL"
echo "$DIR"
