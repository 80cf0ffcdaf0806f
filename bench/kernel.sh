#!/bin/bash
# kernel.sh: where a request's time goes when one request is in flight per
# connection: memcached-pm on its io_uring engine, memcached-pm on epoll,
# and Debian's memcached.
#
# Each server in turn (same -t, -m, key set, pinned as compare.sh pins
# them) gets GET/SET 90/10 with 32-byte values on CONNS connections, one
# request in flight on each, for DURATION seconds, ROUNDS times in the
# order A B C C B A ... .  Per request it prints the server's CPU time and
# the kernel's share of it (utime/stime), its system calls and context
# switches (perf stat, when perf may count them, in a separate run: the
# tracing slows every system call), and the TCP segments the machine
# carried (/proc/net/snmp), each the median of the rounds;
# then each memcached-pm engine's ops/s over memcached's and io_uring's
# over epoll's.  On epoll both servers make the same calls and send the
# same segments, so the kernel's part is a floor that no user-space
# change lowers; the io_uring engine changes the calls themselves.

set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MCPM_BIN=${MCPM_BIN:-$ROOT/build/memcached-pm/memcached-pm}
MC_BIN=${MC_BIN:-/usr/bin/memcached}
MCLOAD=${MCLOAD_BIN:-$ROOT/build/bench/mcload}
THREADS=${THREADS:-4}
MEM=${MEM:-1024}
KEYS=${KEYS:-100000}
CONNS=${CONNS:-50}
DURATION=${DURATION:-10}
SERVER_CPU=${SERVER_CPU:-1}
LOAD_CPU=${LOAD_CPU:-0}
ROUNDS=${ROUNDS:-3}
PERF_DURATION=${PERF_DURATION:-3}

if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
    cat <<EOF
usage: bench/kernel.sh
environment (defaults in brackets):
  MCPM_BIN [build/memcached-pm/memcached-pm]   MC_BIN [/usr/bin/memcached]
  MCLOAD_BIN [build/bench/mcload]  THREADS [4]  MEM [1024]  KEYS [100000]
  CONNS [50]  DURATION [10]  ROUNDS [3]  SERVER_CPU [1]  LOAD_CPU [0]
  PERF_DURATION [3] (the separate run that counts system calls)
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
trap 'exit 130' INT
trap 'exit 143' TERM  # so that EXIT runs: the servers go too

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

# The workload on port $1 for $2 seconds: mcload's JSON in $3.
load() {
    mcload --server "127.0.0.1:$1" --keys "$KEYS" --conns "$CONNS" \
        --get-ratio 0.9 --duration "$2" --requests 0 --json >"$3" || true
}

# One server: prints "ops/s" then, per request, "cpu_ns kern% syscalls
# context-switches segments".  Throughput, CPU and segments come from a
# run nothing traces; the system calls and context switches from a second
# run (PERF_DURATION seconds) under perf stat, whose tracepoint costs
# every system call something and would tilt the throughput towards the
# server that makes fewer of them.
measure() {
    local name=$1 bin=$2 port pid c0 c1 u0 s0 u1 s1 g0 g1 reqs ops
    local args perf=() preqs=0
    shift 2
    port=$(free_port)
    args=(-p "$port" -U 0 -l 127.0.0.1 -t "$THREADS" -m "$MEM" "$@")
    [ "$(id -u)" = 0 ] && args+=(-u root)
    "${PIN_SERVER[@]}" "$bin" "${args[@]}" >/dev/null 2>&1 &
    pid=$!
    PIDS+=("$pid")
    wait_ready "$port" "$pid"
    mcload --server "127.0.0.1:$port" --preload --requests 1 \
        --keys "$KEYS" --conns "$CONNS" --depth 16 >/dev/null ||
        die "preload of $name failed"
    settle "$pid"
    c0=$(cpu_ns "$pid")
    read -r u0 s0 < <(ticks "$pid")
    g0=$(segs)
    load "$port" "$DURATION" "$TMP/$name.json"
    g1=$(segs)
    c1=$(cpu_ns "$pid")
    read -r u1 s1 < <(ticks "$pid")
    read -r ops reqs < <(json "$TMP/$name.json" ops_per_sec requests)
    rm -f "$TMP/$name.perf"
    if command -v perf >/dev/null &&
       perf stat -e raw_syscalls:sys_enter -p "$pid" -o /dev/null \
           -- sleep 0.1 >/dev/null 2>&1; then
        perf=(perf stat -x, -e raw_syscalls:sys_enter,context-switches
              -p "$pid" -o "$TMP/$name.perf")
        "${perf[@]}" -- sleep $((PERF_DURATION + 1)) &
        PIDS+=("$!")
        load "$port" "$PERF_DURATION" "$TMP/$name.traced.json"
        wait "${PIDS[-1]}" || true
        preqs=$(json "$TMP/$name.traced.json" requests)
    fi
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    awk -v n="$reqs" -v pn="$preqs" -v ops="$ops" -v c="$((c1 - c0))" \
        -v u="$((u1 - u0))" -v s="$((s1 - s0))" -v g="$((g1 - g0))" \
        -v f="$TMP/$name.perf" 'BEGIN {
        sc = "-"; cs = "-"
        while (pn > 0 && (getline line < f) > 0) {
            split(line, p, ",")
            if (p[3] ~ /sys_enter/) sc = sprintf("%.2f", p[1] / pn)
            if (p[3] ~ /context-switches/) cs = sprintf("%.3f", p[1] / pn)
        }
        printf "%.0f %.0f %.0f %s %s %.2f\n", ops, c / n,
               (u + s > 0 ? 100 * s / (u + s) : 0), sc, cs, g / n }'
}

command -v "$MC_BIN" >/dev/null || die "no memcached at $MC_BIN"
SIDES=(io_uring epoll memcached)
run_side() {
    case $1 in
    io_uring) measure io_uring "$MCPM_BIN" -o event_engine=io_uring ;;
    epoll) measure epoll "$MCPM_BIN" -o event_engine=epoll ;;
    memcached) measure memcached "$MC_BIN" ;;
    esac
}
for ((r = 0; r < ROUNDS; r++)); do
    if ((r % 2 == 0)); then
        order=("${SIDES[@]}")
    else
        order=(memcached epoll io_uring)
    fi
    for side in "${order[@]}"; do
        run_side "$side" >>"$TMP/$side.rounds"
    done
done
# the median of each column over the rounds
median_row() {
    awk '{ for (i = 1; i <= NF; i++) v[i, NR] = $i; n = NR; w = NF }
         END {
             for (i = 1; i <= w; i++) {
                 for (j = 1; j <= n; j++) col[j] = v[i, j]
                 for (j = 1; j <= n; j++) for (k = j + 1; k <= n; k++)
                     if (col[k] + 0 < col[j] + 0) {
                         t = col[j]; col[j] = col[k]; col[k] = t }
                 printf "%s%s", col[int((n + 1) / 2)], (i < w ? " " : "\n")
             }
         }' "$1"
}
echo "== GET/SET 90/10, 32-byte values, $CONNS conns x 1 in flight," \
     "$KEYS keys, -t $THREADS -m $MEM, ${DURATION}s x $ROUNDS; medians" \
     "per request:"
printf '%-22s %9s %8s %6s %9s %8s %6s\n' server ops/s cpu_ns kern% \
    syscalls cswitch segs
for side in "${SIDES[@]}"; do
    median_row "$TMP/$side.rounds" >"$TMP/$side.median"
    read -r ops cpu k sc cs sg <"$TMP/$side.median"
    case $side in
    memcached) label=memcached ;;
    *) label="memcached-pm $side" ;;
    esac
    printf '%-22s %9s %8s %6s %9s %8s %6s\n' "$label" "$ops" "$cpu" "$k" \
        "$sc" "$cs" "$sg"
done
read -r u_ops _ <"$TMP/io_uring.median"
read -r e_ops _ <"$TMP/epoll.median"
read -r m_ops m_cpu m_k _ <"$TMP/memcached.median"
awk -v u="$u_ops" -v e="$e_ops" -v m="$m_ops" -v bc="$m_cpu" -v bk="$m_k" \
    'BEGIN {
    printf "ratio io_uring/memcached %.3f  epoll/memcached %.3f  " \
           "io_uring/epoll %.3f\n", u / m, e / m, u / e
    printf "memcached spends %.0f ns of its %.0f ns per request in the " \
           "kernel: a server making the same calls and sending the same " \
           "segments, with no user time at all, would be %.2fx faster\n",
           bc * bk / 100, bc, 100 / bk }'
