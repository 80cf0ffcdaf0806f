"""Restarts no client sees, without a service manager: a node started
with -o takeover=<path> takes over the listening sockets, the open
connections (each at a request boundary, with its protocol, its
authentication and the input it had read) and the memory file of the
node running on that path, which then exits.  A client sees a pause,
never a refused or a closed connection.  Killing either side at any step
leaves one node serving every item."""

import os
import resource
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading

import pytest
from pymemcache.client.base import Client

from conftest import (SANITIZER_MARKS, Conn, ConnClosed, base_args,
                      engine_args, free_port, serves, wait_for)
from test_pool import prev_binary
from test_tls import certs, tls_flags  # noqa: F401  (a fixture)

PYTHON = "/usr/bin/python3"         # Debian's, with pylibmc

pytestmark = [pytest.mark.mcpm, pytest.mark.engine]


@pytest.fixture
def tsock():
    """A takeover socket path short enough for sun_path."""
    d = tempfile.mkdtemp(prefix="mcpm-to-")
    yield os.path.join(d, "t.sock")
    for f in os.listdir(d):
        os.unlink(os.path.join(d, f))
    os.rmdir(d)


def node(server_factory, memfile, tsock, *flags, env=None):
    return server_factory("-e", memfile, "-o", "takeover=" + tsock, *flags,
                          env=env)


def fill(s, n, prefix="k"):
    """n items with flags; their gets lines (value, flags, cas) back."""
    with s.conn() as c:
        for i in range(n):
            c.send(b"set %s%d %d 0 %d noreply\r\nv%d\r\n"
                   % (prefix.encode(), i, i, len(b"v%d" % i), i))
        c.sync()
        return {i: gets(c, b"%s%d" % (prefix.encode(), i)) for i in range(n)}


def gets(c, key):
    return c.get_block(b"gets " + key + b"\r\n")


def gets_all(c, n, prefix=b"k"):
    """gets of prefix0 .. prefix<n-1>, pipelined 500 a time: {i: reply}."""
    out = {}
    for i in range(0, n, 500):
        part = range(i, min(i + 500, n))
        c.send(b"".join(b"gets %s%d\r\n" % (prefix, j) for j in part))
        for j in part:
            out[j] = c.read_until(b"END\r\n")
    return out


def assert_items(s, want, prefix="k"):
    """Every item there, once the node has its file's items back: one that
    opened its file again (a takeover that did not complete) or started
    after a kill serves while it reads the file back."""
    wait_for(lambda: s.stats().get("recovery_running", "0") == "0", 30,
             "the node to read its file back")
    with s.conn() as c:
        got = gets_all(c, max(want) + 1, prefix.encode())
    for i, block in want.items():
        assert got[i] == block, i


# --------------------------------------------------------------------------
# connections carry over
# --------------------------------------------------------------------------

def test_pymemcache_ascii_client_through_20_takeovers(server_factory,
                                                      memfile, tsock):
    s = node(server_factory, memfile, tsock)
    mc = Client(("127.0.0.1", s.port), connect_timeout=5, timeout=5)
    mc.set("k", "v0", noreply=False)
    sock = mc.sock
    for i in range(20):
        s.take_over()
        assert mc.get("k") == b"v%d" % i
        assert mc.set("k", "v%d" % (i + 1), noreply=False)
        assert mc.sock is sock          # the same connection, no error
    st = s.stats()
    assert st["curr_items"] == "1"
    mc.close()


def test_each_successor_names_the_node_it_took_over_from(server_factory,
                                                        memfile, tsock):
    """The takeover socket passes from node to node; the kernel names to a
    successor whoever last listened on it, so each node listens on it
    again: else the third node waits, at a refusal, for the first (after
    a reload inside a systemd unit, that is itself)."""
    s = node(server_factory, memfile, tsock, "-v")
    for _ in range(3):
        pid = s.proc.pid
        s.take_over()
        assert "takeover: serving in place of pid %d, with its " % pid \
            in s.stderr()


def fd_room(n):
    """Let this process hold n descriptors (up to its hard limit, which
    the test then needs)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert hard >= n, "the test needs %d descriptors, the limit is %d" \
        % (n, hard)
    if soft < n:
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, hard))


def open_idle(port, n):
    """n connections, each answered `version` once."""
    conns = [socket.create_connection(("127.0.0.1", port), timeout=10)
             for _ in range(n)]
    assert_versions(conns)
    return conns


def assert_versions(conns):
    """Each connection answers `version` (sent to all, then read)."""
    for c in conns:
        c.sendall(b"version\r\n")
    for c in conns:
        got = b""
        while not got.endswith(b"\r\n"):
            more = c.recv(64)
            assert more, "a connection closed"
            got += more
        assert got.startswith(b"VERSION "), got


def test_thousands_of_idle_connections_move_and_one_mid_request_finishes(
        server_factory, memfile, tsock):
    """The node stops at the start of its pause (after it sent the
    sockets ahead): a connection there is half through a set, 2,000
    others idle.  Let go, the node waits for the set, which its client
    then finishes; every connection answers on the new node."""
    n = 2000
    fd_room(n + 500)
    s = node(server_factory, memfile, tsock, "-c", str(n + 200),
             env={"MCPM_TAKEOVER_PAUSE": "old:presented"})
    idle = open_idle(s.port, n)
    with s.conn() as mid:
        mid.send(b"set m 0 0 10\r\n12345")
        old = s.take_over(env={"MCPM_TAKEOVER_PAUSE": ""}, wait=False)
        wait_for(lambda: stopped(old.pid), 10, "the node's pause")
        old.send_signal(signal.SIGCONT)
        mid.send(b"67890\r\n")
        assert mid.read_until(b"\r\n") == b"STORED\r\n"
        s.wait_taken_over(old)
        mid.call(b"get m\r\n", b"VALUE m 0 10\r\n1234567890\r\nEND\r\n")
    assert "still in a request" not in s.predecessor_stderr(old)
    assert_versions(idle)
    assert int(s.stats()["curr_connections"]) >= n + 1
    for c in idle:
        c.close()


def test_the_drain_deadline_closes_only_the_connection_mid_request(
        server_factory, memfile, tsock):
    """A set that never ends is closed when the drain's second is up;
    the idle connections beside it all move."""
    s = node(server_factory, memfile, tsock)
    idle = open_idle(s.port, 50)
    with s.conn() as stuck:
        stuck.send(b"set m 0 0 10\r\n12345")
        old = s.take_over()
        stuck.wait_closed()
    assert_versions(idle)
    assert "1 connection still in a request after 1000 ms: closed" in \
        s.predecessor_stderr(old)
    for c in idle:
        c.close()


PYLIBMC_DRIVER = r"""
import sys, pylibmc
mc = pylibmc.Client(["127.0.0.1:%d" % int(sys.argv[1])], binary=True,
                    behaviors={"tcp_nodelay": True, "connect_timeout": 5000,
                               "_poll_timeout": 5000, "retry_timeout": 30})
for line in sys.stdin:
    op, key, *val = line.split()
    try:
        if op == "set":
            print("ok" if mc.set(key, val[0]) else "refused", flush=True)
        else:
            print(mc.get(key), flush=True)
    except pylibmc.Error as e:
        print("error", type(e).__name__, e, flush=True)
"""


def client_ports(s):
    """The ports of the clients connected to s, but for this question's."""
    with s.conn() as c:
        me = c.sock.getsockname()[1]
        rows = c.stats("conns")
    ports = {int(v.rsplit(":", 1)[1]) for k, v in rows.items()
             if k.endswith(":addr") and v.startswith("tcp:")}
    return ports - {me, s.port}


def test_pylibmc_binary_client_through_20_takeovers(server_factory, memfile,
                                                    tsock):
    s = node(server_factory, memfile, tsock)
    p = subprocess.Popen([PYTHON, "-c", PYLIBMC_DRIVER, str(s.port)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)

    def ask(line):
        p.stdin.write(line + "\n")
        p.stdin.flush()
        return p.stdout.readline().strip()
    try:
        assert ask("set k v0") == "ok"
        ports = client_ports(s)
        assert len(ports) == 1, ports
        for i in range(20):
            s.take_over()
            assert ask("get k") == "v%d" % i
            assert ask("set k v%d" % (i + 1)) == "ok"
            assert ports <= client_ports(s)     # never reconnected
    finally:
        p.stdin.close()
        p.wait(10)


def test_a_pipeline_in_flight_loses_no_request(server_factory, memfile,
                                               tsock):
    """A client sends gets without waiting while three takeovers happen:
    every one is answered, in order, on the one connection."""
    s = node(server_factory, memfile, tsock)
    c = socket.create_connection(("127.0.0.1", s.port), timeout=10)
    c.sendall(b"set k 0 0 1\r\nx\r\n")
    assert c.recv(100) == b"STORED\r\n"
    stop = threading.Event()
    sent = [0]
    reply = b"VALUE k 0 1\r\nx\r\nEND\r\n"
    got = bytearray()

    def write():
        batch = b"get k\r\n" * 100
        while not stop.is_set():
            c.sendall(batch)
            sent[0] += 100
        c.sendall(b"mn\r\n")

    def read():
        while not got.endswith(b"MN\r\n"):
            b = c.recv(65536)
            assert b, "the connection closed"
            got.extend(b)
    w = threading.Thread(target=write)
    r = threading.Thread(target=read)
    w.start()
    r.start()
    try:
        for _ in range(3):
            wait_for(lambda: len(got) > 100 * len(reply), 10)
            mark = len(got)
            s.take_over()
            wait_for(lambda: len(got) > mark + 100 * len(reply), 10,
                     "replies after the takeover")
    finally:
        stop.set()
        w.join(20)
        r.join(20)
    assert bytes(got) == reply * sent[0] + b"MN\r\n"
    c.close()


def test_input_read_before_a_takeover_is_answered_after(server_factory,
                                                        memfile, tsock):
    """Bytes the old node read but could not parse yet (half a line, half
    a binary header) go along with their connection."""
    s = node(server_factory, memfile, tsock)
    with s.conn() as text, s.conn() as binary:
        text.call(b"set a 0 0 2\r\nhi\r\n", b"STORED\r\n")
        s.send_read(text, b"get")
        hdr = struct.pack(">BBHBBHIIQ", 0x80, 0x00, 1, 0, 0, 0, 1, 7, 0)
        s.send_read(binary, hdr[:10])
        s.take_over()
        text.send(b" a\r\n")
        assert text.get_block(b"") == b"VALUE a 0 2\r\nhi\r\nEND\r\n"
        binary.send(hdr[10:] + b"a")
        r = binary.read_exact(24 + 4 + 2)
        assert r[:2] == b"\x81\x00" and r[6:8] == b"\x00\x00"  # found
        assert r[12:16] == b"\x00\x00\x00\x07" and r[-2:] == b"hi"


@pytest.mark.parametrize("tier", ["-e", "memory_file"])
def test_every_item_comes_over_whole(server_factory, memfile, tsock, tier):
    flags = (["-e", memfile] if tier == "-e" else
             ["-o", "memory_file=%s,memory_file_size=16" % memfile])
    s = server_factory(*flags, "-o", "takeover=" + tsock)
    want = fill(s, 2000)
    with s.conn() as c:
        c.call(b"set ttl 0 3600 1\r\nt\r\n", b"STORED\r\n")
    s.take_over()
    assert_items(s, want)
    st = s.stats()
    assert st["curr_items"] == "2001"
    assert st["recovery_items"] == "2001"
    assert st["recovery_checksummed"] == "0"        # it was left clean
    with s.conn() as c:
        assert c.req(b"mg ttl t v\r\n") in (b"VA 1 t3600\r\n",
                                             b"VA 1 t3599\r\n")
        assert c.readline() == b"t\r\n"


# --------------------------------------------------------------------------
# kinds of sockets
# --------------------------------------------------------------------------

def test_a_unix_socket_node_hands_over(binary, memfile, tsock):
    """-s: the socket file stays, and a client on it stays connected."""
    path = os.path.join(os.path.dirname(tsock), "mc.sock")
    argv = [binary, "-s", path, "-e", memfile, "-o", "takeover=" + tsock] + \
        engine_args() + (["-u", "root"] if os.geteuid() == 0 else [])
    procs = [subprocess.Popen(argv, stderr=subprocess.PIPE)]
    u = socket.socket(socket.AF_UNIX)
    u.settimeout(10)
    try:
        wait_for(lambda: u.connect_ex(path) == 0, 10, "the unix socket")
        u.sendall(b"set u 0 0 1\r\nU\r\n")
        assert u.recv(100) == b"STORED\r\n"
        for _ in range(2):
            procs.append(subprocess.Popen(argv, stderr=subprocess.PIPE))
            assert procs[-2].wait(10) == 0
            u.sendall(b"get u\r\n")
            assert u.recv(100) == b"VALUE u 0 1\r\nU\r\nEND\r\n"
            assert os.path.exists(path)     # the old node left it
        procs[-1].send_signal(signal.SIGTERM)
        assert procs[-1].wait(10) == 0
        err = "".join(p.stderr.read().decode() for p in procs)
        assert not any(m in err for m in SANITIZER_MARKS), err
    finally:
        u.close()
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def udp_get(port, key, rid=1):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        u.settimeout(5)
        u.sendto(struct.pack(">HHHH", rid, 0, 1, 0) + b"get " + key + b"\r\n",
                 ("127.0.0.1", port))
        return u.recv(2000)[8:]


@pytest.mark.parametrize("threads", ["1", "3"])
def test_udp_sockets_carry_over(server_factory, memfile, tsock, threads):
    """The UDP sockets move with their port (their datagrams queued
    meanwhile); one worker's socket, or a worker each."""
    port = free_port()
    s = server_factory("-U", str(port), "-t", threads, "-e", memfile,
                       "-o", "takeover=" + tsock, port=port)
    with s.conn() as c:
        c.call(b"set k 0 0 1\r\nk\r\n", b"STORED\r\n")
    for i in range(3):
        s.take_over()
        assert udp_get(port, b"k", i) == b"VALUE k 0 1\r\nk\r\nEND\r\n"
    addrs = [v for v in s.stats("conns").values() if v.startswith("udp:")]
    assert addrs == ["udp:127.0.0.1:%d" % port] * int(threads)


def test_a_tls_connection_finishes_and_closes_a_plain_one_moves(
        server_factory, memfile, tsock, certs):  # noqa: F811
    plain = free_port()
    s = server_factory(*tls_flags(certs), "-l", "notls:127.0.0.1:%d" % plain,
                       "-e", memfile, "-o", "takeover=" + tsock)
    with Conn(plain) as p, s.conn() as t:
        p.call(b"set p 0 0 1\r\np\r\n", b"STORED\r\n")
        t.call(b"set t 0 0 1\r\nt\r\n", b"STORED\r\n")
        s.take_over()
        p.call(b"get t\r\n", b"VALUE t 0 1\r\nt\r\nEND\r\n")
        t.wait_closed()
    with s.conn() as t:
        t.call(b"get p\r\n", b"VALUE p 0 1\r\np\r\nEND\r\n")


def test_authentication_carries_over(server_factory, memfile, tsock,
                                     tmp_path):
    auth = tmp_path / "auth"
    auth.write_text("alice:secret\n")
    s = server_factory("-Y", str(auth), "-e", memfile,
                       "-o", "takeover=" + tsock)
    with s.conn() as yes, s.conn() as no:
        yes.call(b"set x 0 0 12\r\nalice secret\r\n", b"STORED\r\n")
        s.take_over()
        yes.call(b"set k 0 0 1\r\n1\r\n", b"STORED\r\n")
        no.call(b"get k\r\n", b"CLIENT_ERROR unauthenticated\r\n")


def test_a_watch_connection_closes(server_factory, memfile, tsock):
    s = node(server_factory, memfile, tsock)
    with s.conn() as w:
        w.call(b"watch mutations\r\n", b"OK\r\n")
        s.take_over()
        w.wait_closed()
    with s.conn() as w, s.conn() as c:
        w.call(b"watch mutations\r\n", b"OK\r\n")
        c.call(b"set k 0 0 1\r\nk\r\n", b"STORED\r\n")
        assert b"cmd=set" in w.read_until(b"\n")


# --------------------------------------------------------------------------
# failures: one node serves at every moment
# --------------------------------------------------------------------------

def stopped(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "T"
    except FileNotFoundError:
        return False


STEPS = [("old", "offered"), ("old", "precopied"), ("old", "presented"),
         ("old", "sent"), ("old", "released"),
         ("new", "precopied"), ("new", "offered"), ("new", "received"),
         ("new", "serving")]
# Each side stopped at each step, then killed, or the other side killed.
# While the old node stands at "released" the new one finishes the
# takeover on its own: killing it then is a crash after a takeover, not
# a takeover that failed.
KILLS = [(side, step, kill) for side, step in STEPS
         for kill in ("paused", "other")
         if (side, step, kill) != ("old", "released", "other")]


@pytest.mark.parametrize("side,step,kill", KILLS,
                         ids=["%s-%s-kill-%s" % k for k in KILLS])
def test_a_kill_at_any_step_leaves_a_node_serving_every_item(
        server_factory, memfile, tsock, side, step, kill):
    """One side stops itself at the step (MCPM_TAKEOVER_PAUSE); then it,
    or the other side, is killed and the paused one let go.  A node
    serves every item afterwards, and the client's connection, where
    the side left alive holds it for sure, still works."""
    pause = {"MCPM_TAKEOVER_PAUSE": "%s:%s" % (side, step)}
    s = node(server_factory, memfile, tsock,
             env=pause if side == "old" else None)
    want = fill(s, 500)
    client = s.conn()
    client.call(b"set c 0 0 1\r\nc\r\n", b"STORED\r\n")
    old = s.take_over(env=pause if side == "new" else {}, wait=False)
    new = s.proc
    paused, other = (old, new) if side == "old" else (new, old)
    wait_for(lambda: stopped(paused.pid), 10, "the pause at " + step)
    victim = paused if kill == "paused" else other
    victim.kill()
    victim.wait()
    if paused.poll() is None:
        paused.send_signal(signal.SIGCONT)
    survivor = new if victim is old else old
    s.proc = survivor
    try:
        wait_for(lambda: serves(s.port), 20, "a node to serve")
    except AssertionError:
        pytest.fail("no node serves; old:\n%s\nnew:\n%s"
                    % (s.predecessor_stderr(old), s.stderr()))
    assert survivor.poll() is None
    assert_items(s, want)
    # The connection lives on where the survivor holds it for sure: the
    # old node serving on, or the new one once the old had sent it.
    if victim is new or (kill == "paused" and step in ("sent", "released")):
        client.call(b"get c\r\n", b"VALUE c 0 1\r\nc\r\nEND\r\n")
    else:
        try:
            client.call(b"get c\r\n", b"VALUE c 0 1\r\nc\r\nEND\r\n")
        except (ConnClosed, OSError):
            pass            # closed with the old node: a clean close
    client.close()
    if survivor is old and side == "new":
        # The old node serves on, and still hands over (one paused at a
        # step would pause there again).
        s.predecessors = [(p, f) for p, f in s.predecessors if p is not old]
        s.take_over()
        assert_items(s, want)


def test_writes_while_the_table_is_copied_come_over(server_factory, memfile,
                                                   tsock):
    """The hash table goes ahead of the pause (version 5), and in the
    pause only its pages written since: with the successor stopped just
    after its copy (MCPM_TAKEOVER_PAUSE=new:precopied), the node it takes
    over serves on and takes deletes, overwrites and new keys; each of
    them is there after, from the index handed over, not a scan."""
    s = node(server_factory, memfile, tsock)
    fill(s, 20000)
    c = s.conn()        # (its main thread waits: no new one is accepted)
    old = s.take_over(env={"MCPM_TAKEOVER_PAUSE": "new:precopied"},
                      wait=False)
    new = s.proc
    wait_for(lambda: stopped(new.pid), 10, "the successor's copy")
    with c:                                 # the old node, serving on
        for i in range(0, 20000, 10):
            c.send(b"delete k%d noreply\r\n" % i)
        for i in range(1, 20000, 10):
            c.send(b"set k%d 1 0 7 noreply\r\nchanged\r\n" % i)
        for i in range(20000, 22000):
            c.send(b"set k%d 2 0 3 noreply\r\nnew\r\n" % i)
        c.sync()
        # pipelined: the successor stays stopped for less than the
        # ten seconds the node gives it, under a sanitizer too
        want = gets_all(c, 22000)
    assert want[0] == b"END\r\n" and b" 1 7 " in want[1]
    new.send_signal(signal.SIGCONT)
    s.wait_taken_over(old)
    st = s.stats()
    assert (st["recovery_image"], st["curr_items"]) == ("1", str(22000 - 2000))
    assert_items(s, want)


# --------------------------------------------------------------------------
# trust: only the node's own user, or root
# --------------------------------------------------------------------------

NOBODY = 65534

# Another user's process listening at the takeover path: prints what a
# successor sent it before it hung up.
OTHER_NODE = r"""
import socket, sys
lst = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
lst.bind(sys.argv[1])
lst.listen(1)
print("listening", flush=True)
c, _ = lst.accept()
c.settimeout(10)
print("sent %d bytes" % len(c.recv(200)), flush=True)
"""

# Another user's process connecting to a node's takeover socket: prints
# how many bytes the node answered its HELLO with.
OTHER_SUCCESSOR = r"""
import socket, sys
t = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
t.settimeout(10)
t.connect(sys.argv[1])
try:
    t.send(bytes.fromhex(sys.argv[2]))
    got = t.recv(200)
except (BrokenPipeError, ConnectionResetError):     # closed on it
    got = b""
print("answered %d bytes" % len(got), flush=True)
"""


def as_nobody():
    os.setgid(NOBODY)
    os.setuid(NOBODY)


def open_to_all(path):
    """path and its directory usable by another user."""
    os.chmod(os.path.dirname(path), 0o777)
    if os.path.exists(path):
        os.chmod(path, 0o777)


def test_a_successor_sends_nothing_to_another_users_socket_file(
        binary, memfile, tsock):
    """A socket file of another user at the takeover path: the successor
    does not even connect, says why, and does not start."""
    open_to_all(tsock)
    other = subprocess.Popen([PYTHON, "-c", OTHER_NODE, tsock],
                             stdout=subprocess.PIPE, text=True,
                             preexec_fn=as_nobody)
    try:
        assert other.stdout.readline() == "listening\n"
        port = free_port()
        r = subprocess.run([binary] + base_args(port) +
                           ["-e", memfile, "-o", "takeover=" + tsock],
                           capture_output=True, timeout=30)
        assert r.returncode != 0
        assert b"%s belongs to uid %d, neither this node's user (uid 0) " \
            b"nor root: refusing it" % (tsock.encode(), NOBODY) in r.stderr
        assert not serves(port)
    finally:
        other.kill()
    assert other.communicate(10)[0] == ""     # never connected to


def test_a_successor_hangs_up_on_a_node_of_another_user(binary, memfile,
                                                       tsock):
    """The file made root's, but the process listening there is another
    user's: the successor reads its credentials, sends nothing, and does
    not start."""
    open_to_all(tsock)
    other = subprocess.Popen([PYTHON, "-c", OTHER_NODE, tsock],
                             stdout=subprocess.PIPE, text=True,
                             preexec_fn=as_nobody)
    assert other.stdout.readline() == "listening\n"
    os.chown(tsock, 0, 0)
    port = free_port()
    r = subprocess.run([binary] + base_args(port) +
                       ["-e", memfile, "-o", "takeover=" + tsock],
                       capture_output=True, timeout=30)
    assert r.returncode != 0
    assert b"pid %d runs as uid %d, neither this node's user (uid 0) nor " \
        b"root: refused" % (other.pid, NOBODY) in r.stderr
    assert other.communicate(10)[0] == "sent 0 bytes\n"
    assert not serves(port)


def test_a_node_refuses_a_successor_of_another_user(server_factory, memfile,
                                                   tsock):
    """Another user gets through to the takeover socket (its mode opened
    up): the node closes on its HELLO without an answer, and serves on."""
    s = node(server_factory, memfile, tsock)
    want = fill(s, 20)
    open_to_all(tsock)
    other = subprocess.Popen([PYTHON, "-c", OTHER_SUCCESSOR, tsock,
                              hello((1, 4)).hex()],
                             stdout=subprocess.PIPE, text=True,
                             preexec_fn=as_nobody)
    assert other.communicate(30)[0] == "answered 0 bytes\n"
    said = "takeover: a successor on the takeover socket: pid %d runs as " \
        "uid %d, neither this node's user (uid 0) nor root: refused" \
        % (other.pid, NOBODY)
    wait_for(lambda: said in s.stderr(), 10, "the refusal in the log")
    s.check_alive()
    assert_items(s, want)
    s.take_over()           # its own user still takes over
    assert_items(s, want)


# --------------------------------------------------------------------------
# versions and builds
# --------------------------------------------------------------------------

def hello(versions):
    return (b"MCPM-TO\0" + struct.pack("=IIIII", 1, versions[0], versions[1],
                                       os.getpid(), 0) + b"\0" * 100)


def test_a_successor_that_cannot_read_this_version_gets_a_plain_stop(
        server_factory, memfile, tsock):
    s = node(server_factory, memfile, tsock)
    want = fill(s, 100)
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as t:
        t.settimeout(10)
        t.connect(tsock)
        t.send(hello((99, 99)))
        m = t.recv(200)
        assert struct.unpack("=I", m[8:12])[0] == 3         # REFUSE
        assert b"reads handover versions 99 to 99, this build writes 1" in m
        assert s.proc.wait(10) == 0     # a plain stop
        assert t.recv(200) == b""       # ... whose end the successor sees
    assert "stopping without a handover" in s.stderr()
    s.start()           # the items are all there, the file clean
    assert_items(s, want)
    assert s.stats()["recovery_checksummed"] == "0"


# What a successor that reads versions up to v is sent: version 1, the
# sockets and their state; 2, the DRAM index too (IMAGE); 3, after it
# says GO; 4, the connections' sockets ahead of the pause (PRECONNS); 5,
# the hash table ahead of the pause too (PREIMAGE, answered PRECOPIED), and
# in IMAGE the pages of it written since.
LISTENERS, CONNS, STATE, RELEASED, IMAGE, GO, PRECONNS = 4, 5, 6, 7, 9, 10, 11
PREIMAGE, PRECOPIED = 12, 13


def message(kind):
    return (b"MCPM-TO\0" + struct.pack("=IIIII", kind, 0, 0, os.getpid(), 0)
            + b"\0" * 100)


@pytest.mark.parametrize("version,sent", [
    (1, [LISTENERS, CONNS, STATE, RELEASED]),
    (2, [LISTENERS, CONNS, STATE, IMAGE, RELEASED]),
    (3, [LISTENERS, CONNS, STATE, IMAGE, RELEASED]),
    (4, [PRECONNS, LISTENERS, CONNS, STATE, IMAGE, RELEASED]),
    (5, [PREIMAGE, PRECONNS, LISTENERS, CONNS, STATE, IMAGE, RELEASED])])
def test_each_version_gets_what_it_reads_and_the_node_serves_on(
        server_factory, memfile, tsock, version, sent):
    """A successor is offered the newest version it reads, and sent what
    that version holds.  One that goes away before TAKEN leaves the node
    serving, its file opened again."""
    s = node(server_factory, memfile, tsock)
    want = fill(s, 100)
    types = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as t:
        t.settimeout(10)
        t.connect(tsock)
        t.send(hello((1, version)))
        m = t.recv(200)
        assert struct.unpack("=II", m[8:16]) == (2, version)    # OFFER
        if version >= 3:
            assert m[28:34] == b"index "    # the size of the index to come
            t.send(message(GO))
        nfds = {}
        while not types or types[-1] != RELEASED:
            m, fds, _, _ = socket.recv_fds(t, 200, 300)
            for fd in fds:
                os.close(fd)
            types.append(struct.unpack("=I", m[8:12])[0])
            nfds[types[-1]] = len(fds)
            if types[-1] == PREIMAGE:
                assert m[28:31] == b"at " and nfds[PREIMAGE] == 1
                t.send(message(PRECOPIED))
        # the image, and with version 5 the pages written since
        assert nfds.get(IMAGE, 0) == (2 if version >= 5 else
                                      1 if version >= 2 else 0)
    assert types == sent
    wait_for(lambda: serves(s.port), 10, "the node to serve on")
    assert s.proc.poll() is None
    assert_items(s, want)
    wait_for(lambda: "went away before it served: serving on" in s.stderr(),
             10, "the node to say it serves on")


OLD_NODE = r"""
import os, socket, struct, sys
lst = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
lst.bind(sys.argv[1])
lst.listen(1)
print("listening", flush=True)
c, _ = lst.accept()
c.recv(200)
c.send(b"MCPM-TO\0" + struct.pack("=IIIII", 3, 0, 0, os.getpid(), 0) +
       b"an older build".ljust(100, b"\0"))
"""                         # and it stops, plainly


def test_a_refusing_node_is_waited_for_then_its_place_taken(server_factory,
                                                            memfile, tsock):
    """A node that writes a version this build cannot read stops plainly;
    the successor starts once it has gone."""
    old = subprocess.Popen([sys.executable, "-c", OLD_NODE, tsock],
                           stdout=subprocess.PIPE, text=True)
    assert old.stdout.readline() == "listening\n"
    s = node(server_factory, memfile, tsock)
    assert old.wait(10) == 0
    assert "refused: an older build; starting once it has stopped" in \
        s.stderr()
    s.check_alive()


def test_from_a_build_without_takeover(server_factory, binary, memfile,
                                      tsock):
    """The build before the last memory-file layout change has no
    takeover: a node started beside one of its nodes finds no one on the
    takeover socket and leaves it alone; stopped plainly, it hands its
    items on through the file (its layout upgraded), and takeovers work
    from then on."""
    old = server_factory("-e", memfile, binary=prev_binary())
    want = fill(old, 300)
    r = subprocess.run([binary] + base_args(old.port) +
                       ["-e", memfile, "-o", "takeover=" + tsock, "-v"],
                       capture_output=True, timeout=30)
    assert r.returncode != 0
    assert b"takeover: no node serves on %s: starting afresh" \
        % tsock.encode() in r.stderr
    assert b"in use by another process" in r.stderr
    assert_items(old, want)
    assert old.stop() == []
    s = server_factory("-e", memfile, "-o", "takeover=" + tsock,
                       port=old.port)
    assert_items(s, want)
    s.take_over()
    assert_items(s, want)


# --------------------------------------------------------------------------
# the DRAM index comes over: no scan of the file
# --------------------------------------------------------------------------

def big_value(n):
    return bytes((i * 7) % 251 for i in range(n))


def fill_kinds(s):
    """Items of every kind, some deleted and replaced so that the file
    has free chunks and dead ones: their gets blocks by key."""
    with s.conn() as c:
        for i in range(3000):
            c.send(b"set k%d %d 0 %d noreply\r\n%s\r\n"
                   % (i, i, 10 + i % 300, b"x" * (10 + i % 300)))
        for i in range(0, 3000, 7):
            c.send(b"delete k%d noreply\r\n" % i)
        for i in range(0, 3000, 11):
            c.send(b"set k%d 5 0 3 noreply\r\nnew\r\n" % i)
        big = big_value(700 * 1024)         # chunked
        c.send(b"set big 9 0 %d noreply\r\n%s\r\n" % (len(big), big))
        c.send(b"set ttl 1 3600 1 noreply\r\nt\r\n")
        c.sync()
        keys = [b"k%d" % i for i in range(3000)] + [b"big", b"ttl"]
        return {k: gets(c, k) for k in keys}


def assert_same(s, want):
    with s.conn() as c:
        for k, block in want.items():
            assert gets(c, k) == block, k


@pytest.mark.parametrize("policy", ["pmem", "cache"])
def test_the_dram_index_comes_over_with_the_file(server_factory, memfile,
                                                 tsock, policy):
    """With every item in the file (tier_policy pmem, as -e), the new node
    maps the file where the old one had it and takes its hash table,
    chunk ids, slab classes and LRU lists instead of scanning the file;
    with items in DRAM too (cache) it scans.  Either way every item comes
    over, the lists and counts go on working, and a plain restart after
    finds the file whole: from the index its clean stop saved (pmem), and
    by a scan once that is gone."""
    s = server_factory("-m", "64", "-o", "memory_file=%s,memory_file_size=64,"
                       "tier_policy=%s,takeover=%s" % (memfile, policy,
                                                       tsock))
    want = fill_kinds(s)
    before = s.stats()

    def per_class():                # (the maintainer moves them on)
        return {k: v for k, v in s.stats("items").items()
                if k.endswith(":number")}
    items = per_class()
    for round_ in range(3):
        s.take_over()
        st = s.stats()
        assert st["recovery_image"] == ("1" if policy == "pmem" else "0")
        assert st["recovery_checksummed"] == "0"
        assert st["curr_items"] == before["curr_items"]
        assert st["recovery_items"] == before["curr_items"]
        assert_same(s, want)
        if round_ == 0:
            assert per_class() == items
        with s.conn() as c:                 # the lists and slabs go on
            for i in range(100):
                c.call(b"set r%d_%d 0 0 2\r\nok\r\n" % (round_, i),
                       b"STORED\r\n")
            c.call(b"delete k1\r\n", b"DELETED\r\n" if round_ == 0
                   else b"NOT_FOUND\r\n")
            want[b"k1"] = b"END\r\n"
            want.update({b"r%d_%d" % (round_, i): gets(c, b"r%d_%d"
                                                       % (round_, i))
                         for i in range(100)})
        before = s.stats()
    s.stop()
    assert os.path.exists(memfile + ".index") == (policy == "pmem")
    s.start()                               # the index the stop saved
    st = s.stats()
    assert st["recovery_image"] == ("1" if policy == "pmem" else "0")
    assert st["curr_items"] == before["curr_items"]
    assert_same(s, want)
    s.stop()
    if policy == "pmem":
        os.unlink(memfile + ".index")
    s.start()                               # without it: a scan
    st = s.stats()
    assert st["recovery_image"] == "0"
    assert st["recovery_dropped_torn"] == "0"
    assert st["curr_items"] == before["curr_items"]
    assert_same(s, want)
