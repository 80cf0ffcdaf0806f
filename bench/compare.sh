#!/bin/bash
# compare.sh: memcached-pm against Debian's memcached, same flags, same load.
#
# Part 1 (throughput): both servers run side by side with the same -t and -m,
# are preloaded with the same key set, and get the same mcload workload in
# turn, A B B A A B ..., so slow drift of a noisy machine and the order
# within a round hit both sides alike.
# Each run's ops/s and p99 are printed, then each side's median and the
# ratio memcached-pm / memcached.
#
# Part 2 (hash growth): each server in turn starts at -o hashpower=16 and a
# SET stream inserts enough new keys to grow the table to 2^21 buckets while
# a second mcload reads a small preloaded key set; the probe's max latency
# is the longest stall a reader saw during the growth.
#
# Servers are pinned to one core and mcload to another (taskset), so the
# generator does not steal the servers' CPU.  Everything started here is
# killed on exit.  Knobs are environment variables; see usage below.

set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MCPM_BIN=${MCPM_BIN:-$ROOT/build/memcached-pm/memcached-pm}
MC_BIN=${MC_BIN:-/usr/bin/memcached}
MCLOAD=${MCLOAD_BIN:-$ROOT/build/bench/mcload}
THREADS=${THREADS:-4}
MEM=${MEM:-1024}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
CONNS=${CONNS:-50}
KEYS=${KEYS:-100000}
VALUE_SIZE=${VALUE_SIZE:-32}
GET_RATIO=${GET_RATIO:-0.9}
# 3.0M inserts plus the probe's keys stay below 1.5 * 2^21, so the table
# ends at exactly 2^21 buckets (one more growth would need 3.15M items).
GROWTH_KEYS=${GROWTH_KEYS:-3000000}
GROWTH_MEM=${GROWTH_MEM:-1024}
# The control run starts presized (no growth happens), so the stall that
# scheduling noise alone causes can be told from the stall of a resize.
CONTROL_HASHPOWER=${CONTROL_HASHPOWER:-22}
SERVER_CPU=${SERVER_CPU:-1}
LOAD_CPU=${LOAD_CPU:-0}
PARTS=${PARTS:-throughput,growth}
# Extra mcload options for the throughput runs (word-split), so other
# workloads reuse the same harness: LOAD_ARGS="--multiget 16 --depth 8".
LOAD_ARGS=${LOAD_ARGS:-}
# UDP=1: both servers also serve UDP on their TCP port number (-U), and
# the throughput runs send their requests over UDP (mcload --udp).
UDP=${UDP:-0}
# TLS=1: both servers run -Z with one self-signed certificate made here
# (same key, same default cipher), and mcload speaks TLS (--tls).
TLS=${TLS:-0}
# Extra server options per side (word-split) and the sides' names, so one
# binary can run against itself with two settings:
#   MC_BIN=$MCPM_BIN A_ARGS="-o prefetch_batch=16" B_ARGS="-o prefetch_batch=0"
A_ARGS=${A_ARGS:-}
B_ARGS=${B_ARGS:-}
# DIR: memcached-pm keeps its items in a memory file in this directory
# (-e DIR/<a new file>, removed after), with the durability its default
# settles on there (a disk: process); memcached runs as it is.
DIR=${DIR:-}
A_NAME=${A_NAME:-memcached-pm}
B_NAME=${B_NAME:-memcached}
# When set, each throughput summary is also appended to this file as one
# tab-separated line: LABEL, then name, median ops/s, p99 us and cpu
# ns/req of side A, the same of side B, then the p99.9 us of A and of B
# (bench/perf.sh plots them and writes them into doc/PERFORMANCE.md).
RESULT_FILE=${RESULT_FILE:-}
LABEL=${LABEL:-throughput}

usage() {
    cat <<EOF
usage: bench/compare.sh
environment (defaults in brackets):
  MCPM_BIN [build/memcached-pm/memcached-pm]   MC_BIN [/usr/bin/memcached]
  MCLOAD_BIN [build/bench/mcload]              THREADS [4] (-t for both)
  MEM [1024] (-m for both)               ROUNDS [3] runs per side
  DURATION [10] seconds per run          CONNS [50]  KEYS [100000]
  VALUE_SIZE [32]  GET_RATIO [0.9]       GROWTH_KEYS [3000000]
  GROWTH_MEM [1024]  CONTROL_HASHPOWER [22] (0: no control run)
  SERVER_CPU [1]  LOAD_CPU [0]           PARTS [throughput,growth]
  LOAD_ARGS [] extra mcload options for the throughput runs
  UDP [0] 1: the throughput runs over UDP (-U on both servers)
  TLS [0] 1: both servers with -Z and one certificate, mcload --tls
  A_ARGS [] B_ARGS [] extra server options of side A (MCPM_BIN) and B
  A_NAME [memcached-pm] B_NAME [memcached] the sides' names in the output
  DIR [] side A's items in a memory file in this directory (-e)
  RESULT_FILE [] append the medians here, tab-separated, as LABEL [throughput]
EOF
}

if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
    usage
    exit 0
fi

PIDS=()
TMP=$(mktemp -d /tmp/mcpm-compare.XXXXXX)
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$TMP"
    if [ -n "$MEMFILE" ]; then
        rm -f "$MEMFILE" "$MEMFILE".meta "$MEMFILE".index "$MEMFILE".removed
    fi
}
MEMFILE=
if [ -n "$DIR" ]; then
    mkdir -p "$DIR"
    MEMFILE=$DIR/mcpm-compare-$$.pm
    A_ARGS="$A_ARGS -e $MEMFILE"
fi
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM  # so that EXIT runs: the servers go too
trap 'exit 130' INT TERM

die() {
    echo "compare.sh: $*" >&2
    exit 1
}

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

pin_cpus

TLS_ARGS=()
LOAD_TLS=()
if [ "$TLS" = 1 ]; then
    openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost \
        -keyout "$TMP/key.pem" -out "$TMP/cert.pem" >/dev/null 2>&1 ||
        die "openssl could not make a certificate"
    chmod 755 "$TMP"
    chmod 644 "$TMP/key.pem" "$TMP/cert.pem"
    TLS_ARGS=(-Z -o "ssl_chain_cert=$TMP/cert.pem,ssl_key=$TMP/key.pem")
    LOAD_TLS=(--tls)
    LOAD_ARGS="$LOAD_ARGS --tls"
    export STAT_TLS=1
fi

# start_server BIN PORT EXTRA...: sets SERVER_PID, waits for `stats`.
# memcached refuses to run as root without -u; memcached-pm takes the same.
start_server() {
    local bin=$1 port=$2 udp=0
    shift 2
    if [ "$UDP" = 1 ]; then
        udp=$port
    fi
    local args=(-p "$port" -U "$udp" -l 127.0.0.1 -t "$THREADS"
                "${TLS_ARGS[@]}" "$@")
    if [ "$(id -u)" = 0 ]; then
        args+=(-u root)
    fi
    "${PIN_SERVER[@]}" "$bin" "${args[@]}" >/dev/null 2>&1 &
    SERVER_PID=$!
    PIDS+=("$SERVER_PID")
    wait_ready "$port" "$SERVER_PID"
}

stop_server() {
    kill "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}

throughput() {
    local pa pb a b side round order port pid f ops p99 err reqs c0 c1 cpr
    local u0 s0 u1 s1 kern
    local load=(--conns "$CONNS" --keys "$KEYS" --value-size "$VALUE_SIZE"
                --get-ratio "$GET_RATIO" --duration "$DURATION"
                --requests 0 --json)
    # shellcheck disable=SC2206
    load+=($LOAD_ARGS)
    if [ "$UDP" = 1 ]; then
        load+=(--udp)
    fi
    pa=$(free_port)
    pb=$(free_port)
    # shellcheck disable=SC2086
    start_server "$MCPM_BIN" "$pa" -m "$MEM" $A_ARGS
    a=$SERVER_PID
    # shellcheck disable=SC2086
    start_server "$MC_BIN" "$pb" -m "$MEM" $B_ARGS
    b=$SERVER_PID
    echo "== throughput: GET/SET $GET_RATIO, ${VALUE_SIZE}-byte values," \
         "$CONNS conns, $KEYS keys uniform, -t $THREADS -m $MEM," \
         "${DURATION}s x $ROUNDS per side${LOAD_ARGS:+, $LOAD_ARGS}" \
         "$([ "$UDP" = 1 ] && echo ", over UDP")$([ "$TLS" = 1 ] &&
                                                  echo ", over TLS")"
    echo "   A: $A_NAME ${A_ARGS:-(default flags)}" \
         " B: $B_NAME ${B_ARGS:-(default flags)}"
    for port in "$pa" "$pb"; do
        mcload --server "127.0.0.1:$port" --preload --requests 1 \
            --keys "$KEYS" --value-size "$VALUE_SIZE" --conns "$CONNS" \
            --depth 16 "${LOAD_TLS[@]}" --json >"$TMP/preload.json" ||
            die "preload of port $port failed"
    done
    settle "$a"
    settle "$b"
    printf '%-14s %5s %12s %10s %12s %6s %8s\n' side round ops/s p99_us \
        cpu_ns/req kern% errors
    for round in $(seq "$ROUNDS"); do
        # A B, then B A: whichever runs second in a round measured up to
        # 9 % faster on this machine, so the order alternates.
        order="A B"
        if [ $((round % 2)) = 0 ]; then
            order="B A"
        fi
        for side in $order; do
            port=$pa
            pid=$a
            if [ "$side" = B ]; then
                port=$pb
                pid=$b
            fi
            f="$TMP/run-$side-$round.json"
            c0=$(cpu_ns "$pid")
            read -r u0 s0 < <(ticks "$pid")
            mcload --server "127.0.0.1:$port" "${load[@]}" >"$f" || true
            c1=$(cpu_ns "$pid")
            read -r u1 s1 < <(ticks "$pid")
            kern=$(awk -v u="$((u1 - u0))" -v s="$((s1 - s0))" \
                   'BEGIN { printf "%.0f", (u + s > 0 ? 100 * s / (u + s) : 0) }')
            read -r ops p99 err reqs p50 p999 < <(json "$f" ops_per_sec \
                latency_us.p99 errors requests latency_us.p50 \
                latency_us.p999)
            cpr=$(awk -v d="$((c1 - c0))" -v n="$reqs" \
                  'BEGIN { printf "%.0f", (n > 0 ? d / n : 0) }')
            echo "$ops" >>"$TMP/ops-$side"
            echo "$p99" >>"$TMP/p99-$side"
            echo "$p50" >>"$TMP/p50-$side"
            echo "$p999" >>"$TMP/p999-$side"
            echo "$cpr" >>"$TMP/cpu-$side"
            echo "$kern" >>"$TMP/kern-$side"
            printf '%-14s %5d %12.0f %10.1f %12d %6d %8d\n' \
                "$([ "$side" = A ] && echo "$A_NAME" || echo "$B_NAME")" \
                "$round" "$ops" "$p99" "$cpr" "$kern" "$err"
        done
    done
    summary
    stop_server "$a"
    stop_server "$b"
}

summary() {
    local ma mb qa qb ca cb
    ma=$(median <"$TMP/ops-A")
    mb=$(median <"$TMP/ops-B")
    qa=$(median <"$TMP/p99-A")
    qb=$(median <"$TMP/p99-B")
    ca=$(median <"$TMP/cpu-A")
    cb=$(median <"$TMP/cpu-B")
    printf 'median  %-12s %.0f ops/s p99 %.1f us cpu %.0f ns/req kernel %s%%\n' \
        "$A_NAME" "$ma" "$qa" "$ca" "$(median <"$TMP/kern-A")"
    printf 'median  %-12s %.0f ops/s p99 %.1f us cpu %.0f ns/req kernel %s%%\n' \
        "$B_NAME" "$mb" "$qb" "$cb" "$(median <"$TMP/kern-B")"
    printf 'latency %-12s p50 %.1f us p99 %.1f us p99.9 %.1f us\n' \
        "$A_NAME" "$(median <"$TMP/p50-A")" "$qa" "$(median <"$TMP/p999-A")"
    printf 'latency %-12s p50 %.1f us p99 %.1f us p99.9 %.1f us\n' \
        "$B_NAME" "$(median <"$TMP/p50-B")" "$qb" "$(median <"$TMP/p999-B")"
    awk -v a="$ma" -v b="$mb" -v qa="$qa" -v qb="$qb" -v ca="$ca" \
        -v cb="$cb" -v na="$A_NAME" -v nb="$B_NAME" 'BEGIN {
        printf "ratio   %s / %s: ops/s %.3f  p99 %.3f  cpu/req %.3f\n",
               na, nb, a / b, qa / qb, ca / cb }'
    if [ -n "$RESULT_FILE" ]; then
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
            "$LABEL" "$A_NAME" "$ma" "$qa" "$ca" "$B_NAME" "$mb" "$qb" \
            "$cb" "$(median <"$TMP/p999-A")" "$(median <"$TMP/p999-B")" \
            >>"$RESULT_FILE"
    fi
}

# growth_one NAME BIN HASHPOWER: one server through a SET stream.
growth_one() {
    local name=$1 bin=$2 hp=$3 port pid probe hp0 hp1
    local fops fsets ferr gops p99 pmax err
    port=$(free_port)
    start_server "$bin" "$port" -m "$GROWTH_MEM" -o "hashpower=$hp"
    pid=$SERVER_PID
    hp0=$(stat "$port" hash_power_level)
    mcload --server "127.0.0.1:$port" --key-prefix probe: --keys 10000 \
        --preload --requests 1 --conns 4 --depth 16 --json \
        >"$TMP/gprobe-pre.json" || die "probe preload failed on $name"
    # The probe reads until the SET stream ends; then a signal stops it.
    "${PIN_LOAD[@]}" "$MCLOAD" --server "127.0.0.1:$port" \
        --key-prefix probe: --keys 10000 --get-ratio 1 --conns 4 \
        --duration 300 --requests 0 --json >"$TMP/gprobe-$name.json" &
    probe=$!
    PIDS+=("$probe")
    mcload --server "127.0.0.1:$port" --key-prefix fill: \
        --keys "$GROWTH_KEYS" --dist seq --get-ratio 0 \
        --requests "$GROWTH_KEYS" --conns 8 --depth 16 --duration 240 \
        --json >"$TMP/gfill-$name.json" || true
    kill -INT "$probe"
    wait "$probe" || true
    # The table grows in the background; give it a moment to finish.
    sleep 2
    hp1=$(stat "$port" hash_power_level)
    read -r fops fsets ferr < <(json "$TMP/gfill-$name.json" ops_per_sec \
                                  sets errors)
    read -r gops p99 pmax err < <(json "$TMP/gprobe-$name.json" \
        ops_per_sec latency_us.p99 latency_us.max errors)
    printf '%-13s %9d %10.0f %5d->%-3d %10.0f %9.1f %12.3f %6d\n' \
        "$name" "$fsets" "$fops" "$hp0" "$hp1" "$gops" "$p99" \
        "$(awk -v m="$pmax" 'BEGIN { print m / 1000 }')" "$((ferr + err))"
    stop_server "$pid"
}

growth() {
    echo "== hash growth: -o hashpower=16 -m $GROWTH_MEM -t $THREADS," \
         "$GROWTH_KEYS new keys by 8x16 pipelined sets," \
         "GET probe on 4 conns"
    printf '%-13s %9s %10s %9s %10s %9s %12s %6s\n' side sets set_ops/s \
        hashpower get_ops/s p99_us max_stall_ms errors
    growth_one memcached-pm "$MCPM_BIN" 16
    growth_one memcached "$MC_BIN" 16
    if [ "$CONTROL_HASHPOWER" -gt 0 ]; then
        echo "-- control: same stream, presized at" \
             "hashpower=$CONTROL_HASHPOWER (no growth)"
        growth_one memcached-pm "$MCPM_BIN" "$CONTROL_HASHPOWER"
        growth_one memcached "$MC_BIN" "$CONTROL_HASHPOWER"
    fi
}

build_if_missing
echo "== memcached-pm: $MCPM_BIN"
echo "== memcached:    $MC_BIN ($("$MC_BIN" -V 2>/dev/null || true))"
echo "== servers on cpu $SERVER_CPU, mcload on cpu $LOAD_CPU," \
     "$(nproc) cpus online"
case ",$PARTS," in *,throughput,*) throughput ;; esac
case ",$PARTS," in *,growth,*) growth ;; esac
