"""watch: memcached's live log streams.

A connection that sends `watch [streams...]` gets "OK" and then one line
per event of the streams it named, in memcached's format.  The lines are
compared whole, with only the parts that change from run to run (the
timestamp, the global id, file descriptors and the client's port) masked.
Every line format here was checked against memcached on the wire.
"""

import re
import socket

import pytest

import conftest
from conftest import Conn, wait_for

# Watchers are connections the logger writes to; the lines tell of items.
pytestmark = [pytest.mark.engine, pytest.mark.storage]

MASKS = ((re.compile(rb"^ts=\d+\.\d+ gid=(\d+) "), b""),
         (re.compile(rb"cfd=\d+"), b"cfd=F"),
         (re.compile(rb"rport=\d+"), b"rport=P"))


class Watcher(Conn):
    """A watch connection: its lines, masked, with the gids kept aside."""

    def __init__(self, port, streams=b"", timeout=5.0, rcvbuf=None):
        if rcvbuf is None:
            super().__init__(port, timeout)
        else:                   # a small window, set before the handshake
            self.sock = socket.socket()
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            self.sock.settimeout(timeout)
            self.sock.connect(("127.0.0.1", port))
            self.timeout, self.buf, self.sent = timeout, b"", bytearray()
        self.gids = []
        self.call(b"watch" + (b" " + streams if streams else b"") + b"\r\n",
                  b"OK\r\n")

    def line(self, timeout=None):
        raw = self.read_until(b"\n", timeout)
        m = re.search(rb" rport=(\d+) ", raw)
        self.last_rport = int(m.group(1)) if m else None
        m = MASKS[0][0].match(raw)
        if m:
            self.gids.append(int(m.group(1)))
        for pat, rep in MASKS:
            raw = pat.sub(rep, raw)
        return raw.rstrip(b"\n").decode()

    def lines(self, n, timeout=None):
        return [self.line(timeout) for _ in range(n)]

    def lines_of(self, ports, n, timeout=None):
        """The next n connection-event lines of each client port in
        `ports`, by port.  Other lines (the harness's own probes) are
        passed; lines of different workers may come in any order, as in
        memcached, which keeps a buffer per worker thread."""
        out = {port: [] for port in ports}
        while any(len(v) < n for v in out.values()):
            line = self.line(timeout)
            if self.last_rport in out:
                out[self.last_rport].append(line)
        return out

    def nothing_before(self, conn, stream):
        """No line is pending: a request sent on conn that makes a known
        line of `stream` is answered, and that line comes next (the lines
        of one worker come in the order it made them)."""
        request, reply, line = FENCES[stream]
        conn.call(request, reply)
        got = self.line()
        assert got == line, "%r came before the fence's line" % got
        return True


# A request on a key of its own, what it is answered and the line it makes
# on each stream.  The fetchers' key is never stored: a flushed item of
# another fence's would read "status=flushed" until the maintainer has
# reclaimed it.
FENCES = {
    "fetchers": (b"get watch-fence-get\r\n", b"END\r\n",
                 "type=item_get key=watch-fence-get status=not_found "
                 "clsid=0 cfd=F size=0"),
    "mutations": (b"set watch-fence 0 0 1\r\nx\r\n", b"STORED\r\n",
                  "type=item_store key=watch-fence status=stored cmd=set "
                  "ttl=0 clsid=1 cfd=F size=1"),
    "deletions": (b"set watch-fence 0 0 1\r\nx\r\ndelete watch-fence\r\n",
                  b"STORED\r\nDELETED\r\n",
                  "type=deleted key=watch-fence cmd=delete clsid=1 size=1"),
}


@pytest.fixture
def watch(mc):
    opened = []

    def open_(streams=b""):
        w = Watcher(mc.port, streams)
        opened.append(w)
        return w

    yield open_
    for w in opened:
        w.close()


def test_fetchers_by_default(conn, watch):
    w = watch()
    conn.call(b"get wk\r\n", b"END\r\n")
    conn.call(b"set wk 0 0 5\r\nhello\r\n", b"STORED\r\n")
    conn.call(b"get wk wk2\r\n", b"VALUE wk 0 5\r\nhello\r\nEND\r\n")
    assert w.lines(4) == [
        "type=item_get key=wk status=not_found clsid=0 cfd=F size=0",
        "type=item_get key=wk status=not_found clsid=0 cfd=F size=0",
        "type=item_get key=wk status=found clsid=1 cfd=F size=5",
        "type=item_get key=wk2 status=not_found clsid=0 cfd=F size=0",
    ]
    assert w.gids == sorted(w.gids) and len(set(w.gids)) == 4
    assert w.nothing_before(conn, "fetchers")   # no mutations unasked


MIXED = (b"set a 0 100 5\r\nhello\r\nget a b\r\ndelete a\r\nincr a 1\r\n"
         b"md zz\r\nset n 0 0 1\r\n5\r\nincr n 2\r\n"
         b"append n 0 0 1\r\n7\r\nadd n 0 0 1\r\nx\r\n"
         b"cas n 0 0 1 999\r\ny\r\nms m 2 T0\r\nhi\r\nmg m v\r\n"
         b"md m\r\ntouch n 10\r\ngat 0 n\r\nget a%b\r\n")
MIXED_REPLY = (b"STORED\r\nVALUE a 0 5\r\nhello\r\nEND\r\nDELETED\r\n"
               b"NOT_FOUND\r\nNF\r\nSTORED\r\n7\r\nSTORED\r\nNOT_STORED\r\n"
               b"EXISTS\r\nHD\r\nVA 2\r\nhi\r\nHD\r\nTOUCHED\r\n"
               b"VALUE n 0 2\r\n77\r\nEND\r\nEND\r\n")
MIXED_LINES = [
    "type=item_get key=a status=not_found clsid=0 cfd=F size=0",
    "type=item_store key=a status=stored cmd=set ttl=100 clsid=1 cfd=F "
    "size=5",
    "type=item_get key=a status=found clsid=1 cfd=F size=5",
    "type=item_get key=b status=not_found clsid=0 cfd=F size=0",
    "type=item_get key=a status=found clsid=1 cfd=F size=5",
    "type=item_get key=a status=not_found clsid=0 cfd=F size=0",
    "type=item_get key=zz status=not_found clsid=0 cfd=F size=0",
    "type=item_get key=n status=not_found clsid=0 cfd=F size=0",
    "type=item_store key=n status=stored cmd=set ttl=0 clsid=1 cfd=F size=1",
    "type=item_get key=n status=found clsid=1 cfd=F size=1",
    "type=item_get key=n status=found clsid=1 cfd=F size=1",
    # an append is logged as the joined item
    "type=item_store key=n status=stored cmd=append ttl=0 clsid=1 cfd=F "
    "size=2",
    "type=item_get key=n status=found clsid=1 cfd=F size=2",
    "type=item_store key=n status=not_stored cmd=add ttl=0 clsid=1 cfd=F "
    "size=1",
    "type=item_get key=n status=found clsid=1 cfd=F size=2",
    "type=item_store key=n status=exists cmd=cas ttl=0 clsid=1 cfd=F size=1",
    "type=item_get key=m status=not_found clsid=0 cfd=F size=0",
    "type=item_store key=m status=stored cmd=set ttl=0 clsid=1 cfd=F size=2",
    "type=item_get key=m status=found clsid=1 cfd=F size=2",
    "type=item_get key=m status=found clsid=1 cfd=F size=2",
    "type=item_get key=n status=found clsid=1 cfd=F size=2",
    "type=item_get key=n status=found clsid=1 cfd=F size=2",
    # keys are written URI-encoded
    "type=item_get key=a%25b status=not_found clsid=0 cfd=F size=0",
]


def test_mutations_and_fetchers(conn, watch):
    w = watch(b"fetchers mutations")
    conn.call(MIXED, MIXED_REPLY)
    assert w.lines(len(MIXED_LINES)) == MIXED_LINES
    assert w.nothing_before(conn, "fetchers")


def test_streams_filter(conn, watch):
    muts = watch(b"mutations")
    conn.call(MIXED, MIXED_REPLY)
    want = [l for l in MIXED_LINES if "item_store" in l]
    assert muts.lines(len(want)) == want
    assert muts.nothing_before(conn, "mutations")


@pytest.mark.v1645
def test_stream_names_may_be_cut_short(conn, watch):
    muts = watch(b"mut f")
    conn.call(b"set p 0 0 1\r\nx\r\nget p\r\n",
              b"STORED\r\nVALUE p 0 1\r\nx\r\nEND\r\n")
    assert muts.lines(3) == [
        "type=item_get key=p status=not_found clsid=0 cfd=F size=0",
        "type=item_store key=p status=stored cmd=set ttl=0 clsid=1 cfd=F "
        "size=1",
        "type=item_get key=p status=found clsid=1 cfd=F size=1"]


@pytest.mark.parametrize("streams", [b"bogus", b"fetchers bogus",
                                     b"fetchersx", b"fetchers mutations2"])
def test_unknown_stream(mc, streams):
    # ERROR, and the connection stays an ordinary one
    with mc.conn() as c:
        c.call(b"watch " + streams + b"\r\n", b"ERROR\r\n")
        c.sync()


@pytest.mark.parametrize("streams", [b"rawcmds",
                                     b"proxyreqs proxyevents proxyuser"])
def test_streams_without_lines(server_factory, streams):
    # accepted; memcached writes nothing to them for plain commands: the
    # workers, which write a record before they reply, wrote none (a
    # server of its own, with no other watcher)
    s = server_factory()
    with Watcher(s.port, streams), s.conn() as c:
        c.call(MIXED, MIXED_REPLY)
        st = c.stats()
    assert (st["log_worker_written"], st["log_worker_dropped"]) == ("0", "0")


def test_watcher_sees_only_later_events(conn, watch):
    conn.call(b"set early 0 0 1\r\nx\r\n", b"STORED\r\n")
    w = watch(b"mutations")
    conn.call(b"set late 0 0 1\r\nx\r\n", b"STORED\r\n")
    assert w.line() == ("type=item_store key=late status=stored cmd=set "
                        "ttl=0 clsid=1 cfd=F size=1")
    assert w.nothing_before(conn, "mutations")


def test_two_watchers_each_get_their_streams(conn, watch):
    f = watch(b"fetchers")
    m = watch(b"mutations")
    conn.call(b"set k 0 0 1\r\nx\r\nget k\r\n",
              b"STORED\r\nVALUE k 0 1\r\nx\r\nEND\r\n")
    assert m.line() == ("type=item_store key=k status=stored cmd=set ttl=0 "
                        "clsid=1 cfd=F size=1")
    assert f.lines(2) == [
        "type=item_get key=k status=not_found clsid=0 cfd=F size=0",
        "type=item_get key=k status=found clsid=1 cfd=F size=1"]
    assert f.nothing_before(conn, "fetchers")
    assert m.nothing_before(conn, "mutations")


def test_connevents(server_factory):
    s = server_factory()
    with Watcher(s.port, b"connevents") as w:
        with s.conn() as c:
            first = c.sock.getsockname()[1]
            c.sync()
        with s.conn() as c:
            second = c.sock.getsockname()[1]
            c.send(b"quit\r\n")
            assert c.wait_closed()
        pair = ["type=conn_new rip=127.0.0.1 rport=P transport=tcp cfd=F",
                "type=conn_close rip=127.0.0.1 rport=P transport=tcp "
                "reason=normal cfd=F"]
        assert w.lines_of((first, second), 2) == {first: pair, second: pair}


def test_connevents_idle_timeout(server_factory):
    s = server_factory("-o", "idle_timeout=1")
    with Watcher(s.port, b"connevents") as w:
        with s.conn() as c:
            port = c.sock.getsockname()[1]
            assert c.wait_closed(10)
        assert w.lines_of((port,), 2)[port] == [
            "type=conn_new rip=127.0.0.1 rport=P transport=tcp cfd=F",
            "type=conn_close rip=127.0.0.1 rport=P transport=tcp "
            "reason=idle_timeout cfd=F"]


@pytest.mark.v1645
def test_deletions(conn, watch):
    w = watch(b"deletions")
    conn.call(b"set a 0 0 5\r\nhello\r\nset b 0 0 2\r\nhi\r\n"
              b"set c 0 0 1\r\nx\r\ndelete a\r\nmd b\r\nmd c I\r\n"
              b"delete zz\r\n",
              b"STORED\r\nSTORED\r\nSTORED\r\nDELETED\r\nHD\r\nHD\r\n"
              b"NOT_FOUND\r\n")
    # an invalidation (md I) and a miss are not deletions
    assert w.lines(2) == [
        "type=deleted key=a cmd=delete clsid=1 size=5",
        "type=deleted key=b cmd=md clsid=1 size=2"]
    assert w.nothing_before(conn, "deletions")


def test_evictions(server_factory, reference):
    s = server_factory("-m", "2")
    # tier_policy capacity moves the cold tail into the file before it is
    # evicted from there, and a hit mark belongs to the tier that saw it
    fetched = "no" if (not reference and conftest.MEMORY_FILE_DIR and
                       conftest.TIER_POLICY == "capacity") else "yes"
    value = b"v" * 1000
    with Watcher(s.port, b"evictions") as w, s.conn() as c:
        c.call(b"set first 0 0 %d\r\n%s\r\n" % (len(value), value),
               b"STORED\r\n")
        c.call(b"get first\r\n",
               b"VALUE first 0 1000\r\n" + value + b"\r\nEND\r\n")
        for i in range(6000):
            c.send(b"set k%05d 0 0 %d noreply\r\n%s\r\n"
                   % (i, len(value), value))
        c.sync()
        st = c.stats()
        ev, dropped = int(st["evictions"]), int(st["log_worker_dropped"])
        assert ev > 0
        first = w.line()
        m = re.fullmatch(r"type=eviction key=first fetch=%s ttl=-1 la=(\d+) "
                         r"clsid=(\d+) size=1000" % fetched, first)
        assert m, first
        # lossy, but every eviction is a line, a skipped one or a dropped
        # one: read until they add up (a missing line fails the read)
        seen, skipped = 1, 0
        while seen + skipped + dropped < ev:
            line = w.line()
            if line.startswith("skipped="):
                skipped += int(line[8:])
                continue
            assert re.fullmatch(r"type=eviction key=k\d{5} fetch=no ttl=-1 "
                                r"la=\d+ clsid=%s size=1000" % m.group(2),
                                line), line
            seen += 1
        assert seen + skipped + dropped == ev


def test_watch_disabled(server_factory):
    s = server_factory("-W")
    with s.conn() as c:
        c.call(b"watch\r\n", b"CLIENT_ERROR watch commands not allowed\r\n")
        c.sync()


@pytest.mark.parametrize("before,reply", [
    (b"set a 0 0 1\r\nx\r\n", b"STORED\r\n"),
    (b"set a 0 0 1 noreply\r\nx\r\n", b""),
    (b"mg a v q\r\n", b""),
    (b"flush_all\r\n", b"OK\r\n")], ids=["set", "noreply", "mg-q", "flush"])
def test_no_pipelining_before_watch(conn, before, reply):
    # a request answered, even with nothing, and not yet written out
    conn.call(before + b"watch\r\n", reply +
              b"ERROR cannot pipeline other commands before watch\r\n")


@pytest.mark.v1645
def test_pipelined_get_then_watch(conn):
    # memcached 1.6.45 queues a get's reply like any other (1.6.18 wrote
    # it out first)
    conn.call(b"get x\r\nwatch\r\n",
              b"END\r\nERROR cannot pipeline other commands before watch\r\n")


def test_mn_flushes_so_watch_may_follow(mc):
    with mc.conn() as c:
        c.call(b"version\r\nmn\r\nwatch\r\n", b"VERSION ")
        c.readline()
        c.call(b"", b"MN\r\nOK\r\n")


def test_watcher_limit(server_factory):
    # its own server: closed watchers leave their slots only when the
    # logger notices, which would bother the next test
    mc = server_factory()
    ws = [Watcher(mc.port) for _ in range(20)]
    try:
        with mc.conn() as c:
            c.call(b"watch\r\n",
                   b"WATCHER_TOO_MANY log watcher limit reached\r\n")
            c.sync()
            assert c.stats()["log_watchers"] == "20"
        ws.pop().close()

        def room_again():       # the logger notices the close
            with mc.conn() as c:
                got = c.req(b"watch\r\n")
                assert got in (b"OK\r\n", b"WATCHER_TOO_MANY log watcher "
                               b"limit reached\r\n")
                return got == b"OK\r\n"
        wait_for(room_again, what="a watcher's slot to come free")
    finally:
        for w in ws:
            w.close()


GET_MISS = (rb"ts=\d+\.\d+ gid=\d+ type=item_get key=nothing-here-at-all "
            rb"status=not_found clsid=0 cfd=\d+ size=0\n")


def logger_caught_up(c, records):
    """The stats once the workers' `records` have been written to their
    rings or dropped, and the logger has taken every one written (sent to
    the watchers, or skipped where a watcher had no room).  memcached
    counts the written ones only as its logger takes them."""
    def caught_up():
        st = c.stats()
        written = int(st["log_worker_written"])
        return (written + int(st["log_worker_dropped"]) == records
                and int(st["log_watcher_sent"])
                + int(st["log_watcher_skipped"]) == written and st)
    return wait_for(caught_up, what="the logger to take %d records"
                    % records)


def read_counted(w, lines):
    """(lines, in-band skipped count) once `lines` lines have come, with
    the skipped counts told before them.  Reads in bulk: megabytes of
    lines arrive here."""
    seen = skipped = 0
    w.sock.settimeout(20)
    while seen < lines:
        if b"\n" not in w.buf:
            chunk = w.sock.recv(1 << 20)
            assert chunk, "the watcher was closed"
            w.buf += chunk
            continue
        whole, _, w.buf = w.buf.rpartition(b"\n")
        for raw in whole.split(b"\n"):
            if raw.startswith(b"skipped="):
                skipped += int(raw[8:])
            else:
                assert re.fullmatch(GET_MISS, raw + b"\n"), raw
                seen += 1
    assert seen == lines, "more lines than were sent"
    return seen, skipped


def test_slow_watcher_loses_lines_not_workers(server_factory):
    # A watcher that reads nothing fills its buffer: it loses lines and is
    # told how many, and the clients do not wait for it.  The worker rings
    # are made big enough to hold every record, so all the loss is the
    # watcher's and the counts add up exactly.
    s = server_factory("-o", "watcher_logbuf_size=4,worker_logbuf_size=16384")
    w = Watcher(s.port, b"fetchers", rcvbuf=4096)
    with w, s.conn() as c:
        batch = b"get nothing-here-at-all\r\n" * 1000
        for _ in range(100):        # 100,000 gets
            c.send(batch)
            c.read_exact(5 * 1000, timeout=20)
        st = logger_caught_up(c, 100000)
        assert st["log_worker_written"] == "100000"
        assert st["log_worker_dropped"] == "0"
        sent, skipped = (int(st["log_watcher_sent"]),
                         int(st["log_watcher_skipped"]))
        assert skipped > 0 and sent + skipped == 100000
        seen, told = read_counted(w, sent)
        # the rest of the count comes before the next line
        c.call(b"get nothing-here-at-all\r\n", b"END\r\n")
        more_seen, more_told = read_counted(w, 1)
        assert told + more_told == skipped
        assert w.buf == b"" and w.nothing_before(c, "fetchers")


@pytest.mark.v1645         # 1.6.18 reads worker_logbuf_size as slab_sizes
def test_full_worker_ring_drops_and_counts(server_factory):
    # A worker never waits for the logger: with a small ring, records it
    # cannot place are dropped and counted.  Every get is either written
    # or dropped.
    s = server_factory("-o", "worker_logbuf_size=4")
    with Watcher(s.port, b"fetchers") as w, s.conn() as c:
        batch = b"get nothing-here-at-all\r\n" * 1000
        for _ in range(50):
            c.send(batch)
            c.read_exact(5 * 1000, timeout=20)
        st = logger_caught_up(c, 50000)
        written, dropped = (int(st["log_worker_written"]),
                            int(st["log_worker_dropped"]))
        assert written + dropped == 50000 and dropped > 0
        read_counted(w, int(st["log_watcher_sent"]))


def test_stats_conns_lists_watchers(server_factory):
    mc = server_factory()
    w = Watcher(mc.port)
    host, port = w.sock.getsockname()
    with mc.conn() as c:
        block = c.get_block(b"stats conns\r\n")
    rows = re.findall(rb"STAT (\d+):addr tcp:%s:%d\r\n"
                      rb"STAT \1:listen_addr tcp:127\.0\.0\.1:%d\r\n"
                      rb"STAT \1:state (\S+)\r\n"
                      % (host.encode(), port, mc.port), block)
    assert [state for _, state in rows] == [b"conn_watch"], block
    w.close()


def test_log_stats(server_factory):
    mc = server_factory()
    with mc.conn() as c:
        before = c.stats()
        assert before["log_watchers"] == "0"
        with Watcher(mc.port, b"mutations") as w:
            c.call(b"set s1 0 0 1\r\nx\r\n", b"STORED\r\n")
            w.line()
            st = c.stats()
    assert st["log_watchers"] == "1"
    assert int(st["log_worker_written"]) >= int(before["log_worker_written"]) + 1
    assert int(st["log_watcher_sent"]) >= int(before["log_watcher_sent"]) + 1
    assert st["log_worker_dropped"] == before["log_worker_dropped"]
