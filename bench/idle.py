#!/usr/bin/env python3
"""idle.py: what an idle connection costs a server's memory, memcached-pm
on each event engine against memcached, side by side.

    python3 bench/idle.py [--connections 15000] [--threads 4]
        [--engines io_uring,epoll] [--server-args "FLAGS"] [--json FILE]

For each server in turn (memcached-pm -o event_engine=<engine> for each
engine, then Debian's memcached), with the same -t, -c and -m: start it,
read its RSS (VmRSS) once it answers, open N/3 connections, have each ask
`version` and one GET (so that each has read and answered), read the RSS,
open the rest the same way, read it again, check that every connection
still answers, and close them.  Prints two figures a connection, each
with its ratio to memcached's (goal: at most 1.0): the growth from no
connection to N, and from N/3 to N, which leaves out what a server sets
up once and shares between its connections (a worker's spare buffers,
the io_uring engine's receive buffers, touched as it turns through
them) and so is what each more connection costs.  The process's file limit must allow N + a few descriptors
(this machine's hard limit is 20,000).  Environment: MCPM_BIN
[build/memcached-pm/memcached-pm], MC_BIN [/usr/bin/memcached].
"""

import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from server_probe import free_port  # noqa: E402


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise SystemExit("idle.py: no VmRSS for pid %d" % pid)


def wait_serving(port, proc, deadline_s=30):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise SystemExit("idle.py: the server exited %d"
                             % proc.returncode)
        try:
            with socket.create_connection(("127.0.0.1", port), 1) as s:
                s.sendall(b"version\r\n")
                if s.recv(64).startswith(b"VERSION"):
                    return
        except OSError:
            time.sleep(0.02)
    raise SystemExit("idle.py: the server did not answer")


def ask_all(conns, req, end):
    """Send req on every connection, then read each reply to `end`."""
    for s in conns:
        s.sendall(req)
    for s in conns:
        got = b""
        while not got.endswith(end):
            part = s.recv(4096)
            if not part:
                raise SystemExit("idle.py: a connection was closed")
            got += part


def open_conns(port, n):
    conns = [socket.create_connection(("127.0.0.1", port))
             for _ in range(n)]
    ask_all(conns, b"version\r\n", b"\r\n")
    ask_all(conns, b"get idle-key\r\n", b"END\r\n")
    return conns


def measure(argv, n):
    """RSS (kB) before any connection, with n // 3 of them, with n."""
    port = free_port()
    proc = subprocess.Popen(argv + ["-p", str(port)],
                            stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    conns = []
    try:
        wait_serving(port, proc)
        time.sleep(0.2)
        before = rss_kb(proc.pid)
        conns += open_conns(port, n // 3)
        time.sleep(0.2)
        third = rss_kb(proc.pid)
        conns += open_conns(port, n - n // 3)
        time.sleep(0.2)
        after = rss_kb(proc.pid)
        ask_all(conns, b"version\r\n", b"\r\n")
        return before, third, after
    finally:
        for s in conns:
            s.close()
        proc.terminate()
        proc.wait(30)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--connections", type=int, default=15000)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--engines", default="io_uring,epoll")
    ap.add_argument("--server-args", default="",
                    help="more flags for memcached-pm")
    ap.add_argument("--json")
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    mcpm = os.environ.get("MCPM_BIN", os.path.join(
        ROOT, "build", "memcached-pm", "memcached-pm"))
    mc = os.environ.get("MC_BIN", "/usr/bin/memcached")
    common = ["-l", "127.0.0.1", "-U", "0", "-t", str(args.threads),
              "-c", str(args.connections + 100), "-m", "64"]
    if os.geteuid() == 0:
        common += ["-u", "root"]
    sides = [("memcached-pm/" + e, [mcpm] + common + ["-o",
              "event_engine=" + e] + args.server_args.split())
             for e in args.engines.split(",")]
    sides.append(("memcached", [mc] + common))
    res = {}
    n = args.connections
    for name, argv in sides:
        before, third, after = measure(argv, n)
        res[name] = {"rss_before_kb": before, "rss_third_kb": third,
                     "rss_after_kb": after,
                     "bytes_per_conn": (after - before) * 1024 / n,
                     "marginal_bytes_per_conn":
                         (after - third) * 1024 / (n - n // 3)}
    print("%d idle connections, -t %d; a connection's bytes: the growth "
          "from none to %d, and from %d to %d (the worker's buffers, shared "
          "and bounded, are in place by then)" % (n, args.threads, n, n // 3,
                                                 n))
    for key in ("bytes_per_conn", "marginal_bytes_per_conn"):
        base = res["memcached"][key]
        for r in res.values():
            r[key.replace("bytes_per_conn", "ratio")] = r[key] / base
    for name, r in res.items():
        print("%-22s RSS %6d -> %6d -> %6d kB  %5.0f B a conn (%.2fx), "
              "%5.0f B from %d (%.2fx)"
              % (name, r["rss_before_kb"], r["rss_third_kb"],
                 r["rss_after_kb"], r["bytes_per_conn"], r["ratio"],
                 r["marginal_bytes_per_conn"], n // 3, r["marginal_ratio"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
