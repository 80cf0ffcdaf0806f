"""Clients that notice: connections held open, each setting and reading
back keys of its own every few milliseconds, and a probe opening a new
connection every millisecond, all in one thread on non-blocking sockets.
What they saw is counted per step (mark()), so that a test can say which
step of a service's life closed a connection, served a wrong value,
refused a new client or made one wait.

    load = HeldLoad(port).start()
    load.mark("reload 1")
    ...                       # the step
    seen = load.mark("restart 1")     # the counts of "reload 1"
    load.stop()

A held connection the server closes is counted and opened again (a
refused reopening counts as refused); a write whose reply was lost may
or may not have been applied, and the next read may show either value."""

import errno
import selectors
import socket
import threading
import time


class Counts:
    def __init__(self, name):
        self.name = name
        self.requests = 0
        self.closed = 0         # held connections the server closed
        self.wrong = 0          # a read that was neither value allowed
        self.missed = 0         # misses allowed (misses_allowed)
        self.refused = 0        # new connections refused
        self.failed = 0         # new connections reset or unanswered
        self.probes = 0
        self.longest = 0.0      # seconds, request sent to reply read
        self.longest_probe = 0.0
        self.notes = []
        self.wrongs = []        # what each wrong read was

    def note(self, text):
        if len(self.notes) < 20:
            self.notes.append(text)

    def __repr__(self):
        return ("%s: %d requests, %d closed, %d wrong, %d missed, %d of %d "
                "probes refused, %d failed, longest request %.1f ms, "
                "longest probe %.1f ms%s" % (
                    self.name, self.requests, self.closed, self.wrong,
                    self.missed,
                    self.refused, self.probes, self.failed,
                    self.longest * 1e3, self.longest_probe * 1e3,
                    "".join("; " + w for w in self.wrongs[:10] + self.notes)))


class Held:
    """One held connection: set k, then get k, every `every` seconds."""

    def __init__(self, load, i):
        self.load, self.i = load, i
        self.sock = None
        self.want = {}          # key -> set of values it may read as
        self.version = 0
        self.key = 0
        self.due = 0.0
        self.sent_at = None
        self.expect = None
        self.buf = b""

    def open(self):
        s = socket.socket()
        s.setblocking(False)
        err = s.connect_ex(("127.0.0.1", self.load.port))
        if err not in (0, errno.EINPROGRESS):
            s.close()
            return err
        self.sock = s
        self.buf = b""
        self.sent_at = None
        self.load.sel.register(s, selectors.EVENT_READ, self)
        return 0

    def lost(self):
        """The server closed it (or reset it): count, and open again."""
        if self.expect is not None and self.expect[0] == "set":
            self.want.setdefault(self.expect[1], {None}).add(
                self.expect[2])         # maybe applied
        self.expect = None
        self.load.sel.unregister(self.sock)
        self.sock.close()
        self.sock = None
        self.load.counts.closed += 1
        self.load.counts.note("held %d closed" % self.i)

    def tick(self, now):
        if self.sock is None:
            if self.open() != 0:
                self.load.counts.refused += 1
                self.due = now + 0.01
            return
        if self.sent_at is not None or now < self.due:
            return
        key = b"held:%d:%d" % (self.i, self.key % 20)
        if self.version % 2 == 0:
            value = b"%d.%d" % (self.i, self.version)
            req = b"set %s 0 0 %d\r\n%s\r\n" % (key, len(value), value)
            self.expect = ("set", key, value)
        else:
            req = b"get %s\r\n" % key
            self.expect = ("get", key, None)
            self.key += 1
        self.version += 1
        try:
            self.sock.send(req)
        except OSError:
            self.lost()
            return
        self.sent_at = now

    def readable(self):
        try:
            data = self.sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.lost()
            return
        self.buf += data
        kind, key, value = self.expect
        if kind == "set":
            if not self.buf.endswith(b"\r\n"):
                return
            ok = self.buf == b"STORED\r\n"
            if ok:
                self.want[key] = {value}
        else:
            if not self.buf.endswith(b"END\r\n"):
                return
            allowed = self.want.get(key, {None})
            got = None
            if self.buf != b"END\r\n":
                head, _, rest = self.buf.partition(b"\r\n")
                got = rest[:-len(b"\r\nEND\r\n")]
            ok = got in allowed
            if ok and got is not None:
                self.want[key] = {got}
            elif got is None and self.load.misses_allowed:
                # a crash restart serves at once: a key not read back yet
                # from the file answers as missing
                self.load.counts.missed += 1
                ok = True
        counts = self.load.counts
        if not ok:
            counts.wrong += 1
            counts.wrongs.append("held %d: %r for %r, allowed %r" % (
                self.i, bytes(self.buf[:80]), self.expect,
                self.want.get(key)))
        lat = time.monotonic() - self.sent_at
        counts.longest = max(counts.longest, lat)
        counts.requests += 1
        self.buf = b""
        self.sent_at = None
        self.expect = None
        self.due = time.monotonic() + self.load.every


class Probe:
    """A new connection: connect, a request (`version`), its reply,
    close."""

    def __init__(self, load):
        self.load = load
        self.sock = socket.socket()
        self.sock.setblocking(False)
        self.started = time.monotonic()
        err = self.sock.connect_ex(("127.0.0.1", load.port))
        load.counts.probes += 1
        if err == errno.ECONNREFUSED:
            load.counts.refused += 1
            self.sock.close()
            self.sock = None
            return
        self.sent = False
        self.buf = b""
        load.sel.register(self.sock, selectors.EVENT_WRITE, self)
        load.probes.add(self)

    def done(self, ok, why=""):
        self.load.sel.unregister(self.sock)
        self.sock.close()
        self.load.probes.discard(self)
        c = self.load.counts
        if ok:
            c.longest_probe = max(c.longest_probe,
                                  time.monotonic() - self.started)
        else:
            c.failed += 1
            c.note("probe: " + why)

    def event(self, mask):
        if not self.sent:
            err = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err == errno.ECONNREFUSED:
                self.load.counts.refused += 1
                self.load.sel.unregister(self.sock)
                self.sock.close()
                self.load.probes.discard(self)
                return
            if err:
                self.done(False, errno.errorcode.get(err, str(err)))
                return
            try:
                self.sock.send(self.load.probe_req)
            except OSError as e:
                self.done(False, str(e))
                return
            self.sent = True
            self.load.sel.modify(self.sock, selectors.EVENT_READ, self)
            return
        try:
            data = self.sock.recv(256)
        except BlockingIOError:
            return
        except OSError as e:
            self.done(False, str(e))
            return
        if not data:
            self.done(False, "closed before its reply")
            return
        self.buf += data
        if self.buf.endswith(b"\r\n"):
            self.done(self.buf.startswith(self.load.probe_reply),
                      repr(self.buf))

    def overdue(self, now, limit):
        if now - self.started > limit:
            self.done(False, "no reply in %.0f s" % limit)


class HeldLoad:
    def __init__(self, port, conns=50, every=0.002, probe_every=0.001,
                 probe_limit=5.0, probe=(b"version\r\n", b"VERSION ")):
        self.port = port
        # what a probe asks, and how its reply starts (a proxy such as
        # twemproxy takes no `version`)
        self.probe_req, self.probe_reply = probe
        self.every = every
        self.probe_every = probe_every
        self.probe_limit = probe_limit
        self.sel = selectors.DefaultSelector()
        self.held = [Held(self, i) for i in range(conns)]
        self.probes = set()
        self.counts = Counts("start")
        self.steps = []
        self.lock = threading.Lock()
        self.running = False
        self.probing = True
        self.sending = True
        # a read may miss (the recovery after a crash)
        self.misses_allowed = False
        self.thread = None

    def start(self):
        for h in self.held:
            assert h.open() == 0, "cannot connect to port %d" % self.port
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def mark(self, name):
        """Begin step `name`; returns the counts of the step it ends."""
        with self.lock:
            done = self.counts
            self.counts = Counts(name)
            self.steps.append(done)
            return done

    def pause_probes(self, on=False):
        """Stop (or go on) opening new connections: around a step that
        takes the port away by design."""
        self.probing = on

    def drop_held(self):
        """Forget the held connections' sockets (the server is gone by
        design): they are opened again at the next tick."""
        with self.lock:
            for h in self.held:
                if h.sock is not None:
                    self.sel.unregister(h.sock)
                    h.sock.close()
                    h.sock = None
                    if h.expect is not None and h.expect[0] == "set":
                        h.want.setdefault(h.expect[1], {None}).add(
                            h.expect[2])
                    h.expect = None
                    h.sent_at = None

    def holding(self, on):
        """Stop (or go on) sending on held connections."""
        self.sending = on

    def stop(self):
        self.running = False
        if self.thread is not None:
            self.thread.join(30)
        for h in self.held:
            if h.sock is not None:
                h.sock.close()
        for p in list(self.probes):
            p.sock.close()
        return self.mark("end")

    def keys(self):
        """What each held connection's keys must read as now."""
        with self.lock:
            return {k: set(v) for h in self.held for k, v in h.want.items()}


    def _run(self):
        next_probe = time.monotonic()
        while self.running:
            with self.lock:
                now = time.monotonic()
                if self.sending:
                    for h in self.held:
                        h.tick(now)
                if self.probing and now >= next_probe:
                    Probe(self)
                    next_probe = now + self.probe_every
                for p in list(self.probes):
                    p.overdue(now, self.probe_limit)
                for key, mask in self.sel.select(0.001):
                    obj = key.data
                    if isinstance(obj, Held):
                        if obj.sock is not None:
                            obj.readable()
                    else:
                        obj.event(mask)
