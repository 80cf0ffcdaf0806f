"""Byte-exact request/reply tests for the classic text commands."""

import re

import pytest

# Each command reads or changes items: where they live, and when a change
# is durable, is what it answers from.
pytestmark = [pytest.mark.storage, pytest.mark.durability]

VALUE_RE = re.compile(rb"^VALUE (\S+) (\d+) (\d+) (\d+)\r\n")


def gets_cas(conn, key):
    block = conn.get_block(b"gets %s\r\n" % key)
    m = VALUE_RE.match(block)
    assert m, block
    return int(m.group(4))


def test_set_get(conn):
    conn.call(b"set foo 5 0 3\r\nbar\r\n", b"STORED\r\n")
    conn.call(b"get foo\r\n", b"VALUE foo 5 3\r\nbar\r\nEND\r\n")


def test_get_miss(conn):
    conn.call(b"get nokey\r\n", b"END\r\n")


def test_bare_newline_accepted(conn):
    conn.call(b"set foo 0 0 1\nx\r\n", b"STORED\r\n")
    conn.call(b"get foo\n", b"VALUE foo 0 1\r\nx\r\nEND\r\n")


def test_empty_value_and_flags_max(conn):
    conn.call(b"set e 4294967295 0 0\r\n\r\n", b"STORED\r\n")
    conn.call(b"get e\r\n", b"VALUE e 4294967295 0\r\n\r\nEND\r\n")


def test_binary_value_round_trip(conn):
    val = bytes(range(256)) * 4
    conn.call(b"set bin 0 0 %d\r\n%s\r\n" % (len(val), val), b"STORED\r\n")
    conn.call(b"get bin\r\n",
              b"VALUE bin 0 %d\r\n%s\r\nEND\r\n" % (len(val), val))


def test_multiget_order_and_misses(conn):
    conn.call(b"set a 1 0 1\r\nA\r\nset c 3 0 2\r\nCC\r\n",
              b"STORED\r\nSTORED\r\n")
    conn.call(b"get a b c a\r\n",
              b"VALUE a 1 1\r\nA\r\nVALUE c 3 2\r\nCC\r\n"
              b"VALUE a 1 1\r\nA\r\nEND\r\n")


def test_gets_returns_cas_and_cas_changes(conn):
    conn.call(b"set a 0 0 1\r\n1\r\n", b"STORED\r\n")
    c1 = gets_cas(conn, b"a")
    conn.call(b"set a 0 0 1\r\n2\r\n", b"STORED\r\n")
    c2 = gets_cas(conn, b"a")
    assert c1 > 0 and c2 > c1
    conn.call(b"gets a nokey\r\n", b"VALUE a 0 1 %d\r\n2\r\nEND\r\n" % c2)


@pytest.mark.v1645
def test_first_cas_is_two(server_factory):
    s = server_factory()
    with s.conn() as c:
        c.call(b"set a 0 0 1\r\n1\r\n", b"STORED\r\n")
        c.call(b"gets a\r\n", b"VALUE a 0 1 2\r\n1\r\nEND\r\n")
        c.call(b"set b 0 0 1\r\n1\r\n", b"STORED\r\n")
        c.call(b"gets b\r\n", b"VALUE b 0 1 3\r\n1\r\nEND\r\n")


def test_gat_gats(conn):
    conn.call(b"set a 5 0 3\r\nbar\r\n", b"STORED\r\n")
    cas = gets_cas(conn, b"a")
    conn.call(b"gat 100 a\r\n", b"VALUE a 5 3\r\nbar\r\nEND\r\n")
    conn.call(b"gats 100 a nokey\r\n",
              b"VALUE a 5 3 %d\r\nbar\r\nEND\r\n" % cas)
    conn.call(b"gat 100 nokey\r\n", b"END\r\n")
    conn.call(b"gat abc a\r\n", b"CLIENT_ERROR invalid exptime argument\r\n")


def test_gat_sets_ttl(conn):
    conn.call(b"set a 0 0 1\r\nx\r\n", b"STORED\r\n")
    conn.call(b"gat -1 a\r\n", b"VALUE a 0 1\r\nx\r\nEND\r\n")
    conn.call(b"get a\r\n", b"END\r\n")


def test_add(conn):
    conn.call(b"add a 0 0 1\r\nx\r\n", b"STORED\r\n")
    conn.call(b"add a 0 0 1\r\ny\r\n", b"NOT_STORED\r\n")
    conn.call(b"get a\r\n", b"VALUE a 0 1\r\nx\r\nEND\r\n")


def test_replace(conn):
    conn.call(b"replace a 0 0 1\r\nx\r\n", b"NOT_STORED\r\n")
    conn.call(b"get a\r\n", b"END\r\n")
    conn.call(b"set a 1 0 1\r\nx\r\n", b"STORED\r\n")
    conn.call(b"replace a 7 0 2\r\nyy\r\n", b"STORED\r\n")
    conn.call(b"get a\r\n", b"VALUE a 7 2\r\nyy\r\nEND\r\n")


def test_append_prepend(conn):
    conn.call(b"append a 0 0 1\r\nx\r\n", b"NOT_STORED\r\n")
    conn.call(b"prepend a 0 0 1\r\nx\r\n", b"NOT_STORED\r\n")
    conn.call(b"set a 7 0 2\r\nyy\r\n", b"STORED\r\n")
    # flags and exptime of append/prepend are ignored
    conn.call(b"append a 9 -1 2\r\nzz\r\n", b"STORED\r\n")
    conn.call(b"prepend a 9 -1 2\r\naa\r\n", b"STORED\r\n")
    conn.call(b"get a\r\n", b"VALUE a 7 6\r\naayyzz\r\nEND\r\n")


def test_append_changes_cas(conn):
    conn.call(b"set a 0 0 1\r\nx\r\n", b"STORED\r\n")
    c1 = gets_cas(conn, b"a")
    conn.call(b"append a 0 0 1\r\ny\r\n", b"STORED\r\n")
    assert gets_cas(conn, b"a") > c1


def test_cas(conn):
    conn.call(b"cas a 0 0 1 1\r\nx\r\n", b"NOT_FOUND\r\n")
    conn.call(b"set a 0 0 1\r\nx\r\n", b"STORED\r\n")
    cas = gets_cas(conn, b"a")
    conn.call(b"cas a 3 0 1 %d\r\ny\r\n" % (cas + 1000), b"EXISTS\r\n")
    conn.call(b"cas a 3 0 1 %d\r\ny\r\n" % cas, b"STORED\r\n")
    conn.call(b"cas a 3 0 1 %d\r\nz\r\n" % cas, b"EXISTS\r\n")
    conn.call(b"get a\r\n", b"VALUE a 3 1\r\ny\r\nEND\r\n")


def test_delete(conn):
    conn.call(b"delete a\r\n", b"NOT_FOUND\r\n")
    conn.call(b"set a 0 0 1\r\nx\r\n", b"STORED\r\n")
    conn.call(b"delete a\r\n", b"DELETED\r\n")
    conn.call(b"delete a\r\n", b"NOT_FOUND\r\n")
    conn.call(b"get a\r\n", b"END\r\n")


def test_delete_legacy_zero(conn):
    conn.call(b"set a 0 0 1\r\nx\r\n", b"STORED\r\n")
    conn.call(b"delete a 0\r\n", b"DELETED\r\n")


def test_delete_extra_tokens(conn):
    # 1.6.18's checks, which libmemcached's memccapable expects: the legacy
    # hold time may only be 0, and five or more tokens is ERROR.
    conn.call(b"set a 0 0 1\r\nx\r\n", b"STORED\r\n")
    conn.call(b"delete a x\r\n", b"CLIENT_ERROR bad command line format.  "
              b"Usage: delete <key> [noreply]\r\n")
    conn.call(b"delete a b c d e\r\n", b"ERROR\r\n")
    conn.call(b"delete a 1 noreply\r\ndelete a 0 noreply\r\n", b"")
    conn.call(b"delete a 0\r\n", b"NOT_FOUND\r\n")


def test_touch(conn):
    conn.call(b"touch a 10\r\n", b"NOT_FOUND\r\n")
    conn.call(b"set a 0 0 1\r\nx\r\n", b"STORED\r\n")
    conn.call(b"touch a 10\r\n", b"TOUCHED\r\n")
    conn.call(b"touch a abc\r\n", b"CLIENT_ERROR invalid exptime argument\r\n")
    conn.call(b"touch a -1\r\n", b"TOUCHED\r\n")
    conn.call(b"get a\r\n", b"END\r\n")


def test_incr_decr_basic(conn):
    conn.call(b"incr n 1\r\n", b"NOT_FOUND\r\n")
    conn.call(b"decr n 1\r\n", b"NOT_FOUND\r\n")
    conn.call(b"set n 0 0 1\r\n5\r\n", b"STORED\r\n")
    conn.call(b"incr n 10\r\n", b"15\r\n")
    conn.call(b"decr n 3\r\n", b"12\r\n")
    conn.call(b"get n\r\n", b"VALUE n 0 2\r\n12\r\nEND\r\n")


def test_incr_wraps_at_2_64(conn):
    conn.call(b"set n 0 0 20\r\n18446744073709551615\r\n", b"STORED\r\n")
    conn.call(b"incr n 1\r\n", b"0\r\n")
    # rewritten in place, padded with spaces to the old length
    conn.call(b"get n\r\n", b"VALUE n 0 20\r\n0" + b" " * 19 + b"\r\nEND\r\n")
    conn.call(b"set n 0 0 20\r\n18446744073709551610\r\n", b"STORED\r\n")
    conn.call(b"incr n 10\r\n", b"4\r\n")


def test_decr_floors_at_zero(conn):
    conn.call(b"set n 0 0 2\r\n15\r\n", b"STORED\r\n")
    conn.call(b"decr n 100\r\n", b"0\r\n")
    conn.call(b"get n\r\n", b"VALUE n 0 2\r\n0 \r\nEND\r\n")
    conn.call(b"decr n 1\r\n", b"0\r\n")
    conn.call(b"incr n 5\r\n", b"5\r\n")
    conn.call(b"get n\r\n", b"VALUE n 0 2\r\n5 \r\nEND\r\n")


def test_incr_grows_value(conn):
    conn.call(b"set n 3 0 2\r\n99\r\n", b"STORED\r\n")
    conn.call(b"incr n 1\r\n", b"100\r\n")
    conn.call(b"get n\r\n", b"VALUE n 3 3\r\n100\r\nEND\r\n")
    conn.call(b"decr n 1\r\n", b"99\r\n")
    conn.call(b"get n\r\n", b"VALUE n 3 3\r\n99 \r\nEND\r\n")


def test_incr_max_delta(conn):
    conn.call(b"set n 0 0 1\r\n0\r\n", b"STORED\r\n")
    conn.call(b"incr n 18446744073709551615\r\n",
              b"18446744073709551615\r\n")
    conn.call(b"incr n 2\r\n", b"1\r\n")


def test_incr_errors(conn):
    conn.call(b"set s 0 0 3\r\nbar\r\n", b"STORED\r\n")
    conn.call(b"incr s 1\r\n",
              b"CLIENT_ERROR cannot increment or decrement non-numeric "
              b"value\r\n")
    conn.call(b"decr s 1\r\n",
              b"CLIENT_ERROR cannot increment or decrement non-numeric "
              b"value\r\n")
    for delta in (b"abc", b"-1", b"18446744073709551616",
                  b"99999999999999999999", b"1x"):
        conn.call(b"incr s %s\r\n" % delta,
                  b"CLIENT_ERROR invalid numeric delta argument\r\n")
    conn.call(b"get s\r\n", b"VALUE s 0 3\r\nbar\r\nEND\r\n")


def test_incr_on_20_digit_values(conn):
    # 20 digits but above 2^64-1: not a number for memcached
    conn.call(b"set n 0 0 20\r\n99999999999999999999\r\n", b"STORED\r\n")
    conn.call(b"incr n 1\r\n",
              b"CLIENT_ERROR cannot increment or decrement non-numeric "
              b"value\r\n")
    conn.call(b"set n 0 0 20\r\n10000000000000000000\r\n", b"STORED\r\n")
    conn.call(b"incr n 1\r\n", b"10000000000000000001\r\n")
    conn.call(b"decr n 10000000000000000000\r\n", b"1\r\n")


def test_incr_empty_value(conn):
    conn.call(b"set n 0 0 0\r\n\r\n", b"STORED\r\n")
    conn.call(b"incr n 1\r\n",
              b"CLIENT_ERROR cannot increment or decrement non-numeric "
              b"value\r\n")


def test_version(conn):
    conn.sync()


def test_verbosity(conn):
    conn.call(b"verbosity 1\r\n", b"OK\r\n")
    conn.call(b"verbosity 0\r\n", b"OK\r\n")
    conn.call(b"verbosity abc\r\n",
              b"CLIENT_ERROR bad command line format\r\n")


@pytest.mark.v1645
def test_verbosity_without_argument(conn):
    conn.call(b"verbosity\r\n", b"CLIENT_ERROR bad command line format\r\n")


def test_quit_closes(mc):
    with mc.conn() as c:
        c.send(b"quit\r\n")
        assert c.wait_closed()
        assert c.buf == b""


def test_unknown_and_uppercase_commands(conn):
    conn.call(b"bogus_command\r\n", b"ERROR\r\n")
    conn.call(b"GET foo\r\n", b"ERROR\r\n")
    conn.call(b"misbehave\r\n", b"ERROR\r\n")


@pytest.mark.v1645
def test_blank_line_and_empty_get(conn):
    conn.call(b"\r\n", b"CLIENT_ERROR bad command line format\r\n")
    conn.call(b"get\r\n", b"CLIENT_ERROR bad command line format\r\n")
    conn.call(b"gets\r\n", b"CLIENT_ERROR bad command line format\r\n")


@pytest.mark.v1645
def test_cas_without_unique(conn):
    # 1.6.45 rejects the line and swallows the data block
    conn.call(b"cas a 0 0 1\r\nx\r\n",
              b"CLIENT_ERROR bad command line format\r\n")


def test_missing_arguments_rejected(conn):
    # 1.6.18 answers ERROR, 1.6.45 may say CLIENT_ERROR; either way one
    # error line and the connection goes on.
    for req in (b"incr\r\n", b"incr k\r\n", b"decr k\r\n",
                b"touch k\r\n", b"delete\r\n"):
        conn.send(req)
        line = conn.readline()
        assert line in (b"ERROR\r\n",
                        b"CLIENT_ERROR bad command line format\r\n"), req
    conn.sync()


def test_key_with_control_char_is_stored(conn):
    conn.call(b"set a\x01b 0 0 1\r\nx\r\n", b"STORED\r\n")
    conn.call(b"get a\x01b\r\n", b"VALUE a\x01b 0 1\r\nx\r\nEND\r\n")


def test_flush_all(conn):
    conn.call(b"set a 0 0 1\r\nx\r\nset b 0 0 1\r\ny\r\n",
              b"STORED\r\nSTORED\r\n")
    conn.call(b"flush_all\r\n", b"OK\r\n")
    conn.call(b"get a b\r\n", b"END\r\n")
    conn.call(b"set a 0 0 1\r\nz\r\n", b"STORED\r\n")
    conn.call(b"get a\r\n", b"VALUE a 0 1\r\nz\r\nEND\r\n")
    conn.call(b"flush_all 0\r\n", b"OK\r\n")
    conn.call(b"get a\r\n", b"END\r\n")


def test_flush_all_errors(conn):
    conn.call(b"flush_all abc\r\n",
              b"CLIENT_ERROR invalid exptime argument\r\n")


def test_flush_all_noreply(conn):
    conn.call(b"set a 0 0 1\r\nx\r\n", b"STORED\r\n")
    conn.call(b"flush_all noreply\r\nget a\r\n", b"END\r\n")
    conn.call(b"set a 0 0 1\r\nx\r\n", b"STORED\r\n")
    conn.call(b"flush_all 0 noreply\r\nget a\r\n", b"END\r\n")


def test_shutdown_disabled(conn, reference):
    if reference:
        conn.call(b"shutdown\r\n", b"ERROR: shutdown not enabled\r\n")
    else:
        conn.call(b"shutdown\r\n", b"SERVER_ERROR: shutdown not enabled\r\n")


def test_shutdown_bad_mode(server_factory):
    s = server_factory("-A")
    with s.conn() as c:
        c.call(b"shutdown foo\r\n", b"CLIENT_ERROR invalid shutdown mode\r\n")
    s.check_alive()


@pytest.mark.parametrize("cmd", [b"shutdown\r\n", b"shutdown graceful\r\n"])
def test_shutdown_enabled_exits(server_factory, cmd):
    s = server_factory("-A")
    with s.conn() as c:
        c.send(cmd)
        assert c.wait_closed(5)
    assert s.wait(10) == 0


def test_values_around_the_copy_size(conn):
    """Values up to 1 KB (with their "\r\n") are copied into the reply,
    longer ones sent from the item: replies on both sides of that size,
    many per reply so that they straddle the reply's 16 KB blocks, are the
    same bytes."""
    sizes = (0, 1, 31, 1021, 1022, 1023, 1024, 4000)
    keys = []
    for i in range(64):
        n = sizes[i % len(sizes)]
        key = b"cv%d" % i
        data = bytes([97 + i % 26]) * n
        conn.call(b"set %s %d 0 %d\r\n%s\r\n" % (key, i, n, data),
                  b"STORED\r\n")
        keys.append((key, i, data))
    want = b"".join(b"VALUE %s %d %d\r\n%s\r\n" % (k, f, len(d), d)
                    for k, f, d in keys) + b"END\r\n"
    conn.call(b"get " + b" ".join(k for k, _, _ in keys) + b"\r\n", want)
    conn.call(b"".join(b"get %s\r\n" % k for k, _, _ in keys),
              b"".join(b"VALUE %s %d %d\r\n%s\r\nEND\r\n" % (k, f, len(d), d)
                       for k, f, d in keys))
    conn.call(b"".join(b"mg %s v f\r\n" % k for k, _, _ in keys),
              b"".join(b"VA %d f%d\r\n%s\r\n" % (len(d), f, d)
                       for _, f, d in keys))
