#!/bin/bash
# lib.sh: what the benchmark scripts share; sourced by compare.sh,
# pmem.sh, kernel.sh and callgrind.sh after they set ROOT, MCPM_BIN,
# MC_BIN and MCLOAD (and SERVER_CPU and LOAD_CPU, or PIN_LOAD) and define
# die().

# pin_cpus: sets PIN_SERVER and PIN_LOAD, the prefixes that pin a command
# to SERVER_CPU and LOAD_CPU.  With fewer than two cores pinning would put
# everything on one; they stay empty.  Background jobs start as plain
# commands (never through a shell function), so $! is the process itself
# and a signal sent to it reaches the server or mcload, not a subshell.
pin_cpus() {
    PIN_SERVER=()
    PIN_LOAD=()
    if [ "$(nproc)" -ge 2 ]; then
        PIN_SERVER=(taskset -c "$SERVER_CPU")
        PIN_LOAD=(taskset -c "$LOAD_CPU")
    fi
}

# wait_ready PORT PID: until the server answers `stats`; die()s if it
# exits or stays silent for 10 s.
wait_ready() {
    local port=$1 pid=$2 i
    for i in $(seq 100); do
        if [ -n "$(stat "$port" pid 2>/dev/null)" ]; then
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || die "server on port $port exited"
        sleep 0.1
    done
    die "server on port $port did not answer"
}

# Build what is missing, as the README does (script/bootstrap, into
# build/, where the defaults look).
build_if_missing() {
    if [ ! -x "$MCPM_BIN" ] || [ ! -x "$MCLOAD" ]; then
        echo "== building (script/bootstrap: build/)"
        bash "$ROOT/script/bootstrap" >/dev/null
    fi
    [ -x "$MCPM_BIN" ] || die "no server binary at $MCPM_BIN"
    [ -x "$MCLOAD" ] || die "no load generator at $MCLOAD"
    [ -x "$MC_BIN" ] || die "no memcached at $MC_BIN (apt install memcached)"
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); \
s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# json FILE FIELD...: prints the fields of an mcload --json report.
json() {
    python3 - "$@" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
out = []
for f in sys.argv[2:]:
    v = d
    for part in f.split("."):
        v = v[part]
    out.append(str(v))
print(" ".join(out))
EOF
}

# stat PORT NAME [SUB]: one value from `stats` (or `stats SUB`), over TLS
# when STAT_TLS=1.  It hides the stat(1) command; call that as
# `command stat`.
stat() {
    python3 - "$@" <<'EOF'
import os, socket, ssl, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
if os.environ.get("STAT_TLS") == "1":
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    s = ctx.wrap_socket(s)
cmd = "stats " + sys.argv[3] if len(sys.argv) > 3 else "stats"
s.sendall(cmd.encode() + b"\r\n")
data = b""
while not data.endswith(b"END\r\n") and not data.endswith(b"ERROR\r\n"):
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
for line in data.decode().splitlines():
    f = line.split()
    if len(f) == 3 and f[1] == sys.argv[2]:
        print(f[2])
EOF
}

mcload() {
    "${PIN_LOAD[@]}" "$MCLOAD" "$@"
}

# cpu_ns PID: CPU time the server's threads have run, in nanoseconds.
# Throughput swings with whatever else the machine runs; the server's own
# CPU time per request barely does, so it is reported next to ops/s.
cpu_ns() {
    cat /proc/"$1"/task/*/schedstat 2>/dev/null |
        awk '{ s += $1 } END { printf "%.0f\n", s }'
}

# ticks PID: the server's user and system CPU ticks ("utime stime"),
# all threads; the kernel's share of a request is what no user-space
# change can take away.
ticks() {
    awk '{ sub(/.*\) /, ""); print $12, $13 }' /proc/"$1"/stat 2>/dev/null
}

# settle PID: wait (up to 60 s) until the server's threads use under 2 %
# of a core, so that the background work a preload starts (the LRU
# maintainer sorting a million new items, the crawler) is not measured
# as part of the first rounds.
settle() {
    local i c0 c1
    for i in $(seq 60); do
        c0=$(cpu_ns "$1")
        sleep 1
        c1=$(cpu_ns "$1")
        [ $((c1 - c0)) -lt 20000000 ] && return 0
    done
    return 0
}

median() {
    sort -g | awk '{ v[NR] = $1 } END {
        if (NR % 2) { print v[(NR + 1) / 2] }
        else { print (v[NR / 2] + v[NR / 2 + 1]) / 2 } }'
}
