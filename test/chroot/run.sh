#!/usr/bin/env bash
# Run a command as root inside a Debian chroot made by test/chroot/make.sh:
#   bash test/chroot/run.sh SUITE CMD [ARG...]
#   bash test/chroot/run.sh SUITE            (an interactive shell)
# /proc, /sys, /dev, /dev/pts and a private /dev/shm are mounted for the
# command's lifetime.  The mounts are made in a mount namespace of their own
# (unshare), so the host never sees them, and are undone by the trap on every
# exit path; processes the command left running inside the chroot (a server
# started by a test) are ended at exit, by their ids, so that nothing keeps
# the tree busy (only those of this run: several may share a chroot).  The chroot's folder is REDISLOCK_CHROOT_DIR (default
# /var/cache/redislock/SUITE-root).
set -euo pipefail

[ $# -ge 1 ] || { echo "usage: $0 SUITE [CMD [ARG...]]" >&2; exit 2; }
SUITE=$1; shift
CACHE=${REDISLOCK_CHROOT_CACHE:-/var/cache/redislock}
DIR=${REDISLOCK_CHROOT_DIR:-$CACHE/$SUITE-root}

if [ "$(id -u)" -ne 0 ]; then
    echo "chroot/run: must run as root" >&2; exit 1
fi
if [ ! -x "$DIR/bin/bash" ]; then
    echo "chroot/run: no chroot in $DIR (bash test/chroot/make.sh $SUITE)" >&2; exit 1
fi

# Re-run inside a private mount namespace: even a kill -9 of this script
# leaves no mount behind on the host.
if [ -z "${REDISLOCK_CHROOT_NS:-}" ]; then
    REDISLOCK_CHROOT_NS=1 exec unshare --mount --propagation private -- "$0" "$SUITE" "$@"
fi

MOUNTED=()
undo() {
    local rc=$? i n p pids root ns
    set +e
    trap - EXIT INT TERM HUP
    # processes still running in the chroot that this run started: those
    # in our mount namespace (another run.sh on the same chroot has its own)
    ns=$(readlink /proc/$$/ns/mnt)
    for n in 1 2 3 4 5 6 7 8 9 10; do
        pids=()
        for p in /proc/[0-9]*; do
            root=$(readlink "$p/root" 2>/dev/null) || continue
            [ "$root" = "$DIR" ] && [ "$(readlink "$p/ns/mnt" 2>/dev/null)" = "$ns" ] && pids+=("${p#/proc/}")
        done
        [ ${#pids[@]} -eq 0 ] && break
        if [ "$n" -eq 1 ]; then kill -TERM "${pids[@]}" 2>/dev/null; else kill -KILL "${pids[@]}" 2>/dev/null; fi
        sleep 0.5
    done
    for ((i = ${#MOUNTED[@]} - 1; i >= 0; i--)); do
        umount "${MOUNTED[$i]}" 2>/dev/null || umount -l "${MOUNTED[$i]}" 2>/dev/null ||
            echo "chroot/run: could not unmount ${MOUNTED[$i]}" >&2
    done
    exit "$rc"
}
trap undo EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

mnt() {    # mnt TARGET mount-args...: mount, and remember it for undo
    local target=$DIR$1; shift
    mkdir -p "$target"
    mount "$@" "$target"
    MOUNTED+=("$target")
}
mnt /proc -t proc proc
mnt /sys -t sysfs sysfs
mnt /dev --bind /dev
mnt /dev/pts -t devpts -o newinstance,ptmxmode=0666 devpts
mnt /dev/shm -t tmpfs -o mode=1777 shm
cp -L /etc/resolv.conf "$DIR/etc/resolv.conf" 2>/dev/null || true

# a clean environment, but the settings the scripts inside read
pass=()
while IFS= read -r -d '' kv; do
    case $kv in
        REDISLOCK_CHROOT*) ;;
        REDISLOCK_*=* | PG_CFLAGS=* | DEB_BUILD_OPTIONS=*) pass+=("$kv") ;;
    esac
done < <(env -0)
if [ $# -eq 0 ]; then    # interactive: in the foreground, with the terminal
    env -i HOME=/root TERM="${TERM:-dumb}" LANG=C.UTF-8 \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        "${pass[@]}" chroot "$DIR" bash -l || exit $?
    exit 0
fi
# in the background and waited for, so that a signal to this script runs
# the trap at once (bash defers it during a foreground command)
rc=0
env -i HOME=/root TERM="${TERM:-dumb}" LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    "${pass[@]}" chroot "$DIR" "$@" < /dev/stdin &
wait $! || rc=$?
exit "$rc"
