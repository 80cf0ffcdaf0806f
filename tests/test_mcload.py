"""The load generator's own check: what mcload counts is what the server saw.

Each test starts a fresh server (MCPM_BIN, default the build tree's
memcached-pm/memcached-pm) on a random loopback port, runs bench/mcload (or
MCLOAD_BIN) against it, and compares mcload's hits, misses and sets with the
deltas of the server's get_hits, get_misses and cmd_set.  Nothing here but
the wait is shared with conftest.py, on purpose: the generator is checked
on its own.
"""

import json
import os
import socket
import subprocess
import time

import pytest

from conftest import free_port, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MCPM_BIN = os.environ.get("MCPM_BIN",
                          os.path.join(ROOT, "memcached-pm", "memcached-pm"))
MCLOAD_BIN = os.environ.get("MCLOAD_BIN", os.path.join(ROOT, "bench", "mcload"))



@pytest.fixture(autouse=True)
def binaries_built():
    """Missing binaries fail the test: a skipped check would hide them."""
    assert os.access(MCPM_BIN, os.X_OK), f"server not built: {MCPM_BIN}"
    assert os.access(MCLOAD_BIN, os.X_OK), f"mcload not built: {MCLOAD_BIN}"


def stats(port):
    """Returns the general `stats` as a dict of strings."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"stats\r\n")
        data = b""
        while not data.endswith(b"END\r\n"):
            chunk = s.recv(65536)
            assert chunk, "server closed the connection during stats"
            data += chunk
    out = {}
    for line in data.decode().splitlines():
        parts = line.split(" ")
        if len(parts) == 3 and parts[0] == "STAT":
            out[parts[1]] = parts[2]
    return out


def counters(port):
    st = stats(port)
    return {k: int(st[k]) for k in ("get_hits", "get_misses", "cmd_set")}


def run_server(port, *extra):
    """Start memcached-pm on port; yields the port, kills it after."""
    argv = [MCPM_BIN, "-p", str(port), "-l", "127.0.0.1", "-t", "2",
            "-m", "64"] + list(extra)
    if os.geteuid() == 0:
        argv += ["-u", "root"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)

    def answers():
        assert proc.poll() is None, "server exited: %s" % " ".join(argv)
        try:
            return stats(port)
        except OSError:
            return None
    try:
        wait_for(answers, what="the server to answer stats")
    except AssertionError:
        proc.kill()
        raise
    yield port
    proc.kill()
    proc.wait(timeout=10)


@pytest.fixture
def server():
    yield from run_server(free_port(), "-U", "0")


@pytest.fixture
def udp_server():
    port = free_port()
    yield from run_server(port, "-U", str(port))


def mcload(port, *args):
    argv = [MCLOAD_BIN, "--server", "127.0.0.1:%d" % port, "--json"]
    argv += [str(a) for a in args]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr + res.stdout
    return json.loads(res.stdout)


def check_deltas(before, after, out, extra_sets=0):
    assert out["errors"] == 0
    assert after["get_hits"] - before["get_hits"] == out["hits"]
    assert after["get_misses"] - before["get_misses"] == out["misses"]
    sets = out["sets"] + out["preload_sets"] + extra_sets
    assert after["cmd_set"] - before["cmd_set"] == sets


@pytest.mark.parametrize("proto", ["text", "meta", "binary"])
def test_counts_match_server_stats(server, proto):
    before = counters(server)
    # Half the key space preloaded by a first run, so both hits and misses
    # occur; the request bound makes the run exact, not timed.
    first = mcload(server, "--proto", proto, "--keys", 1000, "--dist", "seq",
                   "--get-ratio", 0, "--requests", 500, "-c", 4)
    assert first["sets"] == 500
    out = mcload(server, "--proto", proto, "--keys", 1000, "-c", 8, "-d", 4,
                 "--multiget", 3, "--requests", 4000, "--get-ratio", 0.8)
    after = counters(server)
    assert out["requests"] == 4000
    assert out["hits"] > 0 and out["misses"] > 0 and out["sets"] > 0
    assert out["gets"] == out["hits"] + out["misses"]
    assert out["gets"] == 3 * out["get_requests"]
    check_deltas(before, after, out, extra_sets=first["sets"])


@pytest.mark.parametrize("proto", ["text", "binary"])
def test_single_gets_count(server, proto):
    # one key per get: binary sends GETK, whose miss is answered
    before = counters(server)
    mcload(server, "--proto", proto, "--keys", 200, "--dist", "seq",
           "--get-ratio", 0, "--requests", 100, "-c", 2)
    out = mcload(server, "--proto", proto, "--keys", 200, "-c", 4, "-d", 2,
                 "--requests", 2000, "--get-ratio", 1)
    after = counters(server)
    assert out["hits"] > 0 and out["misses"] > 0
    assert out["gets"] == out["get_requests"] == 2000
    check_deltas(before, after, out, extra_sets=100)


@pytest.mark.parametrize("proto", ["text", "binary"])
def test_udp_counts(udp_server, proto):
    """mcload --udp: the same counts, over the server's UDP port."""
    before = counters(udp_server)
    mcload(udp_server, "--keys", 300, "--dist", "seq", "--get-ratio", 0,
           "--requests", 150, "-c", 2)
    out = mcload(udp_server, "--udp", "--proto", proto, "--keys", 300,
                 "-c", 4, "--multiget", 2, "--requests", 2000,
                 "--get-ratio", 0.9)
    after = counters(udp_server)
    assert out["requests"] == 2000
    assert out["hits"] > 0 and out["misses"] > 0
    check_deltas(before, after, out, extra_sets=150)


def test_preload_then_all_hits(server):
    before = counters(server)
    out = mcload(server, "--preload", "--keys", 2000, "--value-size",
                 "1-3000", "--dist", "zipf", "--requests", 3000, "-t", 2,
                 "-c", 6, "-d", 8)
    after = counters(server)
    assert out["preload_sets"] == 2000
    assert out["misses"] == 0 and out["hits"] > 0
    check_deltas(before, after, out)


def test_wrong_values_are_errors(server):
    mcload(server, "--preload", "--keys", 50, "--requests", 1)
    argv = [MCLOAD_BIN, "--server", "127.0.0.1:%d" % server, "--json",
            "--keys", "50", "--value-size", "33", "--get-ratio", "1",
            "--requests", "200", "-c", "2"]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    out = json.loads(res.stdout)
    assert res.returncode == 2
    assert out["errors"] == 200 and out["hits"] == 200


def test_duration_bounds_the_run(server):
    start = time.time()
    out = mcload(server, "--duration", 1, "--requests", 0, "-c", 4)
    assert time.time() - start < 8
    assert out["requests"] > 0
    assert out["latency_us"]["p50"] <= out["latency_us"]["p99"]
    assert out["latency_us"]["p99"] <= out["latency_us"]["max"]


def test_rate_caps_the_run(server):
    """--rate lets out no more than rate x seconds requests (the requests
    in flight at the end aside), and every one is still answered and
    checked; the server's counters agree."""
    before = counters(server)
    out = mcload(server, "--duration", 1, "--requests", 0, "-c", 4,
                 "--depth", 8, "--rate", 2000, "--proto", "binary")
    after = counters(server)
    assert out["rate"] == 2000
    assert 0 < out["requests"] <= 2000 * out["seconds"] + 4 * 8
    assert out["errors"] == 0
    check_deltas(before, after, out)


def test_refuses_non_loopback():
    res = subprocess.run([MCLOAD_BIN, "--server", "192.0.2.1:11211"],
                         capture_output=True, text=True, timeout=10)
    assert res.returncode == 1
    assert "loopback" in res.stderr
