"""A crash is not an outage: after a SIGKILL the node serves at once and
reads its memory file back while it serves (storage/recover/recover.h).

While it recovers a key may miss, but no reply is ever older than the
last acknowledged write to its key: keys set, deleted, incremented or
flushed after the start are never brought back or rolled back by the
recovery, through a crash or a stop in the middle of it too.

The recovery is slowed down here (-o recovery_threads=1, a rest after
each page) so that the tests act while it is half way; items of many
sizes spread the file over many pages, one class a page.
"""

import os
import signal

from conftest import wait_for

SIZES = (10, 100, 300, 700, 1500, 3000, 6000, 12000, 30000, 90000,
         600000)          # the last is chunked (over slab_chunk_max)
PER_SIZE = 30
SLOW = ("-o", "recovery_threads=1,recovery_pace_us=150000")


def value(key, gen, size):
    head = b"%s/%d/" % (key, gen)
    return (head * (size // len(head) + 1))[:size]


def read(c, k):
    """(value, flags) of a key, or None: a miss."""
    reply = c.get_block(b"get %s\r\n" % k)
    if reply == b"END\r\n":
        return None
    head, rest = reply.split(b"\r\n", 1)
    _, _, flags, n = head.split(b" ")
    assert rest[int(n):] == b"\r\nEND\r\n", reply[:200]
    return rest[:int(n)], int(flags)


class Model:
    """What the cache must hold: key -> (value, flags), or None: absent."""

    def __init__(self):
        self.want = {}
        for size in SIZES:
            for i in range(PER_SIZE):
                k = b"k%d-%d" % (size, i)
                self.want[k] = (value(k, 0, size), 0)
        for i in range(PER_SIZE):
            self.want[b"n%d" % i] = (b"100", 0)

    def load(self, c):
        for k, (v, f) in self.want.items():
            c.send(b"set %s %d 0 %d\r\n%s\r\n" % (k, f, len(v), v))
            assert c.readline() == b"STORED\r\n"

    def check(self, c, recovering):
        """Every key reads as the model says; while recovering a present
        key may miss, but never read as another value."""
        for k, want in self.want.items():
            got = read(c, k)
            if recovering and got is None:
                continue
            assert got == want, (k, got and got[0][:40],
                                 want and want[0][:40])


def recovering(s):
    return s.stats()["recovery_running"] == "1"


def wait_recovered(s):
    wait_for(lambda: not recovering(s), 60, "the recovery to end")


def settled(s, m):
    """Once the recovery has ended: every key as the model says, and as
    many items as it holds.  The node's stats."""
    wait_recovered(s)
    with s.conn(timeout=10) as c:
        m.check(c, recovering=False)
        st = c.stats()
    assert int(st["curr_items"]) == sum(v is not None
                                        for v in m.want.values()), st
    return st


def crash_and_start(s, server_factory, memfile, *extra):
    s.proc.kill()
    s.proc.wait()
    s2 = server_factory("-e", memfile, *SLOW, *extra, recovered=False)
    st = s2.stats()
    assert st["recovery_running"] == "1", st
    assert int(st["recovery_pages_done"]) < int(st["recovery_pages"]), st
    return s2


def loaded_and_crashed(server_factory, memfile, *extra):
    """A node on memfile (with extra flags) loaded with the model's keys,
    killed, and started again, slowed, in the middle of its recovery:
    (the node, the model)."""
    s = server_factory("-e", memfile, *extra)
    m = Model()
    with s.conn(timeout=10) as c:
        m.load(c)
    return crash_and_start(s, server_factory, memfile, *extra), m


def change(c, m):
    """While the recovery runs: sets over a third of the keys, deletes of
    another third, incr of the counters; each answer folded into the
    model (a key not read back yet answers as if missing)."""
    keys = [k for k in m.want if k.startswith(b"k")]
    for i, k in enumerate(keys):
        v, _ = m.want[k]
        if i % 3 == 0:
            nv = value(k, 1, len(v))
            c.send(b"set %s 5 0 %d\r\n%s\r\n" % (k, len(nv), nv))
            assert c.readline() == b"STORED\r\n"
            m.want[k] = (nv, 5)
        elif i % 3 == 1:
            c.send(b"delete %s\r\n" % k)
            assert c.readline() in (b"DELETED\r\n", b"NOT_FOUND\r\n")
            m.want[k] = None
    for i in range(PER_SIZE):
        k = b"n%d" % i
        got = c.req(b"incr %s 1\r\n" % k)
        if got == b"101\r\n":
            m.want[k] = (b"101", 0)
        else:
            # not read back yet: a miss, and nothing changed
            assert got == b"NOT_FOUND\r\n", got


def test_serves_at_once_and_nothing_stale(server_factory, memfile):
    s, m = loaded_and_crashed(server_factory, memfile)
    with s.conn(timeout=10) as c:
        # the recovery runs as the changes begin (crash_and_start()); the
        # stores read pages back themselves and may end it before the
        # reads, which hold either way.  That every delete met the
        # recovery shows in the count of removals noted (their log goes
        # once the recovery ends).
        change(c, m)
        m.check(c, recovering=True)
    st = settled(s, m)
    deleted = sum(v is None for v in m.want.values())
    # every delete is noted, and every set of a key not read back yet
    # (its old copy must not come back after a second crash either)
    stored = sum(v is not None and v[1] == 5 for v in m.want.values())
    assert deleted <= int(st["recovery_removals"]) <= deleted + stored, st
    assert int(st["recovery_dropped_removed"]) <= deleted + stored, st
    assert int(st["recovery_pages_done"]) == int(st["recovery_pages"]), st
    # every removal's copy is cleared in the file: the log goes
    assert not os.path.exists(memfile + ".removed")


def test_crash_during_recovery_forgets_nothing(server_factory, memfile):
    """Removals made while recovering survive a second crash in the
    middle of the recovery (<file>.removed), and so do the sets."""
    s, m = loaded_and_crashed(server_factory, memfile)
    with s.conn(timeout=10) as c:
        change(c, m)
    assert recovering(s)
    s = crash_and_start(s, server_factory, memfile)
    with s.conn(timeout=10) as c:
        m.check(c, recovering=True)
    st = settled(s, m)
    # process crashes under one boot: no item can be torn, none checked
    assert st["recovery_checksummed"] == "0"


def test_stop_during_recovery_scans_again(server_factory, memfile):
    """A clean stop before the recovery ends saves no index and leaves the
    file unclean: the next start reads it back."""
    s, m = loaded_and_crashed(server_factory, memfile)
    with s.conn(timeout=10) as c:
        change(c, m)
    s.assert_clean_stop()
    assert not os.path.exists(memfile + ".index")
    s = server_factory("-e", memfile)
    st = s.stats()
    assert st["recovery_image"] == "0"
    with s.conn(timeout=10) as c:
        m.check(c, recovering=False)


def test_flush_all_during_recovery(server_factory, memfile):
    """A flush_all while recovering covers the items not read back yet."""
    s, m = loaded_and_crashed(server_factory, memfile)
    with s.conn(timeout=10) as c:
        c.call(b"flush_all\r\n", b"OK\r\n")
        c.call(b"set after 0 0 1\r\nx\r\n", b"STORED\r\n")
    wait_recovered(s)
    with s.conn(timeout=10) as c:
        back = [k for k in m.want if read(c, k) is not None]
        assert back == [], (back, c.stats())
        assert read(c, b"after") == (b"x", 0)
        st = c.stats()
    assert st["curr_items"] == "1"
    # and after a crash too
    s.proc.kill()
    s.proc.wait()
    s = server_factory("-e", memfile)
    with s.conn(timeout=10) as c:
        back = [k for k in m.want if read(c, k) is not None]
        assert back == [], (back, c.stats())
        assert read(c, b"after") == (b"x", 0)


def test_verbose_says_when_recovery_ends(server_factory, memfile):
    s = server_factory("-e", memfile)
    with s.conn() as c:
        c.call(b"set a 0 0 1\r\na\r\n", b"STORED\r\n")
    s.proc.kill()
    s.proc.wait()
    s = server_factory("-e", memfile, "-v")
    line = "memory file %s: recovered 1 items from 1 pages in " % memfile
    wait_for(lambda: line in s.stderr(), 10, "the recovery's last line")
    s.signal(signal.SIGTERM)
    assert s.wait() == 0


def test_takeover_during_recovery(server_factory, memfile, tmp_path):
    """A successor taking over a node still reading its file back gets no
    index (it would lack the items not read back yet): it reads the file
    back itself, with the removals the old node noted."""
    s, m = loaded_and_crashed(server_factory, memfile, "-o",
                              "takeover=" + str(tmp_path / "t.sock"))
    with s.conn(timeout=10) as c:
        change(c, m)
    s.take_over()
    st = s.stats()
    assert st["recovery_image"] == "0", st
    settled(s, m)


def test_full_cache_takes_writes_while_recovering(server_factory, memfile):
    """A cache that was full when it crashed has no free chunk after the
    restart and nothing to evict until its items are read back: a set of
    a class whose pages are not read back yet reads one back itself
    (recover_help()) and is stored, never refused for memory."""
    flags = ("-e", memfile, "-m", "16")
    small, large = b"s" * 1000, b"l" * 5000
    s = server_factory(*flags)
    with s.conn(timeout=10) as c:
        # both classes hold pages (the small one the first) and evict
        n = 0
        while int(c.stats()["evictions"]) == 0:
            c.send(b"".join(b"set full%d 0 0 %d noreply\r\n%s\r\n"
                            % (n + i, len(v), v)
                            for i, v in enumerate((small, large) * 200)))
            c.sync()
            n += 400
            assert n < 200000
    s = crash_and_start(s, server_factory, memfile, "-m", "16")
    with s.conn(timeout=10) as c:
        for v in (large, small):
            for i in range(100):
                c.send(b"set new%d-%d 0 0 %d\r\n%s\r\n"
                       % (len(v), i, len(v), v))
                assert c.readline() == b"STORED\r\n", (len(v), i)
            assert read(c, b"new%d-99" % len(v)) == (v, 0)
    wait_recovered(s)


def fill_two_pages(c, fmt, value):
    """A class's first page full and its second with 100 items, under the
    keys fmt % i (the first page's first); its chunks a page."""
    c.call(b"set %s 0 0 %d\r\n%s\r\n" % (fmt % 0, len(value), value),
           b"STORED\r\n")
    clsid = max(int(k.split(":")[0]) for k in c.stats("slabs")
                if k.endswith(":total_pages"))
    per = int(c.stats("slabs")["%d:chunks_per_page" % clsid])
    for i in range(1, per + 100, 500):
        c.send(b"".join(b"set %s 0 0 %d noreply\r\n%s\r\n"
                        % (fmt % j, len(value), value)
                        for j in range(i, min(i + 500, per + 100))))
    c.sync()
    assert c.stats("slabs")["%d:total_pages" % clsid] == "2"
    return per


def test_recovery_reads_back_before_it_evicts(server_factory, memfile):
    """A file whose every page belongs to a class (each crash restart used
    to give the classes written while it recovered new pages) has, after
    the restart, no free chunk listed and no page to cut until its pages
    are read back.  A store then reads a page of its class back before it
    evicts anything: it used to evict the items read back so far, in a
    cache all but empty, while its class's free chunks waited in the
    next page (acknowledged items lost after hundreds of crashes).  Under
    an item lock too (incr copies the counter into a new chunk)."""
    flags = ("-e", memfile, "-m", "4")
    s = server_factory(*flags)
    small = b"12345678"                     # class 1 (96 bytes)
    counter = b"10000000000000000000"       # class 2, and stays there
    with s.conn(timeout=10) as c:
        per1 = fill_two_pages(c, b"a%05d", small)
        per2 = fill_two_pages(c, b"c%05d", counter)
        tiers = c.stats("tiers")
        assert tiers["pmem:total_malloced"] == tiers["pmem:limit_maxbytes"]
    s.proc.kill()
    s.proc.wait()
    # pages in file order: class 1 full, class 1, class 2 full, class 2
    s = server_factory(*flags, "-o",
                       "recovery_threads=1,recovery_pace_us=400000",
                       recovered=False)

    def pages_done(n):
        wait_for(lambda: int(s.stats()["recovery_pages_done"]) >= n, 10,
                 "%d pages read back" % n)
        assert s.stats()["recovery_pages_done"] == str(n)

    with s.conn(timeout=10) as c:
        pages_done(1)
        c.call(b"set new 0 0 8\r\n%s\r\n" % small, b"STORED\r\n")
        pages_done(3)
        c.call(b"incr c00001 1\r\n", b"10000000000000000001\r\n")
        assert c.stats()["evictions"] == "0"
    wait_recovered(s)
    with s.conn(timeout=10) as c:
        for fmt, per, v in ((b"a%05d", per1, small),
                            (b"c%05d", per2, counter)):
            for i in range(0, per + 100, 1000):
                keys = [fmt % j for j in range(i, min(i + 1000, per + 100))]
                got = c.get_block(b"get " + b" ".join(keys) + b"\r\n")
                want = b"".join(
                    b"VALUE %s 0 %d\r\n%s\r\n"
                    % (k, len(v), b"10000000000000000001"
                       if k == b"c00001" else v) for k in keys)
                assert got == want + b"END\r\n", (fmt, i)
        st = c.stats()
    assert (st["evictions"], st["curr_items"]) == \
        ("0", str(per1 + per2 + 201)), st


def test_a_store_while_recovering_reads_back_before_a_new_page(
        server_factory, memfile):
    """A class's free chunks wait in its pages not read back yet; a store
    that finds none listed reads its class's next page back before it
    takes a new page from the pool.  Each recovery's early stores used to
    cut new pages for their classes: after a few hundred crash restarts
    every page of the file belonged to some class, mostly free, and a
    class that needed a page evicted with the cache a quarter full (the
    soak, under tier_policy=cache)."""
    flags = ("-e", memfile, "-m", "16")
    s = server_factory(*flags)
    small = b"12345678"                     # class 1 (96 bytes)
    with s.conn(timeout=10) as c:
        per = fill_two_pages(c, b"a%05d", small)
    s.proc.kill()
    s.proc.wait()
    s = server_factory(*flags, "-o",
                       "recovery_threads=1,recovery_pace_us=400000",
                       recovered=False)
    with s.conn(timeout=10) as c:
        wait_for(lambda: int(c.stats()["recovery_pages_done"]) >= 1, 10,
                 "a page read back")
        c.call(b"set new 0 0 8\r\n%s\r\n" % small, b"STORED\r\n")
        st = c.stats()
        assert st["recovery_running"] == "1", "the recovery ended too soon"
        assert st["recovery_pages_done"] == "2"
        assert c.stats("slabs")["1:total_pages"] == "2"
    wait_recovered(s)
    with s.conn(timeout=10) as c:
        assert c.stats("slabs")["1:total_pages"] == "2"
        st = c.stats()
        assert (st["evictions"], st["curr_items"]) == \
            ("0", str(per + 101)), st


def test_a_store_while_recovering_outlives_a_second_crash(server_factory,
                                                          memfile):
    """A key stored while the recovery has not read it back yet leaves its
    old copy live in a page not read yet; the new one wins when the scan
    gets there.  A crash before then left both live, and the next
    recovery, reading the old copy's page first, served the old value
    for as long as the new one's page waited (the soak, after 139 crash
    restarts: a value acknowledged, then an older one served).  The store
    notes the key as a removal does (<file>.removed): every copy from
    before it is dropped, after a second crash too."""
    flags = ("-e", memfile, "-m", "64")
    slow = ("-o", "recovery_threads=1,recovery_pace_us=1000000")
    s = server_factory(*flags)
    small = b"12345678"
    with s.conn(timeout=10) as c:
        # page 0 of class 1 full, the key in page 1
        per = fill_two_pages(c, b"a%05d", small)
        c.call(b"set key 0 0 2\r\nv1\r\n", b"STORED\r\n")
    s.proc.kill()
    s.proc.wait()
    s = server_factory(*flags, *slow, recovered=False)
    v2 = b"v2" * 40                 # class 2: no page of its own waits
    with s.conn(timeout=10) as c:
        # page 1 not read back: the key misses, and its new value goes
        # to a new page of its class
        assert int(c.stats()["recovery_pages_done"]) < 2
        c.call(b"set key 0 0 80\r\n%s\r\n" % v2, b"STORED\r\n")
        assert int(c.stats()["recovery_pages_done"]) < 2
    s.proc.kill()
    s.proc.wait()
    s = server_factory(*flags, *slow, recovered=False)
    with s.conn(timeout=10) as c:
        while c.stats()["recovery_running"] == "1":
            got = c.get_block(b"get key\r\n")
            assert got in (b"END\r\n",
                           b"VALUE key 0 80\r\n%s\r\nEND\r\n" % v2), \
                (got, c.stats()["recovery_pages_done"])
        c.call(b"get key\r\n", b"VALUE key 0 80\r\n%s\r\nEND\r\n" % v2)
        assert c.stats()["curr_items"] == str(per + 100 + 1)
