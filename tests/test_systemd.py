"""Restarts no client sees under systemd, with the test playing the
service manager (svcman.py): the listeners come from a .socket unit and
are matched to -l, -p, -U and -s (a socket no option names is refused);
at a stop the open connections go into the fd store with their state
and come back at the next start; without a .socket unit the listeners
wait in the fd store themselves, a crash included.  The port never
refuses a connection."""

import os
from pathlib import Path
import re
import shutil
import socket
import struct
import tempfile
import threading

import pytest
from pymemcache.client.base import Client

from conftest import (SANITIZER_MARKS, Conn, base_args, engine_args,
                      free_port, tls_client_context, wait_for)
from svcman import ServiceManager
import realsystemd
from test_takeover import assert_versions, fd_room, open_idle
from test_tls import certs, tls_flags  # noqa: F401  (a fixture)

pytestmark = [pytest.mark.mcpm, pytest.mark.engine]


def tcp_listener(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(128)
    return s


def udp_socket(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", port))
    return s


@pytest.fixture
def managers():
    """ServiceManager(...) factories; each closed after the test, its
    processes checked for a clean exit and no sanitizer report.  (A test
    asks for it after `memfile`, so that its servers stop, writing -e's
    .meta, before the file and what is beside it are removed.)"""
    made = []

    def make(*a, **k):
        m = ServiceManager(*a, **k)
        made.append(m)
        return m
    yield make
    problems = []
    for m in made:
        rc = m.stop()
        if rc not in (None, 0):
            problems.append("exit status %s after SIGTERM" % rc)
        for i in range(len(m.errs)):
            err = m.stderr(i)
            problems += [mark for mark in SANITIZER_MARKS if mark in err]
        m.close()
    assert problems == []


def argv(binary, port, *flags):
    return [binary] + base_args(port) + list(flags) + engine_args()


def inode(pid, fd):
    return os.stat("/proc/%d/fd/%d" % (pid, fd)).st_ino


# --------------------------------------------------------------------------
# socket activation
# --------------------------------------------------------------------------

def test_a_tcp_listener_from_the_socket_unit(binary, managers):
    port = free_port()
    lst = tcp_listener(port)
    m = managers([("memcached-pm.socket", lst)])
    m.start(argv(binary, port, "-v"))
    assert ("fd 3 from systemd socket activation: tcp:127.0.0.1:%d" % port
            in m.stderr())
    # the server listens on the unit's socket, not one of its own
    assert inode(m.proc.pid, 3) == os.fstat(lst.fileno()).st_ino
    with Conn(port) as c:
        c.call(b"set a 0 0 1\r\n1\r\n", b"STORED\r\n")
    assert "READY=1\nSTATUS=serving, 0 reloads" in m.messages


def test_a_udp_socket_from_the_socket_unit(binary, managers):
    port = free_port()
    m = managers([("tcp", tcp_listener(port)), ("udp", udp_socket(port))])
    m.start(argv(binary, port, "-U", str(port), "-t", "2", "-v"))
    assert "udp:127.0.0.1:%d" % port in m.stderr()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        u.settimeout(5)
        u.sendto(struct.pack(">HHHH", 7, 0, 1, 0) + b"get x\r\n",
                 ("127.0.0.1", port))
        assert u.recv(100) == struct.pack(">HHHH", 7, 0, 1, 0) + b"END\r\n"


def test_a_unix_socket_from_the_socket_unit(binary, managers):
    d = tempfile.mkdtemp(prefix="mcpm-sd-")
    path = os.path.join(d, "mc.sock")
    lst = socket.socket(socket.AF_UNIX)
    lst.bind(path)
    lst.listen(16)
    m = managers([("memcached-pm.socket", lst)])
    m.start([binary, "-s", path, "-v"] + engine_args() +
            (["-u", "root"] if os.geteuid() == 0 else []))
    assert "fd 3 from systemd socket activation: unix:" + path in m.stderr()
    with socket.socket(socket.AF_UNIX) as c:
        c.settimeout(5)
        c.connect(path)
        c.sendall(b"version\r\n")
        assert c.recv(100).startswith(b"VERSION ")
    m.stop()
    assert os.path.exists(path)     # the unit's socket file stays
    os.unlink(path)
    os.rmdir(d)


def test_a_tls_listener_from_the_socket_unit(binary, managers,
                                             certs):  # noqa: F811
    port = free_port()
    m = managers([("memcached-pm.socket", tcp_listener(port))])
    m.start(argv(binary, port, *tls_flags(certs)))
    raw = socket.create_connection(("127.0.0.1", port), timeout=5)
    with tls_client_context().wrap_socket(raw) as t:
        t.sendall(b"version\r\n")
        assert t.recv(100).startswith(b"VERSION ")


def test_a_socket_no_option_names_is_refused(binary, managers):
    port, other = free_port(), free_port()
    m = managers([("memcached-pm.socket", tcp_listener(other))])
    p = m.start(argv(binary, port), wait=False)
    assert p.wait(20) == 78                 # EX_CONFIG
    assert ("systemd socket activation: fd 3 is tcp:127.0.0.1:%d, which "
            "no -l, -p, -U or -s option names" % other) in m.stderr()


# --------------------------------------------------------------------------
# the fd store
# --------------------------------------------------------------------------

def connects_meanwhile(port, stop, failed):
    """Connect again and again until stop, each connection asking for
    `version` and reading the answer before the next; count what was
    refused or not answered.  (Waiting for the answer keeps at most one
    connection in the listener's backlog while a node restarts: without
    it, a thousand may wait there and take -c's every slot when the
    successor accepts them.)"""
    while not stop.is_set():
        try:
            with socket.create_connection(("127.0.0.1", port),
                                          timeout=10) as s:
                s.sendall(b"version\r\n")
                reply = b""
                while not reply.endswith(b"\r\n"):
                    more = s.recv(100)
                    if not more:
                        break
                    reply += more
                if not reply.startswith(b"VERSION "):
                    failed.append(reply)
        except OSError as e:
            failed.append(repr(e))


@pytest.mark.parametrize("unit", [True, False],
                         ids=["socket-unit", "no-socket-unit"])
def test_restarts_keep_the_connections_and_refuse_none(binary, memfile,
                                                       managers, unit):
    port = free_port()
    m = managers([("memcached-pm.socket", tcp_listener(port))] if unit
                 else [])
    m.start(argv(binary, port, "-e", memfile))
    mc = Client(("127.0.0.1", port), connect_timeout=5, timeout=5)
    mc.set("k", "v0", noreply=False)
    sock = mc.sock
    if not unit:
        assert m.stored() == ["mcpm-listen"]
    stop, failed = threading.Event(), []
    t = threading.Thread(target=connects_meanwhile,
                         args=(port, stop, failed))
    t.start()
    taken = 0
    try:
        for i in range(5):
            assert m.restart() == 0
            assert mc.get("k") == b"v%d" % i
            mc.set("k", "v%d" % (i + 1), noreply=False)
            assert mc.sock is sock
            # what the start took is out of the store again
            assert m.stored("mcpm-c") == m.stored("mcpm-state") == []
            assert m.stored("mcpm-index") == []
            with Conn(port) as c:
                taken += c.stats()["recovery_image"] == "1"
    finally:
        stop.set()
        t.join()
    assert failed == []
    # the DRAM index came with the file, no scan: each start takes it
    # where the file's old address is free in the new process, which the
    # kernel's layout of that process decides (one start in a CI run
    # found it taken)
    assert taken >= 4, taken
    assert "STOPPING=1" in m.messages
    mc.close()


def answers(c):
    """Does connection c answer `version` (else it was closed)?"""
    try:
        c.sendall(b"version\r\n")
        got = b""
        while not got.endswith(b"\r\n"):
            more = c.recv(64)
            if not more:
                return False
            got += more
        return got.startswith(b"VERSION ")
    except ConnectionResetError:
        return False


def test_a_store_smaller_than_the_connections(binary, memfile, managers):
    """FileDescriptorStoreMax=40 and 60 connections: at the restart the
    store keeps 38 (the state file and the index take two places), the
    other 22 are closed at a request boundary, the node says so once with
    the numbers, and its successor counts both in stats."""
    port = free_port()
    m = managers([("memcached-pm.socket", tcp_listener(port))],
                 fdstore_max=40)
    m.start(argv(binary, port, "-e", memfile))
    conns = open_idle(port, 60)
    assert m.restart() == 0
    assert m.stderr(0).count("systemd: the fd store has room for 40 "
                             "descriptors: 22 of the 60 connections closed "
                             "at a request boundary") == 1
    assert sum(answers(c) for c in conns) == 38
    with Conn(port) as c:
        st = c.stats()
    assert (st["handover_conns_taken"], st["handover_conns_closed"]) == \
        ("38", "22")
    for c in conns:
        c.close()


# --------------------------------------------------------------------------
# reload: a takeover inside the unit, under Debian's own systemd
# --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def real_systemd():
    """Debian's systemd, booted in namespaces of its own (realsystemd.py),
    for the tests of this module that need the real one."""
    why = realsystemd.unavailable()
    if why:
        pytest.skip("Debian's systemd cannot boot here: " + why)
    work = tempfile.mkdtemp(prefix="mcpm-systemd-", dir="/var/lib")
    sd = realsystemd.Systemd(work)
    try:
        sd.boot()
        yield sd
    finally:
        sd.shutdown()
        shutil.rmtree(work, ignore_errors=True)


def sanitizer_env():
    return "".join("Environment=%s=%s\n" % (k, os.environ[k])
                   for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS")
                   if k in os.environ)


@pytest.mark.parametrize("access", ["all", "main"])
def test_reload_keeps_the_units_main_process(binary, memfile, real_systemd,
                                             access):
    """systemctl reload (SIGUSR2) under systemd: the main process starts
    its successor from its binary's path, hands it the node, becomes that
    binary itself (the same pid) and takes the node back, so that systemd
    goes on supervising its own child, whatever NotifyAccess= says.  A
    client and 1,000 idle connections move through five reloads, none of
    them through the fd store, nor the .socket unit's listener; then a
    stop is a clean stop (no SIGKILL: the next start takes the saved
    index) and no unit has failed."""
    sd, n, port = real_systemd, 1000, free_port()
    fd_room(n + 300)
    name = "mcpm-reload-%d" % port
    sd.write("/run/systemd/system/%s.socket" % name,
             "[Socket]\nListenStream=127.0.0.1:%d\n" % port)
    sd.write("/run/systemd/system/%s.service" % name,
             "[Service]\nType=notify\nNotifyAccess=%s\n"
             "ExecStart=%s %s\nExecReload=/bin/kill -USR2 $MAINPID\n"
             "RuntimeDirectory=%s\nFileDescriptorStoreMax=%d\n"
             "Environment=FDSTORE=%d\nLimitNOFILE=%d\n%s"
             % (access, os.path.abspath(binary), " ".join(
                 base_args(port) + engine_args() +
                 ["-e", memfile, "-o", "takeover=/run/%s/t.sock" % name,
                  "-c", str(n + 200)]), name, n + 100, n + 100, n + 400,
                sanitizer_env()))
    sd.systemctl("daemon-reload")
    sd.systemctl("start", name + ".socket", name + ".service")
    main = sd.main_pid(name + ".service")
    idle = open_idle(port, n)
    mc = Client(("127.0.0.1", port), connect_timeout=5, timeout=5)
    mc.set("k", "v0", noreply=False)
    sock = mc.sock
    assert sd.show(name + ".service", "StatusText") == "serving, 0 reloads"
    for i in range(5):
        sd.systemctl("reload", name + ".service")
        # the unit's status says when the main process serves again
        wait_for(lambda: sd.show(name + ".service", "StatusText") ==
                 "serving, %d reloads" % (i + 1), 30,
                 "reload %d to end" % (i + 1))
        assert sd.main_pid(name + ".service") == main
        assert mc.get("k") == b"v%d" % i
        mc.set("k", "v%d" % (i + 1), noreply=False)
        assert mc.sock is sock
        assert sd.show(name + ".service", "NFileDescriptorStore") == "0"
    assert_versions(idle)
    with Conn(port) as c:
        st = c.stats()
    assert st["pid"] == str(main)
    assert (st["handover_conns_taken"], st["handover_conns_closed"]) == \
        (str(n + 1), "0")
    mc.close()
    for c in idle:
        c.close()
    cursor = sd.cursor()
    sd.systemctl("stop", name + ".service")
    sd.systemctl("start", name + ".service")
    with Conn(port) as c:
        assert c.stats()["recovery_image"] == "1"     # a clean stop
    sd.systemctl("stop", name + ".service", name + ".socket")
    log = sd.journal(cursor)
    assert "Deactivated successfully" in log, log[-3000:]
    bad = [line for line in sd.journal().splitlines()
           if "not our child" in line or "SIGKILL" in line
           or any(mark in line for mark in SANITIZER_MARKS)]
    assert bad == [] and sd.failed() == [], (bad, sd.failed())


def test_a_crash_keeps_the_listener_in_the_fd_store(binary, memfile,
                                                     managers):
    """Without a .socket unit, the listener the server opened waits in the
    store: after a SIGKILL the next start takes it, and a client that
    connected meanwhile is served."""
    port = free_port()
    m = managers()
    m.start(argv(binary, port, "-e", memfile))
    with Conn(port) as c:
        c.call(b"set a 0 0 1\r\n1\r\n", b"STORED\r\n")
    m.proc.kill()
    m.proc.wait()
    waiting = socket.create_connection(("127.0.0.1", port), timeout=10)
    m.start()

    def served():
        # a miss while the file is read back after the crash, at first
        waiting.sendall(b"get a\r\n")
        reply = waiting.recv(100)
        assert reply in (b"VALUE a 0 1\r\n1\r\nEND\r\n", b"END\r\n")
        return reply != b"END\r\n"
    wait_for(served, 10, "the item read back")
    waiting.close()


def test_a_stop_for_good_closes_the_connections(binary, memfile, managers):
    port = free_port()
    m = managers([("memcached-pm.socket", tcp_listener(port))])
    m.start(argv(binary, port, "-e", memfile))
    with Conn(port) as c:
        c.call(b"set a 0 0 1\r\n1\r\n", b"STORED\r\n")
        assert m.stop() == 0            # the store emptied
        c.wait_closed()
    assert m.stored() == []


def test_stale_connections_in_the_store_are_closed(binary, managers):
    """Connections the store holds without a state file (a node killed
    while it put them there) are closed and taken out of it."""
    port = free_port()
    m = managers([("memcached-pm.socket", tcp_listener(port))])
    a, b = socket.socketpair()
    m.store.append(["mcpm-c0", os.dup(b.fileno())])
    b.close()
    m.start(argv(binary, port))
    wait_for(lambda: m.stored("mcpm-c") == [], 10)
    a.settimeout(5)
    assert a.recv(10) == b""
    a.close()


