#!/bin/bash
# callgrind.sh: server instructions per request, memcached-pm against
# Debian's memcached, on the same request stream.
#
# Each server runs alone under valgrind --tool=callgrind (-t 1), is
# preloaded with KEYS keys, left SETTLE seconds for the background work
# the preload causes (LRU maintenance, a crawl of the new items), has its
# counters zeroed (callgrind_control -z), serves REQUESTS requests from mcload (one connection, one request
# in flight), and is dumped (callgrind_control -d).  The instructions of
# every thread between zero and dump, divided by the requests, are a
# figure that does not depend on how busy the machine is.  Loads: single
# GETs, and 16-key multigets (per key), in text and binary.
#
# memcached-pm runs its epoll engine here (-o event_engine=epoll): under
# valgrind (3.19, Debian 12) a worker on the io_uring engine, the default,
# never sees a completion (connections are accepted, no request is
# answered), and the engine's work would move into the kernel, which
# callgrind does not count anyway; memcached runs on epoll too.
#
# valgrind keeps 12 file descriptors for itself and memcached sets its
# hard limit to -c, which valgrind refuses unless -c is the limit it sees:
# both servers run with -c 1024 under `ulimit -n 1036`.

set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MCPM_BIN=${MCPM_BIN:-$ROOT/build/memcached-pm/memcached-pm}
MC_BIN=${MC_BIN:-/usr/bin/memcached}
MCLOAD=${MCLOAD_BIN:-$ROOT/build/bench/mcload}
KEYS=${KEYS:-10000}
REQUESTS=${REQUESTS:-20000}
VALUE_SIZE=${VALUE_SIZE:-32}
SETTLE=${SETTLE:-3}

if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
    cat <<EOF
usage: bench/callgrind.sh
environment (defaults in brackets):
  MCPM_BIN [build/memcached-pm/memcached-pm]   MC_BIN [/usr/bin/memcached]
  MCLOAD_BIN [build/bench/mcload]  KEYS [10000]  REQUESTS [20000]
  VALUE_SIZE [32]  SETTLE [3] seconds between preload and measurement
EOF
    exit 0
fi

PIDS=()
PIN_LOAD=()
TMP=$(mktemp -d /tmp/mcpm-callgrind.XXXXXX)
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
    echo "callgrind.sh: $*" >&2
    exit 1
}

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

command -v valgrind >/dev/null || die "valgrind is not installed"
command -v callgrind_control >/dev/null || die "callgrind_control missing"

# measure NAME BIN LOADARGS...: prints instructions per request.
measure() {
    local name=$1 bin=$2 port pid out reqs ir i
    shift 2
    port=$(free_port)
    (ulimit -n 1036
     exec valgrind --tool=callgrind --callgrind-out-file="$TMP/$name.%p" \
         "$bin" -p "$port" -U 0 -l 127.0.0.1 -t 1 -m 256 -c 1024 \
         ${SERVER_ARGS:-} $([ "$(id -u)" = 0 ] && echo -u root)) \
        >"$TMP/$name.log" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    for i in $(seq 300); do
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
        kill -0 "$pid" 2>/dev/null ||
            die "$name did not start: $(grep -v '^==' "$TMP/$name.log")"
        sleep 0.1
    done
    mcload --server "127.0.0.1:$port" --preload --requests 1 --keys "$KEYS" \
        --value-size "$VALUE_SIZE" --conns 1 --depth 16 >/dev/null ||
        die "preload of $name failed"
    sleep "$SETTLE"
    callgrind_control -z "$pid" >/dev/null 2>&1
    mcload --server "127.0.0.1:$port" --requests "$REQUESTS" \
        --keys "$KEYS" --value-size "$VALUE_SIZE" --conns 1 --get-ratio 1 \
        --duration 0 --json "$@" >"$TMP/$name.json" ||
        die "load of $name failed"
    callgrind_control -d "$pid" >/dev/null 2>&1
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    out=$(ls -t "$TMP/$name.$pid".* | head -1)
    ir=$(awk '$1 == "summary:" { print $2 }' "$out")
    reqs=$(json "$TMP/$name.json" requests)
    awk -v ir="$ir" -v n="$reqs" 'BEGIN { printf "%.0f", ir / n }'
}

run_load() {
    local label=$1 per=$2 a b
    shift 2
    a=$(SERVER_ARGS="-o event_engine=epoll" measure mcpm "$MCPM_BIN" "$@")
    b=$(measure mc "$MC_BIN" "$@")
    awk -v l="$label" -v a="$a" -v b="$b" -v p="$per" 'BEGIN {
        printf "%-22s memcached-pm %6.0f  memcached %6.0f  ratio %.3f\n",
               l, a / p, b / p, a / b }'
}

echo "== instructions per request under callgrind, -t 1, $KEYS keys of" \
     "$VALUE_SIZE bytes, $REQUESTS requests, one connection"
echo "== memcached-pm: $MCPM_BIN; memcached: $MC_BIN" \
     "($("$MC_BIN" -V 2>/dev/null || true))"
run_load "GET" 1
run_load "16-key multiget (/key)" 16 --multiget 16
run_load "binary GETK" 1 --proto binary
run_load "binary 16 GETKQ (/key)" 16 --proto binary --multiget 16
