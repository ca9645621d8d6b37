#!/usr/bin/env bash
# Brings up a redislock sandbox to play with, and shows two sessions
# contending for one lock:
#   bash test/sandbox.sh          install deps, build + install, start
#                                 redis-server and PostgreSQL in
#                                 /var/tmp/redislock-sandbox, run the demo,
#                                 leave both servers running
#   bash test/sandbox.sh stop     stop both servers, remove the directory
# Running it again stops the previous sandbox first.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=/var/tmp/redislock-sandbox
LOCK=sandbox:demo

# shellcheck source=lib/common.sh
. "$ROOT/test/lib/common.sh"

say() { printf '\n### %s\n' "$*"; }

# wait_for SECONDS DESCRIPTION COMMAND...: poll COMMAND every 0.1 s until it
# succeeds; bounded.
wait_for() {
    local secs=$1 desc=$2 i
    shift 2
    for ((i = 0; i < secs * 10; i++)); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.1
    done
    echo "sandbox: timed out after ${secs}s waiting for: $desc" >&2
    return 1
}

stop_sandbox() {
    [ -d "$DIR" ] || return 0
    set +e
    local pid bin
    if [ -f "$DIR/pgdata/postmaster.pid" ]; then
        echo "sandbox: stopping PostgreSQL"
        # the PostgreSQL the sandbox was started with
        bin=$(cat "$DIR/pgbin" 2>/dev/null)
        [ -n "$bin" ] || { pg_paths && bin=$PGBIN; }
        "${AS_PG[@]}" "$bin/pg_ctl" -D "$DIR/pgdata" -m fast -t 60 -w stop >/dev/null \
            || "${AS_PG[@]}" "$bin/pg_ctl" -D "$DIR/pgdata" -m immediate -t 30 -w stop >/dev/null
    fi
    if [ -f "$DIR/redis.pid" ]; then
        pid=$(cat "$DIR/redis.pid")
        if [ -n "$pid" ] && case "$(cat "/proc/$pid/comm" 2>/dev/null)" in
                                redis-server | valkey-server | "$REDIS_COMM") true ;; *) false ;; esac; then
            echo "sandbox: stopping the Redis server $pid"
            kill -TERM "$pid"
            wait_for 20 "Redis server $pid to exit" bash -c "! kill -0 $pid" || kill -KILL "$pid"
        fi
    fi
    rm -rf "$DIR"
    set -e
}

if [ "${1:-start}" = stop ]; then
    stop_sandbox
    echo "sandbox: stopped and removed $DIR"
    exit 0
elif [ "${1:-start}" != start ]; then
    echo "usage: bash test/sandbox.sh [start|stop]" >&2
    exit 2
fi

# --- bring up -----------------------------------------------------------------
stop_sandbox

say "dependencies"
bash "$ROOT/test/setup-deps.sh"
pg_paths
redis_paths

say "build and install (PostgreSQL $PG_MAJOR, $PGBIN)"
make -C "$ROOT" PG_CONFIG="$PG_CONFIG"
"${SUDO[@]}" make -C "$ROOT" PG_CONFIG="$PG_CONFIG" install

mkdir -p "$DIR"
chmod 755 "$DIR"    # others (root's psql) may reach the socket
echo "$PGBIN" > "$DIR/pgbin"
[ "$(id -u)" -eq 0 ] && chown "$RUN_USER:" "$DIR"
cd "$DIR"

RPORT=$(free_port)
PGPORT=$(free_port "$RPORT")

say "$REDIS_SERVER on 127.0.0.1:$RPORT"
"${AS_PG[@]}" "$REDIS_SERVER" --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no \
    --daemonize yes --dir "$DIR" --pidfile "$DIR/redis.pid" --logfile "$DIR/redis.log"
wait_for 20 "redis PING" bash -c "[ \"\$($REDIS_CLI -p $RPORT ping)\" = PONG ]"

say "PostgreSQL on 127.0.0.1:$PGPORT (socket in $DIR)"
"${AS_PG[@]}" "$PGBIN/initdb" -D "$DIR/pgdata" -U postgres -A trust -E UTF8 --locale=C >/dev/null
cat >> "$DIR/pgdata/postgresql.conf" <<EOF

# redislock sandbox
port = $PGPORT
listen_addresses = '127.0.0.1'
unix_socket_directories = '$DIR'
shared_preload_libraries = 'redislock'
redislock.url = 'redis://127.0.0.1:$RPORT'
EOF
"${AS_PG[@]}" "$PGBIN/pg_ctl" -D "$DIR/pgdata" -l "$DIR/postgres.log" -w -t 60 start >/dev/null

cat > "$DIR/sandbox.env" <<EOF
PGHOST=$DIR
PGPORT=$PGPORT
PGUSER=postgres
PGDATABASE=postgres
REDIS_PORT=$RPORT
EOF

# psql_as APPNAME ARGS...: psql as the server user, to database postgres.
psql_as() { local app=$1; shift; "${AS_PG[@]}" PGAPPNAME="$app" "$PGBIN/psql" -X -h "$DIR" -p "$PGPORT" -U postgres -d postgres -v ON_ERROR_STOP=1 "$@"; }
psql_() { "${AS_PG[@]}" "$PGBIN/psql" -X -h "$DIR" -p "$PGPORT" -U postgres -d postgres -v ON_ERROR_STOP=1 "$@"; }
psql_ -q -c 'CREATE EXTENSION redislock'

# --- demo: two sessions, one lock ------------------------------------------------
A_PID='' B_PID=''
demo_cleanup() {
    local rc=$?
    # Only the demo's psql clients; the servers stay up on purpose.
    exec 3>&-
    [ -n "$A_PID" ] && kill "$A_PID" 2>/dev/null
    [ -n "$B_PID" ] && kill "$B_PID" 2>/dev/null
    rm -f "$DIR/a.fifo"
    if [ "$rc" -ne 0 ]; then
        echo "sandbox: demo failed; session output follows" >&2
        for f in a.out b.out; do [ -f "$DIR/$f" ] && sed "s/^/  $f: /" "$DIR/$f" >&2; done
        echo "servers left running for inspection; stop with: bash test/sandbox.sh stop" >&2
    fi
    return 0
}
trap demo_cleanup EXIT

# Observable states the demo waits for (all polled with a bound).
lock_in_redis() { [ "$("$REDIS_CLI" -p "$RPORT" EXISTS "$LOCK")" = 1 ]; }
b_waits() {
    [ "$(psql_ -At -c "SELECT count(*) FROM pg_stat_activity
                        WHERE application_name = 'sandbox-B' AND wait_event_type = 'Extension'")" = 1 ]
}
gone() { ! kill -0 "$1" 2>/dev/null; }
now_ms() { date +%s%3N; }

say "DEMO 1: session A takes '$LOCK' and keeps its session open"
mkfifo "$DIR/a.fifo"
[ "$(id -u)" -eq 0 ] && chown "$RUN_USER:" "$DIR/a.fifo"
psql_as sandbox-A -At < "$DIR/a.fifo" > "$DIR/a.out" 2>&1 &
A_PID=$!
exec 3> "$DIR/a.fifo"       # A reads its SQL from here, one statement at a time
echo "SELECT 'A acquired: ' || redis_lock_acquire('$LOCK');" >&3
echo "A> SELECT redis_lock_acquire('$LOCK');"
wait_for 20 "A to hold $LOCK in Redis" lock_in_redis
echo "   (A holds it: watchdog mode, renewed while A's session holds it)"

say "Redis holds the lock in Redisson's layout: hash <name>, field <server uuid>:<session>, value = hold count"
echo "\$ $REDIS_CLI HGETALL $LOCK"
"$REDIS_CLI" -p "$RPORT" HGETALL "$LOCK"
echo "\$ $REDIS_CLI PTTL $LOCK"
"$REDIS_CLI" -p "$RPORT" PTTL "$LOCK"

say "DEMO 2: session B tries once, without waiting"
echo "B> SELECT redis_lock_acquire('$LOCK', '0');"
echo "   $(psql_as sandbox-B -At -c "SELECT redis_lock_acquire('$LOCK', '0')")"

say "DEMO 3: session B waits up to 30 s"
echo "B> SELECT redis_lock_acquire('$LOCK', '30s');   -- blocks"
psql_as sandbox-B -At -c "SELECT redis_lock_acquire('$LOCK', '30s')" > "$DIR/b.out" 2>&1 &
B_PID=$!
wait_for 20 "B to wait (pg_stat_activity wait_event_type = Extension)" b_waits
echo "pg_stat_activity while B waits:"
psql_ -c "SELECT pid, application_name, state, wait_event_type, wait_event, query
            FROM pg_stat_activity WHERE application_name LIKE 'sandbox-%' ORDER BY application_name"
echo "redis_locks (locks held by sessions of this server):"
psql_ -c "SELECT * FROM redis_locks" || echo "(redis_locks not available)"

say "DEMO 4: session A releases; B wakes up"
echo "A> SELECT redis_lock_release('$LOCK');"
t0=$(now_ms)
echo "SELECT 'A released: ' || redis_lock_release('$LOCK');" >&3
wait_for 35 "B to return" gone "$B_PID"
wait "$B_PID" || true
B_PID=
echo "B> returned $(cat "$DIR/b.out")  ($(( $(now_ms) - t0 )) ms after A's release was sent; polled every 100 ms)"
echo '\q' >&3
exec 3>&-
wait_for 20 "A's psql to exit" gone "$A_PID"
wait "$A_PID" || true
A_PID=
echo "A's session printed:"
sed 's/^/   /' "$DIR/a.out"
echo "\$ $REDIS_CLI EXISTS $LOCK      -- B's session has ended, which released B's hold"
"$REDIS_CLI" -p "$RPORT" EXISTS "$LOCK"

if [ "$(cat "$DIR/b.out")" != t ]; then
    echo "sandbox: DEMO FAILED: B should have got the lock (t)" >&2
    exit 1
fi

say "summary"
cat <<EOF
A held '$LOCK'; B's no-wait attempt returned f; B's 30 s wait showed up in
pg_stat_activity as wait_event_type 'Extension' and returned t as soon as A
released.

The sandbox keeps running:
  PostgreSQL  psql -h $DIR -p $PGPORT -U postgres postgres
          or  psql -h 127.0.0.1 -p $PGPORT -U postgres postgres
  Redis       $REDIS_CLI -p $RPORT
  logs        $DIR/postgres.log  $DIR/redis.log
  settings    $DIR/sandbox.env
Stop it with: bash test/sandbox.sh stop
EOF
