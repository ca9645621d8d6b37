#!/bin/sh
# test/installcheck.sh PG_REGRESS ARGS...: what "make installcheck" runs.
# Starts a throwaway redis-server on a free loopback port, or uses the Redis
# in REDISLOCK_TEST_URL when that is set (redis://host:port or
# rediss://...: the one variable to point the tests at your own Redis; they
# only touch keys they name themselves), writes redislock.url into a second
# --temp-config for pg_regress' temporary instance, runs pg_regress and stops
# the Redis it started.  Work files go to ./tmp_redis (removed on success).
# REDISLOCK_REDIS_SERVER names the server to start (default redis-server,
# else valkey-server), REDISLOCK_REDIS_CLI its client.
set -eu

if [ "$(id -u)" -eq 0 ]; then
    echo "installcheck: pg_regress' temporary instance cannot run as root (initdb refuses);" >&2
    echo "installcheck: run it as another user, e.g. in a copy owned by postgres: runuser -u postgres -- make installcheck" >&2
    exit 1
fi

DIR=$(pwd)/tmp_redis
rm -rf "$DIR"
mkdir -p "$DIR"
REDIS_PID=

stop_redis() {
    [ -n "$REDIS_PID" ] || return 0
    kill "$REDIS_PID" 2>/dev/null || return 0
    i=0
    while kill -0 "$REDIS_PID" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    kill -9 "$REDIS_PID" 2>/dev/null || true
    REDIS_PID=
}
trap stop_redis EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

SERVER=${REDISLOCK_REDIS_SERVER:-redis-server}
command -v "$SERVER" >/dev/null 2>&1 || ! command -v valkey-server >/dev/null 2>&1 || SERVER=valkey-server
case "$(basename "$SERVER")" in valkey*) CLI=${REDISLOCK_REDIS_CLI:-valkey-cli} ;; *) CLI=${REDISLOCK_REDIS_CLI:-redis-cli} ;; esac
command -v "$CLI" >/dev/null 2>&1 || CLI=redis-cli

url=${REDISLOCK_TEST_URL:-}
if [ -z "$url" ]; then
    if ! command -v "$SERVER" >/dev/null 2>&1; then
        echo "installcheck: $SERVER not found: install it (Debian: apt-get install redis-server or valkey-server)," >&2
        echo "installcheck: or point the tests at a Redis with REDISLOCK_TEST_URL=redis://host:port" >&2
        exit 1
    fi
    # a free port above the ephemeral range
    port=$(perl -MIO::Socket::INET -e '
        for (1 .. 1000) {
            my $p = 61000 + int(rand(4000));
            my $s = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => $p,
                                          Listen => 1, ReuseAddr => 1) or next;
            close $s; print "$p\n"; exit 0;
        }
        exit 1')
    "$SERVER" --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
        --daemonize no --dir "$DIR" --logfile "$DIR/redis.log" &
    REDIS_PID=$!
    up=0 i=0
    while [ $i -lt 200 ]; do
        if [ "$("$CLI" -h 127.0.0.1 -p "$port" ping 2>/dev/null)" = PONG ]; then up=1; break; fi
        kill -0 "$REDIS_PID" 2>/dev/null || break
        sleep 0.1; i=$((i + 1))
    done
    if [ $up = 0 ]; then
        echo "installcheck: $SERVER on port $port did not come up:" >&2
        tail -n 20 "$DIR/redis.log" >&2 || true
        exit 1
    fi
    url="redis://127.0.0.1:$port"
    echo "installcheck: $SERVER on $url (pid $REDIS_PID)"
else
    echo "installcheck: using the Redis in REDISLOCK_TEST_URL"
fi

printf "redislock.url = '%s'\n" "$url" > "$DIR/url.conf"

rc=0
"$@" --temp-config="$DIR/url.conf" || rc=$?
stop_redis
[ $rc -eq 0 ] && rm -rf "$DIR"
exit $rc
