"""-e on a file memcached wrote: a node switched from memcached to
memcached-pm keeps its cache.

Debian's memcached (MEMCACHED_FILE_BIN to try another build, such as
1.6.45 built from its source) fills a restart file, is stopped the way
that writes its .meta (SIGUSR1), and memcached-pm is started on the same
`-e <file>`: every item memcached served just before its stop comes back
with its value, client flags, CAS and remaining TTL; expired and flushed
ones do not.  A file it cannot read whole starts a clean cache with a
reason on stderr; a kill during the conversion leaves memcached's file
as it was, or memcached-pm's whole.
"""

import base64
import hashlib
import os
import random
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from conftest import (REFERENCE_BIN, Conn, ConnClosed, Server, base_args,
                      free_port, new_memory_file, serves, wait_for,
                      wait_seconds_pass, wait_wall_clock)

pytestmark = pytest.mark.mcpm

MEMCACHED = os.environ.get("MEMCACHED_FILE_BIN", REFERENCE_BIN)
SHM = "/dev/shm"
TTL_SLACK = 3.0
LONG = 700 * 1024       # past half a 1 MB page: memcached chunks it

if not os.access(MEMCACHED, os.X_OK):
    pytest.skip("no memcached at %s" % MEMCACHED, allow_module_level=True)


def file_path():
    return new_memory_file(os.path.join(
        SHM, "mcpm-from-mc-%s" % hashlib.md5(os.urandom(8)).hexdigest()))


class Want:
    """A key as memcached holds it, read back from memcached before its
    stop: what memcached-pm must serve."""

    def __init__(self, key, binary, value, flags, cas, ttl):
        self.key, self.binary = key, binary
        self.value, self.flags, self.cas, self.ttl = value, flags, cas, ttl
        self.asked = time.time()


def wire_key(key, binary):
    return base64.b64encode(key) if binary else key


def meta_get_all(c, keys, binary=False, batch=200):
    """mg <key> v f c t for every key, pipelined: {key: (value, flags,
    cas, ttl)}, None for a miss."""
    out = {}
    for i in range(0, len(keys), batch):
        part = keys[i:i + batch]
        c.send(b"".join(b"mg %s %sv f c t\r\n" % (
            wire_key(k, binary), b"b " if binary else b"") for k in part))
        for k in part:
            line = c.readline()
            if line == b"EN\r\n":
                out[k] = None
                continue
            words = line.split()
            assert words[0] == b"VA", line
            n = int(words[1])
            data = c.read_exact(n + 2)[:-2]
            fields = {w[:1]: w[1:] for w in words[2:]}
            out[k] = (data, int(fields[b"f"]), int(fields[b"c"]),
                      int(fields[b"t"]))
    return out


def fill(c, n_small, n_long, rng):
    """Keys of every kind: small and chunked values, flags, TTLs, binary
    keys.  Returns (ascii keys, binary keys)."""
    keys, bkeys = [], []
    buf = []
    for i in range(n_small):
        key = b"k:%d" % i
        value = bytes(rng.getrandbits(8) for _ in range(rng.choice(
            (0, 1, 10, 100, 1000, 5000))))
        flags = rng.choice((0, 1, 7, 0xFFFFFFFF))
        ttl = rng.choice((0, 0, 0, 5000, 90000))
        buf.append(b"set %s %d %d %d noreply\r\n%s\r\n" % (
            key, flags, ttl, len(value), value))
        keys.append(key)
        if len(buf) == 500:
            c.send(b"".join(buf))
            buf = []
    c.send(b"".join(buf))
    for i in range(n_long):
        key = b"long:%d" % i
        value = os.urandom(LONG + i * 1000)
        c.send(b"set %s %d 0 %d\r\n%s\r\n" % (key, i, len(value), value))
        assert c.readline() == b"STORED\r\n"
        keys.append(key)
    for i in range(50):
        key = b"\x00bin\xff" + bytes([i])
        value = b"binary %d" % i
        c.send(b"ms %s %d b F%d T0\r\n%s\r\n" % (
            base64.b64encode(key), len(value), i, value))
        assert c.readline() == b"HD\r\n"
        bkeys.append(key)
    c.call(b"mn\r\n", b"MN\r\n")
    return keys, bkeys


def memcached_node(path, *flags):
    return Server(MEMCACHED, ["-e", path, "-m", "128"] + list(flags),
                  True).start()


def graceful_stop(node):
    """SIGUSR1: memcached's stop that keeps its cache, with its .meta."""
    node.proc.send_signal(signal.SIGUSR1)
    node.proc.wait(30)
    assert os.path.exists(node.flags[1] + ".meta"), node.stderr()


def snapshot(node, keys, bkeys):
    c = node.conn()
    got = meta_get_all(c, keys)
    got.update(meta_get_all(c, bkeys, binary=True))
    c.close()
    return got


def check_served(c, want, taken, keys, bkeys):
    """Every key as memcached served it at `taken` (its TTL then), or a
    miss where memcached missed; returns the hits."""
    got = meta_get_all(c, keys)
    got.update(meta_get_all(c, bkeys, binary=True))
    elapsed = time.time() - taken
    served = 0
    for k, w in want.items():
        if w is None:
            assert got[k] is None, k
            continue
        assert got[k] is not None, k
        value, flags, cas, ttl = got[k]
        assert (value, flags, cas) == w[:3], k
        if w[3] == -1:
            assert ttl == -1, k
        else:
            assert w[3] - elapsed - TTL_SLACK <= ttl <= w[3] + TTL_SLACK, \
                (k, ttl, w[3])
        served += 1
    return served


def test_memcached_file_comes_back_whole(server_factory):
    """20,000 items, chunked and binary keys among them: every one back
    with value, flags, CAS and TTL, and the file is memcached-pm's after
    (a second start opens it, converting nothing)."""
    path = file_path()
    rng = random.Random(39)
    node = memcached_node(path)
    c = node.conn()
    keys, bkeys = fill(c, 19930, 20, rng)
    for k in keys[:300]:                       # deletes: not to come back
        c.send(b"delete %s noreply\r\n" % k)
    c.call(b"mn\r\n", b"MN\r\n")
    c.close()
    taken = time.time()
    want = snapshot(node, keys, bkeys)
    live = sum(1 for v in want.values() if v is not None)
    assert live == 20000 - 300
    graceful_stop(node)

    s = server_factory("-e", path, "-m", "128")
    err = s.stderr()
    assert "[restart] memcached's cache in %s converted" % path in err, err
    assert " 19700 items (20 chunked" in err, err
    c = s.conn()
    assert check_served(c, want, taken, keys, bkeys) == 19700
    st = c.stats()
    assert int(st["curr_items"]) == 19700
    # new CAS values follow memcached's
    c.send(b"mg k:400 c\r\n")
    old_cas = int(c.readline().split()[1][1:])
    c.call(b"set k:400 0 0 1\r\nx\r\n", b"STORED\r\n")
    c.send(b"mg k:400 c\r\n")
    assert int(c.readline().split()[1][1:]) > old_cas
    c.close()
    assert not os.path.exists(path + ".convert")

    # restarted: memcached-pm's own file now, nothing converted
    s.proc.send_signal(signal.SIGTERM)
    s.proc.wait(30)
    s2 = server_factory("-e", path, "-m", "128")
    assert "converted" not in s2.stderr()
    c = s2.conn()
    got = meta_get_all(c, [b"k:400", b"long:3"])
    assert got[b"k:400"][0] == b"x"
    assert got[b"long:3"][:3] == want[b"long:3"][:3]
    assert int(c.stats()["curr_items"]) == 19700
    c.close()


def test_expired_and_flushed_stay_out(server_factory):
    """Items past their TTL, or flushed by flush_all, are not brought
    back; those set after the flush are."""
    path = file_path()
    # nothing of memcached's reclaims them before its stop: no crawler,
    # no maintainer, and the later sets go to another slab class
    node = memcached_node(path, "-o", "no_lru_crawler,no_lru_maintainer")
    c = node.conn()
    for i in range(100):
        c.send(b"set old:%d 0 0 1 noreply\r\na\r\n" % i)
        c.send(b"set short:%d 0 1 1 noreply\r\nb\r\n" % i)
    c.call(b"mn\r\n", b"MN\r\n")
    wait_seconds_pass(c, 2)                    # short:* expired
    c.call(b"flush_all\r\n", b"OK\r\n")
    wait_seconds_pass(c, 2)                    # later sets: after it
    for i in range(100):
        c.send(b"set new:%d 5 0 200 noreply\r\n%s\r\n" % (i, b"c" * 200))
    c.call(b"mn\r\n", b"MN\r\n")
    c.close()
    graceful_stop(node)

    s = server_factory("-e", path, "-m", "128")
    err = s.stderr()
    assert " 100 items " in err and " 100 expired, 100 flushed" in err, err
    c = s.conn()
    got = meta_get_all(c, [b"old:%d" % i for i in range(100)] +
                       [b"short:%d" % i for i in range(100)] +
                       [b"new:%d" % i for i in range(100)])
    assert all(got[b"old:%d" % i] is None for i in range(100))
    assert all(got[b"short:%d" % i] is None for i in range(100))
    assert all(got[b"new:%d" % i][:2] == (b"c" * 200, 5) for i in range(100))
    c.close()


def test_delayed_flush_carries_over(server_factory):
    """flush_all with a delay, pending at memcached's stop: the items
    come back and go when its time comes."""
    path = file_path()
    node = memcached_node(path)
    c = node.conn()
    c.call(b"set a 0 0 1\r\na\r\n", b"STORED\r\n")
    c.call(b"flush_all 4\r\n", b"OK\r\n")
    flush_at = time.time() + 4
    c.close()
    graceful_stop(node)
    s = server_factory("-e", path, "-m", "128")
    c = s.conn()
    got = meta_get_all(c, [b"a"])[b"a"]
    if time.time() < flush_at - 1:
        assert got is not None and got[0] == b"a"
    wait_wall_clock(flush_at + 1.5)
    assert meta_get_all(c, [b"a"])[b"a"] is None
    c.close()


def damaged(path, how):
    """A memcached file with one item, then damaged."""
    node = memcached_node(path)
    c = node.conn()
    c.call(b"set victim 0 0 5\r\nhello\r\n", b"STORED\r\n")
    value = os.urandom(LONG)
    c.send(b"set big-chunked-value 0 0 %d\r\n%s\r\n" % (len(value),
                                                           value))
    assert c.readline() == b"STORED\r\n"
    c.close()
    graceful_stop(node)
    with open(path, "r+b") as f:
        data = f.read()
        if how == "key length":
            at = data.index(b"victim")
            f.seek(at - 8 - 48 + 41)           # nkey, before the CAS
            f.write(b"\x00")
        elif how == "value end":
            at = data.index(b"hello\r\n")
            f.seek(at + 5)
            f.write(b"\n\n")
        elif how == "chain":
            key = b"big-chunked-value"
            at = data.index(key)
            f.seek(at + len(key) + 1)          # no flags: chunk header
            f.write(b"\x08\x00\x00\x00\x00\x00\x00\x00")
    return node


@pytest.mark.parametrize("how", ["key length", "value end", "chain",
                                 "meta line", "size"])
def test_unreadable_file_starts_clean(server_factory, how):
    """A damaged item, chain, .meta or size: the file is refused whole,
    with the reason on stderr, and the cache starts clean."""
    path = file_path()
    damaged(path, how if how not in ("meta line", "size") else None)
    if how == "meta line":
        with open(path + ".meta") as f:
            lines = [ln for ln in f if not ln.startswith("Kstop_time")]
        with open(path + ".meta", "w") as f:
            f.writelines(lines)
    elif how == "size":
        os.truncate(path, os.path.getsize(path) - 4096)
    s = server_factory("-e", path, "-m", "128")
    err = s.stderr()
    reason = {"key length": "is not whole", "value end": "is not whole",
              "chain": "is not whole",
              "meta line": "missing some metadata lines",
              "size": "the file holds"}[how]
    assert reason in err, err
    assert "starting with a clean cache" in err, err
    assert "converted" not in err
    c = s.conn()
    assert meta_get_all(c, [b"victim", b"big-chunked-value"]) == {
        b"victim": None, b"big-chunked-value": None}
    assert int(c.stats()["curr_items"]) == 0
    c.call(b"set x 0 0 1\r\nx\r\n", b"STORED\r\n")
    c.close()
    assert not os.path.exists(path + ".convert")


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_kill_during_conversion(server_factory, binary):
    """SIGKILL while the conversion writes: memcached's file and .meta are
    as they were, and the next start converts everything; killed after
    its commit, the next start opens memcached-pm's file whole."""
    path = file_path()
    node = memcached_node(path, "-m", "256")
    c = node.conn()
    value = b"v" * 200
    for i in range(0, 400000, 1000):
        c.send(b"".join(b"set k%d 3 0 %d noreply\r\n%s\r\n" % (j, len(value),
                                                                 value)
                        for j in range(i, i + 1000)))
    c.call(b"mn\r\n", b"MN\r\n")
    c.close()
    graceful_stop(node)
    before = (digest(path), open(path + ".meta").read())
    args = ["-e", path, "-m", "256"]
    # started by hand: it answers only once converted; killed as soon as
    # its conversion file is there
    p = subprocess.Popen([binary] + base_args(free_port()) + args,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    tmp = path + ".convert"
    wait_for(lambda: p.poll() is not None or os.path.exists(tmp), 60,
             "the conversion file")
    p.kill()
    p.wait()
    assert before == (digest(path), open(path + ".meta").read()), \
        "memcached's file changed before the conversion committed"

    s = server_factory(*args)
    err = s.stderr()
    assert " 400000 items " in err, err
    assert not os.path.exists(tmp)
    c = s.conn()
    sample = [b"k%d" % i for i in range(0, 400000, 997)]
    got = meta_get_all(c, sample)
    assert all(v is not None and v[:2] == (value, 3) for v in got.values())
    assert int(c.stats()["curr_items"]) == 400000
    c.close()

    # a kill after the commit, before memcached-pm's .meta replaced
    # memcached's: the next start opens memcached-pm's file, whole
    s.proc.kill()
    s.proc.wait()
    with open(path + ".meta", "w") as f:
        f.write(before[1])
    s = server_factory(*args)
    assert "converted" not in s.stderr()
    c = s.conn()
    assert meta_get_all(c, sample) == got
    assert int(c.stats()["curr_items"]) == 400000
    c.close()


def read_text(f):
    f.flush()
    with open(f.name, "rb") as r:
        return r.read().decode(errors="replace")


def reply_to_mg(c):
    """A reply to `mg k:1 v` on c: its first line, or None where the
    connection closed unanswered (memcached took it, then stopped)."""
    try:
        c.send(b"mg k:1 v\r\n")
        return c.readline()
    except (ConnClosed, ConnectionResetError, BrokenPipeError):
        return None


def test_a_running_memcacheds_file_is_left_alone(server_factory, binary):
    """A memcached-pm started on the file of a memcached that still runs,
    without -o takeover, refuses it and leaves it whole: memcached serves
    on, and its stop hands every item over as before."""
    path = file_path()
    node = memcached_node(path)
    c = node.conn()
    keys, bkeys = fill(c, 2000, 2, random.Random(5))
    c.close()
    want = snapshot(node, keys, bkeys)
    r = subprocess.run([binary] + base_args(free_port()) +
                       ["-e", path, "-m", "128"], capture_output=True,
                       timeout=30)
    assert (r.returncode, r.stderr.decode().splitlines()[-1]) == (
        1, "memory file %s: mapped by pid %d (memcached); stop it first, "
        "or start with -o takeover to serve in its place once it stops"
        % (path, node.pid))
    assert not os.path.exists(path + ".meta")
    assert snapshot(node, keys, bkeys) == want
    taken = time.time()
    graceful_stop(node)
    c = server_factory("-e", path, "-m", "128").conn()
    assert check_served(c, want, taken, keys, bkeys) == len(want)
    c.close()


def test_takeover_from_a_running_memcached(binary):
    """Started beside a running memcached -e node with -o takeover,
    memcached-pm shares its listening socket and waits, the file left
    alone.  memcached's SIGUSR1 hands the node over: no connection is
    refused, not even while memcached stops or the file converts;
    connections made meanwhile are served by the successor (those
    memcached had taken close; a key the successor has not read back
    yet misses once, as after any start on a file), and every item is
    back."""
    path = file_path()
    node = memcached_node(path)
    c = node.conn()
    keys, bkeys = fill(c, 3000, 2, random.Random(6))
    c.close()
    tdir = tempfile.mkdtemp(prefix="mcpm-to-")
    err = tempfile.NamedTemporaryFile(prefix="mcpm-err-", suffix=".log")
    p = subprocess.Popen([binary] + base_args(node.port) +
                         ["-e", path, "-m", "128", "-o",
                          "takeover=" + os.path.join(tdir, "t.sock")],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=err)
    try:
        waiting = ("takeover: pid %d (memcached) has the memory file %s: "
                   "serving in its place once it stops" % (node.pid, path))
        wait_for(lambda: waiting in read_text(err) or p.poll() is not None,
                 30, "the successor to wait")
        assert p.poll() is None, read_text(err)
        assert not os.path.exists(path + ".convert")
        taken = time.time()
        want = snapshot(node, keys, bkeys)      # memcached serves on
        assert sum(v is not None for v in want.values()) == 3052

        node.proc.send_signal(signal.SIGUSR1)
        refused, made = 0, []
        deadline = time.monotonic() + 30
        while node.proc.poll() is None and time.monotonic() < deadline:
            try:
                made.append(Conn(node.port, timeout=30))
            except ConnectionRefusedError:
                refused += 1
        assert node.proc.wait(30) == 0
        replies = [reply_to_mg(c) for c in made]
        for c in made:
            c.close()
        assert refused == 0
        # memcached closed those it had taken; the successor answered the
        # rest, a miss while it still read the converted file back
        va = b"VA %d\r\n" % len(want[b"k:1"][0])
        assert all(r in (None, b"EN\r\n", va) for r in replies), replies
        c = Conn(node.port, timeout=30)             # memcached is gone
        wait_for(lambda: c.stats()["recovery_running"] == "0", 30,
                 "the converted file to be read back")
        assert reply_to_mg(c) == va
        c.close()

        assert "takeover: pid %d has stopped" % node.pid in read_text(err)
        assert " 3052 items (2 chunked" in read_text(err)
        c = Conn(node.port)
        assert check_served(c, want, taken, keys, bkeys) == 3052
        c.close()
    finally:
        p.terminate()
        rc = p.wait(30)
        shutil.rmtree(tdir, ignore_errors=True)
    assert rc == 0, read_text(err)


def test_a_file_open_elsewhere_is_waited_for(binary):
    """memcached's file held open by a process that does not map it
    (no pid to name or wait on; a write lease tells): refused without
    -o takeover; with it the start waits until the file is closed, then
    converts it whole."""
    path = file_path()
    node = memcached_node(path)
    c = node.conn()
    keys, bkeys = fill(c, 500, 1, random.Random(8))
    c.close()
    taken = time.time()
    want = snapshot(node, keys, bkeys)
    graceful_stop(node)
    port = free_port()
    tdir = tempfile.mkdtemp(prefix="mcpm-to-")
    err = tempfile.NamedTemporaryFile(prefix="mcpm-err-", suffix=".log")
    holder = open(path, "rb")
    p = None
    try:
        r = subprocess.run([binary] + base_args(port) +
                           ["-e", path, "-m", "128"], capture_output=True,
                           timeout=30)
        assert (r.returncode, r.stderr.decode().splitlines()[-1]) == (
            1, "memory file %s: open in another process; stop it first, "
            "or start with -o takeover to serve in its place once it "
            "closes it" % path)
        p = subprocess.Popen([binary] + base_args(port) +
                             ["-e", path, "-m", "128", "-o", "takeover=" +
                              os.path.join(tdir, "t.sock")],
                             stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=err)
        waiting = ("takeover: the memory file %s is open in another "
                   "process: serving in its place once it closes it" % path)
        wait_for(lambda: waiting in read_text(err) or p.poll() is not None,
                 30, "the start to wait")
        assert p.poll() is None, read_text(err)
        assert os.path.exists(path + ".meta")    # not converted yet
        holder.close()
        wait_for(lambda: serves(port) or p.poll() is not None, 30,
                 "the start to serve")
        assert "takeover: the memory file %s is closed" % path in \
            read_text(err)
        c = Conn(port)
        assert check_served(c, want, taken, keys, bkeys) == len(want)
        c.close()
    finally:
        holder.close()
        if p is not None:
            p.terminate()
            assert p.wait(30) == 0, read_text(err)
        shutil.rmtree(tdir, ignore_errors=True)
