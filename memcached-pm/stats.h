/*
 * stats.h: the server's counters, the other global, and the "stats" replies.
 *
 * Request counters live in one block per worker thread and are written only
 * by that thread, with relaxed atomic loads and stores (plain moves on x86:
 * no locked instruction, no shared cache line on the request path).  A
 * "stats" request sums the blocks; "stats reset" does not write into other
 * threads' blocks but records the sums as a baseline to subtract, so a reset
 * can never race with a worker's increment.
 */
#ifndef MCPM_STATS_H
#define MCPM_STATS_H

#include <stdbool.h>
#include <stdint.h>

#include "storage/cache.h"

/* Per-slab-class request counters ("stats slabs", "stats items"). */
#define SLAB_STATS(ACTION)                                                  \
    ACTION(get_hits) ACTION(cmd_set) ACTION(delete_hits) ACTION(incr_hits)  \
    ACTION(decr_hits) ACTION(cas_hits) ACTION(cas_badval)                   \
    ACTION(touch_hits) ACTION(hits_to_hot) ACTION(hits_to_warm)             \
    ACTION(hits_to_cold) ACTION(hits_to_temp)

/* Per-thread counters without a class, in "stats" order. */
#define THREAD_STATS(ACTION)                                                \
    ACTION(cmd_get) ACTION(cmd_touch) ACTION(cmd_meta) ACTION(get_misses)   \
    ACTION(get_expired) ACTION(get_flushed) ACTION(delete_misses)           \
    ACTION(incr_misses) ACTION(decr_misses) ACTION(cas_misses)              \
    ACTION(touch_misses) ACTION(store_too_large) ACTION(store_no_memory)    \
    ACTION(auth_cmds) ACTION(auth_errors) ACTION(bytes_read)                \
    ACTION(bytes_written) ACTION(conn_yields) ACTION(cmd_flush)             \
    ACTION(idle_kicks) ACTION(hits_dram) ACTION(hits_pmem)                  \
    ACTION(prefetch_batches) ACTION(prefetch_keys)

/* File descriptors kept back from -c for the server's own use, as
 * memcached's reserved_fds. */
#define RESERVED_FDS 20

#define STATS_FIELD(name) uint64_t name;

struct slab_stats {
    SLAB_STATS(STATS_FIELD)
};

struct thread_stats {
    THREAD_STATS(STATS_FIELD)
    struct slab_stats slab[CACHE_MAX_CLASSES];
};

/* Single-writer increment of a per-thread counter. */
#define STAT_ADD(field, n) \
    __atomic_store_n(&(field), __atomic_load_n(&(field), __ATOMIC_RELAXED) \
                     + (n), __ATOMIC_RELAXED)
#define STAT_INCR(field) STAT_ADD(field, 1)

/* Counters shared by the listener and the workers; touched per connection,
 * never per request. */
struct server_stats {
    uint64_t curr_conns;
    uint64_t total_conns;
    uint64_t rejected_conns;
    uint64_t conn_structures;
    uint64_t listen_disabled_num;
    uint64_t started;            /* wall time of process start */
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

/*
 * Sum every worker's block (minus the last reset's baseline) into *out.
 */
void stats_sum(struct thread_stats *out);

/* "stats reset": make the current sums the new zero. */
void stats_reset(void);

#endif
