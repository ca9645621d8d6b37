#!/usr/bin/env bash
# Brings up a redislock sandbox to play with, and shows two sessions
# contending for one lock, then a pg_cron job waiting for a session on it:
#   bash test/sandbox.sh          install deps, build + install, start
#                                 redis-server and PostgreSQL (with pg_cron)
#                                 in /var/tmp/redislock-sandbox, run the demo,
#                                 leave both servers running
#   bash test/sandbox.sh stop     stop both servers, remove the directory
# Running it again stops the previous sandbox first.
# Environment:
#   REDISLOCK_PGBIN=DIR         bin directory of the PostgreSQL to build against
#                               and run (default /usr/lib/postgresql/15/bin)
#   REDISLOCK_SANDBOX_DIR=DIR   where the servers live (default
#                               /var/tmp/redislock-sandbox)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=${REDISLOCK_SANDBOX_DIR:-/var/tmp/redislock-sandbox}
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

# pg_cron (Debian's postgresql-15-cron, which setup-deps installs) for DEMO 5.
CRON=0 PRELOAD=redislock
if [ -f "$("$PG_CONFIG" --pkglibdir)/pg_cron.so" ] && [ -f "$("$PG_CONFIG" --sharedir)/extension/pg_cron.control" ]; then
    CRON=1 PRELOAD=redislock,pg_cron
else
    echo "sandbox: NOTE: pg_cron is not installed in $("$PG_CONFIG" --pkglibdir): DEMO 5 (a database job) will be skipped" >&2
fi

say "PostgreSQL on 127.0.0.1:$PGPORT (socket in $DIR)"
"${AS_PG[@]}" "$PGBIN/initdb" -D "$DIR/pgdata" -U postgres -A trust -E UTF8 --locale=C >/dev/null
cat >> "$DIR/pgdata/postgresql.conf" <<EOF

# redislock sandbox
port = $PGPORT
listen_addresses = '127.0.0.1'
unix_socket_directories = '$DIR'
shared_preload_libraries = '$PRELOAD'
redislock.url = 'redis://127.0.0.1:$RPORT'
EOF
if [ "$CRON" = 1 ]; then
    # pg_cron runs each job over a libpq connection to this socket (trusted:
    # initdb -A trust); its launcher then records a run's end at once.
    cat >> "$DIR/pgdata/postgresql.conf" <<EOF
cron.database_name = 'postgres'
cron.use_background_workers = off
cron.host = '$DIR'
EOF
fi
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
[ "$CRON" = 1 ] && psql_ -q -c 'CREATE EXTENSION pg_cron'

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

# --- DEMO 5: a pg_cron job on the same lock ----------------------------------------
job_waits() {
    [ "$(psql_ -At -c "SELECT count(*) FROM redis_lock_waits w JOIN pg_stat_activity a USING (pid)
                        WHERE w.name = '$LOCK' AND a.application_name = 'pg_cron'")" = 1 ]
}
job_ended() {
    [ "$(psql_ -At -c "SELECT count(*) FROM cron.job_run_details WHERE jobid = $JOBID
                        AND status IN ('succeeded', 'failed')")" = 1 ]
}
if [ "$CRON" = 1 ]; then
    say "DEMO 5: a pg_cron job waits for session A, then takes '$LOCK'"
    echo "SELECT 'A acquired again: ' || redis_lock_acquire('$LOCK');" >&3
    echo "A> SELECT redis_lock_acquire('$LOCK');"
    wait_for 20 "A to hold $LOCK in Redis" lock_in_redis
    psql_ -q -c "CREATE TABLE IF NOT EXISTS sandbox_job_log(at timestamptz, got_lock boolean)"
    # pg_cron 1.4 runs jobs at minute boundaries: this one at the next minute
    # of the day (UTC), once a day.
    WHEN=$(psql_ -At -c "SELECT to_char(date_trunc('minute', now() AT TIME ZONE 'UTC')
        + CASE WHEN extract(second FROM now()) < 55 THEN interval '1 min' ELSE interval '2 min' END, 'FMMI FMHH24')")
    JOB_SQL="INSERT INTO sandbox_job_log SELECT clock_timestamp(), redis_xact_lock_acquire('$LOCK', '90 s')"
    echo "SQL> SELECT cron.schedule('sandbox-job', '$WHEN * * *', \$\$$JOB_SQL\$\$);"
    JOBID=$(psql_ -At -c "SELECT cron.schedule('sandbox-job', '$WHEN * * *', \$\$$JOB_SQL\$\$)")
    echo "   (job $JOBID; waiting up to a minute for pg_cron to start it at $WHEN UTC)"
    wait_for 150 "the job to wait for $LOCK (redis_lock_waits)" job_waits
    echo "redis_lock_waits while the job waits for A:"
    psql_ -c "SELECT w.pid, a.application_name, w.name, w.kind, w.holders, w.holder_pids
                FROM redis_lock_waits w JOIN pg_stat_activity a USING (pid)"
    echo "A> SELECT redis_lock_release('$LOCK');"
    echo "SELECT 'A released again: ' || redis_lock_release('$LOCK');" >&3
    wait_for 60 "the job's run to end (cron.job_run_details)" job_ended
    echo "What the job did (cron.job_run_details, and its row in sandbox_job_log):"
    psql_ -c "SELECT jobid, runid, status, return_message, start_time, end_time
                FROM cron.job_run_details WHERE jobid = $JOBID"
    psql_ -c "SELECT * FROM sandbox_job_log"
    JOB_STATUS=$(psql_ -At -c "SELECT status FROM cron.job_run_details WHERE jobid = $JOBID")
    psql_ -q -At -c "SELECT cron.unschedule($JOBID)" >/dev/null
    if [ "$JOB_STATUS" != succeeded ] || [ "$(psql_ -At -c "SELECT bool_and(got_lock) FROM sandbox_job_log")" != t ]; then
        echo "sandbox: DEMO FAILED: the job should have taken the lock and succeeded" >&2
        exit 1
    fi
    echo "\$ redis-cli EXISTS $LOCK      -- the job's transaction lock went at its COMMIT"
    redis-cli -p "$RPORT" EXISTS "$LOCK"
fi

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
released.$([ "$CRON" = 1 ] && printf '\n%s' "A pg_cron job waited for A on the same lock (redis_lock_waits) and took it
when A released it: cron.job_run_details says succeeded.")

The sandbox keeps running:
  PostgreSQL  psql -h $DIR -p $PGPORT -U postgres postgres
          or  psql -h 127.0.0.1 -p $PGPORT -U postgres postgres
  Redis       $REDIS_CLI -p $RPORT
  logs        $DIR/postgres.log  $DIR/redis.log
  settings    $DIR/sandbox.env
Stop it with: bash test/sandbox.sh stop
EOF
