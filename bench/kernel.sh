#!/bin/bash
# kernel.sh: where a request's time goes when one request is in flight per
# connection, memcached-pm against Debian's memcached.
#
# Each server in turn (same -t, -m, key set, pinned as compare.sh pins
# them) gets GET/SET 90/10 with 32-byte values on 50 connections, one
# request in flight on each, for DURATION seconds.  Per request it prints
# the server's CPU time and the kernel's share of it (utime/stime), its
# system calls (perf stat, when perf may count them), its context
# switches, and the TCP segments the machine carried (/proc/net/snmp).
# Both servers make the same calls and send the same segments, so the
# kernel's part is a floor that no user-space change lowers; the last line
# says how much faster than memcached a server with no user time at all
# could be.

set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MCPM_BIN=${MCPM_BIN:-$ROOT/memcached-pm/memcached-pm}
MC_BIN=${MC_BIN:-/usr/bin/memcached}
MCLOAD=${MCLOAD_BIN:-$ROOT/bench/mcload}
THREADS=${THREADS:-4}
MEM=${MEM:-1024}
KEYS=${KEYS:-100000}
CONNS=${CONNS:-50}
DURATION=${DURATION:-10}
SERVER_CPU=${SERVER_CPU:-1}
LOAD_CPU=${LOAD_CPU:-0}

if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
    cat <<EOF
usage: bench/kernel.sh
environment (defaults in brackets):
  MCPM_BIN [memcached-pm/memcached-pm]   MC_BIN [/usr/bin/memcached]
  MCLOAD_BIN [bench/mcload]  THREADS [4]  MEM [1024]  KEYS [100000]
  CONNS [50]  DURATION [10]  SERVER_CPU [1]  LOAD_CPU [0]
EOF
    exit 0
fi

PIDS=()
TMP=$(mktemp -d /tmp/mcpm-kernel.XXXXXX)
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$TMP"
}
trap cleanup EXIT

die() {
    echo "kernel.sh: $*" >&2
    exit 1
}

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

pin_cpus

# segs: TCP segments the machine has received so far (on loopback each
# segment sent is received once).
segs() {
    awk '$1 == "Tcp:" && $2 ~ /^[0-9]/ { print $11 }' /proc/net/snmp
}

# One server: prints "ops/s" then, per request, "cpu_ns kern% syscalls
# context-switches segments".
measure() {
    local name=$1 bin=$2 port pid c0 c1 u0 s0 u1 s1 g0 g1 reqs ops
    local args perf=()
    port=$(free_port)
    args=(-p "$port" -U 0 -l 127.0.0.1 -t "$THREADS" -m "$MEM")
    [ "$(id -u)" = 0 ] && args+=(-u root)
    "${PIN_SERVER[@]}" "$bin" "${args[@]}" >/dev/null 2>&1 &
    pid=$!
    PIDS+=("$pid")
    wait_ready "$port" "$pid"
    mcload --server "127.0.0.1:$port" --preload --requests 1 \
        --keys "$KEYS" --conns "$CONNS" --depth 16 >/dev/null ||
        die "preload of $name failed"
    settle "$pid"
    if command -v perf >/dev/null &&
       perf stat -e raw_syscalls:sys_enter -p "$pid" -o /dev/null \
           -- sleep 0.1 >/dev/null 2>&1; then
        perf=(perf stat -x, -e raw_syscalls:sys_enter,context-switches
              -p "$pid" -o "$TMP/$name.perf")
    fi
    c0=$(cpu_ns "$pid")
    read -r u0 s0 < <(ticks "$pid")
    g0=$(segs)
    if [ ${#perf[@]} -gt 0 ]; then
        "${perf[@]}" -- sleep $((DURATION + 1)) &
        PIDS+=("$!")
    fi
    mcload --server "127.0.0.1:$port" --keys "$KEYS" --conns "$CONNS" \
        --get-ratio 0.9 --duration "$DURATION" --requests 0 --json \
        >"$TMP/$name.json" || true
    g1=$(segs)
    c1=$(cpu_ns "$pid")
    read -r u1 s1 < <(ticks "$pid")
    if [ ${#perf[@]} -gt 0 ]; then
        wait "${PIDS[-1]}" || true
    fi
    read -r ops reqs < <(json "$TMP/$name.json" ops_per_sec requests)
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    awk -v n="$reqs" -v ops="$ops" -v c="$((c1 - c0))" \
        -v u="$((u1 - u0))" -v s="$((s1 - s0))" -v g="$((g1 - g0))" \
        -v f="$TMP/$name.perf" 'BEGIN {
        sc = "-"; cs = "-"
        while ((getline line < f) > 0) {
            split(line, p, ",")
            if (p[3] ~ /sys_enter/) sc = sprintf("%.2f", p[1] / n)
            if (p[3] ~ /context-switches/) cs = sprintf("%.3f", p[1] / n)
        }
        printf "%.0f %.0f %.0f %s %s %.2f\n", ops, c / n,
               (u + s > 0 ? 100 * s / (u + s) : 0), sc, cs, g / n }'
}

command -v "$MC_BIN" >/dev/null || die "no memcached at $MC_BIN"
echo "== GET/SET 90/10, 32-byte values, $CONNS conns x 1 in flight," \
     "$KEYS keys, -t $THREADS -m $MEM, ${DURATION}s; per request:"
printf '%-13s %9s %8s %6s %9s %8s %6s\n' server ops/s cpu_ns kern% \
    syscalls cswitch segs
measure memcached-pm "$MCPM_BIN" >"$TMP/a"
measure memcached "$MC_BIN" >"$TMP/b"
read -r a_ops a_cpu a_k a_sc a_cs a_sg <"$TMP/a"
read -r b_ops b_cpu b_k b_sc b_cs b_sg <"$TMP/b"
printf '%-13s %9s %8s %6s %9s %8s %6s\n' memcached-pm "$a_ops" "$a_cpu" \
    "$a_k" "$a_sc" "$a_cs" "$a_sg"
printf '%-13s %9s %8s %6s %9s %8s %6s\n' memcached "$b_ops" "$b_cpu" \
    "$b_k" "$b_sc" "$b_cs" "$b_sg"
awk -v bc="$b_cpu" -v bk="$b_k" 'BEGIN {
    printf "memcached spends %.0f ns of its %.0f ns per request in the " \
           "kernel: a server making the same calls and sending the same " \
           "segments, with no user time at all, would be %.2fx faster\n",
           bc * bk / 100, bc, 100 / bk }'
