"""-o warm_from: memcached-pm copies a running memcached node (Debian's,
or MEMCACHED_FILE_BIN, such as 1.6.45 built from its source) and follows
its writes until it stops.

Every item comes over with value, client flags, CAS, remaining TTL and
binary key; writes made on the node during and after the copy reach
the copy (stores through the watch stream; deletes through it on 1.6.45,
by the periodic pass's sweep on 1.6.18; in-place incr by the pass's CAS
compare); -o warm_from_rate bounds the requests it sends; `stats`
counts it; a node that is not there fails the copy, not the server.
"""

import base64
import os
import random
import signal
import socket
import threading
import time

import pytest

from conftest import Conn, REFERENCE_BIN, Server, free_port, wait_for

pytestmark = pytest.mark.mcpm

MEMCACHED = os.environ.get("MEMCACHED_FILE_BIN", REFERENCE_BIN)
LONG = 700 * 1024
# a pass comes 10 s after the last one ended; two may be needed
PASS_WAIT = 40

if not os.access(MEMCACHED, os.X_OK):
    pytest.skip("no memcached at %s" % MEMCACHED, allow_module_level=True)


@pytest.fixture
def node():
    """A running memcached node, stopped after the test."""
    s = Server(MEMCACHED, ["-m", "256"], True).start()
    yield s
    s.stop()


def warm_stats(c):
    return {k: v for k, v in c.stats().items() if k.startswith("warm_")}


def get_all(c, keys, batch=200):
    """mg <key> b v f c t for every key: {key: (value, flags, cas, ttl)}
    or None for a miss; keys are sent base64."""
    out = {}
    for i in range(0, len(keys), batch):
        part = keys[i:i + batch]
        c.send(b"".join(b"mg %s b v f c t\r\n" % base64.b64encode(k)
                        for k in part))
        for k in part:
            line = c.readline()
            if line.startswith(b"EN"):
                out[k] = None
                continue
            words = line.split()
            assert words[0] == b"VA", line
            data = c.read_exact(int(words[1]) + 2)[:-2]
            f = {w[:1]: w[1:] for w in words[2:]}
            out[k] = (data, int(f[b"f"]), int(f[b"c"]), int(f[b"t"]))
    return out


def same(want, got, slack=3):
    """Values, flags and CAS equal; TTLs within slack seconds."""
    bad = []
    for k, w in want.items():
        g = got.get(k)
        if (w is None) != (g is None):
            bad.append((k, w and w[:3], g and g[:3]))
        elif w is not None and (w[:3] != g[:3] or abs(w[3] - g[3]) > slack):
            bad.append((k, w, g))
    return bad


def fill(c, n, rng):
    keys = []
    buf = []
    for i in range(n):
        key = b"k:%d" % i
        value = os.urandom(rng.choice((0, 5, 100, 3000)))
        buf.append(b"set %s %d %d %d noreply\r\n%s\r\n" % (
            key, i % 5, rng.choice((0, 0, 3000)), len(value), value))
        keys.append(key)
        if len(buf) == 500:
            c.send(b"".join(buf))
            buf = []
    c.send(b"".join(buf))
    for i in range(5):
        key = b"long:%d" % i
        value = os.urandom(LONG + i)
        c.send(b"set %s 3 0 %d\r\n%s\r\n" % (key, len(value), value))
        assert c.readline() == b"STORED\r\n"
        keys.append(key)
    for i in range(20):
        key = b"\x00\xffbin%d" % i
        c.send(b"ms %s 2 b F%d\r\nbb\r\n" % (base64.b64encode(key), i))
        assert c.readline() == b"HD\r\n"
        keys.append(key)
    c.call(b"mn\r\n", b"MN\r\n")
    return keys


def warm_node(server_factory, node, *extra):
    opt = "warm_from=127.0.0.1:%d" % node.port
    return server_factory("-m", "256", "-o", ",".join((opt,) + extra))


def asked_version(port):
    """A connection to port that has sent `version`, or None while the
    port refuses."""
    try:
        c = Conn(port, 1.0)
    except OSError:
        return None
    c.send(b"version\r\n")
    return c


def wait_for_or_none(cond, timeout):
    try:
        return wait_for(cond, timeout)
    except AssertionError:
        return None


def wait_same(src, dst, keys, timeout):
    last = []

    def check():
        last[:] = same(get_all(src, keys), get_all(dst, keys))
        return not last
    wait_for(check, timeout, "the copy to match the node")


def test_copy_then_follow_until_the_node_stops(server_factory, node):
    rng = random.Random(7)
    src = node.conn()
    keys = fill(src, 20000, rng)
    s = warm_node(server_factory, node)
    dst = s.conn()
    wait_for(lambda: warm_stats(dst)["warm_state"] == "following", 60,
             "the first pass")
    st = warm_stats(dst)
    assert st["warm_source_items"] == "20025"
    assert int(st["warm_passes"]) >= 1
    bad = same(get_all(src, keys), get_all(dst, keys))
    if bad:
        # say whether the copy catches up later, and what the node did
        later = wait_for_or_none(lambda: not same(
            get_all(src, [b[0] for b in bad]),
            get_all(dst, [b[0] for b in bad])), 15)
        st = dst.stats()
        pytest.fail("following, but %d keys differ: %r (%s later); %r\n%s"
                    % (len(bad), bad[:5], "equal" if later else
                       "still not equal", {k: v for k, v in st.items() if
                                           k.startswith("warm_") or k in (
                                               "curr_items", "total_items",
                                               "evictions", "reclaimed")},
                       s.stderr()))
    # binary keys stay binary: returned base64 with b
    dst.send(b"mg %s b k v\r\n" % base64.b64encode(b"\x00\xffbin3"))
    assert dst.readline() == b"VA 2 k%s b\r\n" % base64.b64encode(
        b"\x00\xffbin3")
    assert dst.readline() == b"bb\r\n"

    # writes on the node after the copy: each kind reaches it
    src.call(b"set k:1 9 0 3\r\nnew\r\n", b"STORED\r\n")
    src.call(b"set fresh 0 0 1\r\nf\r\n", b"STORED\r\n")
    src.call(b"append k:2 0 0 1\r\nA\r\n", b"STORED\r\n")
    src.call(b"delete k:3\r\n", b"DELETED\r\n")
    src.call(b"set n 0 0 1\r\n5\r\n", b"STORED\r\n")
    src.call(b"incr n 10\r\n", b"15\r\n")
    changed = [b"k:1", b"fresh", b"k:2", b"k:3", b"n"]
    wait_same(src, dst, changed, PASS_WAIT)
    assert int(warm_stats(dst)["warm_events"]) >= 3

    node.stop()                 # the old node goes: the copy ends
    wait_for(lambda: warm_stats(dst)["warm_state"] == "done", 10,
             "the copy to end")
    got = get_all(dst, [b"k:1", b"k:3", b"n"])
    assert got[b"k:1"][:2] == (b"new", 9)
    assert got[b"k:3"] is None
    assert got[b"n"][0] == b"15"
    dst.call(b"set after 0 0 1\r\nx\r\n", b"STORED\r\n")


def test_writes_during_the_copy_are_not_lost(server_factory, node):
    """A writer updates keys on the node all through the copy; once it
    stops and the copy has caught up, every key holds its last value."""
    src = node.conn()
    keys = [b"w:%d" % i for i in range(30000)]
    for i in range(0, len(keys), 1000):
        src.send(b"".join(b"set %s 0 0 2 noreply\r\nv0\r\n" % k
                          for k in keys[i:i + 1000]))
    src.call(b"mn\r\n", b"MN\r\n")
    stop = threading.Event()
    written = [0]

    def writer():
        c = node.conn()
        rng = random.Random(1)
        n = 0
        while not stop.is_set():
            n += 1
            batch = [rng.choice(keys) for _ in range(50)]
            c.send(b"".join(b"set %s 0 0 %d noreply\r\nv%d\r\n" % (
                k, len(b"v%d" % n), n) for k in batch))
            c.call(b"mn\r\n", b"MN\r\n")
            written[0] += len(batch)
        c.close()

    t = threading.Thread(target=writer)
    t.start()
    try:
        s = warm_node(server_factory, node)
        dst = s.conn()
        wait_for(lambda: warm_stats(dst)["warm_state"] == "following", 60,
                 "the first pass")
        # keep writing while it follows, too
        wait_for(lambda: written[0] > 20000, 30, "writes while following")
    finally:
        stop.set()
        t.join()
    wait_same(src, dst, keys, 30)
    assert int(warm_stats(dst)["warm_events"]) > 0


def test_rate_bound(server_factory, node):
    """warm_from_rate=2000: 6,000 keys take at least 2.5 s to copy, and
    the node's counters agree with the requests sent."""
    src = node.conn()
    src.send(b"".join(b"set r%d 0 0 1 noreply\r\nr\r\n" % i
                      for i in range(6000)))
    src.call(b"mn\r\n", b"MN\r\n")
    before = int(src.stats()["cmd_get"])
    t0 = time.monotonic()
    s = warm_node(server_factory, node, "warm_from_rate=2000")
    dst = s.conn()
    wait_for(lambda: warm_stats(dst)["warm_copied"] == "6000", 30,
             "the copy")
    took = time.monotonic() - t0
    gets = int(src.stats()["cmd_get"]) - before
    # 6,000 fetches at 2,000 a second, less the first burst it may send
    assert took >= (6000 - 2000 / 10 - 64) / 2000.0, took
    assert gets >= 6000
    assert int(warm_stats(dst)["warm_requests"]) >= gets


def test_no_node_fails_the_copy_not_the_server(server_factory):
    port = free_port()
    s = server_factory("-o", "warm_from=127.0.0.1:%d" % port)
    c = s.conn()
    wait_for(lambda: warm_stats(c)["warm_state"] == "failed", 10,
             "the copy to fail")
    assert "[warm] cannot connect to 127.0.0.1:%d" % port in s.stderr()
    c.call(b"set a 0 0 1\r\na\r\n", b"STORED\r\n")
    assert warm_stats(c)["warm_copied"] == "0"


def test_no_warm_lines_without_it(server_factory):
    s = server_factory()
    c = s.conn()
    assert not warm_stats(c)
    st = c.stats("settings")
    assert st["warm_from"] == "NULL" and st["warm_from_rate"] == "0"


def test_takes_the_port_when_the_node_lets_it_go(server_factory, node):
    """-l naming the node's own port too: the warm node shares the
    node's listening socket and accepts on it the moment the node exits,
    items and all; the port refuses no connection meanwhile."""
    src = node.conn()
    src.call(b"set kept 4 0 4\r\nkept\r\n", b"STORED\r\n")
    s = server_factory("-m", "256", "-v", "-l", "127.0.0.1,127.0.0.1:%d"
                       % node.port, "-o", "warm_from=127.0.0.1:%d"
                       % node.port)
    assert ("127.0.0.1:%d is in use: listening there as soon as it is "
            "free (warm_from)" % node.port) in s.stderr()
    assert ("127.0.0.1:%d: sharing the listening socket of pid %d until "
            "it exits" % (node.port, node.pid)) in s.stderr()
    dst = s.conn()
    wait_for(lambda: warm_stats(dst)["warm_state"] == "following", 30,
             "the first pass")
    src.close()
    node.proc.send_signal(signal.SIGUSR1)
    refused, made = 0, []
    deadline = time.monotonic() + 30
    while node.proc.poll() is None and time.monotonic() < deadline:
        try:
            made.append(Conn(node.port, 10.0))
        except ConnectionRefusedError:
            refused += 1
    assert node.proc.wait(30) == 0
    for c in made:
        c.close()
    assert refused == 0

    c = wait_for(lambda: asked_version(node.port), 10,
                 "the node's port to answer")
    assert c.readline().startswith(b"VERSION 1.6.45-pm")
    c.call(b"get kept\r\n", b"VALUE kept 4 4\r\nkept\r\nEND\r\n")
    c.close()


def test_an_address_it_cannot_share_is_tried_until_free(server_factory,
                                                          node):
    """An address held by a socket that does not listen (no listening
    socket to share): tried every millisecond, and listened on once its
    holder lets it go; the copy then stops fetching."""
    held = socket.socket()          # bound, not listening, and without
    held.bind(("127.0.0.1", 0))     # SO_REUSEADDR: no one else binds it
    port = held.getsockname()[1]
    try:
        s = server_factory("-m", "256", "-v", "-l",
                           "127.0.0.1,127.0.0.1:%d" % port, "-o",
                           "warm_from=127.0.0.1:%d" % node.port)
        err = s.stderr()
        assert ("127.0.0.1:%d is in use: listening there as soon as it is "
                "free (warm_from)" % port) in err
        assert "sharing the listening socket" not in err
        with pytest.raises(ConnectionRefusedError):
            Conn(port, 1.0)
    finally:
        held.close()

    c = wait_for(lambda: asked_version(port), 10,
                 "the address to be listened on")
    assert c.readline().startswith(b"VERSION 1.6.45-pm")
    c.close()
    wait_for(lambda: "listening on tcp:127.0.0.1:%d" % port in s.stderr(),
             10, "the line that says so")
    # cut over: a write the node's stream names now is not fetched
    dst = s.conn()
    events = int(warm_stats(dst)["warm_events"])
    src = node.conn()
    src.call(b"set late 0 0 4\r\nlate\r\n", b"STORED\r\n")
    src.close()
    wait_for(lambda: int(warm_stats(dst)["warm_events"]) > events, 10,
             "the stream to name the write")
    dst.call(b"get late\r\n", b"END\r\n")
    dst.close()
