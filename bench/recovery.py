#!/usr/bin/env python3
"""recovery.py: a crash of a big node against memcached's clean restart.

    python3 bench/recovery.py [--items 10000000] [--runs 3] [--dir /dev/shm]
        [--value-size 32] [--changes 10000] [--samples 10000] [--json FILE]

Each run, one server at a time (two files of 100M items do not fit this
machine's memory together):

  memcached-pm  `-e <dir>/file`, N keys loaded (mcload --preload), SIGKILL,
                started again on the file: seconds from exec to the first
                `version` reply ("serving"), then, from the first reply on,
                --changes keys set anew and --changes loaded keys deleted;
                seconds from exec until `stats` says recovery_running 0
                ("all back").  Then every key set reads back as set, every
                key deleted is missing, --samples loaded keys picked at
                random (none of the deleted) read back, and curr_items is
                N exactly.
  memcached     Debian's `memcached -e <dir>/file`, the same N keys, a
                graceful stop (SIGUSR1: its restart file is written), then
                started again: seconds from exec to the first `version`
                reply, every item back (curr_items is N).

Prints a row per run and side, then the median and worst of the runs:
serving (goal: 0.1 s at any N) and all back against memcached's restart
(goal: at most 0.5x).  Environment: MCPM_BIN, MCLOAD_BIN as the other
benchmarks; memcached from PATH.  Needs about 140 bytes of --dir per item.
"""

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from server_probe import (FileNode, binaries, mcload_argv,  # noqa: E402
                          stats, wait_recovered)

PREFIX = "k:"


def file_node(args, binary, *extra):
    return FileNode(binary, args.dir, args.items * 140 // (1 << 20) + 256,
                    "recovery", "-t", "2", *extra)


def load(args, node):
    argv = mcload_argv(args.mcload, node.port, args.value_size, "--preload",
                       "--requests", 1, "--keys", args.items, "--key-prefix",
                       PREFIX, "-c", 4, "-d", 64)
    res = subprocess.run(argv, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit("recovery.py: mcload failed: %s" % res.stderr)
    got = int(stats(node.port)["curr_items"])
    if got != args.items:
        sys.exit("recovery.py: %d items loaded, not %d" % (got, args.items))


class Conn:
    """A pipelining text client: send many requests, read their replies."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), 30)
        self.buf = b""

    def line(self):
        while b"\r\n" not in self.buf:
            chunk = self.s.recv(1 << 20)
            if not chunk:
                raise OSError("closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def many(self, reqs, lines_of):
        """Send reqs in batches; a list of each reply's lines (a reply
        has lines_of(first line) lines)."""
        out = []
        for i in range(0, len(reqs), 500):
            self.s.sendall(b"".join(reqs[i:i + 500]))
            for _ in reqs[i:i + 500]:
                first = self.line()
                rest = [self.line() for _ in range(lines_of(first))]
                out.append([first] + rest)
        return out


def get_lines(first):
    return 2 if first.startswith(b"VALUE") else 0


def changes(args, port):
    """Right after the first reply: keys set anew and loaded keys deleted.
    Any reply but STORED, DELETED or NOT_FOUND fails the run."""
    c = Conn(port)
    sets = [b"new:%d" % i for i in range(args.changes)]
    dels = [b"%s%d" % (PREFIX.encode(), i)
            for i in random.sample(range(args.items), args.changes)]
    got = c.many([b"set %s 7 0 %d\r\n%s\r\n" % (k, len(k), k) for k in sets],
                 lambda f: 0)
    if any(r[0] != b"STORED" for r in got):
        sys.exit("recovery.py: a set failed during recovery: %s" % got[0])
    got = c.many([b"delete %s\r\n" % k for k in dels], lambda f: 0)
    if any(r[0] not in (b"DELETED", b"NOT_FOUND") for r in got):
        sys.exit("recovery.py: a delete failed during recovery")
    return c, sets, dels


def verify(args, c, sets, dels):
    """Once recovery ended: every change stands, no sampled item is lost.
    The count of wrong answers of each kind."""
    bad = {"set_wrong": 0, "deleted_back": 0, "sample_lost": 0}
    for k, r in zip(sets, c.many([b"get %s\r\n" % k for k in sets],
                                 get_lines)):
        bad["set_wrong"] += r[0] != b"VALUE %s 7 %d" % (k, len(k)) or \
            r[1] != k
    for r in c.many([b"get %s\r\n" % k for k in dels], get_lines):
        bad["deleted_back"] += r[0] != b"END"
    gone = set(dels)
    sample = [b"%s%d" % (PREFIX.encode(), i)
              for i in random.sample(range(args.items), args.samples)]
    sample = [k for k in sample if k not in gone]
    for r in c.many([b"get %s\r\n" % k for k in sample], get_lines):
        bad["sample_lost"] += not r[0].startswith(b"VALUE")
    return bad


def run_mcpm(args):
    node = file_node(args, args.mcpm, "-o", "tier_policy=pmem")
    try:
        node.start()
        load(args, node)
        node.stop(signal.SIGKILL)
        t0 = time.monotonic()
        serving = node.start()
        c, sets, dels = changes(args, node.port)
        wait_recovered(node.port)
        back = time.monotonic() - t0
        st = stats(node.port)
        bad = verify(args, c, sets, dels)
        curr = int(stats(node.port)["curr_items"])
        row = {"serving_s": serving, "all_back_s": back,
               "recovery_scan_seconds": float(st["recovery_scan_seconds"]),
               "checksummed": int(st["recovery_checksummed"]),
               "recovery_seconds": float(st["recovery_seconds"]),
               "items_recovered": int(st["recovery_items"]),
               "dropped_removed": int(st["recovery_dropped_removed"]),
               "curr_items": curr, "expected_items": args.items, **bad}
        node.stop(signal.SIGTERM)
        return row
    finally:
        node.remove()


def run_memcached(args):
    node = file_node(args, "memcached")
    try:
        node.start()
        load(args, node)
        node.stop(signal.SIGUSR1)
        # its .meta holds a stop time from a coarse clock: the next
        # second, or it starts empty
        time.sleep(max(0.0, 1.05 - (time.time() % 1.0)))
        took = node.start()
        curr = int(stats(node.port)["curr_items"])
        if curr != args.items:
            sys.exit("recovery.py: memcached came back with %d items" % curr)
        node.stop(signal.SIGTERM)
        return {"restart_s": took}
    finally:
        node.remove()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=10000000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dir", default="/dev/shm")
    ap.add_argument("--value-size", type=int, default=32)
    ap.add_argument("--changes", type=int, default=10000)
    ap.add_argument("--samples", type=int, default=10000)
    ap.add_argument("--json")
    args = ap.parse_args()
    args.mcpm, args.mcload = binaries(ROOT)
    rows = []
    print("%-4s %-12s %10s %10s %10s %s" % ("run", "server", "serving_s",
                                             "all_back_s", "restart_s",
                                             "checks"), flush=True)
    for i in range(args.runs):
        mc = run_memcached(args)
        pm = run_mcpm(args)
        rows.append({"memcached": mc, "memcached-pm": pm})
        print("%-4d %-12s %10s %10s %10.3f" % (i + 1, "memcached", "-", "-",
                                               mc["restart_s"]), flush=True)
        checks = "set_wrong %d deleted_back %d sample_lost %d curr %d/%d" % (
            pm["set_wrong"], pm["deleted_back"], pm["sample_lost"],
            pm["curr_items"], pm["expected_items"]) + \
            " (scan %.3f s, checksummed %d)" % (pm["recovery_scan_seconds"],
                                                pm["checksummed"])
        print("%-4d %-12s %10.3f %10.3f %10s %s" % (
            i + 1, "memcached-pm", pm["serving_s"], pm["all_back_s"], "-",
            checks), flush=True)
    serving = sorted(r["memcached-pm"]["serving_s"] for r in rows)
    ratios = sorted(r["memcached-pm"]["all_back_s"] /
                    r["memcached"]["restart_s"] for r in rows)
    med = len(rows) // 2
    print("%d items, %d runs: serving after SIGKILL %.3f s median, %.3f s "
          "worst (goal 0.1 s); every item back %.2fx of memcached's clean "
          "restart median, %.2fx worst (goal 0.5x)" % (
              args.items, len(rows), serving[med], serving[-1], ratios[med],
              ratios[-1]))
    wrong = sum(r["memcached-pm"][k] for r in rows
                for k in ("set_wrong", "deleted_back", "sample_lost"))
    wrong += sum(r["memcached-pm"]["curr_items"] !=
                 r["memcached-pm"]["expected_items"] for r in rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if wrong:
        sys.exit("recovery.py: %d wrong answers after recovery" % wrong)


if __name__ == "__main__":
    main()
