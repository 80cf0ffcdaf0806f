"""What a store in the memory file survives, and what it costs.

-o memory_file_durability=auto|process|power.  auto settles on the
medium: on PMEM (DAX) a flush is a cache-line write-back, so power; on
any other file (tmpfs, a disk) process: a store survives a crash of the
process, a restart, an upgrade and a takeover (the page cache keeps it)
and nothing is flushed.  A stop writes such a file to its disk whole, so
a clean reboot keeps it; after a machine crash (a start under another
boot, simulated here by a mount namespace whose boot id differs) its
pages may be old beside new, and the node discards it rather than serve
a value it cannot prove current.  power guards against a power cut with
msync, grouped per event-loop pass: each pass's changes are made durable
by one msync before any of its replies goes out, and the deaths of the
items the pass replaced by a second one after it.  `stats settings`
shows what was settled (memory_file_durability, memory_file_flush) and
`stats tiers` counts the commit points (pmem:flushes) and the msync
calls (pmem:syncs).
"""

import ctypes
import os
import random
import shutil
import signal
import socket
import subprocess
import uuid

import pytest

from conftest import free_port, new_memory_file, remove_memory_file, wait_for

# Each engine ends a pass of its loop with the group commit's sync.
pytestmark = [pytest.mark.mcpm, pytest.mark.engine]


def fs_type(path):
    return subprocess.run(["stat", "-f", "-c", "%T", path], check=True,
                          capture_output=True, text=True).stdout.strip()


@pytest.fixture
def diskfile(tmp_path):
    """A memory file path on a filesystem over a block device (not tmpfs):
    the test's own directory, or the repository's when /tmp is a tmpfs."""
    here = str(tmp_path)
    if fs_type(here) in ("tmpfs", "ramfs"):
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = new_memory_file(os.path.join(
        here, "mcpm-disk-test-%s.pm" % uuid.uuid4().hex))
    yield path
    remove_memory_file(path)


def counts(c):
    t = c.stats("tiers")
    return int(t["pmem:syncs"]), int(t["pmem:flushes"])


def settled(c):
    st = c.stats("settings")
    return st["memory_file_durability"], st["memory_file_flush"]


def set_req(key, value):
    return b"set %s 0 0 %d\r\n%s\r\n" % (key, len(value), value)


def test_tmpfs_guards_against_a_process_crash_without_a_syscall(
        server_factory, memfile):
    s = server_factory("-e", memfile)
    with s.conn() as c:
        assert settled(c) == ("process", "none")
        syncs0, flushes0 = counts(c)    # the start's note (one msync)
        for i in range(200):
            c.call(set_req(b"k%d" % i, b"v%d" % i), b"STORED\r\n")
        c.call(b"delete k0\r\n", b"DELETED\r\n")
        syncs, flushes = counts(c)
    # Every commit point is still one (prepare and publish of each set),
    # but none costs a system call.
    assert syncs == syncs0
    assert flushes - flushes0 >= 2 * 200 + 1
    s.signal(signal.SIGKILL)
    s.wait()
    r = server_factory("-e", memfile)
    with r.conn() as c:
        c.call(b"get k0\r\n", b"END\r\n")
        for i in range(1, 200):
            c.call(b"get k%d\r\n" % i, b"VALUE k%d 0 %d\r\nv%d\r\nEND\r\n"
                   % (i, len(b"v%d" % i), i))
    assert r.stats()["recovery_items"] == "199"


POWER = ("-o", "memory_file_durability=power")


def test_power_on_a_disk_file_syncs_once_per_pass(server_factory, diskfile):
    s = server_factory("-e", diskfile, *POWER)
    with s.conn() as c:
        assert settled(c) == ("power", "msync")
        c.call(set_req(b"warm", b"x"), b"STORED\r\n")   # the page is cut

        def cost(req, reply):
            before = counts(c)[0]
            c.call(req, reply)
            return counts(c)[0] - before

        # A new key: its commit, one sync.  A replace: the new item's
        # commit, then the old one's death, two; its reply waits for the
        # first only, and the second comes with the next round or, with
        # nothing more to sync, on its own within a millisecond.  A
        # delete and a touch: one.  A read: none.  Once a second the
        # server's clock syncs the superblock's note that it is alive: a
        # round that one landed in is counted again, with a new key (at
        # most 5 rounds).
        def one_round(k):
            new = cost(set_req(k, b"1"), b"STORED\r\n")
            before = counts(c)[0]
            c.call(set_req(k, b"2"), b"STORED\r\n")
            wait_for(lambda: counts(c)[0] - before >= 2, timeout=5,
                     what="the replaced item's death synced")
            replace = counts(c)[0] - before
            return (new, replace,
                    cost(b"touch %s 100\r\n" % k, b"TOUCHED\r\n"),
                    cost(b"get %s\r\n" % k,
                         b"VALUE %s 0 1\r\n2\r\nEND\r\n" % k),
                    cost(b"delete %s\r\n" % k, b"DELETED\r\n"),
                    cost(b"delete %s\r\n" % k, b"NOT_FOUND\r\n"))

        for n in range(5):
            got = one_round(b"a%d" % n)
            if got == (1, 2, 1, 0, 1, 0):
                break
        assert got == (1, 2, 1, 0, 1, 0)

        # 500 pipelined sets: the passes that read them share syncs.
        before = counts(c)[0]
        c.send(b"".join(set_req(b"p%d" % i, b"%010d" % i)
                        for i in range(500)))
        for _ in range(500):
            assert c.readline() == b"STORED\r\n"
        during = counts(c)[0] - before
    assert 1 <= during < 100, during
    s.signal(signal.SIGKILL)
    s.wait()
    r = server_factory("-e", diskfile, *POWER)
    with r.conn() as c:
        for i in range(500):
            c.call(b"get p%d\r\n" % i, b"VALUE p%d 0 10\r\n%010d\r\nEND\r\n"
                   % (i, i))


def test_noreply_changes_are_synced_by_the_pass(server_factory, diskfile):
    s = server_factory("-e", diskfile, *POWER)
    with s.conn() as c:
        c.call(set_req(b"warm", b"x"), b"STORED\r\n")
        before = counts(c)[0]
        c.send(b"set q 0 0 1 noreply\r\nq\r\n")
        c.call(b"mn\r\n", b"MN\r\n")
        assert counts(c)[0] - before >= 1
    s.signal(signal.SIGKILL)
    s.wait()
    r = server_factory("-e", diskfile, *POWER)
    with r.conn() as c:
        c.call(b"get q\r\n", b"VALUE q 0 1\r\nq\r\nEND\r\n")


def test_udp_replies_wait_for_the_sync(server_factory, diskfile):
    port = free_port()
    s = server_factory("-e", diskfile, "-U", str(port), *POWER)
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.settimeout(5)
    with s.conn() as c:
        before = counts(c)[0]
        u.sendto(b"\x00\x01\x00\x00\x00\x01\x00\x00" + set_req(b"u", b"dp"),
                 ("127.0.0.1", port))
        reply, _ = u.recvfrom(2048)
        assert reply == b"\x00\x01\x00\x00\x00\x01\x00\x00STORED\r\n"
        assert counts(c)[0] - before >= 1
    u.close()
    s.signal(signal.SIGKILL)
    s.wait()
    r = server_factory("-e", diskfile, *POWER)
    with r.conn() as c:
        c.call(b"get u\r\n", b"VALUE u 0 2\r\ndp\r\nEND\r\n")


def test_power_asked_for_on_tmpfs(server_factory, memfile):
    s = server_factory("-e", memfile, "-o", "memory_file_durability=power")
    with s.conn() as c:
        assert settled(c) == ("power", "msync")
        c.call(set_req(b"a", b"1"), b"STORED\r\n")
        assert counts(c)[0] >= 1


def test_a_disk_file_guards_against_a_process_crash_by_default(
        server_factory, diskfile):
    s = server_factory("-e", diskfile)
    with s.conn() as c:
        assert settled(c) == ("process", "none")
        syncs0 = counts(c)[0]           # the start's note
        for i in range(50):
            c.call(set_req(b"k%d" % i, b"v"), b"STORED\r\n")
        assert counts(c)[0] == syncs0
    s.signal(signal.SIGKILL)
    s.wait()
    r = server_factory("-e", diskfile)
    with r.conn() as c:
        for i in range(50):
            c.call(b"get k%d\r\n" % i, b"VALUE k%d 0 1\r\nv\r\nEND\r\n" % i)


def test_the_simulator_always_models_a_power_cut(server_factory, memfile):
    s = server_factory("-e", memfile, "-o",
                       "memory_file_strict,memory_file_durability=process")
    with s.conn() as c:
        assert settled(c) == ("power", "msync")


def test_dram_has_no_memory_file_rows(server_factory):
    with server_factory("-o", "tier_policy=dram").conn() as c:
        assert settled(c) == ("(null)", "(null)")


def test_a_bad_durability_exits_1(binary):
    """As memcached exits for a bad -o value (its `goto error`)."""
    p = subprocess.run([binary, "-o", "memory_file_durability=disk"],
                       capture_output=True, text=True, timeout=10)
    assert p.returncode == 1
    assert ('Invalid value for memory_file_durability: "disk" (auto, '
            'process or power)') in p.stderr


def test_a_full_power_safe_cache_evicts_a_batch_per_sync(server_factory,
                                                         memfile):
    """An item killed in a pass's group keeps its chunk until the group
    syncs, so no new item's lines share a sync with its death.  A set
    that must evict therefore evicts a few items, syncs once and takes one
    of their chunks: a full cache still stores every set, with a sync per
    batch of evictions, not one per eviction, and a SIGKILL loses nothing
    acknowledged and tears nothing."""
    s = server_factory("-e", memfile, "-m", "8",
                       "-o", "memory_file_durability=power")
    value = b"v" * 200
    n, batch = 60000, 500
    with s.conn() as c:
        syncs0 = counts(c)[0]
        for base in range(0, n, batch):
            c.send(b"".join(set_req(b"k%d" % i, value)
                            for i in range(base, base + batch)))
            for _ in range(batch):
                assert c.readline() == b"STORED\r\n"
        evictions = int(c.stats()["evictions"])
        syncs = counts(c)[0] - syncs0
    assert evictions > n // 4, evictions
    assert syncs < evictions // 2, (syncs, evictions)
    s.signal(signal.SIGKILL)
    s.wait()
    r = server_factory("-e", memfile, "-m", "8",
                       "-o", "memory_file_durability=power")
    with r.conn() as c:
        assert c.stats()["recovery_dropped_torn"] == "0"
        for i in range(n - 100, n):
            c.call(b"get k%d\r\n" % i, b"VALUE k%d 0 200\r\n%s\r\nEND\r\n"
                   % (i, value))


# --------------------------------------------------------------------------
# A machine restart: the file under another boot
# --------------------------------------------------------------------------

CLONE_NEWNS = 0x00020000
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
PAGE = 4096
SBLOCK_PAGES = 2            # the superblock's two copies, a page each


def another_boot(tmp_path, boot=None):
    """preexec for a server that starts under another boot.  This machine
    cannot reboot inside a test; the boot id is what the node tells boots
    apart by, so the server gets a mount namespace of its own in which
    /proc/sys/kernel/random/boot_id says `boot` (default: a new one)."""
    if os.geteuid() != 0:
        pytest.skip("a mount namespace needs root")
    path = tmp_path / ("boot-%s" % uuid.uuid4().hex)
    path.write_text("%s\n" % (boot or uuid.uuid4()))
    src = str(path).encode()

    def pre():
        libc = ctypes.CDLL(None, use_errno=True)
        if (libc.unshare(CLONE_NEWNS) != 0 or
                libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE,
                           None) != 0 or
                libc.mount(src, b"/proc/sys/kernel/random/boot_id", None,
                           MS_BIND, None) != 0):
            raise OSError(ctypes.get_errno(), "another boot")
    return pre


def fill_keys(c, n, value):
    c.send(b"".join(set_req(b"k%d" % i, value) for i in range(n)))
    for _ in range(n):
        assert c.readline() == b"STORED\r\n"


def test_a_machine_crash_discards_what_was_written_without_flushes(
        server_factory, diskfile, tmp_path):
    """A process crash keeps every item; a start under another boot after
    it (a power cut, a kernel crash) cannot tell which pages reached the
    disk, so it starts empty and says so.  What it stores then is kept
    through a crash under its own boot."""
    s = server_factory("-e", diskfile)
    with s.conn() as c:
        fill_keys(c, 100, b"old")
    s.signal(signal.SIGKILL)
    s.wait()
    boot = uuid.uuid4()
    r = server_factory("-e", diskfile, preexec=another_boot(tmp_path, boot))
    with r.conn() as c:
        st = c.stats()
        assert (st["recovery_discarded_unproven"], st["curr_items"]) == \
            ("1", "0")
        c.call(b"get k0\r\n", b"END\r\n")
        c.call(set_req(b"new", b"v"), b"STORED\r\n")
    assert ("the machine restarted while it was written without flushes "
            "(memory_file_durability=process)") in r.stderr()
    r.signal(signal.SIGKILL)
    r.wait()
    again = server_factory("-e", diskfile,
                           preexec=another_boot(tmp_path, boot))
    with again.conn() as c:
        assert c.stats()["recovery_discarded_unproven"] == "0"
        c.call(b"get new\r\n", b"VALUE new 0 1\r\nv\r\nEND\r\n")


def test_a_clean_stop_keeps_every_item_through_a_machine_restart(
        server_factory, diskfile, tmp_path):
    """A stop writes the file to its disk whole (as systemd stops the
    service before a reboot): under the next boot every item is back,
    from the index the stop saved."""
    s = server_factory("-e", diskfile)
    with s.conn() as c:
        fill_keys(c, 100, b"kept")
    s.assert_clean_stop()
    r = server_factory("-e", diskfile, preexec=another_boot(tmp_path))
    with r.conn() as c:
        st = c.stats()
        assert (st["recovery_discarded_unproven"], st["curr_items"],
                st["recovery_image"]) == ("0", "100", "1")
        for i in range(100):
            c.call(b"get k%d\r\n" % i,
                   b"VALUE k%d 0 4\r\nkept\r\nEND\r\n" % i)


def test_power_keeps_every_item_through_a_machine_crash(
        server_factory, diskfile, tmp_path):
    """Under power every acknowledged store was flushed before its reply:
    after a crash under another boot each item's checksum is checked and
    every one is back."""
    s = server_factory("-e", diskfile, *POWER)
    with s.conn() as c:
        fill_keys(c, 100, b"safe")
    s.signal(signal.SIGKILL)
    s.wait()
    r = server_factory("-e", diskfile, *POWER,
                       preexec=another_boot(tmp_path))
    with r.conn() as c:
        st = c.stats()
        assert (st["recovery_discarded_unproven"], st["curr_items"],
                st["recovery_checksummed"]) == ("0", "100", "1")


def snapshot(path):
    with open(path, "rb") as f:
        return f.read()


def mixed(base, last, rng):
    """What the disk may hold after a machine crash: each page as it was
    at the last point it was known on the disk (base), or as the process
    last wrote it (last), chosen at random, and now and then a page torn
    between the two at a 512-byte sector."""
    out = bytearray(base)
    for off in range(0, len(last), PAGE):
        new = last[off:off + PAGE]
        if new == base[off:off + PAGE]:
            continue
        pick = rng.random()
        if pick < 0.45:
            out[off:off + PAGE] = new
        elif pick < 0.55:
            cut = rng.randrange(1, PAGE // 512) * 512
            out[off:off + cut] = new[:cut]
    return bytes(out)


def test_a_simulated_machine_crash_never_serves_a_stale_value(
        server_factory, diskfile, tmp_path):
    """The disk after a power cut in process mode: the pages written since
    the last point the file was known whole there, each there or not, in
    any order, some torn.  Under the next boot no value older than the
    last acknowledged one, and no deleted key, is ever served.  Trials:
    MCPM_MACHINE_CRASH_TRIALS (20; doc/PERSISTENCE.md has a run of
    thousands)."""
    trials = int(os.environ.get("MCPM_MACHINE_CRASH_TRIALS", "20"))
    rng = random.Random(5)
    n = 300
    s = server_factory("-e", diskfile, "-m", "16")
    with s.conn() as c:
        fill_keys(c, n, b"first")
    s.assert_clean_stop()               # the file whole on the disk
    on_disk = snapshot(diskfile)
    s = server_factory("-e", diskfile, "-m", "16")
    # the superblock's note is on the disk before anything is stored
    noted = snapshot(diskfile)[:SBLOCK_PAGES * PAGE]
    on_disk = noted + on_disk[len(noted):]
    want = {}
    with s.conn() as c:
        for i in range(n):
            if i % 3 == 0:
                c.call(b"delete k%d\r\n" % i, b"DELETED\r\n")
                want[i] = None
            elif i % 3 == 1:
                v = b"second-%d" % i
                c.call(set_req(b"k%d" % i, v), b"STORED\r\n")
                want[i] = v
            else:
                want[i] = b"first"
    s.signal(signal.SIGKILL)
    s.wait()
    last = snapshot(diskfile)
    boot = another_boot(tmp_path)
    for t in range(trials):
        path = new_memory_file(os.path.join(
            os.path.dirname(diskfile), "mcpm-crash-%s.pm" % uuid.uuid4().hex))
        with open(path, "wb") as f:
            f.write(mixed(on_disk, last, rng))
        shutil.copy(diskfile + ".meta", path + ".meta")     # -e's
        r = server_factory("-e", path, "-m", "16", preexec=boot)
        with r.conn() as c:
            for i in range(n):
                got = c.get_block(b"get k%d\r\n" % i)
                if got != b"END\r\n":
                    assert got == b"VALUE k%d 0 %d\r\n%s\r\nEND\r\n" % (
                        i, len(want[i] or b""), want[i] or b""), (t, i)
            assert c.stats()["recovery_discarded_unproven"] == "1", r.stderr()
        r.assert_clean_stop()
        remove_memory_file(path)


def test_a_worker_serves_others_while_a_flush_runs(server_factory, diskfile,
                                                   tmp_path):
    """Under power a worker hands its changes to the flusher thread and
    goes on: while the flush of one connection's set is held back (the
    MCPM_FLUSH_HOLD hook: a device that takes its time), another
    connection on the same worker is answered, and the set's reply waits
    until its change is durable."""
    hold = tmp_path / "hold"
    hold.write_text("")
    s = server_factory("-e", diskfile, "-t", "1", *POWER,
                       env={"MCPM_FLUSH_HOLD": str(hold)})
    with s.conn() as a, s.conn() as b:
        a.send(set_req(b"k", b"v"))
        # b sees the set done (not durable yet: a reader may, as under
        # any group commit), answered while a waits
        wait_for(lambda: b.get_block(b"get k\r\n") ==
                 b"VALUE k 0 1\r\nv\r\nEND\r\n", 10, "the set to be made")
        b.call(b"version\r\n", b"VERSION " + s.stats()["version"].encode() +
               b"\r\n")
        a.sock.setblocking(False)
        with pytest.raises(BlockingIOError):
            a.sock.recv(16)
        a.sock.setblocking(True)
        hold.unlink()
        assert a.readline() == b"STORED\r\n"
