"""The memkind tier: -o memory_kind=dax:<dir> | kmem.

Items live in a volatile libmemkind heap instead of malloc'd pages, sized
by -m as DRAM is.  A directory under /dev/shm (tmpfs) stands in for a DAX
filesystem; memkind makes its heap file there and unlinks it at once.
This machine has no KMEM-DAX node, so kmem is only seen refused.

Servers here name tier_policy=dram themselves: that is the policy
memory_kind serves, and it keeps conftest's MCPM_MEMORY_FILE_DIR mode
from adding a memory file, which memory_kind refuses.
"""

import os
import shutil
import tempfile

import pytest

from conftest import SHM_DIR, SHM_PREFIX

pytestmark = pytest.mark.mcpm

MB = 1024 * 1024


@pytest.fixture
def kinddir():
    """An empty directory under /dev/shm, removed after the test."""
    d = tempfile.mkdtemp(prefix=SHM_PREFIX + "memkind-", dir=SHM_DIR)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def kind_server(server_factory, kinddir, *flags):
    return server_factory("-o", "tier_policy=dram,memory_kind=dax:" + kinddir,
                          *flags)


def heap_mappings(pid, kinddir):
    """Lines of /proc/<pid>/maps backed by a file in kinddir."""
    with open("/proc/%d/maps" % pid) as f:
        return [line for line in f if kinddir + "/" in line]


def value_of(i, size):
    head = b"%08d:" % i
    return (head * (size // len(head) + 1))[:size]


def test_items_live_in_the_heap(server_factory, kinddir):
    s = kind_server(server_factory, kinddir, "-m", "16")
    sizes = [1, 100, 5000, 100000, 900000]
    with s.conn() as c:
        for i, n in enumerate(sizes):
            v = value_of(i, n)
            c.call(b"set k%d %d 0 %d\r\n%s\r\n" % (i, i, n, v), b"STORED\r\n")
        for i, n in enumerate(sizes):
            c.call(b"get k%d\r\n" % i, b"VALUE k%d %d %d\r\n%s\r\nEND\r\n"
                   % (i, i, n, value_of(i, n)))
        st = c.stats()
        tiers = c.stats("tiers")
    assert st["limit_maxbytes"] == str(16 * MB)
    assert tiers["memkind:durable"] == "0"
    assert tiers["memkind:limit_maxbytes"] == str(16 * MB)
    # The pages are memkind's: its heap file is mapped, already unlinked,
    # and the directory shows nothing.
    maps = heap_mappings(s.pid, kinddir)
    assert maps and all(line.rstrip().endswith("(deleted)") for line in maps)
    assert os.listdir(kinddir) == []
    s.assert_clean_stop()
    assert os.listdir(kinddir) == []


def test_stats_settings_shows_memory_kind(server_factory, kinddir):
    st = kind_server(server_factory, kinddir).stats("settings")
    assert st["memory_kind"] == "dax:" + kinddir
    assert st["tier_policy"] == "dram"
    assert st["memory_file"] == "(null)"
    keys = list(st)
    assert keys.index("memory_kind") == keys.index("memory_file") + 1


def test_no_memory_kind_is_null(server_factory):
    st = server_factory("-o", "tier_policy=dram").stats("settings")
    assert st["memory_kind"] == "(null)"


def test_evictions_at_the_limit(server_factory, kinddir):
    s = kind_server(server_factory, kinddir, "-m", "16")
    n = 40000                           # 40 MB of values into 16 MB
    with s.conn() as c:
        c.send(b"".join(b"set key%d 0 0 1000 noreply\r\n%s\r\n"
                        % (i, value_of(i, 1000)) for i in range(n)))
        c.sync()
        st = c.stats()
        slabs = c.stats("slabs")
        last = n - 1
        c.call(b"get key%d\r\n" % last, b"VALUE key%d 0 1000\r\n%s\r\nEND\r\n"
               % (last, value_of(last, 1000)))
        c.call(b"get key0\r\n", b"END\r\n")
    assert int(st["evictions"]) > 0
    assert int(st["bytes"]) <= 16 * MB
    assert int(slabs["total_malloced"]) <= 16 * MB
    assert int(st["curr_items"]) < 16 * MB // 1000


def test_memkind_tier_counts_like_dram(server_factory, kinddir):
    # cache_memlimit moves the limit of a tier that preallocates nothing.
    s = kind_server(server_factory, kinddir, "-m", "32")
    with s.conn() as c:
        c.call(b"cache_memlimit 24\r\n", b"OK\r\n")
        assert c.stats()["limit_maxbytes"] == str(24 * MB)
        c.call(b"set k 0 0 2\r\nhi\r\n", b"STORED\r\n")
        c.call(b"get k\r\n", b"VALUE k 0 2\r\nhi\r\nEND\r\n")


@pytest.mark.parametrize("flags, message", [
    (["-o", "memory_kind=kmem"],
     "memory_kind=kmem: this machine has no KMEM-DAX memory (memkind: "
     "Requested memory kind is not available)"),
    (["-o", "memory_kind=dax:/nonexistent/mcpm"],
     "memory_kind=dax:/nonexistent/mcpm: No such file or directory"),
    (["-o", "memory_kind=dax:/etc/hostname"],
     "memory_kind=dax:/etc/hostname: not a directory"),
    (["-o", "memory_kind=numa"],
     "memory_kind=numa: expected dax:<directory> or kmem"),
    (["-o", "memory_kind=dax:{dir}", "-m", "8"],
     "below memkind's minimum of 16 MiB"),
    (["-e", "{dir}/file", "-o", "memory_kind=dax:{dir}"],
     "memory_kind and memory_file cannot be used together yet"),
    (["-o", "memory_file={dir}/file,memory_kind=dax:{dir}"],
     "memory_kind and memory_file cannot be used together yet"),
    (["-o", "tier_policy=pmem,memory_kind=dax:{dir}"],
     "it cannot be used with tier_policy=pmem"),
    (["-L", "-o", "memory_kind=dax:{dir}"],
     "-L (preallocation) cannot be used with it"),
    (["-o", "memory_kind="], "Invalid value for memory_kind"),
])
def test_refused_at_start(run, kinddir, flags, message):
    r = run("-p", "0", *[f.replace("{dir}", kinddir) for f in flags])
    assert r.returncode == 1, r.stderr
    assert message in r.stderr.decode()
    assert os.listdir(kinddir) == []    # no memory file was made either
