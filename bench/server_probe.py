"""server_probe.py: what the Python benchmarks ask of a server: its
binaries, a free loopback port, a timed start, a request's reply,
`stats`, the end of a recovery, a server on a memory file of its own,
the process's anonymous memory (bench/dram.py, bench/scale.py,
bench/large.py, bench/takeover.py, bench/recovery.py), and the command
line of the two-build benchmarks (bench/load_ab.py, bench/restart_ab.py)."""

import argparse
import os
import socket
import subprocess
import sys
import time
import uuid


def binaries(root):
    """MCPM_BIN and MCLOAD_BIN; by default the README's build in build/,
    made by script/bootstrap when it is missing, as bench/lib.sh does."""
    mcpm = os.environ.get("MCPM_BIN", os.path.join(
        root, "build", "memcached-pm", "memcached-pm"))
    mcload = os.environ.get("MCLOAD_BIN", os.path.join(
        root, "build", "bench", "mcload"))
    if not (os.access(mcpm, os.X_OK) and os.access(mcload, os.X_OK)):
        print("== building (script/bootstrap: build/)", flush=True)
        subprocess.run(["bash", os.path.join(root, "script", "bootstrap")],
                       check=True, stdout=subprocess.DEVNULL)
    for path in (mcpm, mcload):
        if not os.access(path, os.X_OK):
            sys.exit("no binary at %s" % path)
    return mcpm, mcload


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port, req, end, timeout=10):
    """Send req to 127.0.0.1:port, read until the reply ends with end."""
    with socket.create_connection(("127.0.0.1", port), timeout) as s:
        s.sendall(req)
        buf = b""
        while not buf.endswith(end):
            chunk = s.recv(65536)
            if not chunk:
                raise OSError("closed")
            buf += chunk
    return buf


def start_timed(cmd, port, name, deadline_s=600):
    """Start cmd, a server on port: (the process, seconds from exec to
    its first `version` reply).  Exits the benchmark, named name, if the
    server exits or does not answer in deadline_s."""
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    while True:
        try:
            request(port, b"version\r\n", b"\r\n", 1)
            return proc, time.monotonic() - t0
        except OSError:
            if proc.poll() is not None:
                sys.exit("%s: the server exited (%d)" % (name,
                                                         proc.returncode))
            if time.monotonic() - t0 > deadline_s:
                sys.exit("%s: no reply in %d s" % (name, deadline_s))
            time.sleep(0.001)


def remove_server(proc, path):
    """Kill the server if it still runs, and remove its memory file and
    what -e keeps beside it."""
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait()
    for p in (path, path + ".meta", path + ".index", path + ".convert",
              path + ".removed"):
        if os.path.exists(p):
            os.unlink(p)


class FileNode:
    """A server on a memory file of its own in `directory` (-e), on
    127.0.0.1 and a free port: started and stopped again, and timed."""

    def __init__(self, binary, directory, mb, tag, *extra):
        self.tag = tag
        self.port = free_port()
        self.path = os.path.join(directory, "mcpm-%s-%s" %
                                 (tag, uuid.uuid4().hex[:8]))
        self.cmd = [binary, "-m", str(mb), "-e", self.path, "-p",
                    str(self.port), "-U", "0", "-l", "127.0.0.1"]
        if os.geteuid() == 0:
            self.cmd += ["-u", "root"]
        self.cmd += list(extra)
        self.proc = None

    def start(self):
        """Seconds from exec to the first `version` reply."""
        self.proc, took = start_timed(self.cmd, self.port, self.tag)
        return took

    def stop(self, sig):
        self.proc.send_signal(sig)
        self.proc.wait(600)

    def remove(self):
        remove_server(self.proc, self.path)


def wait_recovered(port, deadline_s=600):
    """Seconds until memcached-pm has read its memory file back (after a
    crash it serves while it does: stats recovery_running 0); at once for
    a server that never reads one back."""
    t0 = time.monotonic()
    while stats(port).get("recovery_running", "0") != "0":
        if time.monotonic() - t0 > deadline_s:
            sys.exit("the recovery on port %d did not end" % port)
        time.sleep(0.002)
    return time.monotonic() - t0


def mcload_argv(mcload, port, value_size, *extra):
    """mcload against 127.0.0.1:port, printing JSON."""
    return [mcload, "--server", "127.0.0.1:%d" % port, "--json",
            "--value-size", str(value_size)] + [str(e) for e in extra]


def stats(port):
    buf = request(port, b"stats\r\n", b"END\r\n")
    return dict(line.split(" ", 2)[1:] for line in buf.decode().split("\r\n")
                if line.startswith("STAT "))


def rss_anon(pid):
    """Bytes of anonymous memory the process holds (RssAnon)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    return 0


def ab_args(root, items):
    """The command line of a benchmark of two builds (bench/load_ab.py,
    bench/restart_ab.py): OLD_BIN NEW_BIN [--items N] [--rounds 3]
    [--dir /dev/shm] [--server-args FLAGS], with args.mcload found as
    binaries() finds it."""
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--items", type=int, default=items)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default="/dev/shm")
    ap.add_argument("--server-args", default="")
    args = ap.parse_args()
    _, args.mcload = binaries(root)
    return args
