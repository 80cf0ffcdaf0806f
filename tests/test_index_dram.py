"""The DRAM the hash table costs per item, with every item in a memory file.

The bound: at most 4 bytes of anonymous memory (RssAnon: everything the
process holds beyond the file's pages) per item, at every point of the
table's growth.  The table grows a bucket at a time (storage/index/assoc.c), so
samples taken while a load runs land before, inside and after splits of
every level; the server is then killed and recovers into a presized table,
with every chunk accounted for (the workers cached free ones at the kill).

On the optimised build 10M items (bench/dram.py measures 20M and 100M); the
sanitizer build's shadow memory makes RssAnon meaningless, so there a
smaller load checks what stats say of the table alone.
"""

import json
import os
import signal
import subprocess

import pytest

from conftest import binary_has_asan, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MCLOAD_BIN = os.environ.get("MCLOAD_BIN", os.path.join(ROOT, "bench",
                                                       "mcload"))
BOUND = 4.0             # bytes of DRAM per item
TABLE_BOUND = 4 / 1.5   # the table: 4-byte buckets, 1.5 items each
# The process's fixed costs (libraries, thread stacks, the io_uring
# receive buffers: about 6 MB in all) are 0.75 bytes an item at 8M items,
# 2 at 3M: the bound is checked from 8M on.
FROM_ITEMS = 8000000


def rss_anon(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no RssAnon")


def sample(s, c, rows):
    st = c.stats()
    items = int(st["curr_items"])
    rows.append((items, rss_anon(s.pid), int(st["hash_bytes"])))


def load(s, c, nkeys, step, rows):
    """nkeys keys of 32 bytes, step at a time, sampling every 50 ms."""
    for first in range(0, nkeys, step):
        p = subprocess.Popen(
            [MCLOAD_BIN, "--server", "127.0.0.1:%d" % s.port, "--preload",
             "--requests", "1", "--keys", str(step), "--key-prefix",
             "k%d:" % first, "--value-size", "32", "--conns", "4",
             "--depth", "64"], stdout=subprocess.DEVNULL)
        try:
            while p.poll() is None:
                sample(s, c, rows)
                try:
                    p.wait(0.05)        # the step's end, or the next sample
                except subprocess.TimeoutExpired:
                    pass
        finally:
            if p.poll() is None:
                p.kill()
            assert p.wait(120) == 0, "mcload failed"
        sample(s, c, rows)


def check(rows, measure_rss, what):
    big = [r for r in rows if r[0] >= FROM_ITEMS]
    for items, anon, table in rows:
        # the table alone, at every sample: never more than its load asks
        assert table <= TABLE_BOUND * items + 4 * 65536, (what, items, table)
    if measure_rss:
        # the samples saw the table at many sizes, so that they measured
        # it growing (the inserts split buckets as they go)
        assert len({r[2] for r in big}) >= 3, (what, big[:5])
        assert len(big) >= 3, (what, rows[-3:])
        worst = max(anon / items for items, anon, _ in big)
        assert worst <= BOUND, (what, worst,
                                [(i, a) for i, a, _ in big][:20])


def settled(c, nkeys):
    st = c.stats()
    return (st["hash_is_expanding"] == "0" and
            int(st["hash_bytes"]) == nkeys * 2 // 3 * 4)


@pytest.mark.mcpm
@pytest.mark.build
def test_dram_per_item_through_growth_and_recovery(server_factory, memfile,
                                                   binary):
    assert os.access(MCLOAD_BIN, os.X_OK), "mcload not built: " + MCLOAD_BIN
    measure = not binary_has_asan(binary)
    nkeys, step = (10000000, 1000000) if measure else (400000, 100000)
    flags = ("-m", "64", "-o", "memory_file=%s,memory_file_size=%d,"
             "tier_policy=pmem" % (memfile, 1 + nkeys * 160 // (1 << 20)))
    s = server_factory(*flags)
    rows = []
    with s.conn(timeout=60) as c:
        load(s, c, nkeys, step, rows)
        wait_for(lambda: settled(c, nkeys), 60,
                 "the table to reach 1.5 items a bucket")
        sample(s, c, rows)
        assert rows[-1][0] == nkeys
    check(rows, measure, "loading")

    # SIGKILL, then recovery links every item into a table sized for them
    s.signal(signal.SIGKILL)
    s.wait()
    s2 = server_factory(*flags)
    with s2.conn(timeout=60) as c:
        after = []
        sample(s2, c, after)
        assert after[0][0] == nkeys
        assert after[0][2] <= TABLE_BOUND * nkeys + 4 * 65536
        if measure:
            assert after[0][1] / nkeys <= BOUND, after
        # no chunk lost: the workers' caches of free chunks at the kill
        # came back free, every used chunk holds an item
        sl = c.stats("slabs")
        used = sum(int(v) for k, v in sl.items()
                   if k.endswith(":used_chunks"))
        free = sum(int(v) for k, v in sl.items()
                   if k.endswith(":free_chunks"))
        total = sum(int(v) for k, v in sl.items()
                    if k.endswith(":total_chunks"))
        assert used == nkeys and used + free == total, (used, free, total)
        # every key of a step back, its value checked by mcload
        for first in (0, nkeys - step):
            res = subprocess.run(
                [MCLOAD_BIN, "--server", "127.0.0.1:%d" % s2.port, "--json",
                 "--keys", str(step), "--key-prefix", "k%d:" % first,
                 "--dist", "seq", "--get-ratio", "1", "--requests",
                 str(step), "--conns", "4", "--depth", "16"],
                capture_output=True, text=True, timeout=120)
            assert res.returncode == 0, res.stderr + res.stdout
            out = json.loads(res.stdout)
            assert (out["hits"], out["misses"], out["errors"]) == \
                (step, 0, 0), out
