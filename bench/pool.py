#!/usr/bin/python3
"""pool.py: a pool of cache nodes through a crash, a rolling restart and a
rolling upgrade, memcached-pm against Debian's memcached, side by side.

    /usr/bin/python3 bench/pool.py [--nodes 3] [--keys 20000]
        [--after 4] [--db-ms 1] [--servers mcpm,memcached,memcached-e]
        [--layers proxy,ketama,dalli] [--scenarios kill,rolling,upgrade]
        [--out doc/pool]

N nodes on 127.0.0.1 behind twemproxy (nutcracker, contrib/nutcracker.yml),
or reached directly through pylibmc's ketama (contrib/pool_pylibmc.py), or
through dalli, Ruby's client, with its own ring and down rule
(contrib/pool_dalli.rb; bench/pool_dalli.rb).  Two cache-aside readers
run side by side, one on Zipf-distributed keys (s = 1.0) and one on
uniform keys: a hit is served, a miss or an error goes to the "database"
(--db-ms, 1 ms: a miss costs the reader that much, as a real one, and a
node that fails fast cannot flood the counts) and a miss sets the key
again.  Per half second, each counts requests, hits, misses and errors,
and times every request.  After two seconds of steady state, the event:

  kill            SIGKILL one node, start it again at once (same port,
                  file)
  crash           the kill at size: --keys in the millions, loaded through
                  the proxy by mcload, the node killed (SIGKILL) and
                  started again 100 ms later as systemd's Restart= does
                  (RestartSec=100ms, contrib/'s units); memcached-pm under
                  Debian's systemd (as rolling-systemd), whose socket
                  unit keeps its listener, so that clients queue while
                  it is down; memcached has no socket activation: its port
                  refuses until it listens again.  Proxy layer only; per
                  half second of every server, OUT/crash.md tables the
                  requests, hits, misses and failures
  rolling         every node in turn restarted, the next once it serves:
                  memcached-pm by a takeover (a new node started with the
                  same -o takeover=<path> takes the port, the connections
                  and the file over); memcached stopped (memcached -e:
                  SIGUSR1, which saves its state) and started
  upgrade         as rolling, each node started under this tree's build
                  after running under the oldest build it takes over from
                  (script/build-handover-prev); memcached has one build,
                  so for it this is a rolling restart again
  rolling-systemd memcached-pm only: each node a service of Debian's
                  systemd, booted for the run in namespaces of its own
                  (tests/realsystemd.py: a .socket unit's listener and
                  the fd store, as contrib/'s units), and each in turn
                  restarted by `systemctl restart`
  reload-systemd  the same, each node in turn reloaded by `systemctl
                  reload` (a takeover inside the unit)
  rolling-plain   memcached-pm only: stopped with SIGTERM and started, no
                  takeover (the port refuses meanwhile)
  upgrade-layout  memcached-pm only: as rolling-plain, from the build
                  before the last memory-file layout change
                  (script/build-layout-prev), which has no takeover
  migrate-e       a pool of memcached -e nodes replaced node by node by
                  memcached-pm: beside each, memcached-pm started on its
                  port and file with -o takeover shares its listeners
                  and waits; memcached stops with SIGUSR1 (it saves its
                  cache) and memcached-pm converts the file, the port
                  queueing connections meanwhile
  migrate-warm    a pool of memcached nodes (no -e): beside each, a
                  memcached-pm on another port copies it (-o warm_from)
                  until it follows, listening on memcached's port too as
                  soon as it is free; then memcached stops (SIGUSR1)
  migrate-cold    the same pool, each memcached replaced by an empty
                  memcached-pm: the cold switch, for comparison

The migrate scenarios run through nutcracker and pylibmc's ketama (the
server column names the switch), and beside the readers a writer sets
keys of their own (w0..w999) to increasing versions and reads them
back: a read that returns a version older than that key's last
acknowledged write is stale (OUT/migrate.md).

then --after seconds more.  Reported per scenario, layer, server and key
distribution: the share of requests from the event on that missed or
failed, the worst half second's hit ratio, the time from the event until
the hit ratio is back within 1 % of its steady value for good, the
longest request and the 99.9th percentile from the event on (the pause a
client saw), and for memcached-pm the clean restart time of its nodes
(SIGTERM to the first reply of the next start, measured before the
readers start).  Writes OUT/results.md (the tables) and
OUT/<scenario>-<layer>.svg (Zipf reader, every server: hit ratio over
time, and the longest request of each half second).  Servers: mcpm
(memcached-pm -e <file> on /dev/shm), memcached (Debian's, no
persistence), memcached-e (Debian's -e <file> on /dev/shm, restarted
through SIGUSR1).

Environment: MCPM_BIN [build/memcached-pm/memcached-pm], MCPM_PREV_BIN
[script/build-layout-prev's], MCPM_HANDOVER_PREV_BIN
[script/build-handover-prev's], MEMCACHED [/usr/bin/memcached].  Runs
under Debian's python3 (pylibmc is its package python3-pylibmc; dalli is
ruby-dalli).  Bounded: at its defaults every run is about nine seconds
and the whole under five minutes.
"""

import argparse
import bisect
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "contrib"))
sys.path.insert(0, os.path.join(ROOT, "tests"))

import pylibmc  # noqa: E402
from nutcracker_conf import nutcracker_conf  # noqa: E402
from pool_pylibmc import POOL_BEHAVIORS  # noqa: E402
import realsystemd  # noqa: E402

BUCKET = 0.5            # seconds per sample
STEADY = 2.0            # seconds before the event
VALUE = b"v" * 100
SERVERS = ("mcpm", "memcached", "memcached-e")
LAYERS = ("proxy", "ketama", "dalli")
SCENARIOS = ("kill", "crash", "rolling", "upgrade", "rolling-systemd",
             "reload-systemd",
             "rolling-plain", "upgrade-layout", "migrate-e", "migrate-warm",
             "migrate-cold")
MCPM_ONLY = ("rolling-systemd", "reload-systemd", "rolling-plain",
             "upgrade-layout")
# the pool each migration starts from: every node ends as memcached-pm
MIGRATE = {"migrate-e": "memcached-e", "migrate-warm": "memcached",
           "migrate-cold": "memcached"}
WRITER_KEYS = 1000
ZIPF_MAX = 1000000
SPREAD = 2654435761     # a prime: rank -> key, hot keys on every node


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serves(port):
    try:
        with socket.create_connection(("127.0.0.1", port), 0.2) as s:
            s.sendall(b"version\r\n")
            return s.recv(100).startswith(b"VERSION ")
    except OSError:
        return False


def wait_until(cond, what, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit("pool.py: timed out waiting for " + what)
        time.sleep(0.002)


_systemd = None


def systemd():
    """Debian's systemd, booted once for the run in namespaces of its own
    (tests/realsystemd.py), shut down at the end."""
    global _systemd
    if _systemd is None:
        why = realsystemd.unavailable()
        if why:
            raise SystemExit("pool.py: systemd cannot boot here: " + why)
        work = tempfile.mkdtemp(prefix="mcpm-pool-systemd-", dir="/var/lib")
        _systemd = realsystemd.Systemd(work).boot()
    return _systemd


def systemd_down():
    global _systemd
    if _systemd is not None:
        _systemd.shutdown()
        shutil.rmtree(_systemd.workdir, ignore_errors=True)
        _systemd = None


class Node:
    """One cache server on a fixed port (and file), restartable; a
    service of Debian's systemd (its .socket unit, the fd store,
    Restart=) when managed."""

    def __init__(self, kind, port, binary, tmp, managed=False,
                 takeover=True, mem=64):
        self.kind, self.port, self.binary = kind, port, binary
        self.mem = mem
        self.takeover = takeover and kind == "mcpm"
        tag = "%s-%d" % (uuid.uuid4().hex[:8], port)
        self.file = os.path.join("/dev/shm", "mcpm-pool-bench-%s.pm" % tag)
        self.sock = os.path.join(tmp, "takeover-%d.sock" % port)
        self.err = open(os.path.join(tmp, "node-%d.log" % port), "ab")
        self.proc = None
        self.manager = None
        self.managed = managed

    def argv(self, binary=None):
        if binary:
            self.binary = binary
        a = [self.binary, "-p", str(self.port), "-U", "0", "-l",
             "127.0.0.1", "-m", str(self.mem), "-t", "2"]
        if os.geteuid() == 0:
            a += ["-u", "root"]
        if self.kind in ("mcpm", "memcached-e"):
            a += ["-e", self.file]
        if self.takeover:
            a += ["-o", "takeover=" + self.sock]
        return a

    def start(self, binary=None):
        if binary:
            self.binary = binary
        if self.managed:
            argv = self.argv()
            if self.takeover:       # the unit names its own socket
                argv = argv[:-2]
            self.manager = realsystemd.Service(
                systemd(), "mcpm-pool-%d" % self.port, self.port,
                [os.path.abspath(argv[0])] + argv[1:])
            self.manager.start()
            return
        self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL,
                                     stderr=self.err)
        wait_until(lambda: self.proc.poll() is None and serves(self.port),
                   "node %d to serve" % self.port)

    def stop(self, graceful=True):
        if not graceful:
            self.proc.send_signal(signal.SIGKILL)
        elif self.kind == "memcached-e":
            self.proc.send_signal(signal.SIGUSR1)   # saves its state
        else:
            self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)

    def crash(self):
        """SIGKILL, and started again RestartSec=100ms after its exit, as
        systemd's Restart=on-failure does (under systemd, systemd itself,
        its socket unit keeping the port meanwhile)."""
        if self.manager:
            self.manager.crash()
            return
        self.proc.kill()
        self.proc.wait(30)
        time.sleep(0.1)                 # RestartSec=100ms
        self.start()

    def take_over(self, binary=None):
        """A successor takes this node over; back once the old one has
        exited (the successor serves by then)."""
        old = self.proc
        if binary:
            self.binary = binary
        self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL,
                                     stderr=self.err)
        if old.wait(30) != 0:
            raise SystemExit("pool.py: node %d did not hand over"
                             % self.port)

    def restart_seconds(self):
        """A clean restart: SIGTERM to the first reply of the next start
        (under systemd, `systemctl restart` to the first reply)."""
        t = time.monotonic()
        if self.manager:
            self.manager.restart()
            return time.monotonic() - t
        self.stop()
        self.start()
        return time.monotonic() - t

    def remove(self):
        if self.manager:
            self.manager.stop()
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for p in (self.file, self.file + ".meta", self.file + ".meta.tmp",
                  self.file + ".index", self.file + ".convert",
                  self.file + ".warm", self.file + ".warm.meta",
                  self.file + ".warm.index"):
            if os.path.exists(p):
                os.unlink(p)


class Proxy:
    def __init__(self, ports, tmp):
        self.port = free_port()
        path = os.path.join(tmp, "nutcracker.yml")
        with open(path, "w") as f:
            f.write(nutcracker_conf(self.port, ports))
        self.proc = subprocess.Popen(
            ["nutcracker", "-c", path, "-o", os.path.join(tmp, "nc.log"),
             "-a", "127.0.0.1", "-s", str(free_port())],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)

        def up():
            try:
                with socket.create_connection(("127.0.0.1", self.port),
                                              0.2) as s:
                    s.sendall(b"get x\r\n")
                    return s.recv(100) == b"END\r\n"
            except OSError:
                return False
        wait_until(up, "nutcracker")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


def client(layer, nodes, proxy):
    if layer == "ketama":
        return pylibmc.Client(["127.0.0.1:%d" % n.port for n in nodes],
                              behaviors=POOL_BEHAVIORS)
    # one server, the proxy: no hashing on the client
    b = {k: v for k, v in POOL_BEHAVIORS.items() if "ketama" not in k}
    return pylibmc.Client(["127.0.0.1:%d" % proxy.port], behaviors=b)


class Zipf:
    """Ranks 0..n-1 with P(k) ~ 1/(k+1)^s, by inverse CDF (of the first
    ZIPF_MAX ranks: past them, a key is drawn once in tens of millions)."""

    def __init__(self, n, s=1.0):
        acc, self.cdf = 0.0, []
        for k in range(min(n, ZIPF_MAX)):
            acc += 1.0 / (k + 1) ** s
            self.cdf.append(acc)
        self.total = acc

    def draw(self, rng):
        return bisect.bisect_left(self.cdf, rng.random() * self.total)


class Reader(threading.Thread):
    """A cache-aside reader (pylibmc) counting per half second from t0:
    buckets[i] = [requests, hits, misses, errors, longest request], and
    lat, every request's (start, seconds)."""

    def __init__(self, mc, nkeys, dist, t0, stop, db):
        super().__init__(daemon=True)
        self.mc, self.nkeys, self.t0, self.halt = mc, nkeys, t0, stop
        self.db = db
        self.draw = Zipf(nkeys).draw if dist == "zipf" else \
            (lambda rng: rng.randrange(nkeys))
        self.buckets = {}
        self.lat = []

    def request(self, b, start, took):
        self.lat.append((start - self.t0, took))
        b[4] = max(b[4], took)

    def run(self):
        rng = random.Random(7)
        while not self.halt.is_set():
            k = "k%d" % (self.draw(rng) * SPREAD % self.nkeys)
            start = time.monotonic()
            b = self.buckets.setdefault(int((start - self.t0) / BUCKET),
                                        [0, 0, 0, 0, 0.0])
            b[0] += 1
            try:
                v = self.mc.get(k)
            except pylibmc.Error:
                b[3] += 1                   # to the database, no set
                self.request(b, start, time.monotonic() - start)
                time.sleep(self.db)
                continue
            took = time.monotonic() - start
            if v is not None:
                b[1] += 1
                self.request(b, start, took)
                continue
            b[2] += 1                       # a miss: database, then set
            time.sleep(self.db)
            s = time.monotonic()
            try:
                self.mc.set(k, VALUE)
            except pylibmc.Error:
                pass
            self.request(b, start, took + time.monotonic() - s)

    def finish(self):
        self.join()


class DalliReader:
    """The same reader through dalli: a Ruby process (bench/pool_dalli.rb)
    that reports when its stdin closes."""

    def __init__(self, nodes, nkeys, dist, t0, db):
        self.proc = subprocess.Popen(
            ["ruby", os.path.join(ROOT, "bench", "pool_dalli.rb"), "read",
             servers_arg(nodes), str(nkeys), dist, repr(t0),
             str(db * 1000), str(BUCKET)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def start(self):
        pass

    def finish(self):
        self.proc.stdin.close()
        out = json.loads(self.proc.stdout.read())
        self.proc.wait(10)
        self.buckets = {int(k): v for k, v in out["buckets"].items()}
        self.lat = [tuple(x) for x in out["lat"]]


class Writer(threading.Thread):
    """Sets keys w0..w999 to increasing versions and reads them back: a
    version older than the key's last acknowledged set is stale."""

    def __init__(self, mc, stop):
        super().__init__(daemon=True)
        self.mc, self.halt = mc, stop
        self.acked = {}
        self.writes = self.reads = self.stale = self.misses = 0
        self.errors = 0

    def run(self):
        rng = random.Random(11)
        version = 0
        while not self.halt.is_set():
            version += 1
            k = "w%d" % rng.randrange(WRITER_KEYS)
            try:
                if self.mc.set(k, b"%d" % version):
                    self.acked[k] = version
                    self.writes += 1
            except pylibmc.Error:
                self.errors += 1
            k = "w%d" % rng.randrange(WRITER_KEYS)
            try:
                got = self.mc.get(k)
            except pylibmc.Error:
                self.errors += 1
                continue
            self.reads += 1
            if got is None:
                self.misses += 1
            elif int(got) < self.acked.get(k, 0):
                self.stale += 1
            time.sleep(0.0005)

    def finish(self):
        self.join()


def warm_state(port):
    try:
        with socket.create_connection(("127.0.0.1", port), 1) as s:
            s.sendall(b"stats\r\n")
            data = b""
            while not data.endswith(b"END\r\n"):
                chunk = s.recv(65536)
                if not chunk:
                    return None
                data += chunk
    except OSError:
        return None
    for line in data.split(b"\r\n"):
        if line.startswith(b"STAT warm_state "):
            return line.split()[2].decode()
    return None


def read_from(path, offset):
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read()


def migrate(scenario, n, mcpm, tmp):
    """Replace memcached node n by memcached-pm on its port."""
    if scenario == "migrate-cold":
        n.stop()
        n.kind = "mcpm"
        n.start(mcpm)
        return
    if scenario == "migrate-e":
        # the successor starts beside memcached, shares its listeners and
        # waits; memcached's SIGUSR1 saves its cache, which the successor
        # converts while its port queues connections
        n.kind, n.takeover, old = "mcpm", True, n.proc
        log = n.err.name
        seen = os.path.getsize(log)
        n.err.flush()
        n.proc = subprocess.Popen(n.argv(mcpm), stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=n.err)
        wait_until(lambda: b"serving in its place once it stops" in
                   read_from(log, seen), "node %d's successor" % n.port)
        old.send_signal(signal.SIGUSR1)
        old.wait(30)
        wait_until(lambda: serves(n.port), "node %d to serve" % n.port)
        return
    # the warm node listens on a port of its own and on the node's, which
    # it binds the moment memcached lets it go
    port = free_port()
    n.file = n.file + ".warm"
    warm = subprocess.Popen(
        [mcpm, "-p", str(port), "-U", "0", "-l",
         "127.0.0.1,127.0.0.1:%d" % n.port, "-m", "64", "-t", "2", "-e",
         n.file, "-o", "warm_from=127.0.0.1:%d" % n.port] +
        (["-u", "root"] if os.geteuid() == 0 else []),
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=n.err)
    wait_until(lambda: warm_state(port) == "following",
               "the warm node %d to follow" % port, 60)
    n.proc.send_signal(signal.SIGUSR1)      # graceful: workers finish
    n.proc.wait(30)
    n.kind, n.binary, n.proc = "mcpm", mcpm, warm
    wait_until(lambda: serves(n.port), "the warm node on %d" % n.port)


def servers_arg(nodes):
    return ",".join("127.0.0.1:%d" % n.port for n in nodes)


def fill_at_size(proxy, nkeys):
    """The crash scenario's keys, through the proxy by mcload (pipelined):
    millions in a minute where the clients' sets take an hour."""
    mcload = os.environ.get("MCLOAD_BIN", os.path.join(
        ROOT, "build", "bench", "mcload"))
    res = subprocess.run(
        [mcload, "--server", "127.0.0.1:%d" % proxy.port, "--json",
         "--value-size", str(len(VALUE)), "--preload", "--requests", "1",
         "--keys", str(nkeys), "--key-prefix", "k", "-c", "4", "-d", "64"],
        capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit("pool.py: mcload failed: %s" % res.stderr)


def fill(layer, nodes, proxy, nkeys):
    if layer != "dalli":
        client(layer, nodes, proxy).set_multi(
            {"w%d" % i: b"0" for i in range(WRITER_KEYS)})
    if layer == "dalli":
        subprocess.run(["ruby", os.path.join(ROOT, "bench", "pool_dalli.rb"),
                        "fill", servers_arg(nodes), str(nkeys)], check=True)
        return
    mc = client(layer, nodes, proxy)
    keys = ["k%d" % i for i in range(nkeys)]
    for lo in range(0, nkeys, 500):
        failed = mc.set_multi({k: VALUE for k in keys[lo:lo + 500]})
        if failed:
            raise SystemExit("pool.py: fill failed for %d keys" % len(failed))


def event(scenario, nodes, binaries, tmp):
    if scenario in MIGRATE:
        for n in nodes:
            migrate(scenario, n, binaries["to"], tmp)
        return
    if scenario == "kill":
        nodes[0].stop(graceful=False)
        nodes[0].start()
        return
    if scenario == "crash":
        nodes[0].crash()
        return
    for n in nodes:
        if n.manager and scenario == "reload-systemd":
            n.manager.reload()
        elif n.manager:
            n.manager.restart()
        elif n.kind == "mcpm" and scenario in ("rolling", "upgrade"):
            n.take_over(binaries["to"])
        else:
            n.stop()
            n.start(binaries["to"])


def summarise(buckets, lat, t_event):
    """From the event on: (requests missed or failed, worst half second's
    hit ratio, seconds back to steady state, requests, longest request,
    99.9th percentile)."""
    idx = sorted(buckets)
    first = int(t_event / BUCKET)
    steady = [buckets[i] for i in idx if 0 < i < first]
    base = sum(b[1] for b in steady) / max(1, sum(b[0] for b in steady))
    after = [i for i in idx if i >= first and buckets[i][0] > 0]
    reqs = sum(buckets[i][0] for i in after)
    lost = sum(buckets[i][2] + buckets[i][3] for i in after)
    worst = min(buckets[i][1] / buckets[i][0] for i in after)
    back = None
    for j, i in enumerate(after):
        if all(buckets[x][1] / buckets[x][0] >= base - 0.01
               for x in after[j:]):
            back = max(0.0, i * BUCKET - t_event)
            break
    times = sorted(t for s, t in lat if s >= t_event)
    p999 = times[min(len(times) - 1, int(len(times) * 0.999))] if times \
        else 0.0
    return (lost, worst, back, reqs,
            times[-1] if times else 0.0, p999)


def binaries_for(kind, scenario, args):
    """The build each node starts under, and the one it ends under."""
    if scenario in MIGRATE:
        return {"from": args.memcached, "to": args.mcpm}
    if kind != "mcpm":
        return {"from": args.memcached, "to": args.memcached}
    if scenario == "upgrade":
        return {"from": args.handover_prev, "to": args.mcpm}
    if scenario == "upgrade-layout":
        return {"from": args.prev, "to": args.mcpm}
    return {"from": args.mcpm, "to": args.mcpm}


def run_one(kind, layer, scenario, args, tmp):
    bins = binaries_for(kind, scenario, args)
    managed = kind == "mcpm" and scenario in ("rolling-systemd",
                                              "reload-systemd", "crash")
    # the build before the last layout change has no takeover
    start_kind = MIGRATE.get(scenario, kind)
    # room for the keys and their 100-byte values, in either server,
    # with no eviction
    mem = 64 if scenario != "crash" else \
        args.keys * 250 // args.nodes // (1 << 20) + 256
    nodes = [Node(start_kind, free_port(), bins["from"], tmp, managed,
                  takeover=scenario != "upgrade-layout" and
                  scenario not in MIGRATE, mem=mem)
             for _ in range(args.nodes)]
    proxy = None
    try:
        for n in nodes:
            n.start()
        if layer == "proxy":
            proxy = Proxy([n.port for n in nodes], tmp)
        if scenario == "crash":
            fill_at_size(proxy, args.keys)
        fill(layer, nodes, proxy, 0 if scenario == "crash" else args.keys)
        restart = None
        if start_kind == "mcpm" and scenario != "crash":
            restart = sorted(n.restart_seconds() for n in nodes)[
                len(nodes) // 2]
        stop = threading.Event()
        t0 = time.monotonic()
        readers = {}
        for d in ("zipf", "uniform"):
            if layer == "dalli":
                readers[d] = DalliReader(nodes, args.keys, d, t0,
                                         args.db_ms / 1000)
            else:
                readers[d] = Reader(client(layer, nodes, proxy), args.keys,
                                    d, t0, stop, args.db_ms / 1000)
        writer = None
        if scenario in MIGRATE:
            writer = Writer(client(layer, nodes, proxy), stop)
            writer.start()
        for r in readers.values():
            r.start()
        time.sleep(STEADY)              # the steady state being measured
        t_event = time.monotonic() - t0
        event(scenario, nodes, bins, tmp)
        time.sleep(args.after)          # the run's measured tail
        stop.set()
        for r in readers.values():
            r.finish()
        if writer:
            writer.finish()
        return {d: (summarise(r.buckets, r.lat, t_event), r.buckets,
                    t_event, restart, writer)
                for d, r in readers.items()}
    finally:
        if proxy:
            proxy.stop()
        for n in nodes:
            n.remove()


COLOURS = {"mcpm": "#2b6cb0", "memcached": "#c53030",
           "memcached-e to mcpm": "#2b6cb0", "memcached to mcpm": "#2b6cb0",
           "memcached-e": "#dd6b20"}


def svg(path, title, series):
    """Two panels over time, one line per server (Zipf reader): the hit
    ratio, and the longest request of each half second (log scale)."""
    w, left, right, top = 640, 60, 150, 44
    ph, gap, bottom = 200, 50, 40
    h = top + 2 * ph + gap + bottom
    pw = w - left - right
    tmax = max(max(b) for _, b, _ in series.values()) * BUCKET + BUCKET
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="sans-serif" font-size="11">' % (w, h),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="16" font-size="13">%s</text>' % (left, title)]

    def x_of(t):
        return left + pw * t / tmax

    def grid(y0, ticks):
        for frac, label in ticks:
            y = y0 + ph * (1 - frac)
            out.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" '
                       'stroke="#ddd"/>' % (left, left + pw, y, y))
            out.append('<text x="%d" y="%.1f" text-anchor="end">%s</text>'
                       % (left - 4, y + 4, label))
    y2 = top + ph + gap
    grid(top, [(r, "%d%%" % (r * 100)) for r in (0, .25, .5, .75, 1)])
    # 0.1 ms to 10 s, a decade a tick
    decades = [(i / 5, lab) for i, lab in enumerate(
        ["0.1 ms", "1 ms", "10 ms", "100 ms", "1 s", "10 s"])]
    grid(y2, decades)
    out.append('<text x="%d" y="%d">hit ratio</text>' % (left, top - 4))
    out.append('<text x="%d" y="%d">longest request in each half second'
               '</text>' % (left, y2 - 4))
    for t in range(0, int(tmax) + 1):
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%d s</text>'
                   % (x_of(t), y2 + ph + 16, t))

    def lat_y(s):
        import math
        frac = (math.log10(max(s, 1e-4)) + 4) / 5
        return y2 + ph * (1 - min(1.0, max(0.0, frac)))
    for i, (kind, (_, buckets, t_event)) in enumerate(series.items()):
        ks = [b for b in sorted(buckets) if buckets[b][0] > 0]
        hit = ["%.1f,%.1f" % (x_of((b + 0.5) * BUCKET),
                              top + ph * (1 - buckets[b][1] / buckets[b][0]))
               for b in ks]
        lat = ["%.1f,%.1f" % (x_of((b + 0.5) * BUCKET), lat_y(buckets[b][4]))
               for b in ks]
        for pts in (hit, lat):
            out.append('<polyline fill="none" stroke-width="2" stroke="%s" '
                       'points="%s"/>' % (COLOURS[kind], " ".join(pts)))
        out.append('<text x="%d" y="%d" fill="%s">%s</text>'
                   % (left + pw + 10, top + 14 + 16 * i, COLOURS[kind],
                      kind))
        for y0 in (top, y2):
            out.append('<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" '
                       'stroke="#888" stroke-dasharray="4"/>'
                       % (x_of(t_event), x_of(t_event), y0, y0 + ph))
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def names(ap, what, value, known):
    """A comma-separated list of known names, or the usage and an error."""
    got = [v for v in value.split(",") if v]
    bad = [v for v in got if v not in known]
    if bad or not got:
        ap.error("unknown %s %s (choose from %s)"
                 % (what, ", ".join(repr(b) for b in bad) or "''",
                    ", ".join(known)))
    return got


def build(script):
    return os.path.join(ROOT, subprocess.run(
        ["bash", os.path.join(ROOT, "script", script)], check=True,
        capture_output=True, text=True).stdout.strip())


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--keys", type=int, default=20000)
    ap.add_argument("--after", type=float, default=4.0)
    ap.add_argument("--db-ms", type=float, default=1.0)
    ap.add_argument("--servers", default=",".join(SERVERS),
                    help="of " + ", ".join(SERVERS))
    ap.add_argument("--layers", default=",".join(LAYERS),
                    help="of " + ", ".join(LAYERS))
    ap.add_argument("--scenarios", default="kill,rolling,upgrade",
                    help="of " + ", ".join(SCENARIOS))
    ap.add_argument("--out", default=os.path.join(ROOT, "doc", "pool"))
    args = ap.parse_args()
    args.servers = names(ap, "server", args.servers, SERVERS)
    args.layers = names(ap, "layer", args.layers, LAYERS)
    args.scenarios = names(ap, "scenario", args.scenarios, SCENARIOS)
    args.mcpm = os.environ.get("MCPM_BIN", os.path.join(
        ROOT, "build", "memcached-pm", "memcached-pm"))
    args.memcached = os.environ.get("MEMCACHED", "/usr/bin/memcached")
    if "mcpm" in args.servers:
        if "upgrade" in args.scenarios:
            args.handover_prev = os.environ.get("MCPM_HANDOVER_PREV_BIN") \
                or build("build-handover-prev")
        if "upgrade-layout" in args.scenarios:
            args.prev = os.environ.get("MCPM_PREV_BIN") or \
                build("build-layout-prev")
    return args


def row(scenario, layer, kind, dist, s, restart, after):
    lost, worst, back, reqs, longest, p999 = s
    return ("| %s | %s | %s | %s | %.3f %% (%d) | %.1f %% | %s | %d "
            "| %.1f ms | %.1f ms | %s |"
            % (scenario, layer, kind, dist, 100 * lost / max(1, reqs), lost,
               100 * worst,
               "%.1f s" % back if back is not None
               else "not within %.0f s" % after, reqs, longest * 1e3,
               p999 * 1e3, "%.1f ms" % (restart * 1e3) if restart else "-"))


def writer_row(scenario, layer, w):
    return ("| %s | %s | %d | %d | %d | %d | %d |"
            % (scenario, layer, w.writes, w.reads, w.misses, w.errors,
               w.stale))


def per_half_second(halves, args):
    """The crash scenario, per half second from a second before the
    crash: each server's requests, hits, misses and failures (both
    readers together).  Row t is the half second from t after the one
    the crash fell in."""
    kinds = list(halves)
    out = ["%d keys on %d nodes, through nutcracker; node 0 killed in the "
           "half second at t = 0 and started again 100 ms after its exit"
           "\n" % (args.keys, args.nodes),
           "| t (s) |" + "".join(" %s: requests / hits / misses / failures "
                                 "|" % k for k in kinds),
           "|---:|" + "---:|" * len(kinds)]
    span = int(args.after / BUCKET)
    for j in range(-2, span + 1):
        cells = []
        for k in kinds:
            tot = [0, 0, 0, 0]
            for _, buckets, t_event, _, _ in halves[k].values():
                b = buckets.get(int(t_event / BUCKET) + j, [0] * 5)
                tot = [tot[x] + b[x] for x in range(4)]
            cells.append(" %d / %d / %d / %d |" % tuple(tot))
        out.append("| %.1f |%s" % (j * BUCKET, "".join(cells)))
    return "\n".join(out) + "\n"


def main():
    args = parse_args()
    os.makedirs(args.out, exist_ok=True)
    wrote = ["| scenario | layer | sets acknowledged | reads | misses "
             "| failures | stale |", "|---|---|---:|---:|---:|---:|---:|"]
    lines = ["| scenario | layer | server | keys | missed or failed "
             "| worst 0.5 s hit ratio | back to steady | requests "
             "| longest request | p99.9 | clean restart |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    halves = {}
    with tempfile.TemporaryDirectory(prefix="pool-bench-") as tmp:
        for scenario in args.scenarios:
            for layer in args.layers:
                plot = {}
                for kind in args.servers:
                    if kind != "mcpm" and (scenario in MCPM_ONLY or
                                           scenario in MIGRATE):
                        continue
                    if scenario in MIGRATE and layer == "dalli":
                        continue
                    if scenario == "crash" and layer != "proxy":
                        continue
                    res = run_one(kind, layer, scenario, args, tmp)
                    label = kind
                    if scenario in MIGRATE:
                        label = "%s to mcpm" % MIGRATE[scenario]
                    if scenario == "crash":
                        halves[label] = res
                    for dist, (s, buckets, t_event, restart, writer) in \
                            res.items():
                        lines.append(row(scenario, layer, label, dist, s,
                                         restart, args.after))
                        print(lines[-1], flush=True)
                        if dist == "zipf":
                            plot[label] = (s, buckets, t_event)
                    if writer:
                        wrote.append(writer_row(scenario, layer, writer))
                        print(wrote[-1], flush=True)
                if not plot:
                    continue
                svg(os.path.join(args.out, "%s-%s.svg" % (scenario, layer)),
                    "%s, %s (Zipf reader), event at the dashed line"
                    % (scenario, layer), plot)
    if halves:
        with open(os.path.join(args.out, "crash.md"), "w") as f:
            f.write(per_half_second(halves, args))
        if args.scenarios == ["crash"]:
            return
    name = "migrate.md" if all(x in MIGRATE for x in args.scenarios) \
        else "results.md"
    with open(os.path.join(args.out, name), "w") as f:
        f.write("\n".join(lines) + "\n")
        if len(wrote) > 2:
            f.write("\n" + "\n".join(wrote) + "\n")


if __name__ == "__main__":
    try:
        main()
    finally:
        systemd_down()
