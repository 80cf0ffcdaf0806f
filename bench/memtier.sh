#!/bin/bash
# memtier.sh: server CPU time per request under memtier_benchmark, a load
# generator nobody here wrote, memcached-pm against Debian's memcached,
# side by side, ROUNDS rounds a side, alternating.
#
# memtier_benchmark is in no Debian package: build it from its source
# (https://github.com/RedisLabs/memtier_benchmark: autoreconf -ivf &&
# ./configure --disable-tls && make) and give its path in MEMTIER_BIN.
# Each server runs alone, pinned to SERVER_CPU, with -t THREADS; KEYS
# keys are set first (memtier, sequential), the server is left to settle,
# then memtier (pinned to LOAD_CPU) runs DURATION seconds of RATIO
# SET:GET (its default 1:10) over those keys, PROTO (memcache_binary or
# memcache_text), CONNS connections with PIPELINE requests in flight each.
# Reported: the requests the server counted (cmd_get + cmd_set), its CPU
# time over them (schedstat, all threads), and the ratio of the medians.

set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MCPM_BIN=${MCPM_BIN:-$ROOT/build/memcached-pm/memcached-pm}
MC_BIN=${MC_BIN:-/usr/bin/memcached}
MEMTIER_BIN=${MEMTIER_BIN:-memtier_benchmark}
PROTO=${PROTO:-memcache_binary}
PIPELINE=${PIPELINE:-8}
RATIO=${RATIO:-1:10}
CONNS=${CONNS:-50}
KEYS=${KEYS:-100000}
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-4}
SERVER_CPU=${SERVER_CPU:-1}
LOAD_CPU=${LOAD_CPU:-0}

die() {
    echo "memtier.sh: $*" >&2
    exit 1
}

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

command -v "$MEMTIER_BIN" >/dev/null ||
    die "no memtier_benchmark (MEMTIER_BIN=...; see the header)"
pin_cpus
TMP=$(mktemp -d /tmp/mcpm-memtier.XXXXXX)
SERVER=
cleanup() {
    if [ -n "$SERVER" ]; then
        kill "$SERVER" 2>/dev/null || true
        wait "$SERVER" 2>/dev/null || true
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

memtier() {
    local port=$1
    shift
    "${PIN_LOAD[@]}" "$MEMTIER_BIN" -s 127.0.0.1 -p "$port" -P "$PROTO" \
        --key-maximum "$KEYS" --hide-histogram "$@" >"$TMP/memtier.out" 2>&1 ||
        die "memtier failed: $(tail -3 "$TMP/memtier.out")"
}

# one SIDE BIN: prints "requests cpu_ns_per_request"
one() {
    local bin=$2 port c0 c1 r0 r1 extra=()
    port=$(free_port)
    [ "$(id -u)" = 0 ] && extra=(-u root)
    "${PIN_SERVER[@]}" "$bin" -p "$port" -U 0 -l 127.0.0.1 -t "$THREADS" \
        -m 1024 -c 4096 "${extra[@]}" >"$TMP/server.log" 2>&1 &
    SERVER=$!
    wait_ready "$port" "$SERVER"
    memtier "$port" --ratio 1:0 --key-pattern P:P -c 1 -t 1 \
        --requests "$KEYS"
    settle "$SERVER"
    r0=$(( $(stat "$port" cmd_get) + $(stat "$port" cmd_set) ))
    c0=$(cpu_ns "$SERVER")
    memtier "$port" --pipeline "$PIPELINE" -c "$CONNS" -t 1 --ratio "$RATIO" \
        --test-time "$DURATION" --key-pattern R:R
    c1=$(cpu_ns "$SERVER")
    r1=$(( $(stat "$port" cmd_get) + $(stat "$port" cmd_set) ))
    kill "$SERVER"
    wait "$SERVER" 2>/dev/null || true
    SERVER=
    awk -v r=$((r1 - r0)) -v c=$((c1 - c0)) \
        'BEGIN { printf "%d %.0f\n", r, c / r }'
}

echo "== memtier_benchmark: $PROTO, SET:GET $RATIO, pipeline $PIPELINE," \
     "$CONNS conns, $KEYS keys, ${DURATION}s x $ROUNDS a side, -t $THREADS"
echo "== memcached-pm: $MCPM_BIN; memcached: $MC_BIN ($("$MC_BIN" -V))"
printf '%-14s %5s %12s %12s\n' side round requests cpu_ns/req
for r in $(seq "$ROUNDS"); do
    for side in memcached-pm memcached; do
        bin=$MCPM_BIN
        [ "$side" = memcached ] && bin=$MC_BIN
        read -r reqs ns < <(one "$side" "$bin")
        printf '%-14s %5d %12d %12d\n' "$side" "$r" "$reqs" "$ns" |
            tee -a "$TMP/rows"
    done
done
a=$(awk '$1 == "memcached-pm" { print $4 }' "$TMP/rows" | median)
b=$(awk '$1 == "memcached" { print $4 }' "$TMP/rows" | median)
awk -v a="$a" -v b="$b" 'BEGIN {
    printf "median cpu_ns/req  memcached-pm %.0f  memcached %.0f  ratio %.3f\n",
           a, b, a / b }'
