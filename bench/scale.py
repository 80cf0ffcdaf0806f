#!/usr/bin/env python3
"""scale.py: memcached-pm at growing item counts: load rate, GET latency
while the hash table grows against outside growth, DRAM per item, clean
and SIGKILL restart times.

    python3 bench/scale.py [--items 10000000,100000000] [--dir /dev/shm]
        [--value-size 32] [--steps 10] [--json FILE]
        [--server-args "FLAGS"]

For each count N, one memcached-pm with every item in a memory file
(`-e <dir>/... -m <sized for N> -o tier_policy=pmem`, memcached's restart
file flag):

  1. 100,000 probe keys (p:<n>), then N keys of --value-size bytes in
     --steps steps, pipelined (mcload --preload, 4 connections of 64
     requests): the load rate.  The table grows all along each step (a
     bucket at a time), and a probe (one connection, one GET of a probe
     key at a time) measures GET latency throughout: "growing".
  2. After each step, once the table has settled, the same loader sets
     keys of the first step again (the same sets, no new key, no growth)
     for as long as the step took, the probe running again: "outside".
     Growth's cost is the ratio of the medians over the steps of the two
     p99.9s (goal: at most 2); growing and outside alternate so that the
     machine's own drift falls on both.
  3. RssAnon / curr_items: DRAM per item (goal: at most 4 bytes).
  4. SIGUSR1 (a graceful stop, as memcached's -e restart), start again:
     seconds from exec to the first `version` reply, and until all
     N + 100,000 items are back (after a crash the node serves while it
     reads its file back: stats recovery_running 0); then SIGKILL and the
     same.

Prints one row per count, then the ratios between the largest and the
smallest count (goal for 10x the items: restarts at most 11x).
Environment: MCPM_BIN [build/memcached-pm/memcached-pm], MCLOAD_BIN
[build/bench/mcload].  Needs about 140 bytes of --dir per item.
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from server_probe import (FileNode, binaries, mcload_argv,  # noqa: E402
                          rss_anon, stats, wait_recovered)
PROBE_KEYS = 100000


def mcload(args, port, *extra):
    return mcload_argv(args.mcload, port, args.value_size, *extra)


def run_json(argv):
    res = subprocess.run(argv, capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit("scale.py: %s failed: %s" % (argv[0], res.stderr))
    return json.loads(res.stdout)


def probe_start(args, port):
    """GETs of probe keys, one at a time, until SIGINT."""
    return subprocess.Popen(
        mcload(args, port, "--keys", PROBE_KEYS, "--key-prefix", "p:",
               "--get-ratio", 1, "-c", 1, "-d", 1, "--duration", 86400,
               "--requests", 0),
        stdout=subprocess.PIPE, text=True)


def probe_end(p):
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(60)
    r = json.loads(out)
    if r["misses"] or r["errors"]:
        raise SystemExit("scale.py: the probe missed or failed: %s" % r)
    return r


def settle(port, deadline_s=300):
    """Wait until the table has stopped growing: not splitting, and either
    at 1.5 items a bucket (4-byte buckets) or the same size over two
    seconds (growth off: a growth starts at a clock tick, once a second).
    Its hash_bytes."""
    deadline = time.monotonic() + deadline_s
    last, since = None, time.monotonic()
    while True:
        st = stats(port)
        now = (st["hash_is_expanding"], st["hash_bytes"])
        if now != last:
            last, since = now, time.monotonic()
        fits = int(now[1]) // 4 >= int(st["curr_items"]) * 2 // 3
        if now[0] == "0" and (fits or time.monotonic() - since > 2):
            return int(now[1])
        if time.monotonic() > deadline:
            raise SystemExit("scale.py: the table did not settle")
        time.sleep(0.1)


def one(args, n):
    node = FileNode(args.mcpm, args.dir,
                    (n + PROBE_KEYS) * 140 // (1 << 20) + 256, "scale",
                    "-o", "tier_policy=pmem", *args.server_args.split())
    row = {"items": n}
    try:
        node.start()
        port = node.port
        run_json(mcload(args, port, "--preload", "--requests", 1, "--keys",
                        PROBE_KEYS, "--key-prefix", "p:", "-c", 4,
                        "-d", 64))
        total = n + PROBE_KEYS
        step = n // args.steps
        grows, outs, load_s = [], [], 0.0
        for i in range(args.steps):
            # a step of new keys: the table (and the slabs) grow
            probe = probe_start(args, port)
            load = run_json(mcload(args, port, "--preload", "--requests", 1,
                                   "--keys", step, "--key-prefix",
                                   "k%d:" % i, "-c", 4, "-d", 64))
            grows.append(probe_end(probe)["latency_us"])
            load_s += load["preload_seconds"]
            before = settle(port)
            # as long again of the same sets over existing keys: nothing
            # grows (an item being replaced is counted with its successor
            # for a moment, up to the 4 x 64 sets in flight, which may
            # split that many buckets: not a growth)
            probe = probe_start(args, port)
            run_json(mcload(args, port, "--keys", step, "--key-prefix",
                            "k0:", "--get-ratio", 0, "-c", 4, "-d", 64,
                            "--duration",
                            max(1, round(load["preload_seconds"])),
                            "--requests", 0))
            outs.append(probe_end(probe)["latency_us"])
            if int(stats(port)["hash_bytes"]) > before + 4 * 4 * 64:
                raise SystemExit("scale.py: the table grew outside growth")
        row["load_s"] = load_s
        row["load_rate"] = step * args.steps / load_s
        row["hash_bytes"] = settle(port)
        row["anon_b_per_item"] = rss_anon(node.proc.pid) / total
        for name, v in (("grow", grows), ("outside", outs)):
            for pct in ("p99", "p999"):
                row["%s_%s" % (name, pct)] = statistics.median(
                    [x[pct] for x in v])
        row["steps_p999"] = [(g["p999"], o["p999"])
                             for g, o in zip(grows, outs)]
        row["grow_vs_outside_p999"] = row["grow_p999"] / row["outside_p999"]
        for sig, name in ((signal.SIGUSR1, "clean"),
                          (signal.SIGKILL, "kill")):
            node.stop(sig)
            serving = node.start()
            row[name + "_serving_s"] = serving
            row[name + "_restart_s"] = serving + wait_recovered(port)
            got = int(stats(port)["curr_items"])
            if got != total:
                raise SystemExit("scale.py: %d items after the %s restart,"
                                 " not %d" % (got, name, total))
        row["anon_after_kill_b_per_item"] = rss_anon(node.proc.pid) / total
        node.stop(signal.SIGTERM)
    finally:
        node.remove()
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", default="10000000,100000000")
    ap.add_argument("--dir", default="/dev/shm")
    ap.add_argument("--value-size", type=int, default=32)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--json", help="also write the rows here")
    ap.add_argument("--server-args", default="",
                    help="more memcached-pm flags, e.g. \"-o hashpower=24\"")
    args = ap.parse_args()
    args.mcpm, args.mcload = binaries(ROOT)
    counts = [int(x) for x in args.items.split(",")]
    rows = []
    print("%11s %8s %10s %9s %9s %9s %6s %7s %8s %8s %8s" % (
        "items", "load_s", "load/s", "grow999", "out999", "ratio", "B/item",
        "B/item*", "clean_s", "kill_s", "kill_1st"))
    for n in counts:
        r = one(args, n)
        rows.append(r)
        print("%11d %8.1f %10.0f %9.1f %9.1f %9.2f %6.2f %7.2f %8.3f %8.3f "
              "%8.3f"
              % (n, r["load_s"], r["load_rate"], r["grow_p999"],
                 r["outside_p999"], r["grow_vs_outside_p999"],
                 r["anon_b_per_item"], r["anon_after_kill_b_per_item"],
                 r["clean_restart_s"], r["kill_restart_s"],
                 r["kill_serving_s"]), flush=True)
    print("grow999/out999: GET p99.9 (us) of the probe while the table "
          "grows / while the same sets overwrite; B/item: RssAnon / items "
          "after the load (* after the SIGKILL restart); clean_s, kill_s: "
          "exec to every item back; kill_1st: to the first reply")
    if len(rows) > 1:
        lo, hi = rows[0], rows[-1]
        x = hi["items"] / lo["items"]
        print("%gx the items: clean restart %.1fx, SIGKILL restart %.1fx, "
              "load rate %.2fx" % (
                  x, hi["clean_restart_s"] / lo["clean_restart_s"],
                  hi["kill_restart_s"] / lo["kill_restart_s"],
                  hi["load_rate"] / lo["load_rate"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
