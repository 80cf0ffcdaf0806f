"""Fixtures for the memcached-pm protocol suite.

Every test talks to a real server process on 127.0.0.1 and a free port.
By default the server is the memcached-pm build of this tree (override with
MCPM_BIN); `--reference` (or MCPM_REFERENCE=1) runs the same suite against
Debian's memcached 1.6.18 to check the expectations themselves.  Tests that
assert 1.6.45 or memcached-pm behaviour 1.6.18 does not have carry the
`v1645` marker and are deselected (never skipped) in reference mode.
"""

import os
import re
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import uuid
import zlib
from pathlib import Path

import pytest

from waiting import wait_for  # noqa: F401 (the tests take it from here)
from rawconn import (  # noqa: F401 (the tests take them from here too)
    FUZZ_SEEDS, VERSION_RE, Conn, ConnClosed, parse_stats, save_fuzz_seed,
    serves)

REPO = Path(__file__).resolve().parent.parent
REFERENCE_BIN = "/usr/bin/memcached"
START_TIMEOUT = 10.0
MEMORY_FILE_DIR = os.environ.get("MCPM_MEMORY_FILE_DIR", "")
# With MCPM_FUZZ_SEEDS=<dir>, what the tests send becomes the fuzzers'
TIER_POLICY = os.environ.get("MCPM_TIER_POLICY", "")
# MCPM_DURABILITY=power makes those files guard against a power cut
# (msync by group commit) even on tmpfs, where they would not by default.
DURABILITY = os.environ.get("MCPM_DURABILITY", "")
# MCPM_EVENT_ENGINE=io_uring (or epoll) runs every server on that event
# engine, unless a test picks one itself.
EVENT_ENGINE = os.environ.get("MCPM_EVENT_ENGINE", "")
STOP_TIMEOUT = 10.0
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                   "runtime error:", "WARNING: ThreadSanitizer")


# --------------------------------------------------------------------------
# pytest plumbing
# --------------------------------------------------------------------------

# The markers that say what else a test's result depends on.
DEPENDS_ON = {
    "engine": "its result can change with the event engine (epoll or "
              "io_uring): accepting, reading, writing, closing, waits",
    "storage": "its result can change with where items live (the tier "
               "policy and a memory file): items stored, changed, moved, "
               "evicted, expired, flushed or counted",
    "durability": "its result can change with the durability mode "
                  "(memory_file_durability=power: group commit)",
    "build": "its result can change between the sanitizer build and the "
             "optimised build (memory and time measured from outside)",
}

def pytest_addoption(parser):
    parser.addoption("--reference", action="store_true", default=False,
                     help="run against /usr/bin/memcached (1.6.18) and "
                          "deselect tests marked v1645")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "v1645: behaviour of memcached 1.6.45 / memcached-pm "
                   "that Debian's 1.6.18 lacks; deselected with --reference")
    config.addinivalue_line(
        "markers", "mcpm: a memcached-pm feature memcached does not have "
                   "(the PMEM tier); deselected with --reference")
    # What a test's result can depend on besides the code it names; each
    # pass of script/test past the first runs only the tests marked with
    # what that pass changes (tests/README.md lists the passes).
    for name, what in DEPENDS_ON.items():
        config.addinivalue_line("markers", "%s: %s" % (name, what))
    config.addinivalue_line(
        "markers", "scale: sized to show scale (a million items); the fast "
                   "run (script/test) runs it on the optimised build only")
    config.addinivalue_line(
        "markers", "serial: changes the whole machine for a moment (a "
                   "kernel setting): script/test runs it alone, after the "
                   "tests that run in parallel")


def is_reference(config):
    return bool(config.getoption("--reference")
                or os.environ.get("MCPM_REFERENCE") == "1")


def in_slice(nodeid, spec):
    """Whether test `nodeid` is in slice spec ("i/n": the i-th of n
    slices, fixed by the test's name, so that a slice is the same set of
    tests wherever it runs)."""
    i, n = (int(x) for x in spec.split("/"))
    return zlib.crc32(nodeid.encode()) % n == i


def pytest_collection_modifyitems(config, items):
    # MCPM_TEST_SLICE=i/n: script/test's fast run runs a slice of each
    # pass's tests (tests/passes).
    spec = os.environ.get("MCPM_TEST_SLICE", "")
    if spec:
        out = [item for item in items if not in_slice(item.nodeid, spec)]
        if out:
            config.hook.pytest_deselected(items=out)
            items[:] = [item for item in items if in_slice(item.nodeid, spec)]
    if not is_reference(config):
        return
    # Reference mode checks expectations about the server; a test that
    # never starts one through these fixtures has nothing to check there.
    keep, drop = [], []
    for item in items:
        uses_server = "binary" in getattr(item, "fixturenames", ())
        if (item.get_closest_marker("v1645") or item.get_closest_marker("mcpm")
                or not uses_server):
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


# Files the tests make in /dev/shm (memory files, their .meta, memkind
# directories) start with this; a run must leave none of them behind.  The
# run's own mark (shared with its pytest-xdist workers through the
# environment) keeps a second run beside it from counting as its leftovers.
SHM_DIR = "/dev/shm"
SHM_PREFIX = "mcpm-%s-" % os.environ.setdefault("MCPM_TEST_RUN",
                                                uuid.uuid4().hex[:8])


def shm_files():
    try:
        return {n for n in os.listdir(SHM_DIR) if n.startswith(SHM_PREFIX)}
    except FileNotFoundError:
        return set()


def pytest_sessionstart(session):
    session.config.shm_before = shm_files()


def pytest_sessionfinish(session, exitstatus):
    """Fail the run if it left files of its own in /dev/shm.  Under
    pytest-xdist the controller checks once every worker is done."""
    if hasattr(session.config, "workerinput"):
        return
    left = sorted(shm_files() - session.config.shm_before)
    if not left:
        return
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    if tr is not None:
        tr.write_line("the tests left %d files in %s: %s"
                      % (len(left), SHM_DIR, " ".join(left[:20])), red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    # remember each phase's outcome so fixtures can skip follow-up checks
    # of a test that already failed
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


def binary_has_asan(path):
    """Whether the server binary was built with AddressSanitizer (its
    runtime changes what memory and mlockall() look like from outside)."""
    with open(path, "rb") as f:
        return b"__asan_init" in f.read()


def server_binary(config):
    if is_reference(config):
        return REFERENCE_BIN
    return os.environ.get("MCPM_BIN",
                          str(REPO / "memcached-pm" / "memcached-pm"))


# --------------------------------------------------------------------------
# waiting
# --------------------------------------------------------------------------

def server_time(c):
    """The server's clock (`stats` time): whole seconds, one tick a
    second, the clock expiry and delayed flush_all are judged by."""
    return int(c.stats()["time"])


def wait_server_time(c, t, timeout=None):
    """Wait until the server's clock (asked through connection c) reads at
    least t.  An item stored with a relative TTL of n while the clock read
    t0 has expired from clock t0 + n on (memcached's rule: exptime <=
    now), however slowly the host runs."""
    if timeout is None:
        timeout = max(10.0, t - server_time(c) + 10.0)
    return wait_for(lambda: server_time(c) >= t, timeout,
                    "the server's clock to reach %d" % t)


def wait_seconds_pass(c, n):
    """Wait until the server's clock has moved n seconds on from what it
    reads now: an item stored before this call with a relative TTL of n
    (or a flush_all n) has then taken effect."""
    return wait_server_time(c, server_time(c) + n)


def tcp_queues(port, client_ports):
    """What the kernel holds of each connection between the clients on
    client_ports and the server on 127.0.0.1:port, by client port, as
    (bytes on their way to the server, bytes on their way to the client):
    each sender's unacknowledged bytes plus the receiver's unread ones
    (/proc/net/tcp's tx_queue and rx_queue).  A connection the server has
    closed holds nothing."""
    held = {}
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            local = int(fields[1].split(":")[1], 16)
            remote = int(fields[2].split(":")[1], 16)
            tx, rx = (int(x, 16) for x in fields[4].split(":"))
            if local == port and remote in client_ports:
                up, down = held.get(remote, (0, 0))
                held[remote] = (up + rx, down + tx)
            elif remote == port and local in client_ports:
                up, down = held.get(local, (0, 0))
                held[local] = (up + tx, down + rx)
    return held


def udp_unread(port):
    """Bytes of datagrams waiting in the server's UDP sockets on port
    (every worker's, /proc/net/udp's rx_queue)."""
    held = 0
    with open("/proc/net/udp") as f:
        next(f)
        for line in f:
            fields = line.split()
            if int(fields[1].split(":")[1], 16) == port:
                held += int(fields[4].split(":")[1], 16)
    return held


def wait_udp_read(port):
    """Wait until the server has read every datagram sent to its UDP
    port."""
    wait_for(lambda: udp_unread(port) == 0,
             what="the server to read its datagrams")


def client_port(c):
    """The local port of a Conn or of a plain socket."""
    return getattr(c, "sock", c).getsockname()[1]


def wait_wall_clock(t):
    """Wait until the host's clock reads at least t (seconds since the
    epoch): for time that must pass while no server runs (a TTL running
    out during a restart's downtime), or a start at a chosen fraction of
    a second.  The wait ends at the instant itself, not at the next of
    wait_for()'s polls; t more than a minute away is a test's mistake."""
    assert t - time.time() < 60, "the wall clock's %.1f is too far" % t
    while (left := t - time.time()) > 0:
        time.sleep(min(left, 0.1))
    return True


# --------------------------------------------------------------------------
# what a pass changes for a test
# --------------------------------------------------------------------------

# The settings this pass gives every server that does not choose its own,
# by the marker of the tests they can change (DEPENDS_ON).
PASS_SETTINGS = {name for name, on in (("engine", EVENT_ENGINE),
                                       ("storage", MEMORY_FILE_DIR),
                                       ("durability", DURABILITY)) if on}
_touched = []           # the servers the running test started or talked to


def applied_settings(tiers, engine):
    """The markers whose settings a server's command line took from the
    pass."""
    out = set()
    if tiers:
        out.add("storage")
        if DURABILITY:
            out.add("durability")
    if engine:
        out.add("engine")
    return out


def touched(server):
    if server not in _touched:
        _touched.append(server)


class _SelfStarted:
    """A server a test starts itself, not through Server."""

    def __init__(self, applied):
        self.applied = applied


def engine_args():
    """The pass's event engine, for a server a test starts itself (under
    a service manager, say), which then counts as taking it."""
    if not EVENT_ENGINE:
        return []
    touched(_SelfStarted({"engine"}))
    return ["-o", "event_engine=" + EVENT_ENGINE]


@pytest.fixture(autouse=True)
def pass_changes_the_test(request):
    """A test marked with what a pass changes must meet that change: in a
    pass that sets it, some server the test used, if it used any, must
    have taken it (a test whose servers all choose their own engine or
    tiers is the same in that pass as in the first: its mark would only
    cost time)."""
    _touched.clear()
    yield
    if "mc" in request.fixturenames:
        touched(request.getfixturevalue("mc"))
    rep = getattr(request.node, "rep_call", None)
    if rep is None or not rep.passed or is_reference(request.config):
        return
    for name in sorted(PASS_SETTINGS):
        if request.node.get_closest_marker(name) is None or not _touched:
            continue            # (a test of no server, a start-up check)
        if not any(name in srv.applied for srv in _touched):
            pytest.fail("marked %s, but none of its servers takes this "
                        "pass's %s setting" % (name, name), pytrace=False)


# --------------------------------------------------------------------------
# server process
# --------------------------------------------------------------------------

def tls_client_context(cert=None, key=None, **versions):
    """A TLS client context that takes any server certificate; with cert
    and key, it presents them as its own."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    for name, value in versions.items():
        setattr(ctx, name, value)
    if cert is not None:
        ctx.load_cert_chain(cert, key)
    return ctx


# Side by side: a test parametrized over "memcached-pm" and "memcached"
# runs the second against Debian's memcached where it is installed.
HAVE_MEMCACHED = os.access(REFERENCE_BIN, os.X_OK)
against_memcached = pytest.mark.skipif(
    not HAVE_MEMCACHED, reason="Debian's memcached is not installed")


def which_binary(which, binary):
    """The binary a side-by-side case runs: memcached-pm's (or, with
    --reference, memcached), or memcached."""
    return REFERENCE_BIN if which == "memcached" else binary


def start_which(which, binary, *flags):
    """A server of that side (which_binary()), started; the caller stops
    it."""
    binary = which_binary(which, binary)
    return Server(binary, flags, binary == REFERENCE_BIN).start()


def _port_block():
    """This process's ports: a block of its own per pytest-xdist worker,
    below the kernel's ephemeral range (where clients' ports and bind(0)'s
    come from).  A port the kernel picked is free only until someone binds
    it: two workers starting servers at once could be handed the same one,
    and one test would then talk to the other's server."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        hi = int(f.read().split()[0])
    lo = 1024 if hi < 20000 else 10000
    n = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    size = (hi - lo) // max(n, 1)
    return lo + int(worker[2:]) * size, size


_port = {"block": None, "next": 0}


def _bindable(port):
    """Nothing holds the port, over TCP or UDP."""
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        with socket.socket(socket.AF_INET, kind) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def free_port():
    """A port for a server, free over TCP and UDP, not handed out before
    by this process (until its block wraps around)."""
    if _port["block"] is None:
        _port["block"] = _port_block()
        # another run's ports (a developer's second run) start elsewhere
        _port["next"] = uuid.uuid4().int % _port["block"][1]
    lo, size = _port["block"]
    for _ in range(size):
        port = lo + _port["next"] % size
        _port["next"] += 1
        if _bindable(port):
            return port
    raise RuntimeError("no free port in %d..%d" % (lo, lo + size - 1))


def base_args(port):
    args = ["-U", "0", "-l", "127.0.0.1", "-p", str(port)]
    if os.geteuid() == 0:
        args += ["-u", "root"]
    return args


class Server:
    """One server process; start() waits until `version` answers."""

    def __init__(self, binary, flags, reference, tls=None, env=None,
                 preexec=None, port=None, recovered=True, may_die=False):
        self.binary = binary
        # a server that exits before it answers is returned as it is
        self.may_die = may_die
        # ready means every item of a memory file read back (stats
        # recovery_running 0), unless the test watches the recovery
        self.recovered = recovered
        self.flags = list(flags)
        self.reference = reference
        self.proc = None
        self.port = None
        self.fixed_port = port      # a node restarted where its pool knows it
        self.errfile = None
        self.returncode = None
        self.memory_file = None
        self.applied = set()        # the pass's settings this server took
        # -Z: the port speaks TLS; connections take this client context
        if tls is None and "-Z" in self.flags:
            tls = tls_client_context()
        self.tls = tls
        self.env = dict(os.environ, **env) if env else None
        self.preexec = preexec
        self.cmd = None
        self.predecessors = []      # (process, stderr file) taken over

    @property
    def pid(self):
        return self.proc.pid

    def stderr(self):
        self.errfile.flush()
        with open(self.errfile.name, "rb") as f:
            return f.read().decode(errors="replace")

    def start(self):
        for attempt in range(3):
            self.port = self.fixed_port or free_port()
            self.errfile = tempfile.NamedTemporaryFile(
                prefix="mcpm-err-", suffix=".log")
            cmd = [self.binary] + base_args(self.port) + self.flags
            tiers, engine = self._memory_file_args(), self._engine_args()
            cmd += tiers + engine
            self.cmd = cmd
            self.applied = applied_settings(tiers, engine)
            touched(self)
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL,
                                         stderr=self.errfile,
                                         env=self._counters_env(),
                                         preexec_fn=self.preexec)
            if self._wait_ready() or (self.may_die and
                                      self.proc.poll() is not None):
                return self
            err = self.stderr()
            if "bind" not in err.lower() and "in use" not in err.lower():
                break
        rc = self.proc.poll()
        self.stop()
        pytest.fail("server %s did not start (rc=%s); stderr:\n%s"
                    % (" ".join(cmd), rc, self.stderr()))

    def take_over(self, env=None, binary=None, wait=True):
        """Start a successor with this server's command line (under -o
        takeover=<path>, it takes the port, the connections and the
        memory file over; binary: another build's), and with wait, wait
        until the old process has exited with status 0 and without a
        sanitizer report, the new one answering.  Returns the old
        process; self is the successor from then on."""
        old, olderr = self.proc, self.errfile
        cmd = list(self.cmd)
        if binary is not None:
            cmd[0] = binary
        self.errfile = tempfile.NamedTemporaryFile(prefix="mcpm-err-",
                                                   suffix=".log")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL,
                                     stderr=self.errfile,
                                     env=dict(self.env or os.environ,
                                              **(env or {})))
        self.predecessors.append((old, olderr))
        if wait:
            self.wait_taken_over(old)
        return old

    def wait_taken_over(self, old):
        """The old process handed over and exited cleanly; this one
        answers."""
        try:
            rc = old.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail("the old server did not hand over:\n" +
                        self.stderr())
        err = self.predecessor_stderr(old)
        assert rc == 0, "the old server exited %s:\n%s" % (rc, err)
        assert not any(m in err for m in SANITIZER_MARKS), err
        if not self._wait_ready():
            pytest.fail("the successor does not answer:\n" + self.stderr())

    def predecessor_stderr(self, proc):
        for p, f in self.predecessors:
            if p is proc:
                f.flush()
                with open(f.name, "rb") as r:
                    return r.read().decode(errors="replace")
        return ""

    def _memory_file_args(self):
        """MCPM_MEMORY_FILE_DIR runs every server with its items in a
        PMEM-tier file there (a tmpfs such as /dev/shm stands in for DAX),
        under MCPM_TIER_POLICY if set (pmem by default) and
        MCPM_DURABILITY; the file is removed when the server stops."""
        if self.reference or not MEMORY_FILE_DIR:
            return []
        if "-e" in self.flags or any("memory_file" in f or "tier_policy" in f
                                     for f in self.flags):
            return []           # the test chose its own tiers
        self.memory_file = os.path.join(MEMORY_FILE_DIR,
                                        SHM_PREFIX + "test-%d.pm" % self.port)
        remove_memory_file(self.memory_file)
        opt = "memory_file=" + self.memory_file
        if TIER_POLICY:
            opt += ",tier_policy=" + TIER_POLICY
        if DURABILITY:
            opt += ",memory_file_durability=" + DURABILITY
        return ["-o", opt]

    def _counters_env(self):
        """script/pass-coverage: a server that took the pass's settings
        writes its gcov counters to MCPM_GCOV_CHANGED, apart from every
        other process's, so that they count what ran under the setting."""
        changed = os.environ.get("MCPM_GCOV_CHANGED")
        if not changed or not self.applied & PASS_SETTINGS:
            return self.env
        return dict(self.env or os.environ, GCOV_PREFIX=changed)

    def _engine_args(self):
        """MCPM_EVENT_ENGINE: the engine every server runs on."""
        if self.reference or not EVENT_ENGINE or \
                any("event_engine" in f for f in self.flags):
            return []
        return ["-o", "event_engine=" + EVENT_ENGINE]

    def _remove_memory_file(self):
        if self.memory_file:
            remove_memory_file(self.memory_file)

    def _wait_ready(self):
        """True once the server answers; False if it exits first or does
        not answer within START_TIMEOUT (it is then stopped)."""
        def answered_or_exited():
            if self.proc.poll() is not None:
                return "exited"
            try:
                with Conn(self.port, timeout=1.0, tls=self.tls) as c:
                    if self._answers(c):
                        return "answered"
            except (OSError, ConnClosed):
                pass
            return None
        try:
            how = wait_for(answered_or_exited, START_TIMEOUT,
                           "the server to answer")
        except AssertionError:
            self.stop()
            return False
        return how == "answered"

    def _answers(self, c):
        """A ready server answers `version`: under -B binary or -S, a
        binary VERSION (magic 0x80, opcode 0x0b; it needs no SASL) with
        its reply header; under -Y, with the refusal of a client that has
        not authenticated."""
        if self.binary_only():
            c.send(b"\x80\x0b" + b"\0" * 22)
            return c.read_exact(24)[:2] == b"\x81\x0b"
        line = c.req(b"version\r\n")
        if "-Y" in self.flags:
            return line == b"CLIENT_ERROR unauthenticated\r\n"
        if VERSION_RE.match(line) is None:
            return False
        return (not self.may_recover() or
                c.stats().get("recovery_running", "0") == "0")

    def may_recover(self):
        """Whether start-up may read a memory file back while it serves:
        one the test chose (a file of the memory-file pass is made anew,
        and no reply is asked for it: counters stay memcached's)."""
        return (self.recovered and not self.reference and
                ("-e" in self.flags or
                 any("memory_file=" in f for f in self.flags)))

    def binary_only(self):
        f = self.flags
        return "-S" in f or any(f[i] == "-B" and f[i + 1] == "binary"
                                for i in range(len(f) - 1))

    def alive(self):
        return self.proc.poll() is None

    def conn(self, timeout=5.0, tls=None):
        touched(self)
        return Conn(self.port, timeout, tls or self.tls)

    def check_alive(self):
        """Assert the process runs and a new connection gets `version`."""
        assert self.alive(), "server died:\n" + self.stderr()
        with self.conn() as c:
            c.sync()

    def stats(self, arg=""):
        with self.conn() as c:
            return c.stats(arg)

    def send_read(self, conn, data, timeout=10.0):
        """Send data on conn and wait until the server has read all of it,
        so that what is sent next reaches it in a later read."""
        conn.send(data)
        self.wait_read(conn, timeout=timeout)

    def wait_read(self, *conns, timeout=10.0):
        """Wait until the server has read every byte the connections (Conns
        or sockets) sent it, or closed them: the kernel holds none of it.
        This needs nothing from the server, so it works while the server
        cannot answer (out of read buffers, say)."""
        ports = {client_port(c) for c in conns}

        def all_read():
            q = tcp_queues(self.port, ports)
            return all(q.get(p, (0, 0))[0] == 0 for p in ports)
        wait_for(all_read, timeout, "the server to read what %d "
                 "connections sent" % len(ports))

    def wait_replying(self, *conns, timeout=10.0):
        """Wait until the server has started a reply on each connection
        that its client has not taken yet: the kernel holds bytes of it."""
        ports = {client_port(c) for c in conns}

        def all_replying():
            q = tcp_queues(self.port, ports)
            return all(q.get(p, (0, 0))[1] > 0 for p in ports)
        wait_for(all_replying, timeout, "the server to reply on %d "
                 "connections" % len(ports))

    def item_limit(self):
        """Bytes of items the server may hold: -m, plus the memory file's
        under a policy that keeps items in DRAM and in the file (each
        tier's limit is in `stats tiers`)."""
        tiers = self.stats("tiers")
        return sum(int(v) for k, v in tiers.items()
                   if k.endswith(":limit_maxbytes"))

    def rss_kb(self):
        with open("/proc/%d/status" % self.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def signal(self, sig):
        self.proc.send_signal(sig)

    def wait(self, timeout=STOP_TIMEOUT):
        self.returncode = self.proc.wait(timeout)
        return self.returncode

    def stop(self):
        """SIGTERM, then SIGKILL after STOP_TIMEOUT.  Returns a list of
        problems seen: a sanitizer report on stderr, or a bad exit after
        our SIGTERM (a server that exited by itself, e.g. `shutdown`,
        is judged by its own test)."""
        problems = []
        if self.proc is None:
            return problems
        if self.proc.poll() is None and self.reference:
            # memcached leaves only at its next clock tick, up to a second
            # after SIGTERM; how it exits is not under test here
            self.proc.kill()
            self.proc.wait()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                problems.append("did not exit %ss after SIGTERM"
                                % STOP_TIMEOUT)
            if self.proc.returncode != 0:
                problems.append("exit status %s after SIGTERM"
                                % self.proc.returncode)
        self.returncode = self.proc.returncode
        self._remove_memory_file()
        err = self.stderr()
        for p, _ in self.predecessors:
            if p.poll() is None:        # a test left one behind
                p.kill()
                p.wait()
            err += self.predecessor_stderr(p)
        for mark in SANITIZER_MARKS:
            if mark in err:
                problems.append("sanitizer report (%s)" % mark)
        return problems

    def assert_clean_stop(self):
        problems = self.stop()
        if problems:
            pytest.fail("server %s: %s\n--- stderr (tail) ---\n%s" % (
                " ".join(self.flags), "; ".join(problems),
                self.stderr()[-4000:]))


@pytest.fixture(scope="session")
def reference(request):
    return is_reference(request.config)


@pytest.fixture(scope="session")
def binary(request):
    path = server_binary(request.config)
    if not os.access(path, os.X_OK):
        pytest.fail("server binary %s is missing (set MCPM_BIN)" % path)
    return path


def remove_memory_file(path):
    """Remove a memory file and what the server keeps beside it (-e's
    <file>.meta, the index a clean stop saves, the keys removed while a
    recovery ran, and the .tmp files they are written through)."""
    for p in (path, path + ".meta", path + ".meta.tmp", path + ".index",
              path + ".index.tmp", path + ".removed"):
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass


# Memory file paths handed out; server_factory removes them again once its
# servers have stopped (a server writes -e's <file>.meta as it stops,
# which may come after the path's fixture has torn down).
_memfiles = []


def new_memory_file(path):
    """Register path as a memory file this test makes: it is removed, with
    what the server keeps beside it, after the test's servers stop."""
    _memfiles.append(path)
    return path


@pytest.fixture
def memfile():
    """A PMEM-tier memory file path under /dev/shm (tmpfs stands in for a
    DAX filesystem), unique per test; the file is removed after the test,
    so servers restarted on it within the test see their own file."""
    path = new_memory_file(SHM_DIR + "/" + SHM_PREFIX + "pmem-%s.pm"
                           % uuid.uuid4().hex)
    yield path
    remove_memory_file(path)


@pytest.fixture
def server_factory(binary, reference):
    """start(*flags, tls=ctx, env=vars, port=n) -> Server; every server
    started is stopped after.  With -Z, tls is the client context its
    connections use (by default one that takes any certificate and shows
    none); env adds to the server's environment; preexec runs in the child
    before exec (limits); port is the port to listen on (default: a free
    one), and binary another build's server; with recovered=False it is
    ready once it answers, its memory file maybe still being read back;
    with may_die=True a server that exits before it answers is returned,
    not failed (its proc tells how it ended)."""
    started = []

    def start(*flags, tls=None, env=None, preexec=None, port=None,
              binary=binary, recovered=True, may_die=False):
        s = Server(binary, flags, reference, tls, env, preexec, port,
                   recovered, may_die)
        started.append(s)
        return s.start()

    yield start
    problems = []
    for s in started:
        try:
            s.assert_clean_stop()
        except pytest.fail.Exception as e:
            problems.append(str(e))
    while _memfiles:
        remove_memory_file(_memfiles.pop())
    if problems:
        pytest.fail("\n".join(problems))


@pytest.fixture(scope="module")
def mc(binary, reference):
    """The default server shared by the tests of one module."""
    s = Server(binary, [], reference).start()
    yield s
    s.assert_clean_stop()


@pytest.fixture
def conn(mc, request):
    """A fresh connection to the module's server, its cache flushed;
    asserts at the end of a passing test that no stray reply bytes were
    left behind."""
    c = mc.conn()
    c.call(b"flush_all\r\n", b"OK\r\n")
    yield c
    try:
        rep = getattr(request.node, "rep_call", None)
        if rep is not None and rep.passed:
            c.sync()
    finally:
        c.close()


def run_binary(binary, args, timeout=10):
    """Run the server binary to completion (flag checks)."""
    cmd = [binary] + list(args)
    if os.geteuid() == 0 and "-u" not in args:
        cmd += ["-u", "root"]
    return subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True,
                          timeout=timeout)


@pytest.fixture
def run(binary):
    return lambda *args: run_binary(binary, args)
