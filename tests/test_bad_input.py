"""Malformed, oversized and hostile input: exact errors, and the server
keeps serving new connections afterwards."""

import random
import socket

import pytest

BAD_FORMAT = b"CLIENT_ERROR bad command line format\r\n"
TOO_LARGE = b"SERVER_ERROR object too large for cache\r\n"

# Hostile bytes meet the connection's buffers, its reads across a long
# line and its closes: all of them the event engine's.
pytestmark = pytest.mark.engine


@pytest.fixture(autouse=True)
def still_alive(mc):
    yield
    mc.check_alive()


def test_key_250_ok_251_rejected(conn):
    k250, k251 = b"k" * 250, b"k" * 251
    conn.call(b"set %s 0 0 1\r\nx\r\n" % k250, b"STORED\r\n")
    conn.call(b"get %s\r\n" % k250, b"VALUE %s 0 1\r\nx\r\nEND\r\n" % k250)
    conn.call(b"get %s\r\n" % k251, BAD_FORMAT)
    conn.call(b"delete %s\r\n" % k251, BAD_FORMAT)
    conn.call(b"incr %s 1\r\n" % k251, BAD_FORMAT)
    conn.call(b"touch %s 1\r\n" % k251, BAD_FORMAT)


def test_multiget_with_long_key_aborts(conn):
    # No stray CRLF after the error (1.6.45 has one; a bug not copied).
    conn.call(b"set a 0 0 1\r\n1\r\n", b"STORED\r\n")
    conn.call(b"get a %s a\r\n" % (b"k" * 251), BAD_FORMAT)


def test_set_long_key_error(mc):
    # 1.6.45 swallows the block and then replies; 1.6.18 replies at once
    # and reads "x" as a command.  The first reply line is the same.
    with mc.conn() as c:
        c.send(b"set %s 0 0 1\r\nx\r\n" % (b"k" * 251))
        assert c.readline() == BAD_FORMAT


@pytest.mark.v1645
def test_set_long_key_swallows_data(conn):
    conn.call(b"set %s 0 0 1\r\nx\r\n" % (b"k" * 251), BAD_FORMAT)


@pytest.mark.parametrize("length", [b"-1", b"abc", b"99999999999999999999",
                                    b"1x", b""])
def test_bad_length(conn, length):
    # No data block can be swallowed: the next line is a command again.
    line = b"set a 0 0 %s\r\n" % length if length else b"set a 0 0\r\n"
    conn.send(line)
    got = conn.readline()
    if length:
        assert got == BAD_FORMAT
    else:
        assert got in (b"ERROR\r\n", BAD_FORMAT)
    conn.call(b"get a\r\n", b"END\r\n")


@pytest.mark.v1645
def test_length_over_int(conn):
    conn.call(b"set a 0 0 4294967296\r\n", BAD_FORMAT)
    conn.call(b"set a 0 0 2147483647\r\n", BAD_FORMAT)


@pytest.mark.v1645
def test_set_missing_token(conn):
    conn.call(b"set a 0 0\r\n", BAD_FORMAT)


@pytest.mark.parametrize("flags,exptime", [
    (b"-1", b"0"), (b"abc", b"0"), (b"99999999999999999999", b"0"),
    (b"0", b"abc"), (b"0", b"99999999999999999999"), (b"0", b"1x")])
def test_bad_flags_or_exptime(mc, flags, exptime):
    with mc.conn() as c:
        c.send(b"set a %s %s 1\r\nx\r\n" % (flags, exptime))
        assert c.readline() == BAD_FORMAT
    with mc.conn() as c:
        c.call(b"get a\r\n", b"END\r\n")


@pytest.mark.v1645
@pytest.mark.parametrize("flags,exptime", [
    (b"-1", b"0"), (b"abc", b"0"), (b"4294967296", b"0"), (b"0", b"abc")])
def test_bad_flags_swallow_data(conn, flags, exptime):
    conn.call(b"set a %s %s 1\r\nx\r\n" % (flags, exptime), BAD_FORMAT)
    conn.call(b"get a\r\n", b"END\r\n")


def test_data_longer_than_announced(conn):
    conn.call(b"set a 0 0 1\r\nx\r\n", b"STORED\r\n")
    # "old" is the block; the CRLF left over is a blank line
    conn.call(b"set a 0 0 1\r\nold\r\n", b"CLIENT_ERROR bad data chunk\r\n")
    assert conn.readline() in (b"ERROR\r\n", BAD_FORMAT)
    # the old value is kept
    conn.call(b"get a\r\n", b"VALUE a 0 1\r\nx\r\nEND\r\n")


@pytest.mark.v1645
def test_data_longer_follow_up_bytes(conn):
    # "abcd" is read as the block (2 + CRLF); the CRLF left is a blank line
    conn.call(b"set a 0 0 2\r\nabcd\r\n",
              b"CLIENT_ERROR bad data chunk\r\n" + BAD_FORMAT)
    conn.call(b"get a\r\n", b"END\r\n")


def test_data_shorter_than_announced(conn):
    conn.call(b"set a 0 0 1\r\nz\r\n", b"STORED\r\n")
    # 6 bytes are read as the block: "ab\r\nve"; "rsion" is a command
    conn.call(b"set a 0 0 4\r\nab\r\nversion\r\n",
              b"CLIENT_ERROR bad data chunk\r\nERROR\r\n")
    conn.call(b"get a\r\n", b"VALUE a 0 1\r\nz\r\nEND\r\n")


def test_data_block_bare_newline_rejected(conn):
    conn.call(b"set a 0 0 2\r\nab\nx", b"CLIENT_ERROR bad data chunk\r\n")
    conn.call(b"get a\r\n", b"END\r\n")


def test_binary_garbage(mc):
    rnd = random.Random(1234)
    for _ in range(5):
        garbage = bytes(rnd.getrandbits(8) for _ in range(8192))
        garbage = garbage.replace(b"shutdown", b"xxxxxxxx")
        with mc.conn() as c:
            try:
                c.send(garbage + b"\r\n")
                # whatever the garbage left the connection waiting for,
                # the end of the stream closes it
                c.sock.shutdown(socket.SHUT_WR)
                assert c.wait_closed(10)
            except (ConnectionResetError, BrokenPipeError):
                pass
        mc.check_alive()


def test_garbage_lines_with_nuls(conn):
    conn.call(b"\x00\x01\x02\r\n", b"ERROR\r\n")
    conn.call(b"\xff\xfe bogus \x00\r\n", b"ERROR\r\n")
    # a NUL inside a key: one error or a miss, never a hang or a crash
    conn.send(b"get a\x00b\r\n")
    assert conn.readline() in (b"END\r\n", b"ERROR\r\n", BAD_FORMAT)


def test_disconnect_mid_value(mc):
    with mc.conn() as c:
        c.send(b"set mid 0 0 100000\r\n" + b"x" * 5000)
    with mc.conn() as c:
        c.send(b"set mid2 0 0 100000\r\n")
    with mc.conn() as c:
        c.call(b"get mid mid2\r\n", b"END\r\n")


def test_close_while_a_value_is_swallowed(mc):
    # too large: the value is read and dropped (the error comes after it),
    # until the client goes; then the server closes too, saying nothing
    with mc.conn() as c:
        c.send(b"set big 0 0 2000000\r\n" + b"x" * 10000)
        c.sock.shutdown(socket.SHUT_WR)
        assert c.wait_closed()
        assert c.buf == b""
    with mc.conn() as c:
        c.call(b"get big\r\n", b"END\r\n")


def test_long_line_without_newline_closes(mc):
    with mc.conn() as c:
        c.send(b"x" * 3000)
        assert c.wait_closed(5)


def test_long_get_line_without_newline_kept(mc):
    with mc.conn() as c:
        mc.send_read(c, b"get " + b"k" * 200 + (b" k" * 2000))
        c.call(b"\r\n", b"END\r\n")


def test_http_request_closed_silently(mc):
    with mc.conn() as c:
        c.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert c.wait_closed(5)
        assert c.buf == b""


def test_huge_get_line(conn):
    keys = [b"key%06d" % i for i in range(11000)]      # ~110 kB line
    conn.call(b"set key000007 0 0 1\r\na\r\nset key010999 0 0 1\r\nb\r\n",
              b"STORED\r\nSTORED\r\n")
    conn.call(b"get " + b" ".join(keys) + b"\r\n",
              b"VALUE key000007 0 1\r\na\r\nVALUE key010999 0 1\r\nb\r\n"
              b"END\r\n", timeout=20)


@pytest.mark.storage
def test_largest_value_fits(conn):
    # 48 hdr + 8 cas + "k\0" + value + CRLF == 1 MiB
    val = b"v" * 1048516
    conn.call(b"set k 0 0 %d\r\n%s\r\n" % (len(val), val), b"STORED\r\n")
    conn.send(b"get k\r\n")
    want = b"VALUE k 0 1048516\r\n" + val + b"\r\nEND\r\n"
    assert conn.read_exact(len(want)) == want


@pytest.mark.storage
def test_one_byte_too_large_drops_old_value(conn):
    conn.call(b"set k 0 0 3\r\nold\r\n", b"STORED\r\n")
    val = b"v" * 1048517
    conn.call(b"set k 0 0 %d\r\n%s\r\n" % (len(val), val), TOO_LARGE)
    conn.call(b"get k\r\n", b"END\r\n")


@pytest.mark.storage
def test_flags_cost_four_bytes(conn):
    conn.call(b"set k 1 0 1048512\r\n%s\r\n" % (b"v" * 1048512),
              b"STORED\r\n")
    conn.call(b"set k 1 0 1048513\r\n%s\r\n" % (b"v" * 1048513), TOO_LARGE)


@pytest.mark.storage
def test_too_large_is_swallowed(conn):
    val = b"v" * 2000000
    conn.call(b"set big 0 0 %d\r\n%s\r\n" % (len(val), val), TOO_LARGE)
    conn.call(b"get big\r\n", b"END\r\n")
    s = conn.stats()
    assert int(s["store_too_large"]) >= 1


@pytest.mark.storage
def test_chunked_2mb_value_with_I_4m(server_factory):
    s = server_factory("-I", "4m")
    rnd = random.Random(7)
    val = bytes(rnd.getrandbits(8) for _ in range(2 * 1024 * 1024))
    with s.conn(timeout=20) as c:
        c.call(b"set big 3 0 %d\r\n%s\r\n" % (len(val), val), b"STORED\r\n")
        c.send(b"get big\r\n")
        head = b"VALUE big 3 %d\r\n" % len(val)
        assert c.read_exact(len(head) + len(val) + 7) == (
            head + val + b"\r\nEND\r\n")
        c.call(b"append big 0 0 3\r\nxyz\r\n", b"STORED\r\n")
        c.send(b"get big\r\n")
        head = b"VALUE big 3 %d\r\n" % (len(val) + 3)
        assert c.read_exact(len(head) + len(val) + 10) == (
            head + val + b"xyz\r\nEND\r\n")


@pytest.mark.storage
def test_largest_chunked_value_with_I_2m(server_factory):
    # the same whole-item rule holds for chunked items
    s = server_factory("-I", "2m")
    fits = 2 * 1048576 - (48 + 8 + 2 + 2)
    with s.conn(timeout=30) as c:
        c.call(b"set k 0 0 %d\r\n%s\r\n" % (fits, b"v" * fits), b"STORED\r\n")
        c.call(b"set k 0 0 %d\r\n%s\r\n" % (fits + 1, b"v" * (fits + 1)),
               TOO_LARGE)
        c.call(b"get k\r\n", b"END\r\n")
