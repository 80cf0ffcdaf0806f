"""The meta protocol (mg ms md ma mn me), byte for byte.

Every exchange here was checked against Debian's memcached 1.6.18 with
`--reference`; the tests marked v1645 assert behaviour 1.6.18 lacks (the
comment of each says which).  CAS values differ between the two (1.6.45
hands out 2 for the first item, 1.6.18 hands out 1), so most tests read
the CAS back with `mg <key> c` instead of hard-coding it.
"""

import base64
import re

import pytest

# Each command reads or changes items: where they live, and when a change
# is durable, is what it answers from.
pytestmark = [pytest.mark.storage, pytest.mark.durability]

KEY250 = "k" * 250
KEY251 = "k" * 251


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------

def loosen(expect):
    """A regex of the exact reply that lets a TTL (` t<n>`, `exp=<n>`) be
    one second lower and an idle time (`la=0`) one higher, in case the
    server clock ticks between two commands."""
    pat = re.escape(expect)
    pat = re.sub(r"( t|exp=)([1-9]\d*)",
                 lambda m: "%s(?:%s|%d)" % (m.group(1), m.group(2),
                                            int(m.group(2)) - 1), pat)
    return pat.replace("la=0", "la=[01]")


def run(conn, pairs):
    """Send each request and assert the reply, in order: byte for byte
    except for a clock tick (see loosen)."""
    for req, expect in pairs:
        conn.send(req)
        got = b"".join(conn.readline() for _ in range(expect.count("\r\n")))
        assert re.fullmatch(loosen(expect).encode(), got, re.S), got


def line_re(conn, req, pattern):
    """Send `req`, read one line and match it against `pattern`."""
    line = conn.req(req)
    assert re.fullmatch(pattern.encode(), line), line
    return line


def cas_of(conn, key):
    line = line_re(conn, "mg %s c\r\n" % key, r"HD c(\d+)( .*)?\r\n")
    return int(re.match(rb"HD c(\d+)", line).group(1))


def first_line_then_alive(mc, req, expect):
    """For errors whose trailing bytes 1.6.18 and 1.6.45 treat differently:
    assert the first reply line, drop the connection, check the server."""
    with mc.conn() as c:
        c.send(req)
        assert c.readline() == expect
    mc.check_alive()


# --------------------------------------------------------------------------
# mg
# --------------------------------------------------------------------------

MG_HIT = [
    ("v t f", "mg foo v t f\r\n", "VA 3 t-1 f5\r\nbar\r\n"),
    ("plain", "mg foo\r\n", "HD\r\n"),
    ("s", "mg foo s\r\n", "HD s3\r\n"),
    ("k", "mg foo k\r\n", "HD kfoo\r\n"),
    ("v s k f order", "mg foo v s k f\r\n", "VA 3 s3 kfoo f5\r\nbar\r\n"),
    ("f k order", "mg foo f k\r\n", "HD f5 kfoo\r\n"),
    ("O", "mg foo O123 v\r\n", "VA 3 O123\r\nbar\r\n"),
    ("O 31 bytes", "mg foo O" + "a" * 31 + "\r\n", "HD O" + "a" * 31 + "\r\n"),
    ("O empty", "mg foo v O\r\n", "VA 3 O\r\nbar\r\n"),
    ("q hit still sent", "mg foo q v k\r\n", "VA 3 kfoo\r\nbar\r\n"),
    ("t no expiry", "mg foo t\r\n", "HD t-1\r\n"),
    ("T then t", "mg foo T30 t\r\n", "HD t30\r\n"),
    ("t then T", "mg foo t T30\r\n", "HD t-1\r\n"),
    ("R without ttl", "mg foo R30 v\r\n", "VA 3\r\nbar\r\n"),
    ("P L ignored", "mg foo P L v\r\n", "VA 3\r\nbar\r\n"),
    ("D ignored", "mg foo D5 v\r\n", "VA 3\r\nbar\r\n"),
    ("N on hit", "mg foo N30 v\r\n", "VA 3\r\nbar\r\n"),
    ("h first", "mg foo h\r\n", "HD h0\r\n"),
]


@pytest.mark.parametrize("req,expect", [c[1:] for c in MG_HIT],
                         ids=[c[0] for c in MG_HIT])
def test_mg_hit_flags(conn, req, expect):
    conn.call(b"set foo 5 0 3\r\nbar\r\n", b"STORED\r\n")
    conn.call(req, expect)


def test_mg_c(conn):
    conn.call(b"ms foo 3\r\nbar\r\n", b"HD\r\n")
    cas = cas_of(conn, "foo")
    run(conn, [
        ("mg foo v c\r\n", "VA 3 c%d\r\nbar\r\n" % cas),
        ("mg foo C%d v\r\n" % (cas + 100), "VA 3\r\nbar\r\n"),
    ])


@pytest.mark.v1645
def test_mg_conditional_fetch(conn):
    # reference §1.5: an equal C drops the value; 1.6.18 ignores C on mg
    conn.call(b"ms foo 3\r\nbar\r\n", b"HD\r\n")
    cas = cas_of(conn, "foo")
    run(conn, [
        # C equal: the value is dropped, the other flags still answer
        ("mg foo C%d v c\r\n" % cas, "HD c%d\r\n" % cas),
        ("mg foo C%d v T50 t\r\n" % cas, "HD t50\r\n"),
        ("mg foo C%d v\r\n" % (cas + 100), "VA 3\r\nbar\r\n"),
    ])


def test_mg_h_and_u(conn):
    conn.call(b"set foo 0 0 3\r\nbar\r\n", b"STORED\r\n")
    run(conn, [
        # u fetches without marking the item fetched
        ("mg foo u h\r\n", "HD h0\r\n"),
        ("mg foo h\r\n", "HD h0\r\n"),
        ("mg foo h\r\n", "HD h1\r\n"),
    ])
    line_re(conn, "mg foo l h\r\n", r"HD l[01] h1\r\n")
    line_re(conn, "mg foo u h l v\r\n", r"VA 3 h1 l[01]\r\n")
    assert conn.readline() == b"bar\r\n"


def test_mg_miss(conn):
    run(conn, [
        ("mg missing v\r\n", "EN\r\n"),
        ("mg missing\r\n", "EN\r\n"),
        ("mg missing v k Oab\r\n", "EN kmissing Oab\r\n"),
        ("mg missing v s t f c q\r\nmn\r\n", "MN\r\n"),
    ])


def test_mg_vivify(conn):
    line = line_re(conn, "mg viv N30 v c t s f\r\n",
                   r"VA 0 c\d+ t30 s0 f0 W\r\n")
    assert conn.read_exact(2) == b"\r\n"
    cas = int(re.search(rb"c(\d+)", line).group(1))
    line_re(conn, "mg viv N30 v c t\r\n", r"VA 0 c%d t(30|29) Z\r\n" % cas)
    assert conn.read_exact(2) == b"\r\n"
    run(conn, [
        ("mg viv v\r\n", "VA 0 Z\r\n\r\n"),
        # q never hides a hit, vivified or not
        ("mg vq N30 q\r\nmg vq q\r\nmn\r\n", "HD W\r\nHD Z\r\nMN\r\n"),
    ])


def test_mg_recache(conn):
    conn.call(b"ms r 1 T100\r\nx\r\n", b"HD\r\n")
    run(conn, [
        ("mg r R200 v\r\n", "VA 1 W\r\nx\r\n"),
        ("mg r R200 v\r\n", "VA 1 Z\r\nx\r\n"),
        ("mg r R50 v\r\n", "VA 1 Z\r\nx\r\n"),
    ])
    conn.call(b"ms r2 1 T100\r\nx\r\n", b"HD\r\n")
    conn.call(b"mg r2 R50 v\r\n", b"VA 1\r\nx\r\n")


def test_mg_touch(conn):
    run(conn, [
        ("ms tt 1\r\nx\r\n", "HD\r\n"),
        ("mg tt T0 t\r\n", "HD t-1\r\n"),
        ("mg tt T100 t\r\n", "HD t100\r\n"),
        ("ms ttl 1 T100\r\nx\r\n", "HD\r\n"),
        ("mg ttl T-1 v\r\n", "VA 1\r\nx\r\n"),
        ("mg ttl v\r\n", "EN\r\n"),
    ])


def test_mg_base64_key(conn):
    key = base64.b64encode(b"foob").decode()
    run(conn, [
        ("ms %s 2 b\r\nzz\r\n" % key, "HD\r\n"),
        ("mg %s b k v\r\n" % key, "VA 2 k%s b\r\nzz\r\n" % key),
        ("mg foob v\r\n", "VA 2\r\nzz\r\n"),
        ("mg %s b k s O1\r\n" % key, "HD k%s b s2 O1\r\n" % key),
        ("mg bm9wZQ== b v k\r\n", "EN kbm9wZQ== b\r\n"),
        ("mg bm9wZQ== b v\r\n", "EN\r\n"),
    ])


@pytest.mark.v1645
def test_mg_base64_key_of_text_item(conn):
    # 1.6.18 echoes k as stored (kfoo); 1.6.45 re-encodes the key the
    # request gave in base64 and appends ` b`.
    conn.call(b"set foo 0 0 3\r\nbar\r\n", b"STORED\r\n")
    conn.call(b"mg Zm9v b k\r\n", b"HD kZm9v b\r\n")


@pytest.mark.v1645
def test_mg_E_on_vivify(conn):
    # the E flag arrived in 1.6.27
    run(conn, [
        ("mg vv N30 E555 c\r\n", "HD c555 W\r\n"),
        ("mg vv c\r\n", "HD c555 Z\r\n"),
        ("ms foo 1\r\nx\r\n", "HD\r\n"),
        ("mg foo E55 v\r\n", "VA 1\r\nx\r\n"),
        # a non-numeric E is a bad token like C, N and T (1.6.18 does not
        # know the flag at all: "invalid flag")
        ("mg foo Eabc\r\n",
         "CLIENT_ERROR bad token in command line format\r\n"),
        ("mg foo E\r\n", "CLIENT_ERROR bad token in command line format\r\n"),
        ("ms foo 2 Ex\r\nhi\r\n",
         "CLIENT_ERROR bad token in command line format\r\n"),
        ("mg foo v\r\n", "VA 1\r\nx\r\n"),
    ])


@pytest.mark.v1645
def test_first_cas_is_2(server_factory):
    # 1.6.45 starts the CAS counter so that the first item gets 2
    s = server_factory()
    with s.conn() as c:
        c.call(b"ms foo 3 c\r\nbar\r\n", b"HD c2\r\n")
        c.call(b"mg foo v t f c s k O123\r\n",
               b"VA 3 t-1 f0 c2 s3 kfoo O123\r\nbar\r\n")


# --------------------------------------------------------------------------
# ms
# --------------------------------------------------------------------------

def test_ms_basic(conn):
    run(conn, [
        ("ms foo 2 T0 F7\r\nhi\r\n", "HD\r\n"),
        ("mg foo v f t\r\n", "VA 2 f7 t-1\r\nhi\r\n"),
        ("ms foo 2 F4294967295 T100\r\nzz\r\n", "HD\r\n"),
        ("mg foo f t\r\n", "HD f4294967295 t100\r\n"),
        ("ms foo 0\r\n\r\n", "HD\r\n"),
        ("mg foo s v\r\n", "VA 0 s0\r\n\r\n"),
        # flags that ms does not use are accepted and ignored
        ("ms foo 2 v\r\nzz\r\n", "HD\r\n"),
        ("ms foo 2 I\r\nzz\r\n", "HD\r\n"),
        ("ms foo 2 T-1\r\nhi\r\n", "HD\r\n"),
        ("mg foo v\r\n", "EN\r\n"),
    ])


def test_ms_return_flags(conn):
    line = line_re(conn, "ms foo 2 c k O9\r\nhi\r\n", r"HD c\d+ kfoo O9\r\n")
    cas = int(re.search(rb"c(\d+)", line).group(1))
    assert cas == cas_of(conn, "foo")
    line = line_re(conn, "ms foo 2 O1 k c\r\nhi\r\n", r"HD O1 kfoo c\d+\r\n")
    assert int(re.search(rb" c(\d+)", line).group(1)) > cas


@pytest.mark.v1645
def test_ms_s_flag(conn):
    # ms s (final size) arrived in 1.6.20; 1.6.18 drops it from the reply
    line_re(conn, "ms foo 2 c k s O9\r\nhi\r\n", r"HD c\d+ kfoo s2 O9\r\n")
    conn.call(b"ms foo 3 MA s\r\nabc\r\n", b"HD s5\r\n")


def test_ms_modes(conn):
    run(conn, [
        ("ms foo 2 MS\r\nhi\r\n", "HD\r\n"),
        ("ms foo 2 ME\r\nhi\r\n", "NS\r\n"),
        ("ms new 2 ME\r\nhi\r\n", "HD\r\n"),
        ("ms newkey 2 MR\r\nhi\r\n", "NS\r\n"),
        ("ms foo 2 MR\r\nzz\r\n", "HD\r\n"),
        ("ms foo 2 MA\r\nXY\r\nmg foo v\r\n", "HD\r\nVA 4\r\nzzXY\r\n"),
        ("ms foo 2 MP\r\nAB\r\nmg foo v\r\n", "HD\r\nVA 6\r\nABzzXY\r\n"),
        ("ms nokey 2 MA\r\nXY\r\n", "NS\r\n"),
        ("ms nokey 2 MP\r\nXY\r\n", "NS\r\n"),
        ("mg nokey v\r\n", "EN\r\n"),
        # modes are case-sensitive and one character
        ("ms foo 2 MX\r\nhi\r\n",
         "CLIENT_ERROR invalid mode for ms M token\r\n"),
        ("ms foo 2 Ms\r\nzz\r\n",
         "CLIENT_ERROR invalid mode for ms M token\r\n"),
        ("ms foo 2 Ma\r\nzz\r\nmg foo v\r\n",
         "CLIENT_ERROR invalid mode for ms M token\r\nVA 6\r\nABzzXY\r\n"),
        ("ms foo 2 MSS\r\nzz\r\n",
         "CLIENT_ERROR incorrect length for M token\r\n"),
        ("ms foo 2 M\r\nzz\r\n",
         "CLIENT_ERROR incorrect length for M token\r\n"),
    ])


@pytest.mark.v1645
def test_ms_append_vivify(conn):
    # ms N (autovivify for append/prepend) arrived in 1.6.20
    run(conn, [
        ("ms nokey 2 MA N0\r\nXY\r\nmg nokey v\r\n", "HD\r\nVA 2\r\nXY\r\n"),
        ("ms pk 2 MP N100\r\nAB\r\nmg pk v t\r\n",
         "HD\r\nVA 2 t100\r\nAB\r\n"),
        ("ms pk 2 MP N100\r\nCD\r\nmg pk v\r\n", "HD\r\nVA 4\r\nCDAB\r\n"),
        ("ms aa 2 MA N0 q\r\nhi\r\nmn\r\n", "MN\r\n"),
    ])


def test_ms_cas(conn):
    line = line_re(conn, "ms foo 2 c\r\nhi\r\n", r"HD c\d+\r\n")
    cas = int(line[4:-2])
    run(conn, [
        ("ms foo 2 C%d\r\nzz\r\n" % (cas + 1000), "EX\r\n"),
        # a failed compare still answers c, with 0
        ("ms foo 2 C%d c\r\nzz\r\n" % (cas + 1000), "EX c0\r\n"),
        ("ms nokey 2 C%d\r\nzz\r\n" % cas, "NF\r\n"),
        ("ms foo 2 C%d\r\nzz\r\n" % cas, "HD\r\n"),
        ("mg foo v\r\n", "VA 2\r\nzz\r\n"),
        ("ms foo 2 C%d\r\nyy\r\n" % cas, "EX\r\n"),
        ("ms foo 2 C%d MA\r\nyy\r\n" % cas, "EX\r\n"),
    ])
    cas = cas_of(conn, "foo")
    run(conn, [
        ("ms foo 2 C%d MA\r\nyy\r\n" % cas, "HD\r\n"),
        ("mg foo v\r\n", "VA 4\r\nzzyy\r\n"),
    ])


@pytest.mark.v1645
def test_ms_E(conn):
    # explicit new CAS (E) arrived in 1.6.27
    run(conn, [
        ("ms ee 1 E777 c\r\nx\r\n", "HD c777\r\n"),
        ("mg ee c\r\n", "HD c777\r\n"),
        ("ms ee 1 C777 E778 c\r\ny\r\n", "HD c778\r\n"),
    ])


def test_ms_base64_key(conn):
    run(conn, [
        ("ms Zm9vYg== 2 b k\r\nzz\r\n", "HD kZm9vYg== b\r\n"),
        ("get foob\r\n", "VALUE foob 0 2\r\nzz\r\nEND\r\n"),
    ])
    line_re(conn, "me Zm9vYg== b\r\n",
            r"ME Zm9vYg== exp=-1 la=\d+ cas=\d+ fetch=yes cls=1 size=\d+\r\n")


def test_ms_value_block_longer(mc):
    # the first reply line is the same in 1.6.18 and 1.6.45; what follows
    # (the leftover CRLF) differs, see test_ms_bad_chunk_then_blank_line
    first_line_then_alive(mc, b"ms foo 2\r\nhiXX\r\n",
                          b"CLIENT_ERROR bad data chunk\r\n")


@pytest.mark.v1645
def test_ms_bad_chunk_then_blank_line(conn):
    # 1.6.45 answers the leftover empty line with a format error, 1.6.18
    # with ERROR
    conn.call(b"ms foo 2\r\nhiXX\r\n",
              b"CLIENT_ERROR bad data chunk\r\n"
              b"CLIENT_ERROR bad command line format\r\n")
    conn.call(b"mg foo v\r\n", b"EN\r\n")


def test_ms_value_block_shorter(conn, mc):
    # the server waits for the whole announced block: what it read first
    # is answered only once the rest comes
    mc.send_read(conn, b"ms foo 5\r\nhi\r\n")
    conn.call(b"Z\r\n", b"HD\r\n")
    conn.call(b"mg foo v\r\n", b"VA 5\r\nhi\r\nZ\r\n")


def test_ms_bad_length(conn):
    run(conn, [
        ("ms foo S2\r\n", "CLIENT_ERROR bad command line format\r\n"),
        ("ms foo -1\r\n", "CLIENT_ERROR bad command line format\r\n"),
        ("ms foo\r\n", "CLIENT_ERROR bad command line format\r\n"),
    ])


def test_ms_too_large(conn):
    conn.send(b"ms foo 2000000 T0\r\n" + b"x" * 2000000 + b"\r\nmn\r\n")
    assert conn.readline() == b"SERVER_ERROR object too large for cache\r\n"
    assert conn.readline() == b"MN\r\n"


def test_ms_flag_errors(conn):
    run(conn, [
        ("ms foo 2 T\r\nzz\r\n",
         "CLIENT_ERROR bad token in command line format\r\n"),
        ("ms foo 2 Tx\r\nzz\r\n",
         "CLIENT_ERROR bad token in command line format\r\n"),
        ("ms foo 2 Cx\r\nzz\r\n",
         "CLIENT_ERROR bad token in command line format\r\n"),
        ("ms foo 2 Fx\r\nzz\r\n", "CLIENT_ERROR bad command line format\r\n"),
        ("ms foo 2 Z\r\nzz\r\n", "CLIENT_ERROR invalid flag\r\n"),
        ("ms foo 2 T1 T2\r\nzz\r\n", "CLIENT_ERROR duplicate flag\r\n"),
        ("ms foo 1 k k\r\nx\r\n", "CLIENT_ERROR duplicate flag\r\n"),
        ("ms foo 3 O" + "1" * 33 + "\r\nbar\r\n",
         "CLIENT_ERROR opaque token too long\r\n"),
        ("ms @@@ 2 b\r\nzz\r\n", "CLIENT_ERROR error decoding key\r\n"),
        ("mg foo v\r\n", "EN\r\n"),
    ])


def test_ms_key_too_long(mc):
    first_line_then_alive(mc, ("ms %s 2\r\nhi\r\n" % KEY251).encode(),
                          b"CLIENT_ERROR bad command line format\r\n")


@pytest.mark.v1645
def test_ms_key_too_long_swallows(conn):
    # 1.6.45 swallows the announced block (as for set); 1.6.18 reads it
    # as a command
    conn.call("ms %s 2\r\nhi\r\nmn\r\n" % KEY251,
              "CLIENT_ERROR bad command line format\r\nMN\r\n")


def test_ms_key_250(conn):
    run(conn, [
        ("ms %s 2 k\r\nhi\r\n" % KEY250, "HD k%s\r\n" % KEY250),
        ("mg %s k v s\r\n" % KEY250, "VA 2 k%s s2\r\nhi\r\n" % KEY250),
    ])


# --------------------------------------------------------------------------
# md
# --------------------------------------------------------------------------

def test_md(conn):
    run(conn, [
        ("md missing\r\n", "NF\r\n"),
        ("md missing q\r\n", "NF\r\n"),
        ("ms foo 1\r\nx\r\n", "HD\r\n"),
        ("md foo C99999999\r\n", "EX\r\n"),
        ("md foo q k O1\r\nmn\r\n", "MN\r\n"),
        ("mg foo v\r\n", "EN\r\n"),
        ("ms foo 1\r\nx\r\n", "HD\r\n"),
        ("md foo k O77\r\n", "HD kfoo O77\r\n"),
        ("md foo k O77\r\n", "NF kfoo O77\r\n"),
        ("ms cnt 1\r\nx\r\n", "HD\r\n"),
        ("md Y250 b k O5\r\n", "HD kY250 b O5\r\n"),
        ("mg cnt v\r\n", "EN\r\n"),
        # T alone (without I) deletes as usual
        ("ms foo 1\r\nx\r\nmd foo T30\r\nmg foo\r\n", "HD\r\nHD\r\nEN\r\n"),
    ])
    cas = line_re(conn, "ms foo 1 c\r\nx\r\n", r"HD c\d+\r\n")
    run(conn, [
        ("md foo C%d\r\n" % int(cas[4:-2]), "HD\r\n"),
        ("mg foo\r\n", "EN\r\n"),
    ])


def test_md_errors(conn):
    for req in ("md foo Z", "md foo I I", "md foo Cx", "md foo Tx I",
                "md foo k k", "md foo Ex"):
        conn.call(req + "\r\n", "CLIENT_ERROR invalid or duplicate flag\r\n")
    conn.call("md %s\r\n" % KEY251, "CLIENT_ERROR bad command line format\r\n")
    conn.call("md foo O%s\r\n" % ("1" * 33),
              "CLIENT_ERROR opaque token too long\r\n")


def test_md_invalidate(conn):
    conn.call(b"ms k 2 T100\r\nv1\r\n", b"HD\r\n")
    cas = cas_of(conn, "k")
    run(conn, [
        ("md k I T30\r\n", "HD\r\n"),
        # I bumps the CAS and marks the item stale; the first fetch wins
        ("mg k t v\r\n", "VA 2 t30 X W\r\nv1\r\n"),
        ("mg k t v\r\n", "VA 2 t30 Z X\r\nv1\r\n"),
        ("md k I q\r\nmn\r\n", "MN\r\n"),
        ("md nk I\r\n", "NF\r\n"),
        ("md k I C%d\r\n" % cas, "EX\r\n"),
    ])
    assert cas_of(conn, "k") > cas


@pytest.mark.v1645
def test_md_tombstone_and_E(conn):
    # md x and the E flag arrived in 1.6.27
    run(conn, [
        ("ms foo 2\r\nhi\r\n", "HD\r\n"),
        ("md foo x\r\n", "HD\r\n"),
        ("mg foo v s\r\n", "VA 0 s0\r\n\r\n"),
        ("md nokey x\r\n", "NF\r\n"),
        ("ms ee 1\r\nx\r\n", "HD\r\n"),
        ("md ee I E1000\r\n", "HD\r\n"),
        ("mg ee c\r\n", "HD c1000 X W\r\n"),
        ("md ee E5\r\n", "HD\r\n"),
        ("mg ee\r\n", "EN\r\n"),
    ])


@pytest.mark.v1645
def test_md_tombstone_takes_the_request_flags_and_keeps_the_cas(conn):
    # memcached 1.6.45 stores an empty item with md's F and T (0 without
    # them) under the old cas unique (or E)
    conn.call(b"ms t 2 F5 T100\r\nhi\r\n", b"HD\r\n")
    cas = cas_of(conn, "t")
    e = cas + 1000      # above the fixture's flush_all fence (as memcached)
    run(conn, [
        ("md t x\r\n", "HD\r\n"),
        ("mg t s v f t c\r\n", "VA 0 s0 f0 t-1 c%d\r\n\r\n" % cas),
        ("md t x F7 T50 E%d\r\n" % e, "HD\r\n"),
        ("mg t f t c\r\n", "HD f7 t50 c%d\r\n" % e),
    ])


@pytest.mark.v1645
def test_md_tombstone_and_invalidate(conn):
    # md x I removes the value and marks the empty item stale, with a new
    # cas unique: the next fetch wins the right to recache it
    conn.call(b"ms xi 2\r\nhi\r\n", b"HD\r\n")
    cas = cas_of(conn, "xi")
    run(conn, [
        ("md xi x I\r\n", "HD\r\n"),
        ("mg xi t v\r\n", "VA 0 t-1 X W\r\n\r\n"),
        ("mg xi t v\r\n", "VA 0 t-1 Z X\r\n\r\n"),
    ])
    assert cas_of(conn, "xi") > cas


# --------------------------------------------------------------------------
# ma
# --------------------------------------------------------------------------

def test_ma(conn):
    run(conn, [
        ("ma cnt\r\n", "NF\r\n"),
        ("ma cnt q\r\nmn\r\n", "NF\r\nMN\r\n"),
        ("ma cnt N0 J10 v\r\n", "VA 2\r\n10\r\n"),
        ("ma cnt v t\r\n", "VA 2 t-1\r\n11\r\n"),
        ("ma cnt\r\n", "HD\r\n"),
        ("ma cnt MD D100 v\r\n", "VA 1\r\n0\r\n"),
        ("ma cnt MI D5 v\r\n", "VA 1\r\n5\r\n"),
        ("ma cnt M+ D5 v\r\n", "VA 2\r\n10\r\n"),
        ("ma cnt M- D3 v\r\n", "VA 1\r\n7\r\n"),
        ("ma cnt MD v\r\n", "VA 1\r\n6\r\n"),
        ("ma cnt k O1 v\r\n", "VA 1 kcnt O1\r\n7\r\n"),
        ("ma cnt T60 t\r\n", "HD t60\r\n"),
        ("ma cnt q\r\nmn\r\n", "MN\r\n"),
        # a result shorter than the stored number is padded with spaces
        ("mg cnt v\r\n", "VA 2\r\n9 \r\n"),
        ("ma big J18446744073709551615 N0 v\r\n",
         "VA 20\r\n18446744073709551615\r\n"),
        ("ma big v\r\n", "VA 1\r\n0\r\n"),
        ("ms YjY0 1 b\r\n5\r\n", "HD\r\n"),
        ("ma YjY0 b k v\r\n", "VA 1 kYjY0 b\r\n6\r\n"),
        ("mg b64 v\r\n", "VA 1\r\n6\r\n"),
        ("ma Y251 b N0 J7 k v\r\n", "VA 1 kY251 b\r\n7\r\n"),
    ])
    cas = cas_of(conn, "cnt")
    line_re(conn, "ma cnt c v\r\n", r"VA 2 c\d+\r\n")
    assert conn.readline() == b"10\r\n"
    assert cas_of(conn, "cnt") > cas
    conn.call("ma cnt C%d\r\n" % cas, "EX\r\n")
    conn.call("ma cnt C%d v\r\n" % cas_of(conn, "cnt"), "VA 2\r\n11\r\n")


def test_ma_quiet_value(conn):
    # q hides a successful ma even when v asked for the value
    conn.call(b"ma cnt N0 J1\r\n", b"HD\r\n")
    conn.call(b"ma cnt q v\r\nmn\r\nmg cnt v\r\n", b"MN\r\nVA 1\r\n2\r\n")


def test_ma_vivify_ttl(conn):
    # the created counter takes N's TTL; T applies to existing ones
    conn.call(b"ma newc T30 N60 J5 t v\r\n", b"VA 1 t60\r\n5\r\n")


def test_ma_non_numeric(conn):
    run(conn, [
        ("ms foo 3\r\nbar\r\n", "HD\r\n"),
        ("ma foo\r\n",
         "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"),
        ("ma foo q\r\n",
         "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"),
        ("ms long 21\r\n111111111111111111111\r\nma long\r\n",
         "HD\r\n"
         "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"),
    ])


def test_ma_errors(conn):
    for req in ("ma cnt D-1", "ma cnt Dx", "ma cnt Jx N0", "ma cnt Nx",
                "ma cnt Cx", "ma cnt Tx", "ma cnt Z", "ma cnt v v",
                "ma cnt MI MD", "ma cnt Ex", "ma cnt D18446744073709551616"):
        conn.call(req + "\r\n", "CLIENT_ERROR invalid or duplicate flag\r\n")
    for req in ("ma cnt Mx", "ma cnt Md", "ma cnt Mi"):
        conn.call(req + "\r\n", "CLIENT_ERROR invalid mode for ma M token\r\n")
    conn.call("ma %s\r\n" % KEY251, "CLIENT_ERROR bad command line format\r\n")


@pytest.mark.v1645
def test_ma_E(conn):
    # E arrived in 1.6.27; uniques above the fixture's flush_all fence
    conn.call(b"ms fence 1\r\nx\r\n", b"HD\r\n")
    e = cas_of(conn, "fence") + 1000
    run(conn, [
        ("ma na N0 E%d c\r\n" % (e + 444), "HD c%d\r\n" % (e + 444)),
        ("ma na E%d c v\r\n" % (e + 99), "VA 1 c%d\r\n1\r\n" % (e + 99)),
    ])


# --------------------------------------------------------------------------
# mn, me
# --------------------------------------------------------------------------

def test_mn_me(conn):
    run(conn, [
        ("mn\r\n", "MN\r\n"),
        ("mn foo\r\n", "MN\r\n"),
        ("me nokey\r\n", "EN\r\n"),
        ("me\r\n", "CLIENT_ERROR bad command line format\r\n"),
        ("ms foo 3\r\nbar\r\n", "HD\r\n"),
    ])
    cas = cas_of(conn, "foo")
    # 48-byte header + "foo\0" + "bar\r\n" + 8-byte CAS
    me = "ME foo exp=-1 la=0 cas=%d fetch=yes cls=1 size=65\r\n" % cas
    run(conn, [("me foo\r\n", me)])


def test_me_changes_nothing(conn):
    # me only reports: a stale item's win token is still there for the
    # next mg, and a fresh item stays unfetched
    run(conn, [
        ("ms k 2\r\nv1\r\n", "HD\r\n"),
        ("md k I\r\n", "HD\r\n"),
    ])
    line_re(conn, "me k\r\n", r"ME k exp=-1 la=\d+ cas=\d+ fetch=no "
            r"cls=1 size=\d+\r\n")
    run(conn, [
        ("mg k v\r\n", "VA 2 X W\r\nv1\r\n"),
        ("mg k v\r\n", "VA 2 Z X\r\nv1\r\n"),
    ])


def test_me_b_prints_stored_key(conn):
    # me prints the key as stored (re-encoded only for an item stored with
    # a base64 key), not as the request spelled it
    conn.call(b"ms foo 3\r\nbar\r\n", b"HD\r\n")
    line_re(conn, "me Zm9v b\r\n",
            r"ME foo exp=-1 la=[01] cas=\d+ fetch=no cls=1 size=65\r\n")


@pytest.mark.v1645
def test_me_exp_sign(conn):
    # 1.6.18 prints exp negated; 1.6.24 fixed it
    conn.call(b"ms foo 3 T100\r\nbar\r\n", b"HD\r\n")
    line_re(conn, "me foo\r\n",
            r"ME foo exp=(100|99) la=[01] cas=\d+ fetch=no cls=1 size=65\r\n")


# --------------------------------------------------------------------------
# errors common to all meta commands
# --------------------------------------------------------------------------

ERRORS = [
    ("mg unknown", "mg foo Z\r\n", "CLIENT_ERROR invalid flag\r\n"),
    ("mg duplicate", "mg foo v v\r\n", "CLIENT_ERROR duplicate flag\r\n"),
    ("mg duplicate P", "mg foo P1 P2\r\n", "CLIENT_ERROR duplicate flag\r\n"),
    ("mg flag token", "mg foo vk\r\n", "VA 2\r\nhi\r\n"),
    ("mg opaque 32", "mg foo O" + "1" * 32 + "\r\n",
     "CLIENT_ERROR opaque token too long\r\n"),
    ("mg opaque 33", "mg foo O" + "1" * 33 + "\r\n",
     "CLIENT_ERROR opaque token too long\r\n"),
    ("mg T empty", "mg foo T\r\n",
     "CLIENT_ERROR bad token in command line format\r\n"),
    ("mg T alpha", "mg foo Tabc\r\n",
     "CLIENT_ERROR bad token in command line format\r\n"),
    ("mg N empty", "mg foo N\r\n",
     "CLIENT_ERROR bad token in command line format\r\n"),
    ("mg N alpha", "mg foo Nabc\r\n",
     "CLIENT_ERROR bad token in command line format\r\n"),
    ("mg C empty", "mg foo C\r\n",
     "CLIENT_ERROR bad token in command line format\r\n"),
    ("mg C alpha", "mg foo Cabc v\r\n",
     "CLIENT_ERROR bad token in command line format\r\n"),
    ("mg R empty", "mg foo R\r\n",
     "CLIENT_ERROR bad token in command line format\r\n"),
    ("mg too many flags", "mg foo " + " ".join("abcdefghijklmnopqrstuvwxy")
     + "\r\n", "CLIENT_ERROR options flags are too long\r\n"),
    # 1.6.18 already refuses 18 flags (20 tokens); 19 is refused by both
    ("mg 19 flags", "mg foo c f h k l q s t u v O1 T1 N1 R1 P L C1 D1 J1\r\n",
     "CLIENT_ERROR options flags are too long\r\n"),
    ("mg key 251", "mg %s v\r\n" % KEY251,
     "CLIENT_ERROR bad command line format\r\n"),
    ("mg key 250", "mg %s v\r\n" % KEY250, "EN\r\n"),
    ("mg b key 252", "mg %s b v\r\n" % base64.b64encode(b"x" * 188).decode(),
     "CLIENT_ERROR bad command line format\r\n"),
    ("mg b key 248", "mg %s b v\r\n" % base64.b64encode(b"x" * 186).decode(),
     "EN\r\n"),
    ("mg bad base64", "mg @@@ b v\r\n", "CLIENT_ERROR error decoding key\r\n"),
]


@pytest.mark.parametrize("req,expect", [c[1:] for c in ERRORS],
                         ids=[c[0] for c in ERRORS])
def test_errors(mc, conn, req, expect):
    conn.call(b"set foo 0 0 2\r\nhi\r\n", b"STORED\r\n")
    conn.call(req, expect)
    # the connection is kept and the item untouched
    conn.call(b"mg foo v\r\n", b"VA 2\r\nhi\r\n")
    assert mc.alive()


def test_17_flags_accepted(conn):
    conn.call(b"set foo 0 0 2\r\nhi\r\n", b"STORED\r\n")
    line_re(conn, "mg foo c f h k l q s t u v O1 T1 N1 R1 P L C1\r\n",
            r"VA 2 c\d+ f0 h0 kfoo l[01] s2 t-1 O1\r\n")
    assert conn.readline() == b"hi\r\n"


def test_ms_too_many_flags(mc):
    # 1.6.18 does not swallow the data block here, so only the first line
    first_line_then_alive(
        mc, b"ms foo 2 " + b" ".join(b"P%d" % i for i in range(20))
        + b"\r\nhi\r\n",
        b"CLIENT_ERROR options flags too long\r\n")


def test_line_too_long_closes(mc):
    with mc.conn() as c:
        c.send(b"mg " + b"x" * 3000)
        assert c.wait_closed()
        assert c.buf == b""
    mc.check_alive()


@pytest.mark.v1645
def test_mg_no_key(conn):
    # 1.6.18 answers ERROR (unknown command); 1.6.45's parser sees a meta
    # command without its key
    conn.call(b"mg\r\n", b"CLIENT_ERROR bad command line format\r\n")


# --------------------------------------------------------------------------
# quiet pipelines, stale-while-revalidate, mixed pipelines
# --------------------------------------------------------------------------

def test_quiet_pipeline(conn):
    conn.call(b"ms hit 1\r\nh\r\n", b"HD\r\n")
    conn.call(
        b"mg none v q\r\n"              # EN hidden
        b"mg hit v q k\r\n"             # hit shown
        b"mg none2 q k\r\n"             # EN hidden
        b"ms q1 1 q\r\na\r\n"           # HD hidden
        b"ms q1 1 q ME\r\nb\r\n"        # NS shown
        b"ms q1 1 q C1\r\nc\r\n"        # EX shown
        b"ms qn 1 q MR\r\nd\r\n"        # NS shown
        b"ms q1 1 q MZ\r\nd\r\n"        # error shown
        b"mg q1 q Z\r\n"                # error shown
        b"ms qc 1 q C1\r\nd\r\n"        # NF shown
        b"md q1 q C1\r\n"               # EX shown
        b"md q1 q\r\n"                  # HD hidden
        b"md q1 q\r\n"                  # NF shown
        b"ma qa q\r\n"                  # NF shown
        b"ma qa N0\r\n"
        b"ma qa q\r\n"                  # HD hidden
        b"mn\r\n",
        b"VA 1 khit\r\nh\r\n"
        b"NS\r\nEX\r\nNS\r\n"
        b"CLIENT_ERROR invalid mode for ms M token\r\n"
        b"CLIENT_ERROR invalid flag\r\n"
        b"NF\r\n"
        b"EX\r\nNF\r\n"
        b"NF\r\n"
        b"HD\r\n"
        b"MN\r\n")
    conn.call(b"mg qa v\r\n", b"VA 1\r\n1\r\n")


def test_stale_while_revalidate(mc, conn):
    conn.call(b"ms k 2 T100\r\nv1\r\n", b"HD\r\n")
    cas = cas_of(conn, "k")
    with mc.conn() as other:
        conn.call(b"md k I T30\r\n", b"HD\r\n")
        line = line_re(conn, "mg k c\r\n", r"HD c(\d+) X W\r\n")
        # md I bumped the CAS
        assert int(line[4:].split()[0]) > cas
        # the winner is the first fetch; every other client sees Z X
        run(other, [("mg k v t\r\n", "VA 2 t30 Z X\r\nv1\r\n")])
        conn.call(b"mg k v\r\n", b"VA 2 Z X\r\nv1\r\n")
        stale = cas_of(conn, "k")
        # a set with I and an older CAS is stored, but stays stale
        conn.call(b"ms k 2 I C%d T0\r\nv2\r\n" % cas, b"HD\r\n")
        line_re(other, "mg k v t\r\n", r"VA 2 t(30|29) Z X\r\n")
        assert other.readline() == b"v2\r\n"
        # without I an older CAS fails
        conn.call(b"ms k 2 C%d\r\nv3\r\n" % cas, b"EX\r\n")
        # the current CAS stores a fresh item
        newer = cas_of(conn, "k")
        assert newer > stale
        other.call(b"ms k 2 C%d T0\r\nv4\r\n" % newer, b"HD\r\n")
        conn.call(b"mg k v t\r\n", b"VA 2 t-1\r\nv4\r\n")
        other.call(b"mg k v\r\n", b"VA 2\r\nv4\r\n")
        other.sync()


def test_stale_recache_token(conn):
    conn.call(b"ms r 1 T100\r\nx\r\n", b"HD\r\n")
    conn.call(b"mg r R200 v\r\n", b"VA 1 W\r\nx\r\n")
    # md I clears the token-sent state: the next fetch wins again
    conn.call(b"md r I\r\n", b"HD\r\n")
    conn.call(b"mg r R200 v\r\n", b"VA 1 X W\r\nx\r\n")
    conn.call(b"mg r v q\r\nmn\r\n", b"VA 1 Z X\r\nx\r\nMN\r\n")


def test_mixed_pipeline(conn):
    conn.call(
        b"set t 0 0 1\r\n1\r\n"
        b"mg t v\r\n"
        b"ms t 1 MA\r\n2\r\n"
        b"get t\r\n"
        b"ma t v\r\n"
        b"incr t 1\r\n"
        b"mn\r\n"
        b"gets nope\r\n"
        b"mg nope q\r\n"
        b"delete t\r\n"
        b"md t\r\n"
        b"set foo 0 0 1 noreply\r\nx\r\n"
        b"mg foo v q\r\n"
        b"md foo q\r\n"
        b"get foo\r\n"
        b"mn\r\n",
        b"STORED\r\n"
        b"VA 1\r\n1\r\n"
        b"HD\r\n"
        b"VALUE t 0 2\r\n12\r\nEND\r\n"
        b"VA 2\r\n13\r\n"
        b"14\r\n"
        b"MN\r\n"
        b"END\r\n"
        b"DELETED\r\n"
        b"NF\r\n"
        b"VA 1\r\nx\r\n"
        b"END\r\n"
        b"MN\r\n")


# --------------------------------------------------------------------------
# stats
# --------------------------------------------------------------------------

STAT_KEYS = ("cmd_get", "get_hits", "get_misses", "cmd_touch", "touch_hits",
             "touch_misses", "cmd_set", "delete_hits", "delete_misses",
             "incr_hits", "incr_misses", "decr_hits", "decr_misses",
             "cas_badval", "cas_hits", "cas_misses", "cmd_meta")


def stat_delta(conn, send, reply):
    before = conn.stats()
    conn.call(send, reply)
    after = conn.stats()
    return {k: int(after[k]) - int(before[k]) for k in STAT_KEYS}


def test_stats_mg(conn):
    conn.call(b"ms a 1\r\nx\r\n", b"HD\r\n")
    d = stat_delta(conn, b"mg a v\r\nmg a\r\nmg b v\r\nmg a u v\r\n",
                   b"VA 1\r\nx\r\nHD\r\nEN\r\nVA 1\r\nx\r\n")
    assert (d["cmd_get"], d["get_hits"], d["get_misses"]) == (4, 3, 1)
    assert d["cmd_touch"] == 0 and d["cmd_meta"] == 0
    # a hit with T is a touch, not a get
    d = stat_delta(conn, b"mg a T10\r\n", b"HD\r\n")
    assert (d["cmd_get"], d["get_hits"]) == (0, 0)
    assert (d["cmd_touch"], d["touch_hits"]) == (1, 1)
    # a vivified miss counts as a get hit
    d = stat_delta(conn, b"mg vv N30\r\n", b"HD W\r\n")
    assert (d["cmd_get"], d["get_hits"], d["get_misses"]) == (1, 1, 0)


def test_stats_mg_touch_miss(conn):
    # a miss counts as a get miss even with T
    d = stat_delta(conn, b"mg b T10\r\n", b"EN\r\n")
    assert (d["cmd_get"], d["get_misses"]) == (1, 1)
    assert (d["cmd_touch"], d["touch_misses"]) == (0, 0)


def test_stats_ms_md_ma_me(conn):
    d = stat_delta(conn, b"ms a 1\r\nx\r\nms n 1\r\n5\r\nms n 1 C1\r\nx\r\n",
                   b"HD\r\nHD\r\nEX\r\n")
    assert d["cmd_set"] == 3 and d["cas_badval"] == 1
    d = stat_delta(conn, b"md a\r\nmd a\r\n", b"HD\r\nNF\r\n")
    assert (d["delete_hits"], d["delete_misses"]) == (1, 1)
    d = stat_delta(conn, b"ma n\r\nma n MD\r\nma nx\r\nma nx MD\r\n",
                   b"HD\r\nHD\r\nNF\r\nNF\r\n")
    assert (d["incr_hits"], d["incr_misses"]) == (1, 1)
    assert (d["decr_hits"], d["decr_misses"]) == (1, 1)
    # cmd_meta counts me only
    d = stat_delta(conn, b"mg n\r\nmn\r\nme nx\r\n", b"HD\r\nMN\r\nEN\r\n")
    assert d["cmd_meta"] == 1
    line_re(conn, "me n\r\n", r"ME n .*\r\n")
    assert int(conn.stats()["cmd_meta"]) >= 2


def test_stats_md_cas_mismatch(conn):
    # md with a wrong CAS counts as a delete miss
    conn.call(b"ms a 1\r\nx\r\n", b"HD\r\n")
    d = stat_delta(conn, b"md a C%d\r\n" % (cas_of(conn, "a") + 99),
                   b"EX\r\n")
    assert (d["delete_hits"], d["delete_misses"]) == (0, 1)
