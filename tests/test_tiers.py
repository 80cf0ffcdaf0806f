"""Two tiers at once: tier_policy=capacity and tier_policy=cache.

capacity: new items go to DRAM (-m); when DRAM is full its COLD tail is
demoted into the memory file instead of evicted, and a second hit on an
item in the file promotes it back.  Only what is in the file survives a
crash.

cache: every item is committed to the file as under tier_policy=pmem; a
second hit copies it into DRAM, where it is served from until DRAM needs
the room (the copy is dropped, the file's original serves again).  Every
change to a copied item reaches the file before the reply, so everything
survives a crash.

The placement is read from `stats tiers`: curr_items per tier, hits per
tier, promotions into DRAM and demotions into the file.
"""

import signal

import pytest

from conftest import wait_for

pytestmark = pytest.mark.mcpm

MB = 1024 * 1024


def tiers(s):
    return {k: int(v) for k, v in s.stats("tiers").items()}


def value_of(i, size=1000):
    head = b"value-%06d-" % i
    return head + b"v" * (size - len(head))


def fill(c, n, prefix="k", size=1000, start=0):
    c.send(b"".join(b"set %s%d %d 0 %d noreply\r\n%s\r\n"
                    % (prefix.encode(), i, i, size, value_of(i, size))
                    for i in range(start, start + n)))
    c.sync()


def check_all(c, n, prefix="k", size=1000):
    """Every key k0..k<n-1> holds its own value and flags."""
    for i in range(n):
        key = b"%s%d" % (prefix.encode(), i)
        c.call(b"get %s\r\n" % key, b"VALUE %s %d %d\r\n%s\r\nEND\r\n"
               % (key, i, size, value_of(i, size)))


def kill_and_restart(server_factory, s, flags):
    s.signal(signal.SIGKILL)
    s.wait()
    return server_factory(*flags)


def capacity(memfile, dram_mb=4, file_mb=32):
    return ("-m", str(dram_mb), "-o", "memory_file=%s,memory_file_size=%d,"
            "tier_policy=capacity" % (memfile, file_mb))


def cache(memfile, dram_mb=4, file_mb=32):
    return ("-m", str(dram_mb), "-o", "memory_file=%s,memory_file_size=%d,"
            "tier_policy=cache" % (memfile, file_mb))


# ---- capacity ------------------------------------------------------------

def test_capacity_demotes_instead_of_evicting(server_factory, memfile):
    s = server_factory(*capacity(memfile))
    with s.conn() as c:
        fill(c, 10000)              # 10 MB: more than DRAM's 4
        st = c.stats()
        t = tiers(s)
        check_all(c, 10000)
    assert int(st["evictions"]) == 0
    assert int(st["curr_items"]) == 10000
    assert t["dram:curr_items"] + t["pmem:curr_items"] == 10000
    assert t["pmem:curr_items"] > 5000
    # Everything in the file got there by demotion; nothing came back yet.
    assert t["pmem:demotions"] == t["pmem:curr_items"]
    assert t["dram:promotions"] == 0
    assert t["dram:total_malloced"] <= 4 * MB
    assert t["dram:limit_maxbytes"] == 4 * MB
    assert t["pmem:limit_maxbytes"] == 32 * MB
    assert int(st["limit_maxbytes"]) == 4 * MB      # -m: DRAM
    # Each demotion commits an item to the file: its body and live mark.
    assert t["pmem:flushes"] >= 2 * t["pmem:demotions"]
    assert t["dram:durable"] == 0 and t["pmem:durable"] == 1


def test_capacity_second_hit_promotes(server_factory, memfile):
    s = server_factory(*capacity(memfile))
    first = b"hello" * 200          # the class the fill below pushes on
    reply = b"VALUE first 42 1000 %s\r\n" + first + b"\r\nEND\r\n"
    with s.conn() as c:
        c.call(b"set first 42 0 1000\r\n%s\r\n" % first, b"STORED\r\n")
        cas = c.req(b"gets first\r\n").split()[4]
        c.read_until(b"END\r\n")
        fill(c, 10000)              # pushes `first` down into the file
        t0 = tiers(s)
        assert t0["pmem:demotions"] > 0
        # In the file: the first hit is served from there and only marks
        # it fetched; the second moves it up.
        c.call(b"gets first\r\n", reply % cas)
        t1 = tiers(s)
        assert t1["pmem:hits"] == t0["pmem:hits"] + 1
        assert t1["dram:promotions"] == t0["dram:promotions"]
        c.call(b"gets first\r\n", reply % cas)
        t2 = tiers(s)
        assert t2["dram:promotions"] == t1["dram:promotions"] + 1
        # From now on it is read from DRAM, value, flags and cas unchanged.
        c.call(b"gets first\r\n", reply % cas)
        t3 = tiers(s)
        assert t3["dram:hits"] == t2["dram:hits"] + 1
        assert t3["pmem:hits"] == t2["pmem:hits"]
        assert int(c.stats()["curr_items"]) == 10001


def test_capacity_restart_keeps_what_the_file_holds(server_factory, memfile):
    flags = capacity(memfile)
    s = server_factory(*flags)
    with s.conn() as c:
        c.call(b"set old 0 0 1000\r\n%s\r\n" % (b"o" * 1000),
               b"STORED\r\n")
        fill(c, 10000)
        # `old` was demoted into the file; a new value in DRAM replaces
        # it, and the file's copy must be dead before the reply.
        hits = tiers(s)["pmem:hits"]
        c.call(b"get old\r\n", b"VALUE old 0 1000\r\n%s\r\nEND\r\n"
               % (b"o" * 1000))
        assert tiers(s)["pmem:hits"] == hits + 1     # read from the file
        c.call(b"set old 0 0 1000\r\n%s\r\n" % (b"n" * 1000),
               b"STORED\r\n")
        in_file = tiers(s)["pmem:curr_items"]
    s = kill_and_restart(server_factory, s, flags)
    with s.conn() as c:
        st = c.stats()
        assert int(st["recovery_items"]) == in_file
        assert int(st["curr_items"]) == in_file
        # What came back is whole; `old` is the new value or nothing.
        back = 0
        for i in range(10000):
            key = b"k%d" % i
            r = c.get_block(b"get %s\r\n" % key)
            if r != b"END\r\n":
                assert r == b"VALUE %s %d 1000\r\n%s\r\nEND\r\n" % (
                    key, i, value_of(i))
                back += 1
        assert back == in_file
        assert c.get_block(b"get old\r\n") in (
            b"END\r\n",
            b"VALUE old 0 1000\r\n%s\r\nEND\r\n" % (b"n" * 1000))


# ---- cache ---------------------------------------------------------------

def test_cache_commits_everything_and_copies_hot_items(server_factory,
                                                       memfile):
    s = server_factory(*cache(memfile))
    with s.conn() as c:
        fill(c, 100)
        t0 = tiers(s)
        assert t0["pmem:curr_items"] == 100 and t0["dram:curr_items"] == 0
        c.call(b"get k7\r\n", b"VALUE k7 7 1000\r\n%s\r\nEND\r\n"
               % value_of(7))
        assert tiers(s)["dram:promotions"] == 0
        c.call(b"get k7\r\n", b"VALUE k7 7 1000\r\n%s\r\nEND\r\n"
               % value_of(7))
        t1 = tiers(s)
        assert t1["dram:promotions"] == 1
        assert t1["dram:curr_items"] == 1 and t1["pmem:curr_items"] == 99
        # A copy commits nothing: the original stays live in the file.
        assert t1["pmem:flushes"] == t0["pmem:flushes"]
        c.call(b"get k7\r\n", b"VALUE k7 7 1000\r\n%s\r\nEND\r\n"
               % value_of(7))
        t2 = tiers(s)
        assert t2["dram:hits"] == t1["dram:hits"] + 1
        assert int(c.stats()["curr_items"]) == 100


def test_cache_copies_are_dropped_when_dram_is_full(server_factory, memfile):
    s = server_factory(*cache(memfile, dram_mb=2))
    with s.conn() as c:
        fill(c, 4000)
        for _ in range(2):
            check_all(c, 4000)      # two hits each: all copied in turn
        t = tiers(s)
        st = c.stats()
        check_all(c, 4000)
    assert t["dram:promotions"] >= 4000
    assert t["pmem:demotions"] > 1000       # copies given up for room
    assert int(st["evictions"]) == 0
    assert int(st["curr_items"]) == 4000
    assert t["dram:curr_items"] + t["pmem:curr_items"] == 4000
    assert t["dram:total_malloced"] <= 2 * MB


def copy_in_dram(s, c, key):
    """Read key twice so that it is copied into DRAM; assert it was."""
    before = tiers(s)["dram:promotions"]
    c.send(b"mg %s v\r\nmg %s v\r\n" % (key, key))
    c.read_until(b"\r\n")
    c.read_until(b"\r\n")
    c.read_until(b"\r\n")
    c.read_until(b"\r\n")
    assert tiers(s)["dram:promotions"] == before + 1


def test_cache_changes_to_a_copy_survive_a_crash(server_factory, memfile):
    flags = cache(memfile)
    s = server_factory(*flags)
    with s.conn() as c:
        for key in (b"touched", b"deleted", b"replaced", b"counter",
                    b"token", b"kept"):
            c.call(b"set %s 5 1000 2\r\n10\r\n" % key, b"STORED\r\n")
            copy_in_dram(s, c, key)
        c.call(b"touch touched 0\r\n", b"TOUCHED\r\n")
        c.call(b"delete deleted\r\n", b"DELETED\r\n")
        c.call(b"set replaced 6 0 3\r\nnew\r\n", b"STORED\r\n")
        c.call(b"incr counter 5\r\n", b"15\r\n")
        # R2000 on a TTL of 1000 s wins the token once; the mark is
        # durable, so a restart must not hand out a second one.
        c.call(b"mg token R2000 v\r\n", b"VA 2 W\r\n10\r\n")
        c.call(b"mg token R2000 v\r\n", b"VA 2 Z\r\n10\r\n")
        kept_cas = c.req(b"gets kept\r\n").split()[4]
        c.read_until(b"END\r\n")
    s = kill_and_restart(server_factory, s, flags)
    with s.conn() as c:
        assert int(c.stats()["recovery_items"]) == 5
        c.call(b"mg touched t v\r\n", b"VA 2 t-1\r\n10\r\n")
        c.call(b"get deleted\r\n", b"END\r\n")
        c.call(b"get replaced\r\n", b"VALUE replaced 6 3\r\nnew\r\nEND\r\n")
        c.call(b"get counter\r\n", b"VALUE counter 5 2\r\n15\r\nEND\r\n")
        c.call(b"mg token R2000 v\r\n", b"VA 2 Z\r\n10\r\n")
        c.call(b"gets kept\r\n", b"VALUE kept 5 2 %s\r\n10\r\nEND\r\n"
               % kept_cas)


def test_cache_restart_brings_back_every_item(server_factory, memfile):
    flags = cache(memfile, dram_mb=2)
    s = server_factory(*flags)
    with s.conn() as c:
        fill(c, 3000)
        check_all(c, 3000)
        check_all(c, 3000)
        assert tiers(s)["dram:curr_items"] > 0
    s = kill_and_restart(server_factory, s, flags)
    with s.conn() as c:
        assert int(c.stats()["recovery_items"]) == 3000
        check_all(c, 3000)


def test_cache_page_mover_frees_pages_behind_copies(server_factory, memfile):
    """Originals behind DRAM copies are on no list; the page mover must
    still empty their pages (giving the originals their place back)."""
    flags = cache(memfile, dram_mb=8, file_mb=16)
    s = server_factory(*flags)
    with s.conn() as c:
        fill(c, 2000)               # three pages of one class in the file
        check_all(c, 2000)
        check_all(c, 2000)
        assert tiers(s)["dram:curr_items"] == 2000
        # Room in the class's other pages for what the first one holds
        # (k0..k884), so the mover rescues every item.
        c.send(b"".join(b"delete k%d noreply\r\n" % i
                        for i in range(1000, 2000)))
        c.sync()
        pages = {k.split(":")[0]: int(v) for k, v in c.stats("slabs").items()
                 if k.endswith(":total_pages")}
        cls = max(pages, key=pages.get)
        moved = int(c.stats()["slabs_moved"])
        c.call(b"slabs reassign %s 0\r\n" % cls.encode(), b"OK\r\n")

        def page_moved():
            st = c.stats()
            return (int(st["slabs_moved"]) > moved
                    and st["slab_reassign_running"] == "0" and st)
        st = wait_for(page_moved, what="the page move to finish")
        assert int(st["slabs_moved"]) == moved + 1
        assert int(st["slab_reassign_rescues"]) >= 885
        check_all(c, 1000)
    s = kill_and_restart(server_factory, s, flags)
    with s.conn() as c:
        assert int(c.stats()["recovery_items"]) == 1000
        check_all(c, 1000)


@pytest.mark.parametrize("policy", ["cache", "capacity"])
def test_policy_is_reported(server_factory, memfile, policy):
    s = server_factory("-m", "8", "-o", "memory_file=%s,memory_file_size=16,"
                       "tier_policy=%s" % (memfile, policy))
    st = s.stats("settings")
    assert st["tier_policy"] == policy
    assert st["memory_file_size"] == str(17 * MB)
    t = tiers(s)
    assert t["dram:limit_maxbytes"] == 8 * MB
    assert t["pmem:limit_maxbytes"] == 16 * MB
