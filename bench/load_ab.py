#!/usr/bin/env python3
"""load_ab.py: two builds side by side on one load of new keys.

    python3 bench/load_ab.py OLD_BIN NEW_BIN [--items 20000000]
        [--rounds 3] [--dir /dev/shm] [--server-args "FLAGS"]

Each round starts each build in turn (old first) on a fresh memory file
(`-o tier_policy=pmem`), loads --items new keys of 32 bytes pipelined
(mcload --preload, 4 connections of 64 requests, as scale.py) while a
probe reads 100,000 other keys one at a time, and prints the load's
seconds and the probe's p99 and p99.9.  The builds alternate so that
the machine's drift falls on both; the medians and their ratio come
last.  MCLOAD_BIN [build/bench/mcload].
"""

import json
import os
import signal
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from server_probe import FileNode, ab_args, mcload_argv  # noqa: E402

PROBE_KEYS = 100000


def one(args, binary, tag):
    node = FileNode(binary, args.dir,
                    (args.items + PROBE_KEYS) * 150 // (1 << 20) + 256, tag,
                    "-o", "tier_policy=pmem", *args.server_args.split())
    try:
        node.start()
        subprocess.run(mcload_argv(args.mcload, node.port, 32, "--preload",
                                   "--requests", 1, "--keys", PROBE_KEYS,
                                   "--key-prefix", "p:", "-c", 4, "-d", 64),
                       check=True, capture_output=True)
        probe = subprocess.Popen(
            mcload_argv(args.mcload, node.port, 32, "--keys", PROBE_KEYS,
                        "--key-prefix", "p:", "--get-ratio", 1, "-c", 1,
                        "-d", 1, "--duration", 86400, "--requests", 0),
            stdout=subprocess.PIPE, text=True)
        load = json.loads(subprocess.run(
            mcload_argv(args.mcload, node.port, 32, "--preload",
                        "--requests", 1, "--keys", args.items, "-c", 4,
                        "-d", 64),
            check=True, capture_output=True, text=True).stdout)
        probe.send_signal(signal.SIGINT)
        lat = json.loads(probe.communicate(60)[0])["latency_us"]
        node.stop(signal.SIGKILL)
    finally:
        node.remove()
    return load["preload_seconds"], lat["p99"], lat["p999"]


def main():
    args = ab_args(ROOT, 20000000)
    rows = {"old": [], "new": []}
    print("%-4s %5s %9s %8s %8s" % ("", "round", "load_s", "p99", "p99.9"))
    for r in range(args.rounds):
        for tag, binary in (("old", args.old), ("new", args.new)):
            row = one(args, binary, tag)
            rows[tag].append(row)
            print("%-4s %5d %9.2f %8.1f %8.1f" % ((tag, r + 1) + row))
            sys.stdout.flush()
    med = {t: [statistics.median([x[i] for x in v]) for i in range(3)]
           for t, v in rows.items()}
    for tag in ("old", "new"):
        print("%-4s %5s %9.2f %8.1f %8.1f" % ((tag, "med") +
                                             tuple(med[tag])))
    print("new/old: load %.2fx, p99 %.2fx, p99.9 %.2fx"
          % tuple(n / o for n, o in zip(med["new"], med["old"])))


if __name__ == "__main__":
    main()
