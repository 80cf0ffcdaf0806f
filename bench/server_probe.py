"""server_probe.py: what the Python benchmarks ask of a running server:
a free loopback port, a request's reply, `stats`, and the process's
anonymous memory (bench/dram.py, bench/scale.py)."""

import socket


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
