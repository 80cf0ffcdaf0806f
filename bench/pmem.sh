#!/bin/bash
# pmem.sh: the PMEM tier of memcached-pm against Debian's `memcached -e`.
#
# Part 1 (restart): memcached-pm -e and memcached -e, same -m and -t, each
# with its memory file on /dev/shm, are preloaded with the same ITEMS keys.
# Then, round after round, each is stopped with SIGUSR1 (memcached: its
# graceful restart; memcached-pm: a clean shutdown) and started again on
# the same file; memcached-pm is also killed with SIGKILL, which costs it
# the checksum pass.  Printed per restart: signal to exit, exec to every
# item back (memcached: its first `version` reply; memcached-pm, which
# serves while it reads its file back after a crash: stats
# recovery_running 0), exec to the first reply (serve_s), curr_items
# afterwards (must be ITEMS), and memcached-pm's own recovery_seconds.
# Then medians and ratios.
#
# Part 2 (throughput): six servers side by side, memcached-pm under each
# tier policy (dram, pmem, cache, capacity), memcached -e and plain
# memcached, get the same mcload load in turn, A B C D E F A B ...:
# GET/SET 90/10 on a preloaded key set, then SET only with larger values,
# since a durable set flushes before its reply, then GET/SET 90/10 zipf
# over a key set several times the DRAM tier of cache and capacity.  The
# single-tier servers have -m TP_MEM; cache and capacity have -m TP_DRAM
# of DRAM over a file of TP_MEM.  Medians and ratios against memcached-pm
# DRAM.
#
# Part 3 (DRAM per item): memcached-pm with -e is loaded with N items and
# the growth of its anonymous memory (RssAnon: heap, hash table, buffers;
# the tmpfs file's pages count in RssShmem instead) is divided by N; the
# same for tier_policy=dram and for memcached -e, for comparison.
#
# Servers are pinned to SERVER_CPU and mcload to LOAD_CPU.  Everything
# started here is killed on exit, and the memory files (one directory under
# /dev/shm) are removed.  Knobs are environment variables; see usage.

set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
QUICK=${QUICK:-0}
if [ "$QUICK" = 1 ]; then
    d_items=1000000
    d_rounds=1
    d_duration=3
    d_rss_items="100000 1000000"
    d_mem=1024
else
    d_items=10000000
    d_rounds=3
    d_duration=10
    d_rss_items="1000000 10000000"
    d_mem=4096
fi
MCPM_BIN=${MCPM_BIN:-$ROOT/build/memcached-pm/memcached-pm}
MC_BIN=${MC_BIN:-/usr/bin/memcached}
MCLOAD=${MCLOAD_BIN:-$ROOT/build/bench/mcload}
THREADS=${THREADS:-4}
MEM=${MEM:-$d_mem}
ITEMS=${ITEMS:-$d_items}
ITEM_PREFIX=${ITEM_PREFIX:-k:}
ITEM_SIZE=${ITEM_SIZE:-32}
ROUNDS=${ROUNDS:-$d_rounds}
DURATION=${DURATION:-$d_duration}
CONNS=${CONNS:-50}
KEYS=${KEYS:-100000}
VALUE_SIZE=${VALUE_SIZE:-32}
GET_RATIO=${GET_RATIO:-0.9}
SET_VALUE_SIZE=${SET_VALUE_SIZE:-512}
TP_MEM=${TP_MEM:-1024}
TP_DRAM=${TP_DRAM:-64}
BIG_KEYS=${BIG_KEYS:-2000000}
BIG_VALUE_SIZE=${BIG_VALUE_SIZE:-200}
RSS_ITEMS=${RSS_ITEMS:-$d_rss_items}
SERVER_CPU=${SERVER_CPU:-1}
LOAD_CPU=${LOAD_CPU:-0}
# The restart part pins the servers here; "0,1" lets memcached-pm's
# parallel recovery scan use both cores (memcached's fixup is one thread).
RESTART_CPUS=${RESTART_CPUS:-$SERVER_CPU}
# ALONE=1: each server is preloaded, then restarted with the other stopped
# (one server process at a time, both memory files kept; rounds alternate).
ALONE=${ALONE:-0}
PARTS=${PARTS:-restart,throughput,rss}
SHM_DIR=${SHM_DIR:-/dev/shm}

usage() {
    cat <<EOF
usage: bench/pmem.sh
environment (defaults in brackets; QUICK=1 changes the starred ones):
  QUICK [0] 1: 1M items, 1 round, 3 s runs, -m 1024, RSS_ITEMS 100k 1M
  MCPM_BIN [build/memcached-pm/memcached-pm]   MC_BIN [/usr/bin/memcached]
  MCLOAD_BIN [build/bench/mcload]              THREADS [4] (-t for all)
  MEM* [4096] -m of the restart and DRAM-per-item servers
  ITEMS* [10000000] items of the restart part
  ITEM_PREFIX [k:] ITEM_SIZE [32]        keys <prefix><n>, value bytes
  ROUNDS* [3] rounds per part            DURATION* [10] seconds per run
  CONNS [50]  KEYS [100000]  VALUE_SIZE [32]  GET_RATIO [0.9]
  SET_VALUE_SIZE [512] value bytes of the SET-only runs
  TP_MEM [1024] -m of the throughput servers (the file of cache and
         capacity)            TP_DRAM [64] -m of cache and capacity
  BIG_KEYS [2000000] BIG_VALUE_SIZE [200] the larger-than-DRAM key set
  RSS_ITEMS* ["1000000 10000000"] item counts of the DRAM-per-item part
  SERVER_CPU [1]  LOAD_CPU [0]           PARTS [restart,throughput,rss]
  RESTART_CPUS [SERVER_CPU] cpus of the servers in the restart part
  ALONE [0]  1: in the restart part, one server at a time
  SHM_DIR [/dev/shm] where the memory files go (tmpfs)
EOF
}

if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
    usage
    exit 0
fi

PIDS=()
TMP=$(mktemp -d /tmp/mcpm-pmem.XXXXXX)
SHM=$(mktemp -d "$SHM_DIR/mcpm-pmem.XXXXXX")
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$TMP" "$SHM"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM  # so that EXIT runs: the servers go too

die() {
    echo "pmem.sh: $*" >&2
    exit 1
}

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

# A pid that has been waited for leaves the list, so the cleanup can never
# signal some later process that was given the same number.
forget() {
    local pid keep=()
    for pid in "${PIDS[@]}"; do
        if [ "$pid" != "$1" ]; then
            keep+=("$pid")
        fi
    done
    PIDS=("${keep[@]}")
}

# need_shm MB: the tmpfs must hold MB more (the files grow as pages are
# touched, so a full tmpfs would show up as SIGBUS, not as an error).
need_shm() {
    local avail
    avail=$(df -Pm "$SHM" | awk 'NR == 2 { print $4 }')
    if [ "$avail" -lt "$1" ]; then
        die "$SHM_DIR has $avail MB free, this part needs $1 MB" \
            "(lower MEM/ITEMS or use QUICK=1)"
    fi
}

pin_cpus


# wait_version PORT PID T0: waits for the first `version` reply and prints
# the seconds since T0 (an $EPOCHREALTIME taken just before the exec).
# It polls every millisecond from this shell: a python poller took tens
# of milliseconds to start after T0, which hid any faster start-up.
wait_version() {
    local port=$1 pid=$2 t0=${3//[.,]/} now reply
    local deadline=$((SECONDS + 600))
    # bash's own /dev/tcp: no interpreter to start, so a restart faster
    # than one is still timed to the millisecond
    while [ "$SECONDS" -lt "$deadline" ]; do
        if exec 3<>"/dev/tcp/127.0.0.1/$port"; then
            printf 'version\r\n' >&3
            IFS= read -r -t 60 reply <&3 || reply=
            exec 3>&-
            if [[ $reply == VERSION\ * ]]; then
                now=${EPOCHREALTIME//[.,]/}
                printf '%d.%03d\n' $(((now - t0) / 1000000)) \
                    $(((now - t0) / 1000 % 1000))
                return 0
            fi
        fi 2>/dev/null
        kill -0 "$pid" 2>/dev/null || {
            echo "server pid $pid exited" >&2
            return 1
        }
        sleep 0.001
    done
    echo "no version reply on port $port" >&2
    return 1
}

# start_server BIN PORT EXTRA...: sets SERVER_PID and START_S (seconds from
# exec to the first `version` reply).  The server's stderr goes to
# $TMP/log-PORT.  memcached refuses to run as root without -u.
start_server() {
    local bin=$1 port=$2 t0
    shift 2
    local args=(-p "$port" -U 0 -l 127.0.0.1 -t "$THREADS" "$@")
    if [ "$(id -u)" = 0 ]; then
        args+=(-u root)
    fi
    echo "-- $bin ${args[*]}" >>"$TMP/log-$port"
    t0=$EPOCHREALTIME
    START_T0=$t0
    "${PIN_SERVER[@]}" "$bin" "${args[@]}" >>"$TMP/log-$port" 2>&1 &
    SERVER_PID=$!
    PIDS+=("$SERVER_PID")
    START_S=$(wait_version "$port" "$SERVER_PID" "$t0") ||
        die "server on port $port did not come up: $(tail -3 \
"$TMP/log-$port")"
}

# wait_recovered PORT: until memcached-pm has read its file back (stats
# recovery_running 0); sets BACK_S, seconds from the last start's exec.
# bash's own /dev/tcp again: a python per poll would cost more than a
# recovery after a clean stop takes.
wait_recovered() {
    local deadline=$((SECONDS + 600)) line running
    while [ "$SECONDS" -lt "$deadline" ]; do
        running=
        if exec 3<>"/dev/tcp/127.0.0.1/$1"; then
            printf 'stats\r\n' >&3
            while IFS= read -r -t 60 line <&3; do
                case $line in
                "STAT recovery_running "*)
                    running=${line#STAT recovery_running }
                    running=${running%$'\r'} ;;
                END*) break ;;
                esac
            done
            exec 3>&-
        fi 2>/dev/null
        if [ "$running" = 0 ]; then
            BACK_S=$(awk -v a="$START_T0" -v b="$EPOCHREALTIME" \
                     'BEGIN { printf "%.3f", b - a }')
            return 0
        fi
        sleep 0.001
    done
    die "no end of recovery on $1"
}

# stop_server PID [SIGNAL]: sets STOP_S, seconds from the signal to exit.
stop_server() {
    local t0
    t0=$EPOCHREALTIME
    kill -s "${2:-TERM}" "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
    STOP_S=$(awk -v a="$t0" -v b="$EPOCHREALTIME" \
             'BEGIN { printf "%.3f", b - a }')
    forget "$1"
}

# preload PORT N PREFIX SIZE: sets keys 0..N-1 once, pipelined; prints
# the sets per second.
preload() {
    local f=$TMP/preload.json sets err secs
    mcload --server "127.0.0.1:$1" --preload --requests 1 --keys "$2" \
        --key-prefix "$3" --value-size "$4" --conns 8 --depth 64 \
        --json >"$f" 2>"$f.err" ||
        die "preload of port $1 failed: $(cat "$f.err" "$f")"
    read -r sets err secs < <(json "$f" preload_sets preload_errors \
                                preload_seconds)
    [ "$err" = 0 ] || die "preload of port $1: $err errors"
    awk -v n="$sets" -v s="$secs" 'BEGIN { printf "%.0f", n / s }'
}

# settle PORT: brings the hash table to the size the item count asks for.
# Both servers grow it in the background one doubling at a time, and only
# an insert starts the next doubling, so a preload that ends mid-growth
# leaves it too small.  While items > 1.5 x buckets, this waits for the
# growth in progress, then sets and deletes a scratch key (curr_items is
# unchanged) to start the next one.  Gives up after two minutes.
settle() {
    python3 - "$1" <<'EOF'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30)
def cmd(line, end):
    s.sendall(line)
    data = b""
    while not data.endswith(end):
        chunk = s.recv(65536)
        if not chunk:
            sys.exit("connection closed")
        data += chunk
    return data
def stats():
    out = {}
    for line in cmd(b"stats\r\n", b"END\r\n").decode().splitlines():
        f = line.split()
        if len(f) == 3:
            out[f[1]] = f[2]
    return out
deadline = time.time() + 120
while time.time() < deadline:
    st = stats()
    if st.get("hash_is_expanding") == "1":
        time.sleep(0.05)
        continue
    items, power = int(st["curr_items"]), int(st["hash_power_level"])
    buckets = int(st["hash_bytes"]) // 8
    if buckets != 1 << power:
        # memcached-pm: 4-byte buckets, grown a bucket at a time
        buckets = int(st["hash_bytes"]) // 4
    if items <= 3 * buckets // 2 + 1:
        sys.exit(0)
    cmd(b"set pmem.sh:settle 0 0 1\r\nx\r\n", b"\r\n")
    cmd(b"delete pmem.sh:settle\r\n", b"\r\n")
    time.sleep(0.05)
print("pmem.sh: port %s: hash table still growing" % sys.argv[1],
      file=sys.stderr)
EOF
}

# rss PID FIELD: a /proc/PID/status field in kB.
rss() {
    awk -v f="$2:" '$1 == f { print $2 }' /proc/"$1"/status
}

# ---- part 1: restart ----------------------------------------------------

declare -A R_PID R_PORT R_BIN R_ARGS

# meta_wait FILE: memcached 1.6.18 refuses its own .meta (and starts
# empty) when the wall clock has not passed the stop_time saved in it; that
# stop_time is derived from its coarse clock and can be up to a second
# ahead.  So the restart waits for the next second (not counted in start_s).
meta_wait() {
    local stop
    stop=$(sed -n 's/^Kstop_time //p' "$1" 2>/dev/null || true)
    if [ -z "$stop" ]; then
        return 0
    fi
    while [ "$(date +%s)" -le "$stop" ]; do
        sleep 0.05
    done
}

# restart_one SIDE SIGNAL LABEL ROUND: stops SIDE with SIGNAL, starts it
# again on the same file, checks curr_items, prints one row.  Figures go to
# $TMP/r-{stop,start,rec}-<label with / as _>.
restart_one() {
    local side=$1 sig=$2 label=$3 round=$4 port items rsec csum ok f serve
    f=${label//\//_}
    port=${R_PORT[$side]}
    stop_server "${R_PID[$side]}" "$sig"
    if [ "$side" = mc ]; then
        meta_wait "$SHM/restart-mc.meta"
    fi
    # shellcheck disable=SC2086
    start_server "${R_BIN[$side]}" "$port" ${R_ARGS[$side]}
    R_PID[$side]=$SERVER_PID
    serve=$START_S
    if [ "$side" = pm ]; then
        wait_recovered "$port"
        START_S=$BACK_S
    fi
    items=$(stat "$port" curr_items)
    rsec=$(stat "$port" recovery_seconds)
    csum=$(stat "$port" recovery_checksummed)
    ok=ok
    if [ "$items" != "$ITEMS" ]; then
        ok="LOST $((ITEMS - items))"
        echo "$label" >>"$TMP/r-bad"
        sed 's/^/    log: /' "$TMP/log-$port" | tail -5 >>"$TMP/r-why"
    fi
    if [ "$sig" = KILL ]; then
        STOP_S=-
    else
        echo "$STOP_S" >>"$TMP/r-stop-$f"
    fi
    echo "$START_S" >>"$TMP/r-start-$f"
    if [ -n "$rsec" ]; then
        echo "$rsec" >>"$TMP/r-rec-$f"
    fi
    printf '%-22s %5d %8s %9s %8s %11s %6s %11s %s\n' "$label" "$round" \
        "$STOP_S" "$START_S" "$serve" "$items" "${csum:--}" "${rsec:--}" \
        "$ok"
}

restart_summary() {
    local label f s t r
    printf '%-22s %8s %9s %11s\n' median stop_s start_s recovery_s
    for label in memcached-pm/USR1 memcached/USR1 memcached-pm/KILL; do
        f=${label//\//_}
        s=-
        r=-
        if [ -s "$TMP/r-stop-$f" ]; then
            s=$(median <"$TMP/r-stop-$f")
        fi
        if [ -s "$TMP/r-rec-$f" ]; then
            r=$(median <"$TMP/r-rec-$f")
        fi
        t=$(median <"$TMP/r-start-$f")
        echo "$t" >"$TMP/r-med-$f"
        printf '%-22s %8s %9s %11s\n' "$label" "$s" "$t" "$r"
    done
    awk -v a="$(median <"$TMP/r-stop-memcached-pm_USR1")" \
        -v b="$(median <"$TMP/r-stop-memcached_USR1")" \
        -v c="$(cat "$TMP/r-med-memcached-pm_USR1")" \
        -v d="$(cat "$TMP/r-med-memcached_USR1")" \
        -v e="$(cat "$TMP/r-med-memcached-pm_KILL")" 'BEGIN {
        printf "ratio   memcached-pm / memcached (USR1): stop %.2f" \
               "  start %.2f  stop+start %.2f\n", a / b, c / d,
               (a + c) / (b + d)
        printf "ratio   memcached-pm KILL / memcached USR1: start %.2f\n",
               e / d }'
    if [ -s "$TMP/r-bad" ]; then
        echo "!! curr_items differed from $ITEMS after a restart:" \
             "$(sort "$TMP/r-bad" | uniq -c | tr '\n' ' ')"
        cat "$TMP/r-why"
    else
        echo "curr_items = $ITEMS after every restart, both servers"
    fi
}

# prep_side SIDE: start SIDE's server, preload it, wait for its table.
prep_side() {
    local side=$1 rate hp
    R_PORT[$side]=$(free_port)
    # shellcheck disable=SC2086
    start_server "${R_BIN[$side]}" "${R_PORT[$side]}" ${R_ARGS[$side]}
    R_PID[$side]=$SERVER_PID
    rate=$(preload "${R_PORT[$side]}" "$ITEMS" "$ITEM_PREFIX" "$ITEM_SIZE")
    settle "${R_PORT[$side]}"
    hp=$(stat "${R_PORT[$side]}" hash_power_level)
    echo "preload $([ "$side" = pm ] && echo memcached-pm ||
         echo memcached): $rate sets/s, curr_items" \
         "$(stat "${R_PORT[$side]}" curr_items), hashpower $hp"
}

# rounds_of SIDE...: ROUNDS rounds of the restarts of the sides given.
rounds_of() {
    local round side
    for round in $(seq "$ROUNDS"); do
        for side in "$@"; do
            if [ "$side" = pm ]; then
                restart_one pm USR1 memcached-pm/USR1 "$round"
            else
                restart_one mc USR1 memcached/USR1 "$round"
            fi
        done
        case " $* " in
        *" pm "*) restart_one pm KILL memcached-pm/KILL "$round" ;;
        esac
    done
}

# alone_one SIDE SIGNAL LABEL ROUND: SIDE's server, stopped cleanly before,
# is started (not timed), then restart_one times its stop with SIGNAL and
# its start; then it stops cleanly again, so that the other side's next
# restart runs with no other server process on the machine.
alone_one() {
    local side=$1
    if [ "$side" = mc ]; then
        meta_wait "$SHM/restart-mc.meta"
    fi
    # shellcheck disable=SC2086
    start_server "${R_BIN[$side]}" "${R_PORT[$side]}" ${R_ARGS[$side]}
    R_PID[$side]=$SERVER_PID
    restart_one "$@"
    stop_server "${R_PID[$side]}" USR1
}

# alone_rounds: ROUNDS rounds, the two servers' restarts interleaved (the
# order turned every round), so that the machine's drift over the run
# falls on both.
alone_rounds() {
    local round side order
    for round in $(seq "$ROUNDS"); do
        order="pm mc"
        if [ $((round % 2)) = 0 ]; then
            order="mc pm"
        fi
        for side in $order; do
            if [ "$side" = pm ]; then
                alone_one pm USR1 memcached-pm/USR1 "$round"
                alone_one pm KILL memcached-pm/KILL "$round"
            else
                alone_one mc USR1 memcached/USR1 "$round"
            fi
        done
    done
}

restart() {
    local side pin=("${PIN_SERVER[@]}")
    R_BIN[pm]=$MCPM_BIN
    R_BIN[mc]=$MC_BIN
    R_ARGS[pm]="-v -m $MEM -e $SHM/restart-pm"
    R_ARGS[mc]="-v -m $MEM -e $SHM/restart-mc"
    if [ "${#PIN_SERVER[@]}" -gt 0 ]; then
        PIN_SERVER=(taskset -c "$RESTART_CPUS")
    fi
    echo "== restart: $ITEMS items (keys ${ITEM_PREFIX}<n>," \
         "${ITEM_SIZE}-byte values), -m $MEM -t $THREADS," \
         "memory files on $SHM_DIR, servers on cpu $RESTART_CPUS," \
         "$ROUNDS rounds$([ "$ALONE" = 1 ] && echo ", each server alone")"
    if [ "$ALONE" = 1 ]; then
        # one process at a time, both files kept: nothing else on the CPU
        need_shm $((2 * MEM + 256))
        for side in pm mc; do
            prep_side "$side"
            stop_server "${R_PID[$side]}" USR1
        done
        printf '%-22s %5s %8s %9s %8s %11s %6s %11s %s\n' server round \
            stop_s start_s serve_s curr_items csum recovery_s check
        alone_rounds
    else
        need_shm $((2 * MEM + 256))
        for side in pm mc; do
            prep_side "$side"
        done
        printf '%-22s %5s %8s %9s %8s %11s %6s %11s %s\n' server round \
            stop_s start_s serve_s curr_items csum recovery_s check
        rounds_of pm mc
        for side in pm mc; do
            stop_server "${R_PID[$side]}" TERM
        done
    fi
    restart_summary
    echo "stop_s: signal to process exit; start_s: exec to first" \
         "\`version\` reply; csum: recovery_checksummed"
    rm -f "$SHM"/restart-*
    PIN_SERVER=("${pin[@]}")
}

# ---- part 2: throughput -------------------------------------------------

TP_NAMES=(memcached-pm/dram memcached-pm/pmem memcached-pm/cache
          memcached-pm/capacity memcached/-e memcached)
declare -A T_PID T_PORT

# tp_run KIND LOADARGS...: one pass over the four servers per round.
tp_run() {
    local kind=$1 round i name port pid f ops p99 err reqs c0 c1 cpr
    local fl0 fl1 sets0 sets1 extra
    shift
    printf '%-21s %5s %12s %10s %12s %8s %s\n' server round ops/s p99_us \
        cpu_ns/req errors flush/set
    for round in $(seq "$ROUNDS"); do
        for i in "${!TP_NAMES[@]}"; do
            name=${TP_NAMES[$i]}
            port=${T_PORT[$name]}
            pid=${T_PID[$name]}
            f=$TMP/tp-$kind-$i-$round.json
            fl0=$(stat "$port" pmem:flushes tiers 2>/dev/null || true)
            sets0=$(stat "$port" cmd_set)
            c0=$(cpu_ns "$pid")
            mcload --server "127.0.0.1:$port" "$@" >"$f" || true
            c1=$(cpu_ns "$pid")
            sets1=$(stat "$port" cmd_set)
            fl1=$(stat "$port" pmem:flushes tiers 2>/dev/null || true)
            extra=-
            if [ -n "$fl0" ] && [ -n "$fl1" ] && [ "$sets1" -gt "$sets0" ]
            then
                extra=$(awk -v a="$((fl1 - fl0))" -v n="$((sets1 - sets0))" \
                        'BEGIN { printf "%.2f", a / n }')
            fi
            read -r ops p99 err reqs < <(json "$f" ops_per_sec \
                                          latency_us.p99 errors requests)
            cpr=$(awk -v d="$((c1 - c0))" -v n="$reqs" \
                  'BEGIN { printf "%.0f", (n > 0 ? d / n : 0) }')
            echo "$ops" >>"$TMP/tp-$kind-ops-$i"
            echo "$p99" >>"$TMP/tp-$kind-p99-$i"
            echo "$cpr" >>"$TMP/tp-$kind-cpu-$i"
            printf '%-21s %5d %12.0f %10.1f %12d %8d %s\n' "$name" \
                "$round" "$ops" "$p99" "$cpr" "$err" "$extra"
        done
    done
    tp_summary "$kind"
}

tp_summary() {
    local kind=$1 i ops p99 cpu base_ops base_cpu
    printf '%-21s %12s %10s %12s   %s\n' median ops/s p99_us cpu_ns/req \
        "ratio to memcached-pm/dram (ops/s, cpu/req)"
    for i in "${!TP_NAMES[@]}"; do
        ops=$(median <"$TMP/tp-$kind-ops-$i")
        p99=$(median <"$TMP/tp-$kind-p99-$i")
        cpu=$(median <"$TMP/tp-$kind-cpu-$i")
        if [ "$i" = 0 ]; then
            base_ops=$ops
            base_cpu=$cpu
        fi
        echo "$ops $cpu" >"$TMP/tp-$kind-med-$i"
        printf '%-21s %12.0f %10.1f %12.0f   %s\n' "${TP_NAMES[$i]}" \
            "$ops" "$p99" "$cpu" "$(awk -v a="$ops" -v b="$base_ops" \
            -v c="$cpu" -v d="$base_cpu" \
            'BEGIN { printf "%.3f %.3f", a / b, c / d }')"
    done
}

# What each durable policy costs here against dram, per load.
tp_cost() {
    local kind label i dram_ops dram_cpu pm_ops pm_cpu
    for kind in mix set big; do
        case $kind in
        mix) label="GET/SET" ;;
        set) label="SET only" ;;
        big) label="GET/SET zipf, items > DRAM" ;;
        esac
        read -r dram_ops dram_cpu <"$TMP/tp-$kind-med-0"
        for i in 1 2 3; do
            read -r pm_ops pm_cpu <"$TMP/tp-$kind-med-$i"
            awk -v k="$label" -v a="$dram_ops" -v b="$pm_ops" \
                -v c="$dram_cpu" -v d="$pm_cpu" -v n="${TP_NAMES[$i]}" \
                'BEGIN { printf "cost, %s: %s at %.0f%% of dram ops/s, " \
                         "%+.0f ns (%+.0f%%) server CPU per request\n",
                         k, n, 100 * b / a, d - c, 100 * (d - c) / c }'
        done
    done
    cat <<'EOF'
On this machine the memory file is on tmpfs, which is not DAX: libpmem
reports it as not PMEM, so each flush is pmem_msync, an msync(MS_SYNC)
syscall that on tmpfs writes nothing back (shmem has no backing store):
what is measured is the syscall, the item data and its 8-byte live mark
flushed separately, plus the CRC.  Real PMEM would use pmem_persist
(cache-line flushes and a fence, no syscall) and pay the media's write
latency instead, so these figures do not predict the cost there.
memcached -e flushes nothing per set (its file is only msync'ed at a
SIGUSR1 stop): it keeps items across a graceful restart only.
EOF
}

# tp_tiers: where the two-tier servers' items are after a load.
tp_tiers() {
    local name port
    for name in memcached-pm/cache memcached-pm/capacity; do
        port=${T_PORT[$name]}
        printf '%-21s' "$name"
        for f in dram:curr_items pmem:curr_items dram:hits pmem:hits \
                 dram:promotions pmem:demotions; do
            printf ' %s %s' "$f" "$(stat "$port" "$f" tiers)"
        done
        printf ' evictions %s\n' "$(stat "$port" evictions)"
    done
}

throughput() {
    local name port extra
    need_shm $((4 * TP_MEM + 256))
    echo "== throughput: six servers, -t $THREADS -m $TP_MEM (cache and" \
         "capacity: -m $TP_DRAM over a $TP_MEM MB file), memory files on" \
         "$SHM_DIR, ${DURATION}s x $ROUNDS per server"
    for name in "${TP_NAMES[@]}"; do
        port=$(free_port)
        T_PORT[$name]=$port
        case $name in
        memcached-pm/dram)
            start_server "$MCPM_BIN" "$port" -m "$TP_MEM" \
                -o tier_policy=dram ;;
        memcached-pm/pmem)
            start_server "$MCPM_BIN" "$port" -m "$TP_MEM" \
                -e "$SHM/tp-pm" -o tier_policy=pmem ;;
        memcached-pm/cache|memcached-pm/capacity)
            start_server "$MCPM_BIN" "$port" -m "$TP_DRAM" -o \
                "memory_file=$SHM/tp-${name#*/},memory_file_size=$TP_MEM,tier_policy=${name#*/}" ;;
        memcached/-e)
            start_server "$MC_BIN" "$port" -m "$TP_MEM" -e "$SHM/tp-mc" ;;
        memcached)
            start_server "$MC_BIN" "$port" -m "$TP_MEM" ;;
        esac
        T_PID[$name]=$SERVER_PID
        preload "$port" "$KEYS" key: "$VALUE_SIZE" >/dev/null
    done
    echo "-- GET/SET $GET_RATIO, ${VALUE_SIZE}-byte values, $CONNS conns," \
         "$KEYS preloaded keys uniform"
    tp_run mix --conns "$CONNS" --keys "$KEYS" --value-size "$VALUE_SIZE" \
        --get-ratio "$GET_RATIO" --duration "$DURATION" --requests 0 --json
    echo "-- SET only, ${SET_VALUE_SIZE}-byte values, $CONNS conns," \
         "$KEYS keys uniform"
    tp_run set --conns "$CONNS" --keys "$KEYS" --key-prefix set: \
        --value-size "$SET_VALUE_SIZE" --get-ratio 0 \
        --duration "$DURATION" --requests 0 --json
    tp_tiers
    for name in "${TP_NAMES[@]}"; do
        preload "${T_PORT[$name]}" "$BIG_KEYS" big: "$BIG_VALUE_SIZE" \
            >/dev/null
    done
    echo "-- GET/SET $GET_RATIO, ${BIG_VALUE_SIZE}-byte values, $CONNS" \
         "conns, $BIG_KEYS preloaded keys zipf 0.99 (about" \
         "$((BIG_KEYS * (BIG_VALUE_SIZE + 80) >> 20)) MB of items)"
    tp_run big --conns "$CONNS" --keys "$BIG_KEYS" --key-prefix big: \
        --value-size "$BIG_VALUE_SIZE" --get-ratio "$GET_RATIO" \
        --dist zipf --duration "$DURATION" --requests 0 --json
    tp_tiers
    echo "flush/set: memcached-pm's pmem:flushes (stats tiers) per cmd_set"
    tp_cost
    for name in "${TP_NAMES[@]}"; do
        stop_server "${T_PID[$name]}" TERM
    done
    rm -f "$SHM"/tp-*
}

# ---- part 3: DRAM bytes per item ----------------------------------------

rss_one() {
    local name=$1 bin=$2 port pid a0 s0 a1 s1 n hp
    shift 2
    port=$(free_port)
    start_server "$bin" "$port" -m "$MEM" "$@"
    pid=$SERVER_PID
    a0=$(rss "$pid" RssAnon)
    s0=$(rss "$pid" RssShmem)
    for n in $RSS_ITEMS; do
        preload "$port" "$n" "$ITEM_PREFIX" "$ITEM_SIZE" >/dev/null
        settle "$port"
        hp=$(stat "$port" hash_power_level)
        a1=$(rss "$pid" RssAnon)
        s1=$(rss "$pid" RssShmem)
        printf '%-18s %9d %3d %10d %10d %10d %10.1f %10.1f\n' "$name" \
            "$n" "$hp" "$a0" "$a1" "$s1" \
            "$(awk -v a="$a0" -v b="$a1" -v n="$n" \
               'BEGIN { print (b - a) * 1024 / n }')" \
            "$(awk -v a="$s0" -v b="$s1" -v n="$n" \
               'BEGIN { print (b - a) * 1024 / n }')"
    done
    stop_server "$pid" TERM
    rm -f "$SHM"/rss-*
}

rss_part() {
    need_shm $((MEM + 256))
    echo "== DRAM per item: -m $MEM -t $THREADS, items ${ITEM_PREFIX}<n>" \
         "with ${ITEM_SIZE}-byte values, loaded up to each count in turn"
    printf '%-18s %9s %3s %10s %10s %10s %10s %10s\n' server items hp \
        anon0_kB anon_kB shmem_kB anon_B/item shm_B/item
    rss_one memcached-pm/pmem "$MCPM_BIN" -e "$SHM/rss-pm" \
        -o tier_policy=pmem
    rss_one memcached-pm/dram "$MCPM_BIN" -o tier_policy=dram
    rss_one memcached/-e "$MC_BIN" -e "$SHM/rss-mc"
    echo "anon: RssAnon (DRAM proper: heap, hash table, connection" \
         "buffers); shmem: RssShmem, the tmpfs file's pages mapped in;" \
         "B/item: growth since start-up / items; hp: hash_power_level"
}

build_if_missing
echo "== memcached-pm: $MCPM_BIN ($("$MCPM_BIN" -V 2>/dev/null || true))"
echo "== memcached:    $MC_BIN ($("$MC_BIN" -V 2>/dev/null || true))"
echo "== servers on cpu $SERVER_CPU, mcload on cpu $LOAD_CPU," \
     "$(nproc) cpus online, $(df -Pm "$SHM" | awk 'NR == 2 { print $4 }')" \
     "MB free in $SHM_DIR ($(command stat -f -c %T "$SHM" 2>/dev/null ||
     echo '?'))"
case ",$PARTS," in *,restart,*) restart ;; esac
case ",$PARTS," in *,throughput,*) throughput ;; esac
case ",$PARTS," in *,rss,*) rss_part ;; esac
