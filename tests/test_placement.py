"""CPU and NUMA placement: -o worker_cpus, bg_cpus and numa_node, read
back from /proc/<pid>/task/*/status, and the read path under a hot key
that is replaced and deleted while many connections read it."""

import os
import threading

import pytest

from conftest import free_port
from test_concurrency import run_threads

pytestmark = pytest.mark.mcpm

BG_THREADS = ("mc-lrumaint", "mc-slabmaint", "mc-assocmaint",
              "mc-itemcrawler", "mc-log", "mc-stderr")


def allowed_cpus():
    return sorted(os.sched_getaffinity(0))


def cpu_text(cpus):
    """A list in cpu-list syntax, ranges folded, as the server shows it."""
    out, i = [], 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append("%d" % cpus[i] if i == j else "%d-%d" % (cpus[i], cpus[j]))
        i = j + 1
    return ",".join(out)


def threads(pid):
    """[(name, set of allowed CPUs)] of every thread of pid."""
    out = []
    for tid in sorted(os.listdir("/proc/%d/task" % pid), key=int):
        base = "/proc/%d/task/%s/" % (pid, tid)
        with open(base + "comm") as f:
            name = f.read().strip()
        with open(base + "status") as f:
            line = next(x for x in f if x.startswith("Cpus_allowed_list"))
        cpus = set()
        for part in line.split(":", 1)[1].strip().split(","):
            lo, _, hi = part.partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
        out.append((name, cpus))
    return out


def workers_of(pid):
    return [c for n, c in threads(pid) if n == "mc-worker"]


def background_of(pid):
    return {n: c for n, c in threads(pid) if n in BG_THREADS}


def test_workers_round_robin_over_the_list(server_factory):
    cpus = allowed_cpus()
    s = server_factory("-t", "5", "-o", "worker_cpus=" + cpu_text(cpus))
    # (as a multiset: thread ids need not rise with their start once the
    # machine's pids have wrapped)
    assert sorted(map(sorted, workers_of(s.pid))) == \
        sorted([cpus[i % len(cpus)]] for i in range(5))
    # background threads were not given a list: they may run anywhere
    assert all(c == set(cpus) for c in background_of(s.pid).values())
    st = s.stats("settings")
    assert st["worker_cpus"] == cpu_text(cpus)
    assert st["bg_cpus"] == "unpinned"


def test_one_cpu_for_every_worker(server_factory):
    last = allowed_cpus()[-1]
    s = server_factory("-t", "3", "-o", "worker_cpus=%d" % last)
    assert workers_of(s.pid) == [{last}] * 3


def test_background_threads_on_their_list(server_factory):
    cpus = allowed_cpus()
    s = server_factory("-t", "2", "-o", "bg_cpus=%d" % cpus[0])
    bg = background_of(s.pid)
    assert sorted(bg) == sorted(BG_THREADS)
    assert all(c == {cpus[0]} for c in bg.values())
    main = [c for n, c in threads(s.pid) if n == "memcached-pm"]
    assert main == [{cpus[0]}], "the listener runs with the background"
    # workers were not given a list: not left on the listener's CPU
    assert workers_of(s.pid) == [set(cpus)] * 2
    assert s.stats("settings")["bg_cpus"] == "%d" % cpus[0]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs")
def test_lists_with_commas_inside_one_o(server_factory):
    # -o splits at commas; a list's own commas are joined back
    a, b = allowed_cpus()[:2]
    s = server_factory("-t", "4", "-o",
                       "worker_cpus=%d,%d,bg_cpus=%d,lru_crawler" % (b, a, b))
    assert workers_of(s.pid) == [{a}, {b}, {a}, {b}]
    assert all(c == {b} for c in background_of(s.pid).values())
    st = s.stats("settings")
    assert st["worker_cpus"] == cpu_text([a, b])
    assert st["bg_cpus"] == "%d" % b
    assert st["lru_crawler"] == "yes"


def test_unpinned_by_default(server_factory):
    cpus = set(allowed_cpus())
    s = server_factory("-t", "2")
    assert all(c == cpus for _, c in threads(s.pid))
    st = s.stats("settings")
    assert (st["worker_cpus"], st["bg_cpus"], st["numa_node"]) == \
        ("unpinned", "unpinned", "-1")


def absent_cpu():
    cpus = set(allowed_cpus())
    return next(c for c in range(1024) if c not in cpus)


@pytest.mark.parametrize("opt,msg", [
    ("worker_cpus=", "worker_cpus: empty CPU list"),
    ("worker_cpus=1-0", 'worker_cpus: malformed CPU list "1-0"'),
    ("worker_cpus=0x1", 'worker_cpus: malformed CPU list "0x1"'),
    ("bg_cpus=0,,1", 'bg_cpus: malformed CPU list "0,,1"'),
    ("bg_cpus=a", 'bg_cpus: malformed CPU list "a"'),
    ("worker_cpus=0-5000", 'worker_cpus: malformed CPU list "0-5000"'),
    ("numa_node=x", 'numa_node: "x" is not a node number or "file"'),
    ("numa_node=", 'numa_node: "" is not a node number or "file"'),
])
def test_bad_lists_exit_64(run, opt, msg):
    r = run("-p", str(free_port()), "-o", opt)
    assert r.returncode == 64
    assert r.stderr.decode() == msg + "\n"


def test_a_cpu_not_present_exits_64(run):
    c = absent_cpu()
    r = run("-p", str(free_port()), "-o", "worker_cpus=%d" % c)
    assert r.returncode == 64
    assert r.stderr.decode() == (
        "worker_cpus: CPU %d is not present (this process may run on %s)\n"
        % (c, cpu_text(allowed_cpus())))


def node_count():
    d = "/sys/devices/system/node"
    return max(1, len([n for n in os.listdir(d) if n[4:].isdigit()])
               if os.path.isdir(d) else 1)


def test_a_node_not_present_exits_64(run):
    n = node_count()
    r = run("-p", str(free_port()), "-o", "numa_node=%d" % n)
    assert r.returncode == 64
    assert r.stderr.decode() == (
        "numa_node: node %d is not present (this machine has %d NUMA node%s)"
        "\n" % (n, n, "" if n == 1 else "s"))


def test_numa_node_binds_memory(server_factory):
    s = server_factory("-t", "2", "-o", "numa_node=0")
    # the slab pages and the hash table are mapped after the binding
    with open("/proc/%d/numa_maps" % s.pid) as f:
        bound = [line for line in f if " bind:0 " in line]
    assert bound, "no mapping is bound to node 0"
    assert s.stats("settings")["numa_node"] == "0"
    if node_count() == 1:
        assert ("numa_node=0: this machine has one NUMA node; memory and "
                "threads stay on it") in s.stderr()
    # without a list of their own, workers run on the node's CPUs
    with open("/sys/devices/system/node/node0/cpulist") as f:
        node_cpus = f.read().strip()
    assert s.stats("settings")["worker_cpus"] == node_cpus


def test_numa_node_of_a_memory_file_on_tmpfs(server_factory, memfile):
    s = server_factory("-e", memfile, "-o", "numa_node=file")
    assert "the machine reports no NUMA node for the memory file" in \
        s.stderr()
    st = s.stats("settings")
    assert (st["numa_node"], st["memory_file_numa_node"]) == ("-1", "-1")


def restart_with(server_factory, memfile, placement):
    """Fill a memory file, restart on it with -o `placement` without the
    index the stop saved, so that the start scans: the new server."""
    flags = ("-e", memfile, "-t", "2", "-o", placement)
    s = server_factory(*flags)
    with s.conn() as c:
        for i in range(1000):
            c.call(b"set k%d 0 0 %d\r\n%d\r\n" % (i, len(b"%d" % i), i),
                   b"STORED\r\n")
    s.stop()
    os.unlink(memfile + ".index")   # the start scans: its threads are placed
    s = server_factory(*flags)
    assert s.stats()["curr_items"] == "1000"
    with s.conn() as c:
        c.call(b"get k999\r\n", b"VALUE k999 0 3\r\n999\r\nEND\r\n")
    return s


def test_recovery_spreads_over_both_lists(server_factory, memfile):
    # recovery runs before any worker serves: one thread per CPU of the
    # two lists together
    cpus = allowed_cpus()
    s = restart_with(server_factory, memfile, "worker_cpus=%s,bg_cpus=%d"
                     % (cpu_text(cpus[:1]), cpus[-1]))
    assert s.stats()["recovery_threads"] == str(len({cpus[0], cpus[-1]}))
    assert workers_of(s.pid) == [{cpus[0]}, {cpus[0]}]


def test_recovery_on_one_cpu_list(server_factory, memfile):
    cpus = allowed_cpus()
    s = restart_with(server_factory, memfile,
                     "worker_cpus=%d,bg_cpus=%d" % (cpus[-1], cpus[-1]))
    assert s.stats()["recovery_threads"] == "1"


def test_recovery_unpinned_uses_every_cpu(server_factory, memfile):
    s = restart_with(server_factory, memfile, "lru_crawler")
    assert s.stats()["recovery_threads"] == str(len(allowed_cpus()))


# ---- the read path under a hot key replaced and deleted ----------------

READERS = 12
ROUNDS = 600


def hot_value(version):
    """Small values are copied under the lock, large ones sent from the
    item: alternate so that both paths see the churn."""
    size = 20 if version % 2 else 3000
    head = b"v%d:" % version
    return head + b"x" * (size - len(head))


@pytest.mark.storage
def test_hot_key_replaced_and_deleted_under_readers(server_factory):
    """Every reply is a whole value, never one older than the last
    acknowledged set (nor that one once its delete is acknowledged), and
    a miss only once the delete after that set has been sent."""
    s = server_factory("-t", "4")
    state = {"acked": 0, "deleted": False, "deletes_sent": 0}
    lock = threading.Lock()
    stop = threading.Event()
    bad = []

    def writer():
        with s.conn() as c:
            for k in range(1, ROUNDS + 1):
                v = hot_value(k)
                c.call(b"set hot 0 0 %d\r\n%s\r\n" % (len(v), v),
                       b"STORED\r\n")
                with lock:
                    state.update(acked=k, deleted=False)
                if k % 5 == 0:
                    with lock:
                        state["deletes_sent"] += 1
                    c.call(b"delete hot\r\n", b"DELETED\r\n")
                    with lock:
                        state["deleted"] = True
        stop.set()

    def reader():
        with s.conn() as c:
            while not stop.is_set():
                with lock:
                    before = dict(state)
                c.send(b"get hot\r\n")
                line = c.readline()
                with lock:
                    deletes_after = state["deletes_sent"]
                if line == b"END\r\n":
                    # the delete after set k is the (k / 5)-th
                    if deletes_after * 5 < before["acked"]:
                        bad.append("miss with set %d acknowledged and no "
                                   "delete sent" % before["acked"])
                    continue
                assert line.startswith(b"VALUE hot 0 "), line
                data = c.read_exact(int(line.split()[3]) + 2)[:-2]
                assert c.readline() == b"END\r\n"
                version = int(data[1:data.index(b":")])
                oldest = before["acked"] + (1 if before["deleted"] else 0)
                if data != hot_value(version):
                    bad.append("torn value of version %d" % version)
                elif version < oldest:
                    bad.append("version %d read after %d acknowledged%s"
                               % (version, before["acked"],
                                  " and deleted" if before["deleted"] else ""))

    run_threads([writer] + [reader] * READERS)
    assert not bad, bad[:5]
    st = s.stats()
    assert st["curr_items"] == "0"
    assert int(st["get_hits"]) > ROUNDS


@pytest.mark.storage
def test_hot_counter_incremented_under_readers(server_factory):
    """incr rewrites a short value in place, under the lock: a reader
    without the lock never sees a torn number, nor one older than the
    last incr acknowledged, nor one going backwards."""
    s = server_factory("-t", "4")
    acked = [0]
    stop = threading.Event()
    bad = []

    with s.conn() as c:
        c.call(b"set n 0 0 1\r\n0\r\n", b"STORED\r\n")

    def writer():
        with s.conn() as c:
            for k in range(1, 3001):
                c.call(b"incr n 1\r\n", b"%d\r\n" % k)
                acked[0] = k
        stop.set()

    def reader():
        last = 0
        with s.conn() as c:
            while not stop.is_set():
                floor = acked[0]
                c.send(b"get n\r\n")
                line = c.readline()
                assert line.startswith(b"VALUE n 0 "), line
                data = c.read_exact(int(line.split()[3]) + 2)
                assert c.readline() == b"END\r\n"
                if not data.endswith(b"\r\n") or not data[:-2].isdigit():
                    bad.append("torn value %r" % data)
                    continue
                v = int(data[:-2])
                if v < floor or v < last:
                    bad.append("read %d after %d acknowledged (last %d)"
                               % (v, floor, last))
                last = v

    run_threads([writer] + [reader] * READERS)
    assert not bad, bad[:5]
    with s.conn() as c:
        c.call(b"get n\r\n", b"VALUE n 0 4\r\n3000\r\nEND\r\n")


@pytest.mark.storage
def test_replies_without_the_lock_match_the_lock_path(server_factory):
    """Hits are read without the lock, the first two too (they mark the
    item fetched, then active, on its flags word alone); the lock path
    gives the same bytes, for get, gets, mg with its read-only flags, and
    binary GETK.  No LRU maintainer: it could move k out of the active
    state at any moment, and the count of hits read without the lock
    must be exact."""
    s = server_factory("-o", "no_lru_maintainer")
    getk = (b"\x80\x0c\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01"
            b"\x00\x00\x00\x07" + b"\x00" * 8 + b"k")
    with s.conn() as c, s.conn() as b:
        c.call(b"set k 5 0 2\r\nhi\r\n", b"STORED\r\n")
        cas = int(c.req(b"gets k\r\n").split()[4])
        assert c.read_exact(9) == b"hi\r\nEND\r\n"
        for _ in range(3):
            c.call(b"get k\r\n", b"VALUE k 5 2\r\nhi\r\nEND\r\n")
            c.call(b"gets k\r\n", b"VALUE k 5 2 %d\r\nhi\r\nEND\r\n" % cas)
            c.call(b"mg k s v f t c k h Oabc\r\n",
                   b"VA 2 s2 f5 t-1 c%d kk h1 Oabc\r\nhi\r\n" % cas)
            c.call(b"mg k v C%d\r\n" % cas, b"HD\r\n")
            c.call(b"mg k v q\r\nmn\r\n", b"VA 2\r\nhi\r\nMN\r\n")
            c.call(b"mg nope v\r\n", b"EN\r\n")
            b.send(getk)
            head = b.read_exact(24)
            assert head[:12] == (b"\x81\x0c\x00\x01\x04\x00\x00\x00"
                                 b"\x00\x00\x00\x07")
            assert int.from_bytes(head[16:24], "big") == cas
            assert b.read_exact(7) == b"\x00\x00\x00\x05khi"
    st = s.stats()
    assert (st["get_hits"], st["get_misses"]) == ("19", "3")
    # every hit was read without the lock, but under tier_policy=cache
    # the second, which copies k into DRAM (the copy keeps the mark)
    cache = s.stats("settings")["tier_policy"] == "cache"
    assert st["lockfree_hits"] == ("18" if cache else "19")


@pytest.mark.storage
def test_cas_uniques_from_per_worker_blocks(server_factory):
    """Each worker hands out CAS uniques from blocks of its own: a key's
    new unique is still above the one it replaces, whichever worker
    stores it, and no unique is handed out twice."""
    s = server_factory("-t", "4")
    conns = [s.conn() for _ in range(4)]       # one per worker, in turn
    try:
        seen, last = set(), 0
        for i in range(400):
            c = conns[i % 4]
            c.call(b"set k 0 0 1\r\nx\r\n", b"STORED\r\n")
            cas = int(c.req(b"gets k\r\n").split()[4])
            assert c.read_exact(8) == b"x\r\nEND\r\n"
            assert cas > last, "unique %d after %d" % (cas, last)
            last = cas
            conns[(i + 1) % 4].call(b"set o%d 0 0 1\r\ny\r\n" % i,
                                    b"STORED\r\n")
            other = int(conns[(i + 1) % 4].req(b"gets o%d\r\n" % i)
                        .split()[4])
            assert conns[(i + 1) % 4].read_exact(8) == b"y\r\nEND\r\n"
            assert cas not in seen and other not in seen and cas != other
            seen.update((cas, other))
    finally:
        for c in conns:
            c.close()
