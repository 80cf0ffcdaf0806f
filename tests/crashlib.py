"""Self-checking values and the crash-consistency driver of the PMEM tier.

Used by tests/test_restart.py (the values), tests/test_crash.py and
bench/crash.sh (the driver).  Nothing here depends on pytest: a violation
raises CrashError with a message that names the seed, the crash point and
the key, so the same run can be replayed.

Values.  make_value(key, client, version, size) is deterministic; when the
size allows, it starts with "key|c<client>|v<version>|n<size>|<crc32>|"
and the CRC-32 covers that head and the body, so a torn or mixed value is
recognised without knowing what was written (check_value).

The crash model.  Each client thread owns a disjoint key set and sends
pipelined batches with at most one request per key, so for every key it
knows the last acknowledged state and the request in flight, if any (sent,
reply not read).
After a SIGKILL and a restart on the same file every key must hold its
acknowledged state or the in-flight one: an acknowledged write is never
lost, an acknowledged delete never undone, and nothing else may appear.
The state found becomes the acknowledged state of the next crash point,
so the history of the file carries across all of them.
"""

import json
import os
import random
import signal
import socket
import subprocess
import threading
import time
import zlib

ABSENT = None
CLIENTS = 4
DATA_KEYS = 100
COUNTER_KEYS = 6
KILL_MIN = 0.2
KILL_MAX = 1.5
MAX_BATCH = 6
FILL_BATCH = 50
GROWING_S = 0.05        # the table grows at least this often meanwhile
IO_TIMEOUT = 10.0


class CrashError(AssertionError):
    """A recovered state the crash model does not allow."""


class TornValue(ValueError):
    """A value whose self-description or checksum does not hold."""


# --------------------------------------------------------------------------
# self-checking values
# --------------------------------------------------------------------------

_POOL = random.Random(20261202).randbytes(1 << 21)


def _body(key, version, n):
    """n bytes fixed by key and version: a stretch of a random pool that
    starts where they say (cheap: a million values are made in seconds)."""
    start = (zlib.crc32(key) * 0x9E3779B1 + version * 0x85EBCA77) \
        % len(_POOL)
    out = _POOL[start:start + n]
    while len(out) < n:
        out += _POOL[:n - len(out)]
    return out


def _head(key, client, version, size):
    return b"%s|c%d|v%d|n%d|" % (key, client, version, size)


def make_value(key, client, version, size):
    """The value `client` writes as `version` of `key`, `size` bytes.
    Too short for its head, it is plain deterministic bytes."""
    head = _head(key, client, version, size)
    if size < len(head) + 9:
        return _body(key, version, size)
    body = _body(key, version, size - len(head) - 9)
    crc = zlib.crc32(body, zlib.crc32(head))
    return head + b"%08x|" % crc + body


def check_value(key, value):
    """(client, version) of a self-describing value of `key`; raises
    TornValue if its head, length or checksum is wrong."""
    parts = value.split(b"|", 5)
    if len(parts) != 6 or parts[0] != key:
        raise TornValue("no head for %r: %r" % (key, value[:60]))
    try:
        client = int(parts[1][1:])
        version = int(parts[2][1:])
        size = int(parts[3][1:])
        crc = int(parts[4], 16)
    except ValueError:
        raise TornValue("bad head for %r: %r" % (key, value[:60]))
    if size != len(value):
        raise TornValue("%r: %d bytes, head says %d" % (key, len(value), size))
    head = value[:len(value) - len(parts[5]) - 9]
    if zlib.crc32(parts[5], zlib.crc32(head)) != crc:
        raise TornValue("%r: checksum mismatch (v%d)" % (key, version))
    return client, version


def crash_size(key, version):
    """Size of a version in the crash test: mostly small, a few spanning
    many cache lines and pages (10-120 KB)."""
    r = random.Random(zlib.crc32(key) * 7919 + version)
    if r.random() < 0.03:
        return r.randint(10000, 120000)
    return r.randint(40, 3000)


def crash_flags(version):
    return (version * 2654435761) & 0xFFFFFFFF


# --------------------------------------------------------------------------
# a small blocking client
# --------------------------------------------------------------------------

class Closed(OSError):
    """The server closed the connection (it was killed)."""


class Client:
    def __init__(self, port, timeout=IO_TIMEOUT):
        self.sock = socket.create_connection(("127.0.0.1", port),
                                             timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def close(self):
        self.sock.close()

    def send(self, data):
        self.sock.sendall(data)

    def _fill(self):
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise Closed("connection closed")
        self.buf += chunk

    def readline(self):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line, self.buf = self.buf[:i + 2], self.buf[i + 2:]
                return line
            self._fill()

    def read_exact(self, n):
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def call(self, req):
        self.send(req)
        return self.readline()

    def gets(self, keys):
        """{key: (flags, cas, data)} for the keys found."""
        self.send(b"gets " + b" ".join(keys) + b"\r\n")
        found = {}
        while True:
            line = self.readline()
            if line == b"END\r\n":
                return found
            parts = line.split()
            if parts[0] != b"VALUE" or len(parts) != 5:
                raise CrashError("bad gets reply %r" % line)
            data = self.read_exact(int(parts[3]) + 2)[:-2]
            found[parts[1]] = (int(parts[2]), int(parts[4]), data)

    def stats(self):
        self.send(b"stats\r\n")
        out = {}
        while True:
            line = self.readline()
            if line == b"END\r\n":
                return out
            parts = line.decode().split()
            out[parts[1]] = parts[2] if len(parts) > 2 else ""


# --------------------------------------------------------------------------
# one client's keys and history
# --------------------------------------------------------------------------

class ClientState:
    """What one client knows: acked[key] is the last acknowledged state
    (ABSENT, a data version, or a counter's integer); inflight[key] is
    the state a request whose reply was not read would leave."""

    def __init__(self, cid):
        self.cid = cid
        self.data = [b"c%dk%d" % (cid, i) for i in range(DATA_KEYS)]
        self.counters = [b"c%dn%d" % (cid, i) for i in range(COUNTER_KEYS)]
        self.acked = {k: ABSENT for k in self.data + self.counters}
        self.inflight = {}
        self.next_version = 1
        self.ops_acked = 0
        self.error = None

    def keys(self):
        return self.data + self.counters


class Worker(threading.Thread):
    """Runs random requests on one client's keys until the server dies.

    Requests go in pipelined batches of 1..MAX_BATCH on distinct keys, so
    the server has work queued when the kill comes and some requests die
    half done; each reply is acknowledged as it is read."""

    def __init__(self, port, state, rng, recovering=False):
        super().__init__(daemon=True)
        self.port = port
        self.st = state
        self.rng = rng
        self.ready = threading.Event()
        # the server reads its file back meanwhile: a key not read back
        # yet answers as missing (_lenient())
        self.recovering = recovering

    def run(self):
        try:
            conn = Client(self.port)
        except OSError as e:
            self.st.error = "connect: %s" % e
            self.ready.set()
            return
        self.ready.set()
        try:
            while True:
                self._batch(conn)
        except (OSError, socket.timeout):
            pass                # the kill: the requests in flight stay so
        except Exception as e:          # a wrong reply: the model fails
            self.st.error = "%s: %s" % (type(e).__name__, e)
        finally:
            conn.close()

    def _batch(self, conn):
        st = self.st
        n = self.rng.randint(1, MAX_BATCH)
        keys = self.rng.sample(st.data, n)
        keys += self.rng.sample(st.counters, self.rng.randint(0, 1))
        ops = [self._op(key) for key in keys]
        for key, req, _want, state in ops:
            st.inflight[key] = state
            if (self.recovering and req.startswith(b"add ") and
                    st.acked[key] is not ABSENT):
                # cut in flight, it may have stored (the key not read
                # back yet): the checker allows that version too
                st.inflight[key] = self._version_in(key, req)
        conn.send(b"".join(op[1] for op in ops))
        for key, req, want, state in ops:
            reply = conn.readline()
            allowed = {want: state}
            if self.recovering:
                allowed.update(self._lenient(key, req, state))
            if reply not in allowed:
                raise CrashError("client %d: %r got %r, model expects %r"
                                 % (st.cid, req[:80], reply, want))
            st.acked[key] = allowed[reply]
            del st.inflight[key]
            st.ops_acked += 1

    def _version_in(self, key, req):
        """The version a store request carries."""
        return check_value(key, req[req.index(b"\r\n") + 2:-2])[1]

    def _lenient(self, key, req, _applied):
        """The other replies a request may get while the server recovers,
        and the state each leaves: a key not read back yet misses, so a
        replace or incr of it does nothing, an add of it stores, and a
        delete of it answers NOT_FOUND but deletes all the same."""
        old = self.st.acked[key]
        if old is ABSENT:
            return {}
        if req.startswith(b"replace ") or req.startswith(b"incr "):
            return {b"NOT_STORED\r\n" if req.startswith(b"replace ")
                    else b"NOT_FOUND\r\n": old}
        if req.startswith(b"add "):
            return {b"STORED\r\n": self._version_in(key, req)}
        if req.startswith(b"delete "):
            return {b"NOT_FOUND\r\n": ABSENT}
        return {}

    def _op(self, key):
        """(key, request, expected reply, state it leaves) of a random
        request on `key`, judged by its acknowledged state."""
        if key in self.st.counters:
            return self._op_counter(key)
        r = self.rng.random()
        if r < 0.50:
            return self._op_store(key, b"set")
        if r < 0.68:
            return self._op_store(key, b"replace")
        if r < 0.76:
            return self._op_store(key, b"add")
        return self._op_delete(key)

    def _op_store(self, key, cmd):
        st = self.st
        old = st.acked[key]
        version = st.next_version
        st.next_version += 1
        value = make_value(key, st.cid, version, crash_size(key, version))
        applies = (cmd == b"set" or (cmd == b"replace") == (old is not ABSENT))
        req = b"%s %s %d 0 %d\r\n%s\r\n" % (cmd, key, crash_flags(version),
                                             len(value), value)
        if applies:
            return key, req, b"STORED\r\n", version
        return key, req, b"NOT_STORED\r\n", old

    def _op_delete(self, key):
        want = (b"NOT_FOUND\r\n" if self.st.acked[key] is ABSENT
                else b"DELETED\r\n")
        return key, b"delete %s\r\n" % key, want, ABSENT

    def _op_counter(self, key):
        old = self.st.acked[key]
        if old is ABSENT:
            n = self.rng.randint(0, 1 << 40)
            req = b"set %s 0 0 %d\r\n%d\r\n" % (key, len(b"%d" % n), n)
            return key, req, b"STORED\r\n", n
        delta = self.rng.randint(1, 1000)
        return (key, b"incr %s %d\r\n" % (key, delta),
                b"%d\r\n" % (old + delta), old + delta)


# --------------------------------------------------------------------------
# checking a recovered file against the model
# --------------------------------------------------------------------------

def _observed(st, key, found):
    """The state a key was found in; raises TornValue on a bad value."""
    if key not in found:
        return ABSENT
    flags, _cas, data = found[key]
    if key in st.counters:
        if not data.isdigit():
            raise TornValue("counter %r holds %r" % (key, data[:40]))
        return int(data)
    cid, version = check_value(key, data)
    want = make_value(key, cid, version, crash_size(key, version))
    if cid != st.cid or data != want or flags != crash_flags(version):
        raise TornValue("%r: v%d of client %d differs from what was "
                        "written (flags %d)" % (key, version, cid, flags))
    return version


def _describe(state):
    return "absent" if state is ABSENT else "%r" % state


def _verdict(acked, got):
    if got is ABSENT and acked is not ABSENT:
        return "lost write"
    if acked is ABSENT and got is not ABSENT:
        return "resurrected or invented"
    return "wrong version"


def check_client(conn, st, tally):
    """Check one client's keys; returns a list of violations and makes the
    found states the acknowledged ones."""
    problems = []
    keys = st.keys()
    found = {}
    for i in range(0, len(keys), 50):
        found.update(conn.gets(keys[i:i + 50]))
    inflight = st.inflight
    for key in keys:
        acked = st.acked[key]
        try:
            got = _observed(st, key, found)
        except TornValue as e:
            problems.append("torn: %s" % e)
            tally["torn_values"] += 1
            tally["live"] += 1          # served, so counted by the server
            continue
        allowed = [acked]
        if key in inflight:
            allowed.append(inflight[key])
        tally["keys_checked"] += 1
        if got not in allowed:
            tally["lost_writes"] += 1
            problems.append("%s: %r is %s; acked %s, in flight %s" % (
                _verdict(acked, got), key, _describe(got),
                _describe(acked), _describe(allowed[1]) if len(allowed) > 1
                else "nothing"))
        elif len(allowed) > 1 and acked != allowed[1]:
            tally["inflight_applied" if got == allowed[1]
                  else "inflight_dropped"] += 1
        if got is not ABSENT:
            tally["live"] += 1
        st.acked[key] = got
    st.inflight = {}
    return problems


def check_all(port, clients, tally):
    """Check every client's keys on a restarted server."""
    tally["live"] = 0
    problems = []
    conn = Client(port)
    try:
        for st in clients:
            problems += check_client(conn, st, tally)
    finally:
        conn.close()
    return problems


def new_tally():
    return dict(points=0, keys_checked=0, ops_acked=0, lost_writes=0,
                torn_values=0, torn_dropped=0, inflight_applied=0,
                inflight_dropped=0, live=0, seconds=0.0,
                epochs_in_recovery=0, epochs_growing=0)


class Filler(threading.Thread):
    """Makes the hash table grow until the server dies: pipelined batches
    of FILL_BATCH sets of new keys, each batch followed by `stats` to see
    the table's size.  After the restart, settle() counts the fill keys
    that came back (never fewer than were acknowledged) and deletes them,
    so that the model's item counts hold and the next epoch grows the
    table again."""

    def __init__(self, port, epoch):
        super().__init__(daemon=True)
        self.port = port
        self.epoch = epoch
        self.ready = threading.Event()
        self.growing = threading.Event()    # the table grew once
        self.sizes = []         # (time, hash_bytes) after each batch
        self.sent = 0
        self.acked = 0

    def key(self, n):
        return b"g%d:%d" % (self.epoch, n)

    def run(self):
        try:
            conn = Client(self.port)
        except OSError:
            self.ready.set()
            return
        self.ready.set()
        try:
            while True:
                conn.send(b"".join(b"set %s 0 0 1\r\nx\r\n"
                                   % self.key(self.sent + i)
                                   for i in range(FILL_BATCH)))
                self.sent += FILL_BATCH
                for _ in range(FILL_BATCH):
                    if conn.readline() != b"STORED\r\n":
                        raise CrashError("a fill set failed")
                    self.acked += 1
                self.sizes.append((time.monotonic(),
                                   int(conn.stats()["hash_bytes"])))
                if self.sizes[-1][1] > self.sizes[0][1]:
                    self.growing.set()
        except (OSError, socket.timeout, Closed):
            pass                # the kill
        finally:
            conn.close()

    def grew_last(self):
        """Did the table grow in its last GROWING_S before the kill?"""
        if not self.sizes:
            return False
        end, size = self.sizes[-1]
        before = [b for t, b in self.sizes if t <= end - GROWING_S]
        return bool(before) and size > before[-1]

    def settle(self, port):
        """After the restart: the fill keys found (CrashError if fewer
        than were acknowledged), then deleted."""
        conn = Client(port)
        try:
            keys = [self.key(n) for n in range(self.sent)]
            found = 0
            for i in range(0, len(keys), 100):
                found += len(conn.gets(keys[i:i + 100]))
            if found < self.acked:
                raise CrashError("%d fill keys back of %d acknowledged"
                                 % (found, self.acked))
            conn.send(b"".join(b"delete %s noreply\r\n" % k for k in keys))
            if conn.call(b"mn\r\n") != b"MN\r\n":
                raise CrashError("the fill keys' deletes did not end")
            return found
        finally:
            conn.close()


# --------------------------------------------------------------------------
# the crash driver
# --------------------------------------------------------------------------

def _stat(st, name):
    if name not in st:
        raise CrashError("stats has no %s" % name)
    return st[name]


def check_recovery_stats(st, live, checksummed):
    """The recovery figures of a restart that found `live` items."""
    problems = []
    want = {"recovery_checksummed": str(checksummed),
            "recovery_dropped_torn": "0",
            "recovery_items": str(live),
            "curr_items": str(live)}
    for name, value in want.items():
        try:
            got = _stat(st, name)
        except CrashError as e:
            problems.append(str(e))
            continue
        if got != value:
            problems.append("stats %s is %s, expected %s" % (name, got, value))
    return problems


def kill_after(proc, delay):
    """SIGKILL `proc` `delay` seconds from now, from another process: a
    kill sent by this one would land only when it holds the GIL, which is
    just after some client thread has sent a request and let go of it, so
    the server would almost never be killed in the middle of one."""
    killer = subprocess.Popen(["/bin/sh", "-c", "sleep %.3f; kill -KILL %d"
                               % (delay, proc.pid)])
    killer.wait()
    proc.wait()
    return proc.returncode == -signal.SIGKILL


def run_epoch(server, clients, rng, point, recovering=False, filler=None):
    """Let the clients run on `server` (and `filler`, a Filler, with
    them), then SIGKILL it at a random moment in [KILL_MIN, KILL_MAX]
    seconds.  Returns the kill delay."""
    workers = [filler] if filler is not None else []
    for st in clients:
        w = Worker(server.port, st, random.Random(rng.getrandbits(64)),
                   recovering)
        workers.append(w)
        w.start()
    if filler is not None:
        filler.start()
    for w in workers:
        w.ready.wait(IO_TIMEOUT)
    if filler is not None:
        # growth follows the item count from the next clock tick on
        filler.growing.wait(IO_TIMEOUT)
    delay = rng.uniform(KILL_MIN, KILL_MAX)
    if not kill_after(server.proc, delay):
        raise CrashError("point %d: the server exited with status %s "
                         "before the kill" % (point, server.proc.returncode))
    for w in workers:
        w.join(IO_TIMEOUT * 2)
        if w.is_alive():
            raise CrashError("point %d: client thread still running after "
                             "the kill" % point)
    errors = [st.error for st in clients if st.error]
    if errors:
        raise CrashError("point %d: %s" % (point, "; ".join(errors)))
    return delay


def run_crash_points(start, points, seed, tally, log=None, recover=None,
                     grow=False):
    """Run `points` crash points on one memory file.

    start(strict) starts a server on the file (strict: under the
    power-loss simulator) and returns an object with .port, .proc and
    .stats(), once it has read every item back.  The servers alternate
    strict, not strict, ... so every other kill is a power cut and the
    others a process crash.  With recover(strict), each point first
    crashes the server just checked (nothing in flight) and starts it with
    recover(), which returns while it still reads its file back: the
    clients write during that recovery, and the kill lands in it or after
    it.  With `grow`, a Filler makes the hash table grow throughout each
    epoch.  Returns the clients (their states after the last check) and
    the last server."""
    rng = random.Random(seed)
    clients = [ClientState(cid) for cid in range(CLIENTS)]
    began = time.monotonic()
    server = start(True)
    for point in range(points):
        strict = point % 2 == 0
        if recover is not None:
            server.proc.kill()
            server.proc.wait()
            server = recover(strict)
            tally["epochs_in_recovery"] += \
                server.stats()["recovery_running"] == "1"
        filler = Filler(server.port, point) if grow else None
        delay = run_epoch(server, clients, rng, point, recover is not None,
                          filler)
        if filler is not None and filler.grew_last():
            tally["epochs_growing"] += 1
        tally["ops_acked"] = sum(st.ops_acked for st in clients)
        server = start(not strict)
        where = ("seed %d, point %d (killed %s run after %.3f s)"
                 % (seed, point, "strict" if strict else "non-strict", delay))
        problems = check_all(server.port, clients, tally)
        st = server.stats()
        fills = filler.settle(server.port) if filler is not None else 0
        problems += check_recovery_stats(st, tally["live"] + fills, 1)
        tally["torn_dropped"] += int(st.get("recovery_dropped_torn", 0))
        tally["points"] = point + 1
        tally["seconds"] = time.monotonic() - began
        if log:
            log("%s: %d live, %d ops acked" % (where, tally["live"],
                                               tally["ops_acked"]))
        if problems:
            seen = " ".join("%s=%s" % (k, v) for k, v in sorted(st.items())
                            if k.startswith("recovery_"))
            raise CrashError("%s:\n  %s\n  restart: %s"
                             % (where, "\n  ".join(problems[:30]), seen))
    return clients, server


def write_summary(tally):
    """Leave the tally where bench/crash.sh asked for it (if it did)."""
    path = os.environ.get("MCPM_CRASH_SUMMARY")
    if path:
        with open(path, "w") as f:
            json.dump(tally, f)
