"""A pool of memcached-pm nodes, as people run caches: behind twemproxy
(Debian's nutcracker, with contrib/nutcracker.yml) and behind pylibmc's
ketama (with contrib/pool_pylibmc.py).  Through a node's crash, a restart
of every node in turn and an upgrade from the build of the previous
memory-file layout, every key comes back with its value, flags and CAS.
And a node down longer than memory_file_max_downtime serves nothing it
held before (doc/POOL.md)."""

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid

import pytest

from conftest import (REPO, SHM_DIR, SHM_PREFIX, Conn, free_port,
                      new_memory_file, wait_for, wait_wall_clock)

sys.path.insert(0, str(REPO / "bench"))
from nutcracker_conf import nutcracker_conf  # noqa: E402

PYTHON = "/usr/bin/python3"         # Debian's, with pylibmc
NODES = 3
KEYS = 1500
NODE_MB = ("-m", "16")


def prev_binary():
    """The server as built just before the memory file's layout last
    changed: script/test builds it first and names it in MCPM_PREV_BIN;
    otherwise it is built here (once per commit)."""
    path = os.environ.get("MCPM_PREV_BIN")
    if not path:
        r = subprocess.run(["bash", str(REPO / "script" /
                                        "build-layout-prev")],
                           capture_output=True, text=True, timeout=1200)
        assert r.returncode == 0, r.stderr
        path = r.stdout.strip()
    path = str(REPO / path)         # as given, if absolute
    assert os.access(path, os.X_OK), path
    return path


class Pool:
    """NODES servers, each with a memory file of its own, restarted on
    the port the pool knows it by."""

    def __init__(self, factory, e=True, binary=None):
        self.factory = factory
        self.e = e
        tag = uuid.uuid4().hex[:12]
        self.files = [new_memory_file("%s/%spool-%s-%d.pm"
                                      % (SHM_DIR, SHM_PREFIX, tag, i))
                      for i in range(NODES)]
        self.nodes = [self._start(i, None, binary) for i in range(NODES)]

    def flags(self, i):
        f = ("-e", self.files[i]) if self.e else \
            ("-o", "memory_file=" + self.files[i])
        return f + NODE_MB

    def _start(self, i, port, binary):
        kw = {"port": port}
        if binary is not None:
            kw["binary"] = binary
        return self.factory(*self.flags(i), **kw)

    @property
    def ports(self):
        return [n.port for n in self.nodes]

    def restart(self, i, how, binary=None, between=lambda: None):
        """SIGKILL ("kill") or SIGTERM ("term") node i and start it again
        at once on its port and file (under `binary`: an upgrade), after
        calling `between`."""
        n = self.nodes[i]
        if how == "kill":
            n.signal(signal.SIGKILL)
            n.wait()
        else:
            n.assert_clean_stop()
        between()
        self.nodes[i] = self._start(i, n.port, binary)
        return self.nodes[i]


class Proxy:
    """nutcracker over the pool's nodes, with the settings of
    contrib/nutcracker.yml (its listen address and servers replaced)."""

    def __init__(self, ports, tmp_path):
        self.port = free_port()
        path = tmp_path / "nutcracker.yml"
        path.write_text(nutcracker_conf(self.port, ports))
        self.log = tmp_path / "nutcracker.log"
        self.proc = subprocess.Popen(
            ["nutcracker", "-c", str(path), "-o", str(self.log),
             "-a", "127.0.0.1", "-s", str(free_port())],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        wait_for(self._serves, what="nutcracker to serve")

    def _serves(self):
        assert self.proc.poll() is None, self.log.read_text()
        try:
            with Conn(self.port, 2) as c:
                return c.get_block(b"get pool:probe\r\n") == b"END\r\n"
        except OSError:
            return False

    def conn(self):
        return Conn(self.port, 10)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


@pytest.fixture
def proxied(server_factory, tmp_path):
    """(start a Pool behind nutcracker, ...): the proxy goes at the end."""
    proxies = []

    def make(**kw):
        pool = Pool(server_factory, **kw)
        proxies.append(Proxy(pool.ports, tmp_path))
        return pool, proxies[-1]
    yield make
    for p in proxies:
        p.stop()


def key(i):
    return b"pool:%d" % i


def value(i):
    return b"v%d-" % i + b"x" * (i % 300)


def fill(proxy):
    """KEYS keys through the proxy, each with flags of its own."""
    with proxy.conn() as c:
        for lo in range(0, KEYS, 100):
            ids = range(lo, min(lo + 100, KEYS))
            c.send(b"".join(b"set %s %d 0 %d\r\n%s\r\n"
                            % (key(i), i * 7, len(value(i)), value(i))
                            for i in ids))
            for _ in ids:
                assert c.readline() == b"STORED\r\n"


def read_all(proxy):
    """{key: (flags, cas, value)} for every key, by gets through the
    proxy (which splits each multiget among the nodes)."""
    got = {}
    with proxy.conn() as c:
        for lo in range(0, KEYS, 100):
            c.send(b"gets " + b" ".join(key(i) for i in
                                        range(lo, min(lo + 100, KEYS)))
                   + b"\r\n")
            while True:
                line = c.readline()
                if line == b"END\r\n":
                    break
                m = re.fullmatch(rb"VALUE (\S+) (\d+) (\d+) (\d+)\r\n", line)
                assert m, line
                data = c.read_exact(int(m.group(3)) + 2)[:-2]
                got[m.group(1)] = (int(m.group(2)), int(m.group(4)), data)
    return got


def owners(pool):
    """Which node holds each key (asked of every node directly)."""
    own = {}
    for n, node in enumerate(pool.nodes):
        with node.conn() as c:
            for lo in range(0, KEYS, 100):
                block = c.get_block(b"get " + b" ".join(
                    key(i) for i in range(lo, min(lo + 100, KEYS))) +
                    b"\r\n")
                for k in re.findall(rb"^VALUE (\S+) ", block, re.M):
                    own[k] = n
    return own


def wait_served(proxy, probes):
    """Until the proxy serves a key of every node: a node just restarted
    is reconnected to on the first request that needs it."""
    def served(c, k):
        line = c.req(b"get %s\r\n" % k)
        if not line.startswith(b"VALUE "):
            assert line.startswith(b"SERVER_ERROR "), line
            return False
        c.read_until(b"END\r\n")
        return True

    def all_served():
        with proxy.conn() as c:
            return all(served(c, k) for k in probes)
    wait_for(all_served, what="the proxy to serve every node again")


def filled_pool(proxied, **kw):
    pool, proxy = proxied(**kw)
    fill(proxy)
    want = read_all(proxy)
    assert len(want) == KEYS
    assert {f for f, _, _ in want.values()} == {i * 7 for i in range(KEYS)}
    own = owners(pool)
    shares = [sum(1 for n in own.values() if n == i) for i in range(NODES)]
    assert sum(shares) == KEYS and min(shares) > KEYS // 10, shares
    probes = [next(k for k, n in own.items() if n == i)
              for i in range(NODES)]
    return pool, proxy, want, shares, probes


def test_proxy_pool_through_a_crash_and_a_rolling_restart(proxied):
    pool, proxy, want, shares, probes = filled_pool(proxied)
    node = pool.restart(1, "kill")
    assert node.stats()["recovery_items"] == str(shares[1])
    wait_served(proxy, probes)
    assert read_all(proxy) == want
    for i in range(NODES):
        node = pool.restart(i, "term")
        st = node.stats()
        assert (st["recovery_items"], st["recovery_discarded_stale"]) == \
            (str(shares[i]), "0")
        wait_served(proxy, probes)
        assert read_all(proxy) == want


def test_proxy_pool_upgraded_from_the_previous_layout(proxied):
    """Every node starts under the build before the last layout change,
    then is upgraded in turn.  Node 2 also loses its <file>.meta first,
    as files written by builds that kept none have: under -e, an older
    layout's file keeps its items without one."""
    pool, proxy, want, shares, probes = filled_pool(
        proxied, binary=prev_binary())
    for i in range(NODES):
        node = pool.restart(
            i, "term", binary=None, between=lambda: i == 2 and os.unlink(
                pool.files[i] + ".meta"))
        assert node.stats()["recovery_items"] == str(shares[i])
        wait_served(proxy, probes)
        assert read_all(proxy) == want
    assert "[restart] no metadata save file; the memory file's layout is " \
        "older than them: its items are kept\n" in pool.nodes[2].stderr()
    # the converted files are the current layout's, crash-safe as ever
    pool.restart(0, "kill")
    wait_served(proxy, probes)
    assert read_all(proxy) == want


KETAMA = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from pool_pylibmc import pool_client
mc = pool_client(sys.argv[3].split(","))
keys = ["pool:%d" % i for i in range(int(sys.argv[4]))]
if sys.argv[2] == "fill":
    # pylibmc's flags say each value's type: they must come back too
    for i, k in enumerate(keys):
        v = (b"b%d" % i, "s%d\u00e9" % i, i)[i % 3]
        assert mc.set(k, v), k
out = {}
for k in keys:
    v, cas = mc.gets(k)
    out[k] = [type(v).__name__, v if not isinstance(v, bytes)
              else v.decode(), cas]
print(json.dumps(out, sort_keys=True))
"""


def ketama(pool, what):
    r = subprocess.run(
        [PYTHON, "-c", KETAMA, str(REPO / "contrib"), what,
         ",".join("127.0.0.1:%d" % p for p in pool.ports), str(KEYS)],
        capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("upgrade", [False, True])
def test_ketama_pool_through_pylibmc(server_factory, upgrade):
    """Through SIGKILL of a node and a SIGTERM restart of each; or, from
    the build before the last layout change, an upgrade of each node and
    then the SIGKILL."""
    pool = Pool(server_factory, e=False,
                binary=prev_binary() if upgrade else None)
    want = ketama(pool, "fill")
    assert len(want) == KEYS
    assert {t for t, _, _ in want.values()} == {"bytes", "str", "int"}
    shares = [int(n.stats()["curr_items"]) for n in pool.nodes]
    assert sum(shares) == KEYS and min(shares) > KEYS // 10, shares
    if not upgrade:
        pool.restart(0, "kill")
        assert ketama(pool, "read") == want
    for i in range(NODES):
        pool.restart(i, "term")
        assert ketama(pool, "read") == want
    if upgrade:
        pool.restart(0, "kill")
        assert ketama(pool, "read") == want


def call(server, req, expect):
    with server.conn() as c:
        c.call(req, expect)


PHP = r"""<?php
require $argv[1] . '/pool_php_memcached.php';
$servers = [];
foreach (explode(',', $argv[3]) as $s) {
    [$host, $port] = explode(':', $s);
    $servers[] = [$host, (int)$port];
}
$mc = pool_client($servers);
$n = (int)$argv[4];
if ($argv[2] === 'fill') {
    for ($i = 0; $i < $n; $i++) {
        if (!$mc->set("pool:$i", "php$i")) {
            fwrite(STDERR, "set pool:$i: " . $mc->getResultMessage() . "\n");
            exit(1);
        }
    }
}
$out = [];
for ($i = 0; $i < $n; $i++) {
    $r = $mc->get("pool:$i", null, Memcached::GET_EXTENDED);
    $out["pool:$i"] = $r === false ? null : [$r['value'], $r['cas']];
}
echo json_encode($out);
"""


def php(pool, what):
    r = subprocess.run(
        ["php", "-r", "?>" + PHP, "--", str(REPO / "contrib"), what,
         ",".join("127.0.0.1:%d" % p for p in pool.ports), str(KEYS)],
        capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


def test_php_memcached_shares_pylibmcs_ring(server_factory):
    """contrib's php-memcached settings put every key on the node
    contrib's pylibmc settings look for it, and keep it there through a
    crash."""
    pool = Pool(server_factory, e=False)
    want = php(pool, "fill")
    assert len(want) == KEYS and None not in want.values()
    shares = [int(n.stats()["curr_items"]) for n in pool.nodes]
    assert sum(shares) == KEYS and min(shares) > KEYS // 10, shares
    assert {k: [v, cas] for k, (_, v, cas) in ketama(pool, "read").items()} \
        == want
    pool.restart(1, "kill")
    assert php(pool, "read") == want


def test_node_down_longer_than_the_bound_starts_empty(server_factory,
                                                      memfile):
    bound = 3
    flags = ("-o", "memory_file=%s,memory_file_max_downtime=%d"
             % (memfile, bound), "-m", "8")

    def start():
        return server_factory(*flags)

    def down(st):
        return int(st["recovery_downtime"]), st["recovery_discarded_stale"]

    s = start()
    call(s, b"set k 0 0 1\r\nx\r\n", b"STORED\r\n")
    s.assert_clean_stop()
    s = start()                                 # back at once: warm
    st = s.stats()
    assert down(st)[0] <= bound and down(st)[1] == "0"
    call(s, b"get k\r\n", b"VALUE k 0 1\r\nx\r\nEND\r\n")
    for stop in ("kill", "term"):
        if stop == "kill":
            s.signal(signal.SIGKILL)
            s.wait()
        else:
            s.assert_clean_stop()
        wait_wall_clock(time.time() + bound + 2)
        s = start()
        st = s.stats()
        assert down(st)[0] >= bound + 1 and down(st)[1] == "1", stop
        call(s, b"get k\r\n", b"END\r\n")
        assert re.search(r"memory file \S+: last written \d+ s ago, more "
                         r"than memory_file_max_downtime=3: its items are "
                         r"discarded\n", s.stderr()), s.stderr()
        call(s, b"set k 0 0 1\r\nx\r\n", b"STORED\r\n")
    # without the bound, a long downtime is measured and the items kept
    s.assert_clean_stop()
    wait_wall_clock(time.time() + bound + 2)
    s = server_factory("-o", "memory_file=" + memfile, "-m", "8")
    st = s.stats()
    assert down(st)[0] >= bound + 1 and down(st)[1] == "0"
    call(s, b"get k\r\n", b"VALUE k 0 1\r\nx\r\nEND\r\n")
