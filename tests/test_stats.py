"""`stats` and its sub-commands: names, formats and counters that move."""

import re

import pytest

from conftest import wait_for

# Most counters count items, pages and their moves.
pytestmark = pytest.mark.storage

# Reference §4.1 names printed by both 1.6.18 and 1.6.45 with default flags.
GENERAL = """
pid uptime time version libevent pointer_size rusage_user rusage_system
max_connections curr_connections total_connections rejected_connections
connection_structures response_obj_oom response_obj_count response_obj_bytes
read_buf_count read_buf_bytes read_buf_bytes_free read_buf_oom reserved_fds
cmd_get cmd_set cmd_flush cmd_touch cmd_meta get_hits get_misses get_expired
get_flushed delete_misses delete_hits incr_misses incr_hits decr_misses
decr_hits cas_misses cas_hits cas_badval touch_hits touch_misses
store_too_large store_no_memory auth_cmds auth_errors bytes_read
bytes_written limit_maxbytes accepting_conns listen_disabled_num
time_in_listen_disabled_us threads conn_yields hash_power_level hash_bytes
hash_is_expanding slab_reassign_rescues slab_reassign_chunk_rescues
slab_reassign_inline_reclaim slab_reassign_busy_items
slab_reassign_busy_deletes slab_reassign_running slabs_moved
lru_crawler_running lru_crawler_starts lru_maintainer_juggles malloc_fails
log_worker_dropped log_worker_written log_watcher_skipped log_watcher_sent
log_watchers bytes curr_items total_items slab_global_page_pool
expired_unfetched evicted_unfetched evicted_active evictions reclaimed
crawler_reclaimed crawler_items_checked lrutail_reflocked moves_to_cold
moves_to_warm moves_within_lru direct_reclaims lru_bumps_dropped
""".split()

GENERAL_1645 = ["slab_reassign_busy_nomem", "slab_reassign_last_busy_status"]

SETTINGS = """
maxbytes maxconns tcpport udpport inter verbosity oldest evictions
domain_socket umask shutdown_command growth_factor chunk_size num_threads
num_threads_per_udp stat_key_prefix detail_enabled reqs_per_event
cas_enabled tcp_backlog binding_protocol auth_enabled_sasl
auth_enabled_ascii item_size_max maxconns_fast hashpower_init slab_reassign
slab_automove slab_automove_ratio slab_automove_window slab_chunk_max
lru_crawler lru_crawler_sleep lru_crawler_tocrawl tail_repair_time
flush_enabled dump_enabled hash_algorithm lru_maintainer_thread
lru_segmented hot_lru_pct warm_lru_pct hot_max_factor warm_max_factor
temp_lru temporary_ttl idle_timeout watcher_logbuf_size worker_logbuf_size
read_buf_mem_limit track_sizes inline_ascii_response slab_automove_freeratio
num_napi_ids memory_file
""".split()

# memcached prints the ext_* settings only when built with extstore (as
# Debian's is); memcached-pm has no extstore, so, like a memcached built
# without it, it prints none of them.
EXTSTORE_SETTINGS = """
ext_item_size ext_item_age ext_low_ttl ext_recache_rate ext_wbuf_size
ext_compact_under ext_drop_under ext_max_sleep ext_max_frag ext_drop_unread
""".split()

ITEMS = """
number number_hot number_warm number_cold age_hot age_warm age
mem_requested evicted evicted_nonzero evicted_time outofmemory tailrepairs
reclaimed expired_unfetched evicted_unfetched evicted_active
crawler_reclaimed crawler_items_checked lrutail_reflocked moves_to_cold
moves_to_warm moves_within_lru direct_reclaims hits_to_hot hits_to_warm
hits_to_cold hits_to_temp
""".split()

SLABS = """
chunk_size chunks_per_page total_pages total_chunks used_chunks free_chunks
free_chunks_end get_hits cmd_set delete_hits incr_hits decr_hits cas_hits
cas_badval touch_hits
""".split()

STAT_LINE = re.compile(rb"^STAT \S+ \S+\r\n$")


def lines_of(block):
    out = block.split(b"\r\n")
    assert out[-2:] == [b"END", b""], block[-100:]
    return [l + b"\r\n" for l in out[:-2]]


def test_general_names_present(conn):
    block = conn.get_block(b"stats\r\n")
    for line in lines_of(block):
        assert STAT_LINE.match(line), line
    s = conn.stats()
    missing = [k for k in GENERAL if k not in s]
    assert not missing
    assert re.match(r"^1\.6\.\d+", s["version"])
    assert int(s["pid"]) == conn_pid(conn)
    assert int(s["threads"]) == 4
    assert int(s["limit_maxbytes"]) == 64 * 1024 * 1024
    assert int(s["hash_power_level"]) == 16
    assert re.match(r"^\d+\.\d{6}$", s["rusage_user"])
    assert s["accepting_conns"] == "1"


def conn_pid(conn):
    return int(conn.stats()["pid"])


@pytest.mark.v1645
def test_general_names_1645(conn):
    s = conn.stats()
    assert all(k in s for k in GENERAL_1645)


def test_pid_is_the_process(mc):
    assert int(mc.stats()["pid"]) == mc.pid


@pytest.fixture
def fresh(server_factory, request):
    """A connection to a server of its own: exact gauges."""
    s = server_factory()
    c = s.conn()
    yield c
    if request.node.rep_call.passed:
        c.sync()
    c.close()


def test_counters_move(fresh):
    conn = fresh
    before = conn.stats()
    conn.call(b"set a 0 0 5\r\nhello\r\nset b 0 0 2\r\nhi\r\n",
              b"STORED\r\nSTORED\r\n")
    conn.call(b"get a b nokey\r\n",
              b"VALUE a 0 5\r\nhello\r\nVALUE b 0 2\r\nhi\r\nEND\r\n")
    conn.call(b"delete b\r\ndelete b\r\n", b"DELETED\r\nNOT_FOUND\r\n")
    conn.call(b"set n 0 0 1\r\n1\r\nincr n 1\r\nincr x 1\r\n",
              b"STORED\r\n2\r\nNOT_FOUND\r\n")
    conn.call(b"decr n 1\r\ndecr x 1\r\n", b"1\r\nNOT_FOUND\r\n")
    conn.call(b"touch a 0\r\ntouch x 0\r\n", b"TOUCHED\r\nNOT_FOUND\r\n")
    conn.call(b"cas x 0 0 1 1\r\nx\r\ncas a 0 0 1 999999\r\nx\r\n",
              b"NOT_FOUND\r\nEXISTS\r\n")
    after = conn.stats()

    def d(k):
        return int(after[k]) - int(before[k])

    assert d("cmd_get") == 3
    assert d("get_hits") == 2
    assert d("get_misses") == 1
    assert d("cmd_set") == 5          # set a, set b, set n, 2 x cas
    assert d("delete_hits") == 1 and d("delete_misses") == 1
    assert d("incr_hits") == 1 and d("incr_misses") == 1
    assert d("decr_hits") == 1 and d("decr_misses") == 1
    assert d("cmd_touch") == 2
    assert d("touch_hits") == 1 and d("touch_misses") == 1
    assert d("cas_misses") == 1 and d("cas_badval") == 1
    assert d("total_items") >= 3
    assert d("bytes_read") > 0 and d("bytes_written") > 0
    assert int(after["curr_items"]) == 2          # a and n
    # per-item bytes: 48 hdr + 8 cas + key+1 + value+2
    assert int(after["bytes"]) == (48 + 8 + 2 + 7) + (48 + 8 + 2 + 3)


def test_cas_hits_and_flush_counters(conn):
    conn.call(b"set a 0 0 1\r\nx\r\n", b"STORED\r\n")
    block = conn.get_block(b"gets a\r\n")
    cas = int(block.split(b"\r\n")[0].split()[-1])
    before = conn.stats()
    conn.call(b"cas a 0 0 1 %d\r\ny\r\n" % cas, b"STORED\r\n")
    conn.call(b"flush_all\r\n", b"OK\r\n")
    after = conn.stats()
    assert int(after["cas_hits"]) - int(before["cas_hits"]) == 1
    assert int(after["cmd_flush"]) - int(before["cmd_flush"]) == 1
    assert after["curr_items"] == "0" or int(after["curr_items"]) <= 1


def test_flushed_items_are_reclaimed(server_factory):
    """Items flush_all makes dead are counted as memcached counts them
    once they leave: reclaimed, and expired_unfetched for those nobody
    read (memcached's LRU maintainer takes them off within a second)."""
    s = server_factory()
    with s.conn() as c:
        c.call(b"set a 0 0 1\r\n1\r\n", b"STORED\r\n")
        c.call(b"get a\r\n", b"VALUE a 0 1\r\n1\r\nEND\r\n")
        c.call(b"set b 0 0 1\r\n1\r\nset d 0 0 1\r\n1\r\n",
               b"STORED\r\nSTORED\r\n")
        c.call(b"flush_all\r\n", b"OK\r\n")
        c.call(b"set c 0 0 1\r\n1\r\n", b"STORED\r\n")
    wait_for(lambda: s.stats()["reclaimed"] == "3",
             what="the three flushed items reclaimed")
    st = s.stats()
    assert (st["reclaimed"], st["expired_unfetched"], st["curr_items"]) == \
        ("3", "2", "1")
    items = s.stats("items")
    assert (items["items:1:reclaimed"], items["items:1:expired_unfetched"]) \
        == ("3", "2")


def test_connection_counters(mc):
    before = mc.stats()
    conns = [mc.conn() for _ in range(3)]
    for c in conns:
        c.sync()
    mid = mc.stats()
    for c in conns:
        c.close()
    assert (int(mid["total_connections"])
            >= int(before["total_connections"]) + 4)
    # closed connections leave the count (a close is noticed a little
    # later; a stale one may also have inflated `before`)
    wait_for(lambda: int(mc.stats()["curr_connections"])
             <= int(mid["curr_connections"]) - 3,
             what="the closed connections to leave the count")


def test_settings_format(conn):
    block = conn.get_block(b"stats settings\r\n")
    for line in lines_of(block):
        assert len(line[:-2].split(b" ")) == 3, line
    s = conn.stats("settings")
    missing = [k for k in SETTINGS if k not in s]
    assert not missing
    assert s["maxbytes"] == str(64 * 1024 * 1024)
    assert s["maxconns"] == "1024"
    assert s["tcpport"] == str(mc_port(conn))
    assert s["udpport"] == "0"
    assert s["evictions"] == "on"
    assert s["cas_enabled"] == "yes"
    assert s["growth_factor"] == "1.25"
    assert s["chunk_size"] == "48"
    assert s["num_threads"] == "4"
    assert s["item_size_max"] == "1048576"
    assert s["hashpower_init"] == "0"
    assert s["lru_crawler"] == "yes"
    assert s["lru_maintainer_thread"] == "yes"
    assert s["slab_reassign"] == "yes"
    assert s["slab_automove"] == "1"
    assert s["slab_chunk_max"] == "524288"
    assert s["hot_lru_pct"] == "20" and s["warm_lru_pct"] == "40"
    assert s["temp_lru"] == "no"
    for k, v in s.items():
        assert " " not in v, (k, v)


def mc_port(conn):
    return conn.sock.getpeername()[1]


@pytest.mark.v1645
def test_settings_1645(conn):
    s = conn.stats("settings")
    assert "client_flags_size" in s
    assert s["slab_automove_window"] == "10"
    # No extstore here, so none of its settings (see EXTSTORE_SETTINGS).
    assert [k for k in EXTSTORE_SETTINGS if k in s] == []


def test_settings_follow_flags(server_factory):
    s = server_factory("-m", "100", "-c", "500", "-t", "2", "-C", "-f",
                       "1.5", "-n", "64", "-I", "2m", "-R", "7", "-M", "-o",
                       "hashpower=18,idle_timeout=30,lru_crawler_sleep=50")
    st = s.stats("settings")
    assert st["maxbytes"] == str(100 * 1024 * 1024)
    assert st["maxconns"] == "500"
    assert st["num_threads"] == "2"
    assert st["cas_enabled"] == "no"
    assert st["growth_factor"] == "1.50"
    assert st["chunk_size"] == "64"
    assert st["item_size_max"] == str(2 * 1024 * 1024)
    assert st["reqs_per_event"] == "7"
    assert st["evictions"] == "off"
    assert st["hashpower_init"] == "18"
    assert st["idle_timeout"] == "30"
    assert st["lru_crawler_sleep"] == "50"
    g = s.stats()
    assert g["hash_power_level"] == "18"
    assert g["threads"] == "2"
    assert "idle_kicks" in g


def in_memcached_order(names, order):
    """The names that `order` lists come in its order."""
    got = [n for n in names if n in order]
    return got == [n for n in order if n in got]


def stat_names(block, prefix=b""):
    return [l.split(b" ")[1][len(prefix):].decode() for l in lines_of(block)
            if l.split(b" ")[1].startswith(prefix)]


def test_general_order(conn):
    names = stat_names(conn.get_block(b"stats\r\n"))
    assert in_memcached_order(names, GENERAL), names


def test_settings_order(conn):
    names = stat_names(conn.get_block(b"stats settings\r\n"))
    assert in_memcached_order(names, SETTINGS), names


def test_items_order(server_factory):
    # number_temp, printed with the TEMP LRU, comes after number_cold
    s = server_factory("-o", "temporary_ttl=30")
    with s.conn() as c:
        c.call(b"set a 0 0 1\r\nx\r\n", b"STORED\r\n")
        names = stat_names(c.get_block(b"stats items\r\n"), b"items:1:")
    order = ITEMS[:4] + ["number_temp"] + ITEMS[4:]
    assert names == order


def test_slabs_order(conn):
    conn.call(b"set a 0 0 1\r\nx\r\n", b"STORED\r\n")
    names = stat_names(conn.get_block(b"stats slabs\r\n"), b"1:")
    assert names == SLABS


def test_items(conn):
    conn.call(b"set a 0 0 1\r\nx\r\nset b 0 0 3000\r\n%s\r\n" % (b"y" * 3000),
              b"STORED\r\nSTORED\r\n")
    block = conn.get_block(b"stats items\r\n")
    classes = set()
    for line in lines_of(block):
        m = re.match(rb"^STAT items:(\d+):(\w+) (\d+)\r\n$", line)
        assert m, line
        classes.add(int(m.group(1)))
    assert len(classes) == 2
    s = conn.stats("items")
    for cls in classes:
        for f in ITEMS:
            assert "items:%d:%s" % (cls, f) in s, f
        assert s["items:%d:number" % cls] == "1"


def test_items_temp_lru(server_factory):
    # number_temp is printed only when the TEMP LRU is on
    s = server_factory("-o", "temporary_ttl=30")
    with s.conn() as c:
        c.call(b"set a 0 0 1\r\nx\r\nset b 0 10 1\r\ny\r\n",
               b"STORED\r\nSTORED\r\n")
        st = c.stats("items")
        assert st["items:1:number_temp"] == "1"
        assert c.stats("settings")["temp_lru"] == "yes"


def test_slabs(conn):
    conn.call(b"set a 0 0 1\r\nx\r\n", b"STORED\r\n")
    conn.call(b"get a\r\n", b"VALUE a 0 1\r\nx\r\nEND\r\n")
    s = conn.stats("slabs")
    assert "active_slabs" in s and "total_malloced" in s
    ids = sorted({int(k.split(":")[0]) for k in s if ":" in k})
    assert ids and int(s["active_slabs"]) == len(ids)
    for i in ids:
        for f in SLABS:
            assert "%d:%s" % (i, f) in s, f
    assert s["1:chunk_size"] == "96"
    assert s["1:chunks_per_page"] == "10922"
    assert int(s["1:used_chunks"]) >= 1
    assert int(s["1:get_hits"]) >= 1
    assert int(s["total_malloced"]) >= 1048576


def test_sizes_disabled(conn):
    conn.call(b"stats sizes\r\n", b"STAT sizes_status disabled\r\nEND\r\n")


def test_sizes_tracked(server_factory):
    s = server_factory("-o", "track_sizes")
    with s.conn() as c:
        c.call(b"set a 0 0 1\r\nx\r\n", b"STORED\r\n")
        block = c.get_block(b"stats sizes\r\n")
    lines = lines_of(block)
    assert lines and all(re.match(rb"^STAT \d+ \d+\r\n$", l)
                         for l in lines if b"sizes_status" not in l)
    assert any(l.endswith(b" 1\r\n") for l in lines)


def test_conns(conn):
    port = mc_port(conn)
    me = conn.sock.getsockname()[1]
    s = conn.stats("conns")
    addrs = {k: v for k, v in s.items() if k.endswith(":addr")}
    assert "tcp:127.0.0.1:%d" % port in addrs.values()
    assert "tcp:127.0.0.1:%d" % me in addrs.values()
    for k in addrs:
        fd = k.split(":")[0]
        assert fd.isdigit()
        assert s[fd + ":state"].startswith("conn_")
        assert fd + ":secs_since_last_cmd" in s
    listeners = [k for k, v in s.items()
                 if k.endswith(":state") and v == "conn_listening"]
    assert len(listeners) == 1


def test_reset(fresh):
    conn = fresh
    conn.call(b"set a 0 0 1\r\nx\r\nget a\r\nget b\r\n",
              b"STORED\r\nVALUE a 0 1\r\nx\r\nEND\r\nEND\r\n")
    conn.call(b"stats reset\r\n", b"RESET\r\n")
    s = conn.stats()
    for k in ("cmd_get", "cmd_set", "get_hits", "get_misses",
              "total_items", "evictions", "delete_hits"):
        assert s[k] == "0", k
    # gauges survive a reset
    assert s["curr_items"] == "1"
    assert int(s["bytes"]) > 0


def test_detail(conn):
    conn.call(b"stats detail on\r\n", b"OK\r\n")
    try:
        conn.call(b"set p:a 0 0 1\r\n1\r\nget p:a\r\nget p:b\r\n"
                  b"delete p:a\r\n",
                  b"STORED\r\nVALUE p:a 0 1\r\n1\r\nEND\r\nEND\r\n"
                  b"DELETED\r\n")
        conn.call(b"stats detail dump\r\n",
                  b"PREFIX p get 2 hit 1 set 1 del 1\r\nEND\r\n")
    finally:
        conn.call(b"stats detail off\r\n", b"OK\r\n")
    conn.call(b"stats detail\r\n",
              b"CLIENT_ERROR usage: stats detail on|off|dump\r\n")
    conn.call(b"stats detail foo\r\n",
              b"CLIENT_ERROR usage: stats detail on|off|dump\r\n")


def test_reset_forgets_the_prefixes(conn):
    """stats reset empties stats detail dump, as memcached's does; the
    detail stays on and counts again from nothing."""
    conn.call(b"stats reset\r\n", b"RESET\r\n")   # other tests' prefixes
    conn.call(b"stats detail on\r\n", b"OK\r\n")
    try:
        conn.call(b"set r:a 0 0 1\r\n1\r\nget r:a\r\n",
                  b"STORED\r\nVALUE r:a 0 1\r\n1\r\nEND\r\n")
        conn.call(b"stats detail dump\r\n",
                  b"PREFIX r get 1 hit 1 set 1 del 0\r\nEND\r\n")
        conn.call(b"stats reset\r\n", b"RESET\r\n")
        conn.call(b"stats detail dump\r\n", b"END\r\n")
        conn.call(b"get q:b\r\n", b"END\r\n")
        conn.call(b"stats detail dump\r\n",
                  b"PREFIX q get 1 hit 0 set 0 del 0\r\nEND\r\n")
    finally:
        conn.call(b"stats detail off\r\n", b"OK\r\n")
        conn.call(b"stats reset\r\n", b"RESET\r\n")


def test_unknown_stats(conn):
    conn.call(b"stats foo\r\n", b"ERROR\r\n")


# ---------------------------------------------------------------------------
# stats cachedump
# ---------------------------------------------------------------------------

def wait_cold(c, clsid, n):
    """cachedump lists a class's COLD LRU, as memcached's does; new items
    reach it on the LRU maintainer's next pass."""
    wait_for(lambda: c.stats("items").get("items:%d:number_cold" % clsid)
             == str(n), what="the items to reach COLD")


@pytest.fixture
def alone(server_factory):
    """A connection to a server of the test's own: cachedump lists what
    the LRU holds, and items flushed by earlier tests stay there (unlisted
    nowhere else) until they are reclaimed, as in memcached."""
    with server_factory().conn() as c:
        yield c


def test_cachedump(alone):
    conn = alone
    t0 = int(conn.stats()["time"])
    conn.call(b"set a 0 100 5\r\nhello\r\n", b"STORED\r\n")
    conn.call(b"set bb 0 0 3\r\nxyz\r\n", b"STORED\r\n")
    t1 = int(conn.stats()["time"])
    wait_cold(conn, 1, 2)
    block = conn.get_block(b"stats cachedump 1 0\r\n")
    lines = block.split(b"\r\n")
    assert lines[0] == b"ITEM bb [3 b; 0 s]"
    exp = int(re.fullmatch(rb"ITEM a \[5 b; (\d+) s\]", lines[1]).group(1))
    assert t0 + 100 <= exp <= t1 + 100
    assert lines[2:] == [b"END", b""]
    conn.call(b"stats cachedump 1 1\r\n", b"ITEM bb [3 b; 0 s]\r\nEND\r\n")
    conn.call(b"stats cachedump 1 1 extra\r\n",
              b"ITEM bb [3 b; 0 s]\r\nEND\r\n")
    conn.call(b"stats cachedump 2 0\r\n", b"END\r\n")
    conn.call(b"stats cachedump 63 0\r\n", b"END\r\n")


@pytest.mark.parametrize("line, reply", [
    (b"stats cachedump 64 0", b"CLIENT_ERROR Illegal slab id"),
    (b"stats cachedump 1", b"CLIENT_ERROR bad command line"),
    (b"stats cachedump", b"CLIENT_ERROR bad command line"),
    (b"stats cachedump x 1", b"CLIENT_ERROR bad command line format"),
    (b"stats cachedump -1 1", b"CLIENT_ERROR bad command line format"),
    (b"stats cachedump 1 -1", b"CLIENT_ERROR bad command line format"),
    (b"stats cachedumpx 1 1", b"ERROR"),
])
def test_cachedump_refusals(conn, line, reply):
    conn.call(line + b"\r\n", reply + b"\r\n")


def test_cachedump_disabled(server_factory):
    s = server_factory("-X")
    with s.conn() as c:
        c.call(b"stats cachedump 1 0\r\n",
               b"CLIENT_ERROR stats cachedump not allowed\r\n")


@pytest.mark.v1645
def test_cachedump_skips_binary_keys(alone):
    conn = alone
    conn.call(b"ms YmluAGtleQ== 1 b\r\nx\r\n", b"HD\r\n")    # "bin\0key"
    conn.call(b"set plain 0 0 1\r\ny\r\n", b"STORED\r\n")
    wait_cold(conn, 1, 2)
    conn.call(b"stats cachedump 1 0\r\n", b"ITEM plain [1 b; 0 s]\r\nEND\r\n")


def test_cachedump_stops_at_two_megabytes(server_factory):
    s = server_factory("-m", "128")
    with s.conn(timeout=30) as c:
        key = b"k" * 240
        c.send(b"".join(b"set %s%05d 0 0 1 noreply\r\nx\r\n" % (key, i)
                        for i in range(9000)))
        c.sync()
        cls = int([k for k, v in c.stats("items").items()
                   if k.endswith(":number") and v == "9000"][0].split(":")[1])
        wait_cold(c, cls, 9000)
        block = c.get_block(b"stats cachedump %d 0\r\n" % cls)
    line = len(b"ITEM %s00000 [1 b; 0 s]\r\n" % key)
    # as many whole lines as leave room for END under 2 MB
    assert block.count(b"\r\nITEM ") + 1 == (2 * 1024 * 1024 - 6) // line
    assert block.endswith(b" s]\r\nEND\r\n")
