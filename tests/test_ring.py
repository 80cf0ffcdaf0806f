"""The io_uring event engine (-o event_engine=io_uring, memcached-pm/net/ring.h):
how it is chosen and refused, its fall-back to epoll, and its faults
provoked on the wire: receive buffers running out, a reader that lags,
short sends, a peer that resets mid-reply, a completion queue overflow,
and thousands of connections closing with requests and replies in the
ring.  Each asserts the replies byte for byte, the counter in `stats`,
and (through the fixtures' clean stop) no sanitizer report."""

import os
import socket
import struct
import threading

import pytest

from conftest import Server, wait_for

# Its servers choose io_uring themselves, but take the pass's memory file:
# its faults meet replies held for the group commit's sync.
pytestmark = [pytest.mark.mcpm, pytest.mark.durability]

RING = "-o", "event_engine=io_uring"
IO_URING_DISABLED = "/proc/sys/kernel/io_uring_disabled"


def engine(s):
    return s.stats("settings")["event_engine"]


def counter(s, name):
    return int(s.stats()[name])


def recv_upto(so, n):
    """Up to n bytes from a socket: fewer only if it closes first."""
    got = b""
    while len(got) < n:
        chunk = so.recv(min(n - len(got), 65536))
        if not chunk:
            break
        got += chunk
    return got


def test_the_engine_is_chosen(server_factory):
    assert engine(server_factory(*RING)) == "io_uring"
    assert engine(server_factory("-o", "event_engine=epoll")) == "epoll"
    assert engine(server_factory("-o", "event_engine=auto")) == "io_uring"
    want = b"STORED\r\nVALUE k 0 5\r\nhello\r\nEND\r\n"
    for opts in ("ring_buffers=1,ring_entries=4", "no_ring_files"):
        s = server_factory("-o", "event_engine=io_uring," + opts)
        with s.conn() as c:
            c.send(b"set k 0 0 5\r\nhello\r\nget k\r\n")
            assert c.read_exact(len(want)) == want, opts


def rings(s):
    """The io_uring instances the server holds open.  A descriptor listed
    may close before its link is read (the start-up probe's connection
    going away): it is not a ring."""
    d = "/proc/%d/fd" % s.pid
    n = 0
    for fd in os.listdir(d):
        try:
            n += os.readlink(os.path.join(d, fd)) == "anon_inode:[io_uring]"
        except FileNotFoundError:
            pass
    return n


def test_a_ring_per_worker(server_factory):
    """Three workers, three rings; the listeners accept on the main
    thread's epoll (a ring would hold their sockets past a SIGKILL:
    test_process.py::test_a_killed_server_refuses_at_once); epoll has
    none."""
    s = server_factory("-t", "3", *RING)
    assert rings(s) == 3
    with s.conn() as c:
        assert c.req(b"mn\r\n") == b"MN\r\n"
    assert rings(server_factory("-t", "3", "-o", "event_engine=epoll")) == 0


def test_sqpoll_serves(server_factory):
    """-o ring_sqpoll: a kernel thread submits for each worker."""
    s = server_factory("-t", "2", "-o", "event_engine=io_uring,ring_sqpoll")
    assert engine(s) == "io_uring"
    with s.conn() as c:
        for i in range(50):
            assert c.req(b"set s%d 0 0 1\r\nx\r\n" % i) == b"STORED\r\n"
        assert c.get_block(b"get s49\r\n") == b"VALUE s49 0 1\r\nx\r\nEND\r\n"


@pytest.mark.parametrize("opt,msg", [
    ("event_engine=kqueue", "event_engine must be io_uring, epoll or auto"),
    ("event_engine", "event_engine must be io_uring, epoll or auto"),
    ("ring_buffers=3", "ring_buffers must be a power of two from 1 to 32768"),
    ("ring_buffers=65536",
     "ring_buffers must be a power of two from 1 to 32768"),
    ("ring_entries=2", 'Invalid value for ring_entries: "2"'),
    ("ring_entries=32768", 'Invalid value for ring_entries: "32768"'),
])
def test_bad_values_are_refused(run, opt, msg):
    r = run("-o", opt)
    assert r.returncode == 1
    assert msg in r.stderr.decode()


@pytest.mark.serial         # io_uring is off for every process meanwhile
@pytest.mark.parametrize("asked,lines", [("io_uring", 1), ("auto", 0)])
def test_falls_back_to_epoll_where_io_uring_is_off(server_factory, asked,
                                                  lines):
    """With io_uring disabled in the kernel, the workers and listeners
    run on epoll; one line says so when io_uring was asked for by name,
    none under auto (the default)."""
    with open(IO_URING_DISABLED) as f:
        was = f.read().strip()
    try:
        with open(IO_URING_DISABLED, "w") as f:
            f.write("2")
        s = server_factory("-o", "event_engine=" + asked)
    finally:
        with open(IO_URING_DISABLED, "w") as f:
            f.write(was)
    assert engine(s) == "epoll"
    assert rings(s) == 0
    assert "ring_recv_nobufs" not in s.stats()
    with s.conn() as c:
        assert c.req(b"set k 0 0 1\r\nx\r\n") == b"STORED\r\n"
    # the line goes out through the log thread: all of it is out once the
    # server has stopped (read before, under load it was not yet)
    assert s.stop() == []
    said = [l for l in s.stderr().splitlines() if "io_uring" in l]
    assert len(said) == lines, said
    assert all("the workers use epoll" in l for l in said)


def pipeline_client(port, n, key, errors):
    """Pipelined sets then gets of its own keys; every reply checked."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=20) as so:
            want = b""
            out = b""
            for i in range(n):
                v = (b"%s-%d-" % (key, i)) * 9
                out += b"set %s%d 0 0 %d\r\n%s\r\n" % (key, i, len(v), v)
                want += b"STORED\r\n"
            for i in range(n):
                v = (b"%s-%d-" % (key, i)) * 9
                out += b"get %s%d\r\n" % (key, i)
                want += b"VALUE %s%d 0 %d\r\n%s\r\nEND\r\n" % (key, i, len(v),
                                                               v)
            so.sendall(out)
            got = recv_upto(so, len(want))
            if got != want:
                errors.append((key, len(got), len(want)))
    except OSError as e:
        errors.append((key, repr(e)))


def test_receive_buffers_run_out(server_factory):
    """One 16 KB buffer for eight pipelining clients: receives run out
    (ring_recv_nobufs) and every reply still comes, whole and in order."""
    s = server_factory("-t", "1", "-o", "event_engine=io_uring,ring_buffers=1")
    errors = []
    for _ in range(10):
        threads = [threading.Thread(target=pipeline_client,
                                    args=(s.port, 300, b"c%d" % i, errors))
                   for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        if counter(s, "ring_recv_nobufs") > 0:
            break
    assert counter(s, "ring_recv_nobufs") > 0
    s.check_alive()


def test_large_values_through_few_buffers(server_factory):
    """Megabyte values through two receive buffers: the receive pauses
    while a value waits to be copied (ring_recv_paused); a multiget
    larger than a socket's send buffer, to a reader with a small window,
    goes out in parts (ring_send_short); every byte arrives."""
    s = server_factory("-t", "1", "-I", "2m", "-m", "128",
                       "-o", "event_engine=io_uring,ring_buffers=2")
    values = [bytes((i * 7 + i // 251 + k) & 0xFF for i in range(1 << 20))
              for k in range(8)]
    with s.conn(timeout=20) as c:
        for k, value in enumerate(values):
            c.send(b"set big%d 0 0 %d\r\n%s\r\n" % (k, len(value), value))
            assert c.readline() == b"STORED\r\n"
    so = socket.socket()
    so.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    so.connect(("127.0.0.1", s.port))
    so.settimeout(20)
    so.sendall(b"get %s\r\n" % b" ".join(b"big%d" % k for k in range(8)))
    want = b"".join(b"VALUE big%d 0 %d\r\n%s\r\n" % (k, len(v), v)
                    for k, v in enumerate(values)) + b"END\r\n"
    got = recv_upto(so, len(want))
    so.close()
    assert got == want
    assert counter(s, "ring_send_short") > 0
    assert counter(s, "ring_recv_paused") > 0


def reset(so):
    """Close with a reset (RST), not a FIN."""
    so.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    so.close()


def alone(s):
    """The connection asking is the only client the server holds: no
    other in `stats conns`, and curr_connections counts it alone (so
    every other one has been freed, not just closed)."""
    with s.conn() as c:
        rows = c.stats("conns")
        curr = int(c.stats()["curr_connections"])
    clients = [k for k, v in rows.items()
               if k.endswith(":state") and v != "conn_listening"]
    return len(clients) == 1 and curr == 1


def test_peer_resets_mid_reply(server_factory):
    """A client that asks for megabytes, reads nothing and resets: the
    send in the ring fails (ring_send_errors), the connection is freed,
    the server serves on."""
    s = server_factory("-t", "1", "-I", "2m", RING[0], RING[1])
    value = b"v" * (1 << 20)
    with s.conn(timeout=20) as c:
        for i in range(4):
            c.send(b"set big%d 0 0 %d\r\n%s\r\n" % (i, len(value), value))
            assert c.readline() == b"STORED\r\n"
    for _ in range(3):
        so = socket.create_connection(("127.0.0.1", s.port))
        so.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        so.sendall(b"get big0 big1 big2 big3\r\n")
        s.wait_replying(so)     # the reply fills the socket, then waits
        reset(so)
    wait_for(lambda: counter(s, "ring_send_errors") >= 3,
             what="three failed sends")
    wait_for(lambda: alone(s), what="every connection freed")
    s.check_alive()


def test_completion_queue_overflow(server_factory):
    """Three hundred connections asking at once of a worker whose
    completion queue holds 16: the kernel keeps what does not fit
    (ring_cq_overflows) and every one is answered."""
    s = server_factory("-t", "1", "-o", "event_engine=io_uring,ring_entries=4")
    with s.conn() as c:
        assert c.req(b"set k 0 0 2\r\nhi\r\n") == b"STORED\r\n"
    conns = [socket.create_connection(("127.0.0.1", s.port))
             for _ in range(300)]
    try:
        for _ in range(3):
            for so in conns:
                so.sendall(b"get k\r\n")
            for so in conns:
                so.settimeout(10)
                want = b"VALUE k 0 2\r\nhi\r\nEND\r\n"
                assert recv_upto(so, len(want)) == want
    finally:
        for so in conns:
            so.close()
    assert counter(s, "ring_cq_overflows") > 0
    s.check_alive()


def test_thousands_of_connections_close_with_work_in_the_ring(
        server_factory):
    """Two thousand connections that send requests and go at once, some
    with a reset, some while a megabyte reply is on its way, some closed
    by the server (quit) with their receive in the ring: every one is
    freed (curr_connections comes back), nothing leaks or is used after
    it is freed (the sanitizer build's clean stop)."""
    s = server_factory("-I", "2m", RING[0], RING[1])
    value = b"w" * (1 << 20)
    with s.conn(timeout=20) as c:
        c.send(b"set big 0 0 %d\r\n%s\r\n" % (len(value), value))
        assert c.readline() == b"STORED\r\n"
    deferred = counter(s, "ring_close_deferred")
    for batch in range(20):
        socks = []
        for i in range(100):
            so = socket.create_connection(("127.0.0.1", s.port))
            kind = (batch * 100 + i) % 5
            if kind == 0:
                so.sendall(b"set k%d 0 0 5\r\nhello\r\nget k%d\r\n" % (i, i))
            elif kind == 1:
                so.sendall(b"get big\r\n")
            elif kind == 2:
                so.sendall(b"get big big\r\nset half 0 0 10\r\nabc")
            elif kind == 3:
                so.sendall(b"mg k%d v\r\n" % i)
            else:
                # the server closes first, its receive still in the ring
                so.sendall(b"mn\r\nquit\r\n")
            socks.append((kind, so))
        for kind, so in socks:
            if kind == 4:
                so.settimeout(5)
                assert so.recv(100) == b"MN\r\n"
                assert so.recv(100) == b""
            if kind % 2:
                reset(so)
            else:
                so.close()
    wait_for(lambda: alone(s), 20, "every connection freed")
    # the 400 that quit were closed with their receive in the ring
    assert counter(s, "ring_close_deferred") - deferred >= 400
    s.check_alive()


def test_stop_with_replies_in_the_ring(binary):
    """SIGTERM while connections wait on sends in the ring: the server
    cancels them, frees every connection and exits cleanly."""
    s = Server(binary, ["-I", "2m", RING[0], RING[1]], False).start()
    socks = []
    try:
        value = b"z" * (1 << 20)
        with s.conn(timeout=20) as c:
            c.send(b"set big 0 0 %d\r\n%s\r\n" % (len(value), value))
            assert c.readline() == b"STORED\r\n"
        for _ in range(8):
            so = socket.create_connection(("127.0.0.1", s.port))
            so.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            so.sendall(b"get big big big\r\n")
            socks.append(so)
        s.wait_replying(*socks)
    finally:
        problems = s.stop()
        for so in socks:
            so.close()
    assert problems == []
