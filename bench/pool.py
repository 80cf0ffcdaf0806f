#!/usr/bin/python3
"""pool.py: a pool of cache nodes through a crash, a rolling restart and a
rolling upgrade, memcached-pm against Debian's memcached, side by side.

    /usr/bin/python3 bench/pool.py [--nodes 3] [--keys 20000]
        [--after 4] [--db-ms 1] [--servers mcpm,memcached,memcached-e]
        [--layers proxy,ketama] [--scenarios kill,rolling,upgrade]
        [--out doc/pool]

N nodes on 127.0.0.1 behind twemproxy (nutcracker, contrib/nutcracker.yml)
or reached directly through pylibmc's ketama (contrib/pool_pylibmc.py).
Two cache-aside readers run side by side, one on Zipf-distributed keys
(s = 1.0) and one on uniform keys: a hit is served, a miss or an error
goes to the "database" (--db-ms, 1 ms: a miss costs the reader that
much, as a real one, and a node that fails fast cannot flood the counts)
and a miss sets the key again.  Per half second,
each counts requests, hits, misses and errors.  After two seconds of
steady state, the event:

  kill      SIGKILL one node, start it again at once (same port, file)
  rolling   every node in turn: stop it gracefully (memcached -e: SIGUSR1,
            which saves its state), start it, wait until it serves
  upgrade   as rolling, each node started under this tree's build after
            running under the build before the last memory-file layout
            change (script/build-layout-prev); memcached has one build, so
            for it this is a rolling restart again

then --after seconds more.  Reported per scenario, layer, server and key
distribution: the share of requests from the event on that missed or
failed, the worst half second's hit ratio, and the time from the event
until the hit ratio is back within 1 % of its steady value for good.
Writes OUT/results.md (the tables) and OUT/<scenario>-<layer>.svg (hit
ratio over time, Zipf reader, every server).  Servers: mcpm (memcached-pm
-e <file> on /dev/shm), memcached (Debian's, no persistence), memcached-e
(Debian's -e <file> on /dev/shm, restarted through SIGUSR1).

Environment: MCPM_BIN [build/memcached-pm/memcached-pm], MCPM_PREV_BIN
[script/build-layout-prev's], MEMCACHED [/usr/bin/memcached].  Runs under
Debian's python3 (pylibmc is its package python3-pylibmc).  Bounded: at
its defaults every run is about nine seconds and the whole under five
minutes.
"""

import argparse
import bisect
import os
import random
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

import pylibmc  # noqa: E402
from nutcracker_conf import nutcracker_conf  # noqa: E402
from pool_pylibmc import POOL_BEHAVIORS  # noqa: E402

BUCKET = 0.5            # seconds per sample
STEADY = 2.0            # seconds before the event
VALUE = b"v" * 100


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


class Node:
    """One cache server on a fixed port (and file), restartable."""

    def __init__(self, kind, port, binary, tmp):
        self.kind, self.port, self.binary = kind, port, binary
        self.file = os.path.join("/dev/shm", "mcpm-pool-bench-%s-%d.pm"
                                 % (uuid.uuid4().hex[:8], port))
        self.err = open(os.path.join(tmp, "node-%d.log" % port), "ab")
        self.proc = None

    def argv(self):
        a = [self.binary, "-p", str(self.port), "-U", "0", "-l",
             "127.0.0.1", "-m", "64", "-t", "2"]
        if os.geteuid() == 0:
            a += ["-u", "root"]
        if self.kind in ("mcpm", "memcached-e"):
            a += ["-e", self.file]
        return a

    def start(self, binary=None):
        if binary:
            self.binary = binary
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

    def remove(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for p in (self.file, self.file + ".meta", self.file + ".meta.tmp"):
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
    """Ranks 0..n-1 with P(k) ~ 1/(k+1)^s, by inverse CDF."""

    def __init__(self, n, s=1.0):
        acc, self.cdf = 0.0, []
        for k in range(n):
            acc += 1.0 / (k + 1) ** s
            self.cdf.append(acc)
        self.total = acc

    def draw(self, rng):
        return bisect.bisect_left(self.cdf, rng.random() * self.total)


class Reader(threading.Thread):
    """A cache-aside reader counting per half second from t0."""

    def __init__(self, mc, nkeys, dist, t0, stop, db):
        super().__init__(daemon=True)
        self.mc, self.nkeys, self.t0, self.halt = mc, nkeys, t0, stop
        self.db = db
        self.draw = Zipf(nkeys).draw if dist == "zipf" else \
            (lambda rng: rng.randrange(nkeys))
        self.buckets = {}       # index: [requests, hits, misses, errors]

    def run(self):
        rng = random.Random(7)
        perm = list(range(self.nkeys))
        random.Random(3).shuffle(perm)      # hot keys on every node
        while not self.halt.is_set():
            k = "k%d" % perm[self.draw(rng)]
            b = self.buckets.setdefault(
                int((time.monotonic() - self.t0) / BUCKET), [0, 0, 0, 0])
            b[0] += 1
            try:
                v = self.mc.get(k)
            except pylibmc.Error:
                b[3] += 1                   # to the database, no set
                time.sleep(self.db)
                continue
            if v is not None:
                b[1] += 1
                continue
            b[2] += 1                       # a miss: database, then set
            time.sleep(self.db)
            try:
                self.mc.set(k, VALUE)
            except pylibmc.Error:
                pass


def fill(mc, nkeys):
    keys = ["k%d" % i for i in range(nkeys)]
    for lo in range(0, nkeys, 500):
        failed = mc.set_multi({k: VALUE for k in keys[lo:lo + 500]})
        if failed:
            raise SystemExit("pool.py: fill failed for %d keys" % len(failed))


def event(scenario, nodes, cur_bin):
    if scenario == "kill":
        nodes[0].stop(graceful=False)
        nodes[0].start()
        return
    for n in nodes:
        n.stop()
        n.start(cur_bin if scenario == "upgrade" else None)


def summarise(buckets, t_event, t_end):
    """(share missed or failed from the event on, worst half second's hit
    ratio, seconds from the event back to steady state, requests)."""
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
    return lost / max(1, reqs), worst, back, reqs


def run_one(kind, layer, scenario, args, tmp):
    mc_bin = args.memcached
    first_bin = args.prev if (kind == "mcpm" and scenario == "upgrade") \
        else (args.mcpm if kind == "mcpm" else mc_bin)
    cur_bin = args.mcpm if kind == "mcpm" else mc_bin
    nodes = [Node(kind, free_port(), first_bin, tmp)
             for _ in range(args.nodes)]
    proxy = None
    try:
        for n in nodes:
            n.start()
        if layer == "proxy":
            proxy = Proxy([n.port for n in nodes], tmp)
        fill(client(layer, nodes, proxy), args.keys)
        stop = threading.Event()
        t0 = time.monotonic()
        readers = {d: Reader(client(layer, nodes, proxy), args.keys, d, t0,
                             stop, args.db_ms / 1000)
                   for d in ("zipf", "uniform")}
        for r in readers.values():
            r.start()
        time.sleep(STEADY)              # the steady state being measured
        t_event = time.monotonic() - t0
        event(scenario, nodes, cur_bin)
        t_done = time.monotonic() - t0
        time.sleep(args.after)          # the run's measured tail
        stop.set()
        for r in readers.values():
            r.join()
        return {d: (summarise(r.buckets, t_event, t_done), r.buckets,
                    t_event, t_done) for d, r in readers.items()}
    finally:
        if proxy:
            proxy.stop()
        for n in nodes:
            n.remove()


COLOURS = {"mcpm": "#2b6cb0", "memcached": "#c53030",
           "memcached-e": "#dd6b20"}


def svg(path, title, series):
    """Hit ratio (Zipf reader) over time, one line per server."""
    w, h, left, top, right, bottom = 640, 300, 50, 30, 150, 40
    pw, ph = w - left - right, h - top - bottom
    tmax = max(max(b) for _, b, _ in series.values()) * BUCKET + BUCKET
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="sans-serif" font-size="11">' % (w, h),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="18" font-size="13">%s</text>' % (left, title)]
    for r in (0.0, 0.25, 0.5, 0.75, 1.0):
        y = top + ph * (1 - r)
        out.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" '
                   'stroke="#ddd"/>' % (left, left + pw, y, y))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%d%%</text>'
                   % (left - 4, y + 4, r * 100))
    for t in range(0, int(tmax) + 1):
        x = left + pw * t / tmax
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%d s</text>'
                   % (x, top + ph + 16, t))
    for i, (kind, (_, buckets, t_event)) in enumerate(series.items()):
        pts = ["%.1f,%.1f" % (left + pw * (b + 0.5) * BUCKET / tmax,
                              top + ph * (1 - buckets[b][1] / buckets[b][0]))
               for b in sorted(buckets) if buckets[b][0] > 0]
        out.append('<polyline fill="none" stroke-width="2" stroke="%s" '
                   'points="%s"/>' % (COLOURS[kind], " ".join(pts)))
        out.append('<text x="%d" y="%d" fill="%s">%s</text>'
                   % (left + pw + 10, top + 14 + 16 * i, COLOURS[kind],
                      kind))
        x = left + pw * t_event / tmax
        out.append('<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" '
                   'stroke="#888" stroke-dasharray="4"/>'
                   % (x, x, top, top + ph))
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--keys", type=int, default=20000)
    ap.add_argument("--after", type=float, default=4.0)
    ap.add_argument("--db-ms", type=float, default=1.0)
    ap.add_argument("--servers", default="mcpm,memcached,memcached-e")
    ap.add_argument("--layers", default="proxy,ketama")
    ap.add_argument("--scenarios", default="kill,rolling,upgrade")
    ap.add_argument("--out", default=os.path.join(ROOT, "doc", "pool"))
    args = ap.parse_args()
    args.mcpm = os.environ.get("MCPM_BIN", os.path.join(
        ROOT, "build", "memcached-pm", "memcached-pm"))
    args.memcached = os.environ.get("MEMCACHED", "/usr/bin/memcached")
    servers = args.servers.split(",")
    scenarios = args.scenarios.split(",")
    if "mcpm" in servers and "upgrade" in scenarios:
        args.prev = os.environ.get("MCPM_PREV_BIN") or os.path.join(
            ROOT, subprocess.run(
                ["bash", os.path.join(ROOT, "script", "build-layout-prev")],
                check=True, capture_output=True, text=True).stdout.strip())
    os.makedirs(args.out, exist_ok=True)
    lines = ["| scenario | layer | server | keys | missed or failed "
             "| worst 0.5 s hit ratio | back to steady | requests |",
             "|---|---|---|---|---:|---:|---:|---:|"]
    with tempfile.TemporaryDirectory(prefix="pool-bench-") as tmp:
        for scenario in scenarios:
            for layer in args.layers.split(","):
                plot = {}
                for kind in servers:
                    res = run_one(kind, layer, scenario, args, tmp)
                    for dist, (s, buckets, t_event, _) in res.items():
                        lost, worst, back, reqs = s
                        lines.append(
                            "| %s | %s | %s | %s | %.3f %% | %.1f %% | %s "
                            "| %d |" % (scenario, layer, kind, dist,
                                        100 * lost, 100 * worst,
                                        "%.1f s" % back if back is not None
                                        else "not within %.0f s"
                                        % args.after, reqs))
                        print(lines[-1], flush=True)
                        if dist == "zipf":
                            plot[kind] = (s, buckets, t_event)
                svg(os.path.join(args.out, "%s-%s.svg" % (scenario, layer)),
                    "%s, %s: hit ratio (Zipf reader), event at the dashed "
                    "line" % (scenario, layer), plot)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
