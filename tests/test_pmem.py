"""The PMEM tier as item memory: -o memory_file / -e, tier_policy.

A file under /dev/shm (tmpfs) stands in for a file on a DAX filesystem; it
is mapped with libpmem just the same.  These tests check placement,
sizing, the refusals, the CAS mark across restarts and the per-tier stats;
tests/test_restart.py and tests/test_crash.py check what comes back.
"""

import os

import pytest

from conftest import wait_for

pytestmark = pytest.mark.mcpm

MB = 1024 * 1024


def test_items_live_in_the_memory_file(server_factory, memfile):
    s = server_factory("-o", "memory_file=%s,memory_file_size=8" % memfile)
    value = b"pmem-tier-" + b"%06d" % 424242 + b"z" * 980
    with s.conn() as c:
        c.call(b"set k 7 0 %d\r\n%s\r\n" % (len(value), value), b"STORED\r\n")
        c.call(b"get k\r\n", b"VALUE k 7 %d\r\n%s\r\nEND\r\n"
               % (len(value), value))
    # The file is shared-mapped: the value's bytes are in it, in a page
    # after the superblock's; the superblock (two copies, 4 KB apart) holds
    # its magic.
    with open(memfile, "rb") as f:
        data = f.read()
    assert len(data) == 9 * MB          # 8 MB of items + the superblock page
    assert b"mcpm-sb\0" in (data[:8], data[4096:4104])
    assert data.find(value) >= MB
    st = s.stats("settings")
    assert st["tier_policy"] == "pmem"
    assert st["memory_file"] == memfile
    assert st["memory_file_size"] == str(9 * MB)
    assert s.stats()["limit_maxbytes"] == str(8 * MB)


def test_e_is_sized_by_m(server_factory, memfile):
    s = server_factory("-e", memfile, "-m", "16")
    assert os.path.getsize(memfile) == 17 * MB
    assert s.stats()["limit_maxbytes"] == str(16 * MB)
    assert s.stats("settings")["tier_policy"] == "pmem"


def test_dram_policy_has_no_file(server_factory):
    st = server_factory("-o", "tier_policy=dram").stats("settings")
    assert st["tier_policy"] == "dram"
    assert st["memory_file"] == "(null)"
    assert st["memory_file_size"] == "0"


def test_eviction_inside_the_file(server_factory, memfile):
    s = server_factory("-o", "memory_file=%s,memory_file_size=2" % memfile)
    value = b"v" * 1000
    with s.conn() as c:
        batch = b"".join(b"set key%d 0 0 1000 noreply\r\n%s\r\n" % (i, value)
                         for i in range(20000))
        c.send(batch)
        c.sync()
        st = c.stats()
    assert int(st["evictions"]) > 0
    assert int(st["bytes"]) <= 2 * MB
    assert int(st["curr_items"]) < 2100


def test_file_of_another_size_is_refused(server_factory, run, memfile):
    opt = "memory_file=" + memfile
    s = server_factory("-o", opt, "-m", "16")
    s.assert_clean_stop()
    r = run("-p", "0", "-o", opt, "-m", "32")
    assert r.returncode == 1
    err = r.stderr.decode()
    assert str(17 * MB) in err and str(33 * MB) in err, err
    assert os.path.getsize(memfile) == 17 * MB     # never resized


@pytest.mark.parametrize("flag", ["-o memory_file=", "-e "])
def test_file_in_use_is_refused(server_factory, run, memfile, flag):
    """Two servers given one file: the second refuses it (and under -e
    does not start the file afresh), the first keeps its items."""
    opt = (flag + memfile).split()
    s = server_factory(*opt, "-m", "8")
    with s.conn() as c:
        c.call(b"set k 0 0 1\r\nx\r\n", b"STORED\r\n")
    inode = os.stat(memfile).st_ino
    r = run("-p", "0", *opt, "-m", "8")
    assert (r.returncode, r.stderr.decode().splitlines()[-1]) == \
        (1, "memory file %s: in use by another process" % memfile)
    assert os.stat(memfile).st_ino == inode
    s.assert_clean_stop()
    s = server_factory(*opt, "-m", "8")
    with s.conn() as c:
        c.call(b"get k\r\n", b"VALUE k 0 1\r\nx\r\nEND\r\n")


@pytest.mark.parametrize("flags, message", [
    (["-o", "tier_policy=pmem"], "tier_policy=pmem needs a memory file"),
    (["-o", "tier_policy=cache"],
     "tier_policy=cache needs a memory file: -e <file> or -o memory_file="),
    (["-o", "tier_policy=capacity"],
     "tier_policy=capacity needs a memory file"),
    (["-o", "tier_policy=disk"], "Invalid value for tier_policy"),
    (["-o", "memory_file_size=abc"], "Invalid value for memory_file_size"),
    (["-e", "/dev/shm/mcpm-never-created.pm", "-o",
      "memory_file_crash_after=5"],
     "memory_file_crash_after needs memory_file_strict"),
])
def test_policy_errors(run, flags, message):
    r = run("-p", "0", *flags)
    assert r.returncode == 1
    assert message in r.stderr.decode()


def test_dram_policy_with_a_file_is_refused(run, memfile):
    r = run("-p", "0", "-o", "memory_file=%s,tier_policy=dram" % memfile)
    assert r.returncode == 1
    assert "tier_policy=dram keeps no items in the memory file" in \
        r.stderr.decode()
    assert not os.path.exists(memfile)


@pytest.mark.parametrize("flags, field", [
    (["-I", "2m"], "item size limit (-I)"),
    (["-n", "64"], "number of slab classes"),
    (["-C"], "CAS setting"),
])
def test_restart_under_other_settings_is_refused(server_factory, run,
                                                 memfile, flags, field):
    # -o memory_file keeps what it has: a file it cannot read is refused.
    opt = "memory_file=" + memfile
    s = server_factory("-o", opt, "-m", "8")
    with s.conn() as c:
        c.call(b"set k 0 0 1\r\nx\r\n", b"STORED\r\n")
    s.assert_clean_stop()
    r = run("-p", "0", "-o", opt, "-m", "8", *flags)
    assert r.returncode == 1
    err = r.stderr.decode()
    assert field in err and "-o memory_file_reinit" in err, err
    # Asked to, it discards the file and starts empty.
    s = server_factory("-o", opt, "-m", "8", *flags,
                       "-o", "memory_file_reinit")
    with s.conn() as c:
        c.call(b"get k\r\n", b"END\r\n")
    assert "discarding its contents" in s.stderr()


NO_META = ("[restart] no metadata save file, starting with a clean "
           "cache\n")
CLEAN = "[restart] failed to validate metadata, starting with a clean cache\n"


def e_server_with_k(server_factory, memfile, *flags):
    """A -e server on memfile holding k, stopped cleanly."""
    s = server_factory("-e", memfile, "-m", "8", *flags)
    with s.conn() as c:
        c.call(b"set k 0 0 1\r\nx\r\n", b"STORED\r\n")
    s.assert_clean_stop()
    return s


@pytest.mark.parametrize("flags, key, old", [
    (["-m", "16"], "maxbytes", "8388608"),
    (["-I", "2m"], "item_size_max", "1048576"),
    (["-n", "64"], "chunk_size", "48"),
    (["-f", "1.5"], "slab_config", "1.25"),
    (["-C"], "use_cas", "true"),
    (["-o", "no_slab_reassign"], "slab_reassign", "true"),
])
def test_e_under_other_settings_starts_clean(server_factory, memfile,
                                             flags, key, old):
    # -e is memcached's restartable cache: a file written under other
    # settings is logged, as memcached logs it, and the cache starts empty.
    s = e_server_with_k(server_factory, memfile)
    assert s.stderr().startswith(NO_META), s.stderr()
    args = ["-e", memfile] + (flags if flags[0] == "-m"
                              else ["-m", "8"] + flags)
    s = server_factory(*args)
    with s.conn() as c:
        c.call(b"get k\r\n", b"END\r\n")
        c.call(b"set k 0 0 1\r\ny\r\n", b"STORED\r\n")
    assert s.stderr().startswith(
        "[restart] restart incompatible due to setting for [%s] [old value: "
        "%s]\n" % (key, old) + CLEAN), s.stderr()
    s.assert_clean_stop()
    # The metadata now names the new settings: the next start reuses it.
    s = server_factory(*args)
    with s.conn() as c:
        c.call(b"get k\r\n", b"VALUE k 0 1\r\ny\r\nEND\r\n")
    assert "[restart]" not in s.stderr(), s.stderr()


def test_e_metadata_names_the_settings(server_factory, memfile):
    s = server_factory("-e", memfile, "-m", "8", "-n", "64", "-f", "1.5")
    # Written once the file is in use, so a crash leaves it behind.
    with open(memfile + ".meta") as f:
        assert f.read() == (
            "Tmain\nKslab_config 1.50\nKmaxbytes 8388608\nKchunk_size 64\n"
            "Kitem_size_max 1048576\nKslab_chunk_size_max 524288\n"
            "Kslab_page_size 1048576\nKuse_cas true\nKslab_reassign true\n")
    s.assert_clean_stop()
    with open(memfile + ".meta") as f:
        lines = f.read().splitlines()
    assert [ln.split()[0] for ln in lines[9:]] == [
        "Kcurrent_time", "Kprocess_started", "Kstop_time"], lines


@pytest.mark.parametrize("meta, said", [
    (None, NO_META),
    ("", "[restart] corrupt metadata file\n" + CLEAN),
    ("garbage\x00\xff\n", "[restart] corrupt metadata file\n" + CLEAN),
    ("Tmain\nKmaxbytes\n", "[restart] invalid metadata line:\n\nKmaxbytes"
     "\n\n" + CLEAN),
    ("Tmain\nKmaxbytes 8388608\n", "[restart] missing some metadata "
     "lines\n" + CLEAN),
])
def test_e_without_sound_metadata_starts_clean(server_factory, memfile,
                                               meta, said):
    # Removing <file>.meta is how memcached's operators ask for a cold
    # start; an empty or garbled one is never taken as valid.
    e_server_with_k(server_factory, memfile)
    os.unlink(memfile + ".meta")
    if meta is not None:
        with open(memfile + ".meta", "w", encoding="latin-1") as f:
            f.write(meta)
    s = server_factory("-e", memfile, "-m", "8")
    with s.conn() as c:
        c.call(b"get k\r\n", b"END\r\n")
    assert s.stderr().startswith(said), s.stderr()


def test_e_keeps_items_across_a_crash(server_factory, memfile):
    # memcached writes its metadata at a graceful stop only, so a crash
    # costs it the cache; memcached-pm's is there from the start.
    s = server_factory("-e", memfile, "-m", "8")
    with s.conn() as c:
        c.call(b"set k 0 0 1\r\nx\r\n", b"STORED\r\n")
    s.signal(9)
    s.wait(10)
    s = server_factory("-e", memfile, "-m", "8")
    with s.conn() as c:
        c.call(b"get k\r\n", b"VALUE k 0 1\r\nx\r\nEND\r\n")
    assert "[restart]" not in s.stderr(), s.stderr()


def gets_cas(c, key):
    c.send(b"gets %s\r\n" % key)
    line = c.readline()
    assert line.startswith(b"VALUE "), line
    c.readline()
    assert c.readline() == b"END\r\n"
    return int(line.split()[4])


def test_cas_never_reused_after_restart(server_factory, memfile):
    s = server_factory("-e", memfile, "-m", "8")
    with s.conn() as c:
        for i in range(50):
            c.call(b"set k 0 0 1\r\nx\r\n", b"STORED\r\n")
        before = gets_cas(c, b"k")
    s.assert_clean_stop()
    s = server_factory("-e", memfile, "-m", "8")
    with s.conn() as c:
        c.call(b"set k 0 0 1\r\ny\r\n", b"STORED\r\n")
        assert gets_cas(c, b"k") > before


def test_v_says_whether_the_file_is_pmem(server_factory, memfile):
    # tmpfs is not persistent memory: libpmem says so, and a file there
    # cannot outlive a power cut, so nothing is flushed.
    s = server_factory("-v", "-o", "memory_file=%s,memory_file_size=8"
                       % memfile)
    assert ("memory file %s: not persistent memory; stores survive a "
            "process crash (flush: none)" % memfile) in s.stderr()


def tier_stats(s):
    return {k: int(v) for k, v in s.stats("tiers").items()}


def test_stats_tiers_dram(server_factory):
    s = server_factory("-o", "tier_policy=dram", "-m", "32")
    with s.conn() as c:
        c.call(b"set k 0 0 3\r\nabc\r\n", b"STORED\r\n")
        c.call(b"get k nope\r\n", b"VALUE k 0 3\r\nabc\r\nEND\r\n")
        c.call(b"touch k 100\r\n", b"TOUCHED\r\n")
        c.call(b"gat 100 k\r\n", b"VALUE k 0 3\r\nabc\r\nEND\r\n")
        st = c.stats()
        slabs = c.stats("slabs")
    t = tier_stats(s)
    assert set(t) == {"dram:" + n for n in (
        "durable", "persistent_memory", "limit_maxbytes", "total_malloced",
        "curr_items", "bytes", "hits", "evictions", "promotions",
        "demotions", "flushes", "flush_bytes", "syncs")}
    assert t["dram:durable"] == 0 and t["dram:flushes"] == 0
    assert t["dram:syncs"] == 0
    assert t["dram:limit_maxbytes"] == 32 * MB
    assert t["dram:total_malloced"] == int(slabs["total_malloced"])
    assert t["dram:curr_items"] == 1 and t["dram:bytes"] == int(st["bytes"])
    # Reads that found the item: the get and the gat, not the touch.
    assert t["dram:hits"] == 2
    assert "recovery_items" not in st       # no memory file, no recovery


def test_stats_tiers_pmem_counts_flushes(server_factory, memfile):
    """A new item is two stores made durable, a replace three, a delete
    and a touch one each.  Once a second the server's clock also notes in
    the superblock that it is alive, one store of its own: a round that
    one landed in is counted again, with new keys (at most 5 rounds; the
    counts are only ever off by that one store)."""
    s = server_factory("-e", memfile, "-m", "16")

    def one_round(n):
        k0, k1 = b"k0-%d" % n, b"k1-%d" % n
        with s.conn() as c:
            c.call(b"set %s 0 0 1\r\nx\r\n" % k0, b"STORED\r\n")
            t0 = tier_stats(s)
            c.call(b"set %s 0 0 1\r\nx\r\n" % k1, b"STORED\r\n")
            t1 = tier_stats(s)
            c.call(b"set %s 0 0 2\r\nxy\r\n" % k1, b"STORED\r\n")
            t2 = tier_stats(s)
            c.call(b"delete %s\r\n" % k0, b"DELETED\r\n")
            c.call(b"touch %s 100\r\n" % k1, b"TOUCHED\r\n")
            t3 = tier_stats(s)
            c.call(b"get %s\r\n" % k1,
                   b"VALUE %s 0 2\r\nxy\r\nEND\r\n" % k1)
        return (t1["pmem:flushes"] - t0["pmem:flushes"],
                t2["pmem:flushes"] - t1["pmem:flushes"],
                t3["pmem:flushes"] - t2["pmem:flushes"],
                t3["pmem:flush_bytes"] - t2["pmem:flush_bytes"])

    for n in range(5):
        counts = one_round(n)
        if counts == (2, 3, 2, 8 + 4):
            break
    # a new item: body, commit word; a replace: the same and the old
    # copy's kill; a delete and a touch: 8 + 4 bytes
    assert counts == (2, 3, 2, 8 + 4)
    t = tier_stats(s)
    assert t["pmem:durable"] == 1 and t["pmem:persistent_memory"] == 0
    assert t["pmem:curr_items"] == n + 1 and t["pmem:hits"] == n + 1
    assert t["pmem:limit_maxbytes"] == 16 * MB


def settled(c, stat):
    """The value of `stat` once it has stayed the same, with no page move
    running, while the server's clock ticked twice: a decision of the
    automover under way when it was turned off has then been carried
    out."""
    seen = {}

    def still():
        st = c.stats()
        now, t = (st[stat], st["slab_reassign_running"]), int(st["time"])
        if now != seen.get("value") or now[1] != "0":
            seen.update(value=now, since=t)
        return t - seen["since"] >= 2
    wait_for(still, 30, "%s to stop moving" % stat)
    return int(seen["value"][0])


def class_of(slabs, size):
    """The class whose chunks are `size` bytes, from `stats slabs`."""
    return next(int(k.split(":")[0]) for k, v in slabs.items()
                if k.endswith(":chunk_size") and v == str(size))


@pytest.mark.parametrize("where", ["piece", "header", "full tail class"])
@pytest.mark.parametrize("tiers", ["dram", "pmem"])
def test_a_page_move_keeps_a_chunked_value(server_factory, memfile, tiers,
                                          where):
    """A page moved out of a class holds a piece of a chunked value (the
    largest class's 512 KB chunks) or its header (class 1): the mover
    copies the item whole, as a store would, into free chunks of the
    same classes or a new page of a class with none (the class of the
    value's last, smaller piece, filled), and loses nothing; in the
    memory file the copy is what a SIGKILL brings back.  (It once dropped the item, counted only in
    slab_reassign_inline_reclaim: the soak's values of a megabyte went
    missing under the automover.)"""
    flags = ("-m", "64") + (("-e", memfile) if tiers == "pmem" else ())
    s = server_factory(*flags)
    values = [(b"%d" % i) * 700000 for i in range(4)]
    with s.conn() as c:
        c.call(b"slabs automove 0\r\n", b"OK\r\n")
        for i, v in enumerate(values):
            c.call(b"set big%d 0 0 %d\r\n%s\r\n" % (i, len(v), v),
                   b"STORED\r\n")
        # big0's piece and header are the first of their classes' first
        # pages, the pages a move takes; the others leave free chunks.
        for i in range(1, 4):
            c.call(b"delete big%d\r\n" % i, b"DELETED\r\n")
        if where == "full tail class":
            # big0's tail (700000 - 524288 + ... bytes) has a class of 5
            # chunks a page: fill that page with items of its size
            tail_cls = class_of(c.stats("slabs"), 202152)
            for i in range(4):
                c.call(b"set t%d 0 0 200000\r\n%s\r\n" % (i, b"t" * 200000),
                       b"STORED\r\n")
            slabs = c.stats("slabs")
            assert slabs["%d:free_chunks" % tail_cls] == "0", slabs
        if where == "header":
            # the header's page needs free chunks elsewhere in its class
            c.send(b"".join(b"set h%d 0 0 1 noreply\r\nh\r\n" % i
                            for i in range(20000)))
            c.send(b"".join(b"delete h%d noreply\r\n" % i
                            for i in range(20000)))
            c.sync()
        slabs = c.stats("slabs")
        src = 1 if where == "header" else class_of(slabs, 524288)
        assert int(slabs["%d:total_pages" % src]) >= 2
        c.call(b"slabs reassign %d 5\r\n" % src, b"OK\r\n")
        assert settled(c, "slabs_moved") == 1
        st = c.stats()
        assert st["slab_reassign_inline_reclaim"] == "0"
        assert int(st["slab_reassign_rescues"]) + \
            int(st["slab_reassign_chunk_rescues"]) >= 1
        c.call(b"get big0\r\n", b"VALUE big0 0 700000\r\n%s\r\nEND\r\n"
               % values[0])
    if tiers == "dram":
        return
    s.proc.kill()
    s.proc.wait()
    s = server_factory(*flags)
    with s.conn() as c:
        wait_for(lambda: c.stats()["recovery_running"] == "0",
                 what="the recovery to end")
        c.call(b"get big0\r\n", b"VALUE big0 0 700000\r\n%s\r\nEND\r\n"
               % values[0])
        assert c.stats()["curr_items"] == ("5" if where == "full tail class"
                                           else "1")


@pytest.mark.parametrize("stop", ["term", "kill"])
def test_restart_after_pages_moved_between_classes(server_factory, memfile,
                                                   stop):
    """The page mover hands pages of one class to another; the page table
    and the commit words it leaves must bring back exactly what was live
    before the restart."""
    flags = ("-e", memfile, "-m", "8")
    s = server_factory(*flags)
    small, large = b"s" * 100, b"L" * 20000
    with s.conn() as c:
        c.send(b"".join(b"set s%d 0 0 100 noreply\r\n%s\r\n" % (i, small)
                        for i in range(80000)))
        c.sync()
        # Every page is in the small class now; large values need the
        # mover to take pages back from it.
        for i in range(300):
            c.call(b"set L%d 0 0 20000\r\n%s\r\n" % (i, large),
                   b"STORED\r\n")
        # Stop the mover and let a move under way finish: a page it moves
        # loses its items, which must not happen while they are read back
        # below (a sanitizer build is slow enough to see it).
        c.call(b"slabs automove 0\r\n", b"OK\r\n")
        moved = settled(c, "slabs_moved")
        keys = ["s%d" % i for i in range(80000)] + \
               ["L%d" % i for i in range(300)]
        before = {}
        for i in range(0, len(keys), 100):
            chunk = keys[i:i + 100]
            c.send(b"get " + " ".join(chunk).encode() + b"\r\n")
            while True:
                line = c.readline()
                if line == b"END\r\n":
                    break
                key, n = line.split()[1], int(line.split()[3])
                before[key] = c.read_exact(n + 2)[:-2]
        items = int(c.stats()["curr_items"])
    assert moved > 0, "no page changed class"
    assert items == len(before) and any(k.startswith(b"L") for k in before)
    if stop == "kill":
        s.proc.kill()
        s.proc.wait()
    else:
        s.assert_clean_stop()
    s = server_factory(*flags)
    st = s.stats()
    assert int(st["recovery_items"]) == items
    assert st["recovery_dropped_torn"] == "0"
    with s.conn() as c:
        for key, value in list(before.items())[::97]:
            c.call(b"get %s\r\n" % key, b"VALUE %s 0 %d\r\n%s\r\nEND\r\n"
                   % (key, len(value), value))
