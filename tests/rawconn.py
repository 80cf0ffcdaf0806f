"""The test suite's raw-socket client: a text-protocol connection that
asserts on bytes (Conn), and what it keeps for the fuzzers' seed corpus.
conftest.py hands it to the tests; it starts no server.
"""

import hashlib
import os
import re
import socket
import time
from pathlib import Path

VERSION_RE = re.compile(rb"^VERSION 1\.6\.\d+\S*\r\n$")

# seed corpus (script/fuzz): each connection's bytes, or each datagram,
# one file, named by its hash, under text/, binary/ or udp/.
FUZZ_SEEDS = os.environ.get("MCPM_FUZZ_SEEDS", "")
FUZZ_SEED_MAX = 64 * 1024


def save_fuzz_seed(kind, data):
    """Keep `data` as a seed of the `kind` fuzzer (see FUZZ_SEEDS)."""
    if not FUZZ_SEEDS or not data:
        return
    if kind == "stream":
        kind = "binary" if data[0] == 0x80 else "text"
    d = Path(FUZZ_SEEDS) / kind
    d.mkdir(parents=True, exist_ok=True)
    data = data[:FUZZ_SEED_MAX]
    (d / hashlib.sha1(data).hexdigest()).write_bytes(data)


class ConnClosed(Exception):
    """The server closed the connection before the expected bytes came."""


class Conn:
    """A raw text-protocol connection that asserts on bytes.

    Reads never block longer than `timeout` seconds; a timeout raises
    socket.timeout (so a missing reply fails the test instead of hanging),
    an EOF raises ConnClosed carrying the bytes read so far.
    """

    def __init__(self, port, timeout=5.0, tls=None, session=None):
        self.sock = socket.create_connection(("127.0.0.1", port),
                                             timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls is not None:
            self.sock = tls.wrap_socket(self.sock, session=session)
        self.timeout = timeout
        self.buf = b""
        self.sent = bytearray()     # what was sent, a seed (FUZZ_SEED_MAX)

    def close(self):
        if FUZZ_SEEDS and self.sent:
            save_fuzz_seed("stream", bytes(self.sent))
            self.sent = bytearray()
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, data):
        if isinstance(data, str):
            data = data.encode()
        if FUZZ_SEEDS and len(self.sent) < FUZZ_SEED_MAX:
            self.sent += data
        self.sock.sendall(data)

    def _fill(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("timed out; have %r" % self.buf[-200:])
        self.sock.settimeout(left)
        try:
            chunk = self.sock.recv(1 << 20)
        except ConnectionResetError:
            chunk = b""
        except socket.timeout:
            raise socket.timeout("timed out; have %r" % self.buf[-200:])
        if not chunk:
            raise ConnClosed(self.buf)
        self.buf += chunk

    def read_exact(self, n, timeout=None):
        deadline = time.monotonic() + (timeout or self.timeout)
        while len(self.buf) < n:
            self._fill(deadline)
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_until(self, term=b"\r\n", timeout=None):
        """Return everything up to and including `term`."""
        deadline = time.monotonic() + (timeout or self.timeout)
        start = 0
        while True:
            i = self.buf.find(term, start)
            if i >= 0:
                n = i + len(term)
                out, self.buf = self.buf[:n], self.buf[n:]
                return out
            start = max(0, len(self.buf) - len(term) + 1)
            self._fill(deadline)

    def readline(self, timeout=None):
        return self.read_until(b"\r\n", timeout)

    def call(self, req, expect, timeout=None):
        """Send `req`, read exactly len(expect) bytes, assert equality."""
        if isinstance(expect, str):
            expect = expect.encode()
        self.send(req)
        got = self.read_exact(len(expect), timeout)
        assert got == expect
        return got

    def req(self, req, term=b"\r\n", timeout=None):
        self.send(req)
        return self.read_until(term, timeout)

    def get_block(self, req, timeout=None):
        """Send a retrieval command and return the reply up to END."""
        self.send(req)
        return self.read_until(b"END\r\n", timeout)

    def sync(self):
        """Assert no stray bytes are pending: `version` must come next."""
        line = self.req(b"version\r\n")
        assert VERSION_RE.match(line), line

    def wait_closed(self, timeout=3.0):
        """True if the peer closes within `timeout`; returns the bytes read
        meanwhile through self.buf."""
        deadline = time.monotonic() + timeout
        try:
            while True:
                self._fill(deadline)
        except ConnClosed:
            return True
        except socket.timeout:
            return False

    def stats(self, arg=""):
        cmd = ("stats %s" % arg).strip() + "\r\n"
        return parse_stats(self.get_block(cmd))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def parse_stats(block):
    out = {}
    for line in block.split(b"\r\n"):
        if line.startswith(b"STAT "):
            parts = line.decode().split(" ", 2)
            out[parts[1]] = parts[2] if len(parts) > 2 else ""
    return out


def serves(port):
    """Does a server on port answer `version` now?"""
    try:
        with Conn(port, timeout=1.0) as c:
            return c.req(b"version\r\n").startswith(b"VERSION ")
    except (OSError, ConnClosed):
        return False
