#!/bin/bash
# engines.sh: memcached-pm's io_uring engine against its epoll engine on
# every workload of bench/perf.sh, then bench/kernel.sh (io_uring, epoll
# and Debian's memcached, one request in flight) at 50 and 500
# connections.
#
# Each workload is one bench/compare.sh throughput run of the same binary
# against itself, A = -o event_engine=io_uring, B = -o event_engine=epoll,
# A B B A ... in turn, pinned as compare.sh pins them; its last line is
# the ratio io_uring / epoll.  The prefetch workload runs over PREFETCH_KEYS
# keys (perf.sh uses 20M; fewer keep this run short).

set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MCPM_BIN=${MCPM_BIN:-$ROOT/build/memcached-pm/memcached-pm}
PREFETCH_KEYS=${PREFETCH_KEYS:-2000000}
PREFETCH_MEM=${PREFETCH_MEM:-1024}
export MCPM_BIN

if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
    cat <<USAGE
usage: bench/engines.sh
environment (defaults in brackets):
  MCPM_BIN [build/memcached-pm/memcached-pm]  MCLOAD_BIN [build/bench/mcload]
  PREFETCH_KEYS [2000000]  PREFETCH_MEM [1024]
  and compare.sh's and kernel.sh's knobs (ROUNDS, DURATION, THREADS, ...)
USAGE
    exit 0
fi

# workload LABEL VAR=VALUE...: io_uring against epoll, one compare.sh run.
workload() {
    local label=$1
    shift
    echo "== $label"
    env "$@" MC_BIN="$MCPM_BIN" PARTS=throughput LABEL="$label" \
        A_NAME=io_uring B_NAME=epoll \
        A_ARGS="${A_EXTRA:-} -o event_engine=io_uring" \
        B_ARGS="${B_EXTRA:-} -o event_engine=epoll" \
        bash "$ROOT/bench/compare.sh" | grep -E "^(== throughput|median|ratio)"
}

workload get-set CONNS=50 GET_RATIO=0.9 VALUE_SIZE=32
workload get-set-d8 CONNS=50 GET_RATIO=0.9 VALUE_SIZE=32 \
    LOAD_ARGS="--depth 8"
workload multiget CONNS=50 GET_RATIO=1 VALUE_SIZE=32 \
    LOAD_ARGS="--multiget 16 --depth 8"
workload set-512 CONNS=50 GET_RATIO=0 VALUE_SIZE=512
workload prefetch CONNS=20 GET_RATIO=1 KEYS="$PREFETCH_KEYS" \
    MEM="$PREFETCH_MEM" LOAD_ARGS="--depth 16" \
    A_EXTRA="-o prefetch_batch=16,hashpower=22" \
    B_EXTRA="-o prefetch_batch=16,hashpower=22"
for conns in 50 500; do
    CONNS=$conns bash "$ROOT/bench/kernel.sh" | tail -n 6
done
