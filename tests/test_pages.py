"""Pages between classes: the global page pool, the page mover, and a
class's first page, side by side with Debian's memcached where it has
the behaviour.

Memory is cut into 1 MB pages, each given to one size class.  When a
workload moves from one value size to another, the pages of the old
class must come back (the page mover returns a class's free pages to
slab_global_page_pool once it stops evicting) and the new class must
take them before it evicts.
"""

import struct

import pytest

from conftest import against_memcached, start_which, wait_for
from test_binary import GET, NOOP, OK, SETQ, req, set_req

# memcached-pm's side depends on where items live; memcached's does not
BOTH = [pytest.param("memcached-pm", marks=pytest.mark.storage),
        pytest.param("memcached", marks=against_memcached)]
MB = 1024 * 1024
# memcached's binary test's "big value that's > .5M and < 1M": 560 KB
BIG = b"a big value that's > .5M and < 1M. " * 16384


def set_large_values(c, prefix=b"some_key_"):
    """A hundred BIG values: -m 64 holds no more."""
    for i in range(100):
        c.call(b"set %s%d 0 0 %d\r\n%s\r\n" % (prefix, i, len(BIG), BIG),
               b"STORED\r\n")


def start_no_modern_full(which, binary):
    """A server under no_modern (no page mover) whose every page holds
    BIG values; memcached-pm's in DRAM (a file cannot grow past -m)."""
    tiers = ",tier_policy=dram" if which == "memcached-pm" else ""
    s = start_which(which, binary, "-o", "no_modern" + tiers)
    try:
        with s.conn(timeout=20) as c:
            set_large_values(c)
    except BaseException:
        s.stop()
        raise
    return s


# The pool is a tier's: memcached-pm's in DRAM and in a memory file, each
# chosen here (a pass's tier policy would mix the two tiers' pages).
TIERS = [pytest.param("memcached-pm", "dram"),
         pytest.param("memcached-pm", "pmem"),
         pytest.param("memcached", None, marks=against_memcached)]


def tier_flags(tier, memfile):
    if tier == "dram":
        return ("-o", "tier_policy=dram")
    if tier == "pmem":
        return ("-e", memfile)
    return ()


def pool(c):
    return int(c.stats()["slab_global_page_pool"])


def set_many(c, prefix, n, size):
    """n SETs of size-byte values, noreply, then a round trip so that all
    of them have run."""
    value = b"B" * size
    for i in range(1, n + 1):
        c.send(b"set %s%d 0 0 %d noreply\r\n%s\r\n" % (prefix, i, size, value))
    c.sync()


@pytest.mark.parametrize("which,tier", TIERS)
def test_pages_go_back_to_the_pool_and_another_class_takes_them(
        binary, which, tier, memfile):
    """At -m 60, 11 KB values fill the cache; deleting half of them frees
    pages the mover returns to the pool (more than 24 within 20 s, as
    memcached's own test asks), which 6 KB values then take, evicting as
    few as memcached; after flush_all more than 50 come back;
    then 4 KB values, a class that had no page, take the pool whole and
    keep more than 10,000 of 24,000 (memcached 1.6.18: about 12,400),
    the memory never past -m."""
    s = start_which(which, binary, "-m", "60", "-o",
                    "slab_reassign,slab_automove,lru_crawler,lru_maintainer,"
                    "slab_automove_window=3", *tier_flags(tier, memfile))
    try:
        with s.conn(timeout=30) as c:
            set_many(c, b"nfoo", 6000, 11000)
            assert int(c.stats()["curr_items"]) > 4000
            for i in range(2, 6001, 2):
                c.send(b"delete nfoo%d noreply\r\n" % i)
            c.sync()
            wait_for(lambda: pool(c) > 24, 20, "24 pages back in the pool")
            # 6 KB values, a class of their own, take those pages: both
            # servers keep 4,116 of 6,000 and evict 1,884 (memcached's test
            # asks for more than 2,000 and fewer than 2,200 evictions)
            before = int(c.stats()["evictions"])
            set_many(c, b"ifoo", 6000, 6000)
            hits = sum(c.get_block(b"get ifoo%d\r\n" % i) != b"END\r\n"
                       for i in range(1, 6001))
            evicted = int(c.stats()["evictions"]) - before
            assert hits > 2000 and 0 < evicted < 2200, (hits, evicted)
            c.call(b"flush_all\r\n", b"OK\r\n")
            wait_for(lambda: pool(c) > 50, 20, "50 pages back after flush")
            assert c.stats("slabs")["total_malloced"] == str(60 * MB)
            set_many(c, b"jfoo", 24000, 4096)
            st = c.stats()
            assert int(st["curr_items"]) > 10000
            assert st["slab_global_page_pool"] == "0"
            assert c.stats("slabs")["total_malloced"] == str(60 * MB)
    finally:
        s.stop()


@pytest.mark.v1645
@pytest.mark.parametrize("tier", ["dram", "pmem"])
def test_a_second_reassign_waits_behind_the_first(server_factory, tier,
                                                  memfile):
    """Two `slabs reassign` in a row both answer OK: the second waits
    for the first to finish (memcached 1.6.45's mover takes it between
    pages); a third is BUSY while both are pending, OK if the first is
    done by then, NOSPARE if both are and the source is down to one
    page.  Each one accepted moves a page."""
    s = server_factory("-m", "4", "-o", "slab_reassign,slab_automove=0",
                       *tier_flags(tier, memfile))
    with s.conn() as c:
        for i in range(60):
            c.call(b"set b%d 0 0 70000\r\n%s\r\n" % (i, b"x" * 70000),
                   b"STORED\r\n")
        for i in range(60):
            c.call(b"set s%d 0 0 20000\r\n%s\r\n" % (i, b"y" * 20000),
                   b"STORED\r\n")

        def pages(cls):
            return int(c.stats("slabs").get("%d:total_pages" % cls, 0))
        big, small = pages(31), pages(25)
        assert big >= 3
        c.call(b"slabs reassign 31 25\r\n", b"OK\r\n")
        c.call(b"slabs reassign 31 25\r\n", b"OK\r\n")
        got = c.req(b"slabs reassign 31 25\r\n")
        want = [b"OK\r\n", b"BUSY currently processing reassign request\r\n"]
        if big == 3:
            # both moves already done leave the source one page: no spare
            want.append(b"NOSPARE source class has no spare pages\r\n")
        assert got in want
        moves = 3 if got == b"OK\r\n" else 2
        wait_for(lambda: pages(25) == small + moves, what="the moves done")
        assert pages(31) == big - moves


@pytest.mark.parametrize("which", [  # memcached-pm's in DRAM: no pass
    "memcached-pm", BOTH[1]])         # setting changes it
def test_a_class_gets_its_first_page_past_the_limit(binary, which):
    """Without the page mover (no_modern), a hundred 560 KB values take
    every page of -m 64; a SET of a small value then goes to a class that
    has no page, and is stored.  (memcached sizes its pages to the class
    under no_modern, which leaves it room; it also gives a class its
    first page past -m, which is what memcached-pm does where the memory
    can grow: DRAM.)"""
    s = start_no_modern_full(which, binary)
    try:
        with s.conn(timeout=20) as c:
            for n in (1900, 2000, 50):
                c.call(b"set small%d 0 0 %d\r\n%s\r\n" % (n, n, b"x" * n),
                       b"STORED\r\n")
            c.call(b"get small1900\r\n",
                   b"VALUE small1900 0 1900\r\n%s\r\nEND\r\n" % (b"x" * 1900))
            if which == "memcached-pm":
                # the small classes' first pages (two or three), past -m
                over = (int(c.stats("slabs")["total_malloced"])
                        - int(c.stats()["limit_maxbytes"]))
                assert 0 < over <= 3 * MB
    finally:
        s.stop()


@pytest.mark.v1645
@pytest.mark.storage
def test_growing_values_after_large_ones_at_a_small_chunk_max(server_factory):
    """-o slab_chunk_max=16 (KB) at -m 48: after a hundred values of
    about 0.5 MB, SETs from 200 KB to 1 MB in 2 KB steps are all stored
    (the chunks come from the classes the large values left; a refusal
    at 215,040 bytes was the bug)."""
    s = server_factory("-m", "48", "-o", "slab_chunk_max=16")
    with s.conn(timeout=20) as c:
        set_large_values(c, b"k")
        for n in range(200 * 1024, MB, 2048):
            c.call(b"set g%d 0 0 %d\r\n%s\r\n" % (n, n, b"z" * n),
                   b"STORED\r\n")


@pytest.mark.mcpm
def test_pieces_of_large_values_are_rescued(server_factory):
    """A page of a class holding pieces of chunked values (4 KB chunks,
    11 KB values) moved to the pool: the pieces are copied into free
    chunks of their class and the values stay whole, counted as
    slab_reassign_chunk_rescues, as memcached does.  DRAM: a chain in
    the memory file is not relinked."""
    s = server_factory("-m", "60", "-o", "slab_reassign,slab_automove=0,"
                       "lru_crawler,lru_maintainer,slab_chunk_max=4,"
                       "tier_policy=dram")
    value = bytes(range(256)) * 42 + b"x" * 248          # 11000 bytes
    with s.conn(timeout=30) as c:
        for i in range(1, 5101):
            c.send(b"set nfoo%d 0 0 11000 noreply\r\n%s\r\n" % (i, value))
        c.sync()
        slabs = c.stats("slabs")
        most = max((int(v), k.split(":")[0]) for k, v in slabs.items()
                   if k.endswith(":total_pages"))[1].encode()
        for n in range(1, 4):
            c.call(b"slabs reassign %s 0\r\n" % most, b"OK\r\n")
            wait_for(lambda: c.stats()["slabs_moved"] == str(n),
                     what="move %d done" % n)
        st = c.stats()
        assert int(st["slab_global_page_pool"]) > 0
        assert int(st["slab_reassign_chunk_rescues"]) > 0
        hits = 0
        for i in range(1, 5101):
            block = c.get_block(b"get nfoo%d\r\n" % i)
            if block != b"END\r\n":
                assert block == b"VALUE nfoo%d 0 11000\r\n%s\r\nEND\r\n" % (
                    i, value)
                hits += 1
        assert hits > 4000


@pytest.mark.parametrize("which", ["memcached-pm", BOTH[1]])
def test_binary_setq_after_large_values_and_split_pairs(binary, which):
    """memcached's binary test, at no_modern: after a hundred 560 KB
    values a SETQ of 1,900 bytes is stored silently (it was answered
    'Out of memory', status 0x82); then pairs of SETQ, the pair cut in
    two writes at every byte from 2,024 to 2,096, are all stored."""
    s = start_no_modern_full(which, binary)
    try:
        with s.conn(timeout=20) as c:
            for n in (1900, 2000, 2050):
                pair = (set_req(b"test_key_%d" % n, b"x" * n, 82, op=SETQ) +
                        set_req(b"alt_test_key_%d" % n, b"blah", 82, op=SETQ))
                cuts = range(2024, min(2096, len(pair))) if len(pair) > 2024 \
                    else [len(pair)]
                for j in cuts:
                    s.send_read(c, pair[:j])
                    c.send(pair[j:])
                c.send(req(NOOP))
                head = c.read_exact(24)
                assert head[1] == NOOP, head     # no error came before it
                for key, value in ((b"test_key_%d" % n, b"x" * n),
                                   (b"alt_test_key_%d" % n, b"blah")):
                    c.send(req(GET, key))
                    got = c.read_exact(24)
                    status = struct.unpack(">H", got[6:8])[0]
                    body = c.read_exact(struct.unpack(">I", got[8:12])[0])
                    assert (got[1], status) == (GET, OK)
                    assert body == struct.pack(">I", 82) + value
    finally:
        s.stop()
