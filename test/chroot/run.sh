#!/usr/bin/env bash
# Run a command as root inside a Debian tree made by test/chroot/make.sh:
#   bash test/chroot/run.sh SUITE CMD [ARG...]
#   bash test/chroot/run.sh SUITE            (an interactive shell)
# /proc, /sys, /dev, /dev/pts and a private /dev/shm are mounted for the
# command's lifetime.  The mounts are made in a mount namespace of their own
# (unshare), so the host never sees them, and are undone by the trap on every
# exit path.  The command runs with the tree as the root of its mount
# namespace (pivot_root, not chroot: a chrooted process may not make user
# namespaces, which test 092 needs) and as the first process of a PID
# namespace of its own, so that whatever it leaves running (a server started
# by a test) ends with it, and nothing keeps the tree busy; several runs may
# share a tree.  The tree is REDISLOCK_CHROOT_DIR (default
# /var/cache/redislock/SUITE-root).
set -euo pipefail

[ $# -ge 1 ] || { echo "usage: $0 SUITE [CMD [ARG...]]" >&2; exit 2; }
SUITE=$1; shift
CACHE=${REDISLOCK_CHROOT_CACHE:-/var/cache/redislock}
DIR=${REDISLOCK_CHROOT_DIR:-$CACHE/$SUITE-root}
OLD=.redislock-oldroot

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
CHILD=
undo() {
    local rc=$? i
    set +e
    trap - EXIT INT TERM HUP
    # the command's PID namespace ends with its first process (--kill-child)
    if [ -n "$CHILD" ] && kill -0 "$CHILD" 2>/dev/null; then
        kill -TERM "$CHILD" 2>/dev/null
        for i in $(seq 1 50); do kill -0 "$CHILD" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$CHILD" 2>/dev/null
        wait "$CHILD" 2>/dev/null
    fi
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
# the tree a mount point of its own first (pivot_root needs one), then the
# file systems under it
mount --bind "$DIR" "$DIR"
MOUNTED+=("$DIR")
mnt /proc -t proc proc
mnt /sys -t sysfs sysfs
mnt /dev --bind /dev
mnt /dev/pts -t devpts -o newinstance,ptmxmode=0666 devpts
mnt /dev/shm -t tmpfs -o mode=1777 shm
mkdir -p "$DIR/$OLD"
cp -L /etc/resolv.conf "$DIR/etc/resolv.conf" 2>/dev/null || true

# a clean environment, but the settings the scripts inside read
pass=()
while IFS= read -r -d '' kv; do
    case $kv in
        REDISLOCK_CHROOT*) ;;
        REDISLOCK_*=* | PG_CFLAGS=* | DEB_BUILD_OPTIONS=*) pass+=("$kv") ;;
    esac
done < <(env -0)
[ $# -gt 0 ] || set -- bash -l

# In new mount and PID namespaces: make the tree the root (the host's
# pivot_root, while its binaries are still reachable), drop the old root,
# mount a /proc of the new PID namespace, and run the command there.
inner='umount -l /'"$OLD"' && mount -t proc proc /proc && exec "$@"'
launch=(unshare --mount --pid --fork --kill-child -- /bin/sh -c
        'cd "$1" && /usr/sbin/pivot_root . "$2" && cd / && shift 2 && exec "$@"' sh "$DIR" "$OLD"
        /usr/bin/env -i HOME=/root TERM="${TERM:-dumb}" LANG=C.UTF-8
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "${pass[@]}"
        /bin/sh -c "$inner" sh "$@")
if [ -t 0 ]; then    # interactive: in the foreground, with the terminal
    "${launch[@]}" || exit $?
    exit 0
fi
# in the background and waited for, so that a signal to this script runs
# the trap at once (bash defers it during a foreground command)
rc=0
"${launch[@]}" < /dev/stdin &
CHILD=$!
wait "$CHILD" || rc=$?
CHILD=
exit "$rc"
