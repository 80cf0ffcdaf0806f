#!/bin/bash
# perf.sh: doc/PERFORMANCE.md's measurements and plots, in one command.
#
# Builds memcached-pm (out of tree, unless MCPM_BIN is given), then runs
# bench/compare.sh once per workload, memcached-pm against Debian's
# memcached with the same -t, -m and key set, A B A B A B, servers and
# mcload pinned to different cores:
#
#   get-set      GET/SET 90/10, 32-byte values, 50 connections
#   get-set-d8   the same with 8 requests in flight per connection
#   multiget     16-key multigets, 8 in flight per connection, 50 conns
#   set-512      SET only, 512-byte values, 50 connections
#   prefetch-20M memcached-pm against itself, prefetch_batch 16 against 0:
#                GETs uniform over 20M keys, 16 in flight per connection,
#                five rounds a side (its rounds spread the most)
#
# then bench/callgrind.sh (instructions per request), and draws
# throughput.png and p99.png from the medians.  Everything goes to OUT
# (results.tsv, perf.txt, callgrind.txt and the two PNGs); matplotlib is
# installed with pip into the Python used if it is missing.

set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/doc/perf}
BUILD_DIR=${BUILD_DIR:-/tmp/mcpm-perf-build}
PYTHON=${PYTHON:-}
PREFETCH_KEYS=${PREFETCH_KEYS:-20000000}
PREFETCH_MEM=${PREFETCH_MEM:-4096}
PREFETCH_ROUNDS=${PREFETCH_ROUNDS:-5}

if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
    cat <<EOF
usage: bench/perf.sh
environment (defaults in brackets):
  MCPM_BIN [built in BUILD_DIR]   BUILD_DIR [/tmp/mcpm-perf-build]
  OUT [doc/perf]                  PYTHON [.venv/bin/python, else python3]
  PREFETCH_KEYS [20000000] PREFETCH_MEM [4096] PREFETCH_ROUNDS [5]
                                  the prefetch workload
  and compare.sh's knobs (THREADS, ROUNDS, DURATION, SERVER_CPU, ...)
EOF
    exit 0
fi

die() {
    echo "perf.sh: $*" >&2
    exit 1
}

if [ -z "${MCPM_BIN:-}" ]; then
    mkdir -p "$BUILD_DIR"
    if [ ! -f "$BUILD_DIR/Makefile" ]; then
        (cd "$BUILD_DIR" && "$ROOT/configure" -q) || die "configure failed"
    fi
    make -C "$BUILD_DIR" -j"$(nproc)" >/dev/null || die "make failed"
    export MCPM_BIN=$BUILD_DIR/memcached-pm/memcached-pm
    export MCLOAD_BIN=${MCLOAD_BIN:-$BUILD_DIR/bench/mcload}
fi
if [ -z "$PYTHON" ]; then
    PYTHON=python3
    [ -x "$ROOT/.venv/bin/python" ] && PYTHON=$ROOT/.venv/bin/python
fi
"$PYTHON" -c 'import matplotlib' 2>/dev/null ||
    "$PYTHON" -m pip install -q matplotlib || die "cannot install matplotlib"

mkdir -p "$OUT"
RESULTS=$OUT/results.tsv
: >"$RESULTS"
: >"$OUT/perf.txt"

# workload LABEL VAR=VALUE...: one compare.sh throughput run.
workload() {
    local label=$1
    shift
    env "$@" LABEL="$label" RESULT_FILE="$RESULTS" PARTS=throughput \
        bash "$ROOT/bench/compare.sh" | tee -a "$OUT/perf.txt"
}

workload get-set CONNS=50 GET_RATIO=0.9 VALUE_SIZE=32
workload get-set-d8 CONNS=50 GET_RATIO=0.9 VALUE_SIZE=32 \
    LOAD_ARGS="--depth 8"
workload multiget CONNS=50 GET_RATIO=1 VALUE_SIZE=32 \
    LOAD_ARGS="--multiget 16 --depth 8"
workload set-512 CONNS=50 GET_RATIO=0 VALUE_SIZE=512
workload prefetch-20M ROUNDS="$PREFETCH_ROUNDS" MC_BIN="$MCPM_BIN" \
    KEYS="$PREFETCH_KEYS" \
    MEM="$PREFETCH_MEM" GET_RATIO=1 CONNS=20 LOAD_ARGS="--depth 16" \
    A_NAME=prefetch-16 B_NAME=prefetch-0 \
    A_ARGS="-o prefetch_batch=16,hashpower=25" \
    B_ARGS="-o prefetch_batch=0,hashpower=25"
bash "$ROOT/bench/callgrind.sh" | tee "$OUT/callgrind.txt"
"$PYTHON" "$ROOT/bench/plot.py" "$RESULTS" "$OUT"
echo "== results in $OUT"
