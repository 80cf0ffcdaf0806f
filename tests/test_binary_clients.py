"""Real binary-protocol clients against the server: libmemcached through
pylibmc (binary mode) and python-binary-memcached, Debian's packages for
Debian's own Python (so they run under /usr/bin/python3, not the suite's
virtual environment).  Each script asserts what it reads back and prints
"ok" last; anything else fails the test.  And libmemcached's load tool,
memcslap, in binary mode."""

import re
import subprocess
import textwrap

import pytest

# Real clients: their own framing of reads and writes, on items.
pytestmark = [pytest.mark.engine, pytest.mark.storage]

PYTHON = "/usr/bin/python3"

PYLIBMC = r"""
import sys, pylibmc
mc = pylibmc.Client(["127.0.0.1:%d" % int(sys.argv[1])], binary=True,
                    behaviors={"tcp_nodelay": True, "cas": True})
assert mc.get("nokey") is None
assert mc.set("k", "v")
assert mc.get("k") == "v"
assert mc.set("bytes", b"\r\n\0\xff" * 1000)
assert mc.get("bytes") == b"\r\n\0\xff" * 1000
assert mc.set("big", b"x" * 700000)
assert mc.get("big") == b"x" * 700000
assert not mc.add("k", "w")
assert mc.add("new", "n")
assert mc.replace("k", "w")
try:
    mc.replace("missing", "w")
    raise SystemExit("replace of a missing key succeeded")
except pylibmc.NotFound:
    pass
assert mc.append("k", "+") and mc.prepend("k", "-")
assert mc.get("k") == "-w+"
mc.set("n", 10)
assert mc.incr("n", 5) == 15 and mc.decr("n", 20) == 0
value, cas = mc.gets("k")
assert value == "-w+" and cas
assert mc.cas("k", "swapped", cas)
assert not mc.cas("k", "again", cas)
assert mc.get("k") == "swapped"
keys = {"m%d" % i: "v%d" % i for i in range(40)}
assert mc.set_multi(keys) == []
got = mc.get_multi(list(keys) + ["absent1", "absent2"])
assert got == keys, got
assert mc.delete("k") and not mc.delete("k")
assert mc.touch("new", 100)
stats = mc.get_stats()[0][1]
assert int(stats["curr_items"]) >= 40, stats
assert mc.flush_all()
assert mc.get("new") is None
print("ok")
"""

BMEMCACHED = r"""
import sys, bmemcached
mc = bmemcached.Client(["127.0.0.1:%d" % int(sys.argv[1])])
assert mc.get("nokey") is None
assert mc.set("k", "v") and mc.get("k") == "v"
assert mc.set("i", 42) and mc.get("i") == 42
assert not mc.add("k", "w") and mc.add("fresh", "f")
assert mc.replace("k", "w") and not mc.replace("missing", "w")
mc.set("n", "10")
assert mc.incr("n", 5) == 15 and mc.decr("n", 3) == 12
value, cas = mc.gets("k")
assert value == "w" and cas
assert mc.cas("k", "swapped", cas)
assert not mc.cas("k", "again", cas)
keys = {"m%d" % i: "v%d" % i for i in range(40)}
mc.set_multi(keys)
assert mc.get_multi(list(keys) + ["absent"]) == keys
assert mc.delete("k") and mc.get("k") is None
stats = list(mc.stats().values())[0]
assert "pid" in stats and "curr_items" in stats, stats
assert mc.flush_all()
assert mc.get("fresh") is None
print("ok")
"""


def run_client(script, port):
    proc = subprocess.run([PYTHON, "-c", textwrap.dedent(script), str(port)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), \
        proc.stdout + proc.stderr


@pytest.mark.parametrize("script", [PYLIBMC, BMEMCACHED],
                         ids=["pylibmc-binary", "python-binary-memcached"])
def test_client(mc, script):
    run_client(script, mc.port)
    mc.check_alive()


def test_memcslap_binary(server_factory):
    # set, get and mget runs of 2 threads x 2000: clean exits, nothing
    # printed as an error, and the server counted what memcached counts
    # for the same runs
    s = server_factory()
    for test in ("set", "get", "mget"):
        proc = subprocess.run(
            ["memcslap", "--servers=127.0.0.1:%d" % s.port, "--binary",
             "--concurrency=2", "--execute-number=2000", "--test=" + test,
             "--flush"], capture_output=True, text=True, timeout=120)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out
        assert re.search(r"Time to %s +4000 keys by +2 threads" % test,
                         out), out
        assert "error" not in out.lower() and "fail" not in out.lower(), out
    st = s.stats()
    assert (st["cmd_set"], st["cmd_get"], st["get_hits"], st["get_misses"],
            st["cmd_flush"]) == ("8000", "8000", "8000", "0", "3")
