#!/usr/bin/env python3
"""restart_ab.py: two builds side by side restarting one big node.

    python3 bench/restart_ab.py OLD_BIN NEW_BIN [--items 100000000]
        [--rounds 3] [--dir /dev/shm] [--server-args "FLAGS"]

One memory file (`-o tier_policy=pmem`), loaded once by NEW_BIN with
--items keys of 32 bytes (mcload --preload, 4 connections of 64
requests, as scale.py).  Then each round restarts it with each build in
turn, the order swapped every round so that neither always follows a
load or the other: a graceful stop (SIGUSR1) and a start, then SIGKILL
and a start, each timed from exec to the first `version` reply ("1st")
and until every item is back (stats recovery_running 0), with
curr_items checked after each.  The two builds must read the same file
layout.  Medians and their ratios come last.  Its restarts take the
same file and the same machine state, which scale.py's runs, a load
each, do not: their restart times moved from 0.18 s to 1.24 s between
two runs of one build.  MCLOAD_BIN [build/bench/mcload].
"""

import os
import signal
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from server_probe import (FileNode, ab_args, mcload_argv,  # noqa: E402
                          stats, wait_recovered)

COLUMNS = ("clean_1st", "clean", "kill_1st", "kill")


def restart(node, binary, sig, items):
    """Stop the node with sig and start binary on its file: (seconds to
    the first reply, seconds until every item is back)."""
    node.stop(sig)
    node.cmd[0] = binary
    first = node.start()
    back = first + wait_recovered(node.port)
    got = int(stats(node.port)["curr_items"])
    if got != items:
        sys.exit("restart_ab.py: %s has %d items after %s, not %d"
                 % (binary, got, signal.Signals(sig).name, items))
    return first, back


def main():
    args = ab_args(ROOT, 100000000)
    node = FileNode(args.new, args.dir, args.items * 140 // (1 << 20) + 256,
                    "restart", "-o", "tier_policy=pmem",
                    *args.server_args.split())
    rows = {"old": [], "new": []}
    try:
        node.start()
        subprocess.run(mcload_argv(args.mcload, node.port, 32, "--preload",
                                   "--requests", 1, "--keys", args.items,
                                   "-c", 4, "-d", 64),
                       check=True, capture_output=True)
        print("%-4s %5s" % ("", "round") +
              "".join(" %9s" % c for c in COLUMNS), flush=True)
        for r in range(args.rounds):
            order = (("old", args.old), ("new", args.new))
            for tag, binary in order[::1 if r % 2 == 0 else -1]:
                row = (restart(node, binary, signal.SIGUSR1, args.items) +
                       restart(node, binary, signal.SIGKILL, args.items))
                rows[tag].append(row)
                print("%-4s %5d" % (tag, r + 1) +
                      "".join(" %9.3f" % x for x in row), flush=True)
        node.stop(signal.SIGTERM)
    finally:
        node.remove()
    med = {t: [statistics.median(x[i] for x in v)
               for i in range(len(COLUMNS))] for t, v in rows.items()}
    for tag in ("old", "new"):
        print("%-4s %5s" % (tag, "med") +
              "".join(" %9.3f" % x for x in med[tag]))
    print("new/old: " + ", ".join(
        "%s %.2fx" % (c, n / o)
        for c, n, o in zip(COLUMNS, med["new"], med["old"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
