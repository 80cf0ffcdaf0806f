"""takeover_conns.py: bench/takeover.py --connections: the pause a
takeover costs against the connections a node holds.

For each N of --connections, a node of its own (-o takeover, its items
in a memory file) with:

  N idle connections   each answered `version` before the takeovers and
                       after them: one that does not is counted closed;
  --clients K          mcload clients doing a SET and a GET (50/50) over
                       the preloaded keys, throughout;
  a probe              one GET at a time (mcload, one connection, depth
                       1), for each takeover: its longest request is that
                       takeover's pause.

then --takeovers T takeovers in a row: a new process with the same
command line (plain), or with --systemd, a service of Debian's systemd
(tests/realsystemd.py: the listener from a .socket unit, the fd store)
reloaded (ExecReload=/bin/kill -USR2 $MAINPID), or with --verb restart,
restarted: stopped and started, its connections waiting in the fd
store.  Prints, for each N, the
pause of every takeover, their median and worst, the clients' longest
request, and any request failed or missed and connection closed.
"""

import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

from server_probe import free_port, mcload_argv, remove_server, request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEYS = 100000


def fd_room(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < n:
        sys.exit("takeover.py: %d connections need %d descriptors, the "
                 "limit is %d" % (n - 300, n, hard))
    if soft < n:
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, hard))


def versions(conns):
    """How many of conns answer `version` (sent to all, then read)."""
    good = 0
    for c in conns:
        try:
            c.sendall(b"version\r\n")
        except OSError:
            pass
    for c in conns:
        got = b""
        try:
            while not got.endswith(b"\r\n"):
                more = c.recv(64)
                if not more:
                    break
                got += more
        except OSError:
            pass
        good += got.startswith(b"VERSION ")
    return good


def waited(what, test, seconds):
    deadline = time.monotonic() + seconds
    while not test():
        if time.monotonic() > deadline:
            sys.exit("takeover.py: %s: not in %d s" % (what, seconds))
        time.sleep(0.005)


def answers(port):
    try:
        return request(port, b"version\r\n", b"\r\n", 1).startswith(
            b"VERSION ")
    except OSError:
        return False


class Plain:
    """A node and its successors by -o takeover alone."""

    def __init__(self, cmd, port):
        self.cmd, self.port = cmd, port
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        waited("the node's start", lambda: answers(port), 60)

    def take_over(self):
        old = self.proc
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        if old.wait(120) != 0:
            sys.exit("takeover.py: the old node exited %d" % old.returncode)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(120)


class Systemd:
    """A node as a service of Debian's systemd, booted for it in
    namespaces of its own (tests/realsystemd.py): its listener from a
    .socket unit, the fd store as big as the node's connections, each
    takeover `systemctl reload` (or, with --verb restart, `systemctl
    restart`: a stop and a start, the connections waiting in the fd
    store)."""

    def __init__(self, cmd, port, n, verb):
        sys.path.insert(0, os.path.join(ROOT, "tests"))
        import realsystemd
        why = realsystemd.unavailable()
        if why:
            sys.exit("takeover.py: systemd cannot boot here: " + why)
        self.work = tempfile.mkdtemp(prefix="mcpm-takeover-systemd-",
                                     dir="/var/lib")
        self.sd = realsystemd.Systemd(self.work).boot()
        # the unit names its own takeover socket
        i = cmd.index("-o")
        cmd = cmd[:i] + cmd[i + 2:]
        self.verb = verb
        self.unit = realsystemd.Service(self.sd, "mcpm-takeover-%d" % port,
                                        port, cmd, fdstore=n + 100)
        self.unit.start(timeout=120)

    def take_over(self):
        t = time.monotonic()
        getattr(self.unit, self.verb)(timeout=120)
        return time.monotonic() - t

    def stop(self):
        self.unit.stop()
        self.sd.shutdown()
        shutil.rmtree(self.work, ignore_errors=True)


def one_size(args, n, tmp):
    port = free_port()
    path = os.path.join(args.dir, "mcpm-takeover-%s" % uuid.uuid4().hex[:8])
    cmd = [args.mcpm, "-m", "256", "-e", path, "-c", str(n + 300), "-o",
           "takeover=" + os.path.join(tmp, "t%d.sock" % n), "-p", str(port),
           "-U", "0", "-l", "127.0.0.1"]
    if os.geteuid() == 0:
        cmd += ["-u", "root"]
    cmd += args.server_args.split()
    node = Systemd(cmd, port, n, args.verb) if args.systemd else \
        Plain(cmd, port)
    idle, clients = [], None
    try:
        load = subprocess.run(
            mcload_argv(args.mcload, port, args.value_size, "--preload",
                        "--requests", 1, "--keys", KEYS),
            capture_output=True, text=True)
        if load.returncode != 0:
            sys.exit("takeover.py: the load failed: " + load.stderr)
        idle = [socket.create_connection(("127.0.0.1", port), 10)
                for _ in range(n)]
        if versions(idle) != n:
            sys.exit("takeover.py: not every idle connection answered")
        clients = subprocess.Popen(
            mcload_argv(args.mcload, port, args.value_size, "--keys", KEYS,
                        "--get-ratio", 0.5, "-c", args.clients, "-d", 1,
                        "--duration", 86400, "--requests", 0),
            stdout=subprocess.PIPE, text=True)
        pauses, failed = [], 0
        for _ in range(args.takeovers):
            probe = subprocess.Popen(
                mcload_argv(args.mcload, port, args.value_size, "--keys",
                            KEYS, "--get-ratio", 1, "-c", 1, "-d", 1,
                            "--duration", 86400, "--requests", 0),
                stdout=subprocess.PIPE, text=True)
            time.sleep(0.3)                 # the probe under way
            node.take_over()
            time.sleep(0.3)                 # and after
            probe.send_signal(signal.SIGINT)
            r = json.loads(probe.communicate(60)[0])
            failed += r["errors"] + r["misses"]
            pauses.append(r["max_stall_ms"])
        clients.send_signal(signal.SIGINT)
        c = json.loads(clients.communicate(60)[0])
        clients = None
        row = {"connections": n, "pauses_ms": pauses,
               "median_ms": sorted(pauses)[len(pauses) // 2],
               "worst_ms": max(pauses),
               "clients_worst_ms": c["max_stall_ms"],
               "clients_requests": c["requests"],
               "failed": failed + c["errors"] + c["misses"],
               "closed": n - versions(idle)}
    finally:
        if clients is not None:
            clients.kill()
            clients.wait()
        for s in idle:
            s.close()
        node.stop()
        remove_server(None, path)
    return row


def run(args):
    sizes = [int(x) for x in args.connections.split(",")]
    fd_room(max(sizes) + 300)
    rows = []
    print("== %s, %d takeovers at each size, %d clients, probe GETs"
          % ("under systemd (%s)" % args.verb if args.systemd
             else "-o takeover", args.takeovers, args.clients), flush=True)
    with tempfile.TemporaryDirectory(prefix="mcpm-takeover-") as tmp:
        for n in sizes:
            row = one_size(args, n, tmp)
            rows.append(row)
            print("%6d idle connections: pause median %.1f ms, worst %.1f "
                  "ms (%s); clients' longest %.1f ms over %d requests; "
                  "%d failed or missed, %d connections closed"
                  % (n, row["median_ms"], row["worst_ms"],
                     " ".join("%.1f" % p for p in row["pauses_ms"]),
                     row["clients_worst_ms"], row["clients_requests"],
                     row["failed"], row["closed"]), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    bad = [r for r in rows if r["failed"] or r["closed"]]
    return 1 if bad else 0
