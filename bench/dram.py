#!/usr/bin/env python3
"""dram.py: the DRAM each item costs with every item in a memory file,
sampled as the item count grows through the hash table's growths.

    python3 bench/dram.py [--items 20000000] [--step 1000000]
        [--value-size 32] [--dir /dev/shm] [--memcached]

Loads --items keys of --value-size bytes, --step at a time (mcload
--preload, a key prefix per step), into memcached-pm with
`-o memory_file=<dir>/...,tier_policy=pmem`, and after each step prints
curr_items, the process's anonymous memory (RssAnon: what DRAM it holds
beyond the file's pages), bytes of it per item, hash_power_level, and
whether the table is growing.  Samples are also taken while a growth is
under way, when one is, and once the last one has finished.  With --memcached, Debian's memcached `-e <file>`
(its items in the file too) is loaded and sampled the same way.

Environment: MCPM_BIN [build/memcached-pm/memcached-pm], MCLOAD_BIN
[build/bench/mcload], MEMCACHED [/usr/bin/memcached].  The file is sized
for the items (160 bytes each) and removed at the end.
"""

import argparse
import os
import subprocess
import sys
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from server_probe import binaries, free_port, rss_anon, stats  # noqa: E402


def sample(name, proc, port, rows):
    st = stats(port)
    items = int(st["curr_items"])
    anon = rss_anon(proc.pid)
    row = (name, items, anon, anon / max(1, items),
           st.get("hash_power_level", "-"),
           st.get("hash_is_expanding", "-"))
    rows.append(row)
    print("%-12s items %11d  anon %8.1f MB  %6.2f B/item  hashpower %s"
          "  growing %s" % (row[0], row[1], row[2] / 1e6, row[3], row[4],
                            row[5]), flush=True)


def run(name, argv, args, rows):
    port = free_port()
    path = os.path.join(args.dir, "mcpm-dram-%s.pm" % uuid.uuid4().hex[:8])
    mb = max(64, args.items * 160 // (1 << 20))
    cmd = argv(path, mb) + ["-p", str(port), "-U", "0", "-l", "127.0.0.1"]
    if os.geteuid() == 0:
        cmd += ["-u", "root"]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                stats(port)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("dram.py: %s did not start" % name)
                time.sleep(0.05)
        loaded = 0
        step = 0
        while loaded < args.items:
            n = min(args.step, args.items - loaded)
            load = subprocess.Popen(
                [args.mcload, "--server", "127.0.0.1:%d" % port,
                 "--preload", "--requests", "1", "--keys", str(n),
                 "--key-prefix", "s%d:" % step, "--value-size",
                 str(args.value_size), "--conns", "4", "--depth", "64"],
                stdout=subprocess.DEVNULL)
            while load.poll() is None:      # a sample inside a growth
                time.sleep(0.2)
                if stats(port).get("hash_is_expanding") == "1":
                    sample(name + " (grow)", proc, port, rows)
            if load.returncode != 0:
                raise SystemExit("dram.py: mcload failed")
            loaded += n
            step += 1
            sample(name, proc, port, rows)
        # and once the table has finished growing
        deadline = time.monotonic() + 120
        while stats(port).get("hash_is_expanding") == "1" and \
                time.monotonic() < deadline:
            time.sleep(0.2)
        sample(name + " (settled)", proc, port, rows)
    finally:
        proc.terminate()
        proc.wait(60)
        for p in (path, path + ".meta", path + ".index"):
            if os.path.exists(p):
                os.unlink(p)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=20000000)
    ap.add_argument("--step", type=int, default=1000000)
    ap.add_argument("--value-size", type=int, default=32)
    ap.add_argument("--dir", default="/dev/shm")
    ap.add_argument("--memcached", action="store_true")
    args = ap.parse_args()
    mcpm, args.mcload = binaries(ROOT)
    rows = []
    run("memcached-pm", lambda path, mb: [
        mcpm, "-m", "64", "-o", "memory_file=%s,memory_file_size=%d,"
        "tier_policy=pmem" % (path, mb)], args, rows)
    if args.memcached:
        mc = os.environ.get("MEMCACHED", "/usr/bin/memcached")
        run("memcached-e", lambda path, mb: [mc, "-m", str(mb), "-e", path],
            args, rows)
    # the fixed costs (threads, buffers, the first table) weigh on the
    # first samples; the last quarter of the load is what scales
    for name in ("memcached-pm", "memcached-e"):
        at = [r[3] for r in rows if r[0].startswith(name) and
              r[1] >= args.items * 3 // 4]
        if at:
            print("%s: at most %.2f bytes of DRAM per item from %d items on"
                  % (name, max(at), args.items * 3 // 4))
    return 0


if __name__ == "__main__":
    sys.exit(main())
