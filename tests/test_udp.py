"""UDP (-U): memcached's frame, text, meta and binary requests over it,
replies cut into datagrams as memcached cuts them, what is dropped, and
the stats of the UDP sockets.

A reply datagram is an 8-byte frame (request id, sequence number, total
datagrams of the message, 0) and at most 1392 bytes of what TCP would
carry.  memcached sends each request's reply (each key's, in a text
multiget) as a message of its own.
"""

import os
import socket
import struct
import subprocess
import threading

import pytest

from conftest import free_port, save_fuzz_seed, wait_for, wait_udp_read
from test_binary import req as bin_req, rsp as bin_rsp, GETK, GETKQ, NOOP

# UDP sockets are the engines' too, and a reply waits for its pass's sync.
pytestmark = [pytest.mark.engine, pytest.mark.durability]

FRAME = struct.Struct(">HHHH")


class Udp:
    def __init__(self, port, timeout=5.0):
        self.addr = ("127.0.0.1", port)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.settimeout(timeout)

    def close(self):
        self.sock.close()

    def send(self, payload, rid=1, seq=0, total=1, raw=None):
        data = raw if raw is not None else \
            FRAME.pack(rid, seq, total, 0) + payload
        save_fuzz_seed("udp", data)
        self.sock.sendto(data, self.addr)

    def taken(self):
        """Wait until the server has read every datagram sent to it: the
        request sent next is read after them."""
        wait_udp_read(self.addr[1])

    def recv(self):
        d, _ = self.sock.recvfrom(65536)
        return FRAME.unpack(d[:8]) + (d[8:],)

    def call(self, payload, want, rid=1):
        """Send one datagram; read exactly len(want) datagrams, each
        (seq, total, bytes) with the request id echoed."""
        self.send(payload, rid)
        got = [self.recv() for _ in want]
        assert [(g[0], g[1], g[2], g[4]) for g in got] == \
            [(rid,) + w for w in want]
        assert all(g[3] == 0 for g in got)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@pytest.fixture
def udp_server(server_factory):
    port = free_port()
    s = server_factory("-U", str(port))
    s.udp_port = port
    return s


@pytest.fixture
def u(udp_server):
    with Udp(udp_server.udp_port) as client:
        yield client


def one(data):
    return [(0, 1, data)]


# ---------------------------------------------------------------------------
# text and meta over UDP
# ---------------------------------------------------------------------------

def test_set_get_delete(u):
    u.call(b"set a 0 0 1\r\nx\r\n", one(b"STORED\r\n"), rid=7)
    u.call(b"get a\r\n", one(b"VALUE a 0 1\r\nx\r\nEND\r\n"), rid=8)
    u.call(b"get zz\r\n", one(b"END\r\n"), rid=0xffff)
    u.call(b"delete a\r\n", one(b"DELETED\r\n"))
    u.call(b"delete a\r\n", one(b"NOT_FOUND\r\n"))
    u.call(b"bogus\r\n", one(b"ERROR\r\n"))


def test_multiget_one_message_per_key(u):
    u.call(b"set a 0 0 1\r\nx\r\nset b 5 0 2\r\nyy\r\n",
           one(b"STORED\r\n") * 2)
    u.call(b"get a b zz\r\n", one(b"VALUE a 0 1\r\nx\r\n") +
           one(b"VALUE b 5 2\r\nyy\r\n") + one(b"END\r\n"))
    u.call(b"get a b\r\n", one(b"VALUE a 0 1\r\nx\r\n") +
           one(b"VALUE b 5 2\r\nyy\r\nEND\r\n"))
    # a first key missing leaves an empty message: a lone frame, total 0
    u.call(b"get zz a\r\n", [(0, 0, b"")] +
           one(b"VALUE a 0 1\r\nx\r\nEND\r\n"))
    u.call(b"get zz yy\r\n", [(0, 0, b"")] + one(b"END\r\n"))
    # ... but one after a reply goes with it
    u.call(b"get a zz a\r\n", one(b"VALUE a 0 1\r\nx\r\n") +
           one(b"VALUE a 0 1\r\nx\r\nEND\r\n"))


def test_two_requests_in_a_datagram(u):
    u.call(b"set a 0 0 1\r\nx\r\nget a\r\nmn\r\n",
           one(b"STORED\r\n") + one(b"VALUE a 0 1\r\nx\r\nEND\r\n") +
           one(b"MN\r\n"))


def test_meta(u):
    u.call(b"ms m 2 T0\r\nhi\r\nmg m v k\r\nmg zz v q\r\nmn\r\n",
           one(b"HD\r\n") + one(b"VA 2 km\r\nhi\r\n") + one(b"MN\r\n"))


def test_noreply_sends_nothing(u):
    u.call(b"set b 0 0 1 noreply\r\ny\r\nget b\r\n",
           one(b"VALUE b 0 1\r\ny\r\nEND\r\n"))


def test_large_value_in_several_datagrams(u, udp_server):
    value = bytes(range(256)) * 12        # 3072 bytes
    with udp_server.conn() as c:
        c.call(b"set big 3 0 3072\r\n" + value + b"\r\n", b"STORED\r\n")
    reply = b"VALUE big 3 3072\r\n" + value + b"\r\nEND\r\n"
    assert len(reply) == 3097
    u.call(b"get big\r\n", [(0, 3, reply[:1392]), (1, 3, reply[1392:2784]),
                            (2, 3, reply[2784:])])


def test_quit_sends_a_lone_frame(u):
    u.call(b"quit\r\nget a\r\n", [(0, 0, b"")])
    u.call(b"version\r\n", [(0, 1, u_version(u))])


def u_version(u):
    u.send(b"version\r\n", rid=99)
    return u.recv()[4]


# ---------------------------------------------------------------------------
# binary over UDP
# ---------------------------------------------------------------------------

def test_binary(u):
    u.call(b"set a 0 0 1\r\nx\r\n", one(b"STORED\r\n"))
    u.send(bin_req(GETK, b"a", opaque=0xab), rid=5)
    rid, seq, total, _, data = u.recv()
    cas = struct.unpack(">Q", data[16:24])[0]
    assert (rid, seq, total) == (5, 0, 1)
    assert data == bin_rsp(GETK, extras=b"\0\0\0\0", key=b"a", value=b"x",
                           cas=cas, opaque=0xab)
    u.call(bin_req(GETKQ, b"a", opaque=1) + bin_req(GETKQ, b"zz") +
           bin_req(NOOP, opaque=2),
           one(bin_rsp(GETKQ, extras=b"\0\0\0\0", key=b"a", value=b"x",
                       cas=cas, opaque=1)) + one(bin_rsp(NOOP, opaque=2)))


# ---------------------------------------------------------------------------
# what is dropped: once the server has read it, the reply to the request
# sent next is the next datagram
# ---------------------------------------------------------------------------

def test_short_datagrams_dropped(u):
    u.send(b"", raw=b"\0\1\0\0\0\1\0\0")        # a frame and nothing
    u.send(b"", raw=b"\0\1\0")                   # less than a frame
    u.taken()
    u.call(b"version\r\n", [(0, 1, u_version(u))])


def test_request_in_several_datagrams_dropped(u):
    u.send(b"get a\r\n", total=2)
    u.send(b"get a\r\n", seq=1, total=2)
    u.taken()
    # sequence number and reserved field of a one-datagram request are
    # not looked at
    u.send(b"", raw=FRAME.pack(3, 9, 1, 7) + b"get a\r\n")
    assert u.recv() == (3, 0, 1, 0, b"END\r\n")


def test_request_cut_short_is_dropped(u):
    # a value longer than what the datagram holds: no reply, nothing kept
    u.send(b"set big2 0 0 2000000\r\n" + b"z" * 100 + b"\r\n")
    u.send(b"set c 0 0 10\r\nabc")
    u.taken()
    u.call(b"get big2 c\r\n", [(0, 0, b"")] + one(b"END\r\n"))


def test_request_id_reused(u):
    for _ in range(3):
        u.call(b"get a\r\n", one(b"END\r\n"), rid=42)


def test_many_clients_at_once(udp_server):
    """Four sockets, each with its own keys, 200 requests each at once:
    every reply comes back to its sender with its own request id."""
    errors = []

    def client(n):
        try:
            with Udp(udp_server.udp_port) as c:
                for i in range(200):
                    key = b"c%dk%d" % (n, i)
                    c.call(b"set %s 0 0 %d\r\n%s\r\n" % (key, len(key), key),
                           one(b"STORED\r\n"), rid=i)
                    c.call(b"get %s\r\n" % key,
                           one(b"VALUE %s 0 %d\r\n%s\r\nEND\r\n"
                               % (key, len(key), key)), rid=i + 1000)
        except Exception as e:      # reported by the main thread
            errors.append(repr(e))

    threads = [threading.Thread(target=client, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


# ---------------------------------------------------------------------------
# stats, flags
# ---------------------------------------------------------------------------

def test_stats(server_factory):
    port = free_port()
    s = server_factory("-U", str(port), "-t", "3")
    with Udp(port) as u:
        u.call(b"get a\r\n", one(b"END\r\n"))
    with s.conn() as c:
        # three UDP sockets count as connections, as in memcached, with
        # this client (once the start-up check's close has been seen)
        st = wait_for(lambda: (st := c.stats())["curr_connections"] == "4"
                      and st, what="curr_connections 4")
        settings = c.stats("settings")
        conns = c.get_block(b"stats conns\r\n")
    assert st["curr_connections"] == "4"
    # the listener, three sockets, the start-up check and this client
    assert st["total_connections"] == "6"
    assert int(st["cmd_get"]) == 1 and int(st["get_misses"]) == 1
    assert settings["udpport"] == str(port)
    assert settings["num_threads_per_udp"] == "3"
    rows = [line for line in conns.split(b"\r\n") if b":UDP UDP" in line]
    assert len(rows) == 3
    assert conns.count(b":addr udp:127.0.0.1:%d\r\n" % port) == 3


def test_u_alone_moves_tcp_too(binary, tmp_path):
    port = free_port()      # free over TCP and UDP
    cmd = [binary, "-l", "127.0.0.1", "-U", str(port)]
    if os.geteuid() == 0:
        cmd += ["-u", "root"]
    err = open(tmp_path / "stderr", "wb")
    p = subprocess.Popen(cmd, stderr=err)
    def answers_on_tcp():
        assert p.poll() is None, "exit %s: %r" % (
            p.poll(), (tmp_path / "stderr").read_bytes())
        try:
            with socket.create_connection(("127.0.0.1", port), 1) as c:
                c.sendall(b"version\r\n")
                return c.recv(100).startswith(b"VERSION ")
        except OSError:
            return False
    try:
        # a sanitizer build starts slowly
        wait_for(answers_on_tcp, 30, "a TCP listener on the UDP port")
    finally:
        p.terminate()
        p.wait(10)
        err.close()


@pytest.mark.parametrize("kind", [socket.SOCK_STREAM, socket.SOCK_DGRAM],
                         ids=["tcp", "udp"])
def test_port_in_use(run, kind):
    # memcached's words and exit status (71, EX_OSERR) for either port
    with socket.socket(socket.AF_INET, kind) as busy:
        busy.bind(("127.0.0.1", 0))
        if kind == socket.SOCK_STREAM:
            busy.listen()
        port = str(busy.getsockname()[1])
        r = run("-l", "127.0.0.1", *(["-p", port] if kind ==
                                      socket.SOCK_STREAM else
                                      ["-p", "0", "-U", port]))
    assert r.returncode == 71
    assert r.stderr == (b"failed to listen on one of interface(s) "
                        b"127.0.0.1: Address already in use\n")
