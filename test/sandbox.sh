#!/usr/bin/env bash
# Brings up a redislock sandbox to play with, and shows SQL sessions, a Java
# service using the real Redisson and a pg_cron job contending for one lock:
#   bash test/sandbox.sh          install deps (Java and Maven too), build +
#                                 install, build the Java service (Redisson
#                                 4.7.0, test/redisson-java), start
#                                 redis-server and PostgreSQL (with pg_cron)
#                                 in /var/tmp/redislock-sandbox, run the demo,
#                                 leave both servers running
#   bash test/sandbox.sh stop     stop both servers, remove the directory
#   bash test/sandbox.sh --check  the same demo as a check, in a directory of
#                                 its own (/var/tmp/redislock-sandbox-check):
#                                 fails unless every step did what it shows
#                                 (the Java service and SQL each held the lock,
#                                 never at the same time, each woke when the
#                                 other released it, the pg_cron job took it),
#                                 then stops and removes that sandbox; about
#                                 1.5 min (up to a minute of it waiting for
#                                 pg_cron's next minute)
# Running it again stops the previous sandbox first.
# Environment:
#   REDISLOCK_PGBIN=DIR         bin directory of the PostgreSQL to build against
#                               and run (default /usr/lib/postgresql/15/bin)
#   REDISLOCK_SANDBOX_DIR=DIR   where the servers live (default
#                               /var/tmp/redislock-sandbox)
#   REDISLOCK_REDISSON_CACHE=DIR  where test/redisson-java/build.sh puts the
#                               Java service's build (default as root
#                               /var/cache/redislock/redisson, else
#                               ~/.cache/redislock-redisson; Maven's downloads
#                               stay in ~/.m2)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MODE=${1:-start}
case "$MODE" in
    --check) DIR=${REDISLOCK_SANDBOX_DIR:-/var/tmp/redislock-sandbox-check} ;;
    *) DIR=${REDISLOCK_SANDBOX_DIR:-/var/tmp/redislock-sandbox} ;;
esac
LOCK=sandbox:demo
REDISSON_VERSION=4.7.0

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

if [ "$MODE" = stop ]; then
    stop_sandbox
    echo "sandbox: stopped and removed $DIR"
    exit 0
elif [ "$MODE" != start ] && [ "$MODE" != --check ]; then
    echo "usage: bash test/sandbox.sh [start|stop|--check]" >&2
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

# The Java service of DEMO 5: test/redisson-java's DemoService, built against
# Redisson $REDISSON_VERSION (cached: seconds when built before; the first
# build downloads Redisson and its dependencies from Maven Central).
if [ -z "${REDISLOCK_REDISSON_CACHE:-}" ]; then
    if [ "$(id -u)" -eq 0 ]; then REDISLOCK_REDISSON_CACHE=/var/cache/redislock/redisson
    else REDISLOCK_REDISSON_CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/redislock-redisson; fi
fi
say "the Java service: Redisson $REDISSON_VERSION (test/redisson-java, cache $REDISLOCK_REDISSON_CACHE)"
REDISLOCK_REDISSON_CACHE=$REDISLOCK_REDISSON_CACHE bash "$ROOT/test/redisson-java/build.sh" "$REDISSON_VERSION"
JAVA_DIR=$(REDISLOCK_REDISSON_CACHE=$REDISLOCK_REDISSON_CACHE bash "$ROOT/test/redisson-java/build.sh" --dir "$REDISSON_VERSION")
JAVA_CP="$JAVA_DIR/redisson-driver.jar:$JAVA_DIR/lib/*"

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
A_PID='' B_PID='' JAVA_PID='' SQL_LOOP_PID=''
demo_cleanup() {
    local rc=$?
    # Only the demo's clients; the servers stay up on purpose (not in --check).
    exec 3>&- 4>&-
    [ -n "$A_PID" ] && kill "$A_PID" 2>/dev/null
    [ -n "$B_PID" ] && kill "$B_PID" 2>/dev/null
    [ -n "$JAVA_PID" ] && kill "$JAVA_PID" 2>/dev/null
    [ -n "$SQL_LOOP_PID" ] && kill "$SQL_LOOP_PID" 2>/dev/null
    rm -f "$DIR/a.fifo" "$DIR/java.fifo"
    if [ "$rc" -ne 0 ]; then
        echo "sandbox: demo failed; session output follows" >&2
        for f in a.out b.out java.log java.err sql-loop.out; do
            [ -f "$DIR/$f" ] && sed "s/^/  $f: /" "$DIR/$f" >&2
        done
        [ "$MODE" = --check ] || echo "servers left running for inspection; stop with: bash test/sandbox.sh stop" >&2
    fi
    if [ "$MODE" = --check ]; then
        [ "$rc" -ne 0 ] && [ -f "$DIR/postgres.log" ] && tail -n 30 "$DIR/postgres.log" | sed 's/^/  postgres.log: /' >&2
        stop_sandbox
        if [ "$rc" -eq 0 ]; then echo "sandbox --check: passed"; else echo "sandbox --check: FAILED" >&2; fi
    fi
    return 0
}
trap demo_cleanup EXIT

# Observable states the demo waits for (all polled with a bound).
lock_in_redis() { [ "$("$REDIS_CLI" -p "$RPORT" EXISTS "$LOCK")" = 1 ]; }
lock_gone() { [ "$("$REDIS_CLI" -p "$RPORT" EXISTS "$LOCK")" = 0 ]; }
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
# B's psql ended with its statement, and the session's end releases its hold
wait_for 20 "B's session end to release its hold" lock_gone
echo "\$ $REDIS_CLI EXISTS $LOCK      -- B's session has ended, which released B's hold"
"$REDIS_CLI" -p "$RPORT" EXISTS "$LOCK"

# --- DEMO 5: a Java service, SQL sessions and a pg_cron job on one lock -----------
# Each of them, turn after turn: wait for the lock, work under it for 2 s, let
# it go, pause about 1 s. Each logs when it started waiting, took the lock and
# let it go (said while still holding it, so a logged hold never outlasts the
# real one); the demo merges the logs into who held the lock when.
# job_waits: true when the pg_cron job waits for the lock; what the view
# showed then is in WAITS (one query, so that what is shown is what was seen)
job_waits() {
    WAITS=$(psql_ -c "SELECT w.pid, a.application_name, w.name, w.holders, w.holder_pids
                        FROM redis_lock_waits w JOIN pg_stat_activity a USING (pid)
                       WHERE w.name = '$LOCK'")
    grep -q '| pg_cron ' <<< "$WAITS"
}
job_ended() {
    [ "$(psql_ -At -c "SELECT count(*) FROM cron.job_run_details WHERE jobid = $JOBID
                        AND status IN ('succeeded', 'failed')")" = 1 ]
}
java_turns() { grep -c ' took ' "$DIR/java.log" 2>/dev/null || true; }
sql_turns() { psql_ -At -c "SELECT count(*) FROM sandbox_log WHERE who = 'sql-session' AND event = 'took'"; }
turns_done() {
    [ "$(java_turns)" -ge 3 ] && [ "$(sql_turns)" -ge 3 ] && { [ "$CRON" = 0 ] || job_ended; }
}
# sql_loop: the SQL side, a new session per turn (as a job or an application
# would), until told to stop.
sql_loop() {
    while [ ! -e "$DIR/sql-loop.stop" ]; do
        psql_as sandbox-C -q -c "SELECT sandbox_turn('sql-session', '2 s')" >/dev/null || return 1
        sleep 1
    done
}

say "DEMO 5: a Java service (Redisson $REDISSON_VERSION), SQL sessions$([ "$CRON" = 1 ] && echo ' and a pg_cron job') take turns on '$LOCK'"
TURN_FN="CREATE FUNCTION sandbox_turn(who text, work interval) RETURNS void LANGUAGE plpgsql AS \$\$
BEGIN
    INSERT INTO sandbox_log VALUES (clock_timestamp(), who, 'waiting');
    IF NOT redis_xact_lock_acquire('$LOCK', '90 s') THEN
        RAISE EXCEPTION '% could not take $LOCK in 90 s', who;
    END IF;
    INSERT INTO sandbox_log VALUES (clock_timestamp(), who, 'took');
    PERFORM pg_sleep_for(work);    -- the work done under the lock
    INSERT INTO sandbox_log VALUES (clock_timestamp(), who, 'releasing');
END \$\$;    -- the transaction lock goes at COMMIT"
psql_ -q -c "CREATE TABLE sandbox_log(at timestamptz, who text, event text)"
psql_ -q -c "$TURN_FN"
echo "A turn on the SQL side (a SQL session's and the pg_cron job's):"
echo "$TURN_FN" | sed 's/^/SQL> /'
echo "A turn of the Java service (test/redisson-java/src/main/java/redislock/test/DemoService.java):"
sed -n '/RLock lock = redisson.getLock(name);/,/^\t\t}$/p' \
    "$ROOT/test/redisson-java/src/main/java/redislock/test/DemoService.java" | sed 's/^\t\t/java> /; s/\t/    /g'

if [ "$CRON" = 1 ]; then
    # pg_cron 1.4 runs jobs at minute boundaries: this one at the next minute
    # of the day (UTC), once a day; the Java service and the SQL side start
    # 10 s before it.
    IFS='|' read -r WHEN START_AT < <(psql_ -At -F'|' -c "SELECT to_char(t, 'FMMI FMHH24'), extract(epoch FROM t)::bigint - 10
        FROM (SELECT date_trunc('minute', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
            + CASE WHEN extract(second FROM now()) < 40 THEN interval '1 min' ELSE interval '2 min' END) s(t)")
    JOB_SQL="SELECT sandbox_turn('pg_cron-job', '2 s')"
    echo "SQL> SELECT cron.schedule('sandbox-job', '$WHEN * * *', \$\$$JOB_SQL\$\$);"
    JOBID=$(psql_ -At -c "SELECT cron.schedule('sandbox-job', '$WHEN * * *', \$\$$JOB_SQL\$\$)")
    left=$(( START_AT - $(date +%s) ))
    echo "   (job $JOBID, for $WHEN UTC; the others start in ${left} s, 10 s before it)"
    [ "$left" -gt 0 ] && sleep "$left"
fi

mkfifo "$DIR/java.fifo"
echo "\$ java -cp ... redislock.test.DemoService redis://127.0.0.1:$RPORT $LOCK 2000 1000 &"
java -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$JAVA_CP" redislock.test.DemoService \
    "redis://127.0.0.1:$RPORT" "$LOCK" 2000 1000 < "$DIR/java.fifo" > "$DIR/java.log" 2> "$DIR/java.err" &
JAVA_PID=$!
exec 4> "$DIR/java.fifo"    # the service runs until this ends
echo "\$ while :; do psql -c \"SELECT sandbox_turn('sql-session', '2 s')\"; sleep 1; done &"
sql_loop > "$DIR/sql-loop.out" 2>&1 &
SQL_LOOP_PID=$!
wait_for 60 "the Java service to start" grep -q ' started ' "$DIR/java.log"
echo "   (the Java service's Redisson owner id: $(awk '$2 == "started" { print $3 }' "$DIR/java.log"))"

# Until each side had 3 turns and the job's run ended (bounded); shows the
# job's wait once when it is caught waiting.
deadline=$(( $(date +%s) + 150 ))
shown=0
until turns_done; do
    if [ "$CRON" = 1 ] && [ "$shown" = 0 ] && job_waits; then
        echo "redis_lock_waits while the pg_cron job waits (holders: the Java service's or a SQL session's owner id):"
        echo "$WAITS"
        shown=1
    fi
    if [ "$(date +%s)" -ge "$deadline" ] || gone "$JAVA_PID" || gone "$SQL_LOOP_PID"; then
        echo "sandbox: DEMO FAILED: after 150 s the Java service had $(java_turns) turns, the SQL side $(sql_turns)$([ "$CRON" = 1 ] && echo ', and the pg_cron job had not ended')" >&2
        exit 1
    fi
    sleep 0.2
done
touch "$DIR/sql-loop.stop"
exec 4>&-
wait_for 30 "the Java service to stop after its turn" gone "$JAVA_PID"
wait "$JAVA_PID" || { echo "sandbox: DEMO FAILED: the Java service failed" >&2; exit 1; }
JAVA_PID=
wait_for 30 "the SQL side to stop after its turn" gone "$SQL_LOOP_PID"
wait "$SQL_LOOP_PID" || { echo "sandbox: DEMO FAILED: a SQL turn failed" >&2; exit 1; }
SQL_LOOP_PID=

{
    awk '$2 == "waiting" || $2 == "took" || $2 == "releasing" { print $1, "java-service", $2 }' "$DIR/java.log"
    psql_ -At -F' ' -c "SELECT (extract(epoch FROM at) * 1000)::bigint, who, event FROM sandbox_log"
} > "$DIR/turns.txt"
echo "Who held '$LOCK' when (UTC; the Java service's log and sandbox_log, merged):"
# Prints one line per hold, then checks: no two holds overlap, each side held
# the lock and woke at least once when the other let it go, the job held it
# once.
if ! perl -MPOSIX=strftime -e '
    my $cron = shift;
    my (%waiting, %open, @holds);
    for (sort { $a->[0] <=> $b->[0] } map { [ split " " ] } <STDIN>) {
        my ($t, $who, $ev) = @$_;
        if ($ev eq "waiting") { $waiting{$who} = $t }
        elsif ($ev eq "took") { $open{$who} = { who => $who, from => $t, since => $waiting{$who} // $t } }
        elsif ($ev eq "releasing" && $open{$who}) { my $h = delete $open{$who}; $h->{to} = $t; push @holds, $h }
    }
    my $ts = sub { strftime("%H:%M:%S", gmtime($_[0] / 1000)) . sprintf(".%03d", $_[0] % 1000) };
    my (%n, %wake, @bad);
    for my $i (0 .. $#holds) {
        my ($h, $p) = ($holds[$i], $i ? $holds[$i - 1] : undef);
        $n{ $h->{who} }++;
        my $note = sprintf("waited %.1f s", ($h->{from} - $h->{since}) / 1000);
        if ($p && $h->{from} < $p->{to}) {
            push @bad, "$h->{who} took it at " . $ts->($h->{from}) . " while $p->{who} held it";
        } elsif ($p && $p->{who} ne $h->{who} && $h->{since} < $p->{to}) {
            $note .= sprintf("; woke %d ms after %s let go", $h->{from} - $p->{to}, $p->{who});
            my $java = sub { $_[0] eq "java-service" ? "java" : "sql" };
            $wake{ $java->($p->{who}) . ">" . $java->($h->{who}) }++;
        }
        printf "  %s - %s  %-13s %s\n", $ts->($h->{from}), $ts->($h->{to}), $h->{who}, $note;
    }
    my $sql = ($n{"sql-session"} // 0) + ($n{"pg_cron-job"} // 0);
    printf "holds: java-service %d, sql-session %d, pg_cron-job %d; wakes: SQL side after the Java service %d, the Java service after the SQL side %d\n",
        $n{"java-service"} // 0, $n{"sql-session"} // 0, $n{"pg_cron-job"} // 0, $wake{"java>sql"} // 0, $wake{"sql>java"} // 0;
    push @bad, "the Java service never held it" unless $n{"java-service"};
    push @bad, "no SQL session held it" unless $n{"sql-session"};
    push @bad, "the pg_cron job held it " . ($n{"pg_cron-job"} // 0) . " times, not once" if $cron && ($n{"pg_cron-job"} // 0) != 1;
    push @bad, "the SQL side never woke when the Java service let go" unless $wake{"java>sql"};
    push @bad, "the Java service never woke when the SQL side let go" unless $wake{"sql>java"};
    print STDERR "sandbox: DEMO FAILED: $_\n" for @bad;
    exit(@bad ? 1 : 0);
' "$CRON" < "$DIR/turns.txt"; then
    exit 1
fi

if [ "$CRON" = 1 ]; then
    echo "What the job's run says (cron.job_run_details):"
    psql_ -c "SELECT jobid, runid, status, return_message, start_time, end_time
                FROM cron.job_run_details WHERE jobid = $JOBID"
    JOB_STATUS=$(psql_ -At -c "SELECT status FROM cron.job_run_details WHERE jobid = $JOBID")
    psql_ -q -At -c "SELECT cron.unschedule($JOBID)" >/dev/null
    if [ "$JOB_STATUS" != succeeded ]; then
        echo "sandbox: DEMO FAILED: the job's run should have succeeded" >&2
        exit 1
    fi
fi
echo "\$ $REDIS_CLI EXISTS $LOCK      -- every turn let it go"
"$REDIS_CLI" -p "$RPORT" EXISTS "$LOCK"

echo '\q' >&3
exec 3>&-
wait_for 20 "A's psql to exit" gone "$A_PID"
wait "$A_PID" || true
A_PID=
echo "A's session printed:"
sed 's/^/   /' "$DIR/a.out"

if [ "$(cat "$DIR/b.out")" != t ]; then
    echo "sandbox: DEMO FAILED: B should have got the lock (t)" >&2
    exit 1
fi

say "summary"
cat <<EOF
A held '$LOCK'; B's no-wait attempt returned f; B's 30 s wait showed up in
pg_stat_activity as wait_event_type 'Extension' and returned t as soon as A
released. Then a Java service using Redisson $REDISSON_VERSION and SQL sessions$([ "$CRON" = 1 ] && echo ' (and a
pg_cron job)') took turns on the same lock: never two at once, each woken
when the other let it go.$([ "$CRON" = 1 ] && echo ' The job'"'"'s run: cron.job_run_details says succeeded.')
EOF
if [ "$MODE" = --check ]; then
    exit 0    # demo_cleanup stops and removes this sandbox
fi
cat <<EOF

The sandbox keeps running:
  PostgreSQL  psql -h $DIR -p $PGPORT -U postgres postgres
          or  psql -h 127.0.0.1 -p $PGPORT -U postgres postgres
  Redis       $REDIS_CLI -p $RPORT
  Java        java -cp '$JAVA_CP' \\
                  redislock.test.DemoService redis://127.0.0.1:$RPORT $LOCK 2000 1000
              (takes turns on $LOCK until its input ends: Ctrl-D)
  logs        $DIR/postgres.log  $DIR/redis.log
  settings    $DIR/sandbox.env
Stop it with: bash test/sandbox.sh stop
EOF
