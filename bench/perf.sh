#!/bin/bash
# perf.sh: doc/PERFORMANCE.md's measurements, tables and plots, in one
# command.
#
# Builds memcached-pm (out of tree, unless MCPM_BIN is given), then runs,
# each part on its own so that one server's work never overlaps another's:
#
#   wires      bench/compare.sh once per workload, memcached-pm against
#              Debian's memcached with the same -t, -m and key set,
#              A B B A A B, servers and mcload pinned to different cores:
#                text-d1     GET/SET 90/10, 32-byte values, 50 connections
#                text-d8     the same, 8 requests in flight per connection
#                meta-d8     the same in meta commands (mg/ms)
#                binary-d8   the same in the binary protocol
#                binary-paced  binary-d8 held to 200,000 requests a second,
#                            below either server's peak: as under a client
#                            slower than the server (memtier_benchmark),
#                            the server waits between small batches
#                udp-d1      the same over UDP (-U), one request in flight
#                tls-d8      text-d8 over TLS (-Z, one certificate)
#                multiget    16-key multigets, 8 in flight, 50 connections
#                set-512     SET only, 512-byte values, 50 connections
#                prefetch    memcached-pm against itself, prefetch_batch 16
#                            against 0: GETs over 20M keys, 16 in flight
#   files      the same with memcached-pm's items in a memory file (-e)
#              on a disk (DISK_DIR, /var/tmp: the default a user gets,
#              durability process) and on tmpfs, and on the disk under
#              durability power; SET only and GET/SET 90/10; and the
#              disk's flush latency (bench/flushlat.py)
#   callgrind  bench/callgrind.sh: instructions per request
#   scale      bench/scale.py at SCALE_ITEMS: load rate, GET p99.9 while
#              the table grows, DRAM per item, clean and SIGKILL restarts
#   durable    bench/durable.sh: durable SETs per medium
#   large      bench/large.py: large values held against memcached
#
# then draws the plots (bench/plot.py) and rewrites the report part of
# doc/PERFORMANCE.md (bench/report.py, between its two marker lines).
# Everything goes to OUT: results.tsv, workloads.tsv, parts.tsv, each
# part's full output (*.txt), scale.json and the PNGs.  About 30 minutes
# with the defaults on two CPUs; PARTS picks a subset, and the parts'
# own knobs (DURATION, ROUNDS, ...) pass through.

set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/doc/perf}
DOC=${DOC:-$ROOT/doc/PERFORMANCE.md}
BUILD_DIR=${BUILD_DIR:-/tmp/mcpm-perf-build}
PYTHON=${PYTHON:-}
PARTS=${PARTS:-wires,files,callgrind,scale,durable,large}
DISK_DIR=${DISK_DIR:-/var/tmp}
PREFETCH_KEYS=${PREFETCH_KEYS:-20000000}
PREFETCH_MEM=${PREFETCH_MEM:-4096}
PREFETCH_ROUNDS=${PREFETCH_ROUNDS:-5}
SCALE_ITEMS=${SCALE_ITEMS:-2000000,10000000,100000000}
SCALE_STEPS=${SCALE_STEPS:-10}

if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
    cat <<USAGE
usage: bench/perf.sh
environment (defaults in brackets):
  MCPM_BIN [built in BUILD_DIR]   BUILD_DIR [/tmp/mcpm-perf-build]
  OUT [doc/perf]  DOC [doc/PERFORMANCE.md]  PYTHON [.venv/bin/python, else python3]
  PARTS [wires,files,callgrind,scale,durable,large]  DISK_DIR [/var/tmp]
  PREFETCH_KEYS [20000000] PREFETCH_MEM [4096] PREFETCH_ROUNDS [5]
  SCALE_ITEMS [2000000,10000000,100000000]  SCALE_STEPS [10]
  and the parts' own knobs (compare.sh: THREADS, ROUNDS, DURATION,
  SERVER_CPU, ...; durable.sh: DISK_DIR, ...; large.py: SETS, ...)
USAGE
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
export MCLOAD_BIN=${MCLOAD_BIN:-$ROOT/build/bench/mcload}
if [ -z "$PYTHON" ]; then
    PYTHON=python3
    [ -x "$ROOT/.venv/bin/python" ] && PYTHON=$ROOT/.venv/bin/python
fi
"$PYTHON" -c 'import matplotlib' 2>/dev/null ||
    "$PYTHON" -m pip install -q matplotlib || die "cannot install matplotlib"

has_part() {
    case ",$PARTS," in *,"$1",*) return 0 ;; esac
    return 1
}

mkdir -p "$OUT"
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
if ! git -C "$ROOT" diff --quiet HEAD 2>/dev/null; then
    COMMIT="$COMMIT+changes"
fi
CPUS="$(nproc) x $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo |
                   head -1)"

# ran PART SETTINGS: records in parts.tsv when and on what a part last ran
# (a run of a few parts leaves the others' results and lines as they were).
ran() {
    touch "$OUT/parts.tsv"
    grep -v "^$1	" "$OUT/parts.tsv" >"$OUT/parts.tsv.new" || true
    printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$(date -u +%Y-%m-%d)" "$COMMIT" \
        "$CPUS" "$2" >>"$OUT/parts.tsv.new"
    mv "$OUT/parts.tsv.new" "$OUT/parts.tsv"
}

# workload LABEL DESCRIPTION VAR=VALUE...: one compare.sh throughput run
# (its results in OUT/${PREFIX}results.tsv, its output in OUT/$LOG).
PREFIX=
LOG=wires.txt
workload() {
    local label=$1 what=$2
    shift 2
    printf '%s\t%s\n' "$label" "$what" >>"$OUT/${PREFIX}workloads.tsv"
    env "$@" LABEL="$label" RESULT_FILE="$OUT/${PREFIX}results.tsv" \
        PARTS=throughput bash "$ROOT/bench/compare.sh" |
        tee -a "$OUT/$LOG"
}

if has_part wires; then
    : >"$OUT/results.tsv"
    : >"$OUT/workloads.tsv"
    : >"$OUT/wires.txt"
    workload text-d1 "text GET/SET 90/10, 32 B, 50 conns x 1" \
        CONNS=50 GET_RATIO=0.9 VALUE_SIZE=32
    workload text-d8 "text GET/SET 90/10, 32 B, 50 conns x 8 in flight" \
        CONNS=50 GET_RATIO=0.9 VALUE_SIZE=32 LOAD_ARGS="--depth 8"
    workload meta-d8 "meta mg/ms 90/10, 32 B, 50 conns x 8 in flight" \
        CONNS=50 GET_RATIO=0.9 VALUE_SIZE=32 \
        LOAD_ARGS="--proto meta --depth 8"
    workload binary-d8 "binary GET/SET 90/10, 32 B, 50 conns x 8 in flight" \
        CONNS=50 GET_RATIO=0.9 VALUE_SIZE=32 \
        LOAD_ARGS="--proto binary --depth 8"
    workload binary-paced "binary GET/SET 90/10 at 200,000 req/s, 50 conns x 8 in flight" \
        CONNS=50 GET_RATIO=0.9 VALUE_SIZE=32 \
        LOAD_ARGS="--proto binary --depth 8 --rate 200000"
    workload udp-d1 "UDP GET/SET 90/10, 32 B, 50 sockets x 1" \
        UDP=1 CONNS=50 GET_RATIO=0.9 VALUE_SIZE=32
    workload tls-d8 "TLS GET/SET 90/10, 32 B, 50 conns x 8 in flight" \
        TLS=1 CONNS=50 GET_RATIO=0.9 VALUE_SIZE=32 LOAD_ARGS="--depth 8"
    workload multiget "text 16-key multigets, 50 conns x 8 in flight" \
        CONNS=50 GET_RATIO=1 VALUE_SIZE=32 LOAD_ARGS="--multiget 16 --depth 8"
    workload set-512 "text SET only, 512 B, 50 conns x 1" \
        CONNS=50 GET_RATIO=0 VALUE_SIZE=512
    workload prefetch "GETs over $PREFETCH_KEYS keys, 20 conns x 16; A: prefetch_batch=16, B: 0" \
        ROUNDS="$PREFETCH_ROUNDS" MC_BIN="$MCPM_BIN" KEYS="$PREFETCH_KEYS" \
        MEM="$PREFETCH_MEM" GET_RATIO=1 CONNS=20 LOAD_ARGS="--depth 16" \
        A_NAME=prefetch-16 B_NAME=prefetch-0 \
        A_ARGS="-o prefetch_batch=16,hashpower=25" \
        B_ARGS="-o prefetch_batch=0,hashpower=25"
    ran wires "-t ${THREADS:-4}, ${KEYS:-100000} keys (prefetch: $PREFETCH_KEYS), ${DURATION:-10} s a run, runs a side: ${ROUNDS:-3} (prefetch: $PREFETCH_ROUNDS), $(/usr/bin/memcached -V 2>/dev/null || echo memcached)"
fi
if has_part files; then
    PREFIX=files- LOG=files.txt
    : >"$OUT/files-results.tsv"
    : >"$OUT/files-workloads.tsv"
    : >"$OUT/files.txt"
    workload disk-set "SET only, 100 B, 50 conns x 1, file on $DISK_DIR (default: process)" \
        DIR="$DISK_DIR" CONNS=50 GET_RATIO=0 VALUE_SIZE=100
    workload disk-mix "GET/SET 90/10, 32 B, 50 conns x 1, file on $DISK_DIR (default: process)" \
        DIR="$DISK_DIR" CONNS=50 GET_RATIO=0.9 VALUE_SIZE=32
    workload tmpfs-set "SET only, 100 B, 50 conns x 1, file on /dev/shm" \
        DIR=/dev/shm CONNS=50 GET_RATIO=0 VALUE_SIZE=100
    workload tmpfs-mix "GET/SET 90/10, 32 B, 50 conns x 1, file on /dev/shm" \
        DIR=/dev/shm CONNS=50 GET_RATIO=0.9 VALUE_SIZE=32
    workload power-set "SET only, 100 B, 50 conns x 1, file on $DISK_DIR, durability power" \
        DIR="$DISK_DIR" CONNS=50 GET_RATIO=0 VALUE_SIZE=100 \
        A_ARGS="-o memory_file_durability=power"
    workload power-set-1 "SET only, 100 B, 1 conn, file on $DISK_DIR, durability power" \
        DIR="$DISK_DIR" CONNS=1 GET_RATIO=0 VALUE_SIZE=100 \
        A_ARGS="-o memory_file_durability=power"
    PREFIX= LOG=wires.txt
    "$PYTHON" "$ROOT/bench/flushlat.py" --dir "$DISK_DIR" |
        tee "$OUT/flushlat.txt"
    ran files "-t ${THREADS:-4}, ${KEYS:-100000} keys, ${DURATION:-10} s a run, runs a side: ${ROUNDS:-3}, $DISK_DIR on $(df --output=source,fstype "$DISK_DIR" | tail -1 | tr -s ' ' ' ')"
fi
if has_part callgrind; then
    bash "$ROOT/bench/callgrind.sh" | tee "$OUT/callgrind.txt"
    ran callgrind ""
fi
if has_part scale; then
    "$PYTHON" "$ROOT/bench/scale.py" --items "$SCALE_ITEMS" \
        --steps "$SCALE_STEPS" --json "$OUT/scale.json" |
        tee "$OUT/scale.txt"
    ran scale "$SCALE_STEPS steps"
fi
if has_part durable; then
    bash "$ROOT/bench/durable.sh" | tee "$OUT/durable.txt"
    ran durable ""
fi
if has_part large; then
    "$PYTHON" "$ROOT/bench/large.py" | tee "$OUT/large.txt"
    ran large ""
fi

scale_json=()
[ -f "$OUT/scale.json" ] && scale_json=("$OUT/scale.json")
if [ -s "$OUT/results.tsv" ] || [ "${#scale_json[@]}" -gt 0 ]; then
    "$PYTHON" "$ROOT/bench/plot.py" "$OUT/results.tsv" "$OUT" \
        "${scale_json[@]}"
fi
"$PYTHON" "$ROOT/bench/report.py" "$OUT" "$DOC"
echo "== results in $OUT, report in $DOC"
