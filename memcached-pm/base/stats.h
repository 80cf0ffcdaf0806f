/*
 * stats.h: the server's counters, the other global, declared once.
 *
 * STATS_GENERAL lists every line of "stats" in memcached's order, and is
 * at once the declaration of the daemon's own counters: a THREAD row is a
 * field of the per-worker block, a SERVER row a field of the shared
 * connection counters.  The other rows say where a line's value comes
 * from.  CLASS_STATS declares the per-slab-class counters.  From the
 * tables come the structs, the sums, "stats reset" and the replies
 * (admin_stats.c); a new counter is one row plus the code that counts it.
 *
 * Per-worker counters live in one block per worker thread and are written
 * only by that thread, with relaxed atomic loads and stores (plain moves
 * on x86: no locked instruction, no shared cache line on the request
 * path).  A "stats" request sums the blocks; "stats reset" does not write
 * into other threads' blocks but records the sums as a baseline to
 * subtract, so a reset can never race with a worker's increment.
 */
#ifndef MCPM_STATS_H
#define MCPM_STATS_H

#include <stdbool.h>
#include <stdint.h>

#include "storage/base/metrics.h"
#include "storage/base/options.h"

/*
 * Per-slab-class request counters: X(name, reply).  SLABS rows are printed
 * for each class by "stats slabs", ITEMS rows by "stats items", each in
 * memcached's order.
 */
#define CLASS_STATS(X)                                                      \
    X(get_hits,     SLABS)                                                  \
    X(cmd_set,      SLABS)                                                  \
    X(delete_hits,  SLABS)                                                  \
    X(incr_hits,    SLABS)                                                  \
    X(decr_hits,    SLABS)                                                  \
    X(cas_hits,     SLABS)                                                  \
    X(cas_badval,   SLABS)                                                  \
    X(touch_hits,   SLABS)                                                  \
    X(hits_to_hot,  ITEMS)                                                  \
    X(hits_to_warm, ITEMS)                                                  \
    X(hits_to_cold, ITEMS)                                                  \
    X(hits_to_temp, ITEMS)

/*
 * "stats", in memcached's order: X(name, source, shown).
 *
 *   THREAD   a per-worker counter (struct thread_stats has it)
 *   CLASS    a CLASS_STATS counter summed over the classes
 *   SERVER   a connection counter of the listener and workers (struct
 *            server_stats has it)
 *   BUFFER   a connection buffer gauge (conn.h struct buffer_gauges)
 *   LOG      watch's counts (logger.h struct logger_stats)
 *   PROC     computed by admin_stats.c (process, settings)
 *   ZERO     a line memcached prints for a subsystem memcached-pm does
 *            not have; always 0
 *   COUNTER, GAUGE  storage's rows (storage/base/metrics.h), in place
 *
 * shown: ALWAYS; NEVER (counted for another reply: "stats tiers"); IDLE
 * (with -o idle_timeout), FAST (with maxconns_fast), SSL (with -Z),
 * HANDOVER (with -o takeover or systemd's fd store: the connections this
 * start took over, and those the node before could not carry),
 * SSL_CACHE (with -Z and ssl_session_cache), RING (on the io_uring
 * engine: its faults, see ring.h), and storage's REASSIGN,
 * CRAWLER and MAINTAINER.
 */
#define STATS_GENERAL(X)                                                    \
    X(pid,                        PROC,    ALWAYS)                          \
    X(uptime,                     PROC,    ALWAYS)                          \
    X(time,                       PROC,    ALWAYS)                          \
    X(version,                    PROC,    ALWAYS)                          \
    X(libevent,                   PROC,    ALWAYS)                          \
    X(pointer_size,               PROC,    ALWAYS)                          \
    X(rusage_user,                PROC,    ALWAYS)                          \
    X(rusage_system,              PROC,    ALWAYS)                          \
    X(max_connections,            PROC,    ALWAYS)                          \
    X(curr_connections,           SERVER,  ALWAYS)                          \
    X(total_connections,          SERVER,  ALWAYS)                          \
    X(rejected_connections,       SERVER,  FAST)                            \
    X(connection_structures,      SERVER,  ALWAYS)                          \
    X(response_obj_oom,           THREAD,  ALWAYS)                          \
    X(response_obj_count,         BUFFER,  ALWAYS)                          \
    X(response_obj_bytes,         BUFFER,  ALWAYS)                          \
    X(read_buf_count,             BUFFER,  ALWAYS)                          \
    X(read_buf_bytes,             BUFFER,  ALWAYS)                          \
    X(read_buf_bytes_free,        BUFFER,  ALWAYS)                          \
    X(read_buf_oom,               THREAD,  ALWAYS)                          \
    X(reserved_fds,               PROC,    ALWAYS)                          \
    X(cmd_get,                    THREAD,  ALWAYS)                          \
    X(cmd_set,                    CLASS,   ALWAYS)                          \
    X(cmd_flush,                  THREAD,  ALWAYS)                          \
    X(cmd_touch,                  THREAD,  ALWAYS)                          \
    X(cmd_meta,                   THREAD,  ALWAYS)                          \
    X(get_hits,                   CLASS,   ALWAYS)                          \
    X(get_misses,                 THREAD,  ALWAYS)                          \
    X(get_expired,                THREAD,  ALWAYS)                          \
    X(get_flushed,                THREAD,  ALWAYS)                          \
    X(delete_misses,              THREAD,  ALWAYS)                          \
    X(delete_hits,                CLASS,   ALWAYS)                          \
    X(incr_misses,                THREAD,  ALWAYS)                          \
    X(incr_hits,                  CLASS,   ALWAYS)                          \
    X(decr_misses,                THREAD,  ALWAYS)                          \
    X(decr_hits,                  CLASS,   ALWAYS)                          \
    X(cas_misses,                 THREAD,  ALWAYS)                          \
    X(cas_hits,                   CLASS,   ALWAYS)                          \
    X(cas_badval,                 CLASS,   ALWAYS)                          \
    X(touch_hits,                 CLASS,   ALWAYS)                          \
    X(touch_misses,               THREAD,  ALWAYS)                          \
    X(store_too_large,            THREAD,  ALWAYS)                          \
    X(store_no_memory,            THREAD,  ALWAYS)                          \
    X(auth_cmds,                  THREAD,  ALWAYS)                          \
    X(auth_errors,                THREAD,  ALWAYS)                          \
    X(idle_kicks,                 THREAD,  IDLE)                            \
    X(bytes_read,                 THREAD,  ALWAYS)                          \
    X(bytes_written,              THREAD,  ALWAYS)                          \
    X(limit_maxbytes,             GAUGE,   ALWAYS)                          \
    X(accepting_conns,            SERVER,  ALWAYS)                          \
    X(listen_disabled_num,        SERVER,  ALWAYS)                          \
    X(time_in_listen_disabled_us, SERVER,  ALWAYS)                          \
    X(threads,                    PROC,    ALWAYS)                          \
    X(conn_yields,                THREAD,  ALWAYS)                          \
    X(prefetch_batches,           THREAD,  ALWAYS)                          \
    X(prefetch_keys,              THREAD,  ALWAYS)                          \
    X(lockfree_hits,              THREAD,  ALWAYS)                          \
    X(ring_recv_nobufs,           THREAD,  RING)                            \
    X(ring_recv_paused,           THREAD,  RING)                            \
    X(ring_send_short,            THREAD,  RING)                            \
    X(ring_send_errors,           THREAD,  RING)                            \
    X(ring_close_deferred,        THREAD,  RING)                            \
    X(ring_cq_overflows,          THREAD,  RING)                            \
    CACHE_STATS_SERVER(X)                                                   \
    X(log_worker_dropped,         LOG,     ALWAYS)                          \
    X(log_worker_written,         LOG,     ALWAYS)                          \
    X(log_watcher_skipped,        LOG,     ALWAYS)                          \
    X(log_watcher_sent,           LOG,     ALWAYS)                          \
    X(log_watchers,               LOG,     ALWAYS)                          \
    X(ssl_new_sessions,           SERVER,  SSL_CACHE)                       \
    X(ssl_handshake_errors,       SERVER,  SSL)                             \
    X(ssl_proto_errors,           SERVER,  SSL)                             \
    X(time_since_server_cert_refresh, PROC, SSL)                            \
    X(unexpected_napi_ids,        SERVER,  ALWAYS)                          \
    X(round_robin_fallback,       SERVER,  ALWAYS)                          \
    X(handover_conns_taken,       SERVER,  HANDOVER)                        \
    X(handover_conns_closed,      SERVER,  HANDOVER)                        \
    CACHE_STATS_ITEMS(X)                                                    \
    X(hits_dram,                  THREAD,  NEVER)                           \
    X(hits_pmem,                  THREAD,  NEVER)

/* Which struct declares a row's counter: OWNER(src, in_thread, in_server)
 * keeps the argument of the owning struct. */
#define STATS_OWNER_THREAD(t, s) t
#define STATS_OWNER_SERVER(t, s) s
#define STATS_OWNER_CLASS(t, s)
#define STATS_OWNER_BUFFER(t, s)
#define STATS_OWNER_PROC(t, s)
#define STATS_OWNER_ZERO(t, s)
#define STATS_OWNER_LOG(t, s)
#define STATS_OWNER_COUNTER(t, s)
#define STATS_OWNER_GAUGE(t, s)
#define STATS_OWNER_STATUS(t, s)
#define STATS_THREAD_FIELD(name, src, shown) \
    STATS_OWNER_##src(uint64_t name;, )
#define STATS_SERVER_FIELD(name, src, shown) \
    STATS_OWNER_##src(, uint64_t name;)
#define STATS_CLASS_FIELD(name, reply) uint64_t name;

/* File descriptors kept back from -c for the server's own use, as
 * memcached's reserved_fds. */
#define RESERVED_FDS 20

struct slab_stats {
    CLASS_STATS(STATS_CLASS_FIELD)
};

/* Each worker's block starts on a cache line of its own: no two workers
 * write one line. */
struct thread_stats {
    STATS_GENERAL(STATS_THREAD_FIELD)
    struct slab_stats slab[CACHE_MAX_CLASSES];
} __attribute__((aligned(64)));

/* Single-writer increment of a per-thread counter. */
#define STAT_ADD(field, n) \
    __atomic_store_n(&(field), __atomic_load_n(&(field), __ATOMIC_RELAXED) \
                     + (n), __ATOMIC_RELAXED)
#define STAT_INCR(field) STAT_ADD(field, 1)
#define STAT_LOAD(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)

/* Counters shared by the listener and the workers; touched per
 * connection, never per request. */
struct server_stats {
    STATS_GENERAL(STATS_SERVER_FIELD)
};

struct stats {
    struct server_stats server;
    struct thread_stats *threads;   /* one per worker */
    unsigned nthreads;
};

extern struct stats stats;

/* Allocate the per-worker blocks.  0, or -1 on allocation failure. */
int stats_init(unsigned nworkers);
void stats_destroy(void);

/* Shared connection counters: relaxed atomics. */
#define SERVER_STAT_INCR(f) \
    __atomic_fetch_add(&stats.server.f, 1, __ATOMIC_RELAXED)
#define SERVER_STAT_DECR(f) \
    __atomic_fetch_sub(&stats.server.f, 1, __ATOMIC_RELAXED)
#define SERVER_STAT_LOAD(f) \
    __atomic_load_n(&stats.server.f, __ATOMIC_RELAXED)

/* Sum every worker's block (minus the last reset's baseline) into *out. */
void stats_sum(struct thread_stats *out);

/* The per-class counters of a sum, added up over the classes. */
void stats_class_total(const struct thread_stats *t, struct slab_stats *out);

/* "stats reset": make the current sums the new zero. */
void stats_reset(void);

#endif
