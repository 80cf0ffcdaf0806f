#!/usr/bin/env python3
"""flushlat.py: what one flush costs on the device under a directory.

    python3 bench/flushlat.py [--dir /var/tmp] [--count 400]

Maps a 64 MB file in the directory, as memory-file pages are, and times
the flush memcached-pm's power durability makes for a write: a store into
one page, then an msync of that page (MS_SYNC, what the flusher thread
calls), and, for comparison, a 4 KB pwrite plus fdatasync.  Prints the
median, p90 and p99 of each in milliseconds, and the rate one flush at a
time allows: the most synchronous round trips a second the device
gives, which group commit shares among all the writes that wait.
"""

import argparse
import mmap
import os
import random
import statistics
import tempfile
import time

SIZE = 64 << 20
PAGE = 4096


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


def report(name, xs):
    ms = [x * 1e3 for x in xs]
    med = statistics.median(ms)
    print("%-24s median %7.3f ms  p90 %7.3f  p99 %7.3f  (%d; %.0f a second "
          "one at a time)" % (name, med, pct(ms, 0.9), pct(ms, 0.99),
                              len(ms), 1e3 / med))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--count", type=int, default=400)
    opts = ap.parse_args()
    rng = random.Random(1)
    fd, path = tempfile.mkstemp(prefix="mcpm-flushlat-", dir=opts.dir)
    try:
        os.ftruncate(fd, SIZE)
        os.fsync(fd)
        m = mmap.mmap(fd, SIZE)
        msync, dsync = [], []
        for i in range(opts.count):
            off = rng.randrange(SIZE // PAGE) * PAGE
            t0 = time.perf_counter()
            m[off:off + 8] = i.to_bytes(8, "little")
            m.flush(off, PAGE)
            msync.append(time.perf_counter() - t0)
            off = rng.randrange(SIZE // PAGE) * PAGE
            t0 = time.perf_counter()
            os.pwrite(fd, bytes(PAGE), off)
            os.fdatasync(fd)
            dsync.append(time.perf_counter() - t0)
        m.close()
        print("flush latency in %s:" % opts.dir)
        report("store + msync a page", msync)
        report("pwrite 4 KB + fdatasync", dsync)
    finally:
        os.close(fd)
        os.unlink(path)


if __name__ == "__main__":
    main()
