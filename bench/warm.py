#!/usr/bin/env python3
"""warm.py: -o warm_from against a memcached node of N items, with a
writer updating keys on the node all through the copy.

    python3 bench/warm.py [--items 1000000] [--rate 0] [--value-size 100]
        [--memcached /usr/bin/memcached] [--write-seconds 10]

1. Debian's memcached (or --memcached) is loaded with N keys (version 0).
2. A writer starts: batches of sets of random keys to the next version,
   each batch acknowledged (`mn`), the last acknowledged version of each
   key remembered.
3. memcached-pm starts with -o warm_from (and warm_from_rate=--rate):
   the time to `warm_state following` is the copy.
4. The writer goes on for --write-seconds while it follows, then stops.
5. Once the copy has caught up (stats' warm_events still for 2 s),
   memcached stops (SIGTERM): the cut-over.  Every key is then read from
   memcached-pm: a value older than its last acknowledged write is
   stale, a missing key a miss.

Prints the copy's time and rate, the requests a second it sent (against
--rate), and stale and missing keys.  Environment: MCPM_BIN
[build/memcached-pm/memcached-pm].
"""

import argparse
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from server_probe import free_port  # noqa: E402


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.buf = b""

    def send(self, data):
        self.s.sendall(data)

    def line(self):
        while b"\r\n" not in self.buf:
            d = self.s.recv(1 << 20)
            if not d:
                raise EOFError
            self.buf += d
        ln, self.buf = self.buf.split(b"\r\n", 1)
        return ln

    def exact(self, n):
        while len(self.buf) < n:
            d = self.s.recv(1 << 20)
            if not d:
                raise EOFError
            self.buf += d
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def stats(self):
        self.send(b"stats\r\n")
        out = {}
        while True:
            ln = self.line()
            if ln == b"END":
                return out
            _, k, v = ln.decode().split(" ", 2)
            out[k] = v

    def sync(self):
        self.send(b"mn\r\n")
        while self.line() != b"MN":
            pass


def start(cmd, port):
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            Conn(port).s.close()
            return p
        except OSError:
            if p.poll() is not None:
                raise SystemExit("server exited: %s" % p.stderr.read())
            time.sleep(0.02)
    raise SystemExit("server did not answer")


def value(key_no, version, size):
    v = b"%d:%d:" % (key_no, version)
    return v + b"x" * (size - len(v))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=1000000)
    ap.add_argument("--rate", type=int, default=0)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--write-seconds", type=float, default=10)
    ap.add_argument("--memcached", default="/usr/bin/memcached")
    a = ap.parse_args()
    mcpm = os.environ.get("MCPM_BIN", os.path.join(
        ROOT, "build/memcached-pm/memcached-pm"))
    root = ["-u", "root"] if os.geteuid() == 0 else []
    mb = a.items * (a.value_size + 120) // (1 << 20) + 256
    src_port, dst_port = free_port(), free_port()
    src = start([a.memcached, "-p", str(src_port), "-U", "0", "-l",
                 "127.0.0.1", "-m", str(mb), "-t", "2"] + root, src_port)
    dst = None
    try:
        c = Conn(src_port)
        for i in range(0, a.items, 2000):
            c.send(b"".join(b"set k%d 0 0 %d noreply\r\n%s\r\n" % (
                j, a.value_size, value(j, 0, a.value_size))
                for j in range(i, min(i + 2000, a.items))))
        c.sync()
        before_gets = int(c.stats()["cmd_get"])

        acked = {}
        stop = threading.Event()
        written = [0]

        def writer():
            w = Conn(src_port)
            rng = random.Random(1)
            version = 0
            while not stop.is_set():
                version += 1
                keys = [rng.randrange(a.items) for _ in range(100)]
                w.send(b"".join(b"set k%d 0 0 %d noreply\r\n%s\r\n" % (
                    k, a.value_size, value(k, version, a.value_size))
                    for k in keys))
                w.sync()
                for k in keys:
                    acked[k] = version
                written[0] += len(keys)
                time.sleep(0.002)

        t = threading.Thread(target=writer)
        t.start()
        t0 = time.monotonic()
        opt = "warm_from=127.0.0.1:%d" % src_port
        if a.rate:
            opt += ",warm_from_rate=%d" % a.rate
        dst = start([mcpm, "-p", str(dst_port), "-U", "0", "-l",
                     "127.0.0.1", "-m", str(mb), "-o", opt] + root,
                    dst_port)
        d = Conn(dst_port)
        while d.stats()["warm_state"] not in ("following", "failed"):
            time.sleep(0.05)
        copy_s = time.monotonic() - t0
        st = d.stats()
        gets = int(c.stats()["cmd_get"]) - before_gets
        time.sleep(a.write_seconds)
        stop.set()
        t.join()
        # caught up: the events it counted stop moving for 2 s (an idle
        # memcached's logger writes to its watchers up to a second late)
        last = -1
        while True:
            ev = int(d.stats()["warm_events"])
            if ev == last:
                break
            last = ev
            time.sleep(2)
        src.send_signal(signal.SIGTERM)
        src.wait(30)
        while d.stats()["warm_state"] not in ("done", "failed"):
            time.sleep(0.05)
        stale = missing = 0
        for i in range(0, a.items, 1000):
            keys = list(range(i, min(i + 1000, a.items)))
            d.send(b"".join(b"mg k%d v\r\n" % k for k in keys))
            for k in keys:
                ln = d.line()
                if ln.startswith(b"EN"):
                    missing += 1
                    continue
                got = d.exact(int(ln.split()[1]) + 2)[:-2]
                if int(got.split(b":")[1]) < acked.get(k, 0):
                    stale += 1
        end = d.stats()
        print("items %d, copy %.2f s (%.0f items/s), requests %.0f/s "
              "(bound %s), node gets during the copy %d" % (
                  a.items, copy_s, int(st["warm_copied"]) / copy_s,
                  int(st["warm_requests"]) / copy_s, a.rate or "none", gets))
        print("writes acknowledged %d (%d keys), events followed %s, "
              "passes %s" % (written[0], len(acked), end["warm_events"],
                             end["warm_passes"]))
        print("after the cut-over: stale %d, missing %d of %d" % (
            stale, missing, a.items))
    finally:
        for p in (src, dst):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()


if __name__ == "__main__":
    main()
