/*
 * settings.h: the server's configuration, one of its two globals,
 * declared once.
 *
 * SETTINGS_OPTIONS lists, in the order of memcached's "stats settings",
 * every setting and option:
 *
 *   X(stat, show, target, flag, long, oname, parse, help)
 *
 *   stat    the "stats settings" name (_: not shown)
 *   show    how it is shown: I (int), U (unsigned), SZ (size_t), YESNO,
 *           ONOFF (bool), F2, F3 (double, 2 or 3 decimals), OCT (int in
 *           octal), CHAR, STR (a string), STR_NULL, STR_PNULL (a string
 *           or "NULL", "(null)" when unset), HIDE
 *   target  D(type, field, default): a field of struct settings, declared
 *           here; C(field): a field of storage's options
 *           (storage/base/options.h, with its default); V(expr): a value
 *           computed for "stats settings" only
 *   flag    its short option ('m'), or 0
 *   long    its long option ("memory-limit=<num>"; the part after '='
 *           names the value in -h), or NULL
 *   oname   its -o name, or NULL
 *   parse   ON, OFF (a flag; -o name takes no value), ONOFF (-o name
 *           sets it, -o no_name clears it), COUNT (-v), STR, NOOP
 *           (accepted, ignored), INT/UINT/KB/DOUBLE(lo, hi, message: NULL
 *           for "Invalid value for <name>"), FN(function taking the
 *           value), ACT(function taking none), NONE
 *   help    its line in -h, or NULL
 *
 * From it come struct settings and its defaults (settings.c), the
 * parsing of argv and -h (cmdline.c), and "stats settings"
 * (admin_stats.c).  An option is one row plus the code that uses it (and,
 * for a storage option, its field in storage/base/options.h).
 *
 * Filled once from argv by cmdline_parse() before any thread starts;
 * after that only the admin commands (verbosity, lru tune, slabs
 * automove, lru_crawler sleep, cache_memlimit, stats detail) change a
 * few fields, and readers in other threads take what they see.  storage/
 * receives &settings.cache and reads its runtime fields the same way.
 */
#ifndef MCPM_SETTINGS_H
#define MCPM_SETTINGS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memcached-pm/base/placement.h"
#include "storage/base/options.h"
#include "storage/index/prefetch.h"

#define MCPM_VERSION "1.6.45-pm-" PACKAGE_VERSION

#define PCT_MSG "%s must be > 1 and < 80"

/* -o event_engine: how the workers wait (worker.h).  Unless epoll is
 * asked for, io_uring where the kernel has what it needs, else epoll with
 * a line on stderr (only at -v under auto, the default).  Settled before
 * the workers start: AUTO is never seen after. */
enum event_engine { ENGINE_EPOLL, ENGINE_IO_URING, ENGINE_AUTO };

#define SETTINGS_OPTIONS(X)                                                 \
    X(maxbytes, SZ, C(mem_limit), 'm', "memory-limit=<num>", NULL,          \
      FN(opt_memory), "item memory in megabytes (default: 64)")             \
    X(maxconns, I, D(int, maxconns, 1024), 'c', "conn-limit=<num>", NULL,   \
      FN(opt_conns), "max simultaneous connections (default: 1024)")        \
    X(tcpport, I, D(int, port, 11211), 'p', "port=<num>", NULL,             \
      FN(opt_port), "TCP port to listen on (default: 11211; -1: any)")      \
    X(udpport, I, D(int, udpport, 0), 'U', "udp-port=<num>", NULL,          \
      FN(opt_udp), "UDP port to listen on (default: 0, off; -1: any)")      \
    X(inter, STR_NULL, D(char *, inter, NULL), 'l', "listen=<addr>", NULL,  \
      FN(opt_listen), "interfaces to listen on (default: 127.0.0.1); with " \
      "-Z, a notls: prefix keeps one plaintext (-l notls:<ip>:<port>), "    \
      "btls: asks no client certificate, mtls: requires one")               \
    X(verbosity, I, D(int, verbose, 0), 'v', "verbose", NULL, COUNT,        \
      "verbose (-vv: also print client commands)")                          \
    X(oldest, U, V(settings_oldest()), 0, NULL, NULL, NONE, NULL)           \
    X(evictions, ONOFF, C(evict), 'M', "disable-evictions", NULL, OFF,      \
      "return an error when memory is full")                                \
    X(domain_socket, STR_NULL, D(const char *, socketpath, NULL), 's',      \
      "unix-socket=<file>", NULL, STR,                                      \
      "UNIX socket to listen on (disables network)")                        \
    X(umask, OCT, D(int, access, 0700), 'a', "unix-mask=<mask>", NULL,      \
      FN(opt_unix_mask), "access mask for the UNIX socket, in octal (0700)") \
    X(shutdown_command, YESNO, D(bool, shutdown_command, false), 'A',       \
      "enable-shutdown", NULL, ON, "enable the ascii \"shutdown\" command") \
    X(growth_factor, F2, C(factor), 'f', "slab-growth-factor=<num>", NULL,  \
      FN(opt_factor), "chunk size growth factor (default: 1.25)")           \
    X(chunk_size, U, C(chunk_min), 'n', "slab-min-size=<bytes>", NULL,      \
      UINT(1, 1 << 20, "Chunk size must be greater than 0"),                \
      "min space for key+value+flags (default: 48)")                        \
    X(num_threads, I, D(int, num_threads, 4), 't', "threads=<num>", NULL,   \
      FN(opt_threads), "number of worker threads (default: 4)")             \
    X(num_threads_per_udp, I, V(settings.num_threads), 0, NULL, NULL,       \
      NONE, NULL)                                                           \
    X(stat_key_prefix, CHAR, D(char, prefix_delimiter, ':'), 'D', NULL,     \
      NULL, FN(opt_delimiter),                                              \
      "key prefix delimiter for stats detail (':'), turns it on")           \
    X(detail_enabled, YESNO, D(bool, detail_enabled, false), 0, NULL, NULL, \
      NONE, NULL)                                                           \
    X(reqs_per_event, I, D(int, reqs_per_event, 20), 'R',                   \
      "max-reqs-per-event=<num>", NULL,                                     \
      INT(1, INT_MAX, "Number of requests per event must be greater "       \
          "than 0"), "requests per event before yielding (default: 20)")    \
    X(cas_enabled, YESNO, C(use_cas), 'C', "disable-cas", NULL, OFF,        \
      "disable use of CAS")                                                 \
    X(tcp_backlog, I, D(int, backlog, 1024), 'b', "listen-backlog=<num>",   \
      NULL, INT(1, INT_MAX, NULL), "listen backlog (default: 1024)")        \
    X(binding_protocol, STR, D(const char *, binding_protocol,              \
      "auto-negotiate"), 'B', "protocol=<name>", NULL, FN(opt_protocol),    \
      "ascii or auto (default: auto)")                                      \
    X(auth_enabled_sasl, YESNO, D(bool, sasl, false), 'S', "enable-sasl",   \
      NULL, ON, "turn on SASL authentication (binary protocol: PLAIN "      \
      "against $MEMCACHED_SASL_PWDB, or Cyrus SASL without it)")            \
    X(auth_enabled_ascii, STR, V(settings.auth_file ? settings.auth_file    \
      : "no"), 0, NULL, NULL, NONE, NULL)                                   \
    X(_, HIDE, D(const char *, auth_file, NULL), 'Y', "auth-file=<file>",   \
      NULL, STR, "ascii protocol authentication: a file of user:password "  \
      "lines")                                                              \
    X(_, HIDE, D(bool, protocol_given, false), 0, NULL, NULL, NONE, NULL)   \
    X(_, HIDE, D(bool, sasl_cyrus, false), 0, NULL, "sasl_cyrus", ON,       \
      "-S through Cyrus SASL (libsasl2), as without $MEMCACHED_SASL_PWDB")  \
    X(item_size_max, SZ, C(item_size_max), 'I', "max-item-size=<num>",      \
      NULL, FN(opt_item_size), "max item size (default: 1m, min 1k, max 1g)") \
    X(maxconns_fast, YESNO, D(bool, maxconns_fast, true), 0, NULL,          \
      "maxconns_fast", ONOFF, "refuse new connections at once over -c")     \
    X(hashpower_init, U, D(unsigned, hashpower_init, 0), 0, NULL,           \
      "hashpower", FN(opt_hashpower), "initial hash table size, 2^n")       \
    X(slab_reassign, YESNO, C(slab_reassign), 0, NULL, "slab_reassign",     \
      ONOFF, "the page mover")                                              \
    X(slab_automove, I, C(slab_automove), 0, NULL, "slab_automove",         \
      FN(opt_automove), "0, 1 (default) or 2")                              \
    X(_, HIDE, C(slab_automove), 0, NULL, "no_slab_automove",               \
      FN(opt_no_automove), "page mover off (slab_automove=0)")              \
    X(slab_automove_ratio, F2, C(automove_ratio), 0, NULL,                  \
      "slab_automove_ratio", DOUBLE(0.01, 1.0, NULL),                       \
      "free share of a class that gives pages back (0.8)")                  \
    X(slab_automove_window, U, C(automove_window), 0, NULL,                 \
      "slab_automove_window", UINT(3, 1800, NULL),                          \
      "seconds of history automove weighs (30)")                            \
    X(slab_chunk_max, SZ, C(slab_chunk_max), 0, NULL, "slab_chunk_max",     \
      FN(opt_chunk_max), "largest chunk before items are chunked")          \
    X(_, HIDE, C(slab_chunk_max), 0, NULL, "no_chunked_items",              \
      FN(opt_no_chunked),                                                   \
      "no chunked items: slab_chunk_max is the page size")                  \
    X(_, HIDE, C(slab_sizes), 0, NULL, "slab_sizes", STR,                   \
      "chunk sizes a-b-c instead of -f and -n")                             \
    X(lru_crawler, YESNO, C(lru_crawler), 0, NULL, "lru_crawler", ONOFF,    \
      "the LRU crawler")                                                    \
    X(lru_crawler_sleep, U, C(crawler_sleep_us), 0, NULL,                   \
      "lru_crawler_sleep", UINT(0, 1000000, "LRU crawler sleep must be "    \
                                "between 0 and 1 second"),                  \
      "microseconds the crawler sleeps between items")                      \
    X(lru_crawler_tocrawl, U, C(crawler_tocrawl), 0, NULL,                  \
      "lru_crawler_tocrawl", UINT(0, UINT_MAX, NULL),                       \
      "items the crawler looks at per run (0: all)")                        \
    X(tail_repair_time, U, C(tail_repair_time), 0, NULL,                    \
      "tail_repair_time", FN(opt_tail_repair), "seconds an item held at "   \
      "an LRU tail waits before it is unlinked (at least 10; default 0, "   \
      "never)")                                                             \
    X(flush_enabled, YESNO, D(bool, flush_enabled, true), 'F',              \
      "disable-flush-all", NULL, OFF, "disable flush_all")                  \
    X(dump_enabled, YESNO, D(bool, dump_enabled, true), 'X',                \
      "disable-dumping", NULL, OFF,                                         \
      "disable stats cachedump and lru_crawler metadump")                   \
    X(hash_algorithm, STR, V(hash_name(settings.cache.hash_algorithm)), 0,  \
      NULL, "hash_algorithm", FN(opt_hash_algorithm), "the key hash: xxh3 " \
      "(default), murmur3 or jenkins")                                      \
    X(lru_maintainer_thread, YESNO, D(bool, lru_maintainer, true), 0, NULL, \
      "lru_maintainer", FN(opt_lru_maintainer), "the LRU maintainer")       \
    X(_, HIDE, V(0), 0, NULL, "no_lru_maintainer",                          \
      FN(opt_no_lru_maintainer),                                            \
      "no LRU maintainer thread (and no segmented LRU)")                    \
    X(lru_segmented, YESNO, C(lru_segmented), 0, NULL, NULL, NONE, NULL)    \
    X(hot_lru_pct, U, C(hot_lru_pct), 0, NULL, "hot_lru_pct",               \
      UINT(2, 79, PCT_MSG), "share of a class for the HOT LRU (20)")        \
    X(warm_lru_pct, U, C(warm_lru_pct), 0, NULL, "warm_lru_pct",            \
      UINT(2, 79, PCT_MSG), "share of a class for the WARM LRU (40)")       \
    X(hot_max_factor, F2, C(hot_max_factor), 0, NULL, "hot_max_factor",     \
      DOUBLE(0.0001, 1e6, NULL),                                            \
      "HOT items older than this times COLD's age move on")                 \
    X(warm_max_factor, F2, C(warm_max_factor), 0, NULL, "warm_max_factor",  \
      DOUBLE(0.0001, 1e6, NULL),                                            \
      "WARM items older than this times COLD's age move on")                \
    X(temp_lru, YESNO, C(temp_lru), 0, NULL, NULL, NONE, NULL)              \
    X(temporary_ttl, U, C(temporary_ttl), 0, NULL, "temporary_ttl",         \
      FN(opt_temporary_ttl), "TTLs up to this go to the TEMP LRU")          \
    X(idle_timeout, U, D(unsigned, idle_timeout, 0), 0, NULL,               \
      "idle_timeout", UINT(0, UINT_MAX, NULL),                              \
      "close connections idle this many seconds")                           \
    X(watcher_logbuf_size, U, D(unsigned, watcher_logbuf_size, 256 * 1024), \
      0, NULL, "watcher_logbuf_size", KB(0, UINT_MAX / 1024, NULL),         \
      "KB each watch client buffers (256)")                                 \
    X(worker_logbuf_size, U, D(unsigned, worker_logbuf_size, 64 * 1024), 0, \
      NULL, "worker_logbuf_size", KB(0, UINT_MAX / 1024, NULL),             \
      "KB of log records each worker buffers (64)")                         \
    X(read_buf_mem_limit, U, D(unsigned, read_buf_mem_limit, 0), 0, NULL,   \
      "read_buf_mem_limit", FN(opt_read_buf_mem_limit), "limit in MB for "  \
      "connection read buffers (default: 0, none)")                         \
    X(prefetch_batch, U, D(unsigned, prefetch_batch, 16), 0, NULL,          \
      "prefetch_batch", UINT(0, PREFETCH_BATCH_MAX, NULL),                  \
      "look keys up n at a time, their cache misses overlapped (default "   \
      "16, 0 off, at most 256)")                                            \
    X(track_sizes, YESNO, C(track_sizes), 0, NULL, "track_sizes", ON,       \
      "the histogram of stats sizes")                                       \
    X(inline_ascii_response, STR, V("no"), 0, NULL, "inline_ascii_resp",    \
      NOOP, "accepted and ignored, as memcached 1.6")                       \
    X(_, HIDE, V(0), 0, NULL, "no_inline_ascii_resp", NOOP,                 \
      "accepted and ignored, as memcached 1.6")                             \
    X(slab_automove_freeratio, F3, C(automove_freeratio), 0, NULL,          \
      "slab_automove_freeratio", DOUBLE(0, 1, NULL),                        \
      "free share kept before moving pages (0.01)")                         \
    X(ssl_enabled, YESNO, D(bool, ssl_enabled, false), 'Z', "enable-ssl",   \
      NULL, ON, "enable TLS/SSL")                                           \
    X(ssl_chain_cert, STR_PNULL, D(const char *, ssl_chain_cert, NULL), 0,  \
      NULL, "ssl_chain_cert", STR, "certificate chain file in PEM format")  \
    X(ssl_key, STR_PNULL, D(const char *, ssl_key, NULL), 0, NULL,          \
      "ssl_key", STR, "private key, if not part of the -ssl_chain_cert")    \
    X(ssl_verify_mode, I, V(settings_ssl_verify_flags()), 0, NULL, NULL,    \
      NONE, NULL)                                                           \
    X(_, HIDE, D(int, ssl_verify_mode, 0), 0, NULL, "ssl_verify_mode",      \
      INT(0, 3, "Invalid ssl_verify_mode. Use help to see valid options."), \
      "peer certificate verification: 0 (none, default), 1 (request), "     \
      "2 (require) or 3 (once)")                                            \
    X(ssl_keyformat, I, D(int, ssl_keyformat, 1), 0, NULL, "ssl_keyformat", \
      INT(1, 2, NULL), "private key format: 1 (PEM, default) or 2 (DER)")   \
    X(ssl_ciphers, STR_NULL, D(const char *, ssl_ciphers, NULL), 0, NULL,   \
      "ssl_ciphers", STR, "cipher list to use")                             \
    X(ssl_ca_cert, STR_NULL, D(const char *, ssl_ca_cert, NULL), 0, NULL,   \
      "ssl_ca_cert", STR, "PEM file of acceptable client CAs")              \
    X(ssl_wbuf_size, U, D(unsigned, ssl_wbuf_size, 16 * 1024), 0, NULL,     \
      "ssl_wbuf_size", KB(1, 16 * 1024, NULL),                              \
      "per-thread TLS output buffer, KB (default: 16)")                     \
    X(ssl_session_cache, YESNO, D(bool, ssl_session_cache, false), 0, NULL, \
      "ssl_session_cache", ON, "server-side session cache (resumption)")    \
    X(ssl_kernel_tls, YESNO, D(bool, ssl_kernel_tls, false), 0, NULL,       \
      "ssl_kernel_tls", ON, "kernel TLS offload, where the kernel has it")  \
    X(ssl_min_version, STR, V(settings_ssl_version_name()), 0, NULL, NULL,  \
      NONE, NULL)                                                           \
    X(_, HIDE, D(int, ssl_min_version, 2), 0, NULL, "ssl_min_version",      \
      FN(opt_ssl_min_version), "oldest protocol accepted: 0 (tlsv1.0), "    \
      "1 (tlsv1.1), 2 (tlsv1.2, default) or 3 (tlsv1.3)")                   \
    X(_, HIDE, D(unsigned, ssl_handshake_timeout, 10), 0, NULL,             \
      "ssl_handshake_timeout", UINT(0, 3600, NULL), "seconds a TLS client " \
      "has to finish its handshake (default: 10, 0: no limit)")             \
    X(num_napi_ids, I, D(int, num_napi_ids, 0), 'N', "napi_ids=<num>",      \
      NULL, FN(opt_napi), "give each of <num> NAPI ids (NIC receive "       \
      "queues) a worker of its own")                                        \
    X(memory_file, STR_PNULL, D(const char *, memory_file, NULL), 0, NULL,  \
      "memory_file", STR, "keep items in this (PMEM) file; one written "    \
      "under other settings is refused")                                    \
    X(_, HIDE, C(memory_file_restart), 'e', "memory-file=<file>", NULL,     \
      FN(opt_memory_file_e), "keep items in this (PMEM) file, sized by "    \
      "-m; one it cannot read is logged and started empty, as memcached")   \
    X(memory_kind, STR_PNULL, C(memory_kind), 0, NULL, "memory_kind", STR,  \
      "dax:<dir> or kmem: items in volatile PMEM through memkind")          \
    X(client_flags_size, U, V(4), 0, NULL, NULL, NONE, NULL)                \
    X(tier_policy, STR, D(const char *, tier_policy, NULL), 0, NULL,        \
      "tier_policy", FN(settings_opt_tier_policy), "where items live: "     \
      "dram, pmem (with a memory file), cache (all in the file, items read "\
      "often "                                                              \
      "copied to DRAM) or capacity (new items in DRAM, its tail moved to "  \
      "the file)")                                                          \
    X(memory_file_size, SZ, V(settings.cache.memory_file_size), 0, NULL,    \
      NULL, NONE, NULL)                                                     \
    X(_, HIDE, D(unsigned, memory_file_mb, 0), 0, NULL, "memory_file_size", \
      UINT(1, 1u << 24, NULL), "item memory in the file, MB (default: -m)") \
    X(_, HIDE, C(memory_file_reinit), 0, NULL, "memory_file_reinit", ON,    \
      "discard a memory file the settings cannot read")                     \
    X(memory_file_durability, STR, V(settings_durability_name()), 0, NULL, \
      NULL, NONE, NULL)                                                     \
    X(memory_file_flush, STR, V(settings_flush_name()), 0, NULL, NULL,      \
      NONE, NULL)                                                           \
    X(memory_file_max_downtime, U, C(memory_file_max_downtime), 0, NULL,    \
      "memory_file_max_downtime", UINT(0, UINT_MAX, NULL), "seconds: a "    \
      "memory file last written longer ago starts empty, its items "       \
      "possibly stale (default: 0, no bound)")                              \
    X(takeover, STR_NULL, D(const char *, takeover, NULL), 0, NULL,        \
      "takeover", STR, "unix socket a node started with the same option "  \
      "takes this one's listeners, connections and memory file over on "   \
      "(a restart or upgrade no client sees); with none there, a "          \
      "memcached running on the -e file is replaced once it stops")        \
    X(warm_from, STR_NULL, D(const char *, warm_from, NULL), 0, NULL,      \
      "warm_from", STR, "copy the items of the memcached node at "          \
      "<host>:<port> (or a unix socket's path) and follow its writes "      \
      "until it stops")                                                     \
    X(warm_from_rate, U, D(unsigned, warm_from_rate, 0), 0, NULL,          \
      "warm_from_rate", UINT(0, UINT_MAX, NULL), "requests a second "       \
      "warm_from sends the node at most (default: 0, no bound)")           \
    X(worker_cpus, STR, V(placement_worker_cpus()), 0, NULL, "worker_cpus", \
      FN(placement_opt_worker_cpus), "pin worker threads round robin to "   \
      "these CPUs (Linux cpu-list syntax: 0-3,8)")                          \
    X(bg_cpus, STR, V(placement_bg_cpus()), 0, NULL, "bg_cpus",             \
      FN(placement_opt_bg_cpus), "run the background threads (LRU "         \
      "maintainer, crawler, page mover, hash expander, loggers, listener) " \
      "on these CPUs")                                                      \
    X(numa_node, I, V(placement_numa_node()), 0, NULL, "numa_node",         \
      FN(placement_opt_numa_node), "bind memory, and threads without a "    \
      "list, to NUMA node <n>, or to the memory file's node (file)")        \
    X(memory_file_numa_node, I, V(placement_memory_file_node()), 0, NULL,   \
      NULL, NONE, NULL)                                                     \
    X(event_engine, STR, V(settings_engine_name()), 0, NULL,                \
      "event_engine", FN(settings_opt_event_engine), "how workers wait "    \
      "for and move bytes: io_uring, epoll, or auto (default: io_uring, "   \
      "epoll where the kernel lacks it)")                                   \
    X(_, HIDE, D(int, event_engine, ENGINE_AUTO), 0, NULL, NULL, NONE,      \
      NULL)                                                                 \
    X(_, HIDE, D(unsigned, ring_buffers, 64), 0, NULL, "ring_buffers",      \
      FN(settings_opt_ring_buffers), "io_uring: 16 KB receive buffers per " \
      "worker, a power of two; the kernel gets 8, then more as receives " \
      "find none (default: 64)")                                            \
    X(_, HIDE, D(unsigned, ring_entries, 256), 0, NULL, "ring_entries",     \
      UINT(4, 16384, NULL), "io_uring: submission queue entries per "       \
      "worker, four times as many completions (default: 256)")             \
    X(_, HIDE, D(bool, ring_files, true), 0, NULL, "ring_files", ONOFF,     \
      "io_uring: sockets as registered files, no lookup per operation "    \
      "(default: on; no_ring_files: off)")                                  \
    X(_, HIDE, D(bool, ring_sqpoll, false), 0, NULL, "ring_sqpoll", ON,     \
      "io_uring: a kernel thread per worker polls its submissions (costs "  \
      "a core)")                                                            \
    X(_, HIDE, V(0), 0, NULL, "memory_file_durability",                     \
      FN(settings_opt_durability), "what a stored item survives: process "  \
      "(a crash; no flushes), power (a power cut; flushes) or auto "        \
      "(default: "                                                          \
      "power, process on tmpfs)")                                           \
    X(_, HIDE, C(pmem_strict), 0, NULL, "memory_file_strict", ON,           \
      "power-loss simulator for crash tests: only flushed cache lines "     \
      "reach the file")                                                     \
    X(_, HIDE, C(pmem_crash_after), 0, NULL, "memory_file_crash_after",     \
      UINT(1, UINT_MAX, NULL), "with memory_file_strict: a power cut "      \
      "(SIGKILL) at the n-th flush once serving")                           \
    X(_, HIDE, C(hash_expand), 0, NULL, "no_hashexpand", OFF,               \
      "never grow the hash table")                                          \
    X(_, HIDE, C(recovery_progress_ms), 0, NULL, "recovery_progress_ms",   \
      UINT(1, 3600000, NULL), "with -v: milliseconds between the lines a "  \
      "restart prints of its progress (default: 1000)")                     \
    X(_, HIDE, C(recovery_threads), 0, NULL, "recovery_threads",           \
      UINT(1, 16, NULL), "threads that read a memory file back after a "   \
      "crash, while the node serves (default: one per CPU)")                \
    X(_, HIDE, C(recovery_pace_us), 0, NULL, "recovery_pace_us",           \
      UINT(0, 1000000, NULL), "microseconds a recovery thread rests after " \
      "each page of the memory file: more of the CPUs for serving while "   \
      "it recovers (default: 0)")                                           \
    X(_, HIDE, C(hash_bulk_move), 0, NULL, "hash_bulk_move",                \
      UINT(1, 1 << 20, NULL),                                               \
      "buckets moved per step of a hash table growth")                      \
    X(_, HIDE, C(lock_power), 0, NULL, "item_lock_power",                   \
      UINT(1, 20, NULL), "2^n item locks (default: from -t)")               \
    X(_, HIDE, V(0), 0, NULL, "resp_obj_mem_limit",                         \
      FN(opt_resp_obj_mem_limit), "deprecated: accepted, ignored")          \
    X(_, HIDE, V(0), 0, NULL, "modern", NOOP,                               \
      "accepted, as memcached 1.6 (its defaults)")                          \
    X(_, HIDE, V(0), 0, NULL, "no_modern", FN(opt_no_modern),               \
      "the pre-1.5 LRU: no maintainer, crawler or mover")                   \
    X(_, HIDE, D(unsigned, sock_cookie_id, 0), 0, NULL, "sock_cookie_id",   \
      FN(opt_sock_cookie), "attributes an ID to a socket for ip "           \
      "filtering/firewalls (SO_MARK)")                                      \
    X(_, HIDE, V(0), 0, NULL, "drop_privileges", NOOP,                      \
      "accepted and ignored")                                               \
    X(_, HIDE, V(0), 0, NULL, "no_drop_privileges", NOOP,                   \
      "accepted and ignored")                                               \
    X(_, HIDE, D(bool, daemonize, false), 'd', "daemon", NULL, ON,          \
      "run as a daemon")                                                    \
    X(_, HIDE, D(const char *, pidfile, NULL), 'P', "pidfile=<file>", NULL, \
      STR, "save the PID in <file>, only with -d")                          \
    X(_, HIDE, D(const char *, username, NULL), 'u', "user=<user>", NULL,   \
      STR, "assume the identity of <user> (only as root)")                  \
    X(_, HIDE, D(bool, lock_memory, false), 'k', "lock-memory", NULL, ON,   \
      "lock down all paged memory")                                         \
    X(_, HIDE, D(bool, coredumps, false), 'r', "enable-coredumps", NULL,    \
      ON, "maximise core file limit")                                       \
    X(_, HIDE, C(prealloc), 'L', "enable-largepages", NULL, ON,             \
      "preallocate item memory")                                            \
    X(_, HIDE, D(bool, watch_enabled, true), 'W', "disable-watch", NULL,    \
      OFF, "disable watch commands")                                        \
    X(_, HIDE, V(0), 'h', "help", NULL, ACT(opt_help),                      \
      "print this help and exit")                                           \
    X(_, HIDE, V(0), 'i', "license", NULL, ACT(opt_license),                \
      "print the license and exit")                                         \
    X(_, HIDE, V(0), 'V', "version", NULL, ACT(opt_version),                \
      "print the version and exit")                                         \
    X(_, HIDE, V(0), 'o', "extended=<list>", NULL, FN(opt_extended),        \
      "comma separated extended options:")

/* The fields D() rows declare. */
#define SETTINGS_FIELD_D(type, field, dflt) type field;
#define SETTINGS_FIELD_C(field)
#define SETTINGS_FIELD_V(expr)
#define SETTINGS_FIELD(stat, show, target, flag, lname, oname, parse, help) \
    SETTINGS_FIELD_##target

struct settings {
    SETTINGS_OPTIONS(SETTINGS_FIELD)
    struct cache_options cache;     /* storage/'s, handed to cache_init() */
    bool fd_store;                  /* systemd keeps what a stop leaves
                                       (life/sdaemon.h), found at start */
};

/* The value a row names, and its address (NULL for V() rows). */
#define SETTINGS_VAL_D(type, field, dflt) settings.field
#define SETTINGS_VAL_C(field) settings.cache.field
#define SETTINGS_VAL_V(expr) (expr)

extern struct settings settings;

/* ssl_verify_mode as "stats settings" shows it: OpenSSL's flags for
 * modes 0-3 (none; peer; peer and fail without a certificate; and only
 * once), which are the low 0, 1, 2 or 3 bits set. */
static inline int
settings_ssl_verify_flags(void)
{
    return (1 << settings.ssl_verify_mode) - 1;
}

/* ssl_min_version's 0-3 by name: "tlsv1.0" ... "tlsv1.3"; and the
 * number a name or a digit gives, or -1. */
const char *settings_ssl_version_name(void);
int settings_ssl_version(const char *name);

/* The memory file's durability and flush method as applied ("(null)"
 * without a memory file, before it is open). */
const char *settings_durability_name(void);
const char *settings_flush_name(void);

/* flush_all's cut-off, "stats settings" oldest: set by the command,
 * read by stats (relaxed atomics). */
void settings_set_oldest(rel_time_t when);
rel_time_t settings_oldest(void);

/* Every field to its default (the D() rows, storage's own). */
void settings_defaults(void);

/* The rules between options, once all are read: 0, or -1 with a message
 * on stderr.  Fills the fields derived from others (the tier policy, the
 * memory file's size, the lock power). */
int settings_check(void);

/* -o tier_policy and -o memory_file_durability (the options of the
 * tiers, next to their rules): 0, or -1 with a message. */
int settings_opt_tier_policy(const char *val);
int settings_opt_durability(const char *val);

/* -o event_engine=epoll|io_uring and -o ring_buffers=<n> (a power of
 * two): 0, or -1 with a message; the engine's name as the workers run
 * it. */
int settings_opt_event_engine(const char *val);
int settings_opt_ring_buffers(const char *val);
const char *settings_engine_name(void);

/* Value parsers: the whole string, in range, or false. */
bool settings_parse_int(const char *s, int lo, int hi, int *out);
bool settings_parse_uint(const char *s, unsigned lo, unsigned hi,
                         unsigned *out);
bool settings_parse_double(const char *s, double *out);

/* "Invalid value for <opt>: "<val>"" on stderr; returns -1. */
int  settings_bad_value(const char *opt, const char *val);

#endif
