"""Large values keep memory as well as memcached does (issue 17).

At the default -m 64, a run of SETs of 100 KB - 1 MB values: values over
the chunk limit (512 KB) are a header and a chain of chunks, full chunks
of the largest class and a tail in the class that fits the rest.  Room
for each chunk must be made in that chunk's own class; made in the
largest instead, the tail's class never got any, the SET failed with
SERVER_ERROR out of memory and the largest class filled with free chunks
(a third of the bytes memcached keeps).  memcached 1.6.18 stores every
one of these and holds 51.4 MB of them at the end.
"""

import random

import pytest

from conftest import server_time, wait_for

pytestmark = pytest.mark.mcpm

MB = 1024 * 1024
SETS = 600


def tiers(policy, memfile):
    if policy == "dram":
        return ("-o", "tier_policy=dram")
    return ("-e", memfile)


@pytest.mark.parametrize("policy", ["dram", "pmem"])
def test_large_values_fill_the_limit(server_factory, memfile, policy):
    s = server_factory("-m", "64", *tiers(policy, memfile))
    rng = random.Random(7)
    sizes = {}
    with s.conn() as c:
        for i in range(SETS):
            key = b"big%d" % i
            n = rng.randint(100 * 1024, MB - 512)
            c.call(b"set %s 0 0 %d\r\n%s\r\n" % (key, n, b"v" * n),
                   b"STORED\r\n")
            sizes[key] = n
        held = 0
        for key, n in sizes.items():
            if c.req(b"mg %s s\r\n" % key) == b"HD s%d\r\n" % n:
                held += n
        st = c.stats()
        slabs = c.stats("slabs")
    assert int(st["evictions"]) > 0
    # memcached keeps 51.4 MB of these; the header and chunk overheads and
    # the pages small classes hold leave about 80 % of -m for values.
    assert held >= 0.75 * 64 * MB, held
    # Every page is some class's, and the classes hold no more than -m,
    # but for each class's first page, which memcached gives past -m (it
    # holds 67 pages after this run) and DRAM can grow by; a file cannot.
    pages = sum(int(v) for k, v in slabs.items()
                if k.endswith(":total_pages"))
    classes = sum(1 for k in slabs if k.endswith(":total_pages"))
    bound = 64 + (classes if policy == "dram" else 0)
    assert pages * MB == int(slabs["total_malloced"]) <= bound * MB
    # No class hoards free chunks while the cache evicts (the bug left 65
    # free chunks, 32 pages, in the largest class).  A class in use has
    # the page it is cutting, and the tails that evictions for other
    # classes freed as a side effect: up to 10 chunks of the 8 a page of
    # class 33 holds were seen, as the maintainer's timing varies.  Two
    # pages is the bound.
    for cls in {k.split(":")[0] for k in slabs if ":" in k}:
        free = int(slabs["%s:free_chunks" % cls])
        per_page = int(slabs["%s:chunks_per_page" % cls])
        assert free <= 2 * per_page, (cls, free, per_page)


def big_class_pages(slabs, floor):
    """Pages held by the classes whose chunks are over `floor` bytes."""
    return sum(int(slabs["%s:total_pages" % cls])
               for cls in {k.split(":")[0] for k in slabs if ":" in k}
               if int(slabs["%s:chunk_size" % cls]) > floor)


@pytest.mark.parametrize("policy,automove",
                         [("dram", 1), ("pmem", 1), ("dram", 0)])
def test_automove_follows_value_sizes(server_factory, memfile, policy,
                                      automove):
    """Small values first take every page; when the values turn large,
    slabs automove (on by default, as in memcached) hands pages to the
    large classes a page at a time as they evict while the small classes
    hold the older items.  Without it the large classes keep what one
    emergency move gave them.  One tier of 16 MB (under two, the cache
    would demote instead of evicting)."""
    # a short window: memcached's automover moves between classes only
    # once it has seen a whole one (30 s by default)
    s = server_factory("-m", "16", *tiers(policy, memfile), "-o",
                       "slab_automove=%d,slab_automove_window=4" % automove)
    small = b"x" * 2000
    with s.conn(timeout=30) as c:
        c.send(b"".join(b"set s%d 0 0 2000 noreply\r\n%s\r\n" % (i, small)
                        for i in range(12000)))
        c.sync()
        assert int(c.stats()["evictions"]) > 0
        assert big_class_pages(c.stats("slabs"), 100 * 1024) == 0
        big = b"v" * (200 * 1024)
        sets = [0]

        def ten_more():
            for _ in range(10):
                c.call(b"set big%d 0 0 %d\r\n%s\r\n"
                       % (sets[0], len(big), big), b"STORED\r\n")
                sets[0] += 1
            return big_class_pages(c.stats("slabs"), 100 * 1024)
        if automove:
            wait_for(lambda: ten_more() >= 6, 40,
                     "automove to give the large classes 6 pages")
        else:
            # the mover looks once a second: give it four of them
            until = server_time(c) + 4
            wait_for(lambda: ten_more() > 1 or server_time(c) >= until,
                     40, "four seconds of the server's clock")
        pages = big_class_pages(c.stats("slabs"), 100 * 1024)
        moved = int(c.stats()["slabs_moved"])
    if automove:
        assert pages >= 6 and moved >= 5, (pages, moved)
    else:
        assert pages <= 1 and moved <= 1, (pages, moved)
