"""Restarts no client sees, under Debian's own systemd (realsystemd.py:
PID 1 of namespaces of its own): the listeners come from a .socket unit
and are matched to -l, -p, -U and -s (a socket no option names is
refused); at a stop the open connections go into the fd store with
their state and come back at the next start; without a .socket unit the
listeners wait in the fd store themselves, a crash included; a reload
is a takeover inside the unit that keeps its main process.  The port
never refuses a connection."""

import os
import shutil
import socket
import struct
import tempfile
import threading

import pytest
from pymemcache.client.base import Client

from conftest import (SANITIZER_MARKS, Conn, base_args, engine_args,
                      free_port, tls_client_context, wait_for)
import realsystemd
from test_takeover import assert_versions, fd_room, open_idle
from test_durability import diskfile  # noqa: F401  (a fixture)
from test_tls import certs, tls_flags  # noqa: F401  (a fixture)

pytestmark = [pytest.mark.mcpm, pytest.mark.engine]


@pytest.fixture(scope="module")
def real_systemd(tmp_path_factory):
    """Debian's systemd, booted in namespaces of its own for this module's
    tests (in each pytest process that runs some), the suite's temporary
    directory shared with it."""
    why = realsystemd.unavailable()
    if why:
        pytest.skip("Debian's systemd cannot boot here: " + why)
    work = tempfile.mkdtemp(prefix="mcpm-systemd-", dir="/var/lib")
    sd = realsystemd.Systemd(work, shared=[
        str(tmp_path_factory.getbasetemp())])
    try:
        sd.boot()
        yield sd
    finally:
        sd.shutdown()
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture
def services(real_systemd):
    """service(name, port, argv, ...) -> realsystemd.Service; each stopped
    after the test, its log checked: no sanitizer report, no SIGKILL, no
    unit failed."""
    made = []

    def make(port, argv, **kw):
        svc = realsystemd.Service(real_systemd, "mcpm-t%d" % port, port,
                                  argv, **kw)
        made.append(svc)
        return svc
    cursor = real_systemd.cursor()
    yield make
    for svc in made:
        svc.stop()
    log = real_systemd.journal(cursor)
    bad = [line for line in log.splitlines()
           if "SIGKILL" in line or "not our child" in line
           or any(mark in line for mark in SANITIZER_MARKS)]
    assert bad == [], "\n".join(bad)
    assert real_systemd.failed() == []


def logged(svc, line):
    """Wait for the unit's log to have the line (journald writes it a
    moment after the server does)."""
    wait_for(lambda: line in svc.log(), 10, repr(line))


def argv(binary, port, *flags):
    return [os.path.abspath(binary)] + base_args(port) + list(flags) + \
        engine_args()


# --------------------------------------------------------------------------
# socket activation
# --------------------------------------------------------------------------

def test_a_tcp_listener_from_the_socket_unit(binary, services):
    port = free_port()
    svc = services(port, argv(binary, port, "-v"))
    svc.start()
    logged(svc, "fd 3 from systemd socket activation: tcp:127.0.0.1:%d"
           % port)
    with Conn(port) as c:
        c.call(b"set a 0 0 1\r\n1\r\n", b"STORED\r\n")
    assert svc.status() == "serving, 0 reloads"


def test_a_udp_socket_from_the_socket_unit(binary, services):
    port = free_port()
    svc = services(port, argv(binary, port, "-U", str(port), "-t", "2",
                              "-v"),
                   sockets=["ListenStream=127.0.0.1:%d" % port,
                            "ListenDatagram=127.0.0.1:%d" % port])
    svc.start()
    logged(svc, "udp:127.0.0.1:%d" % port)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        u.settimeout(5)
        u.sendto(struct.pack(">HHHH", 7, 0, 1, 0) + b"get x\r\n",
                 ("127.0.0.1", port))
        assert u.recv(100) == struct.pack(">HHHH", 7, 0, 1, 0) + b"END\r\n"


def test_a_unix_socket_from_the_socket_unit(binary, services, tmp_path):
    path = str(tmp_path / "mc.sock")
    port = free_port()
    svc = services(port, [os.path.abspath(binary), "-s", path, "-v"] +
                   engine_args() +
                   (["-u", "root"] if os.geteuid() == 0 else []),
                   sockets=["ListenStream=" + path])
    svc.port = None                 # nothing on TCP to wait for
    svc.start()
    logged(svc, "fd 3 from systemd socket activation: unix:" + path)
    with socket.socket(socket.AF_UNIX) as c:
        c.settimeout(5)
        c.connect(path)
        c.sendall(b"version\r\n")
        assert c.recv(100).startswith(b"VERSION ")
    svc.sd.systemctl("stop", svc.unit)
    assert os.path.exists(path)     # the unit's socket file stays


def test_a_tls_listener_from_the_socket_unit(binary, services,
                                             certs):  # noqa: F811
    port = free_port()
    svc = services(port, argv(binary, port, *tls_flags(certs)))
    svc.port = None                 # it answers in TLS only
    svc.start()
    raw = socket.create_connection(("127.0.0.1", port), timeout=5)
    with tls_client_context().wrap_socket(raw) as t:
        t.sendall(b"version\r\n")
        assert t.recv(100).startswith(b"VERSION ")


def test_a_socket_no_option_names_is_refused(binary, services):
    port, other = free_port(), free_port()
    svc = services(other, argv(binary, port), extra="Restart=no\n")
    assert svc.start(check=False).returncode != 0
    logged(svc, "status=78/CONFIG")
    logged(svc, "systemd socket activation: fd 3 is tcp:127.0.0.1:%d, which "
           "no -l, -p, -U or -s option names" % other)
    svc.sd.systemctl("reset-failed", svc.unit)


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
                                                       services, unit):
    port = free_port()
    svc = services(port, argv(binary, port, "-e", memfile),
                   sockets=None if unit else [])
    svc.start()
    mc = Client(("127.0.0.1", port), connect_timeout=5, timeout=5)
    mc.set("k", "v0", noreply=False)
    sock = mc.sock
    # without a socket unit the listener waits in the store itself
    assert svc.stored() == (0 if unit else 1)
    stop, failed = threading.Event(), []
    t = threading.Thread(target=connects_meanwhile,
                         args=(port, stop, failed))
    t.start()
    taken = 0
    try:
        for i in range(5):
            svc.restart()
            assert mc.get("k") == b"v%d" % i
            mc.set("k", "v%d" % (i + 1), noreply=False)
            assert mc.sock is sock
            # what the start took is out of the store again
            assert svc.stored() == (0 if unit else 1)
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


def test_a_store_smaller_than_the_connections(binary, memfile, services):
    """FileDescriptorStoreMax=40 and 60 connections: at the restart the
    store keeps 38 (the state file and the index take two places), the
    other 22 are closed at a request boundary, the node says so once with
    the numbers, and its successor counts both in stats."""
    port = free_port()
    svc = services(port, argv(binary, port, "-e", memfile), fdstore=40)
    svc.start()
    conns = open_idle(port, 60)
    svc.restart()
    said = ("systemd: the fd store has room for 40 descriptors: 22 of the "
            "60 connections closed at a request boundary")
    logged(svc, said)
    assert svc.log().count(said) == 1
    assert sum(answers(c) for c in conns) == 38
    with Conn(port) as c:
        st = c.stats()
    assert (st["handover_conns_taken"], st["handover_conns_closed"]) == \
        ("38", "22")
    for c in conns:
        c.close()


def test_a_crash_keeps_the_listener_in_the_fd_store(binary, memfile,
                                                     services):
    """Without a .socket unit, the listener the server opened waits in the
    store: after a SIGKILL, Restart= starts the node again, which takes
    it, and a client that connected meanwhile is served."""
    port = free_port()
    svc = services(port, argv(binary, port, "-e", memfile), sockets=[])
    svc.start()
    with Conn(port) as c:
        c.call(b"set a 0 0 1\r\n1\r\n", b"STORED\r\n")
    main = svc.main_pid()
    svc.sd.sh("kill -9 %d" % main)
    waiting = socket.create_connection(("127.0.0.1", port), timeout=10)
    wait_for(lambda: svc.main_pid() not in (0, main), 30, "Restart=")

    def served():
        # a miss while the file is read back after the crash, at first
        waiting.sendall(b"get a\r\n")
        reply = waiting.recv(100)
        assert reply in (b"VALUE a 0 1\r\n1\r\nEND\r\n", b"END\r\n")
        return reply != b"END\r\n"
    wait_for(served, 10, "the item read back")
    waiting.close()


def test_a_stop_for_good_closes_the_connections(binary, memfile, services):
    port = free_port()
    svc = services(port, argv(binary, port, "-e", memfile))
    svc.start()
    with Conn(port) as c:
        c.call(b"set a 0 0 1\r\n1\r\n", b"STORED\r\n")
        svc.sd.systemctl("stop", svc.unit)
        c.wait_closed()             # the store emptied
    assert svc.stored() == 0


# An ExecStartPre= that puts one end of a socket pair in the store as a
# connection (FDPOLL=0: systemd would drop it when its peer closes, as the
# script ends), then waits (BARRIER=1) until systemd has read it: a
# message whose sender is gone by then is dropped.
STALE = """import array, os, select, socket
def send(msg, fd):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    p = os.environ["NOTIFY_SOCKET"]
    p = "\\0" + p[1:] if p[0] == "@" else p
    s.sendmsg([msg], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                       array.array("i", [fd]).tobytes())], 0, p)
a, b = socket.socketpair()
send(b"FDSTORE=1\\nFDNAME=mcpm-c0\\nFDPOLL=0", b.fileno())
r, w = os.pipe()
send(b"BARRIER=1", w)
os.close(w)
select.select([r], [], [], 10)
"""


def test_stale_connections_in_the_store_are_closed(binary, services,
                                                   tmp_path):
    """Connections the store holds without a state file (a node killed
    while it put them there) are closed and taken out of it: one put
    there before the start (by ExecStartPre=, which NotifyAccess=all lets
    speak for the unit)."""
    port = free_port()
    script = tmp_path / "stale.py"
    script.write_text(STALE)
    svc = services(port, argv(binary, port, "-v"),
                   extra="ExecStartPre=/usr/bin/python3 %s\n" % script)
    svc.start()
    # the listener and the stale connection passed; none to serve
    logged(svc, "systemd: 2 sockets passed, 0 connections to serve")
    wait_for(lambda: svc.stored() == 0, 10, "the stale one out")


# --------------------------------------------------------------------------
# reload: a takeover inside the unit
# --------------------------------------------------------------------------

@pytest.fixture
def medium_file(request, medium):
    """The memory file on /dev/shm or on a disk directory, by the test's
    `medium`.  Asked for before `services`, it goes after the units have
    stopped: a stop writes the file's .index and .meta beside it."""
    return request.getfixturevalue("memfile" if medium == "tmpfs"
                                   else "diskfile")


@pytest.mark.parametrize("access, medium", [("all", "tmpfs"),
                                            ("main", "disk")])
def test_reload_keeps_the_units_main_process(binary, medium_file, services,
                                             access, medium):
    """systemctl reload (SIGUSR2): the main process starts its successor
    from its binary's path, hands it the node, becomes that binary itself
    (the same pid) and takes the node back, so that systemd goes on
    supervising its own child, whatever NotifyAccess= says; the unit's
    status counts the reloads.  A client and 1,000 idle connections move
    through five reloads, none of them through the fd store, nor the
    .socket unit's listener; then a stop is a clean stop (the next start
    takes the saved index).  The memory file on /dev/shm, or on a disk
    directory (the durability a disk gets by default)."""
    memfile = medium_file
    n, port = 1000, free_port()
    fd_room(n + 300)
    svc = services(port, argv(binary, port, "-e", memfile, "-c",
                              str(n + 200)), fdstore=n + 100, access=access)
    svc.start()
    main = svc.main_pid()
    idle = open_idle(port, n)
    mc = Client(("127.0.0.1", port), connect_timeout=5, timeout=5)
    mc.set("k", "v0", noreply=False)
    sock = mc.sock
    assert svc.status() == "serving, 0 reloads"
    for i in range(5):
        svc.reload()
        assert svc.status() == "serving, %d reloads" % (i + 1)
        assert svc.main_pid() == main
        assert mc.get("k") == b"v%d" % i
        mc.set("k", "v%d" % (i + 1), noreply=False)
        assert mc.sock is sock
        assert svc.stored() == 0
    assert_versions(idle)
    with Conn(port) as c:
        st = c.stats()
    assert st["pid"] == str(main)
    assert (st["handover_conns_taken"], st["handover_conns_closed"]) == \
        (str(n + 1), "0")
    mc.close()
    for c in idle:
        c.close()
    svc.sd.systemctl("stop", svc.unit)
    assert "Deactivated successfully" in svc.sd.journal()
    svc.start()
    with Conn(port) as c:
        assert c.stats()["recovery_image"] == "1"     # a clean stop


def test_reloads_in_a_burst_keep_the_main_process(binary, memfile,
                                                  services):
    """Reloads sent one on another, some while the last is still under
    way (a successor taking over, or the main process's new image
    starting, which holds the signal until it can take it): the unit
    stays up under the same pid, never restarted, a client served
    throughout."""
    port = free_port()
    svc = services(port, argv(binary, port, "-e", memfile))
    svc.start()
    main = svc.main_pid()
    mc = Client(("127.0.0.1", port), connect_timeout=5, timeout=5)
    mc.set("k", "v", noreply=False)
    # each reload job ends when its signal is sent: all three succeed
    svc.sd.sh("systemctl reload %s && systemctl reload %s && "
              "systemctl reload %s" % ((svc.unit,) * 3))
    wait_for(lambda: svc.status() != "serving, 0 reloads", 30,
             "a reload to end")
    assert svc.main_pid() == main
    assert svc.sd.show(svc.unit, "NRestarts") == "0"
    assert mc.get("k") == b"v"
    mc.close()
    # the fixture's stop may well come while a reload is still under
    # way: it must be the clean stop all the same


@pytest.mark.parametrize("pause", ["new:received", "new:dispatched"])
def test_a_stop_in_the_middle_of_a_reload_is_the_clean_stop(
        binary, memfile, services, pause):
    """systemctl stop while the successor is still taking over
    (new:received), or serves and the main process has not yet taken the
    node back (new:dispatched): systemd's SIGTERM reaches both.  The
    successor, held there (SIGSTOP; the stop's SIGCONT frees it), takes
    the stop once it serves and makes the clean stop; the main process's
    next image finds it gone that way and ends too.  No SIGKILL, the unit
    not failed, and the next start has every item without a scan."""
    port = free_port()
    svc = services(port, argv(binary, port, "-e", memfile, "-v"),
                   env=["MCPM_TAKEOVER_PAUSE=" + pause])
    svc.start()
    main = svc.main_pid()
    with Conn(port) as c:
        c.call(b"set k 0 0 1\r\nv\r\n", b"STORED\r\n")
    svc.sd.systemctl("reload", svc.unit)
    wait_for(lambda: held_successor(svc, main), 30,
             "the successor to stop at " + pause)
    if pause == "new:dispatched":
        logged(svc, "Handed over to a successor")
    svc.sd.systemctl("stop", svc.unit)
    assert svc.sd.show(svc.unit, "Result") == "success", svc.log()
    assert "Deactivated successfully" in svc.log()
    svc.start()
    with Conn(port) as c:
        assert c.stats()["recovery_image"] == "1"     # a clean stop
        c.call(b"mg k v\r\n", b"VA 1\r\nv\r\n")


def held_successor(svc, main):
    """A process of the unit other than its main one, stopped (SIGSTOP)."""
    cg = svc.sd.show(svc.unit, "ControlGroup")
    procs = svc.sd.sh("cat /sys/fs/cgroup%s/cgroup.procs" % cg,
                      check=False).stdout.split()
    for pid in procs:
        stat = svc.sd.sh("cat /proc/%s/stat" % pid, check=False).stdout
        if pid != str(main) and stat.rsplit(")", 1)[-1].split()[:1] == ["T"]:
            return True
    return False

