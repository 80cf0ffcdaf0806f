"""The binary protocol on the wire: every opcode memcached 1.6 serves, its
quiet forms, errors and closes, and -B.

Expected packets are built by hand from the protocol's layout (24-byte
header, extras, key, value; big-endian).  CAS values are not numbered
alike by every server, so a test reads the CAS a store returned and
expects exactly that one back.  `--reference` runs all of this against
Debian's memcached; what 1.6.18 does differently is marked.
"""

import re
import socket
import struct

import pytest

from conftest import ConnClosed, wait_seconds_pass

# Each command reads or changes items: where they live, and when a change
# is durable, is what it answers from.
pytestmark = [pytest.mark.storage, pytest.mark.durability]

HDR = struct.Struct(">BBHBBHIIQ")

GET, SET, ADD, REPLACE, DELETE, INCR, DECR, QUIT, FLUSH = range(9)
GETQ, NOOP, VERSION, GETK, GETKQ, APPEND, PREPEND, STAT = range(9, 17)
SETQ, ADDQ, REPLACEQ, DELETEQ, INCRQ, DECRQ, QUITQ, FLUSHQ = range(17, 25)
APPENDQ, PREPENDQ, VERBOSITY, TOUCH, GAT, GATQ = range(25, 31)
SASL_LIST, SASL_AUTH, SASL_STEP, GATK, GATKQ = range(32, 37)

OK, ENOENT, EEXISTS, E2BIG, EINVAL, NOT_STORED, BADVAL = range(7)
AUTH_ERROR, UNKNOWN, ENOMEM = 0x20, 0x81, 0x82

TEXT = {
    ENOENT: b"Not found",
    EEXISTS: b"Data exists for key.",
    E2BIG: b"Too large.",
    EINVAL: b"Invalid arguments",
    NOT_STORED: b"Not stored.",
    BADVAL: b"Non-numeric server-side value for incr or decr",
    AUTH_ERROR: b"Auth failure.",
    UNKNOWN: b"Unknown command",
    ENOMEM: b"Out of memory",
}


def req(op, key=b"", extras=b"", value=b"", cas=0, opaque=0, magic=0x80,
        bodylen=None, datatype=0, vbucket=0):
    body = extras + key + value
    return HDR.pack(magic, op, len(key), len(extras), datatype, vbucket,
                    len(body) if bodylen is None else bodylen, opaque,
                    cas) + body


def rsp(op, status=OK, key=b"", extras=b"", value=b"", cas=0, opaque=0):
    body = extras + key + value
    return HDR.pack(0x81, op, len(key), len(extras), 0, status, len(body),
                    opaque, cas) + body


def err(op, status, opaque=0):
    return rsp(op, status, value=TEXT[status], opaque=opaque)


def set_req(key, value, flags=0, exptime=0, cas=0, op=SET, opaque=0):
    return req(op, key, struct.pack(">II", flags, exptime), value, cas,
               opaque)


def delta_req(op, key, delta, initial=0, exptime=0, cas=0):
    return req(op, key, struct.pack(">QQI", delta, initial, exptime),
               cas=cas)


class Bin:
    """A binary-protocol connection over the suite's raw Conn."""

    def __init__(self, conn):
        self.c = conn

    def send(self, data):
        self.c.send(data)

    def packet(self, timeout=None):
        """One reply: (fields, extras, key, value, raw bytes)."""
        head = self.c.read_exact(24, timeout)
        f = HDR.unpack(head)
        assert f[0] == 0x81, head
        body = self.c.read_exact(f[6], timeout) if f[6] else b""
        ext, kl = f[3], f[2]
        return f, body[:ext], body[ext:ext + kl], body[ext + kl:], head + body

    def call(self, data, expect):
        """Send, read exactly the expected bytes, compare."""
        self.send(data)
        got = self.c.read_exact(len(expect))
        assert got == expect
        return got

    def cas_of(self, data):
        """Send one request answered by success; its CAS."""
        self.send(data)
        f, _, _, _, raw = self.packet()
        assert f[5] == OK, raw
        return f[8]

    def stat(self, group=b""):
        """A STAT reply as (name, value) pairs, up to the empty packet."""
        self.send(req(STAT, group, opaque=77))
        out = []
        while True:
            f, ext, key, val, raw = self.packet()
            assert f[1] == STAT and f[5] == OK and f[7] == 77, raw
            if not key and not val:
                return out
            out.append((key.decode(), val.decode()))

    def sync(self):
        """Nothing stray is pending: a NOOP's reply comes next."""
        self.call(req(NOOP, opaque=0x5151), rsp(NOOP, opaque=0x5151))

    def closed(self, timeout=3.0):
        return self.c.wait_closed(timeout)


@pytest.fixture
def b(mc, request):
    """A binary connection to the module's server, its cache flushed."""
    c = mc.conn()
    conn = Bin(c)
    conn.call(req(FLUSH), rsp(FLUSH))
    yield conn
    try:
        rep = getattr(request.node, "rep_call", None)
        if rep is not None and rep.passed:
            conn.sync()
    finally:
        c.close()


@pytest.fixture
def text_version(mc):
    with mc.conn() as c:
        line = c.req(b"version\r\n")
    return line[len(b"VERSION "):-2]


# ---------------------------------------------------------------------------
# the simple ones
# ---------------------------------------------------------------------------

def test_noop_echoes_opaque(b):
    for opaque in (0, 1, 0xdeadbeef, 0xffffffff):
        b.call(req(NOOP, opaque=opaque), rsp(NOOP, opaque=opaque))


def test_version_is_the_text_version(b, text_version):
    b.call(req(VERSION, opaque=3), rsp(VERSION, value=text_version,
                                       opaque=3))


def test_datatype_and_vbucket_ignored(b):
    b.call(req(NOOP, datatype=1, vbucket=7, opaque=9), rsp(NOOP, opaque=9))


# ---------------------------------------------------------------------------
# retrieval
# ---------------------------------------------------------------------------

def test_get_miss(b):
    b.call(req(GET, b"nokey", opaque=5), err(GET, ENOENT, 5))


def test_getk_miss_echoes_key_without_text(b):
    b.call(req(GETK, b"nokey", opaque=5),
           rsp(GETK, ENOENT, key=b"nokey", opaque=5))


def test_set_get_getk(b):
    cas = b.cas_of(set_req(b"k1", b"hello", flags=0xcafe0001))
    assert cas != 0
    flags = struct.pack(">I", 0xcafe0001)
    b.call(req(GET, b"k1", opaque=1),
           rsp(GET, extras=flags, value=b"hello", cas=cas, opaque=1))
    b.call(req(GETK, b"k1", opaque=2),
           rsp(GETK, extras=flags, key=b"k1", value=b"hello", cas=cas,
               opaque=2))


def test_empty_value(b):
    cas = b.cas_of(set_req(b"e", b""))
    b.call(req(GET, b"e"), rsp(GET, extras=b"\0\0\0\0", cas=cas))


def test_quiet_gets_are_a_multiget(b):
    cas = {}
    for k in (b"a", b"c"):
        cas[k] = b.cas_of(set_req(k, b"v" + k))
    run = b"".join(req(GETKQ, k, opaque=i) for i, k in
                   enumerate((b"a", b"b", b"c", b"d")))
    z = b"\0\0\0\0"
    b.call(run + req(GETQ, b"a", opaque=9) + req(NOOP, opaque=10),
           rsp(GETKQ, extras=z, key=b"a", value=b"va", cas=cas[b"a"],
               opaque=0) +
           rsp(GETKQ, extras=z, key=b"c", value=b"vc", cas=cas[b"c"],
               opaque=2) +
           rsp(GETQ, extras=z, value=b"va", cas=cas[b"a"], opaque=9) +
           rsp(NOOP, opaque=10))


def test_sixteen_key_getkq_run(b):
    keys = [b"key:%02d" % i for i in range(16)]
    cas = [b.cas_of(set_req(k, k * 3, flags=i)) for i, k in enumerate(keys)
           if i % 3]
    want, j = b"", 0
    for i, k in enumerate(keys):
        if i % 3:
            want += rsp(GETKQ, extras=struct.pack(">I", i), key=k,
                        value=k * 3, cas=cas[j], opaque=i)
            j += 1
    b.call(b"".join(req(GETKQ, k, opaque=i) for i, k in enumerate(keys)) +
           req(NOOP, opaque=99), want + rsp(NOOP, opaque=99))


@pytest.mark.mcpm
@pytest.mark.engine             # a yield comes back through the engine
def test_quiet_run_costs_like_a_multiget(server_factory):
    """-R counts a binary quiet get as 1/64 of a request: a run of GETKQ
    is the binary multiget, and costs about what a text multiget does,
    yet a stream of nothing but quiet gets still yields."""
    s = server_factory("-t", "1", "-R", "2")
    with s.conn() as c:
        b = Bin(c)
        b.cas_of(set_req(b"q", b"v"))

        def yields():
            return int(dict(b.stat())["conn_yields"])

        y0 = yields()
        b.send(b"".join(req(GETKQ, b"nokey%d" % i) for i in range(640)) +
               req(NOOP, opaque=1))
        assert b.packet()[4] == rsp(NOOP, opaque=1)
        y1 = yields()
        b.send(b"".join(req(GETK, b"nokey%d" % i) for i in range(40)) +
               req(NOOP, opaque=2))
        for _ in range(40):
            assert b.packet()[0][5] == ENOENT
        assert b.packet()[4] == rsp(NOOP, opaque=2)
        y2 = yields()
    assert 1 <= y1 - y0 <= 10      # 640 units, 128 an event
    assert y2 - y1 >= 15           # 2 requests an event


def test_large_value_round_trip(b):
    # over a slab page: a chunked item, sent by reference
    value = bytes(range(256)) * 3000
    cas = b.cas_of(set_req(b"big", value, flags=3))
    b.call(req(GET, b"big"), rsp(GET, extras=struct.pack(">I", 3),
                                 value=value, cas=cas))
    cas = b.cas_of(req(APPEND, b"big", value=b"tail"))
    b.call(req(GETK, b"big"), rsp(GETK, extras=struct.pack(">I", 3),
                                  key=b"big", value=value + b"tail",
                                  cas=cas))


def test_value_split_across_writes(b, mc):
    packet = set_req(b"slow", b"0123456789" * 100)
    for i in range(0, len(packet), 97):
        mc.send_read(b.c, packet[i:i + 97])     # one read each
    f, _, _, _, raw = b.packet()
    assert f[1] == SET and f[5] == OK, raw
    b.call(req(GET, b"slow"), rsp(GET, extras=b"\0\0\0\0",
                                  value=b"0123456789" * 100, cas=f[8]))


def test_binary_value_bytes_kept(b):
    value = b"\r\n\0\x80\xff\r\n"
    cas = b.cas_of(set_req(b"raw", value))
    b.call(req(GET, b"raw"), rsp(GET, extras=b"\0\0\0\0", value=value,
                                 cas=cas))


def test_text_sees_binary_stores(b, mc):
    b.cas_of(set_req(b"shared", b"from-binary", flags=42))
    with mc.conn() as c:
        c.call(b"get shared\r\n",
               b"VALUE shared 42 11\r\nfrom-binary\r\nEND\r\n")
        c.call(b"set shared 7 0 9\r\nfrom-text\r\n", b"STORED\r\n")
    f, ext, _, val, _ = (b.send(req(GET, b"shared")), b.packet())[1]
    assert (f[5], ext, val) == (OK, struct.pack(">I", 7), b"from-text")


# ---------------------------------------------------------------------------
# touch and gat
# ---------------------------------------------------------------------------

def test_touch(b, mc):
    cas = b.cas_of(set_req(b"t", b"hello", flags=5))
    b.call(req(TOUCH, b"t", struct.pack(">I", 100), opaque=4),
           rsp(TOUCH, extras=struct.pack(">I", 5), cas=cas, opaque=4))
    b.call(req(TOUCH, b"nokey", struct.pack(">I", 100)), err(TOUCH, ENOENT))


def test_gat_gatk_and_quiet_misses(b):
    cas = b.cas_of(set_req(b"g", b"hello!", flags=5))
    five = struct.pack(">I", 5)
    ttl = struct.pack(">I", 100)
    b.call(req(GAT, b"g", ttl), rsp(GAT, extras=five, value=b"hello!",
                                    cas=cas))
    b.call(req(GATK, b"g", ttl), rsp(GATK, extras=five, key=b"g",
                                     value=b"hello!", cas=cas))
    b.call(req(GATQ, b"g", ttl), rsp(GATQ, extras=five, value=b"hello!",
                                     cas=cas))
    b.call(req(GAT, b"nokey", ttl), err(GAT, ENOENT))
    b.call(req(GATK, b"nokey", ttl), rsp(GATK, ENOENT, key=b"nokey"))
    b.call(req(GATQ, b"nokey", ttl) + req(GATKQ, b"nokey", ttl) +
           req(NOOP), rsp(NOOP))


def test_gat_sets_expiry(b, mc):
    cas = b.cas_of(set_req(b"short", b"x"))
    b.call(req(GATQ, b"short", struct.pack(">I", 1)) + req(NOOP),
           rsp(GATQ, extras=b"\0\0\0\0", value=b"x", cas=cas) + rsp(NOOP))
    wait_seconds_pass(mc, 1)
    b.call(req(GET, b"short"), err(GET, ENOENT))


# ---------------------------------------------------------------------------
# storage commands
# ---------------------------------------------------------------------------

def test_add(b):
    cas = b.cas_of(set_req(b"a", b"1", op=ADD))
    assert cas
    b.call(set_req(b"a", b"2", op=ADD, opaque=3), err(ADD, EEXISTS, 3))


def test_replace(b):
    b.call(set_req(b"r", b"1", op=REPLACE), err(REPLACE, ENOENT))
    b.cas_of(set_req(b"r", b"1"))
    cas = b.cas_of(set_req(b"r", b"2", op=REPLACE, flags=9))
    b.call(req(GET, b"r"), rsp(GET, extras=struct.pack(">I", 9),
                               value=b"2", cas=cas))


def test_append_prepend(b):
    b.call(req(APPEND, b"ap", value=b"x"), err(APPEND, NOT_STORED))
    b.call(req(PREPEND, b"ap", value=b"x"), err(PREPEND, NOT_STORED))
    b.cas_of(set_req(b"ap", b"mid", flags=77))
    b.cas_of(req(APPEND, b"ap", value=b">>"))
    cas = b.cas_of(req(PREPEND, b"ap", value=b"<<"))
    b.call(req(GET, b"ap"), rsp(GET, extras=struct.pack(">I", 77),
                                value=b"<<mid>>", cas=cas))


def test_cas_rules(b):
    b.call(set_req(b"c", b"v", cas=12345), err(SET, ENOENT))
    cas = b.cas_of(set_req(b"c", b"v"))
    b.call(set_req(b"c", b"w", cas=cas + 1000), err(SET, EEXISTS))
    new = b.cas_of(set_req(b"c", b"w", cas=cas))
    assert new != cas
    # a store with a CAS is a compare-and-swap whatever its opcode
    b.call(set_req(b"c", b"x", cas=cas, op=REPLACE), err(REPLACE, EEXISTS))
    newer = b.cas_of(set_req(b"c", b"y", cas=new, op=ADD))
    b.call(req(GET, b"c"), rsp(GET, extras=b"\0\0\0\0", value=b"y",
                               cas=newer))
    b.call(req(APPEND, b"c", value=b"z", cas=new), err(APPEND, EEXISTS))


def test_quiet_stores_silent_errors_answered(b):
    b.call(set_req(b"q", b"1", op=SETQ) + set_req(b"q", b"2", op=ADDQ,
                                                   opaque=8) +
           set_req(b"nq", b"1", op=REPLACEQ, opaque=9) +
           req(APPENDQ, b"q", value=b"+") + req(PREPENDQ, b"nq",
                                                value=b"-", opaque=10) +
           req(NOOP, opaque=11),
           err(ADDQ, EEXISTS, 8) + err(REPLACEQ, ENOENT, 9) +
           err(PREPENDQ, NOT_STORED, 10) + rsp(NOOP, opaque=11))
    b.send(req(GET, b"q"))
    f, _, _, val, _ = b.packet()
    assert (f[5], val) == (OK, b"1+")


def test_too_large_value_swallowed(b, mc):
    big = 1024 * 1024 + 1
    b.cas_of(set_req(b"old", b"value"))
    b.call(set_req(b"old", b"x" * big, opaque=6) + req(NOOP, opaque=7),
           err(SET, E2BIG, 6) + rsp(NOOP, opaque=7))
    # a failed set leaves no old value behind, as memcached
    b.call(req(GET, b"old"), err(GET, ENOENT))


# ---------------------------------------------------------------------------
# delete, incr, decr
# ---------------------------------------------------------------------------

def test_delete(b):
    b.call(req(DELETE, b"d", opaque=1), err(DELETE, ENOENT, 1))
    cas = b.cas_of(set_req(b"d", b"v"))
    b.call(req(DELETE, b"d", cas=cas + 99), err(DELETE, EEXISTS))
    b.call(req(DELETE, b"d", cas=cas), rsp(DELETE))
    b.cas_of(set_req(b"d", b"v"))
    b.call(req(DELETEQ, b"d") + req(DELETEQ, b"d", opaque=4) + req(NOOP),
           err(DELETEQ, ENOENT, 4) + rsp(NOOP))


def counter(value):
    return struct.pack(">Q", value)


def test_incr_decr(b):
    b.send(delta_req(INCR, b"n", 5, initial=10))
    f, _, _, val, raw = b.packet()
    assert (f[5], val) == (OK, counter(10)), raw
    created = f[8]
    b.send(delta_req(INCR, b"n", 5, initial=10))
    f, _, _, val, raw = b.packet()
    assert (f[5], val) == (OK, counter(15)) and f[8] != created, raw
    b.send(delta_req(DECR, b"n", 100))
    f, _, _, val, _ = b.packet()
    assert val == counter(0)
    # shorter digits are padded in place with spaces, as memcached does
    b.call(req(GET, b"n"), rsp(GET, extras=b"\0\0\0\0", value=b"0 ",
                               cas=f[8]))


def test_incr_no_create_and_wrap(b):
    b.call(delta_req(INCR, b"none", 1, exptime=0xffffffff), err(INCR, ENOENT))
    b.call(delta_req(DECR, b"none", 1, exptime=0xffffffff), err(DECR, ENOENT))
    b.cas_of(set_req(b"w", b"18446744073709551615"))
    b.send(delta_req(INCR, b"w", 2))
    assert b.packet()[3] == counter(1)
    b.cas_of(set_req(b"nn", b"abc"))
    b.call(delta_req(INCR, b"nn", 1), err(INCR, BADVAL))
    cas = b.cas_of(set_req(b"cc", b"5"))
    b.call(delta_req(INCR, b"cc", 1, cas=cas + 5), err(INCR, EEXISTS))
    b.send(delta_req(INCR, b"cc", 1, cas=cas))
    assert b.packet()[3] == counter(6)


def test_incr_created_counter_expires(b, mc):
    b.send(delta_req(INCR, b"ttl", 1, initial=3, exptime=1))
    f, _, _, val, _ = b.packet()
    assert (f[5], val) == (OK, counter(3))
    b.call(req(GET, b"ttl"), rsp(GET, extras=b"\0\0\0\0", value=b"3",
                                 cas=f[8]))
    wait_seconds_pass(mc, 1)
    b.call(req(GET, b"ttl"), err(GET, ENOENT))


def test_quiet_incr_silent(b):
    b.call(delta_req(INCRQ, b"iq", 1, initial=1) +
           delta_req(DECRQ, b"iq", 1) + req(NOOP), rsp(NOOP))


# ---------------------------------------------------------------------------
# flush, quit, unknown and refused
# ---------------------------------------------------------------------------

def test_flush(b):
    b.cas_of(set_req(b"f", b"v"))
    b.call(req(FLUSH, opaque=2), rsp(FLUSH, opaque=2))
    b.call(req(GET, b"f"), err(GET, ENOENT))
    b.cas_of(set_req(b"f", b"v"))
    b.call(req(FLUSHQ) + req(NOOP), rsp(NOOP))
    b.call(req(GET, b"f"), err(GET, ENOENT))


def test_flush_with_delay(b, mc):
    b.cas_of(set_req(b"later", b"v"))
    # in force from the clock's second tick on (delay - 1): still there
    b.call(req(FLUSH, extras=struct.pack(">I", 3)), rsp(FLUSH))
    b.send(req(GET, b"later"))
    f, _, _, val, _ = b.packet()
    assert (f[5], val) == (OK, b"v")
    wait_seconds_pass(mc, 3)
    b.call(req(GET, b"later"), err(GET, ENOENT))


def test_flush_disabled(server_factory):
    s = server_factory("-F")
    with s.conn() as c:
        Bin(c).call(req(FLUSH), err(FLUSH, AUTH_ERROR))


def test_quit_replies_then_closes(mc):
    with mc.conn() as c:
        conn = Bin(c)
        conn.call(req(QUIT, opaque=3) + req(NOOP), rsp(QUIT, opaque=3))
        assert conn.closed()
        assert c.buf == b""


def test_quitq_closes_silently(mc):
    with mc.conn() as c:
        c.send(req(QUITQ) + req(NOOP))
        assert c.wait_closed()
        assert c.buf == b""


@pytest.mark.parametrize("op", [VERBOSITY, 0x50, 0x1f, 0xff])
def test_unknown_opcode_keeps_the_connection(b, op):
    b.call(req(op, opaque=4), err(op, UNKNOWN, 4))


def test_verbosity_is_unknown(mc):
    # memcached 1.6 answers VERBOSITY "Unknown command" even with its
    # level (and then swallows 4 bytes more than the packet, hence the
    # padding: the stream is left alone after this).
    with mc.conn() as c:
        c.send(req(VERBOSITY, extras=struct.pack(">I", 1)) + b"\0" * 4)
        assert c.read_exact(24 + 15) == err(VERBOSITY, UNKNOWN)


@pytest.mark.mcpm
def test_verbosity_swallowed_exactly(b):
    b.call(req(VERBOSITY, extras=struct.pack(">I", 1)) + req(NOOP),
           err(VERBOSITY, UNKNOWN) + rsp(NOOP))


@pytest.mark.mcpm
def test_unknown_opcode_body_swallowed_exactly(b):
    # memcached 1.6 swallows the whole body length again after reading
    # the extras and key, and so eats the start of the next request;
    # memcached-pm drops exactly the packet.
    b.call(req(0x50, b"key", b"ext", b"value", opaque=1) + req(NOOP),
           err(0x50, UNKNOWN, 1) + rsp(NOOP))


def test_sasl_without_s_is_unknown(b):
    b.call(req(SASL_LIST), err(SASL_LIST, UNKNOWN))
    b.call(req(SASL_AUTH, b"PLAIN", value=b"\0user\0pass") + req(NOOP),
           err(SASL_AUTH, UNKNOWN) + rsp(NOOP))
    b.call(req(SASL_STEP, b"PLAIN", value=b"x"), err(SASL_STEP, UNKNOWN))


CLOSING = [
    ("key over 250", req(GET, b"k" * 251)),
    ("get with extras", req(GET, b"k", b"\0\0\0\0")),
    ("get with a value", req(GET, b"k", value=b"zz")),
    ("set without extras", req(SET, b"k", value=b"v")),
    ("set without key", req(SET, b"", b"\0" * 8, b"v")),
    ("get without key", req(GET)),
    ("incr with short extras", req(INCR, b"k", b"\0" * 16)),
    ("append with extras", req(APPEND, b"k", b"\0" * 8, b"x")),
    ("noop with a key", req(NOOP, b"k")),
    ("version with extras", req(VERSION, extras=b"1234")),
    ("flush with a key", req(FLUSH, b"k")),
    ("touch without extras", req(TOUCH, b"k")),
    ("stat with extras", req(STAT, extras=b"1234")),
    ("sasl list with a key", req(SASL_LIST, b"k")),
    ("sasl auth without mechanism", req(SASL_AUTH, value=b"x")),
]


@pytest.mark.parametrize("name,packet", CLOSING, ids=[c[0] for c in CLOSING])
def test_malformed_einval_and_close(mc, name, packet):
    with mc.conn() as c:
        c.send(packet + req(NOOP))
        op = packet[1]
        assert c.read_exact(24 + len(TEXT[EINVAL])) == err(op, EINVAL)
        assert c.wait_closed()
        assert c.buf == b""
    mc.check_alive()


def test_body_shorter_than_key_closes(mc):
    with mc.conn() as c:
        c.send(req(GET, b"abc", bodylen=1))
        assert c.read_exact(24 + 15) == err(GET, UNKNOWN)
        assert c.wait_closed()


@pytest.mark.v1645
def test_two_gigabyte_body_refused(mc):
    # 1.6.45 refuses a body over 1 GB; 1.6.18 starts reading it.
    with mc.conn() as c:
        c.send(HDR.pack(0x80, SET, 1, 8, 0, 0, 0x7fffffff, 1, 0) +
               b"\0" * 8 + b"k")
        assert c.read_exact(24 + 17) == err(SET, EINVAL, 1)
        assert c.wait_closed()
    mc.check_alive()


def test_wrong_magic_closes_without_reply(mc):
    with mc.conn() as c:
        c.send(req(NOOP, opaque=1) + req(NOOP, magic=0x42))
        assert c.read_exact(24) == rsp(NOOP, opaque=1)
        assert c.wait_closed()
        assert c.buf == b""


def test_partial_header_then_close(mc):
    with mc.conn() as c:
        mc.send_read(c, req(GET, b"abc")[:20])
    with mc.conn() as c:
        mc.send_read(c, req(GET, b"abc")[:26])    # header whole, key cut
        with mc.conn() as other:        # the stall holds up nobody else
            Bin(other).call(req(NOOP, opaque=5), rsp(NOOP, opaque=5))
        c.send(req(GET, b"abc")[26:])   # and the rest is served, first
        assert Bin(c).packet()[0][5] == ENOENT
    mc.check_alive()


def test_garbage_packets_never_crash(mc):
    import random
    rnd = random.Random(14)
    for _ in range(200):
        with mc.conn(timeout=1.0) as c:
            body = bytes(rnd.randrange(256) for _ in range(rnd.randrange(64)))
            head = HDR.pack(0x80, rnd.choice([rnd.randrange(256), GET, SET,
                                              INCR, STAT, GATK]),
                            rnd.randrange(300), rnd.randrange(30), 0, 0,
                            rnd.randrange(400), 0, 0)
            try:
                c.send(head + body + req(QUIT))
                c.sock.shutdown(socket.SHUT_WR)
                assert c.wait_closed(2.0)
            except (ConnClosed, OSError):
                pass
    mc.check_alive()


# ---------------------------------------------------------------------------
# STAT
# ---------------------------------------------------------------------------

def test_stat_general(b, mc, text_version):
    got = dict(b.stat())
    assert got["pid"] == str(mc.pid)
    assert got["version"] == text_version.decode()
    for name in ("uptime", "curr_connections", "cmd_get", "get_hits",
                 "bytes", "curr_items", "total_items", "evictions"):
        assert re.fullmatch(r"\d+", got[name]), name


def test_stat_names_and_order_match_text(b, mc):
    names = [k for k, _ in b.stat(b"settings")]
    with mc.conn() as c:
        block = c.get_block(b"stats settings\r\n")
    text = [line.split(b" ")[1].decode() for line in block.split(b"\r\n")
            if line.startswith(b"STAT ")]
    assert names == text


def test_stat_items_slabs(b):
    b.cas_of(set_req(b"s1", b"v" * 10))
    items = dict(b.stat(b"items"))
    assert items["items:1:number"] == "1"
    slabs = dict(b.stat(b"slabs"))
    assert slabs["1:used_chunks"] == "1"
    assert "total_malloced" in slabs


def test_stat_counts_binary_commands(server_factory):
    s = server_factory()
    with s.conn() as c:
        conn = Bin(c)
        conn.cas_of(set_req(b"k", b"v"))
        conn.send(req(GET, b"k") + req(GET, b"miss") + req(NOOP))
        for _ in range(3):
            conn.packet()
        conn.send(req(TOUCH, b"k", b"\0\0\0\1") + req(NOOP))
        conn.packet(), conn.packet()
        got = dict(conn.stat())
    assert (got["cmd_get"], got["get_hits"], got["get_misses"]) == \
        ("2", "1", "1")
    assert (got["cmd_set"], got["cmd_touch"], got["touch_hits"]) == \
        ("1", "1", "1")


def test_stat_reset_and_unknown_groups(b):
    b.call(req(STAT, b"reset", opaque=3), rsp(STAT, opaque=3))
    b.call(req(STAT, b"bogus", opaque=4), err(STAT, ENOENT, 4))
    b.call(req(STAT, b"conns"), err(STAT, ENOENT))
    b.call(req(STAT, b"detail"), err(STAT, ENOENT))
    b.call(req(STAT, b"detail bogus"), err(STAT, ENOENT))


def test_stat_detail(b):
    b.call(req(STAT, b"detail on"), rsp(STAT))
    try:
        b.cas_of(set_req(b"pfx:one", b"v"))
        b.send(req(GET, b"pfx:one") + req(NOOP))
        b.packet(), b.packet()
        b.call(req(STAT, b"detail dump"),
               rsp(STAT, key=b"detailed",
                   value=b"PREFIX pfx get 1 hit 1 set 1 del 0\r\nEND\r\n") +
               rsp(STAT))
    finally:
        b.call(req(STAT, b"detail off"), rsp(STAT))


def test_stat_sizes(b):
    assert b.stat(b"sizes") == [("sizes_status", "disabled")]


# ---------------------------------------------------------------------------
# -B
# ---------------------------------------------------------------------------

def test_b_ascii_reads_binary_as_text(server_factory):
    s = server_factory("-B", "ascii")
    with s.conn() as c:
        # the NOOP's opcode 0x0a ends a line: one bad command
        c.call(req(NOOP), b"ERROR\r\n")


def test_b_binary_refuses_text(server_factory):
    s = server_factory("-B", "binary")
    with s.conn() as c:
        Bin(c).call(req(NOOP, opaque=1), rsp(NOOP, opaque=1))
    with s.conn() as c:
        c.send(b"version\r\n" + b"get foo bar baz\r\n")
        assert c.wait_closed()
        assert c.buf == b""
    with s.conn() as c:
        stats = dict(Bin(c).stat(b"settings"))
    assert stats["binding_protocol"] == "binary"


def test_auto_first_byte_decides(mc):
    with mc.conn() as c:
        c.call(b"version\r\n" + req(NOOP), b"VERSION ")
        c.readline()
        assert c.readline() == b"ERROR\r\n"
    with mc.conn() as c:
        c.send(req(NOOP, opaque=1) + b"version\r\n" + b"x" * 20)
        assert c.read_exact(24) == rsp(NOOP, opaque=1)
        assert c.wait_closed()


def test_text_and_binary_clients_side_by_side(mc):
    with mc.conn() as t, mc.conn() as c:
        conn = Bin(c)
        for i in range(50):
            key = b"mix%d" % i
            t.call(b"set %s 0 0 2\r\nt%d\r\n" % (key, i % 10), b"STORED\r\n")
            conn.send(req(GETK, key))
            f, _, k, v, _ = conn.packet()
            assert (f[5], k, v) == (OK, key, b"t%d" % (i % 10))
