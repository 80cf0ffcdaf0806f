"""Ports the kernel picks: -p -1 and -U -1, and the port file a test
harness reads them from (MEMCACHED_PORT_FILENAME), side by side with
Debian's memcached.

The server writes `<file>.lck` while it binds, one line per TCP and UDP
socket on an IP address, and renames it to `<file>` once every socket
is bound: the file's appearance says the server listens."""

import os
import re
import signal
import socket
import subprocess
import tempfile

import pytest

from conftest import (SANITIZER_MARKS, Conn, against_memcached,
                      which_binary, wait_for)

BOTH = [pytest.param("memcached-pm"),
        pytest.param("memcached", marks=against_memcached)]


class PortFileServer:
    """A server started with port options of the test's choosing and
    MEMCACHED_PORT_FILENAME; ports() waits for the file and reads it."""

    def __init__(self, binary, *flags, socket_path=None):
        self.dir = tempfile.TemporaryDirectory(prefix="mcpm-ports-")
        self.file = os.path.join(self.dir.name, "ports")
        cmd = [binary, "-l", "127.0.0.1"] + list(flags)
        if socket_path:
            cmd = [binary, "-s", socket_path] + list(flags)
        if os.geteuid() == 0:
            cmd += ["-u", "root"]
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=self.err, env=dict(os.environ,
                                      MEMCACHED_PORT_FILENAME=self.file))

    def ports(self):
        wait_for(lambda: os.path.exists(self.file) or self.proc.poll(),
                 what="the port file")
        assert self.proc.poll() is None, self.stderr()
        with open(self.file) as f:
            return f.read()

    def stderr(self):
        self.err.seek(0)
        return self.err.read().decode(errors="replace")

    def stop(self):
        self.proc.send_signal(signal.SIGKILL if self.proc.poll() is None
                              else 0)
        self.proc.wait()
        err = self.stderr()
        self.dir.cleanup()
        assert not any(m in err for m in SANITIZER_MARKS), err


@pytest.mark.parametrize("which", BOTH)
def test_ephemeral_tcp_and_udp_ports_are_written_down(binary, which):
    s = PortFileServer(which_binary(which, binary), "-p", "-1", "-U", "-1")
    try:
        text = s.ports()
        m = re.fullmatch(r"TCP INET: (\d+)\nUDP INET: (\d+)\n", text)
        assert m, text
        tcp, udp = int(m.group(1)), int(m.group(2))
        assert tcp > 0 and udp > 0
        assert os.listdir(s.dir.name) == ["ports"]      # no .lck left
        with Conn(tcp) as c:
            c.call(b"set k 0 0 1\r\nv\r\n", b"STORED\r\n")
            st = c.stats("settings")
            assert (st["tcpport"], st["udpport"]) == ("-1", "-1")
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.settimeout(5)
        u.sendto(b"\0\7\0\0\0\1\0\0get k\r\n", ("127.0.0.1", udp))
        assert u.recv(2048) == b"\0\7\0\0\0\1\0\0VALUE k 0 1\r\nv\r\nEND\r\n"
        u.close()
    finally:
        s.stop()


@pytest.mark.parametrize("which", BOTH)
def test_ephemeral_tcp_port_alone(binary, which):
    """-p -1 without -U: a TCP line only, and UDP stays off."""
    s = PortFileServer(which_binary(which, binary), "-p", "-1")
    try:
        text = s.ports()
        m = re.fullmatch(r"TCP INET: (\d+)\n", text)
        assert m, text
        with Conn(int(m.group(1))) as c:
            st = c.stats("settings")
            assert (st["tcpport"], st["udpport"]) == ("-1", "0")
    finally:
        s.stop()


@pytest.mark.parametrize("which", BOTH)
def test_udp_port_alone_also_sets_tcp(binary, which):
    """-U -1 alone: TCP takes the UDP setting, as memcached does; each
    gets its own port from the kernel."""
    s = PortFileServer(which_binary(which, binary), "-U", "-1")
    try:
        m = re.fullmatch(r"TCP INET: (\d+)\nUDP INET: (\d+)\n", s.ports())
        assert m
        with Conn(int(m.group(1))) as c:
            st = c.stats("settings")
            assert (st["tcpport"], st["udpport"]) == ("-1", "-1")
    finally:
        s.stop()


@pytest.mark.mcpm
def test_udp_workers_share_the_picked_port(binary):
    """memcached-pm gives each worker its own UDP socket: at -U -1 they
    all bind the port the first one got, so every worker serves it."""
    s = PortFileServer(binary, "-p", "-1", "-U", "-1", "-t", "4")
    try:
        m = re.fullmatch(r"TCP INET: (\d+)\nUDP INET: (\d+)\n", s.ports())
        assert m
        udp = int(m.group(2))
        with open("/proc/net/udp") as f:
            bound = [line for line in f.read().splitlines()[1:]
                     if int(line.split()[1].split(":")[1], 16) == udp]
        assert len(bound) == 4
    finally:
        s.stop()


def test_a_unix_socket_writes_no_port_file(binary, tmp_path):
    """With -s there is no TCP or UDP socket, and (as memcached) no file."""
    path = str(tmp_path / "sock")
    s = PortFileServer(binary, socket_path=path)
    try:
        def listening():
            try:
                socket.socket(socket.AF_UNIX).connect(path)
                return True
            except OSError:
                return False
        wait_for(listening, what="the unix socket")
        assert os.listdir(s.dir.name) == []
    finally:
        s.stop()


@pytest.mark.mcpm
def test_a_port_below_minus_one_is_refused(run):
    r = run("-p", "-2")
    assert r.returncode == 64
    assert b"Invalid port number -2" in r.stderr
