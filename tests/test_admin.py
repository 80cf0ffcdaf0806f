"""Operator commands: cache_memlimit, slabs, lru, lru_crawler."""

import re
import time

import pytest

from conftest import TIER_POLICY, wait_for, wait_seconds_pass

OK = b"OK\r\n"


@pytest.fixture
def own(server_factory, request):
    """A connection to a server of its own (these commands change
    server-wide settings)."""
    s = server_factory()
    c = s.conn()
    c.server = s
    yield c
    if request.node.rep_call.passed:
        c.sync()
    c.close()


@pytest.mark.storage
def test_cache_memlimit(own):
    if own.server.memory_file and TIER_POLICY in ("", "pmem"):
        # Items live in a memory file of -m bytes, which cannot grow (as
        # memcached -e refuses too); the limit can still come down.
        own.call(b"cache_memlimit 100\r\n", b"MEMLIMIT_ADJUST_FAILED "
                 b"out of bounds or unable to adjust\r\n")
        assert own.stats()["limit_maxbytes"] == str(64 * 1024 * 1024)
    else:
        own.call(b"cache_memlimit 100\r\n", OK)
        assert own.stats()["limit_maxbytes"] == str(100 * 1024 * 1024)
        assert own.stats("settings")["maxbytes"] == str(100 * 1024 * 1024)
    own.call(b"cache_memlimit 8\r\n", OK)
    assert own.stats()["limit_maxbytes"] == str(8 * 1024 * 1024)
    own.call(b"cache_memlimit 64 noreply\r\n", b"")
    assert own.stats()["limit_maxbytes"] == str(64 * 1024 * 1024)


@pytest.mark.storage
def test_cache_memlimit_errors(own):
    own.call(b"cache_memlimit 1\r\n",
             b"MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m\r\n")
    own.call(b"cache_memlimit 7\r\n",
             b"MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m\r\n")
    own.call(b"cache_memlimit 2000000000\r\n",
             b"MEMLIMIT_ADJUST_FAILED input value is megabytes not bytes\r\n")
    own.call(b"cache_memlimit abc\r\n", b"ERROR\r\n")
    own.call(b"cache_memlimit\r\n", b"ERROR\r\n")
    # errors are swallowed under noreply too
    own.call(b"cache_memlimit 1 noreply\r\n", b"")
    assert own.stats()["limit_maxbytes"] == str(64 * 1024 * 1024)


def test_slabs_reassign_errors(own):
    own.call(b"set a 0 0 1\r\nx\r\n", b"STORED\r\n")
    own.call(b"slabs reassign 1 1\r\n",
             b"SAME src and dst class are identical\r\n")
    own.call(b"slabs reassign 100 1\r\n",
             b"BADCLASS invalid src or dst class id\r\n")
    own.call(b"slabs reassign 1 100\r\n",
             b"BADCLASS invalid src or dst class id\r\n")
    own.call(b"slabs reassign 1 2\r\n",
             b"NOSPARE source class has no spare pages\r\n")
    own.call(b"slabs reassign a b\r\n",
             b"CLIENT_ERROR bad command line format\r\n")
    own.call(b"slabs reassign\r\n", b"ERROR\r\n")
    own.call(b"slabs\r\n", b"ERROR\r\n")
    own.call(b"slabs foo\r\n", b"ERROR\r\n")


def test_slabs_reassign_disabled(server_factory):
    s = server_factory("-o", "no_slab_reassign")
    with s.conn() as c:
        c.call(b"slabs reassign 1 2\r\n",
               b"CLIENT_ERROR slab reassignment disabled\r\n")


@pytest.mark.storage
def test_slabs_reassign_moves_a_page(server_factory):
    s = server_factory("-m", "8")
    with s.conn(timeout=20) as c:
        # two pages of class 1, then empty them: spare pages
        n = 2 * 10922 + 10
        c.send(b"".join(b"set k%d 0 0 1 noreply\r\nx\r\n" % i
                        for i in range(n)))
        c.sync()
        c.call(b"flush_all\r\n", OK)
        before = c.stats("slabs")
        pages1 = int(before["1:total_pages"])
        assert pages1 >= 2

        def reassigned():
            line = c.req(b"slabs reassign 1 5\r\n")
            assert line in (OK,
                            b"BUSY currently processing reassign request\r\n",
                            b"NOSPARE source class has no spare pages\r\n")
            return line == OK
        wait_for(reassigned, what="slabs reassign 1 5 to answer OK")
        wait_for(lambda: c.stats()["slabs_moved"] != "0",
                 what="slabs_moved")


def test_slabs_automove(own):
    own.call(b"slabs automove 0\r\n", OK)
    assert own.stats("settings")["slab_automove"] == "0"
    own.call(b"slabs automove 2\r\n", OK)
    assert own.stats("settings")["slab_automove"] == "2"
    own.call(b"slabs automove 1\r\n", OK)
    own.call(b"slabs automove 3\r\n", b"ERROR\r\n")
    own.call(b"slabs automove\r\n", b"ERROR\r\n")
    assert own.stats("settings")["slab_automove"] == "1"
    # a level that is not a number is a client error, as in memcached
    for bad in (b"invalid", b"-1", b"1x"):
        own.call(b"slabs automove %s\r\n" % bad,
                 b"CLIENT_ERROR bad command line format\r\n")
    # what follows the level is ignored
    own.call(b"slabs automove 0 2\r\n", OK)
    assert own.stats("settings")["slab_automove"] == "0"


@pytest.mark.v1645      # 1.6.18 has no window
def test_slabs_automove_window(own):
    own.call(b"slabs automove window 10\r\n", OK)
    assert own.stats("settings")["slab_automove_window"] == "10"
    for bad in (b"window x\r\n", b"window\r\n"):
        own.call(b"slabs automove " + bad,
                 b"CLIENT_ERROR bad command line format\r\n")


def test_lru_tune(own):
    own.call(b"lru tune 10 30 0.1 3\r\n", OK)
    s = own.stats("settings")
    assert s["hot_lru_pct"] == "10" and s["warm_lru_pct"] == "30"
    assert s["hot_max_factor"] == "0.10" and s["warm_max_factor"] == "3.00"
    own.call(b"lru tune 50 50 0.1 2\r\n",
             b"ERROR hot and warm pcts must not exceed 80\r\n")
    own.call(b"lru tune 20 40 0 2\r\n",
             b"ERROR hot/warm age factors must be greater than 0\r\n")
    own.call(b"lru tune 1\r\n", b"ERROR\r\n")
    s = own.stats("settings")
    assert s["hot_lru_pct"] == "10" and s["warm_lru_pct"] == "30"


def test_lru_mode_and_temp_ttl(own):
    own.call(b"lru mode flat\r\n", OK)
    assert own.stats("settings")["lru_segmented"] == "no"
    own.call(b"lru mode segmented\r\n", OK)
    assert own.stats("settings")["lru_segmented"] == "yes"
    own.call(b"lru mode foo\r\n", b"ERROR\r\n")
    own.call(b"lru temp_ttl 30\r\n", OK)
    s = own.stats("settings")
    assert s["temp_lru"] == "yes" and s["temporary_ttl"] == "30"
    own.call(b"lru\r\n", b"ERROR\r\n")
    own.call(b"lru foo\r\n", b"ERROR\r\n")


def test_lru_crawler_settings(own):
    own.call(b"lru_crawler sleep 2000000\r\n",
             b"CLIENT_ERROR sleep must be one second or less\r\n")
    own.call(b"lru_crawler sleep abc\r\n",
             b"CLIENT_ERROR bad command line format\r\n")
    own.call(b"lru_crawler sleep 100\r\n", OK)
    assert own.stats("settings")["lru_crawler_sleep"] == "100"
    own.call(b"lru_crawler tocrawl 10\r\n", OK)
    assert own.stats("settings")["lru_crawler_tocrawl"] == "10"
    own.call(b"lru_crawler\r\n", b"ERROR\r\n")
    own.call(b"lru_crawler foo\r\n", b"ERROR\r\n")


def test_lru_crawler_disable_enable(own):
    own.call(b"lru_crawler disable\r\n", OK)
    assert own.stats("settings")["lru_crawler"] == "no"
    own.call(b"lru_crawler crawl all\r\n",
             b"CLIENT_ERROR lru crawler disabled\r\n")
    own.call(b"lru_crawler metadump all\r\n",
             b"CLIENT_ERROR lru crawler disabled\r\n")
    own.call(b"lru_crawler enable\r\n", OK)
    assert own.stats("settings")["lru_crawler"] == "yes"


@pytest.mark.storage
def test_lru_crawler_crawl_reclaims(own):
    own.call(b"set a 0 1 1\r\nx\r\nset b 0 0 1\r\ny\r\n",
             b"STORED\r\nSTORED\r\n")
    own.call(b"lru_crawler crawl 200\r\n", b"BADCLASS invalid class id\r\n")
    wait_seconds_pass(own, 1)

    def crawling():
        line = own.req(b"lru_crawler crawl all\r\n")
        assert line in (OK,
                        b"BUSY currently processing crawler request\r\n")
        return line == OK
    wait_for(crawling, what="lru_crawler crawl all to answer OK")
    # the crawler or the LRU maintainer unlinks it without any access
    wait_for(lambda: own.stats()["curr_items"] == "1",
             what="the expired item to be reclaimed")
    s = own.stats()
    assert int(s["crawler_reclaimed"]) + int(s["reclaimed"]) >= 1
    assert int(s["lru_crawler_starts"]) >= 1


# 1.6.45 adds " flags=<client flags> " (with its trailing space).
METADUMP = re.compile(rb"^key=(\S+) exp=(-1|\d+) la=(\d+) cas=(\d+) "
                      rb"fetch=(yes|no) cls=(\d+) size=(\d+)"
                      rb"(?: flags=(\d+) )?$")


@pytest.mark.storage
def test_lru_crawler_metadump(own, reference):
    own.call(b"set p:a 0 0 1\r\n1\r\nset b 0 100 3\r\nabc\r\nget p:a\r\n",
             b"STORED\r\nSTORED\r\nVALUE p:a 0 1\r\n1\r\nEND\r\n")
    own.send(b"lru_crawler metadump all\r\n")
    block = own.read_until(b"END\r\n", timeout=10)
    if not reference:       # 1.6.28 on: OK first (1.6.18 has none)
        assert block.startswith(b"OK\r\n"), block
        block = block[4:]
    lines = block[:-len(b"END\r\n")].split(b"\n")
    assert lines[-1] == b""
    now = time.time()
    seen = {}
    for line in lines[:-1]:
        m = METADUMP.match(line)
        assert m, line
        seen[m.group(1)] = m
    assert set(seen) == {b"p%3Aa", b"b"}
    a, b = seen[b"p%3Aa"], seen[b"b"]
    assert a.group(2) == b"-1" and a.group(5) == b"yes"
    assert abs(int(b.group(2)) - (now + 100)) <= 3
    assert b.group(5) == b"no"
    assert abs(int(a.group(3)) - now) <= 3
    assert a.group(6) == b"1"
    assert a.group(7) == b"%d" % (48 + 8 + 4 + 3)
    assert b.group(7) == b"%d" % (48 + 8 + 2 + 5)


@pytest.mark.v1645
def test_metadump_shows_client_flags(own):
    own.call(b"set f 4294967295 0 1\r\n1\r\n", b"STORED\r\n")
    own.send(b"lru_crawler metadump all\r\n")
    assert own.readline() == b"OK\r\n"
    line = own.read_until(b"END\r\n", timeout=10).split(b"\n")[0]
    assert METADUMP.match(line).group(8) == b"4294967295", line
    assert line.endswith(b" flags=4294967295 "), line


@pytest.mark.v1645
@pytest.mark.storage
def test_lru_crawler_mgdump(own):
    # 1.6.45: each live key as a request to send back ("mg <key>", or
    # base64 and b for a binary key), between OK and EN.
    own.call(b"set a 0 0 1\r\n1\r\nms AAEC 1 b\r\n2\r\n"
             b"set gone 0 0 1\r\n3\r\ndelete gone\r\n",
             b"STORED\r\nHD\r\nSTORED\r\nDELETED\r\n")
    own.send(b"lru_crawler mgdump all\r\n")
    block = own.read_until(b"EN\r\n", timeout=10)
    assert block.startswith(b"OK\r\n"), block
    assert sorted(block[4:-4].split(b"\r\n")[:-1]) == [
        b"mg AAEC b", b"mg a"], block
    own.call(b"lru_crawler mgdump 200\r\n", b"BADCLASS invalid class id\r\n")
    own.call(b"stats sizes\r\nlru_crawler mgdump all\r\n",
             b"STAT sizes_status disabled\r\nEND\r\nERROR cannot "
             b"pipeline other commands before mgdump\r\n")


@pytest.mark.v1645
def test_mgdump_disabled_by_X(server_factory):
    s = server_factory("-X")
    with s.conn() as c:
        c.call(b"lru_crawler mgdump all\r\n", b"ERROR key dump not allowed\r\n")


def test_metadump_not_pipelined(own):
    own.call(b"stats sizes\r\nlru_crawler metadump all\r\n",
             b"STAT sizes_status disabled\r\nEND\r\n"
             b"ERROR cannot pipeline other commands before metadump\r\n")


def test_metadump_disabled_by_X(server_factory):
    s = server_factory("-X")
    with s.conn() as c:
        c.call(b"lru_crawler metadump all\r\n",
               b"ERROR metadump not allowed\r\n")


def test_flush_disabled_by_F(server_factory):
    s = server_factory("-F")
    with s.conn() as c:
        c.call(b"flush_all\r\n", b"CLIENT_ERROR flush_all not allowed\r\n")
