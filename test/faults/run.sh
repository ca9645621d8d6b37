#!/usr/bin/env bash
# redislock fault/abuse tests: runs every test/faults/t/*.pl as TAP (prove)
# against real redis-server / PostgreSQL processes (the kill and partition
# tests, 020 and 030, a second time with every Redis over TLS, counted and
# named as <test>_tls), then the pg_regress suite under valgrind.  Stops everything it started; exits non-zero on any failure
# and ends with the line
#     faults: N passed, M failed
#
# Usage: bash test/faults/run.sh [--no-deps] [--no-build] [--no-valgrind]
#                                [--valgrind-only] [TAP files...]
# Environment:
#   REDISLOCK_KEEP=1                   keep the work dir (logs, data dirs)
#   REDISLOCK_FAULT_TIMEOUT=600        seconds per TAP file (hard bound)
#   REDISLOCK_VALGRIND_TIMEOUT=1800    seconds for the valgrind pg_regress run
#
# Must run as root (CI and the dev machine are root): PostgreSQL refuses root,
# so servers and tests run as "postgres" in a postgres-owned copy of the
# repo's test inputs; root is only used for apt-get, make install, and the
# network namespace of the partition test (030), which this script creates
# before prove and removes on exit.  The test (running as postgres) asks for
# partition/heal through a FIFO served by a small root loop that accepts only
# a fixed list of commands on that namespace (see netns_ctl below).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TAP_TIMEOUT=${REDISLOCK_FAULT_TIMEOUT:-600}
VG_TIMEOUT=${REDISLOCK_VALGRIND_TIMEOUT:-1800}

DO_DEPS=1 DO_BUILD=1 DO_VG=1 DO_TAP=1
TAP_ARGS=()
while [ $# -gt 0 ]; do
    case "$1" in
        --no-deps) DO_DEPS=0 ;;
        --no-build) DO_BUILD=0 ;;
        --no-valgrind) DO_VG=0 ;;
        --valgrind-only) DO_TAP=0 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*) echo "faults: unknown option $1" >&2; exit 2 ;;
        *) TAP_ARGS+=("$1") ;;
    esac
    shift
done

if [ "$(id -u)" -ne 0 ]; then
    echo "faults: must run as root (apt-get, make install, network namespace; servers run as postgres)" >&2
    exit 2
fi

PASSED=0 FAILED=0
FAILED_NAMES=()
WORK='' NS='' VETH_H='' VETH_N='' NS_REDIS_PID='' NS_TLS_REDIS_PID='' CTL_PID=''
SUMMARY_PRINTED=0
# shellcheck source=../lib/common.sh
. "$ROOT/test/lib/common.sh"

log() { printf '\n=== faults: %s\n' "$*"; }

summary() {
    [ "$SUMMARY_PRINTED" = 1 ] && return
    SUMMARY_PRINTED=1
    [ ${#FAILED_NAMES[@]} -gt 0 ] && { echo; echo "faults: FAILED: ${FAILED_NAMES[*]}"; }
    echo "faults: $PASSED passed, $FAILED failed"
}

netns_teardown() {
    if [ -n "$CTL_PID" ]; then kill "$CTL_PID" 2>/dev/null || true; wait "$CTL_PID" 2>/dev/null || true; CTL_PID=; fi
    kill_pid_if "$NS_REDIS_PID" "$REDIS_COMM*"; NS_REDIS_PID=
    kill_pid_if "$NS_TLS_REDIS_PID" "$REDIS_COMM*"; NS_TLS_REDIS_PID=
    if [ -n "$NS" ]; then
        ip link del "$VETH_H" 2>/dev/null || true
        ip route del unreachable 10.200.0.0/30 metric 4242 2>/dev/null || true
        ip netns del "$NS" 2>/dev/null || true
        NS=
    fi
}

cleanup() {
    local rc=$?
    set +e
    trap - EXIT INT TERM HUP
    stop_child
    netns_teardown
    if [ -n "$WORK" ] && [ -d "$WORK" ]; then
        stop_leftovers "$WORK" faults
        if [ "${REDISLOCK_KEEP:-0}" = 1 ] || [ "$FAILED" -gt 0 ] || [ "$rc" -ne 0 ]; then
            echo "faults: work dir kept: $WORK"
        else
            rm -rf "$WORK"
        fi
    fi
    if [ "$rc" -ne 0 ] && { [ "$FAILED" -eq 0 ] || [ "$rc" -gt 128 ]; }; then
        FAILED=$((FAILED + 1)); FAILED_NAMES+=("run.sh(exit $rc)")
    fi
    summary
    [ "$FAILED" -gt 0 ] && exit 1
    exit "$rc"
}
trap cleanup EXIT
trap 'echo "faults: interrupted" >&2; exit 130' INT
trap 'echo "faults: terminated" >&2; exit 143' TERM HUP

# --- 1. dependencies ------------------------------------------------------------
if [ "$DO_DEPS" = 1 ]; then
    log "dependencies"
    bash "$ROOT/test/setup-deps.sh"
    extra=()
    for p in iproute2 valgrind; do
        [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" = "install ok installed" ] || extra+=("$p")
    done
    if [ ${#extra[@]} -gt 0 ]; then
        echo "faults: installing ${extra[*]}"
        apt-get update
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${extra[@]}"
    fi
fi

pg_paths || { FAILED=$((FAILED + 1)); FAILED_NAMES+=(postgresql); exit 1; }
redis_paths    # setup-deps may just have installed it

# --- 2. build (no "make clean": others may share the tree) ---------------------------
if [ "$DO_BUILD" = 1 ]; then
    log "build and install"
    make -C "$ROOT" PG_CONFIG="$PG_CONFIG" && make -C "$ROOT" PG_CONFIG="$PG_CONFIG" install \
        || { FAILED=$((FAILED + 1)); FAILED_NAMES+=(build); exit 1; }
fi

# --- 3. work dir owned by postgres ------------------------------------------------
WORK=$(mktemp -d /tmp/redislock-faults.XXXXXX)
for d in sql lua test; do cp -r "$ROOT/$d" "$WORK/"; done
chown -R postgres: "$WORK"
chmod 755 "$WORK"
cd "$WORK"
log "work dir $WORK"

# --- 4. network namespace for 030 (root part) ----------------------------------------
# Namespace rlf<pid> with a veth pair; host end 10.200.0.1/30, namespace end
# 10.200.0.2/30 (private test addresses, only inside this pair; protected-mode
# off since the only peer is our veth).  redis-server
# runs inside it as postgres.  netns_ctl serves partition/heal requests.
NETNS_ENV=()
netns_setup() {
    local id=$$
    NS=rlf$id; VETH_H=rlfh$id; VETH_N=rlfn$id
    VETH_H=${VETH_H:0:15}; VETH_N=${VETH_N:0:15}
    ip netns add "$NS" || { NS=; return 1; }
    ip link add "$VETH_H" type veth peer name "$VETH_N" || return 1
    ip link set "$VETH_N" netns "$NS" || return 1
    ip addr add 10.200.0.1/30 dev "$VETH_H" || return 1
    ip link set "$VETH_H" up || return 1
    # While the host end is down its /30 route is gone: without this the
    # default route would carry 10.200.0.2 off the machine.  With it, the
    # "partition" mode answers EHOSTUNREACH locally and nothing leaves.
    ip route add unreachable 10.200.0.0/30 metric 4242 || return 1
    ip -n "$NS" addr add 10.200.0.2/30 dev "$VETH_N" || return 1
    ip -n "$NS" link set "$VETH_N" up || return 1
    ip -n "$NS" link set lo up || return 1
    mkdir -p "$WORK/netns/redis"
    chown -R postgres: "$WORK/netns"
    ip netns exec "$NS" setpriv --reuid=postgres --regid=postgres --init-groups \
        "$REDIS_SERVER" --port 6379 --bind 10.200.0.2 --protected-mode no --save '' --appendonly no \
        --daemonize no --dir "$WORK/netns/redis" --pidfile "$WORK/netns/redis/redis.pid" \
        --logfile "$WORK/netns/redis/redis.log" &
    NS_REDIS_PID=$!
    for _ in $(seq 1 100); do
        [ "$("$REDIS_CLI" -h 10.200.0.2 -p 6379 ping 2>/dev/null)" = PONG ] && break
        sleep 0.1
    done
    [ "$("$REDIS_CLI" -h 10.200.0.2 -p 6379 ping 2>/dev/null)" = PONG ] || return 1
    netns_tls_redis || return 1
    # Control FIFO: the postgres-run test writes "<cmd> <id>"; we answer by
    # creating ack/<id> with the result.  Only these commands exist.
    mkfifo "$WORK/netns/ctl"; mkdir "$WORK/netns/ack"
    chown postgres: "$WORK/netns/ctl" "$WORK/netns/ack"; chmod 600 "$WORK/netns/ctl"
    (
        trap - EXIT INT TERM HUP
        exec 3<>"$WORK/netns/ctl"     # keep a writer open: read never sees EOF
        while read -r cmd id <&3; do
            [[ "$id" =~ ^[0-9]+$ ]] || continue
            case "$cmd" in
                # host end down: routes to 10.200.0.0/30 vanish (EHOSTUNREACH /
                # ENETUNREACH on new connects, in-flight requests get no answer)
                partition) ip link set "$VETH_H" down ;;
                # namespace end down: host route stays, packets are silently
                # dropped (connects time out, like a pulled cable elsewhere)
                blackhole) ip -n "$NS" link set "$VETH_N" down ;;
                heal) ip -n "$NS" link set "$VETH_N" up && ip link set "$VETH_H" up ;;
                *) echo "bad" > "$WORK/netns/ack/$id"; continue ;;
            esac
            echo "rc=$?" > "$WORK/netns/ack/$id.tmp"; mv "$WORK/netns/ack/$id.tmp" "$WORK/netns/ack/$id"
            chown postgres: "$WORK/netns/ack/$id"
        done
    ) &
    CTL_PID=$!
    NETNS_ENV=(REDISLOCK_NETNS_HOST=10.200.0.2 REDISLOCK_NETNS_PORT=6379
               REDISLOCK_NETNS_TLS_PORT=6380 REDISLOCK_NETNS_TLS_CA="$WORK/netns/tls/ca.crt"
               REDISLOCK_NETNS_CTL="$WORK/netns/ctl" REDISLOCK_NETNS_ACK="$WORK/netns/ack")
}

# A second, TLS-only redis-server in the namespace (10.200.0.2:6380) for the
# TLS run of 030, with a throwaway CA and a certificate for 10.200.0.2.
netns_tls_redis() {
    local d="$WORK/netns/tls"
    mkdir -p "$d" "$WORK/netns/redis-tls"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -subj "/CN=redislock fault CA" -keyout "$d/ca.key" -out "$d/ca.crt" 2>/dev/null || return 1
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=10.200.0.2" \
        -keyout "$d/server.key" -out "$d/server.csr" 2>/dev/null || return 1
    printf 'subjectAltName=IP:10.200.0.2\n' > "$d/server.ext"
    openssl x509 -req -in "$d/server.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
        -days 2 -extfile "$d/server.ext" -out "$d/server.crt" 2>/dev/null || return 1
    chmod 600 "$d"/*.key
    chown -R postgres: "$d" "$WORK/netns/redis-tls"
    ip netns exec "$NS" setpriv --reuid=postgres --regid=postgres --init-groups \
        "$REDIS_SERVER" --port 0 --tls-port 6380 --bind 10.200.0.2 --protected-mode no --save '' \
        --appendonly no --tls-cert-file "$d/server.crt" --tls-key-file "$d/server.key" \
        --tls-ca-cert-file "$d/ca.crt" --tls-auth-clients no --daemonize no \
        --dir "$WORK/netns/redis-tls" --logfile "$WORK/netns/redis-tls/redis.log" &
    NS_TLS_REDIS_PID=$!
    for _ in $(seq 1 100); do
        [ "$("$REDIS_CLI" --tls --cacert "$d/ca.crt" -h 10.200.0.2 -p 6380 ping 2>/dev/null)" = PONG ] && return 0
        sleep 0.1
    done
    return 1
}

# --- 5. TAP tests ----------------------------------------------------------------------
run_tap() {
    local files=() f b
    if [ ${#TAP_ARGS[@]} -gt 0 ]; then
        for f in "${TAP_ARGS[@]}"; do files+=("test/faults/t/$(basename "$f")"); done
    else
        for f in "$WORK"/test/faults/t/*.pl; do files+=("test/faults/t/$(basename "$f")"); done
    fi
    # tests 010 and 040 run the newest version of the real Redisson client
    if build_redisson "$WORK" NEWEST "${files[@]}"; then
        [ ${#REDISSON_ENV[@]} -eq 0 ] || PASSED=$((PASSED + 1))
    else
        FAILED=$((FAILED + 1)); FAILED_NAMES+=("redisson-java(build)")
    fi
    local want_ns=0
    for f in "${files[@]}"; do case "$f" in *partition*) want_ns=1 ;; esac; done
    if [ "$want_ns" = 1 ]; then
        log "network namespace setup"
        if ! netns_setup; then
            echo "faults: network namespace setup failed; 030 will skip with the reason" >&2
            netns_teardown
            NETNS_ENV=(REDISLOCK_NETNS_SKIP="ip netns/veth setup failed on this machine")
        fi
    fi
    local env=(PATH="$PGBIN:$PATH" TESTDIR="$WORK" PG_REGRESS="$PG_REGRESS"
               TESTDATADIR="$WORK/tmp_check" TESTLOGDIR="$WORK/tmp_check/log"
               PERL5LIB="$WORK/test/lib:$WORK/test/redisson:$WORK/test/faults/lib:$PG_PERL_LIB${PERL5LIB:+:$PERL5LIB}"
               REDISLOCK_TEST_WORKDIR="$WORK" "${NETNS_ENV[@]}" "${REDISSON_ENV[@]}")
    [ "${REDISLOCK_KEEP:-0}" = 1 ] && env+=(PG_TEST_NOCLEAN=1)
    # The kill and partition tests run a second time with Redis over TLS
    # (REDISLOCK_FAULT_TLS=1), through a link named <test>_tls.pl: the test
    # name comes from the script's name, so the TLS run has data dirs, server
    # logs and regress_log of its own (a failed or kept plain run's data dirs
    # would make its initdb fail, and its regress_log would be overwritten).
    local runs=() tls
    for f in "${files[@]}"; do runs+=("$f:"); done
    for f in "${files[@]}"; do
        case "$f" in *redis_kill_restart*|*partition*) runs+=("$f:tls") ;; esac
    done
    for run in "${runs[@]}"; do
        f=${run%:*}; tls=${run##*:}
        b=$(basename "$f" .pl)${tls:+_tls}
        [ -f "$WORK/$f" ] || { echo "faults: no such test $f" >&2; FAILED=$((FAILED + 1)); FAILED_NAMES+=("$b(missing)"); continue; }
        if [ -n "$tls" ]; then
            mkdir -p "$WORK/test/faults/t_tls"
            ln -sfn "../t/$(basename "$f")" "$WORK/test/faults/t_tls/$b.pl"
            f=test/faults/t_tls/$b.pl
        fi
        log "TAP $f${tls:+ (over TLS)}"
        local rc=0
        run_waited timeout -k 10 "$TAP_TIMEOUT" "${AS_PG[@]}" "${env[@]}" \
            ${tls:+REDISLOCK_FAULT_TLS=1} prove -v "$f" > >(tee "$WORK/tap_$b.out") 2>&1 || rc=$?
        if [ "$rc" -eq 0 ]; then
            PASSED=$((PASSED + 1))
        else
            FAILED=$((FAILED + 1)); FAILED_NAMES+=("$b")
            [ "$rc" -eq 124 ] && echo "faults: $f timed out after ${TAP_TIMEOUT}s" >&2
            for lg in "$WORK"/tmp_check/log/*"$b"*; do
                [ -f "$lg" ] || continue
                log "tail of ${lg#"$WORK"/}"; tail -n 40 "$lg"
            done
        fi
    done
    netns_teardown
}

# --- 6. pg_regress under valgrind -------------------------------------------------------
run_valgrind() {
    log "pg_regress under valgrind"
    local rc=0
    run_waited timeout -k 30 "$VG_TIMEOUT" bash "$WORK/test/faults/valgrind-regress.sh" "$WORK" \
        "$(make -s -C "$ROOT" PG_CONFIG="$PG_CONFIG" regress-list)" || rc=$?
    if [ "$rc" -eq 0 ]; then PASSED=$((PASSED + 1)); else
        FAILED=$((FAILED + 1)); FAILED_NAMES+=("valgrind-regress")
        [ "$rc" -eq 124 ] && echo "faults: valgrind run timed out after ${VG_TIMEOUT}s" >&2
    fi
}

[ "$DO_TAP" = 1 ] && run_tap
[ "$DO_VG" = 1 ] && run_valgrind
[ "$FAILED" -eq 0 ]
