"""memcached-pm against memcached, case by case (issue 19).

Each case is a request sent on a fresh key to memcached-pm and, where
Debian's memcached is installed, to it too, under the same flags; the
replies must be the same bytes.  A case may also pin memcached-pm's exact
reply (`expect`).  Where memcached 1.6.18 (Debian's) is older than the
1.6.45 memcached-pm follows, the case says what 1.6.18 answers
(`old`); where memcached-pm differs on purpose, the case says why
(`differs`) and those reasons are the list the man page gives.

CAS values and remaining TTLs depend on each server's history and clock,
so they are compared as a shape (c#, t#), not as numbers.  The cases
against memcached are marked `against_memcached` and skipped where it is
absent, so the suite still runs without it.
"""

import itertools
import re
import socket
import struct
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import (REFERENCE_BIN, Server, against_memcached, server_time,
                      start_which, touched, wait_for, wait_seconds_pass)

# The same bytes as memcached, over items and connections: the cases on
# memcached-pm's default servers depend on the engine and the tiers.
ON_OURS = [pytest.mark.engine, pytest.mark.storage]


# Where memcached-pm differs from memcached on purpose: each with the
# words the man page's DIFFERENCES FROM MEMCACHED section uses for it
# (test_man_page_lists_every_difference) and the tests that show it.
DELIBERATE = {
    "a memory file survives a crash":
        ("kill \\-9", "test_pmem.py::test_e_keeps_items_across_a_crash"),
    "xxh3 is the default hash":
        ("xxh3", "test_options.py::test_defaults_that_differ"),
    "-o memory_file refuses a file it cannot read":
        ("refused rather than discarded",
         "test_pmem.py::test_restart_under_other_settings_is_refused"),
    "stats rows of the tiers, prefetch and the read path":
        ("lockfree_hits", "test_stats_names.py, OURS_ONLY below"),
    "a negative -m is refused":
        ("negative value", "test_options.py::SAFER"),
    "no extstore or proxy":
        ("no extstore and no proxy", "stats extstore below"),
    "the version says memcached-pm":
        ("1.6.45-pm-", "version below"),
    "workers and listeners on io_uring":
        ("run on io_uring", "test_ring.py::test_the_engine_is_chosen"),
}

END = b"mn\r\n"             # every case ends with a meta no-op ...
MN = b"MN\r\n"              # ... so its replies end with MN


@dataclass
class Case:
    name: str
    req: bytes              # "{k}" is the case's own key
    flags: tuple = ()
    expect: bytes = None    # memcached-pm's exact reply, when pinned
    old: bytes = None       # what memcached 1.6.18 answers instead
    differs: str = None     # why memcached-pm answers otherwise
    closes: bool = False    # the server closes the connection
    own: bool = False       # on servers of its own (it reads their state)
    crawls: bool = False    # the crawler may be on a crawl of its own
    first: bytes = None     # a set, sent before; the request waits until
    #                         its item has reached COLD (the LRU
    #                         maintainer moves it there within moments)


def c(name, req, **kw):
    return Case(name, req, **kw)


CASES = [
    # ---- the examples the issue names --------------------------------
    c("md x I leaves an empty stale value",
      b"set {k} 5 0 2\r\nhi\r\nmd {k} x I\r\nmg {k} t v f\r\n",
      expect=b"STORED\r\nHD\r\nVA 0 t-1 f0 X W\r\n\r\n",
      old=b"STORED\r\nCLIENT_ERROR invalid or duplicate flag\r\n"
      b"VA 2 t-1 f5\r\nhi\r\n"),
    c("md x keeps the tombstone's client flags from F",
      b"set {k} 5 0 2\r\nhi\r\nmd {k} x F7\r\nmg {k} v f\r\n",
      expect=b"STORED\r\nHD\r\nVA 0 f7\r\n\r\n",
      old=b"STORED\r\nCLIENT_ERROR invalid or duplicate flag\r\n"
      b"VA 2 f5\r\nhi\r\n"),
    c("slabs automove with a word",
      b"slabs automove invalid\r\n",
      expect=b"CLIENT_ERROR bad command line format\r\n"),
    c("verbosity with a word", b"verbosity invalid\r\n",
      expect=b"CLIENT_ERROR bad command line format\r\n"),
    # ---- storage commands --------------------------------------------
    c("set and get", b"set {k} 3 0 2\r\nhi\r\nget {k}\r\n",
      expect=b"STORED\r\nVALUE {k} 3 2\r\nhi\r\nEND\r\n"),
    c("add over a value", b"set {k} 0 0 1\r\na\r\nadd {k} 0 0 1\r\nb\r\n",
      expect=b"STORED\r\nNOT_STORED\r\n"),
    c("replace a miss", b"replace {k} 0 0 1\r\nb\r\n",
      expect=b"NOT_STORED\r\n"),
    c("append and prepend", b"set {k} 0 0 1\r\nb\r\nappend {k} 0 0 1\r\n"
      b"c\r\nprepend {k} 0 0 1\r\na\r\nget {k}\r\n",
      expect=b"STORED\r\nSTORED\r\nSTORED\r\nVALUE {k} 0 3\r\nabc\r\nEND\r\n"),
    c("append to a miss", b"append {k} 0 0 1\r\nc\r\n",
      expect=b"NOT_STORED\r\n"),
    c("cas on a miss", b"cas {k} 0 0 1 1\r\nx\r\n", expect=b"NOT_FOUND\r\n"),
    c("cas with a stale value", b"set {k} 0 0 1\r\nx\r\n"
      b"cas {k} 0 0 1 999999999\r\ny\r\n", expect=b"STORED\r\nEXISTS\r\n"),
    c("gets shows a cas", b"set {k} 0 0 1\r\nx\r\ngets {k}\r\n"),
    c("negative length", b"set {k} 0 0 -1\r\n",
      expect=b"CLIENT_ERROR bad command line format\r\n"),
    # 1.6.45: a line of under 4 bytes (the "\r\n" left over) is a
    # CLIENT_ERROR, where 1.6.18 said ERROR.
    c("bad data chunk", b"set {k} 0 0 1\r\nxyz\r\n",
      expect=b"CLIENT_ERROR bad data chunk\r\nCLIENT_ERROR bad command "
      b"line format\r\n",
      old=b"CLIENT_ERROR bad data chunk\r\nERROR\r\n"),
    c("key of 251 bytes", b"get " + b"k" * 251 + b"\r\n",
      expect=b"CLIENT_ERROR bad command line format\r\n"),
    # 1.6.45 swallows the value of a storage command it refuses.
    c("flags not a number", b"set {k} x 0 1\r\nx\r\n",
      expect=b"CLIENT_ERROR bad command line format\r\n",
      old=b"CLIENT_ERROR bad command line format\r\nERROR\r\n"),
    c("noreply set then get", b"set {k} 0 0 1 noreply\r\nx\r\nget {k}\r\n",
      expect=b"VALUE {k} 0 1\r\nx\r\nEND\r\n"),
    c("too large", b"set {k} 0 0 2000000\r\n" + b"v" * 2000000 + b"\r\n"
      b"get {k}\r\n",
      expect=b"SERVER_ERROR object too large for cache\r\nEND\r\n"),
    # ---- incr, decr, delete, touch -----------------------------------
    c("incr and decr", b"set {k} 0 0 2\r\n10\r\nincr {k} 5\r\n"
      b"decr {k} 100\r\nget {k}\r\n",
      expect=b"STORED\r\n15\r\n0\r\nVALUE {k} 0 2\r\n0 \r\nEND\r\n"),
    c("incr wraps at 2^64", b"set {k} 0 0 20\r\n18446744073709551615\r\n"
      b"incr {k} 2\r\n", expect=b"STORED\r\n1\r\n"),
    c("incr on text", b"set {k} 0 0 1\r\nx\r\nincr {k} 1\r\n",
      expect=b"STORED\r\nCLIENT_ERROR cannot increment or decrement "
      b"non-numeric value\r\n"),
    c("incr by a word", b"incr {k} x\r\n",
      expect=b"CLIENT_ERROR invalid numeric delta argument\r\n"),
    c("incr a miss", b"incr {k} 1\r\n", expect=b"NOT_FOUND\r\n"),
    c("delete a miss", b"delete {k}\r\n", expect=b"NOT_FOUND\r\n"),
    c("delete with a time", b"delete {k} 10\r\n",
      expect=b"CLIENT_ERROR bad command line format.  Usage: delete <key> "
      b"[noreply]\r\n"),
    c("delete with 0", b"set {k} 0 0 1\r\nx\r\ndelete {k} 0\r\n",
      expect=b"STORED\r\nDELETED\r\n"),
    c("touch and gat", b"set {k} 0 0 1\r\nx\r\ntouch {k} 100\r\n"
      b"gat 200 {k}\r\n",
      expect=b"STORED\r\nTOUCHED\r\nVALUE {k} 0 1\r\nx\r\nEND\r\n"),
    c("touch a miss", b"touch {k} 1\r\n", expect=b"NOT_FOUND\r\n"),
    c("gats", b"set {k} 0 0 1\r\nx\r\ngats 0 {k}\r\n"),
    # ---- meta ----------------------------------------------------------
    c("mg miss", b"mg {k} v\r\n", expect=b"EN\r\n"),
    c("mg miss quiet", b"mg {k} v q\r\n", expect=b""),
    c("mg hit with flags", b"set {k} 9 0 2\r\nhi\r\nmg {k} s v f k O55\r\n",
      expect=b"STORED\r\nVA 2 s2 f9 k{k} O55\r\nhi\r\n"),
    c("mg hit, no value", b"set {k} 9 0 2\r\nhi\r\nmg {k}\r\n",
      expect=b"STORED\r\nHD\r\n"),
    c("mg t of no expiry", b"set {k} 0 0 1\r\nx\r\nmg {k} t\r\n",
      expect=b"STORED\r\nHD t-1\r\n"),
    c("mg t of an expiry", b"set {k} 0 100 1\r\nx\r\nmg {k} t\r\n"),
    c("mg c", b"set {k} 0 0 1\r\nx\r\nmg {k} c\r\n"),
    c("mg h and l", b"set {k} 0 0 1\r\nx\r\nmg {k} h l\r\nmg {k} h l\r\n"),
    c("mg base64 key", b"set {k} 0 0 1\r\nx\r\nmg a2V5Yg== b v\r\n"),
    c("mg N vivifies", b"mg {k} N30 v c\r\nmg {k} v\r\n"),
    c("mg unknown flag", b"mg {k} !\r\n"),
    c("mg E on a hit", b"set {k} 0 0 1\r\nx\r\nmg {k} E777 c\r\n",
      old=b"STORED\r\nCLIENT_ERROR invalid flag\r\n"),
    c("mg duplicate flags", b"set {k} 0 0 1\r\nx\r\nmg {k} v v\r\n"),
    c("ms", b"ms {k} 2 F5 T0\r\nhi\r\nmg {k} v f\r\n",
      expect=b"HD\r\nVA 2 f5\r\nhi\r\n"),
    c("ms bad data", b"ms {k} 2\r\nhiya\r\n",
      old=b"CLIENT_ERROR bad data chunk\r\nERROR\r\n"),
    c("ms mode E (add) over a value", b"ms {k} 1\r\nx\r\nms {k} 1 ME\r\n"
      b"y\r\n", expect=b"HD\r\nNS\r\n"),
    c("ms mode append to a miss", b"ms {k} 1 MA\r\ny\r\n",
      expect=b"NS\r\n"),
    c("ms mode append N vivifies", b"ms {k} 1 MA N0\r\ny\r\nmg {k} v\r\n",
      expect=b"HD\r\nVA 1\r\ny\r\n", old=b"NS\r\nEN\r\n"),
    c("ms bad mode", b"ms {k} 1 MZ\r\ny\r\n"),
    c("ms C mismatch", b"ms {k} 1\r\nx\r\nms {k} 1 C999999999\r\ny\r\n",
      expect=b"HD\r\nEX\r\n"),
    c("ms C on a miss", b"ms {k} 1 C1\r\ny\r\n", expect=b"NF\r\n"),
    c("ms I invalidates", b"ms {k} 1\r\nx\r\nms {k} 1 I\r\ny\r\n"
      b"mg {k} v c\r\n"),
    c("ms base64 key and k", b"ms a2V5Yw== 1 b k\r\nx\r\n"),
    c("ms too large", b"ms {k} 2000000 T0\r\n" + b"x" * 2000000 + b"\r\n",
      expect=b"SERVER_ERROR object too large for cache\r\n"),
    c("md", b"ms {k} 1\r\nx\r\nmd {k}\r\nmd {k}\r\n",
      expect=b"HD\r\nHD\r\nNF\r\n"),
    c("md q shows a miss", b"md {k} q\r\n", expect=b"NF\r\n"),
    c("md q hides a hit", b"ms {k} 1 q\r\nx\r\nmd {k} q\r\n", expect=b""),
    c("md I then mg", b"ms {k} 1\r\nx\r\nmd {k} I T30\r\nmg {k} v c\r\n"),
    c("md C mismatch", b"ms {k} 1\r\nx\r\nmd {k} C999999999\r\n",
      expect=b"HD\r\nEX\r\n"),
    c("ma", b"ms {k} 1\r\n5\r\nma {k}\r\nma {k} v\r\nma {k} MD D2 v\r\n",
      expect=b"HD\r\nHD\r\nVA 1\r\n7\r\nVA 1\r\n5\r\n"),
    c("ma a miss", b"ma {k}\r\n", expect=b"NF\r\n"),
    c("ma N vivifies with J", b"ma {k} N0 J13 v\r\n",
      expect=b"VA 2\r\n13\r\n"),
    c("ma non-numeric", b"ms {k} 1\r\nx\r\nma {k}\r\n"),
    c("ma bad delta", b"ma {k} Dx\r\n"),
    c("mg t before N shows no TTL yet", b"mg {k} t N30\r\nmg {k} N30 t\r\n",
      expect=b"HD t-1 W\r\nHD t# Z\r\n"),
    c("mg N before t shows it", b"mg {k} N30 t\r\n", expect=b"HD t# W\r\n"),
    c("ma N q vivifies silently", b"ma {k} N30 q\r\nmg {k} v\r\n",
      expect=b"VA 1\r\n0\r\n", old=b"HD\r\nVA 1\r\n0\r\n"),
    c("ms s shows the size", b"ms {k} 2 s\r\nhi\r\n", expect=b"HD s2\r\n",
      old=b"HD\r\n"),
    c("mg x is known", b"mg {k} x\r\n", expect=b"EN\r\n",
      old=b"CLIENT_ERROR invalid flag\r\n"),
    c("md E sets the tombstone's cas", b"ms {k} 1\r\nx\r\nmd {k} I E99\r\n"
      b"mg {k} c\r\n", expect=b"HD\r\nHD\r\nHD c99 X W\r\n",
      old=b"HD\r\nCLIENT_ERROR invalid or duplicate flag\r\nHD c#\r\n"),
    c("mn alone", b"", expect=b""),
    c("me", b"ms {k} 1\r\nx\r\nme {k}\r\n"),
    c("meta key too long", b"mg " + b"k" * 251 + b" v\r\n"),
    c("meta with no key", b"mg\r\n",
      expect=b"CLIENT_ERROR bad command line format\r\n", old=b"ERROR\r\n"),
    # ---- admin ----------------------------------------------------------
    c("empty line", b"\r\n",
      expect=b"CLIENT_ERROR bad command line format\r\n", old=b"ERROR\r\n"),
    c("unknown command", b"bogus\r\n", expect=b"ERROR\r\n"),
    c("version", b"version\r\n", differs="VERSION 1.6.45-pm-<ours>: the "
      "memcached release it follows, then its own"),
    c("verbosity", b"verbosity 1\r\nverbosity 0 noreply\r\n",
      expect=b"OK\r\n"),
    c("flush_all noreply", b"flush_all noreply\r\n", expect=b""),
    c("flush_all with a word", b"flush_all x\r\n"),
    c("flush_all negative", b"flush_all -1\r\n"),
    c("cache_memlimit", b"cache_memlimit 64\r\n", expect=b"OK\r\n"),
    c("cache_memlimit with a word", b"cache_memlimit x\r\n"),
    c("cache_memlimit too small", b"cache_memlimit 1\r\n"),
    c("slabs automove 3", b"slabs automove 3\r\n"),
    c("slabs automove ratio", b"slabs automove ratio 0.5\r\n"),
    c("slabs automove ratio of a word", b"slabs automove ratio x\r\n"),
    c("slabs automove freeratio", b"slabs automove freeratio 0.02\r\n",
      expect=b"OK\r\n", old=b"CLIENT_ERROR bad command line format\r\n"),
    c("slabs automove window", b"slabs automove window 20\r\n",
      expect=b"OK\r\n", old=b"CLIENT_ERROR bad command line format\r\n"),
    c("slabs automove window too low", b"slabs automove window 2\r\n",
      expect=b"CLIENT_ERROR automove window too low or too high\r\n",
      old=b"CLIENT_ERROR bad command line format\r\n"),
    c("slabs automove alone", b"slabs automove\r\n"),
    c("slabs reassign to the same class", b"slabs reassign 1 1\r\n"),
    c("cache_memlimit in bytes", b"cache_memlimit 2000000000\r\n"),
    c("verbosity alone", b"verbosity\r\n",
      expect=b"CLIENT_ERROR bad command line format\r\n", old=b"ERROR\r\n"),
    c("verbosity with two words", b"verbosity 1 2 3\r\n"),
    c("flush_all 0", b"flush_all 0\r\n", expect=b"OK\r\n"),
    c("flush_all with two words", b"flush_all 0 x\r\n"),
    c("lru tune bad", b"lru tune 90 90 0.1 2.0\r\n"),
    c("lru mode bogus", b"lru mode x\r\n"),
    c("lru temp_ttl of a word", b"lru temp_ttl x\r\n"),
    c("lru_crawler sleep too long", b"lru_crawler sleep 2000000\r\n"),
    c("lru_crawler crawl a list", b"lru_crawler crawl 1,2,50\r\n", own=True,
      expect=b"OK\r\n", crawls=True),
    c("lru_crawler crawl all", b"lru_crawler crawl all\r\n", own=True,
      expect=b"OK\r\n", crawls=True),
    c("watch a bad stream", b"watch nothing\r\n"),
    c("quit", b"quit\r\n", closes=True, expect=b""),
    # 1.6.45's parser refuses a command short of its tokens as a format
    # error, where 1.6.18 answered ERROR (or END for gat).
    c("get with no key", b"get\r\n",
      expect=b"CLIENT_ERROR bad command line format\r\n", old=b"ERROR\r\n"),
    c("gat with no key", b"gat 10\r\n",
      expect=b"CLIENT_ERROR bad command line format\r\n", old=b"END\r\n"),
    c("incr with no delta", b"incr {k}\r\n",
      expect=b"CLIENT_ERROR bad command line format\r\n", old=b"ERROR\r\n"),
    c("touch with a word", b"touch {k} x\r\n"),
    c("cas with no unique", b"cas {k} 0 0 1\r\nx\r\n",
      expect=b"CLIENT_ERROR bad command line format\r\n",
      old=b"ERROR\r\nERROR\r\n"),
    c("set with an exptime past 32 bits", b"set {k} 0 9999999999 1\r\nx\r\n",
      expect=b"CLIENT_ERROR bad command line format\r\n",
      old=b"STORED\r\n"),
    c("set with a negative exptime", b"set {k} 0 -1 1\r\nx\r\nget {k}\r\n",
      expect=b"STORED\r\nEND\r\n"),
    c("HTTP request", b"GET / HTTP/1.1\r\n", closes=True),
    c("slabs automove 1", b"slabs automove 1\r\n", expect=b"OK\r\n"),
    c("slabs reassign of a bad class", b"slabs reassign 99 1\r\n"),
    c("slabs reassign with words", b"slabs reassign x y\r\n"),
    c("slabs with nothing", b"slabs\r\n"),
    c("lru mode", b"lru mode flat\r\nlru mode segmented\r\n"),
    c("lru temp_ttl", b"lru temp_ttl 100\r\n"),
    c("lru tune", b"lru tune 10 30 0.1 2.0\r\n"),
    c("lru bogus", b"lru bogus\r\n"),
    c("lru_crawler sleep", b"lru_crawler sleep 50\r\n"),
    c("lru_crawler tocrawl", b"lru_crawler tocrawl 10\r\n"),
    c("lru_crawler bogus", b"lru_crawler bogus\r\n"),
    c("lru_crawler crawl of a bad class", b"lru_crawler crawl 99\r\n"),
    c("lru_crawler mgdump of a bad class", b"lru_crawler mgdump 99\r\n",
      expect=b"BADCLASS invalid class id\r\n", old=b"ERROR\r\n"),
    c("lru_crawler metadump of a bad class",
      b"lru_crawler metadump 99\r\n"),
    c("stats bogus", b"stats bogus\r\n"),
    c("stats detail on and off", b"stats detail on\r\nstats detail off\r\n"),
    c("stats detail bogus", b"stats detail bogus\r\n"),
    c("stats reset", b"stats reset\r\n", expect=b"RESET\r\n"),
    c("stats cachedump of a bad class", b"stats cachedump 99 1\r\n"),
    c("shutdown not enabled", b"shutdown\r\n",
      expect=b"SERVER_ERROR: shutdown not enabled\r\n",
      old=b"ERROR: shutdown not enabled\r\n"),
    c("watch with a bad word", b"watch bogus\r\n"),
    c("misplaced noreply", b"get noreply\r\n"),
    # ---- stats groups, on servers of their own ---------------------------
    c("stats sizes", b"stats sizes\r\n", own=True,
      expect=b"STAT sizes_status disabled\r\nEND\r\n"),
    c("stats detail dump", b"stats detail dump\r\n", own=True,
      expect=b"END\r\n"),
    c("stats detail dump of prefixes", b"stats detail on\r\n"
      b"set p:a 0 0 1\r\nx\r\nget p:a p:b\r\ndelete p:a\r\n"
      b"stats detail dump\r\n", own=True),
    c("stats slabs, fresh", b"stats slabs\r\n", own=True),
    c("stats slabs after a set", b"set {k} 0 0 1\r\nx\r\nstats slabs\r\n",
      own=True),
    c("stats items after a set", b"stats items\r\n", own=True,
      first=b"set {k} 0 0 1\r\nx\r\n"),
    c("stats slabs of a class", b"stats slabs 1\r\n", own=True),
    c("stats cachedump", b"stats cachedump 1 1\r\n", own=True,
      first=b"set {k} 0 0 1\r\nx\r\n"),
    c("stats reset with a word", b"stats reset x\r\n", own=True),
    c("stats extstore", b"stats extstore\r\n", own=True,
      differs="no extstore: the group is unknown, as in a memcached built "
      "without it"),
]


def norm(data):
    """CAS values, remaining TTLs, file descriptors, ports, the clock and
    what the crawler's own rounds counted as shapes: they depend on
    history."""
    data = re.sub(rb"STAT \d+:", b"STAT #:", data)
    data = re.sub(rb"(?m)^(STAT items:\d+:crawler_\S+) \d+", rb"\1 #", data)
    data = re.sub(rb"127\.0\.0\.1:\d+", b"127.0.0.1:#", data)
    data = re.sub(rb"(?m)^(ITEM \S+ \[\d+ b; )\d+( s\])", rb"\1#\2", data)
    data = re.sub(rb"(?m)^STAT (\S*age\S*|\S*time\S*) \d+", rb"STAT \1 #",
                  data)
    data = re.sub(rb"(?m)^(VALUE \S+ \d+ \d+) \d+", rb"\1 #", data)
    data = re.sub(rb"(?<= )c\d+", b"c#", data)
    data = re.sub(rb"(?<= )cas=\d+", b"cas=#", data)
    return re.sub(rb"(?<= )t[1-9]\d*", b"t#", data)


class Pair:
    """A server per binary for each set of flags, shared by the cases."""

    def __init__(self):
        self.servers = {}

    def get(self, binary, flags, own=None):
        key = (binary, flags, own)
        if key not in self.servers:
            self.servers[key] = Server(binary, flags,
                                       binary == REFERENCE_BIN).start()
        touched(self.servers[key])
        return self.servers[key]

    def stop(self):
        for s in self.servers.values():
            s.stop()


@pytest.fixture(scope="module")
def servers():
    p = Pair()
    yield p
    p.stop()


BUSY = b"BUSY currently processing crawler request\r\n"


def ask(server, case, key):
    """The case's request under `key`; its replies up to the closing MN
    (or the close).  A crawl is asked for again while the crawler is busy
    with one it started itself (memcached schedules crawls of its own)."""
    if case.crawls:
        return wait_for(lambda: (got := ask_once(server, case, key)) != BUSY
                        and got, what="the crawler to take the request")
    return ask_once(server, case, key)


def ask_once(server, case, key):
    req = case.req.replace(b"{k}", key)
    first = b""
    with server.conn() as conn:
        if case.first:
            first = conn.req(case.first.replace(b"{k}", key))
            wait_for(lambda: conn.stats("items").get("items:1:number_cold")
                     == "1", what="the item to reach COLD")
        conn.send(req + (b"" if case.closes else END))
        if case.closes:
            assert conn.wait_closed(5), case.name
            return first + conn.buf
        reply = conn.read_until(MN)
    return first + reply[:-len(MN)]


def case_key(case):
    return ("compat_%d" % CASES.index(case)).encode()


PINNED = [case for case in CASES if case.expect is not None]


@pytest.mark.parametrize("case", PINNED, ids=lambda c: c.name)
@pytest.mark.engine
@pytest.mark.storage
def test_pinned_reply(servers, binary, reference, case):
    """The reply the case pins (with --reference: what 1.6.18 answers)."""
    key = case_key(case)
    want = case.old if reference and case.old is not None else case.expect
    # Servers of its own: each server sees each case once.
    got = ask(servers.get(binary, case.flags,
                          "pinned:" + (case.own and case.name or "")),
              case, key)
    assert norm(got) == norm(want.replace(b"{k}", key))


@pytest.mark.mcpm          # memcached-pm's side by side: not with --reference
@against_memcached
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
@pytest.mark.engine
@pytest.mark.storage
def test_same_as_memcached(servers, binary, case):
    """Byte for byte what Debian's memcached answers (or, where 1.6.18 is
    older, what the case says it answers; or a stated difference)."""
    key = case_key(case)
    own = case.own and case.name
    ours = norm(ask(servers.get(binary, case.flags, own), case, key))
    theirs = norm(ask(servers.get(REFERENCE_BIN, case.flags, own), case, key))
    if case.differs:
        assert ours != theirs, "now the same: drop `differs` (%s)" % (
            case.differs)
        return
    if case.old is not None:
        assert theirs == norm(case.old.replace(b"{k}", key))
        return
    assert ours == theirs


# ---- counters, value by value -------------------------------------------

# A workload touching every counter a client can move, the same on both.
WORKLOAD = (
    b"set a 1 0 1\r\nx\r\nset b 2 0 2\r\nyy\r\nadd a 0 0 1\r\nz\r\n"
    b"get a b miss\r\ngets a\r\ntouch a 100\r\ntouch miss 1\r\n"
    b"gat 0 b miss\r\nappend a 0 0 1\r\nq\r\ncas a 0 0 1 1\r\nw\r\n"
    b"cas miss 0 0 1 1\r\nw\r\nset n 0 0 1\r\n5\r\nincr n 2\r\n"
    b"decr n 1\r\nincr miss 1\r\ndecr miss 1\r\ndelete b\r\n"
    b"delete miss\r\nset t 0 1 1\r\nx\r\nmg a v\r\nmg miss v\r\n"
    b"ms m 1\r\nm\r\nmd m\r\nma n\r\nma miss q\r\nmn\r\n"
    b"set big 0 0 2000000\r\n" + b"v" * 2000000 + b"\r\n"
    b"bogus\r\nmn\r\n")

# Rows whose values belong to the process or the clock, not to the
# requests; and rows memcached-pm adds or computes on purpose otherwise.
VOLATILE = {
    "pid", "uptime", "time", "version", "libevent", "rusage_user",
    "rusage_system", "rusage_maxrss", "max_connections", "curr_connections",
    "total_connections", "connection_structures", "reserved_fds",
    "tcpport", "time_in_listen_disabled_us", "hash_bytes",
    "hash_power_level", "read_buf_count", "read_buf_bytes",
    "read_buf_bytes_free", "response_obj_count", "response_obj_bytes",
    "lru_crawler_starts", "lru_maintainer_juggles", "log_worker_written",
    "slab_global_page_pool", "total_malloced", "moves_within_lru",
    "moves_to_cold", "moves_to_warm", "lru_bumps_dropped",
    "crawler_items_checked", "crawler_reclaimed",
    # memcached frees a chunk when the last reply holding its item has been
    # written, and counts lrutail_reflocked when its maintainer meets an
    # item still held: both follow the timing of the writes.
    "used_chunks", "free_chunks", "lrutail_reflocked",
}
OURS_ONLY = {   # memcached-pm's tiers, prefetch, read path and io_uring
    "prefetch_batches", "prefetch_keys", "lockfree_hits",      # (man page)
    "ring_recv_nobufs", "ring_recv_paused", "ring_send_short",
    "ring_send_errors", "ring_close_deferred", "ring_cq_overflows",
}


# Rows 1.6.45 has and 1.6.18 names otherwise or lacks (memcached-pm
# follows 1.6.45): ours, then 1.6.18's.
V1645_ROWS = {
    "slab_reassign_busy_nomem": "slab_reassign_evictions_nomem",
    "slab_reassign_last_busy_status": None,
}


def stats_after(server):
    """stats, stats items, stats slabs after WORKLOAD; bytes_written is
    the workload's own (the start-up check's VERSION line, whose length
    differs, and the first stats reply left out)."""
    with server.conn() as conn:
        conn.send(b"stats\r\n")
        first = conn.read_until(b"END\r\n")
        before = int(re.search(rb"STAT bytes_written (\d+)", first).group(1))
        conn.send(WORKLOAD)
        conn.read_until(b"MN\r\nSERVER_ERROR object too large for cache\r\n"
                        b"ERROR\r\nMN\r\n", timeout=20)
        got = {}
        for group in ("", "items", "slabs"):
            for k, v in conn.stats(group).items():
                got[(group, k)] = v
    got[("", "bytes_written")] = str(int(got[("", "bytes_written")]) -
                                     before - len(first))
    # Which of HOT, WARM and COLD an item sits in, and so which of them a
    # hit is counted to, is the LRU maintainer's timing: the sums are not.
    for (group, k) in list(got):
        if group == "items" and re.search(r":(hits_to|number_|age_)", k):
            v = got.pop((group, k))
            if ":hits_to_" in k:
                total = (group, k.split(":hits_to_")[0] + ":hits_to_any")
                got[total] = str(int(got.get(total, "0")) + int(v))
    for ours, old in V1645_ROWS.items():
        if server.binary != REFERENCE_BIN:
            if old is None:
                got.pop(("", ours), None)
        elif old is not None and ("", old) in got:
            got[("", ours)] = got.pop(("", old))
    return got


@pytest.mark.mcpm
@against_memcached
@pytest.mark.parametrize("flags", [(), ("-o", "no_lru_maintainer"),
                                   ("-o", "no_lru_crawler,no_slab_reassign")],
                         ids=" ".join)
@pytest.mark.engine        # items in DRAM, as memcached's
def test_counters_match_memcached(binary, flags):
    """After the same requests, every counter of stats, stats items and
    stats slabs is memcached's, but the process's own rows."""
    # Items in DRAM, as memcached keeps them, whatever tier the suite's
    # pass gives other tests: a memory file's tiers count pages and copies
    # of their own (stats tiers).
    ours = Server(binary, flags + ("-o", "tier_policy=dram"), False).start()
    theirs = Server(REFERENCE_BIN, flags, True).start()
    try:
        a, b = stats_after(ours), stats_after(theirs)
    finally:
        ours.stop()
        theirs.stop()
    diffs = []
    for key in sorted(set(a) | set(b)):
        name = key[1].split(":")[-1]
        if name in VOLATILE or name in OURS_ONLY or key[1].startswith(
                ("recovery_", "tier")):
            continue
        if a.get(key) != b.get(key):
            diffs.append("%s %s: ours %s, memcached %s" % (
                key[0] or "stats", key[1], a.get(key), b.get(key)))
    assert not diffs, "\n".join(diffs)


# ---- the cases the issue names, not one request each ----------------------

# The cases run on both servers, memcached's side marked as the others.
BOTH = [pytest.param("memcached-pm", marks=ON_OURS),
        pytest.param("memcached", marks=against_memcached)]


@pytest.mark.parametrize("which", BOTH)
def test_growing_sets_at_the_default_memory_limit(binary, which):
    """A fresh server at the default -m 64 stores every one of a run of
    SETs growing to 1 MB, as memcached does (an out-of-memory answer
    between about 640 and 700 KB was the bug), and the last reads back."""
    s = start_which(which, binary)
    try:
        with s.conn(timeout=20) as conn:
            size = 1024
            while size <= 1024 * 1024 - 512:
                value = b"%c" % (97 + size % 26) * size
                conn.send(b"set grow%d 0 0 %d\r\n%s\r\n" % (size, size, value))
                assert conn.readline() == b"STORED\r\n", size
                last, size = (size, value), size + 7 * 1024 + 13
            assert conn.get_block(b"get grow%d\r\n" % last[0], timeout=20) == \
                b"VALUE grow%d 0 %d\r\n%s\r\nEND\r\n" % (last[0], last[0],
                                                         last[1])
    finally:
        s.stop()


def conns_block(binary):
    """stats conns of a fresh server seen by one connection while another
    sits idle after a get, once the start-up check's connection is gone
    and the idle one waits again; fds and ports as shapes."""
    s = Server(binary, (), binary == REFERENCE_BIN).start()
    try:
        with s.conn() as idle, s.conn() as asking:
            idle.send(b"get x\r\n")
            assert idle.readline() == b"END\r\n"

            def settled():
                block = asking.get_block(b"stats conns\r\n")
                # the idle one has gone back to waiting: its reply can
                # reach the client before its state says so
                return (len(set(re.findall(rb"STAT (\d+):", block))) == 3
                        and b":state conn_read\r\n" in block and block)
            # the asking connection first, then the idle one, as fds go
            return norm(wait_for(settled, what="the idle connection back "
                                 "in conn_read, alone with the asker"))
    finally:
        s.stop()


@pytest.mark.mcpm
@against_memcached
@pytest.mark.engine
def test_stats_conns_as_memcached(binary):
    ours = conns_block(binary)
    assert ours.count(b":state conn_read\r\n") == 1, ours
    assert sorted(ours.split(b"\r\n")) == sorted(
        conns_block(REFERENCE_BIN).split(b"\r\n"))


# ---- the binary protocol, frame by frame ----------------------------------

def bin_req(op, key=b"", val=b"", extra=b"", cas=0, vbucket=0):
    return struct.pack(">BBHBBHIIQ", 0x80, op, len(key), len(extra), 0,
                       vbucket, len(key) + len(extra) + len(val),
                       0xdeadbeef, cas) + extra + key + val


FL = struct.pack(">II", 5, 0)                   # flags 5, no expiry
DELTA = struct.pack(">QQI", 1, 7, 0)            # +1, vivify at 7
NO_VIVIFY = struct.pack(">QQI", 1, 0, 0xffffffff)

# (name, frames, 1.6.18's frames where it is older, as parsed below)
BIN_CASES = [
    ("get miss", bin_req(0, b"b1")),
    ("set and get", bin_req(1, b"b2", b"vv", FL) + bin_req(0, b"b2")),
    ("getk", bin_req(1, b"b3", b"vv", FL) + bin_req(0x0c, b"b3")),
    ("getq miss then noop", bin_req(9, b"b4") + bin_req(0x0a)),
    ("getkq hit", bin_req(1, b"b5", b"x", FL) + bin_req(0x0d, b"b5") +
     bin_req(0x0a)),
    ("add over a value", bin_req(1, b"b6", b"x", FL) +
     bin_req(2, b"b6", b"y", FL)),
    ("replace a miss", bin_req(3, b"b7", b"y", FL)),
    ("delete a miss", bin_req(4, b"b8")),
    ("incr a miss, no vivify", bin_req(5, b"b9", extra=NO_VIVIFY)),
    ("incr vivifies", bin_req(5, b"b10", extra=DELTA) + bin_req(0, b"b10")),
    ("incr on text", bin_req(1, b"b11", b"x", FL) +
     bin_req(5, b"b11", extra=DELTA)),
    ("decr below 0", bin_req(1, b"b12", b"3", FL) +
     bin_req(6, b"b12", extra=struct.pack(">QQI", 9, 0, 0))),
    ("append", bin_req(1, b"b13", b"a", FL) + bin_req(0x0e, b"b13", b"b") +
     bin_req(0, b"b13")),
    ("prepend a miss", bin_req(0x0f, b"b14", b"b")),
    ("touch", bin_req(1, b"b15", b"a", FL) +
     bin_req(0x1c, b"b15", extra=struct.pack(">I", 10))),
    ("gat", bin_req(1, b"b16", b"a", FL) +
     bin_req(0x1d, b"b16", extra=struct.pack(">I", 10))),
    ("gatq miss", bin_req(0x1e, b"b17", extra=struct.pack(">I", 10)) +
     bin_req(0x0a)),
    ("cas mismatch", bin_req(1, b"b19", b"a", FL) +
     bin_req(1, b"b19", b"b", FL, cas=12345)),
    ("cas on a miss", bin_req(1, b"b20", b"b", FL, cas=12345)),
    ("noop", bin_req(0x0a)),
    ("flush", bin_req(8)),
    ("flush later", bin_req(8, extra=struct.pack(">I", 100))),
    ("unknown opcode", bin_req(0x50)),
    ("set without extras", bin_req(1, b"b21", b"v")),
    ("get with extras", bin_req(0, b"b22", extra=b"abcd")),
    ("key of 251 bytes", bin_req(0, b"k" * 251)),
    ("too large", bin_req(1, b"b23", b"v" * 2000000, FL)),
    ("sasl list without -S", bin_req(0x20)),
    ("stat of a bad group", bin_req(0x10, b"bogus")),
    ("quit", bin_req(7)),
    ("quitq", bin_req(0x17)),
    ("setq then get", bin_req(0x11, b"b24", b"v", FL) + bin_req(0, b"b24")),
    ("deleteq of a hit", bin_req(1, b"b25", b"v", FL) +
     bin_req(0x14, b"b25") + bin_req(0x0a)),
    ("incrq", bin_req(0x15, b"b26", extra=DELTA) + bin_req(0x0a)),
    ("a vbucket", bin_req(0, b"b28", vbucket=5)),
]


END_NOOP = struct.pack(">BBHBBHIIQ", 0x80, 0x0a, 0, 0, 0, 0, 0, 0x454e44,
                       0)                    # a noop whose opaque is "END"


def bin_frames(port, data):
    """The reply frames up to the closing noop's: (magic, opcode, key
    length, extras length, status, opaque, has a cas, body; version's and
    stat's bodies left out), then "EOF" if the server closed first."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(data + END_NOOP)
        buf, out = b"", []
        while True:
            while len(buf) >= 24 and len(buf) >= 24 + struct.unpack(
                    ">I", buf[8:12])[0]:
                m, op, kl, el, _, st, bl, opq, cas = struct.unpack(
                    ">BBHBBHIIQ", buf[:24])
                body, buf = buf[24:24 + bl], buf[24 + bl:]
                if opq == 0x454e44:
                    return out
                out.append((m, op, kl, el, st, opq, cas != 0, body))
            d = s.recv(65536)
            if not d:
                return out + ["EOF"]
            buf += d


@pytest.mark.mcpm
@against_memcached
@pytest.mark.parametrize("name, data", BIN_CASES,
                         ids=[c[0] for c in BIN_CASES])
@pytest.mark.engine
@pytest.mark.storage
def test_binary_same_as_memcached(servers, binary, name, data):
    ours = bin_frames(servers.get(binary, (), "binary").port, data)
    theirs = bin_frames(servers.get(REFERENCE_BIN, (), "binary").port, data)
    assert ours == theirs


@pytest.mark.v1645
def test_binary_verbosity_is_unknown(servers, binary):
    # 1.6.45 has no binary verbosity (1.6.18 took it and answered nothing,
    # stalling the frames after it).
    got = bin_frames(servers.get(binary, (), "binary").port,
                     bin_req(0x1b, extra=struct.pack(">I", 1)))
    assert got == [(0x81, 0x1b, 0, 0, 0x81, 0xdeadbeef, False,
                    b"Unknown command")]


def test_man_page_lists_every_difference():
    page = (Path(__file__).resolve().parent.parent / "doc" /
            "memcached-pm.1").read_text()
    section = page.split(".SH DIFFERENCES FROM MEMCACHED")[1].split(".SH")[0]
    for what, (words, _) in DELIBERATE.items():
        assert words in section, what


@pytest.mark.parametrize("which", BOTH)
def test_sets_over_expired_items_count_reclaimed(binary, which):
    """Fifty SETs over fifty expired items: reclaimed and
    expired_unfetched count each expired item once it is taken, by a SET
    or by the LRU maintainer (whichever comes first, on a busy host)."""
    s = start_which(which, binary, "-o", "no_lru_crawler")
    try:
        with s.conn() as conn:
            for i in range(50):
                conn.call(b"set old%d 0 1 10\r\n0123456789\r\n" % i,
                          b"STORED\r\n")
            # expired by then for both: memcached's LRU tail takes an
            # item whose exptime is behind the clock, not at it
            wait_seconds_pass(conn, 2)
            for i in range(50):
                conn.call(b"set new%d 0 0 10\r\n0123456789\r\n" % i,
                          b"STORED\r\n")

            def counts():
                st = conn.stats()
                return (st["reclaimed"], st["expired_unfetched"],
                        st["curr_items"], st["total_items"])
            wait_for(lambda: counts() == ("50", "50", "50", "100"),
                     what="the fifty expired items taken and counted")
    finally:
        s.stop()


@pytest.mark.parametrize("which", BOTH)
def test_stats_conns_lists_by_descriptor(binary, which):
    """stats conns lists every socket by descriptor, lowest first, a
    watcher among the others: a script that takes the last row as its own
    connection (the newest, highest descriptor) finds it there, not a
    watcher's.  (Which descriptor each connection gets depends on when the
    start-up probe's closed: the order is what is checked.)"""
    s = start_which(which, binary)
    try:
        with s.conn() as first, s.conn() as watcher, s.conn() as me:
            first.sync()
            watcher.call(b"watch\r\n", b"OK\r\n")

            def rows():
                block = me.get_block(b"stats conns\r\n")
                fds = [int(fd) for fd in
                       re.findall(rb"STAT (\d+):state ", block)]
                states = re.findall(rb"STAT \d+:state (\S+)", block)
                return b"conn_watch" in states and (fds, states)
            fds, states = wait_for(rows, what="the watcher in stats conns")
            assert fds == sorted(fds) and len(set(fds)) == len(fds)
            assert states.count(b"conn_watch") == 1
    finally:
        s.stop()


@pytest.mark.parametrize("which", BOTH)
def test_no_modern_sets_reuse_flushed_and_expired_items(binary, which):
    """Under -o no_modern no maintainer walks the tails: a SET first takes
    back what is dead at its class's tail, as memcached's does.  An item
    flushed (set, a second on, flush_all) and then an item expired are
    each reclaimed by the next SET into their class, unfetched."""
    s = start_which(which, binary, "-o", "no_modern,no_lru_crawler")
    try:
        with s.conn() as conn:
            conn.call(b"set key 0 0 5\r\nhello\r\n", b"STORED\r\n")
            wait_seconds_pass(conn, 2)      # flush_all takes what is older
            conn.call(b"flush_all\r\n", b"OK\r\n")
            conn.call(b"set key 0 0 5\r\nhello\r\n", b"STORED\r\n")
            st = conn.stats()
            assert (st["reclaimed"], st["expired_unfetched"],
                    st["curr_items"]) == ("1", "1", "1")
            # in a class of their own: a live item at the tail ends the
            # look, in both
            big = b"v" * 500
            conn.call(b"set short 0 1 500\r\n%s\r\n" % big, b"STORED\r\n")
            wait_seconds_pass(conn, 2)
            conn.call(b"set other 0 0 500\r\n%s\r\n" % big, b"STORED\r\n")
            st = conn.stats()
            assert (st["reclaimed"], st["expired_unfetched"],
                    st["curr_items"]) == ("2", "2", "2")
    finally:
        s.stop()


@pytest.mark.parametrize("which", BOTH)
@pytest.mark.parametrize("cas", ["cas", "-C"])
def test_flush_all_takes_what_was_read_in_its_second(binary, which, cas):
    """An item read twice in the second of a flush_all, behind newer items
    in its list, is gone after it, in both; what is stored after it in the
    same second stays with CAS on (memcached's oldest_cas), and goes too
    with -C (its oldest_live is that very second)."""
    s = start_which(which, binary, *(("-C",) if cas == "-C" else ()))
    try:
        with s.conn() as conn:
            # once the flush and the reads after it fall in one second
            for attempt in range(5):
                got, turned = flush_in_one_second(conn)
                if not turned:
                    break
            assert not turned, "the server's second kept turning"
            assert got == (b"END\r\n" if cas == "-C" else
                           b"VALUE b 0 1\r\ny\r\nEND\r\n")
    finally:
        s.stop()


def flush_in_one_second(conn):
    """Item a read twice, then flush_all and a set of b in one second:
    what `get a b f0` answers, and whether the second turned meanwhile."""
    conn.call(b"set a 0 0 1\r\nx\r\n", b"STORED\r\n")
    for i in range(30):             # ahead of it in its list
        conn.call(b"set f%d 0 0 1\r\nx\r\n" % i, b"STORED\r\n")
    wait_seconds_pass(conn, 1)
    now = server_time(conn)
    for _ in range(2):
        conn.call(b"get a\r\n", b"VALUE a 0 1\r\nx\r\nEND\r\n")
    conn.call(b"flush_all\r\n", b"OK\r\n")
    conn.call(b"set b 0 0 1\r\ny\r\n", b"STORED\r\n")
    got = conn.get_block(b"get a b f0\r\n")
    return got, server_time(conn) != now


# ---- every meta flag, and every pair of them -------------------------------

META_FLAGS = {
    "mg": "b c f h k l O9 q s t u v E5 N30 R30 T30 x I D1 F3 C1 M J1 S3",
    "ms": "b c k O9 q s I F5 T30 C1 E7 MS ME MA MP MR MX N30 f t v x S1",
    "md": "b q I C1 E7 T30 x k O9 F4 c t v s N1",
    "ma": "b N30 J10 D3 T30 M+ M- MI MD MX q t c v k O9 C1 E8 s f",
}


def newer_than_1618(cmd, flags):
    """Flag sets 1.6.18 answers otherwise than 1.6.45: E and x came later
    (and ms's s, its size); ms N vivifies an append in 1.6.20 on; and ma
    N with q is quiet in 1.6.45."""
    if any(f[0] in "Ex" for f in flags):
        return True
    if cmd == "ms" and ("s" in flags or ("N30" in flags and
                                        {"MA", "MP"} & set(flags))):
        return True
    return cmd == "ma" and "N30" in flags and "q" in flags


@pytest.mark.mcpm
@against_memcached
@pytest.mark.parametrize("cmd", sorted(META_FLAGS))
@pytest.mark.storage
def test_meta_flag_pairs_same_as_memcached(servers, binary, cmd):
    """Each flag of the command alone and with each other one, on a miss
    and on a hit, then the item as mg sees it: memcached's bytes."""
    flags = META_FLAGS[cmd].split()
    ours = servers.get(binary, (), "pairs")
    theirs = servers.get(REFERENCE_BIN, (), "pairs")
    combos = [(f,) for f in flags] + list(itertools.combinations(flags, 2))
    diffs = []
    for n, combo in enumerate(combos):
        if newer_than_1618(cmd, combo):
            continue
        for hit in (False, True):
            key = b"a2V5" if "b" in combo else b"%s_%d_%d" % (
                cmd.encode(), n, hit)
            fl = " ".join(combo).encode()
            req = b"set %s 3 0 1\r\n5\r\n" % key if hit else b""
            req += (b"ms %s 1 %s\r\n9\r\n" % (key, fl) if cmd == "ms"
                    else b"%s %s %s\r\n" % (cmd.encode(), key, fl))
            req += b"mg %s v f t c\r\n" % key
            if "b" in combo:
                req += b"md a2V5 b q\r\n"       # the next pair starts clean
            case = Case(fl.decode(), req)
            a, b = (norm(ask(s, case, key)) for s in (ours, theirs))
            if a != b:
                diffs.append("%r: ours %r, memcached %r" % (req, a, b))
    assert not diffs, "\n".join(diffs[:20])


def grown_to(c, items, nbytes):
    """Wait until the table has settled after `items` sets (a growth runs
    in the background on both servers) at `nbytes` of buckets or more;
    its stats."""
    def settled():
        st = c.stats()
        return st if (st["hash_is_expanding"] == "0" and
                      int(st["curr_items"]) == items and
                      int(st["hash_bytes"]) >= nbytes) else None
    return wait_for(settled, 30, "the table to settle")


@pytest.mark.parametrize("which", BOTH)
@pytest.mark.parametrize("items,level", [(98000, 16), (131072, 17),
                                         (400000, 19)])
def test_hash_power_level_follows_memcacheds_rule(binary, which, items,
                                                  level):
    """hash_power_level is the power of two of buckets the table has
    reached: memcached doubles its table past 1.5 items a bucket, so from
    2^16 buckets 98,000 items leave it at 16, 131,072 (memcached's
    t/restart.t) take it to 17, 400,000 to 19.  memcached-pm's table
    grows a bucket at a time to the same 1.5 items a bucket and reports
    the level it has reached; hash_bytes is what its buckets take."""
    buckets = max(1 << 16, items * 2 // 3)
    s = start_which(which, binary, "-o", "hashpower=16", "-m", "128")
    try:
        with s.conn(timeout=30) as c:
            for i in range(items):
                c.send(b"set hk%d 0 0 1 noreply\r\nv\r\n" % i)
            c.sync()
            # memcached-pm: 4 bytes a bucket; memcached: 8
            st = grown_to(c, items, buckets * 4 if which == "memcached-pm"
                          else 8 << level)
            assert st["hash_power_level"] == str(level)
            if which == "memcached-pm":
                assert int(st["hash_bytes"]) == buckets * 4
    finally:
        s.stop()
