"""Every option memcached 1.6.45 takes, as memcached takes it (issue 19).

Accepted: each option and value starts the server, and `stats settings`
shows it as memcached shows it (the rows named, value by value; with
Debian's memcached installed, the same rows of memcached under the same
options too, where 1.6.18 is not older).  Refused: memcached's exit code
and message, and memcached's too where 1.6.18 is not older.

Covered in their own files, as they need more than a start: -d and -P
(test_process.py), -s and -a (test_flags.py), -S (test_auth.py), -Y
(test_auth.py), -Z and the ssl_* suboptions (test_tls.py), -e and
memory_file (test_pmem.py), -u (test_process.py), -k and -r
(test_process.py), -h, -V and -i (test_flags.py).
"""

import os
import subprocess

import pytest

from conftest import REFERENCE_BIN, Server, run_binary

HAVE_MEMCACHED = os.access(REFERENCE_BIN, os.X_OK)

OLD = "1.6.18 differs"      # marks a row memcached 1.6.18 shows otherwise

# (options, {stats settings row: value}, rows 1.6.18 shows otherwise)
ACCEPTED = [
    (["-m", "100"], {"maxbytes": "104857600"}),
    (["-m", "64m"], {"maxbytes": "67108864"}),     # atoi: the m is ignored
    (["-m", "2.5"], {"maxbytes": "2097152"}),
    (["-c", "500"], {"maxconns": "500"}),
    (["-v"], {"verbosity": "1"}),
    (["-vv"], {"verbosity": "2"}),
    (["-vvv"], {"verbosity": "3"}),
    (["-M"], {"evictions": "off"}),
    (["-A"], {"shutdown_command": "yes"}),
    (["-f", "1.5"], {"growth_factor": "1.50"}),
    (["-n", "96"], {"chunk_size": "96"}),
    (["-t", "2"], {"num_threads": "2", "num_threads_per_udp": "2"}),
    (["-D", "/"], {"stat_key_prefix": "/", "detail_enabled": "yes"}),
    (["-R", "5"], {"reqs_per_event": "5"}),
    (["-C"], {"cas_enabled": "no"}),
    (["-b", "100"], {"tcp_backlog": "100"}),
    (["-B", "ascii"], {"binding_protocol": "ascii"}),
    (["-B", "auto"], {"binding_protocol": "auto-negotiate"}),
    (["-I", "2m"], {"item_size_max": "2097152", "slab_chunk_max": "524288"}),
    (["-I", "512k"], {"item_size_max": "524288"}),
    (["-I", "1.5m"], {"item_size_max": "1048576"}),    # atoi of "1.5"
    (["-c", "5000"], {"maxconns": "5000"}),
    (["-F"], {"flush_enabled": "no"}),
    (["-X"], {"dump_enabled": "no"}),
    (["-W"], {}),
    (["-L"], {}),
    (["-o", "maxconns_fast"], {"maxconns_fast": "yes"}),
    (["-o", "no_maxconns_fast"], {"maxconns_fast": "no"}),
    (["-o", "hashpower=20"], {"hashpower_init": "20"}),
    (["-o", "no_hashexpand"], {}),
    (["-o", "slab_reassign"], {"slab_reassign": "yes"}),
    (["-o", "no_slab_reassign"], {"slab_reassign": "no"}),
    (["-o", "slab_automove=2"], {"slab_automove": "2"}),
    (["-o", "slab_automove"], {"slab_automove": "1"}),
    (["-o", "no_slab_automove"], {"slab_automove": "0"}),
    (["-o", "slab_automove_ratio=0.5"], {"slab_automove_ratio": "0.50"}),
    (["-o", "slab_automove_window=20"], {"slab_automove_window": "20"}),
    (["-o", "tail_repair_time=60"], {"tail_repair_time": "60"}),
    (["-o", "hash_algorithm=murmur3"], {"hash_algorithm": "murmur3"}),
    (["-o", "hash_algorithm=jenkins"], {"hash_algorithm": "jenkins"}),
    (["-o", "hash_algorithm=xxh3"], {"hash_algorithm": "xxh3"}),
    (["-o", "lru_crawler"], {"lru_crawler": "yes"}),
    (["-o", "no_lru_crawler"], {"lru_crawler": "no"}),
    (["-o", "lru_crawler_sleep=200"], {"lru_crawler_sleep": "200"}),
    (["-o", "lru_crawler_tocrawl=50"], {"lru_crawler_tocrawl": "50"}),
    (["-o", "lru_maintainer"], {"lru_maintainer_thread": "yes",
                                "lru_segmented": "yes"}),
    (["-o", "no_lru_maintainer"], {"lru_maintainer_thread": "no",
                                   "lru_segmented": "no"}),
    (["-o", "hot_lru_pct=30"], {"hot_lru_pct": "30"}),
    (["-o", "warm_lru_pct=30"], {"warm_lru_pct": "30"}),
    (["-o", "hot_max_factor=0.5"], {"hot_max_factor": "0.50"}),
    (["-o", "warm_max_factor=3"], {"warm_max_factor": "3.00"}),
    (["-o", "temporary_ttl=30"], {"temp_lru": "yes", "temporary_ttl": "30"}),
    (["-o", "idle_timeout=10"], {"idle_timeout": "10"}),
    (["-o", "watcher_logbuf_size=128"], {"watcher_logbuf_size": "131072"}),
    (["-o", "worker_logbuf_size=32"], {"worker_logbuf_size": "32768"}),
    (["-o", "read_buf_mem_limit=4"], {"read_buf_mem_limit": "4194304"}),
    (["-o", "resp_obj_mem_limit"], {}),
    (["-o", "slab_sizes=100-200-400-800"], {}),
    (["-o", "track_sizes"], {"track_sizes": "yes"}),
    (["-o", "inline_ascii_resp"], {"inline_ascii_response": "no"}),
    (["-o", "no_inline_ascii_resp"], {"inline_ascii_response": "no"}),
    (["-o", "no_chunked_items"], {"slab_chunk_max": "1048576"}),
    (["-o", "modern"], {}),
    (["-o", "no_modern"], {"slab_reassign": "no", "slab_automove": "0",
                           "maxconns_fast": "no", "lru_segmented": "no",
                           "lru_crawler": "no", "slab_chunk_max": "1048576",
                           "hash_algorithm": "jenkins"}),
    (["-o", "drop_privileges"], {}),
    (["-o", "no_drop_privileges"], {}),
    (["-o", "resp_obj_mem_limit=10"], {}),
    (["-o", "slab_chunk_max=16"], {"slab_chunk_max": "16384"}),
    (["-o", "slab_chunk_max=1"], {"slab_chunk_max": "1024"}),
    (["-o", "slab_chunk_max=1024"], {"slab_chunk_max": "1048576"}),
    (["-I", "2m", "-o", "slab_chunk_max=256"], {"slab_chunk_max": "262144"}),
    (["-N", "2"], {"num_napi_ids": "2"}),
    (["-o", "sock_cookie_id=7"], {}),
    (["-o", "sock_cookie_id=x"], {}),       # memcached reads it as 0
]

# Rows memcached 1.6.18 shows otherwise than 1.6.45 for these options
# (or options it takes otherwise): compared with memcached-pm only.
OLD_ROWS = {
    "-o slab_chunk_max=16": "1.6.18 reads it in bytes",
    "-o slab_chunk_max=1": "1.6.18 reads it in bytes",
    "-o slab_chunk_max=1024": "1.6.18 reads it in bytes",
    "-I 2m -o slab_chunk_max=256": "1.6.18 reads it in bytes",
    "-N 2": "1.6.18 shows (null) for num_napi_ids",
    "-o worker_logbuf_size=32": "1.6.18 takes it for slab_sizes",
    "-o hash_algorithm=xxh3": "memcached-pm's default (man page)",
    "-o no_modern": "1.6.18 keeps murmur3 under no_modern",
}

# memcached-pm's defaults that are not memcached's (man page's list).
OWN_DEFAULTS = {"hash_algorithm": "xxh3"}


def settings(binary, args, reference=False):
    s = Server(binary, args, reference).start()
    try:
        return s.stats("settings"), s.stderr()
    finally:
        s.stop()


def name(args):
    return " ".join(args)


def marked(cases, old):
    """The cases, those named in `old` marked v1645 (not for 1.6.18)."""
    return [pytest.param(*c, marks=pytest.mark.v1645, id=name(c[0]))
            if name(c[0]) in old else pytest.param(*c, id=name(c[0]))
            for c in cases]


@pytest.mark.storage         # sizes, classes, hashes, threads: the file's
@pytest.mark.parametrize("args, rows", marked(ACCEPTED, OLD_ROWS))
def test_accepted(binary, reference, args, rows):
    got, _ = settings(binary, args, reference)
    for row, value in rows.items():
        assert got.get(row) == value, (row, got.get(row))


@pytest.mark.mcpm
@pytest.mark.skipif(not HAVE_MEMCACHED, reason="Debian's memcached is not "
                    "installed")
@pytest.mark.parametrize("args, rows", [pytest.param(*a, id=name(a[0]))
                                        for a in ACCEPTED
                                        if name(a[0]) not in OLD_ROWS])
def test_accepted_as_memcached_shows_it(binary, args, rows):
    ours, _ = settings(binary, args)
    theirs, _ = settings(REFERENCE_BIN, args, True)
    for row in set(theirs) & set(ours):
        if row in ("tcpport", "num_napi_ids", "memory_file") or \
                row in OWN_DEFAULTS or \
                row == "slab_automove_window":   # 10 in 1.6.45, 30 before
            continue
        assert ours[row] == theirs[row], (row, ours[row], theirs[row])


@pytest.mark.mcpm
def test_defaults_that_differ(binary):
    got, _ = settings(binary, [])
    for row, value in OWN_DEFAULTS.items():
        assert got[row] == value


# (options, exit code, memcached's message)
REFUSED = [
    (["-m", "abc"], 64, "Cannot set item size limit higher than 1/2 of "
     "memory max."),
    (["-m", "1g"], 64, "Cannot set item size limit higher than 1/2 of "
     "memory max."),                        # 1 MB, as memcached reads it
    (["-c", "0"], 1, "Maximum connections must be greater than 0"),
    (["-c", "x"], 1, "Maximum connections must be greater than 0"),
    (["-t", "0"], 1, "Number of threads must be greater than 0"),
    (["-f", "1"], 1, "Factor must be greater than 1"),
    (["-n", "0"], 1, "Chunk size must be greater than 0"),
    (["-R", "0"], 1, "Number of requests per event must be greater than 0"),
    (["-B", "udp"], 64, "Invalid value for binding protocol: udp"),
    (["-I", "512"], 64, "Item max size cannot be less than 1024 bytes."),
    (["-I", "2g"], 64, "Item max size cannot be less than 1024 bytes."),
    (["-I", "1025m", "-m", "8192"], 64, "Cannot set item size limit higher "
     "than a gigabyte."),
    (["-I", "40m"], 64, "Cannot set item size limit higher than 1/2 of "
     "memory max."),
    (["-I", "256k"], 64, "slab_chunk_max (bytes: 524288) cannot be larger "
     "than -I (item_size_max 262144)"),
    (["-I", "768k"], 64, "-I (item_size_max: 786432) must be evenly "
     "divisible by slab_chunk_max (bytes: 524288)"),
    (["-p", "70000"], 64, "Invalid port number"),
    (["-o", "bogus"], 1, 'Illegal suboption "bogus"'),
    (["-o", "hashpower=5"], 1, "Initial hashtable multiplier of 5 is too "
     "low"),
    (["-o", "hashpower=40"], 1, "Initial hashtable multiplier of 40 is too "
     "high"),
    (["-o", "slab_automove=3"], 1, "slab_automove must be between 0 and 2"),
    (["-o", "tail_repair_time=5"], 1, "Cannot set tail_repair_time to less "
     "than 10 seconds"),
    (["-o", "tail_repair_time=0"], 1, "Cannot set tail_repair_time to less "
     "than 10 seconds"),
    (["-o", "hash_algorithm=crc32"], 1, "Unknown hash_algorithm option "
     "(jenkins, murmur3, xxh3)"),
    (["-o", "lru_crawler_sleep=2000000"], 1, "LRU crawler sleep must be "
     "between 0 and 1 second"),
    (["-o", "hot_lru_pct=90"], 1, "hot_lru_pct must be > 1 and < 80"),
    (["-o", "hot_lru_pct=50,warm_lru_pct=50"], 64, "hot_lru_pct + "
     "warm_lru_pct cannot be more than 80% combined"),
    (["-o", "no_lru_maintainer,temporary_ttl=10"], 64, "temporary_ttl "
     "requires lru_maintainer to be enabled"),
    (["-o", "slab_chunk_max=2048"], 1, "slab_chunk_max must be specified in "
     "kilobytes."),
    (["-o", "slab_chunk_max=0"], 1, "slab_chunk_max must be >= 0"),
    (["-o", "slab_chunk_max=x"], 1, "could not parse argument to "
     "slab_chunk_max"),
    (["-o", "slab_chunk_max"], 1, "Missing slab_chunk_max argument"),
    (["-o", "read_buf_mem_limit=x"], 1, "could not parse argument to "
     "read_buf_mem_limit"),
    (["-N", "0"], 1, "Maximum number of NAPI IDs must be greater than 0"),
    (["-N", "8", "-t", "4"], 64, "Number of napi_ids(8) cannot be greater "
     "than number of threads(4)"),
    (["-S", "-B", "ascii"], 64, "ERROR: You cannot allow the ASCII protocol "
     "while using SASL."),
    (["--no-such-option"], 1, None),
]

# Refusals 1.6.18 does not share: 1.6.45's rules.
OLD_REFUSALS = {
    "-o slab_chunk_max=2048": "1.6.18 reads it in bytes",
    "-o slab_chunk_max=0": "1.6.18 crashes",
    "-o slab_chunk_max=x": "1.6.18 crashes",
    "-o slab_chunk_max": "1.6.18 crashes",
}

# memcached-pm refuses what memcached takes and misreads (man page).
SAFER = [
    (["-m", "-5"], 64, 'Invalid value for -m: "-5"'),  # memcached wraps it
]


@pytest.mark.parametrize("args, code, message",
                         marked(REFUSED, OLD_REFUSALS) +
                         [pytest.param(*c, marks=pytest.mark.mcpm,
                                       id=name(c[0])) for c in SAFER])
def test_refused(binary, args, code, message):
    r = run_binary(binary, ["-p", "0", "-U", "0"] + args)
    assert r.returncode == code, r.stderr
    if message is not None:
        assert message in (r.stderr + r.stdout).decode(), r.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="SO_MARK needs CAP_NET_ADMIN")
def test_sock_cookie_id_marks_the_listener(binary, reference):
    # The mark a firewall matches (SO_MARK; root may set it), as ss shows.
    s = Server(binary, ["-o", "sock_cookie_id=42"], reference).start()
    try:
        out = subprocess.run(["ss", "-tlne", "sport = :%d" % s.port],
                             capture_output=True, text=True, check=True).stdout
    finally:
        s.stop()
    assert "fwmark:0x2a" in out, out


@pytest.mark.v1645
@pytest.mark.engine     # each engine hands accepted sockets out
def test_napi_ids_fall_back_to_round_robin_on_loopback(binary):
    # Loopback has no NIC receive queue (NAPI id 0): every connection goes
    # round robin and is counted so, as memcached counts it.
    s = Server(binary, ["-N", "2", "-t", "2"], False).start()
    try:
        conns = [s.conn() for _ in range(3)]
        for c in conns:
            c.sync()                # accepted and handed to a worker
        st = conns[0].stats()
        for c in conns:
            c.close()
    finally:
        s.stop()
    # every accepted connection; the listener is counted in
    # total_connections too
    assert int(st["round_robin_fallback"]) == \
        int(st["total_connections"]) - 1 >= 3
    assert st["unexpected_napi_ids"] == "0"
