#!/usr/bin/env python3
"""large.py: what large values keep, memcached-pm against memcached.

Servers, each with -m MEM (default 64) and default flags otherwise, all up
at once: memcached-pm in DRAM (tier_policy=dram), memcached-pm -e on a
tmpfs file, and Debian's memcached.  Each gets the same two phases:

  1. steady: SETS sets of values drawn uniformly from 100 KB to 1 MB.
  2. shift:  the cache is first filled with small values (SMALL_SETS sets
     of 1-4 KB: every page goes to the small classes), then SETS sets of
     100 KB - 1 MB arrive, paced over SHIFT_SECONDS so that automove (on
     by default in both) has time to hand pages to the large classes.

After each phase: the bytes and items of the phase's large values still
held (read back with a size check), the sets refused with SERVER_ERROR,
evictions and slabs_moved, and the ratio of bytes held to memcached's.
The same seeded sizes go to every server.  Everything started here is
stopped on exit.

usage: python3 bench/large.py   (knobs: MCPM_BIN MC_BIN MEM SETS SMALL_SETS
SHIFT_SECONDS SEED SHM_DIR)
"""

import os
import random
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from server_probe import binaries, free_port  # noqa: E402
MC = os.environ.get("MC_BIN", "/usr/bin/memcached")
MEM = int(os.environ.get("MEM", "64"))
SETS = int(os.environ.get("SETS", "600"))
SMALL_SETS = int(os.environ.get("SMALL_SETS", "40000"))
SHIFT_SECONDS = float(os.environ.get("SHIFT_SECONDS", "20"))
SEED = int(os.environ.get("SEED", "7"))
SHM_DIR = os.environ.get("SHM_DIR", "/dev/shm")
KB = 1024
AS_ROOT = ["-u", "root"] if os.geteuid() == 0 else []


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.buf = b""

    def line(self):
        while b"\r\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                raise EOFError("server closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def set(self, key, n):
        self.s.sendall(b"set %s 0 0 %d\r\n%s\r\n" % (key, n, b"v" * n))
        return self.line()

    def size(self, key):
        """Bytes of key's value, 0 if it is gone (read and checked)."""
        self.s.sendall(b"get %s\r\n" % key)
        head = self.line()
        if head == b"END":
            return 0
        n = int(head.split()[3])
        while len(self.buf) < n + 2:
            self.buf += self.s.recv(1 << 20)
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        assert data == b"v" * n and self.line() == b"END", key
        return n

    def stats(self, sub=b""):
        self.s.sendall(b"stats %s\r\n" % sub if sub else b"stats\r\n")
        out = {}
        while True:
            line = self.line()
            if line == b"END":
                return out
            _, k, v = line.decode().split(" ", 2)
            out[k] = v


class Server:
    def __init__(self, name, argv):
        self.name = name
        self.port = free_port()
        self.proc = subprocess.Popen(
            argv + ["-l", "127.0.0.1", "-p", str(self.port), "-m", str(MEM),
                    "-U", "0"] + AS_ROOT,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                self.c = Conn(self.port)
                return
            except OSError:
                if self.proc.poll() is not None or \
                        time.monotonic() > deadline:
                    raise RuntimeError("%s did not start" % name)
                time.sleep(0.05)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


def large_sizes(rng):
    return [rng.randint(100 * KB, 1024 * KB - 512) for _ in range(SETS)]


def run_large(servers, prefix, sizes, pace):
    refused = {s.name: 0 for s in servers}
    for i, n in enumerate(sizes):
        key = b"%s%d" % (prefix, i)
        for s in servers:
            reply = s.c.set(key, n)
            if reply != b"STORED":
                refused[s.name] += 1
        if pace:
            time.sleep(pace)
    return refused


def report(title, servers, prefix, sizes, refused):
    print("== %s: %d sets of 100 KB - 1 MB, -m %d" % (title, len(sizes), MEM))
    print("%-18s %10s %6s %8s %9s %7s %9s" % (
        "server", "held_MB", "items", "refused", "evictions", "moved",
        "vs_memcd"))
    held = {}
    rows = []
    for s in servers:
        b = items = 0
        for i, n in enumerate(sizes):
            got = s.c.size(b"%s%d" % (prefix, i))
            if got:
                assert got == n
                b += got
                items += 1
        st = s.c.stats()
        held[s.name] = b
        rows.append((s.name, b, items, refused[s.name], st["evictions"],
                     st.get("slabs_moved", "?")))
    base = held["memcached"] or 1
    for name, b, items, ref, ev, moved in rows:
        print("%-18s %10.1f %6d %8d %9s %7s %9.3f" % (
            name, b / (KB * KB), items, ref, ev, moved, b / base))
    print()


def main():
    mcpm = binaries(ROOT)[0]
    shm = tempfile.mkdtemp(prefix="mcpm-large.", dir=SHM_DIR)
    servers = []
    try:
        for phase in ("steady", "shift"):
            servers = [
                Server("memcached-pm/dram", [mcpm, "-o", "tier_policy=dram"]),
                Server("memcached-pm/-e", [mcpm, "-e",
                                           os.path.join(shm, phase + ".pm")]),
                Server("memcached", [MC]),
            ]
            rng = random.Random(SEED)
            if phase == "shift":
                for i in range(SMALL_SETS):
                    n = rng.randint(1 * KB, 4 * KB)
                    for s in servers:
                        s.c.set(b"small%d" % i, n)
            sizes = large_sizes(rng)
            pace = SHIFT_SECONDS / len(sizes) if phase == "shift" else 0
            refused = run_large(servers, b"big", sizes, pace)
            report(phase, servers, b"big", sizes, refused)
            for s in servers:
                s.stop()
            servers = []
    finally:
        for s in servers:
            s.proc.kill()
        for f in os.listdir(shm):
            os.unlink(os.path.join(shm, f))
        os.rmdir(shm)


if __name__ == "__main__":
    sys.exit(main())
