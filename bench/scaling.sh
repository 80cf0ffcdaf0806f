#!/bin/bash
# scaling.sh: GET throughput against Debian's memcached as -t grows, on a
# hot key, a hot set and a uniform key space (doc/SHARED_WRITES.md).
#
# For each -t in THREADS_LIST and each workload in WORKLOADS, both
# servers get the same mcload run side by side (bench/compare.sh, ROUNDS
# rounds, order alternating), and the medians go into one table:
#
#   workload   -t   memcached-pm ops/s   memcached ops/s   ratio
#
# then each server's scaling: its ops/s at -t n over its own at the first
# -t of the list.  Workloads (all GETs of 32-byte values, every key
# preloaded):
#   hot1      one key, fetched by every connection
#   hot100    100 keys, each fetched by every connection
#   uniform   100000 keys, uniformly
# The load generator keeps DEPTH requests in flight per connection, over
# CONNS connections and LOAD_THREADS threads.  By default the servers may
# use every CPU and mcload too (a 2-CPU machine has no spare core); on a
# larger machine give them their own: SERVER_CPU=0-7 LOAD_CPU=8-15.
#
#   bench/scaling.sh                       # -t 1 2 here
#   THREADS_LIST="1 2 4 8" SERVER_CPU=0-7 LOAD_CPU=8-15 LOAD_THREADS=4 \
#       bench/scaling.sh                   # the table with more cores
#
# Everything started is stopped on exit (compare.sh's own clean-up).

set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
THREADS_LIST=${THREADS_LIST:-1 2}
WORKLOADS=${WORKLOADS:-hot1 hot100 uniform}
DEPTH=${DEPTH:-16}
CONNS=${CONNS:-50}
LOAD_THREADS=${LOAD_THREADS:-1}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
NCPU=$(nproc)
SERVER_CPU=${SERVER_CPU:-0-$((NCPU - 1))}
LOAD_CPU=${LOAD_CPU:-0-$((NCPU - 1))}

RESULTS=$(mktemp /tmp/mcpm-scaling.XXXXXX)
trap 'rm -f "$RESULTS"' EXIT

keys_of() {
    case $1 in
    hot1) echo 1 ;;
    hot100) echo 100 ;;
    uniform) echo 100000 ;;
    *) echo "scaling.sh: unknown workload $1" >&2; exit 1 ;;
    esac
}

for t in $THREADS_LIST; do
    for w in $WORKLOADS; do
        THREADS=$t KEYS=$(keys_of "$w") GET_RATIO=1 ROUNDS=$ROUNDS \
            DURATION=$DURATION PARTS=throughput CONNS=$CONNS \
            SERVER_CPU=$SERVER_CPU LOAD_CPU=$LOAD_CPU \
            LOAD_ARGS="--depth $DEPTH --threads $LOAD_THREADS" \
            RESULT_FILE=$RESULTS LABEL="$w $t" \
            bash "$ROOT/bench/compare.sh"
    done
done

echo
echo "== GET scaling: depth $DEPTH x $CONNS conns, $LOAD_THREADS mcload" \
     "thread(s), servers on cpu $SERVER_CPU, mcload on cpu $LOAD_CPU"
awk -F'\t' '
{
    split($1, wt, " ")
    w = wt[1]; t = wt[2]
    a[w, t] = $3; b[w, t] = $7
    if (!(w in first)) { first[w] = t; order[++nw] = w }
    if (!((w, t) in seen)) { seen[w, t] = 1; ts[w] = ts[w] " " t }
}
END {
    printf "%-9s %4s %14s %14s %7s %12s %12s\n", "workload", "-t",
           "memcached-pm", "memcached", "ratio", "pm scaling", "mc scaling"
    for (i = 1; i <= nw; i++) {
        w = order[i]
        n = split(ts[w], list, " ")
        for (j = 1; j <= n; j++) {
            t = list[j]; f = first[w]
            printf "%-9s %4s %14.0f %14.0f %6.2fx %11.2fx %11.2fx\n", w, t,
                   a[w, t], b[w, t], a[w, t] / b[w, t],
                   a[w, t] / a[w, f], b[w, t] / b[w, f]
        }
    }
}' "$RESULTS"
