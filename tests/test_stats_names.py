"""The names `stats` and `stats settings` print, in order, against
memcached's.  The lists are memcached 1.6.45's (memcached.c's
server_stats(), get_stats() and process_stat_settings()), with the
deliberate differences spelled out below; against the reference,
memcached 1.6.18's own differences are applied."""

import pytest

# Which rows there are depends on the tiers.
pytestmark = pytest.mark.storage

STATS = """pid uptime time version libevent pointer_size rusage_user
rusage_system max_connections curr_connections total_connections
rejected_connections connection_structures response_obj_oom
response_obj_count response_obj_bytes read_buf_count read_buf_bytes
read_buf_bytes_free read_buf_oom reserved_fds cmd_get cmd_set cmd_flush
cmd_touch cmd_meta get_hits get_misses get_expired get_flushed
delete_misses delete_hits incr_misses incr_hits decr_misses decr_hits
cas_misses cas_hits cas_badval touch_hits touch_misses store_too_large
store_no_memory auth_cmds auth_errors bytes_read bytes_written
limit_maxbytes accepting_conns listen_disabled_num
time_in_listen_disabled_us threads conn_yields
prefetch_batches prefetch_keys lockfree_hits
hash_power_level hash_bytes hash_is_expanding slab_reassign_rescues
slab_reassign_chunk_rescues slab_reassign_inline_reclaim
slab_reassign_busy_items slab_reassign_busy_deletes
slab_reassign_busy_nomem slab_reassign_last_busy_status
slab_reassign_running slabs_moved lru_crawler_running lru_crawler_starts
lru_maintainer_juggles malloc_fails log_worker_dropped log_worker_written
log_watcher_skipped log_watcher_sent log_watchers unexpected_napi_ids
round_robin_fallback bytes curr_items total_items slab_global_page_pool
expired_unfetched evicted_unfetched evicted_active evictions reclaimed
crawler_reclaimed crawler_items_checked lrutail_reflocked moves_to_cold
moves_to_warm moves_within_lru direct_reclaims lru_bumps_dropped""".split()

# memcached-pm's own lines: the batched lookups (doc/PERFORMANCE.md); on
# the io_uring engine, its faults (RING, after them); and with a memory
# file, what recovery did (recovery_*, doc/PERSISTENCE.md).
OWN = ["prefetch_batches", "prefetch_keys", "lockfree_hits"]
RING = ["ring_recv_nobufs", "ring_recv_paused", "ring_send_short",
        "ring_send_errors", "ring_close_deferred", "ring_cq_overflows"]

SETTINGS = """maxbytes maxconns tcpport udpport inter verbosity oldest evictions
domain_socket umask shutdown_command growth_factor chunk_size num_threads
num_threads_per_udp stat_key_prefix detail_enabled reqs_per_event
cas_enabled tcp_backlog binding_protocol auth_enabled_sasl
auth_enabled_ascii item_size_max maxconns_fast hashpower_init
slab_reassign slab_automove slab_automove_ratio slab_automove_window
slab_chunk_max lru_crawler lru_crawler_sleep lru_crawler_tocrawl
tail_repair_time flush_enabled dump_enabled hash_algorithm
lru_maintainer_thread lru_segmented hot_lru_pct warm_lru_pct
hot_max_factor warm_max_factor temp_lru temporary_ttl idle_timeout
watcher_logbuf_size worker_logbuf_size read_buf_mem_limit prefetch_batch
track_sizes inline_ascii_response slab_automove_freeratio ssl_enabled
ssl_chain_cert ssl_key ssl_verify_mode ssl_keyformat ssl_ciphers
ssl_ca_cert ssl_wbuf_size ssl_session_cache ssl_kernel_tls
ssl_min_version num_napi_ids memory_file memory_kind client_flags_size
tier_policy memory_file_size memory_file_durability memory_file_flush
memory_file_max_downtime takeover warm_from warm_from_rate worker_cpus
bg_cpus numa_node memory_file_numa_node event_engine""".split()

# memcached-pm's own settings: its lookups and its tiers.  memcached's
# extstore lines (ext_*) are out of scope: there is no extstore here.
OWN_SETTINGS = ["prefetch_batch", "memory_kind", "tier_policy",
                "memory_file_size", "memory_file_durability",
                "memory_file_flush", "memory_file_max_downtime",
                "takeover", "warm_from", "warm_from_rate", "worker_cpus",
                "bg_cpus", "numa_node",
                "memory_file_numa_node", "event_engine"]

# memcached 1.6.18 against 1.6.45: the page mover's out-of-memory count
# was slab_reassign_evictions_nomem, after the chunk rescues, where 1.6.45
# has slab_reassign_busy_nomem and slab_reassign_last_busy_status; and
# client_flags_size was not printed yet.
GONE_IN_1618 = {"slab_reassign_busy_nomem", "slab_reassign_last_busy_status",
                "client_flags_size"}


def expected(names, own, reference):
    if not reference:
        return list(names)
    out = []
    for n in names:
        if n in own or n in GONE_IN_1618:
            continue
        out.append(n)
        if n == "slab_reassign_chunk_rescues":
            out.append("slab_reassign_evictions_nomem")
    return out


def names(server, arg=""):
    got = list(server.stats(arg))
    return [n for n in got if not n.startswith("recovery_")]


def test_stats_names_and_order(mc, reference):
    want = expected(STATS, OWN, reference)
    if not reference and mc.stats("settings")["event_engine"] == "io_uring":
        at = want.index("lockfree_hits") + 1
        want[at:at] = RING
    assert names(mc) == want


@pytest.mark.mcpm
def test_ring_lines_only_on_io_uring(server_factory):
    """The engine's fault counters are printed on io_uring alone."""
    for engine in ("epoll", "io_uring"):
        got = names(server_factory("-o", "event_engine=" + engine))
        assert (RING[0] in got) == (engine == "io_uring"), engine


def test_stats_settings_names_and_order(mc, reference):
    got = [n for n in names(mc, "settings") if not n.startswith("ext_")]
    assert got == expected(SETTINGS, OWN_SETTINGS, reference)


def test_conditional_lines(server_factory):
    """idle_kicks with idle_timeout, rejected_connections only with
    maxconns_fast, as memcached prints them."""
    s = server_factory("-o", "idle_timeout=100,no_maxconns_fast")
    got = names(s)
    assert "idle_kicks" in got and "rejected_connections" not in got
    assert got.index("idle_kicks") == got.index("auth_errors") + 1
