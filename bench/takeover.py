#!/usr/bin/env python3
"""takeover.py: the pause a takeover costs a node's clients, against a
clean restart of the same node, at a given item count.

    python3 bench/takeover.py [--items 10000000] [--dir /dev/shm]
        [--value-size 32] [--rounds 3] [--json FILE]
        [--server-args "FLAGS"]
    python3 bench/takeover.py --connections 0,1000,5000,10000,18000
        [--takeovers 10] [--clients 4] [--systemd [--verb restart]]
        [--json FILE]

One memcached-pm with N items in a memory file (`-e <dir>/... -m <sized
for N> -o takeover=<socket>`), loaded by mcload (--preload, pipelined).
Then, --rounds times, side by side:

  clean restart   SIGTERM, then exec of a new node until its first
                  `version` reply with every item back: the time a
                  client of a plain restart waits at best (its port
                  refuses meanwhile);
  takeover        a probe connection does one GET at a time (mcload, one
                  connection, depth 1) while a new node started with the
                  same command takes the node over: the longest request
                  it saw is the pause; also the time from the new node's
                  exec to the old one's exit.

Every item is checked to be back after each (curr_items).  Prints each
round and the medians: the pause, the clean restart, and the pause less
the clean restart (goal: a pause at most the clean restart plus 50 ms;
at 10M items, under 100 ms).  Environment: MCPM_BIN
[build/memcached-pm/memcached-pm], MCLOAD_BIN [build/bench/mcload].
Needs about 140 bytes of --dir per item.

With --connections, the pause against the connections a node holds
instead (bench/takeover_conns.py): for each N, N idle connections each
checked after, --clients active clients, a probe, and --takeovers
takeovers in a row, by -o takeover or (--systemd) by `systemctl
reload` (or --verb restart: `systemctl restart`) of a service of
Debian's systemd, booted for the run (tests/realsystemd.py).
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from server_probe import (binaries, free_port, mcload_argv,  # noqa: E402
                          remove_server, start_timed, stats)
import takeover_conns  # noqa: E402


class Node:
    def __init__(self, args, n, tmp):
        self.port = free_port()
        self.path = os.path.join(args.dir, "mcpm-takeover-%s" %
                                 uuid.uuid4().hex[:8])
        mb = n * 140 // (1 << 20) + 256
        self.cmd = [args.mcpm, "-m", str(mb), "-e", self.path, "-o",
                    "takeover=" + os.path.join(tmp, "t.sock"), "-p",
                    str(self.port), "-U", "0", "-l", "127.0.0.1"]
        if os.geteuid() == 0:
            self.cmd += ["-u", "root"]
        self.cmd += args.server_args.split()
        self.proc = None

    def spawn(self):
        return subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)

    def start(self):
        """Seconds from exec to the first `version` reply."""
        self.proc, took = start_timed(self.cmd, self.port, "takeover.py")
        return took

    def take_over(self):
        """Seconds from the successor's exec to the old node's exit."""
        old = self.proc
        t0 = time.monotonic()
        self.proc = self.spawn()
        if old.wait(600) != 0:
            raise SystemExit("takeover.py: the old node exited %d"
                             % old.returncode)
        return time.monotonic() - t0

    def remove(self):
        remove_server(self.proc, self.path)


def mcload(args, port, *extra):
    return mcload_argv(args.mcload, port, args.value_size, *extra)


def check_items(port, n):
    got = int(stats(port)["curr_items"])
    if got != n:
        raise SystemExit("takeover.py: %d items back, not %d" % (got, n))


def round_(args, node, n):
    row = {}
    node.proc.send_signal(signal.SIGTERM)
    t0 = time.monotonic()
    node.proc.wait(600)
    row["stop_s"] = time.monotonic() - t0
    row["start_s"] = node.start()
    row["clean_restart_s"] = row["stop_s"] + row["start_s"]
    check_items(node.port, n)
    probe = subprocess.Popen(
        mcload(args, node.port, "--keys", n, "--get-ratio", 1, "-c", 1,
               "-d", 1, "--duration", 86400, "--requests", 0),
        stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)                     # the probe under way
    row["takeover_s"] = node.take_over()
    time.sleep(0.5)                     # and after
    probe.send_signal(signal.SIGINT)
    out, _ = probe.communicate(60)
    r = json.loads(out)
    if r["misses"] or r["errors"]:
        raise SystemExit("takeover.py: the probe missed or failed: %s" % r)
    row["pause_s"] = r["max_stall_ms"] / 1e3
    check_items(node.port, n)
    return row


def median(v):
    v = sorted(v)
    return v[len(v) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=10000000)
    ap.add_argument("--dir", default="/dev/shm")
    ap.add_argument("--value-size", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json")
    ap.add_argument("--server-args", default="")
    ap.add_argument("--connections",
                    help="comma-separated idle connection counts")
    ap.add_argument("--takeovers", type=int, default=10)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--systemd", action="store_true")
    ap.add_argument("--verb", choices=("reload", "restart"),
                    default="reload")
    args = ap.parse_args()
    args.mcpm, args.mcload = binaries(ROOT)
    if args.connections:
        return takeover_conns.run(args)
    with tempfile.TemporaryDirectory(prefix="mcpm-takeover-") as tmp:
        node = Node(args, args.items, tmp)
        try:
            node.start()
            load = subprocess.run(
                mcload(args, node.port, "--preload", "--requests", 1,
                       "--keys", args.items, "-c", 4, "-d", 64),
                capture_output=True, text=True)
            if load.returncode != 0:
                raise SystemExit("takeover.py: the load failed: " +
                                 load.stderr)
            check_items(node.port, args.items)
            rows = []
            for i in range(args.rounds):
                rows.append(round_(args, node, args.items))
                print("round %d: pause %.1f ms (takeover %.1f ms); clean "
                      "restart %.1f ms (stop %.1f, start %.1f)"
                      % (i + 1, rows[-1]["pause_s"] * 1e3,
                         rows[-1]["takeover_s"] * 1e3,
                         rows[-1]["clean_restart_s"] * 1e3,
                         rows[-1]["stop_s"] * 1e3,
                         rows[-1]["start_s"] * 1e3), flush=True)
        finally:
            node.remove()
    res = {k: median([r[k] for r in rows]) for k in rows[0]}
    res["items"] = args.items
    res["pause_over_clean_ms"] = (res["pause_s"] -
                                  res["clean_restart_s"]) * 1e3
    res["rounds"] = rows
    print("%d items, medians of %d rounds: pause %.1f ms, clean restart "
          "%.1f ms, pause - clean restart %+.1f ms"
          % (args.items, args.rounds, res["pause_s"] * 1e3,
             res["clean_restart_s"] * 1e3, res["pause_over_clean_ms"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
