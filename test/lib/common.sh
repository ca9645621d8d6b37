# shellcheck shell=bash
# test/lib/common.sh: shell helpers shared by test/run-all.sh,
# test/faults/run.sh, test/faults/valgrind-regress.sh, test/sandbox.sh and
# bench/run.sh. It sets RUN_USER, AS_PG (a command prefix that runs as the
# postgres user when we are root: PostgreSQL refuses to run as root) and
# SUDO, the PostgreSQL to use (pg_paths) and the Redis server (redis_paths),
# and defines the functions below.

# shellcheck disable=SC2034  # RUN_USER and SUDO are for the sourcing script
if [ "$(id -u)" -eq 0 ]; then
    RUN_USER=postgres
    PG_HOME=$(getent passwd postgres | cut -d: -f6 || true)
    # setpriv execs (no lingering parent), so $! is the real server pid.
    AS_PG=(setpriv --reuid=postgres --regid=postgres --init-groups
           env HOME="${PG_HOME:-/tmp}" USER=postgres LOGNAME=postgres)
    SUDO=()
else
    RUN_USER=$(id -un)
    AS_PG=(env)
    SUDO=(sudo)
fi

# pg_paths: the PostgreSQL to build against and test with, in every script:
# the bin directory REDISLOCK_PGBIN names, else that of the pg_config on PATH
# (Debian's: the newest postgresql-server-dev installed), else the newest
# /usr/lib/postgresql/N/bin.  Sets PGBIN, PG_CONFIG, PG_MAJOR, PGXS_DIR,
# PG_REGRESS and PG_PERL_LIB (PostgreSQL::Test::*), all from that pg_config.
pg_paths() {
    if [ -n "${REDISLOCK_PGBIN:-}" ]; then
        PGBIN=$REDISLOCK_PGBIN
    elif ! { command -v pg_config >/dev/null 2>&1 && PGBIN=$(pg_config --bindir 2>/dev/null) &&
             [ -x "$PGBIN/pg_config" ]; }; then
        PGBIN=$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin 2>/dev/null | sort -V | tail -n 1)
    fi
    PG_CONFIG=$PGBIN/pg_config
    if [ ! -x "$PG_CONFIG" ]; then
        echo "no PostgreSQL: no pg_config in '${PGBIN}' (set REDISLOCK_PGBIN to its bin directory," \
             "or install postgresql-server-dev-NN)" >&2
        return 1
    fi
    PG_MAJOR=$("$PG_CONFIG" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
    PGXS_DIR=$(cd "$(dirname "$("$PG_CONFIG" --pgxs)")/../.." && pwd)
    PG_REGRESS=$PGXS_DIR/src/test/regress/pg_regress
    PG_PERL_LIB=$PGXS_DIR/src/test/perl
    # An installation without them (test/pg16/get.sh's wheel): the newest
    # of the system's (postgresql-server-dev-NN), which drive any major's
    # binaries through pg_config on PATH.
    if [ ! -f "$PG_PERL_LIB/PostgreSQL/Test/Cluster.pm" ]; then
        local lib
        lib=$(ls -d /usr/lib/postgresql/*/lib/pgxs/src/test/perl 2>/dev/null | sort -V | tail -n 1)
        if [ -n "$lib" ] && [ -f "$lib/PostgreSQL/Test/Cluster.pm" ]; then
            echo "no PostgreSQL::Test::* in $PGXS_DIR: taking $lib" >&2
            PG_PERL_LIB=$lib
        fi
    fi
}

# redis_paths: the Redis server the tests start: REDISLOCK_REDIS_SERVER
# (redis-server, valkey-server or a path; default redis-server, else
# valkey-server), and its client REDISLOCK_REDIS_CLI (default the one that
# comes with it).  Both are exported for the TAP tests (RedisLockTest::Redis).
redis_paths() {
    local s=${REDISLOCK_REDIS_SERVER:-}
    if [ -z "$s" ]; then
        s=redis-server
        command -v redis-server >/dev/null 2>&1 || ! command -v valkey-server >/dev/null 2>&1 || s=valkey-server
    fi
    REDIS_SERVER=$s
    case "$(basename "$s")" in
        valkey*) REDIS_CLI=${REDISLOCK_REDIS_CLI:-valkey-cli} ;;
        *) REDIS_CLI=${REDISLOCK_REDIS_CLI:-redis-cli} ;;
    esac
    command -v "$REDIS_CLI" >/dev/null 2>&1 || REDIS_CLI=redis-cli
    # the process name (comm) kill_pid_if checks
    REDIS_COMM="$(basename "$s" | cut -c1-15)"
    export REDISLOCK_REDIS_SERVER=$REDIS_SERVER REDISLOCK_REDIS_CLI=$REDIS_CLI
}
redis_paths

# free_port [TAKEN...]: a random port on 127.0.0.1 that is free now, above
# the ephemeral range and PostgreSQL::Test::Cluster's range.
free_port() {
    perl -MIO::Socket::INET -e '
        for (1 .. 1000) {
            my $p = 61000 + int(rand(4000));
            next if grep { $_ == $p } @ARGV;
            my $s = IO::Socket::INET->new(LocalAddr => "127.0.0.1",
                LocalPort => $p, Listen => 1, ReuseAddr => 1) or next;
            close $s; print "$p\n"; exit 0;
        }
        exit 1' -- "$@"
}

# run_waited CMD...: run CMD in the background and wait for it, so that a
# trapped INT/TERM interrupts the wait at once (bash defers traps during a
# foreground command). The pid is in CHILD while it runs.
CHILD=
run_waited() {
    "$@" &
    CHILD=$!
    local rc=0
    wait "$CHILD" || rc=$?
    CHILD=
    return "$rc"
}

# stop_child: end the command run_waited is running: TERM, bounded wait, KILL.
stop_child() {
    [ -n "$CHILD" ] || return 0
    kill -TERM "$CHILD" 2>/dev/null
    for _ in $(seq 1 150); do kill -0 "$CHILD" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$CHILD" 2>/dev/null
    wait "$CHILD" 2>/dev/null
    CHILD=
}

# kill_pid_if PID COMM-PATTERN: TERM, bounded wait, KILL; only if PID still
# is a process whose name matches the pattern (a pid may have been reused).
kill_pid_if() {
    local pid=$1 pat=$2
    [ -n "$pid" ] || return 0
    # shellcheck disable=SC2254
    case "$(cat "/proc/$pid/comm" 2>/dev/null)" in $pat) ;; *) return 0 ;; esac
    kill -TERM "$pid" 2>/dev/null || return 0
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
}

# stop_leftovers DIR TAG: stop every postmaster and Redis server still running
# from a data directory under DIR. pg_ctl setsid()s postmasters, so no
# process-group kill reaches them. A crashed node leaves a stale pidfile:
# only a live process of that very directory is stopped.
stop_leftovers() {
    local dir=$1 tag=$2 f pid
    while IFS= read -r f; do
        pid=$(head -n1 "$f" 2>/dev/null)
        if [ -n "$pid" ] && tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$(dirname "$f")"; then
            echo "$tag: stopping leftover postmaster $pid ($(dirname "$f"))"
            "${AS_PG[@]}" "$PGBIN/pg_ctl" -D "$(dirname "$f")" -m immediate -t 60 stop >/dev/null 2>&1 \
                || kill -KILL "$pid" 2>/dev/null
        fi
    done < <(find "$dir" -name postmaster.pid 2>/dev/null)
    while IFS= read -r f; do
        pid=$(head -n1 "$f" 2>/dev/null)
        # redis-server runs in its own dir: that tells it is this one.
        if [ -n "$pid" ] && [ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" = "$(dirname "$f")" ]; then
            echo "$tag: stopping leftover redis-server $pid ($(dirname "$f"))"
            kill_pid_if "$pid" "$REDIS_COMM*"
        fi
    done < <(find "$dir" -name 'redis*.pid' 2>/dev/null)
}

# build_redisson WORK ALL|NEWEST FILES...: the test files (relative to WORK)
# that use the real Redisson client (RealRedisson) need its Java driver,
# built once per version (test/redisson-java/build.sh, cached: seconds when
# nothing changed) where the postgres user running the tests can read it.
# Builds the versions REDISLOCK_REDISSON_VERSIONS names, else every version
# (ALL) or the newest (NEWEST).  Sets REDISSON_ENV, the environment the tests
# need (empty when no file uses the client); fails when the build fails.
REDISSON_ENV=()
build_redisson() {
    local work=$1 which=$2 f need=0
    shift 2
    REDISSON_ENV=()
    for f in "$@"; do
        if grep -q '^use RealRedisson;' "$work/$f"; then need=1; fi
    done
    [ "$need" = 1 ] || return 0
    local lib cache=${REDISLOCK_REDISSON_CACHE:-}
    lib=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    if [ -z "$cache" ]; then
        if [ "$(id -u)" -eq 0 ]; then cache=/var/cache/redislock/redisson
        else cache=${XDG_CACHE_HOME:-$HOME/.cache}/redislock-redisson; fi
    fi
    REDISSON_ENV=(REDISLOCK_REDISSON_CACHE="$cache")
    local versions=()
    if [ -n "${REDISLOCK_REDISSON_VERSIONS:-}" ]; then
        read -r -a versions <<< "$REDISLOCK_REDISSON_VERSIONS"
        REDISSON_ENV+=(REDISLOCK_REDISSON_VERSIONS="$REDISLOCK_REDISSON_VERSIONS")
    elif [ "$which" = NEWEST ]; then
        read -r -a versions <<< "$(sed -n 's/^our @VERSIONS = qw(.* \([^ ]*\));$/\1/p' "$lib/RealRedisson.pm")"
    fi
    echo "the real Redisson client: bash test/redisson-java/build.sh ${versions[*]} (cache $cache)"
    REDISLOCK_REDISSON_CACHE=$cache bash "$lib/../redisson-java/build.sh" "${versions[@]}" || return 1
    if [ "$(id -u)" -eq 0 ]; then chmod -R a+rX "$cache"; fi
}

# build_peers WORK FILES...: the test files (relative to WORK) that use the
# other real lock clients (LockPeer: redsync, node redlock, redis-py,
# ShedLock, Spring Integration) need their drivers, built by
# test/peers/build.sh into REDISLOCK_PEERS_CACHE (default
# /var/cache/redislock/peers; cached: well under a second when nothing
# changed).  Sets PEERS_ENV, the environment the tests need (empty when no
# file uses them); fails when a build fails.
PEERS_ENV=()
build_peers() {
    local work=$1 f need=0
    shift
    PEERS_ENV=()
    for f in "$@"; do
        if grep -q '^use LockPeer;' "$work/$f"; then need=1; fi
    done
    [ "$need" = 1 ] || return 0
    local lib cache=${REDISLOCK_PEERS_CACHE:-/var/cache/redislock/peers}
    lib=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    PEERS_ENV=(REDISLOCK_PEERS_CACHE="$cache")
    echo "the real lock clients: bash test/peers/build.sh (cache $cache)"
    REDISLOCK_PEERS_CACHE=$cache bash "$lib/../peers/build.sh"
}
