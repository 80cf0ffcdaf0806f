#!/bin/bash
# durable.sh: what a durable SET costs, side by side in one run.
#
# Servers, each with -m MEM and -t THREADS, all up at once:
#
#   mcpm/dram            memcached-pm, items in DRAM (the baseline)
#   mcpm/tmpfs           memcached-pm -e on tmpfs: survives a process crash,
#                        no flushes (memory_file_durability auto)
#   mcpm/tmpfs-power     the same file guarding against a power cut: msync
#                        by group commit (durability=power)
#   mcpm/disk            memcached-pm -e on DISK_DIR (a block device),
#                        the default there, durability process: no
#                        flushes while serving, the file synced at a stop
#   mcpm/disk-power      the same guarding against a power cut: msync by
#                        the flusher thread, beside the workers
#   memcached/-e-tmpfs   Debian's memcached -e on tmpfs
#   memcached/-e-disk    memcached -e on DISK_DIR (memcached never flushes:
#                        its file survives only a clean restart)
#
# Round after round each gets the same mcload run in turn (the order
# reversed every other round, so drift favours no one): SET only, VALUE
# bytes, CONNS connections, DEPTH requests in flight each.  Printed: ops/s,
# the server's CPU ns per request and msync calls per SET, then medians and
# the ratios to mcpm/dram and to memcached -e on the same medium.
#
# Everything started here is stopped on exit and the files are removed.

set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MCPM_BIN=${MCPM_BIN:-$ROOT/build/memcached-pm/memcached-pm}
MC_BIN=${MC_BIN:-/usr/bin/memcached}
MCLOAD=${MCLOAD_BIN:-$ROOT/build/bench/mcload}
THREADS=${THREADS:-4}
MEM=${MEM:-1024}
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-8}
CONNS=${CONNS:-50}
DEPTH=${DEPTH:-16}
KEYS=${KEYS:-100000}
VALUE=${VALUE:-512}
SERVER_CPU=${SERVER_CPU:-1}
LOAD_CPU=${LOAD_CPU:-0}
SHM_DIR=${SHM_DIR:-/dev/shm}
DISK_DIR=${DISK_DIR:-/var/tmp}
SERVERS=${SERVERS:-mcpm/dram,mcpm/tmpfs,mcpm/tmpfs-power,mcpm/disk,mcpm/disk-power,memcached/-e-tmpfs,memcached/-e-disk}

if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
    sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'
    echo "knobs: THREADS MEM ROUNDS DURATION CONNS DEPTH KEYS VALUE"
    echo "       SERVER_CPU LOAD_CPU SHM_DIR DISK_DIR SERVERS (a subset)"
    exit 0
fi

die() {
    echo "durable.sh: $*" >&2
    exit 1
}

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
build_if_missing
pin_cpus
[ "$(command stat -f -c %T "$DISK_DIR")" != tmpfs ] ||
    die "DISK_DIR $DISK_DIR is a tmpfs; give a directory on a disk"

TMP=$(mktemp -d /tmp/mcpm-durable.XXXXXX)
SHM=$(mktemp -d "$SHM_DIR/mcpm-durable.XXXXXX")
DISK=$(mktemp -d "$DISK_DIR/mcpm-durable.XXXXXX")
PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$TMP" "$SHM" "$DISK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM  # so that EXIT runs: the servers go too
trap 'exit 130' INT TERM

declare -A PID PORT
IFS=, read -r -a NAMES <<<"$SERVERS"

start() {
    local name=$1 bin args port
    port=$(free_port)
    case $name in
    mcpm/dram) bin=$MCPM_BIN; args=() ;;
    mcpm/tmpfs) bin=$MCPM_BIN; args=(-e "$SHM/a.pm") ;;
    mcpm/tmpfs-power) bin=$MCPM_BIN
        args=(-e "$SHM/b.pm" -o memory_file_durability=power) ;;
    mcpm/disk) bin=$MCPM_BIN; args=(-e "$DISK/a.pm") ;;
    mcpm/disk-power) bin=$MCPM_BIN
        args=(-e "$DISK/b.pm" -o memory_file_durability=power) ;;
    memcached/-e-tmpfs) bin=$MC_BIN; args=(-e "$SHM/c.mc") ;;
    memcached/-e-disk) bin=$MC_BIN; args=(-e "$DISK/c.mc") ;;
    *) die "unknown server $name" ;;
    esac
    args=(-p "$port" -U 0 -l 127.0.0.1 -t "$THREADS" -m "$MEM" "${args[@]}")
    if [ "$(id -u)" = 0 ]; then
        args+=(-u root)
    fi
    "${PIN_SERVER[@]}" "$bin" "${args[@]}" >"$TMP/log-$port" 2>&1 &
    PID[$name]=$!
    PIDS+=("$!")
    PORT[$name]=$port
    wait_ready "$port" "$!"
}

for name in "${NAMES[@]}"; do
    start "$name"
done
# Every key once, so that the runs replace items (a durable replace is a
# commit and, after it, the old item's death).
for name in "${NAMES[@]}"; do
    mcload --server "127.0.0.1:${PORT[$name]}" --keys "$KEYS" \
        --value-size "$VALUE" --preload --requests 1 --conns 1 \
        --json >/dev/null
done

echo "SET only, $VALUE-byte values, $KEYS keys, $CONNS connections x" \
     "$DEPTH in flight, -t $THREADS, ${DURATION}s x $ROUNDS rounds"
printf '%-20s %5s %12s %12s %10s\n' server round ops/s cpu_ns/req syncs/set
for round in $(seq "$ROUNDS"); do
    order=("${NAMES[@]}")
    if [ $((round % 2)) = 0 ]; then
        order=()
        for ((i = ${#NAMES[@]} - 1; i >= 0; i--)); do
            order+=("${NAMES[$i]}")
        done
    fi
    for name in "${order[@]}"; do
        port=${PORT[$name]}
        pid=${PID[$name]}
        f=$TMP/$round-${name//\//_}.json
        s0=$(stat "$port" pmem:syncs tiers 2>/dev/null || true)
        n0=$(stat "$port" cmd_set)
        c0=$(cpu_ns "$pid")
        mcload --server "127.0.0.1:$port" --get-ratio 0 --keys "$KEYS" \
            --value-size "$VALUE" --conns "$CONNS" --depth "$DEPTH" \
            --duration "$DURATION" --requests 0 --json >"$f" || true
        c1=$(cpu_ns "$pid")
        n1=$(stat "$port" cmd_set)
        s1=$(stat "$port" pmem:syncs tiers 2>/dev/null || true)
        read -r ops reqs < <(json "$f" ops_per_sec requests)
        cpr=$(awk -v d="$((c1 - c0))" -v n="$reqs" \
              'BEGIN { printf "%.0f", (n > 0 ? d / n : 0) }')
        spr=-
        if [ -n "$s0" ] && [ -n "$s1" ]; then
            spr=$(awk -v a="$((s1 - s0))" -v n="$((n1 - n0))" \
                  'BEGIN { printf "%.4f", (n > 0 ? a / n : 0) }')
        fi
        echo "$ops" >>"$TMP/ops-${name//\//_}"
        echo "$cpr" >>"$TMP/cpu-${name//\//_}"
        printf '%-20s %5d %12.0f %12d %10s\n' "$name" "$round" "$ops" \
            "$cpr" "$spr"
    done
done

echo
printf '%-20s %12s %12s  %s\n' median ops/s cpu_ns/req \
    "ratio ops/s: to mcpm/dram, to memcached -e on the same medium"
base=$(median <"$TMP/ops-mcpm_dram" 2>/dev/null || echo 0)
for name in "${NAMES[@]}"; do
    ops=$(median <"$TMP/ops-${name//\//_}")
    cpu=$(median <"$TMP/cpu-${name//\//_}")
    case $name in
    mcpm/tmpfs*) ref=memcached_-e-tmpfs ;;
    mcpm/disk*) ref=memcached_-e-disk ;;
    *) ref= ;;
    esac
    refops=0
    if [ -n "$ref" ] && [ -f "$TMP/ops-$ref" ]; then
        refops=$(median <"$TMP/ops-$ref")
    fi
    printf '%-20s %12.0f %12.0f  %s %s\n' "$name" "$ops" "$cpu" \
        "$(awk -v a="$ops" -v b="$base" \
           'BEGIN { if (b > 0) printf "%.3f", a / b; else print "-" }')" \
        "$(awk -v a="$ops" -v b="$refops" \
           'BEGIN { if (b > 0) printf "%.3f", a / b; else print "-" }')"
done
