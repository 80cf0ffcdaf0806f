"""What -v, -vv and -vvv print, in memcached's words: -v errors, warnings
and the stop; -vv each request and the reply memcached logs for it, new
and closed connections, listeners; -vvv the state machine."""

import os
import re
import signal
import struct

import pytest

from conftest import wait_for

# Connections come and go, and change state, in the engine.
pytestmark = pytest.mark.engine

REQUESTS = (b"set a 0 0 1\r\nx\r\nget a b\r\ngets a\r\ndelete a\r\n"
            b"delete a\r\nincr n 1\r\nset n 0 0 1\r\n1\r\nincr n 5\r\n"
            b"touch a 1\r\nmg a v\r\nms b 1\r\nz\r\nversion\r\nbogus\r\n"
            b"stats detail on\r\nquit\r\n")

# memcached 1.6.18 -vv for REQUESTS, the descriptor written as FD
EXPECTED = """<FD new auto-negotiating client connection
FD: Client using the ascii protocol
<FD set a 0 0 1
>FD STORED
<FD get a b
>FD sending key a
>FD END
<FD gets a
>FD sending key a
>FD END
<FD delete a
>FD DELETED
<FD delete a
>FD NOT_FOUND
<FD incr n 1
>FD NOT_FOUND
<FD set n 0 0 1
>FD STORED
<FD incr n 5
>FD 6
<FD touch a 1
>FD NOT_FOUND
<FD mg a v
<FD ms b 1
<FD version
>FD VERSION x
<FD bogus
>FD ERROR
<FD stats detail on
>FD OK
<FD quit
<FD connection closed.""".split("\n")


def lines(server):
    out = []
    # split at "\n" only: a stray "\r" in a line must not pass
    for line in server.stderr().rstrip("\n").split("\n"):
        line = re.sub(r"^([<>])\d+ ", r"\1FD ", line)
        line = re.sub(r"^\d+: ", "FD: ", line)
        line = re.sub(r"^>FD VERSION .*", ">FD VERSION x", line)
        out.append(line)
    return out


def wait_logged(server, text):
    wait_for(lambda: text in server.stderr(), what="%r on stderr" % text)


def connections_logged_closed(server):
    """Wait until every connection the log shows opened (the readiness
    probe's) is logged closed too, and return how many there were: the
    workers' lines reach stderr each through a ring of its own, so a late
    line of the probe could come after the next connection's first, under
    the same descriptor."""
    def all_closed():
        out = server.stderr()
        opened = len(re.findall(r" new (?:auto-negotiating|ascii|binary) "
                                r"client connection", out))
        return opened >= 1 and opened == out.count(" connection closed.") \
            and opened
    return wait_for(all_closed, what="the probe's close in the log")


def last_conn_lines(server, before):
    """The lines of the connection opened after the `before` the log
    showed, once its close is logged (lines reach stderr through a thread
    of their own), the descriptor written as FD.  Split at "\n" only, so a
    stray "\r" fails."""
    new = " new auto-negotiating client connection"

    def closed_connection():
        raw = server.stderr().rstrip("\n").split("\n")
        starts = [i for i, l in enumerate(raw) if l.endswith(new)]
        if len(starts) <= before:
            return None
        fd = raw[starts[-1]].split()[0][1:]
        mine = [l for l in raw[starts[-1]:]
                if l.startswith(("<%s " % fd, ">%s " % fd, "%s: " % fd))]
        return "<%s connection closed." % fd in mine and (fd, mine)
    fd, mine = wait_for(closed_connection,
                        what="the last connection's close in the log")
    return [re.sub(r"^%s: " % fd, "FD: ", re.sub(r"^([<>])%s " % fd,
                                                  r"\1FD ", l))
            for l in mine]


def test_vv_requests_and_replies(server_factory):
    s = server_factory("-vv")
    before = connections_logged_closed(s)
    with s.conn() as c:
        c.send(REQUESTS)
        assert c.wait_closed()
    got = [re.sub(r"^>FD VERSION .*", ">FD VERSION x", l)
           for l in last_conn_lines(s, before)]
    assert got == EXPECTED


def test_vv_listeners_and_bound_protocols(server_factory):
    s = server_factory("-vv", "-B", "ascii")
    wait_logged(s, "new ascii client connection.")     # the readiness probe
    assert "<FD server listening (ascii)" in lines(s)
    assert "<FD new ascii client connection." in lines(s)


def pkt(op, key=b"", val=b"", extra=b""):
    return struct.pack(">BBHBBHIIQ", 0x80, op, len(key), len(extra), 0, 0,
                       len(key) + len(extra) + len(val), 0, 0) \
        + extra + key + val


def dump(d, head):
    """A header dump as memcached prints it: the title, then the 24 bytes
    four to a line."""
    pad = "   " if d == "<" else "  "
    out = ["%sFD %s" % (d, head[0])]
    for i in range(0, 24, 4):
        out.append("%sFD%s %s" % (d, pad, " ".join(
            "0x%02x" % b for b in head[1][i:i + 4])))
    return out


def test_vv_binary_client(server_factory):
    """memcached's -vv for binary: each header read and written, four
    bytes to a line, and the command lines (reply CAS bytes masked: the
    counter's start and when memcached fills it in differ)."""
    s = server_factory("-vv")
    before = connections_logged_closed(s)
    with s.conn() as c:
        c.send(pkt(0x01, b"k", b"v", struct.pack(">II", 0, 0)))
        c.read_exact(24)
        c.send(pkt(0x00, b"k"))
        c.read_exact(24 + 5)
        c.send(pkt(0x00, b"zz"))
        c.read_exact(24 + 9)
    got = last_conn_lines(s, before)
    for i, l in enumerate(got):              # mask the reply CAS lines
        if l == ">FD Writing bin response:":
            got[i + 5] = got[i + 6] = ">FD   cas"
    set_req = bytes(pkt(0x01, b"k", b"v", struct.pack(">II", 0, 0))[:24])
    want = ["<FD new auto-negotiating client connection",
            "FD: Client using the binary protocol"]
    want += dump("<", ("Read binary protocol data:", set_req))
    want += ["<FD SET k Value len is 1"]
    want += dump(">", ("Writing bin response:", bytes([0x81, 1] + [0] * 22)))
    want += dump("<", ("Read binary protocol data:", pkt(0x00, b"k")[:24]))
    want += ["<FD GET k"]
    want += dump(">", ("Writing bin response:", bytes(
        [0x81, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 5] + [0] * 12)))
    want += dump("<", ("Read binary protocol data:", pkt(0x00, b"zz")[:24]))
    want += ["<FD GET zz", ">FD Writing an error: Not found"]
    want += dump(">", ("Writing bin response:", bytes(
        [0x81, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 9] + [0] * 12)))
    want += ["<FD connection closed."]
    for i, l in enumerate(want):
        if l == ">FD Writing bin response:":
            want[i + 5] = want[i + 6] = ">FD   cas"
    assert got == want


def test_v_is_quiet_about_connections(server_factory):
    s = server_factory("-v")
    with s.conn() as c:
        c.call(b"set a 0 0 1\r\nx\r\n", b"STORED\r\n")
    s.signal(signal.SIGTERM)
    assert s.wait() == 0
    out = lines(s)
    assert not [l for l in out if l.startswith(("<", ">", "FD:"))], out
    assert out[-1] == "Exiting normally"


def test_quiet_by_default(server_factory):
    s = server_factory()
    with s.conn() as c:
        c.call(b"bogus\r\n", b"ERROR\r\n")
    s.signal(signal.SIGTERM)
    assert s.wait() == 0
    assert s.stderr() == ""


STOP_LINES = {
    "stopped assoc", "asking workers to stop",
    "asking background threads to stop", "stopped lru crawler",
    "stopped maintainer", "stopped slab mover", "stopped logger thread",
    "stopped idle timeout thread", "closing connections",
    "reaping worker threads", "all background threads stopped",
}


def test_graceful_stop_lines(server_factory):
    """SIGUSR1 (and shutdown graceful) say so always, and with -v name
    each step (memcached-pm stops connections before the background
    threads, memcached after; the lines are memcached's)."""
    s = server_factory("-v")
    s.signal(signal.SIGUSR1)
    assert s.wait() == 0
    out = lines(s)
    i = out.index("Gracefully stopping")
    assert set(out[i + 1:]) == STOP_LINES
    assert out[-1] == "all background threads stopped"
    q = server_factory()
    q.signal(signal.SIGUSR1)
    assert q.wait() == 0
    assert q.stderr() == "Gracefully stopping\n"


@pytest.mark.mcpm       # memcached's states are named differently
def test_vvv_state_machine(server_factory):
    s = server_factory("-vvv")
    with s.conn() as c:
        c.call(b"set a 0 0 1\r\nx\r\n", b"STORED\r\n")
    wait_logged(s, "going from conn_parse_cmd to conn_nread")
    assert "FD: going from conn_waiting to conn_parse_cmd" in lines(s)


@pytest.mark.mcpm       # memcached's workers write stderr themselves
def test_a_stuck_stderr_blocks_no_worker(binary):
    """-vv with stderr a pipe nobody reads: the pipe fills after a few
    hundred lines, yet every request is answered; the lines that did not
    fit are dropped and counted once stderr drains."""
    import subprocess
    from conftest import Conn, base_args, free_port
    port = free_port()
    proc = subprocess.Popen([binary] + base_args(port) + ["-vv"],
                            stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)

    def connected():
        try:
            return Conn(port, timeout=10)
        except OSError:
            return None
    try:
        with wait_for(connected, what="the server to accept") as c:
            for _ in range(100):        # some 5 MB of lines
                c.send(b"get nothing-here\r\n" * 1000)
                for _ in range(1000):
                    assert c.readline() == b"END\r\n"
        proc.send_signal(signal.SIGTERM)
        err = proc.communicate(timeout=20)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    assert re.search(rb"\(\d+ log lines dropped: stderr too slow\)", err)


@pytest.mark.mcpm       # memcached's -e restart prints no progress
def test_v_shows_recovery_progress(server_factory, memfile):
    """With -v, a start on a memory file reports its scan every
    recovery_progress_ms (a second; 1 ms here, to see several lines on a
    file of 300 pages): pages scanned of the total, items linked so far
    and their rate; then what it recovered."""
    value = b"v" * (100 * 1024)
    s = server_factory("-e", memfile, "-m", "400")
    with s.conn(timeout=60) as c:
        for batch in range(30):
            c.send(b"".join(b"set k%d 0 0 %d noreply\r\n%s\r\n"
                            % (batch * 100 + i, len(value), value)
                            for i in range(100)))
        c.sync()
    s.stop()
    os.unlink(memfile + ".index")   # without the saved index: a scan
    s = server_factory("-v", "-e", memfile, "-m", "400",
                       "-o", "recovery_progress_ms=1")
    out = lines(s)
    progress = [re.fullmatch(r"recovery: scanned (\d+) of (\d+) pages, "
                             r"(\d+) items linked, (\d+) items/s", l)
                for l in out if l.startswith("recovery: scanned ")]
    assert progress and None not in progress, out
    scanned = [int(m.group(1)) for m in progress]
    linked = [int(m.group(3)) for m in progress]
    total = int(progress[0].group(2))
    assert scanned == sorted(scanned) and scanned[-1] <= total, out
    assert linked == sorted(linked) and linked[-1] <= 3000, out
    assert total >= 300
    assert any(re.match(r"memory file .*: recovered 3000 items from \d+ "
                        r"pages in [\d.]+ s", l) for l in out), out
