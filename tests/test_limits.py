"""Limits that keep one client from hurting the others: read buffer
memory (-o read_buf_mem_limit), a client that never reads its replies,
and -c without maxconns_fast (accept stops at the file limit and starts
again).  -c with maxconns_fast, -R and idle_timeout are in
test_behaviour.py and test_binary.py."""

import resource
import select
import socket

import pytest

from conftest import (Conn, ConnClosed, against_memcached, free_port,
                      start_which, wait_for)

# Buffers, queues and accepting: what each event engine does for itself
# (the tests on the default engine are marked engine).


@pytest.mark.engine
def test_read_buffers_are_held_only_while_reading(server_factory):
    s = server_factory("-t", "1", "-o", "read_buf_mem_limit=1")
    conns = [s.conn() for _ in range(200)]
    try:
        for c in conns:                 # far more than 1 MB / 16 KB
            c.call(b"mn\r\n", b"MN\r\n")
        st = conns[0].stats()
        assert st["read_buf_oom"] == "0"
        assert int(st["read_buf_count"]) <= 2
        assert conns[0].stats("settings")["read_buf_mem_limit"] == "1048576"
    finally:
        for c in conns:
            c.close()
    # and closing them gives back exactly what they held

    def given_back():
        st = s.stats()
        return (int(st["read_buf_count"]) <= 2
                and int(st["read_buf_bytes"]) <= 2 * 16384)
    wait_for(given_back, what="the closed connections' read buffers")


@pytest.mark.engine
def test_idle_connections_hold_no_buffers(server_factory):
    """A connection keeps its buffers between requests while it is busy,
    but only in the place of one of its worker's 4 spares: after 200
    connections each asked once, the worker holds at most 4 read buffers
    beside the one the asking connection reads into."""
    s = server_factory("-t", "1")
    conns = [s.conn() for _ in range(200)]
    try:
        for c in conns:
            c.call(b"mn\r\n", b"MN\r\n")
        for c in conns[:50]:
            c.call(b"mn\r\n", b"MN\r\n")
        st = conns[0].stats()
        assert 1 <= int(st["read_buf_count"]) <= 5, st["read_buf_count"]
        assert int(st["response_obj_count"]) <= 5, st["response_obj_count"]
    finally:
        for c in conns:
            c.close()


@pytest.mark.engine
def test_read_buffer_limit_closes_what_does_not_fit(server_factory):
    """Every connection holding a partial request keeps a 16 KB buffer:
    1 MB holds 64 of them (memcached 1.6.18 gives out 63); the rest are
    closed and counted."""
    s = server_factory("-t", "1", "-o", "read_buf_mem_limit=1")
    conns = [s.conn(timeout=2.0) for _ in range(100)]
    for c in conns:
        c.send(b"get a")
    s.wait_read(*conns)
    served = closed = 0
    for c in conns:
        try:
            c.send(b"\r\n")
            assert c.readline() == b"END\r\n"
            served += 1
        except (ConnClosed, ConnectionError):
            closed += 1
        c.close()
    assert served in (63, 64) and served + closed == 100
    with s.conn() as c:
        assert c.stats()["read_buf_oom"] == str(closed)


@pytest.mark.mcpm
@pytest.mark.engine
def test_a_huge_multiget_cannot_pass_the_limit(server_factory):
    s = server_factory("-t", "1", "-o", "read_buf_mem_limit=1")
    with s.conn() as c:
        c.send(b"get " + b" ".join(b"key%07d" % i for i in range(150000)))
        assert c.wait_closed()
    with s.conn() as c:
        assert int(c.stats()["read_buf_oom"]) == 1
        c.call(b"mn\r\n", b"MN\r\n")


@pytest.mark.engine
def test_a_client_that_never_reads(server_factory):
    """Replies queue up to about a megabyte; then the server stops reading
    that client's requests until it reads, and serves everyone else."""
    s = server_factory("-t", "1")
    with s.conn() as c:
        c.call(b"set v 0 0 1000\r\n" + b"x" * 1000 + b"\r\n", b"STORED\r\n")
    greedy = socket.create_connection(("127.0.0.1", s.port))
    greedy.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    greedy.setblocking(False)
    request = b"get v\r\n" * 1000
    sent = [0]

    def pushed_two_megabytes():
        try:
            while True:
                sent[0] += greedy.send(request)
        except BlockingIOError:         # wait until the kernel takes more
            pass
        return sent[0] > 2 * 1024 * 1024
    # it keeps sending (2 GB of replies asked for); we keep taking
    wait_for(pushed_two_megabytes, 20, "the kernel to take 2 MB of gets")
    with s.conn() as c:
        st = c.stats()
        c.call(b"mn\r\n", b"MN\r\n")
    # the reply queue, not the 1 KB values times the requests sent
    assert int(st["response_obj_bytes"]) < 4 * 1024 * 1024
    greedy.close()


def nofile(n):
    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))
    return limit


@pytest.mark.engine
def test_accept_stops_at_the_file_limit_and_resumes(server_factory):
    file_limit_pauses_accept(server_factory("-t", "1", "-c", "64", "-o",
                                            "no_maxconns_fast",
                                            preexec=nofile(64)))


@pytest.mark.mcpm
def test_ring_accept_stops_at_the_file_limit_and_resumes(server_factory):
    """The same with the workers on io_uring (the listeners accept on
    epoll on either engine)."""
    file_limit_pauses_accept(server_factory(
        "-t", "1", "-c", "64", "-o", "no_maxconns_fast,event_engine=io_uring",
        preexec=nofile(64)))


def file_limit_pauses_accept(s):
    first = s.conn()
    conns, stuck = [], None
    for _ in range(80):
        c = Conn(s.port)
        c.send(b"mn\r\n")

        def served_or_paused():
            try:
                assert c.read_exact(4, timeout=0.05) == b"MN\r\n"
                return "served"
            except socket.timeout:
                pass
            return first.stats()["accepting_conns"] == "0" and "paused"
        try:
            how = wait_for(served_or_paused,
                           what="a reply, or the listener paused")
        except (OSError, ConnClosed):
            how = "closed"
        if how != "served":
            stuck = c
            break
        conns.append(c)
    assert stuck is not None, "never ran out of descriptors"
    st = first.stats()
    assert st["accepting_conns"] == "0"
    assert int(st["listen_disabled_num"]) >= 1
    for c in conns[:20]:
        c.close()
    stuck.timeout = 5.0
    stuck.sock.settimeout(5.0)
    assert stuck.readline() == b"MN\r\n"
    st = first.stats()
    assert st["accepting_conns"] == "1"
    assert int(st["time_in_listen_disabled_us"]) > 0
    for c in conns[20:] + [stuck, first]:
        c.close()


# ---- -c with maxconns_fast (the default) ------------------------------

BOTH = [pytest.param("memcached-pm", marks=pytest.mark.engine),
        pytest.param("memcached", marks=against_memcached)]


@pytest.mark.parametrize("which", BOTH)
def test_connections_past_the_limit_are_refused_at_once(binary, which):
    """100 connections at -c 64: those past the limit each get memcached's
    ERROR line within a second and are closed, counted in
    rejected_connections; the listener never pauses; and once they are
    gone the server serves new connections.  (An io_uring multishot
    accept took the next connection before the refused one was closed,
    and that failure paused the listener.)"""
    s = start_which(which, binary, "-t", "1", "-c", "64")
    TOO_MANY = b"ERROR Too many open connections\r\n"
    control = s.conn()
    idle = control.stats()["curr_connections"]
    socks = []
    try:
        for _ in range(100):
            socks.append(socket.create_connection(("127.0.0.1", s.port)))
        # accepts go in connect order and nothing closes but refusals:
        # once one is refused, every later one is; the last surely is
        ready, _, _ = select.select([socks[-1]], [], [], 1.0)
        assert ready, "the 100th connection was not answered in a second"
        ready, _, _ = select.select(socks, [], [], 0)
        refused = 0
        for sk in socks:
            if sk in ready:
                sk.settimeout(1.0)
                got = b""
                while len(got) < len(TOO_MANY):
                    more = sk.recv(64)
                    if not more:
                        break
                    got += more
                assert got == TOO_MANY
                assert sk.recv(64) == b""           # and closed
                refused += 1
            else:
                sk.settimeout(5.0)
                sk.sendall(b"mn\r\n")
                assert sk.recv(64) == b"MN\r\n"
        assert 100 - 64 <= refused < 100
        st = control.stats()
        assert int(st["rejected_connections"]) == refused
        assert st["listen_disabled_num"] == "0"
        assert st["accepting_conns"] == "1"
    finally:
        for sk in socks:
            sk.close()
    # once it has seen the closes, it serves new connections
    wait_for(lambda: control.stats()["curr_connections"] == idle,
             what="the server to see the closes")
    with s.conn() as c:
        c.call(b"mn\r\n", b"MN\r\n")
    control.close()
    s.assert_clean_stop()


# ---- replies under read_buf_mem_limit ---------------------------------


@pytest.mark.parametrize("which", BOTH)
def test_replies_take_memory_under_the_read_buffer_limit(binary, which):
    """At 1 MB over 32 workers a worker has two 16 KB buffers: one reads,
    the other holds 13 replies being built.  A get of 13 keys is answered;
    of 14, or 500, memcached's out-of-memory error alone, counted as
    response_obj_oom.  500 pipelined requests close the connection
    before any reply is sent, and count again; 12 are answered."""
    s = start_which(which, binary, "-o", "read_buf_mem_limit=1", "-t", "32",
                    "-R", "500")
    try:
        with s.conn() as c:
            for n, want in ((13, b"END\r\n"),
                            (14, b"SERVER_ERROR out of memory writing get "
                                 b"response\r\n"),
                            (500, b"SERVER_ERROR out of memory writing get "
                                  b"response\r\n")):
                c.call(b"get " + b" ".join([b"foo"] * n) + b"\r\n", want)
            assert c.stats()["response_obj_oom"] == "2"
            with s.conn() as p:
                p.send(b"mg foo v\r\n" * 500)
                with pytest.raises(ConnClosed):
                    p.read_exact(1)
            assert c.stats()["response_obj_oom"] == "3"
            with s.conn() as p:
                p.call(b"mg foo v\r\n" * 12, b"EN\r\n" * 12)
            c.call(b"mn\r\n", b"MN\r\n")
    finally:
        s.stop()


def test_reply_memory_is_given_back(server_factory):
    """The slots of sent replies go back: many 13-key gets in a row, on
    many connections, never run out."""
    s = server_factory("-o", "read_buf_mem_limit=1", "-t", "32")
    conns = [s.conn() for _ in range(8)]
    try:
        for _ in range(20):
            for c in conns:
                c.call(b"get " + b" ".join([b"k"] * 13) + b"\r\n",
                       b"END\r\n")
        assert conns[0].stats()["response_obj_oom"] == "0"
    finally:
        for c in conns:
            c.close()


@pytest.mark.parametrize("which", BOTH)
def test_udp_buffers_are_outside_the_read_buffer_limit(binary, which):
    """With UDP on, at 1 MB over 32 workers (two buffers each), TCP
    connections are still served: each worker's UDP socket reads into a
    buffer of its own, not one of the share (memcached-pm's counted it
    and reset every TCP connection)."""
    s = start_which(which, binary, "-o", "read_buf_mem_limit=1", "-t", "32",
                    "-U", str(free_port()))
    try:
        conns = [s.conn() for _ in range(40)]
        for c in conns:
            c.call(b"mn\r\n", b"MN\r\n")
        assert conns[0].stats()["read_buf_oom"] == "0"
        for c in conns:
            c.close()
    finally:
        s.stop()
