#!/usr/bin/env bash
# pg_regress (test/sql, test/expected) against a PostgreSQL whose postmaster - and so
# every backend and the redislock watchdog, which are forked from it - runs
# under valgrind memcheck.  Fails if valgrind reports an invalid read/write,
# a conditional jump / use of uninitialised values, an invalid free, or a
# syscall with uninitialised/unaddressable bytes whose stack contains a
# redislock.so frame, or if a backend died by a signal.  PostgreSQL's own
# known-harmless reports are suppressed with PostgreSQL's valgrind.supp;
# other non-redislock reports are counted and shown, but do not fail.
# After pg_regress, the same server runs the multi-node status paths
# (redis_lock_status / redis_lock_nodes, acquire and release) against 3
# Redlock masters and a 3-node cluster, on a Redisson read-write lock with
# 300 readers (more holders than masters: the Redlock holder array) and on a
# key that is not a lock; their output is judged too. Then TLS: locks, a
# bounded wait on pub/sub and two failed handshakes over rediss://.
# Run it on a PostgreSQL built with USE_VALGRIND (test/cassert/build-pg.sh;
# CI does, test/cassert/ci.sh): its memory contexts tell memcheck where each
# palloc chunk ends, so a write past a chunk inside a context's block is an
# "Invalid write" with our frame.  Debian's PostgreSQL is built without it:
# there memcheck cannot see such an overrun (the old Redlock holder array
# wrote 333 entries into room for 6 unseen), and only the exact holder count
# below catches that one.  The first line says which kind of server this is.
#
# Usage (as root, from test/faults/run.sh): valgrind-regress.sh WORKDIR "tests..."
# WORKDIR is the postgres-owned copy made by run.sh (sql/ lua/ test/).
# REDISLOCK_PGBIN: bin directory of the PostgreSQL to run (as run.sh).
set -euo pipefail
WORK=$1; TESTS=$2
# the PostgreSQL and the Redis server run.sh chose (test/lib/common.sh)
# shellcheck source=../lib/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
pg_paths
VG=$WORK/valgrind
PG_HOME=$(getent passwd postgres | cut -d: -f6 || true)
AS_PG=()
[ "$(id -u)" -eq 0 ] && AS_PG=(setpriv --reuid=postgres --regid=postgres --init-groups
                                env HOME="${PG_HOME:-/tmp}" USER=postgres LOGNAME=postgres)
REDIS_PID= PM_PID=
EXTRA_PIDS=()

free_port() {
    perl -MIO::Socket::INET -e '
        for (1 .. 1000) { my $p = 61000 + int(rand(4000)); next if grep { $_ == $p } @ARGV;
          my $s = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => $p, Listen => 1, ReuseAddr => 1) or next;
          close $s; print "$p\n"; exit 0; } exit 1' -- "$@"
}
cleanup() {
    set +e
    if [ -n "$PM_PID" ] && kill -0 "$PM_PID" 2>/dev/null; then
        "${AS_PG[@]}" "$PGBIN/pg_ctl" -D "$VG/data" -m fast -t 300 stop >/dev/null 2>&1 || kill -KILL "$PM_PID"
    fi
    if [ -n "$REDIS_PID" ]; then kill -TERM "$REDIS_PID" 2>/dev/null; wait "$REDIS_PID" 2>/dev/null; fi
    for p in "${EXTRA_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP

if "$PGBIN/pg_config" --cflags | grep -qw -- -DUSE_VALGRIND; then
    echo "valgrind-regress: $PGBIN: built with USE_VALGRIND (overruns inside palloc chunks are seen)"
else
    echo "valgrind-regress: $PGBIN: built without USE_VALGRIND (overruns inside a context's block go unseen)"
fi

rm -rf "$VG"; mkdir -p "$VG/vglogs" "$VG/redis" "$VG/out" "$VG/sock"
chown -R postgres: "$VG" 2>/dev/null || true

rport=$(free_port); pgport=$(free_port "$rport")
"${AS_PG[@]}" "$REDIS_SERVER" --port "$rport" --bind 127.0.0.1 --save '' --appendonly no \
    --daemonize no --dir "$VG/redis" --logfile "$VG/redis/redis.log" &
REDIS_PID=$!
for i in $(seq 1 100); do [ "$("$REDIS_CLI" -p "$rport" ping 2>/dev/null)" = PONG ] && break; sleep 0.1; done

echo "valgrind-regress: initdb (without valgrind)"
# UTF8 and C whatever the machine's locale: expected/ holds UTF-8 names
"${AS_PG[@]}" "$PGBIN/initdb" -D "$VG/data" -A trust -N -E UTF8 --locale=C >"$VG/initdb.log" 2>&1
cat >> "$VG/data/postgresql.conf" <<CONF
shared_preload_libraries = 'redislock'
redislock.url = 'redis://127.0.0.1:$rport'
# valgrind makes everything ~20-50x slower
redislock.command_timeout = '30s'
redislock.connect_timeout = '30s'
listen_addresses = ''
port = $pgport
unix_socket_directories = '$VG/sock'
max_connections = 20
fsync = off
log_line_prefix = '%m [%p] '
CONF

echo "valgrind-regress: starting postmaster under valgrind"
"${AS_PG[@]}" valgrind --tool=memcheck --trace-children=yes --leak-check=no \
    --track-origins=no --num-callers=30 --error-limit=no \
    --suppressions="$WORK/test/faults/valgrind.supp" \
    --log-file="$VG/vglogs/vg.%p.log" \
    "$PGBIN/postgres" -D "$VG/data" >"$VG/postmaster.log" 2>&1 &
PM_PID=$!
ok=0
for i in $(seq 1 600); do     # up to 300 s
    if "$PGBIN/pg_isready" -q -h "$VG/sock" -p "$pgport"; then ok=1; break; fi
    kill -0 "$PM_PID" 2>/dev/null || break
    sleep 0.5
done
if [ "$ok" != 1 ]; then
    echo "valgrind-regress: server did not start"; tail -n 30 "$VG/postmaster.log"; exit 1
fi

echo "valgrind-regress: pg_regress $TESTS"
rrc=0
# shellcheck disable=SC2086
"${AS_PG[@]}" "$PG_REGRESS" --host="$VG/sock" --port="$pgport" \
    --inputdir="$WORK/test" --outputdir="$VG/out" --bindir="$PGBIN" \
    --dbname=contrib_regression $TESTS > >(tee "$VG/pg_regress.stdout") 2>&1 || rrc=$?

# --- Redlock and cluster status paths under valgrind ------------------------------
# start_redis NAME [redis-server options...]: prints the port
start_redis() {
    local name=$1 port; shift
    port=$(free_port "$rport" "$pgport" "${USED_PORTS[@]}")
    USED_PORTS+=("$port")
    mkdir -p "$VG/redis/$name"; chown postgres: "$VG/redis/$name" 2>/dev/null || true
    "${AS_PG[@]}" "$REDIS_SERVER" --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
        --daemonize no --dir "$VG/redis/$name" --logfile "$VG/redis/$name/redis.log" "$@" &
    EXTRA_PIDS+=($!)
    for i in $(seq 1 100); do [ "$("$REDIS_CLI" -p "$port" ping 2>/dev/null)" = PONG ] && break; sleep 0.1; done
    PORT=$port
}
# readers PORT...: a Redisson read-write lock vg:rw with 300 readers, and an
# application hash vg:app, on each node (-c: follow cluster redirections)
readers() {
    local p args
    args=$(for i in $(seq 1 300); do printf ' 0b7e6a4c-2f1d-4b8e-9c3a-5d6f7e8a9b0c:%d 1' "$i"; done)
    for p in "$@"; do
        # shellcheck disable=SC2086
        "$REDIS_CLI" -c -p "$p" HSET vg:rw mode read $args >/dev/null
        "$REDIS_CLI" -c -p "$p" PEXPIRE vg:rw 600000 >/dev/null
        "$REDIS_CLI" -c -p "$p" HSET vg:app user secret >/dev/null
    done
}
# status_paths SETTING VALUE: the status calls in one session with SETTING
status_paths() {
    "${AS_PG[@]}" "$PGBIN/psql" -X -At -h "$VG/sock" -p "$pgport" -d contrib_regression 2>&1 <<SQL | sed -e 's/^psql:<stdin>:[0-9]*: //' | grep -v '^SET$'
SET redislock.$1 = '$2';
SELECT 'holders', cardinality(holders) FROM redis_lock_status('vg:rw');
SELECT 'nodes', count(*) FILTER (WHERE cardinality(holders) = 300) FROM redis_lock_nodes('vg:rw');
SELECT 'acquire', redis_lock_acquire('vg:lock', '0', '1 min');
SELECT 'mine', held_by_me, cardinality(holders) FROM redis_lock_status('vg:lock');
SELECT 'release', redis_lock_release('vg:lock');
SELECT 'app', locked FROM redis_lock_status('vg:app');
SQL
}
USED_PORTS=()
multi_expect='holders|300
nodes|NODES
acquire|t
mine|t|1
release|t
ERROR:  Redis key "vg:app" is not a lock'
mrc=0
# check_status_paths MODE SETTING NODES PORT...: the status paths of one
# mode under valgrind, their output compared with multi_expect
check_status_paths() {
    local mode=$1 setting=$2 nodes=$3 list out
    shift 3
    list=$(printf '127.0.0.1:%s,' "$@"); list=${list%,}
    echo "valgrind-regress: $mode status paths ($list)"
    out=$(status_paths "$setting" "$list" | grep -v '^DETAIL\|^HINT' || true)
    if [ "$out" != "${multi_expect/NODES/$nodes}" ]; then
        echo "valgrind-regress: FAIL: $mode status paths printed:"; echo "$out"; mrc=1
    fi
}
rl_ports=()
for n in 1 2 3; do start_redis "redlock$n"; rl_ports+=("$PORT"); done
readers "${rl_ports[@]}"
check_status_paths redlock redlock_nodes 3 "${rl_ports[@]}"
cl_ports=()
for n in 1 2 3; do
    # the bus port must be given: port + 10000 may be past 65535
    bus=$(free_port "$rport" "$pgport" "${USED_PORTS[@]}"); USED_PORTS+=("$bus")
    start_redis "cluster$n" --cluster-enabled yes --cluster-config-file nodes.conf \
        --cluster-node-timeout 5000 --cluster-port "$bus"
    cl_ports+=("$PORT")
done
"$REDIS_CLI" --cluster create "${cl_ports[@]/#/127.0.0.1:}" --cluster-replicas 0 --cluster-yes \
    >"$VG/redis/cluster-create.log" 2>&1 || { echo "valgrind-regress: FAIL: cluster create"; mrc=1; }
for i in $(seq 1 200); do
    okn=0
    for p in "${cl_ports[@]}"; do "$REDIS_CLI" -p "$p" cluster info 2>/dev/null | grep -q 'cluster_state:ok' && okn=$((okn + 1)); done
    [ "$okn" = 3 ] && break; sleep 0.1
done
readers "${cl_ports[0]}"
check_status_paths cluster cluster_nodes 1 "${cl_ports[@]}"

# --- TLS under valgrind: locks, a bounded wait on pub/sub, setup failures -------
# Throwaway certificates: a CA and a server certificate for 127.0.0.1, and a
# second CA with its own server certificate that the client does not trust.
TLS=$VG/tls; mkdir -p "$TLS"
mkcert() {  # NAME CA: a P-256 key and a certificate for 127.0.0.1 signed by CA
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" \
        -keyout "$TLS/$1.key" -out "$TLS/$1.csr" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1\n' > "$TLS/$1.ext"
    openssl x509 -req -in "$TLS/$1.csr" -CA "$TLS/$2.crt" -CAkey "$TLS/$2.key" -CAcreateserial \
        -days 2 -extfile "$TLS/$1.ext" -out "$TLS/$1.crt" 2>/dev/null
}
for ca in ca otherca; do
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=$ca" \
        -keyout "$TLS/$ca.key" -out "$TLS/$ca.crt" 2>/dev/null
done
mkcert server ca; mkcert untrusted otherca
chmod 600 "$TLS"/*.key; chown -R postgres: "$TLS" 2>/dev/null || true
start_tls_redis() {  # NAME CERT: a TLS-only redis-server; prints nothing, sets PORT
    local name=$1 cert=$2 port
    port=$(free_port "$rport" "$pgport" "${USED_PORTS[@]}"); USED_PORTS+=("$port")
    mkdir -p "$VG/redis/$name"; chown postgres: "$VG/redis/$name" 2>/dev/null || true
    "${AS_PG[@]}" "$REDIS_SERVER" --port 0 --tls-port "$port" --bind 127.0.0.1 --save '' \
        --tls-cert-file "$TLS/$cert.crt" --tls-key-file "$TLS/$cert.key" \
        --tls-ca-cert-file "$TLS/ca.crt" --tls-auth-clients no \
        --daemonize no --dir "$VG/redis/$name" --logfile "$VG/redis/$name/redis.log" &
    EXTRA_PIDS+=($!)
    for i in $(seq 1 100); do
        [ "$("$REDIS_CLI" --tls --insecure -p "$port" ping 2>/dev/null)" = PONG ] && break; sleep 0.1
    done
    PORT=$port
}
start_tls_redis tls server; tls_port=$PORT
start_tls_redis tls_untrusted untrusted; untrusted_port=$PORT
"$REDIS_CLI" --tls --cacert "$TLS/ca.crt" -p "$tls_port" HSET vg:held other-owner:1 1 >/dev/null
"$REDIS_CLI" --tls --cacert "$TLS/ca.crt" -p "$tls_port" PEXPIRE vg:held 600000 >/dev/null
echo "valgrind-regress: TLS paths (127.0.0.1:$tls_port)"
tls_out=$("${AS_PG[@]}" "$PGBIN/psql" -X -At -h "$VG/sock" -p "$pgport" -d contrib_regression 2>&1 <<SQL | sed -e 's/^psql:<stdin>:[0-9]*: //' | grep -v '^SET$\|^HINT' || true
SET redislock.tls_ca_file = '$TLS/ca.crt';
SET redislock.connect_timeout = '30s';
SET redislock.url = 'rediss://127.0.0.1:$tls_port';
SELECT 'acquire', redis_lock_acquire('vg:lock', '0', '1 min');
SELECT 'mine', held_by_me FROM redis_lock_status('vg:lock');
SELECT 'release', redis_lock_release('vg:lock');
SELECT 'wait', redis_lock_acquire('vg:held', '300 ms', '1 min');
SET redislock.url = 'rediss://127.0.0.1:$untrusted_port';
SELECT 'untrusted', redis_lock_acquire('vg:lock', '0', '1 min');
SET redislock.connect_timeout = '2s';
SET redislock.url = 'rediss://127.0.0.1:$rport';
SELECT 'plain', redis_lock_acquire('vg:lock', '0', '1 min');
SQL
)
tls_expect="acquire|t
mine|t
release|t
wait|f
ERROR:  could not connect to Redis server \"127.0.0.1:$untrusted_port\"
DETAIL:  The server's certificate is not trusted: unable to get local issuer certificate
ERROR:  could not connect to Redis server \"127.0.0.1:$rport\"
DETAIL:  The TLS handshake did not finish within redislock.connect_timeout (2000 ms)."
if [ "$tls_out" != "$tls_expect" ]; then
    echo "valgrind-regress: FAIL: TLS paths printed:"; echo "$tls_out"; mrc=1
fi

"${AS_PG[@]}" "$PGBIN/pg_ctl" -D "$VG/data" -m fast -t 300 stop || true
for i in $(seq 1 600); do kill -0 "$PM_PID" 2>/dev/null || break; sleep 0.5; done
PM_PID=

# --- judge ------------------------------------------------------------------------
fail=0
if grep -E 'terminated by signal|TRAP:|PANIC:' "$VG/postmaster.log"; then
    echo "valgrind-regress: FAIL: a process died (see above)"; fail=1
fi
# Split every valgrind log into error blocks (blank-line separated, each
# starting "==pid== <kind>") and classify.
perl -e '
    my ($ours, $other, %kinds) = (0, 0);
    for my $f (@ARGV) {
        open my $fh, "<", $f or next; local $/; my $t = <$fh>; close $fh;
        $t =~ s/^==\d+== ?//mg;
        for my $blk (split /\n\s*\n/, $t) {
            next unless $blk =~ /^(Invalid (read|write|free)|Conditional jump|Use of uninitialised|Syscall param|Mismatched free|Source and destination overlap|Jump to the invalid)/m;
            my ($kind) = $blk =~ /^(.*)$/m;
            if ($blk =~ /redislock\.so|src\/\w+\.c/) {
                $ours++; print "---- redislock error in $f:\n$blk\n\n";
            } else { $other++; $kinds{$kind}++; }
        }
    }
    print "valgrind-regress: $ours error(s) with redislock frames, $other other (PostgreSQL/libc) error(s)\n";
    print "  other: $_ x$kinds{$_}\n" for sort keys %kinds;
    exit($ours ? 1 : 0);
' "$VG"/vglogs/vg.*.log || fail=1
nlogs=$(ls "$VG"/vglogs | wc -l)
echo "valgrind-regress: $nlogs valgrind process logs in $VG/vglogs"
if [ "$rrc" -ne 0 ]; then
    # Output differences under valgrind (timing) are reported, not judged:
    # the plain pg_regress run in test/run-all.sh judges output.
    echo "valgrind-regress: note: pg_regress exit $rrc under valgrind (diffs in $VG/out/regression.diffs):"
    head -n 60 "$VG/out/regression.diffs" 2>/dev/null || true
fi
sleep 0.2   # tee of the process substitution flushes
nok=$(grep -cE '\.\.\. +ok' "$VG/pg_regress.stdout" 2>/dev/null || true)
echo "valgrind-regress: pg_regress tests ok under valgrind: $nok of $(echo $TESTS | wc -w)"
if grep -q 'exited with exit code' "$VG/pg_regress.stdout" 2>/dev/null || [ "${nok:-0}" -eq 0 ]; then
    echo "valgrind-regress: FAIL: pg_regress could not run the tests (psql failed)"; fail=1
fi
[ "$mrc" -eq 0 ] || fail=1
exit "$fail"
