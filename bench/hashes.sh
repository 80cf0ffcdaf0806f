#!/bin/bash
# hashes.sh: -o hash_algorithm=xxh3 against murmur3 (memcached's default),
# end to end: bench/hashes first (each hash alone, per key length), then
# two memcached-pm servers, one per hash, side by side on one CPU, given
# the same multiget load in turn (A B B A), and the same again with the
# servers' places swapped, so that neither port nor start order favours
# one.  Prints each run, each hash's median requests/s and the ratio.
#
#   bench/hashes.sh                 # 190-byte key prefix, 32-key multigets
#   PREFIX_LEN=20 MULTIGET=8 bench/hashes.sh
#
# Everything started is stopped on exit.

set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MCPM_BIN=${MCPM_BIN:-$ROOT/build/memcached-pm/memcached-pm}
MCLOAD=${MCLOAD:-$ROOT/build/bench/mcload}
HASHES_BIN=${HASHES_BIN:-$ROOT/build/bench/hashes}
PREFIX_LEN=${PREFIX_LEN:-190}
MULTIGET=${MULTIGET:-32}
KEYS=${KEYS:-50000}
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-3}
SERVER_CPU=${SERVER_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}

die() { echo "hashes.sh: $*" >&2; exit 1; }
MC_BIN=/usr/bin/memcached          # lib.sh's build check names it
. "$ROOT/bench/lib.sh"
[ -x "$HASHES_BIN" ] || die "no $HASHES_BIN (make)"
[ -x "$MCLOAD" ] || die "no $MCLOAD (make)"
pin_cpus

echo "== each hash alone (bench/hashes)"
"$HASHES_BIN"

PREFIX=$(printf 'k%.0s' $(seq "$PREFIX_LEN"))
OUT=$(mktemp /tmp/mcpm-hashes.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -f "$OUT"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM  # so that EXIT runs: the servers go too

# one_pair HASH_A HASH_B: both servers, ROUNDS rounds of A B B A.
one_pair() {
    local ha=$1 hb=$2 pa pb a b
    pa=$(free_port)
    pb=$(free_port)
    "${PIN_SERVER[@]}" "$MCPM_BIN" -u root -l 127.0.0.1 -p "$pa" -U 0 \
        -t 1 -o "hash_algorithm=$ha" & a=$!
    "${PIN_SERVER[@]}" "$MCPM_BIN" -u root -l 127.0.0.1 -p "$pb" -U 0 \
        -t 1 -o "hash_algorithm=$hb" & b=$!
    PIDS+=("$a" "$b")
    wait_ready "$pa" "$a"
    wait_ready "$pb" "$b"
    for p in "$pa" "$pb"; do
        "$MCLOAD" --server "127.0.0.1:$p" --preload --keys "$KEYS" \
            --key-prefix "$PREFIX" --duration 1 -c 4 >/dev/null
    done
    for _ in $(seq "$ROUNDS"); do
        for side in A B B A; do
            local port=$pa hash=$ha
            [ "$side" = B ] && port=$pb hash=$hb
            "${PIN_LOAD[@]}" "$MCLOAD" --server "127.0.0.1:$port" \
                --keys "$KEYS" --key-prefix "$PREFIX" --duration "$DURATION" \
                -c 8 -d 4 --get-ratio 1 --multiget "$MULTIGET" --json \
                > "$OUT.run"
            echo "$hash $(json "$OUT.run" ops_per_sec)" | tee -a "$OUT"
        done
    done
    kill "$a" "$b"
    wait "$a" "$b" 2>/dev/null || true
    rm -f "$OUT.run"
}

echo "== end to end: $((PREFIX_LEN + 6))-byte keys, $MULTIGET-key gets," \
     "requests/s"
one_pair xxh3 murmur3
one_pair murmur3 xxh3
python3 - "$OUT" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    h, v = line.split()
    runs.setdefault(h, []).append(float(v))
med = {h: statistics.median(v) for h, v in runs.items()}
for h in sorted(med):
    print("%-8s median %.0f requests/s over %d runs"
          % (h, med[h], len(runs[h])))
print("xxh3 / murmur3: %.3f" % (med["xxh3"] / med["murmur3"]))
PY
