#!/usr/bin/env python3
"""soak.py: faults thrown at random, many in a row, at a node under load,
against a model of what every client was told.

    python3 bench/soak.py [--seed N] [--duration S] [--config C[,C...]]
        [--faults K,K,...] [--clients N] [--preload N] [--memory MB]
        [--preset issue53] [--disk-dir DIR] [--bin PATH]

The node (-e <file>, or a memory file under -o tier_policy=cache or
capacity) runs in a directory on tmpfs (durability process, the
default) or on a disk (durability power: every change flushed before its
reply, by the flusher thread), on io_uring or epoll; --config names them: tmpfs|disk - io_uring|epoll - pmem|cache|
capacity (tmpfs-io_uring-pmem by default; `all`: each of the twelve in
turn, the duration shared; `random`: the one the seed picks).  Clients:

  writers   N threads (text, meta, binary in turn), each owning its keys:
            set, add, replace, append, prepend, cas, incr, decr, touch,
            gat, delete, get, gets and multigets, pipelined up to 8 or
            one at a time, values from a byte to chunked (1 MB), TTLs
            of 1-3 s; and compare-and-swap adds to counters they share
  verifier  reads the keys written once and left alone (a preload, and
            the bursts that grow the hash table) over and over

and every 0.3-1.5 s one event, at random: a fault (kill: SIGKILL and a
restart; kill_recovering: a second SIGKILL right after the restart's
first reply; term and usr1: clean stops; takeover; takeover_kill: the
successor SIGKILLed 0-10 ms in; takeover_recovering: a takeover of a
node still reading its file back), or load on the storage (reassign: a
slab page moved; crawl: the LRU crawler; grow: a burst of new keys that
grows the table; pressure: the cache filled until it evicts, then made
anew; flush: flush_all, the keys loaded again).

The checker (bench/soak_model.py) holds each key's possible states; a
reply none of them allows fails the run: an acknowledged write lost, a
stale or deleted value served, a counter gone back, a cas that stored
over what it did not see.  Misses are allowed only for a cause (the
node still reading its file back, stats recovery_running 1 with no
fault since; eviction in a pressure phase; a TTL; DRAM under capacity
after a restart), and counted.  So are crashes of the node, sanitizer
reports, evictions outside a pressure phase, and a request that waits
past 10 s.  A failure prints the seed, the configuration and the
schedule up to it; the same seed replays the same schedule and client
choices, as closely as the threads allow.  Exit status: 0 clean, 1 a
violation, 2 bad usage.

MCPM_BIN picks the server (default build/memcached-pm/memcached-pm).
"""

import argparse
import collections
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from soak_model import ABSENT, Fixed, Keys, Shared, View, Violation  # noqa
from soak_proto import Broken, Conn, Op, Text, Unexpected  # noqa
from server_probe import free_port  # noqa

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAULTS = ("kill", "kill_recovering", "term", "usr1", "takeover",
          "takeover_kill", "takeover_recovering")
LOADS = ("reassign", "crawl", "grow", "pressure", "flush")
WEIGHTS = {"kill": 6, "kill_recovering": 3, "term": 2, "usr1": 2,
           "takeover": 4, "takeover_kill": 3, "takeover_recovering": 2,
           "reassign": 3, "crawl": 2, "grow": 1, "pressure": 1, "flush": 1}
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                   "runtime error:", "WARNING: ThreadSanitizer")
WIRES = ("text", "meta", "binary")
IO_TIMEOUT = 10.0
START_TIMEOUT = 60.0
CHUNKED = 600 * 1024


def configs(spec, seed):
    """The configurations a --config names (random: one the seed picks)."""
    all_ = ["%s-%s-%s" % (d, e, p) for d in ("tmpfs", "disk")
            for e in ("io_uring", "epoll") for p in ("pmem", "cache",
                                                     "capacity")]
    if spec == "all":
        return all_
    if spec == "random":
        return [random.Random(seed).choice(all_)]
    out = spec.split(",")
    for c in out:
        if c not in all_:
            raise SystemExit("soak: no configuration %r (of %s)"
                             % (c, ", ".join(all_)))
    return out


# ---------------------------------------------------------------------------
# the run: what every thread shares
# ---------------------------------------------------------------------------

class Run:
    def __init__(self, opts, cfg, seed):
        self.opts = opts
        self.cfg = cfg
        self.medium, self.engine, self.policy = cfg.split("-")
        self.seed = seed
        self.t0 = time.monotonic()
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.epoch = 0              # odd while a fault is under way
        self.pressure = False       # evictions allowed (until made anew)
        self.paused = False
        self.parked = 0
        self.stopping = threading.Event()
        self.failure = None
        self.schedule = []
        self.counts = collections.Counter()
        self.pause_max = 0.0
        self.fixed = Fixed()
        self.shared = Shared([b"shared:%d" % i for i in range(4)],
                             threading.Lock())
        self.node = None

    def now(self):
        return time.monotonic() - self.t0

    def log(self, what):
        with self.lock:
            self.schedule.append((self.now(), what))

    def count(self, what, n=1):
        with self.lock:
            self.counts[what] += n

    def pause_seen(self, seconds, what):
        with self.lock:
            if seconds > self.pause_max:
                self.pause_max = seconds
                self.counts["pause_max:" + what] = 1

    def fail(self, why):
        with self.lock:
            if self.failure is None:
                self.failure = (self.now(), why)
        self.stopping.set()
        with self.cond:
            self.cond.notify_all()

    def fault_begin(self):
        with self.lock:
            self.epoch += 1

    def fault_end(self):
        with self.lock:
            self.epoch += 1

    def park(self):
        """A client between batches: wait while the controller works on
        a quiet cache."""
        with self.cond:
            if not self.paused:
                return
            self.parked += 1
            self.cond.notify_all()
            while self.paused and not self.stopping.is_set():
                self.cond.wait(0.1)
            self.parked -= 1

    def quiesce(self, nthreads):
        """Every client parked, or False if they did not come."""
        deadline = time.monotonic() + 3 * IO_TIMEOUT
        with self.cond:
            self.paused = True
            while self.parked < nthreads and not self.stopping.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)
        return not self.stopping.is_set()

    def resume(self):
        with self.cond:
            self.paused = False
            self.cond.notify_all()


# ---------------------------------------------------------------------------
# the node
# ---------------------------------------------------------------------------

class Node:
    """The server processes on one memory file: the one serving last in
    self.proc."""

    def __init__(self, run, binary, workdir, port):
        self.run = run
        self.binary = binary
        self.dir = workdir
        self.port = port
        self.file = os.path.join(workdir, "items.pm")
        self.proc = None
        self.started = 0
        self.logs = {}
        self.memory = run.opts.memory     # MB; smaller in a pressure phase

    def cmd(self):
        args = [self.binary, "-U", "0", "-l", "127.0.0.1", "-p",
                str(self.port), "-t", "4", "-v"]
        if os.geteuid() == 0:
            args += ["-u", "root"]
        opt = ["takeover=" + os.path.join(self.dir, "t.sock"),
               "hashpower=13", "event_engine=" + self.run.engine]
        if self.run.medium == "disk" and self.run.opts.preset is None:
            # the default there is process; power runs the flusher thread
            # that the workers hand their changes to (the preset keeps the
            # defaults, as its user would)
            opt.append("memory_file_durability=power")
        if self.run.policy == "pmem":
            args += ["-e", self.file, "-m", str(self.memory)]
        else:
            args += ["-m", str(max(8, self.memory // 4))]
            opt += ["tier_policy=" + self.run.policy,
                    "memory_file=" + self.file,
                    "memory_file_size=%d" % self.memory]
        return args + ["-o", ",".join(opt)]

    def launch(self):
        self.started += 1
        log = os.path.join(self.dir, "node-%d.log" % self.started)
        err = open(log, "wb")
        p = subprocess.Popen(self.cmd(), stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=err)
        err.close()
        self.logs[p.pid] = log
        return p

    def answers(self):
        try:
            t = Text(self.port, timeout=2.0)
        except Broken:
            return False
        try:
            return t.call(b"version\r\n").startswith(b"VERSION ")
        except (Broken, Unexpected):
            return False
        finally:
            t.close()

    def wait_serving(self, proc):
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                self.crashed(proc, "exited %s before it served"
                             % proc.returncode)
                return False
            if self.answers():
                return True
            time.sleep(0.002)
        self.run.fail("the node did not answer within %d s" % START_TIMEOUT)
        return False

    def stderr(self, proc, tail=4000):
        try:
            with open(self.logs[proc.pid], "rb") as f:
                return f.read().decode(errors="replace")[-tail:]
        except (OSError, KeyError):
            return ""

    def crashed(self, proc, what):
        self.run.fail("node pid %d %s; its stderr:\n%s"
                      % (proc.pid, what, self.stderr(proc)))

    def reaped(self, proc, expect, what):
        """Wait for proc to exit with status `expect` (None: any) and
        without a sanitizer report."""
        try:
            rc = proc.wait(START_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            self.crashed(proc, "did not exit after %s" % what)
            return False
        err = self.stderr(proc, tail=1 << 20)
        if any(m in err for m in SANITIZER_MARKS):
            self.crashed(proc, "reported under the sanitizer after " + what)
            return False
        if expect is not None and rc != expect:
            self.crashed(proc, "exited %s after %s" % (rc, what))
            return False
        return True

    def start(self):
        self.proc = self.launch()
        return self.wait_serving(self.proc)

    def remove_files(self):
        for suffix in ("", ".meta", ".index", ".removed"):
            try:
                os.unlink(self.file + suffix)
            except FileNotFoundError:
                pass

    def alive(self):
        return self.proc is not None and self.proc.poll() is None


# ---------------------------------------------------------------------------
# clients
# ---------------------------------------------------------------------------

def make_value(key, seq, size):
    head = b"%s.%d." % (key, seq)
    return (head * (size // len(head) + 1))[:size]


def value_size(rng, big):
    if big and rng.random() < 0.5:
        return rng.choice((rng.randint(60000, 200000),
                           rng.randint(CHUNKED, 1000000)))
    r = rng.random()
    if r < 0.55:
        return rng.randint(1, 100)
    if r < 0.85:
        return rng.randint(100, 4000)
    return rng.randint(4000, 40000)


class Client(threading.Thread):
    """A connection that reconnects after each fault, and knows when the
    node it talks to has read its file back (stats, with no fault
    since)."""

    def __init__(self, run, name, wire):
        super().__init__(name=name, daemon=True)
        self.soak = run
        self.wire = wire
        self.conn = None
        self.aux = None
        self.recovered_epoch = -1
        self.seen_epoch = 0
        self.stats_at = 0.0

    def connect(self):
        t = time.monotonic()
        while not self.soak.stopping.is_set():
            try:
                self.conn = Conn(self.soak.node.port, self.wire, IO_TIMEOUT)
                self.soak.pause_seen(time.monotonic() - t, "reconnect")
                return True
            except Broken:
                self.soak.park()
                time.sleep(0.005)
        return False

    def drop(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def learn_recovered(self):
        """If no fault is under way and none came since the last check,
        ask whether the node has read its file back."""
        e = self.soak.epoch
        now = time.monotonic()
        if e % 2 or e == self.recovered_epoch or now - self.stats_at < 0.05:
            return
        self.stats_at = now
        try:
            if self.aux is None:
                self.aux = Text(self.soak.node.port, IO_TIMEOUT)
            st = self.aux.stats()
        except (Broken, Unexpected):
            if self.aux is not None:
                self.aux.close()
            self.aux = None
            return
        if st.get("recovery_running") == "0" and self.soak.epoch == e:
            self.recovered_epoch = e

    def view(self, e0):
        """How a batch sent in epoch e0 is judged."""
        e1 = self.soak.epoch
        rec = not (e0 == e1 == self.recovered_epoch)
        return View(rec, self.soak.pressure)

    def exchange(self, ops):
        """Send ops as one pipeline; True if every reply came back."""
        if self.conn is None and not self.connect():
            return False
        t = time.monotonic()
        try:
            self.conn.run(ops, time.time)
        except Broken:
            self.drop()
            self.soak.count("broken")
            return False
        except Unexpected as e:
            self.soak.fail("%s: protocol error from %s: %s"
                          % (self.name, ops, e))
            return False
        took = time.monotonic() - t
        if took > IO_TIMEOUT:
            self.soak.fail("%s: a reply took %.1f s" % (self.name, took))
        self.soak.pause_seen(took, "reply")
        self.soak.count("requests:" + self.wire, len(ops))
        return True

    def loop(self):
        """Between steps, park while the controller works on a quiet
        cache, and learn whether the node has read its file back."""
        while not self.soak.stopping.is_set():
            self.soak.park()
            if self.soak.stopping.is_set():
                return
            self.learn_recovered()
            self.step()

    def run(self):
        try:
            self.loop()
        except Violation as v:
            self.soak.fail("%s (%s wire): %s" % (self.name, self.wire, v))
        except Exception as e:     # a bug of the soak: say so, loudly
            import traceback
            self.soak.fail("%s: %s\n%s" % (self.name, e,
                                           traceback.format_exc()))
        finally:
            self.drop()
            if self.aux is not None:
                self.aux.close()


class Writer(Client):
    """Owns its keys: data keys (the first few big), counters; adds to
    the shared counters by compare-and-swap."""

    DATA, COUNTERS, BIG = 150, 8, 3

    def __init__(self, run, cid, wire, rng, simple=False):
        super().__init__(run, "writer%d" % cid, wire)
        self.cid = cid
        self.rng = rng
        self.simple = simple
        n = run.opts.writer_keys or (3000 if simple else self.DATA)
        self.data = [b"w%d:%d" % (cid, i) for i in range(n)]
        self.counters = [] if simple else \
            [b"w%d:n%d" % (cid, i) for i in range(self.COUNTERS)]
        self.keys = Keys(self.data, self.counters)
        self.big = set(self.data[:0 if simple else self.BIG])
        self.seq = 0

    # ---- choosing ----------------------------------------------------------

    def step(self):
        if not self.simple and self.rng.random() < 0.08:
            self.shared_add()
        else:
            self.batch()

    def batch(self):
        rng = self.rng
        n = 1 if self.simple or rng.random() < 0.5 else rng.randint(2, 8)
        keys = rng.sample(self.data, n)
        ops = []
        for k in keys:
            if not self.simple and self.counters and rng.random() < 0.15:
                k = rng.choice(self.counters)
                if any(k in op.keys for op in ops):
                    continue
                ops.append(self.counter_op(k))
            else:
                ops.append(self.data_op(k))
        if not self.simple and rng.random() < 0.1:
            used = {k for op in ops for k in op.keys}
            free = [k for k in self.data if k not in used]
            ops.append(Op(rng.choice(("get", "gets")),
                          rng.sample(free, rng.randint(2, 12))))
        self.send(ops)

    def data_op(self, k):
        rng = self.rng
        if self.simple:
            r = rng.random()
            kind = "set" if r < 0.7 else "delete" if r < 0.8 else "get"
            return self.write(kind, k, 8, 0) if kind == "set" else \
                Op(kind, [k])
        kind = rng.choices(
            ("get", "gets", "gat", "set", "add", "replace", "append",
             "prepend", "cas", "delete", "touch"),
            (16, 6, 3, 26, 5, 5, 5, 3, 6, 8, 4))[0]
        ttl = rng.choice((1, 2, 3)) if rng.random() < 0.12 else 0
        if kind in ("get", "gets", "delete"):
            return Op(kind, [k])
        if kind in ("gat", "touch"):
            return Op(kind, [k], exptime=ttl)
        if kind == "cas":
            seen = self.keys.seen.get(k)
            if seen is None:
                return Op("gets", [k])
            # a cas it did not see: one the node will not have given
            # (seen + 1 may be the very next write's, as seed 802 found)
            cas = seen[1] if rng.random() < 0.8 else seen[1] + (1 << 40)
            return self.write("cas", k, None, ttl, cas)
        size = None
        if kind in ("append", "prepend"):
            size = rng.randint(1, 300)
        return self.write(kind, k, size, ttl)

    def write(self, kind, k, size, ttl, cas=0):
        self.seq += 1
        if size is None:
            size = value_size(self.rng, k in self.big)
        flags = self.rng.choice((0, 0, 1, 0xffffffff,
                                 self.rng.getrandbits(32)))
        return Op(kind, [k], make_value(k, self.seq, size), flags,
                  ttl, cas)

    def counter_op(self, k):
        rng = self.rng
        kind = rng.choices(("incr", "decr", "get", "set", "add", "delete"),
                           (40, 20, 20, 10, 6, 4))[0]
        if kind in ("incr", "decr"):
            return Op(kind, [k], delta=rng.choice((1, 1, 7, 1000,
                                                   1 << 40)))
        if kind in ("set", "add"):
            return Op(kind, [k], b"%d" % rng.randint(0, 1 << 32))
        return Op(kind, [k])

    # ---- judging -----------------------------------------------------------

    def send(self, ops):
        e0 = self.soak.epoch
        if e0 != self.seen_epoch:
            self.fault_seen(e0)
        ok = self.exchange(ops)
        e1 = self.soak.epoch
        if e1 != self.seen_epoch:
            self.fault_seen(e1)
        view = self.view(e0)
        for op in ops:
            if op.reply is None:
                self.unknown(op)
            elif op.kind in ("get", "gets", "gat"):
                for k in op.keys:
                    self.keys.judge(k, op, op.reply.get(k), view)
            else:
                self.keys.judge(op.key, op, op.reply, view)
        if e1 != e0:
            # a reply may have come before the fault: what it acknowledged
            # in DRAM the fault may since have lost (capacity)
            self.fault_seen(e1)
        self.soak.count("checked", sum(len(op.keys) for op in ops
                                      if op.reply is not None))
        return ok

    def fault_seen(self, e):
        self.seen_epoch = e
        if self.soak.policy == "capacity":
            self.keys.volatile()

    def unknown(self, op):
        """A request whose reply never came: it happened or not."""
        op.done = time.time()
        if op.kind in ("get", "gets"):
            return
        for k in op.keys:
            self.keys.in_flight(k, op)

    def shared_add(self):
        sh = self.soak.shared
        k = self.rng.choice(sh.keys)
        floor = sh.floor(k)
        get = Op("gets", [k])
        e0 = self.soak.epoch
        if not self.exchange([get]):
            return
        view = self.view(e0)
        n = sh.judge(k, floor, sh.ceiling(k), get.reply.get(k), view,
                     self.soak.policy == "capacity")
        if n is None:
            return
        sh.seen(k, n)
        cas = Op("cas", [k], b"%d" % (n + 1), 0, 0, get.reply[k][2])
        sh.sending(k)
        if not self.exchange([cas]):
            return              # it stayed in the sent: it may have stored
        if cas.reply == "OOM" and (self.soak.pressure or
                                   self.view(self.soak.epoch).rec):
            sh.answered(k, False)
            return
        if cas.reply not in ("STORED", "EXISTS", "NOT_FOUND"):
            raise Violation("wrong", k, "cas answered %r" % cas.reply)
        sh.answered(k, cas.reply == "STORED")


class Verifier(Client):
    """Reads the keys written once, in multigets of 50, round and round."""

    def __init__(self, run, wire="text"):
        super().__init__(run, "verifier", wire)
        self.at = 0
        self.seen_epoch = 0

    def step(self):
        self.round()
        time.sleep(0.002)

    def round(self):
        fixed = self.soak.fixed
        keys = fixed.order
        if not keys:
            time.sleep(0.05)
            return
        if self.at >= len(keys):
            self.at = 0
            self.soak.count("verify_rounds")
        batch = keys[self.at:self.at + 50]
        self.at += 50
        e0 = self.soak.epoch
        if e0 != self.seen_epoch:
            self.fault_seen(e0)
        op = Op("get", batch)
        if not self.exchange([op]):
            return
        if self.soak.epoch != self.seen_epoch:
            self.fault_seen(self.soak.epoch)
        view = self.view(e0)
        for k in batch:
            if k not in fixed.value:
                continue            # made anew meanwhile
            why = fixed.judge(k, op.reply.get(k), view)
            self.soak.count("verified")
            if why is not None:
                self.soak.count("miss:" + why)

    def fault_seen(self, e):
        self.seen_epoch = e
        if self.soak.policy == "capacity":
            self.soak.fixed.volatile()


# ---------------------------------------------------------------------------
# the controller: faults and loads, one at a time
# ---------------------------------------------------------------------------

class Controller:
    def __init__(self, run, rng, kinds, clients):
        self.run = run
        self.node = run.node
        self.rng = rng
        self.kinds = kinds
        self.clients = clients
        self.text = None
        self.grown = 0
        self.watched = 0.0
        self.pressure_until = None
        self.injected = False

    # ---- a text connection of its own --------------------------------------

    def call(self, fn):
        """fn(text connection), retried once over a new connection."""
        for attempt in range(2):
            try:
                if self.text is None:
                    self.text = Text(self.node.port, IO_TIMEOUT)
                return fn(self.text)
            except Broken:
                if self.text is not None:
                    self.text.close()
                self.text = None
                if attempt:
                    raise
        return None

    def stats(self, arg=b""):
        return self.call(lambda t: t.stats(arg))

    # ---- between events ----------------------------------------------------

    def watch(self):
        """The node is alive, and evicts only when told to."""
        if time.monotonic() - self.watched < 0.2:
            return
        self.watched = time.monotonic()
        if not self.node.alive():
            self.node.crashed(self.node.proc, "died with no fault (%s)"
                              % self.node.proc.returncode)
            return
        try:
            st = self.stats()
        except (Broken, Unexpected):
            return
        gone = int(st.get("evictions", 0)) + \
            int(st.get("slab_reassign_inline_reclaim", 0))
        if gone > 0 and not self.run.pressure:
            self.run.fail("the node evicted %d items with no pressure "
                          "(evictions %s, by the page mover %s; curr_items "
                          "%s; stats since its start)"
                          % (gone, st["evictions"],
                             st["slab_reassign_inline_reclaim"],
                             st.get("curr_items")))

    def loop(self, duration, fmin, fmax):
        end = time.monotonic() + duration
        due = time.monotonic() + self.rng.uniform(fmin, fmax)
        while not self.run.stopping.is_set() and time.monotonic() < end:
            self.watch()
            if self.pressure_until and time.monotonic() > self.pressure_until:
                self.pressure_until = None
                self.run.log("pressure ends")
                self.remake(self.run.opts.memory)
            if time.monotonic() >= due:
                kind = self.rng.choices(self.kinds,
                                        [WEIGHTS[k] for k in self.kinds])[0]
                self.event(kind)
                due = time.monotonic() + self.rng.uniform(fmin, fmax)
            time.sleep(0.01)

    def event(self, kind):
        if self.run.opts.inject and not self.injected:
            self.inject(self.run.opts.inject)
        self.run.log(kind)
        self.run.count("event:" + kind)
        if kind in FAULTS:
            self.run.fault_begin()
            try:
                getattr(self, "fault_" + kind)()
            finally:
                if self.text is not None:
                    self.text.close()
                    self.text = None
                self.run.fault_end()
            self.run.log("  now pid %d" % self.node.proc.pid)
        else:
            try:
                getattr(self, "load_" + kind)()
            except Broken as e:
                self.run.fail("%s: the node went away: %s" % (kind, e))

    def inject(self, how):
        """The checker's own test: a key written once changed behind its
        back (lose: deleted; change: another value), which the verifier
        must report."""
        keys = self.run.fixed.order
        if not keys:
            return
        k = keys[len(keys) // 2]
        self.injected = True
        self.run.log("inject %s %s" % (how, k.decode()))
        if how == "lose":
            self.call(lambda t: t.call(b"delete %s\r\n" % k))
        else:
            flags, v = self.run.fixed.value[k]
            v = v[::-1] + b"!"
            self.call(lambda t: t.call(b"set %s %d 0 %d\r\n%s\r\n"
                                       % (k, flags, len(v), v)))

    # ---- faults ------------------------------------------------------------

    def restart(self):
        return self.node.start()

    def killed(self, proc):
        proc.kill()
        return self.node.reaped(proc, -signal.SIGKILL, "SIGKILL")

    def fault_kill(self):
        if self.killed(self.node.proc):
            self.restart()

    def fault_kill_recovering(self):
        if not self.killed(self.node.proc):
            return
        p = self.node.launch()
        if self.node.wait_serving(p) and self.killed(p):
            self.restart()

    def stopped(self, sig, what):
        p = self.node.proc
        p.send_signal(sig)
        if self.node.reaped(p, 0, what):
            self.restart()

    def fault_term(self):
        self.stopped(signal.SIGTERM, "SIGTERM")

    def fault_usr1(self):
        self.stopped(signal.SIGUSR1, "SIGUSR1")

    def fault_takeover(self):
        old = self.node.proc
        new = self.node.launch()
        if self.node.reaped(old, 0, "a takeover"):
            self.node.proc = new
            self.node.wait_serving(new)

    def fault_takeover_kill(self):
        old = self.node.proc
        new = self.node.launch()
        time.sleep(self.rng.uniform(0, 0.01))
        if not self.killed(new):
            return
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if old.poll() is not None:
                # it had handed over before the successor died
                if self.node.reaped(old, 0, "a takeover"):
                    self.restart()
                return
            if self.node.answers() and old.poll() is None:
                return
            time.sleep(0.005)
        self.run.fail("neither node serves after a successor was killed")

    def fault_takeover_recovering(self):
        if not self.killed(self.node.proc):
            return
        p = self.node.launch()
        if not self.node.wait_serving(p):
            return
        new = self.node.launch()
        if self.node.reaped(p, 0, "a takeover during recovery"):
            self.node.proc = new
            self.node.wait_serving(new)

    # ---- loads -------------------------------------------------------------

    def load_reassign(self):
        """A page moved out of a class whose items all fit in its other
        pages (with room to spare for the writers meanwhile): the mover
        rescues every one, and evicts nothing.  Under two tiers `stats
        slabs` sums a class's tiers, and the page moves in one of them: no
        telling that its items fit, so the automover alone moves pages
        there (it reads each tier's own free chunks)."""
        if self.run.policy != "pmem":
            self.run.count("reassign:two-tiers")
            return
        sl = self.stats(b"slabs")
        ids = []
        for k in sl:
            if not k.endswith(":total_pages"):
                continue
            i = k.split(":")[0]
            per = int(sl[i + ":chunks_per_page"])
            if int(sl[k]) > 1 and \
                    int(sl[i + ":free_chunks"]) >= per + 64 + per // 10:
                ids.append(int(i))
        if not ids:
            self.run.count("reassign:none")
            return
        src = self.rng.choice(ids)
        dst = self.rng.choice([0] + [i for i in range(1, 40) if i != src])
        pid = self.node.proc.pid
        before = int(self.stats()["slab_reassign_inline_reclaim"])
        got = self.call(lambda t: t.call(b"slabs reassign %d %d\r\n"
                                         % (src, dst)))
        self.run.count("reassign:" + got.decode().split()[0])
        deadline = time.monotonic() + IO_TIMEOUT
        while time.monotonic() < deadline:
            st = self.stats()
            if st["slab_reassign_running"] == "0":
                break
            time.sleep(0.01)
        if self.node.proc.pid == pid and \
                int(st["slab_reassign_inline_reclaim"]) > before:
            self.run.fail("the page mover evicted %d items of class %d, "
                          "which had %s free chunks"
                          % (int(st["slab_reassign_inline_reclaim"]) -
                             before, src, sl["%d:free_chunks" % src]))

    def load_crawl(self):
        got = self.call(lambda t: t.call(b"lru_crawler crawl all\r\n"))
        self.run.count("crawl:" + got.decode().split()[0])

    def load_grow(self):
        n = self.run.opts.grow
        self.grown += 1
        keys = [b"g%d:%d" % (self.grown, i) for i in range(n)]
        if self.store_fixed(keys, lambda k: (0, make_value(k, 0, 20))):
            self.run.count("grown", n)

    def store_fixed(self, keys, value_of):
        """Store keys, 200 to a pipeline: each one STORED joins the keys
        written once (one the cache has no memory for does not: after a
        pressure phase the memory is in the pages of other classes)."""
        def load(t):
            stored = []
            for i in range(0, len(keys), 200):
                part = keys[i:i + 200]
                t.send(b"".join(
                    b"set %s %d 0 %d\r\n%s\r\n"
                    % (k, value_of(k)[0], len(value_of(k)[1]),
                       value_of(k)[1]) for k in part))
                for k in part:
                    got = t.reader.line()
                    if got == b"STORED":
                        stored.append(k)
                    elif got.startswith(b"SERVER_ERROR out of memory"):
                        self.run.count("preload_oom")
                    else:
                        raise Unexpected(got.decode(errors="replace"))
            return stored
        try:
            stored = self.call(load)
        except Broken:
            return False        # a fault of its own is not thrown here
        except Unexpected as e:
            self.run.fail("a preload set answered %s" % e)
            return False
        for k in stored:
            self.run.fixed.add(k, *value_of(k))
        return True

    def load_pressure(self):
        """A phase on a small cache (memcached's -m 8): the node made
        anew that small, filled until it evicts, for some events; then
        made anew at its size.  Misses are evictions meanwhile."""
        if self.pressure_until is not None:
            return
        if not self.remake(8):
            return
        self.pressure_until = time.monotonic() + self.rng.uniform(2, 6)
        value = b"f" * 100000
        for i in range(0, 400, 20):
            if int(self.stats().get("evictions", 0)) > 0:
                break
            keys = [b"fill:%d" % (i + j) for j in range(20)]
            self.call(lambda t: (t.send(b"".join(
                b"set %s 0 0 %d noreply\r\n%s\r\n" % (k, len(value), value)
                for k in keys)), t.call(b"version\r\n")))
            self.run.count("pressure_mb", 2)

    def remake(self, memory):
        """A new node of `memory` MB on a new file, the clients quiet:
        the keys written once stored again, every client's absent."""
        if not self.run.quiesce(len(self.clients)):
            if not self.run.stopping.is_set():
                self.run.fail("the clients did not stop for a new node")
            return False
        try:
            self.run.fault_begin()
            p = self.node.proc
            p.send_signal(signal.SIGTERM)
            if not self.node.reaped(p, 0, "SIGTERM"):
                return False
            self.node.remove_files()
            self.node.memory = memory
            self.run.pressure = memory < self.run.opts.memory
            if not self.node.start():
                return False
            self.run.log("  a new node, pid %d, -m %d"
                         % (self.node.proc.pid, memory))
            self.run.fault_end()
            self.reload()
            return True
        finally:
            if self.run.epoch % 2:
                self.run.fault_end()
            if self.text is not None:
                self.text.close()
                self.text = None
            self.run.resume()

    def reload(self):
        """Every client's keys absent, the keys written once and the
        shared counters stored again (clients parked)."""
        for c in self.clients:
            if isinstance(c, Writer):
                c.keys.reset()
        fixed = dict(self.run.fixed.value)
        self.run.fixed.clear()
        self.run.shared.reset()
        self.store_fixed(list(fixed), fixed.get)
        self.call(lambda t: [t.call(b"set %s 0 0 1\r\n0\r\n" % k)
                             for k in self.run.shared.keys])

    def load_flush(self):
        """flush_all on a quiet cache, then what reload() stores."""
        if not self.run.quiesce(len(self.clients)):
            if not self.run.stopping.is_set():
                self.run.fail("the clients did not stop for a flush_all")
            return
        try:
            got = self.call(lambda t: t.call(b"flush_all\r\n"))
            if got != b"OK":
                self.run.fail("flush_all answered %r" % got)
                return
            self.reload()
        finally:
            self.run.resume()

    # ---- the start and the end ---------------------------------------------

    def last_words(self):
        """What the node says of its clock and its last recovery, for a
        failure's report."""
        try:
            st = self.stats()
        except (Broken, Unexpected, OSError):
            return "(the node does not answer)"
        return " ".join("%s=%s" % (k, v) for k, v in sorted(st.items())
                        if k in ("time", "uptime", "curr_items",
                                 "evictions", "expired_unfetched",
                                 "reclaimed", "slabs_moved",
                                 "slab_reassign_rescues",
                                 "slab_reassign_inline_reclaim",
                                 "demotions", "promotions")
                        or k.startswith("recovery_"))

    def preload(self, n, simple):
        def value_of(k):
            i = int(k[2:])
            if simple:
                return 0, b"%08d" % i
            r = random.Random(i * 7919 + self.run.seed)
            size = r.choice((8, 20, 60, 100, 100, 300, 1500)) \
                if r.random() > 0.002 else r.randint(100000, 800000)
            return r.getrandbits(16), make_value(k, 0, size)
        keys = [b"p:%d" % i for i in range(n)]
        if not self.store_fixed(keys, value_of):
            self.run.fail("the preload did not complete")
        self.call(lambda t: [t.call(b"set %s 0 0 1\r\n0\r\n" % k)
                             for k in self.run.shared.keys])

    def settle(self):
        """The end: every client stopped, the node's file read back; then
        every key read once more, strictly."""
        deadline = time.monotonic() + START_TIMEOUT
        while self.stats().get("recovery_running") != "0":
            if time.monotonic() > deadline:
                self.run.fail("the recovery did not end")
                return
            time.sleep(0.05)
        view = View(False, self.run.pressure)
        t = Text(self.node.port, IO_TIMEOUT)
        try:
            for c in self.clients:
                if isinstance(c, Writer):
                    self.final_keys(t, c, view)
            keys = list(self.run.fixed.value)
            for i in range(0, len(keys), 100):
                op = Op("get", keys[i:i + 100])
                op.reply = self.read(t, op)
                for k in op.keys:
                    self.run.fixed.judge(k, op.reply.get(k), view)
            for k in self.run.shared.keys:
                op = Op("get", [k])
                op.reply = self.read(t, op)
                self.run.shared.judge(k, self.run.shared.floor(k),
                                      self.run.shared.ceiling(k),
                                      op.reply.get(k), view,
                                      self.run.policy == "capacity")
        except Violation as v:
            self.run.fail("at the end: %s" % v)
        finally:
            t.close()

    def read(self, t, op):
        from soak_proto import text_encode, text_read
        op.sent = time.time()
        t.send(text_encode(op))
        got = text_read(op, t.reader)
        op.done = time.time()
        return got

    def final_keys(self, t, c, view):
        for k in c.keys.keys():
            op = Op("get", [k])
            op.reply = self.read(t, op)
            c.keys.judge(k, op, op.reply.get(k), view)


# ---------------------------------------------------------------------------
# one run, and the report
# ---------------------------------------------------------------------------

def workdir(medium, opts):
    base = "/dev/shm" if medium == "tmpfs" else opts.disk_dir
    os.makedirs(base, exist_ok=True)
    return tempfile.mkdtemp(prefix="mcpm-soak-", dir=base)


def one(opts, cfg, seed, duration):
    run = Run(opts, cfg, seed)
    rng = random.Random(seed)
    wd = workdir(run.medium, opts)
    run.node = Node(run, opts.bin, wd, free_port())
    simple = opts.preset == "issue53"
    writers = [Writer(run, i, "text" if simple else WIRES[i % 3],
                      random.Random(seed * 1000 + i), simple)
               for i in range(opts.clients)]
    clients = writers + ([] if opts.no_verifier else [Verifier(run)])
    ctl = Controller(run, rng, opts.kinds, clients)
    if run.node.start():
        ctl.preload(opts.preload, simple)
    if not run.stopping.is_set():
        for c in clients:
            c.start()
        ctl.loop(duration, opts.fmin, opts.fmax)
    run.stopping.set()
    run.resume()
    for c in clients:
        if c.is_alive():
            c.join(3 * IO_TIMEOUT)
    if run.failure is None:
        run.stopping.clear()
        ctl.settle()
        run.stopping.set()
    else:
        run.last_stats = ctl.last_words()
    if run.node.alive():
        p = run.node.proc
        p.send_signal(signal.SIGTERM)
        run.node.reaped(p, 0, "the last SIGTERM")
    for pid, log in run.node.logs.items():
        with open(log, "rb") as f:
            err = f.read().decode(errors="replace")
        if any(m in err for m in SANITIZER_MARKS) and run.failure is None:
            run.fail("a sanitizer report in %s:\n%s" % (log, err[-4000:]))
    for c in writers:
        run.counts.update(c.keys.counts)
    run.counts.update({"shared_" + k: v
                       for k, v in run.shared.counts.items()})
    report(run, opts, duration)
    if run.failure is None:
        shutil.rmtree(wd, ignore_errors=True)
    else:
        print("  the node's files and logs are kept in %s" % wd)
    return run.failure is None


def report(run, opts, duration):
    c = run.counts
    name = "soak %s seed %d" % (run.cfg, run.seed)
    reqs = sum(v for k, v in c.items() if k.startswith("requests:"))
    faults = {k[6:]: v for k, v in c.items() if k.startswith("event:")}
    misses = {k[5:]: v for k, v in c.items() if k.startswith("miss:")}
    print("%s: %.0f s, %d requests (%s), %d keys checked, %d verified in "
          "%d rounds" % (name, duration, reqs, ", ".join(
              "%s %d" % (k[9:], v) for k, v in sorted(c.items())
              if k.startswith("requests:")), c["checked"], c["verified"],
              c["verify_rounds"]))
    print("  events %d: %s" % (sum(faults.values()), ", ".join(
        "%s %d" % kv for kv in sorted(faults.items()))))
    print("  misses allowed: %s" % (", ".join(
        "%s %d" % kv for kv in sorted(misses.items())) or "none"))
    other = ["%s %d" % (k, v) for k, v in sorted(c.items())
             if k.split(":")[0] in ("reassign", "crawl", "grown",
                                    "pressure_mb", "broken", "preload_oom")]
    print("  %s; longest pause %.3f s (%s)" % (
        ", ".join(other) or "no storage events",
        run.pause_max, ", ".join(k[10:] for k in c
                                 if k.startswith("pause_max:")) or "-"))
    if run.failure is None:
        print("  ok: nothing lost, stale or resurrected")
        return
    t, why = run.failure
    print("SOAK FAILED at %.3f s: %s" % (t, why))
    print("  the node then: %s" % getattr(run, "last_stats", "-"))
    print("  replay: python3 bench/soak.py --seed %d --config %s "
          "--duration %.0f --faults %s --clients %d --preload %d "
          "--memory %d --every %s%s" % (
              run.seed, run.cfg, duration, opts.faults, opts.clients,
              opts.preload, opts.memory, opts.every,
              (" --preset " + opts.preset if opts.preset else "") +
              (" --inject " + opts.inject if opts.inject else "")))
    print("  the schedule up to it:")
    for when, what in run.schedule:
        print("    %8.3f %s" % (when, what))


def parse(argv):
    ap = argparse.ArgumentParser(
        description="faults at random against a model of what clients "
        "were told (see the header of bench/soak.py)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--config", default="tmpfs-io_uring-pmem")
    ap.add_argument("--faults", default=",".join(FAULTS + LOADS),
                    help="the events to throw, comma separated")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--writer-keys", type=int, default=0)
    ap.add_argument("--preload", type=int, default=20000)
    ap.add_argument("--grow", type=int, default=20000)
    ap.add_argument("--memory", type=int, default=256, help="MB")
    ap.add_argument("--every", default="0.3-1.5",
                    help="seconds between events, min-max")
    ap.add_argument("--preset", choices=("issue53",),
                    help="issue53: 300,000 keys written once, four text "
                    "writers (set 70 %%, delete 10 %%, get 20 %% of 3,000 "
                    "keys each), SIGKILL and a restart only, on a disk")
    ap.add_argument("--disk-dir", default="/var/tmp")
    ap.add_argument("--no-verifier", action="store_true")
    ap.add_argument("--inject", choices=("lose", "change"),
                    help="the checker's own test: at the first event a key "
                    "written once is deleted or changed behind its back")
    ap.add_argument("--bin", default=os.environ.get(
        "MCPM_BIN", os.path.join(ROOT, "build/memcached-pm/memcached-pm")))
    opts = ap.parse_args(argv)
    if opts.preset == "issue53":
        opts.faults, opts.preload = "kill", 300000
        if opts.config == "tmpfs-io_uring-pmem" and \
                "--config" not in " ".join(argv):
            opts.config = "disk-io_uring-pmem"
    opts.kinds = opts.faults.split(",")
    for k in opts.kinds:
        if k not in WEIGHTS:
            ap.error("no event %r (of %s)" % (k, ", ".join(WEIGHTS)))
    opts.fmin, opts.fmax = (float(x) for x in opts.every.split("-"))
    return opts


def main(argv):
    opts = parse(argv)
    seed = opts.seed if opts.seed is not None else \
        random.SystemRandom().randrange(1 << 31)
    cfgs = configs(opts.config, seed)
    print("soak: seed %d, %s, %.0f s, faults %s" % (
        seed, ", ".join(cfgs), opts.duration, opts.faults), flush=True)
    failed = []
    for i, cfg in enumerate(cfgs):
        # each configuration its share, whatever the others found
        if not one(opts, cfg, seed + i, opts.duration / len(cfgs)):
            failed.append("%s (seed %d)" % (cfg, seed + i))
        sys.stdout.flush()
    if failed and len(cfgs) > 1:
        print("soak: %d of %d failed: %s" % (len(failed), len(cfgs),
                                            ", ".join(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
