/*
 * metrics.h: every figure storage/ reports, declared once.
 *
 * Each table lists its figures in the order memcached prints them.  From
 * the tables come the structs that carry the figures to the daemon, the
 * sums, and what "stats reset" zeroes; the daemon prints a table by
 * walking it (memcached-pm/admin/admin_stats.c).  A new figure is one
 * line here plus the code that counts it.
 *
 * Kinds:
 *   COUNTER  counts events; "stats reset" zeroes it
 *   GAUGE    a level (items, bytes, a thread running); never reset
 *   TOTAL    (per class) a COUNTER also summed into "stats" under the
 *            name in the third column
 *   LAST     (per class) the last value of something; reset, not summed
 *   STATUS   a word memcached prints where storage has none to report
 *            ("none")
 *
 * Types only: every layer may include it.
 */
#ifndef MCPM_STORAGE_METRICS_H
#define MCPM_STORAGE_METRICS_H

#include <stdbool.h>
#include <stdint.h>

/*
 * "stats", the storage part.  X(name, kind, shown): `shown` names the
 * option without which memcached leaves the line out (ALWAYS, REASSIGN:
 * slab_reassign, CRAWLER: lru_crawler, MAINTAINER: the LRU maintainer).
 * SERVER lines come after the daemon's "threads" and "conn_yields",
 * ITEMS lines after the log lines, MEMORY lines where the daemon puts them.
 */
#define CACHE_STATS_SERVER(X)                                               \
    X(hash_power_level,               GAUGE,   ALWAYS)                      \
    X(hash_bytes,                     GAUGE,   ALWAYS)                      \
    X(hash_is_expanding,              GAUGE,   ALWAYS)                      \
    X(slab_reassign_rescues,          COUNTER, REASSIGN)                    \
    X(slab_reassign_chunk_rescues,    COUNTER, REASSIGN)                    \
    X(slab_reassign_inline_reclaim,   COUNTER, REASSIGN)                    \
    X(slab_reassign_busy_items,       COUNTER, REASSIGN)                    \
    X(slab_reassign_busy_deletes,     COUNTER, REASSIGN)                    \
    X(slab_reassign_busy_nomem,       COUNTER, REASSIGN)                    \
    X(slab_reassign_last_busy_status, STATUS,  REASSIGN)                    \
    X(slab_reassign_running,          GAUGE,   REASSIGN)                    \
    X(slabs_moved,                    COUNTER, REASSIGN)                    \
    X(lru_crawler_running,            GAUGE,   CRAWLER)                     \
    X(lru_crawler_starts,             COUNTER, CRAWLER)                     \
    X(lru_maintainer_juggles,         COUNTER, MAINTAINER)                  \
    X(malloc_fails,                   COUNTER, ALWAYS)

#define CACHE_STATS_ITEMS(X)                                                \
    X(bytes,                  GAUGE,   ALWAYS)                              \
    X(curr_items,             GAUGE,   ALWAYS)                              \
    X(total_items,            COUNTER, ALWAYS)                              \
    X(slab_global_page_pool,  GAUGE,   ALWAYS)                              \
    X(expired_unfetched,      COUNTER, ALWAYS)                              \
    X(evicted_unfetched,      COUNTER, ALWAYS)                              \
    X(evicted_active,         COUNTER, MAINTAINER)                          \
    X(evictions,              COUNTER, ALWAYS)                              \
    X(reclaimed,              COUNTER, ALWAYS)                              \
    X(crawler_reclaimed,      COUNTER, ALWAYS)                              \
    X(crawler_items_checked,  COUNTER, ALWAYS)                              \
    X(lrutail_reflocked,      COUNTER, ALWAYS)                              \
    X(moves_to_cold,          COUNTER, MAINTAINER)                          \
    X(moves_to_warm,          COUNTER, MAINTAINER)                          \
    X(moves_within_lru,       COUNTER, MAINTAINER)                          \
    X(direct_reclaims,        COUNTER, MAINTAINER)                          \
    X(lru_bumps_dropped,      COUNTER, MAINTAINER)

#define CACHE_STATS_MEMORY(X)                                               \
    X(limit_maxbytes,         GAUGE,   ALWAYS)                              \
    X(total_malloced,         GAUGE,   ALWAYS)

#define CACHE_STATS(X) CACHE_STATS_SERVER(X) CACHE_STATS_ITEMS(X)           \
                       CACHE_STATS_MEMORY(X)

/*
 * "stats items", per slab class: X(name, kind, total).  The GAUGE rows
 * come from the lists and slabs as they stand; the others are counted
 * per class (and tier) by storage, TOTAL ones summed into "stats".
 * memcached prints number_temp only with temp_lru.
 */
#define CACHE_ITEM_STATS(X)                                                 \
    X(number,                 GAUGE,   _)                                   \
    X(number_hot,             GAUGE,   _)                                   \
    X(number_warm,            GAUGE,   _)                                   \
    X(number_cold,            GAUGE,   _)                                   \
    X(number_temp,            GAUGE,   _)                                   \
    X(age_hot,                GAUGE,   _)                                   \
    X(age_warm,               GAUGE,   _)                                   \
    X(age,                    GAUGE,   _)                                   \
    X(mem_requested,          GAUGE,   _)                                   \
    X(evicted,                TOTAL,   evictions)                           \
    X(evicted_nonzero,        COUNTER, _)                                   \
    X(evicted_time,           LAST,    _)                                   \
    X(outofmemory,            COUNTER, _)                                   \
    X(tailrepairs,            COUNTER, _)                                   \
    X(reclaimed,              TOTAL,   reclaimed)                           \
    X(expired_unfetched,      TOTAL,   expired_unfetched)                   \
    X(evicted_unfetched,      TOTAL,   evicted_unfetched)                   \
    X(evicted_active,         TOTAL,   evicted_active)                      \
    X(crawler_reclaimed,      TOTAL,   crawler_reclaimed)                   \
    X(crawler_items_checked,  TOTAL,   crawler_items_checked)               \
    X(lrutail_reflocked,      TOTAL,   lrutail_reflocked)                   \
    X(moves_to_cold,          TOTAL,   moves_to_cold)                       \
    X(moves_to_warm,          TOTAL,   moves_to_warm)                       \
    X(moves_within_lru,       TOTAL,   moves_within_lru)                    \
    X(direct_reclaims,        TOTAL,   direct_reclaims)

/* "stats slabs", per slab class: X(name, kind, _), all levels. */
#define CACHE_SLAB_STATS(X)                                                 \
    X(chunk_size,             GAUGE,   _)                                   \
    X(chunks_per_page,        GAUGE,   _)                                   \
    X(total_pages,            GAUGE,   _)                                   \
    X(total_chunks,           GAUGE,   _)                                   \
    X(used_chunks,            GAUGE,   _)                                   \
    X(free_chunks,            GAUGE,   _)                                   \
    X(free_chunks_end,        GAUGE,   _)

/*
 * "stats tiers", per tier ("<tier>:<name>"): X(name, kind, _).  hits is
 * the daemon's to fill (it counts reads per worker); storage leaves it 0.
 * promotions, demotions and the flushes count since start: "stats reset"
 * leaves them, hence GAUGE.
 */
#define CACHE_TIER_STATS(X)                                                 \
    X(durable,                GAUGE,   _) /* items survive a restart */     \
    X(persistent_memory,      GAUGE,   _) /* the mapping is real PMEM */    \
    X(limit_maxbytes,         GAUGE,   _) /* bytes of pages it may give */  \
    X(total_malloced,         GAUGE,   _) /* bytes of pages given */        \
    X(curr_items,             GAUGE,   _)                                   \
    X(bytes,                  GAUGE,   _)                                   \
    X(hits,                   COUNTER, _)                                   \
    X(evictions,              COUNTER, _)                                   \
    X(promotions,             GAUGE,   _) /* items copied up into DRAM */   \
    X(demotions,              GAUGE,   _) /* items moved down into the   \
                                             file */                        \
    X(flushes,                GAUGE,   _) /* persist calls, and the     */ \
    X(flush_bytes,            GAUGE,   _) /* bytes they covered          */ \
    X(syncs,                  GAUGE,   _) /* msync calls made for them */

/*
 * What start-up read back from the memory file ("stats",
 * "recovery_<name>"): X(name, kind, unit).  US is a time in microseconds,
 * printed in seconds with six decimals.
 */
#define CACHE_RECOVERY_STATS(X)                                             \
    X(running,                GAUGE,   COUNT) /* 1 while items are still  \
                                                 being read back */         \
    X(items,                  GAUGE,   COUNT) /* recovered and linked */    \
    X(pages,                  GAUGE,   COUNT) /* given a class by the     \
                                                 page table */              \
    X(pages_done,             GAUGE,   COUNT) /* of those, read back */     \
    X(dropped_torn,           GAUGE,   COUNT) /* a header, chain or       \
                                                 checksum failed */         \
    X(dropped_expired,        GAUGE,   COUNT)                               \
    X(dropped_flushed,        GAUGE,   COUNT)                               \
    X(dropped_replaced,       GAUGE,   COUNT) /* an older live copy */      \
    X(dropped_removed,        GAUGE,   COUNT) /* its key removed since    \
                                                 the start */               \
    X(removals,               GAUGE,   COUNT) /* keys removed while       \
                                                 recovering (tomb.h) */     \
    X(checksummed,            GAUGE,   COUNT) /* the checksum pass ran */   \
    X(downtime,               GAUGE,   COUNT) /* seconds from the file's  \
                                                 last write to this start  \
                                                 (0: not known) */          \
    X(discarded_stale,        GAUGE,   COUNT) /* 1: down longer than      \
                                                 memory_file_max_downtime, \
                                                 the file started empty */  \
    X(discarded_unproven,     GAUGE,   COUNT) /* 1: written without     \
                                                 flushes under another     \
                                                 boot, the file started    \
                                                 empty */                  \
    X(image,                  GAUGE,   COUNT) /* 1: the DRAM index came  \
                                                 from the node taken over  \
                                                 from, or saved at a clean \
                                                 stop: no scan */           \
    X(threads,                GAUGE,   COUNT) /* recovery threads */        \
    X(start_seconds,          GAUGE,   US)    /* before serving: pages    \
                                                 claimed, table sized */    \
    X(seconds,                GAUGE,   US)    /* all of it (so far), of   \
                                                 which: */                  \
    X(scan_seconds,           GAUGE,   US)    /* pages read and linked */  \
    X(link_seconds,           GAUGE,   US)    /* chunked values, at the   \
                                                 end */

#define CACHE_METRIC_FIELD(name, kind, extra) uint64_t name;

struct cache_stats {
    CACHE_STATS(CACHE_METRIC_FIELD)
};

struct cache_item_stats {
    CACHE_ITEM_STATS(CACHE_METRIC_FIELD)
};

struct cache_slab_stats {
    CACHE_SLAB_STATS(CACHE_METRIC_FIELD)
};

struct cache_tier_stats {
    const char *name;           /* "dram", "pmem", ... */
    CACHE_TIER_STATS(CACHE_METRIC_FIELD)
};

struct cache_recovery {
    CACHE_RECOVERY_STATS(CACHE_METRIC_FIELD)
};

/* The per-class counters storage keeps (the non-GAUGE item rows). */
#define CACHE_COUNTER_FIELD_GAUGE(name)
#define CACHE_COUNTER_FIELD_COUNTER(name) uint64_t name;
#define CACHE_COUNTER_FIELD_TOTAL(name) uint64_t name;
#define CACHE_COUNTER_FIELD_LAST(name) uint64_t name;
#define CACHE_COUNTER_FIELD(name, kind, total) CACHE_COUNTER_FIELD_##kind(name)

struct cache_class_counters {
    CACHE_ITEM_STATS(CACHE_COUNTER_FIELD)
};

/*
 * Generated helpers.  A module keeps the figures it counts in a block of
 * the struct they belong to; the facade adds the blocks up.
 */

/* out += in, field by field (relaxed loads: other threads may count). */
static inline void
cache_stats_add(struct cache_stats *out, const struct cache_stats *in)
{
#define CACHE_STATS_ADD(name, kind, shown) \
    out->name += __atomic_load_n(&in->name, __ATOMIC_RELAXED);
    CACHE_STATS(CACHE_STATS_ADD)
#undef CACHE_STATS_ADD
}

/* Zero what "stats reset" zeroes: the COUNTERs. */
#define CACHE_RESET_GAUGE(f)
#define CACHE_RESET_STATUS(f)
#define CACHE_RESET_COUNTER(f) __atomic_store_n(&(f), 0, __ATOMIC_RELAXED);
#define CACHE_RESET_TOTAL(f) CACHE_RESET_COUNTER(f)
#define CACHE_RESET_LAST(f) CACHE_RESET_COUNTER(f)

static inline void
cache_stats_reset_counters(struct cache_stats *s)
{
#define CACHE_STATS_RESET(name, kind, shown) CACHE_RESET_##kind(s->name)
    CACHE_STATS(CACHE_STATS_RESET)
#undef CACHE_STATS_RESET
}

/* Add one class's counters into the "stats" totals (the TOTAL rows). */
#define CACHE_TOTAL_GAUGE(out, c, name, total)
#define CACHE_TOTAL_COUNTER(out, c, name, total)
#define CACHE_TOTAL_LAST(out, c, name, total)
#define CACHE_TOTAL_TOTAL(out, c, name, total) \
    (out)->total += __atomic_load_n(&(c)->name, __ATOMIC_RELAXED);

static inline void
cache_class_counters_total(struct cache_stats *out,
                           const struct cache_class_counters *c)
{
#define CACHE_CLASS_TOTAL(name, kind, total) \
    CACHE_TOTAL_##kind(out, c, name, total)
    CACHE_ITEM_STATS(CACHE_CLASS_TOTAL)
#undef CACHE_CLASS_TOTAL
}

/* A class's counters into its "stats items" row (relaxed loads). */
#define CACHE_COPY_GAUGE(out, c, name)
#define CACHE_COPY_COUNTER(out, c, name) \
    (out)->name = __atomic_load_n(&(c)->name, __ATOMIC_RELAXED);
#define CACHE_COPY_TOTAL(out, c, name) CACHE_COPY_COUNTER(out, c, name)
#define CACHE_COPY_LAST(out, c, name) CACHE_COPY_COUNTER(out, c, name)

static inline void
cache_class_counters_copy(struct cache_item_stats *out,
                          const struct cache_class_counters *c)
{
#define CACHE_CLASS_COPY(name, kind, total) CACHE_COPY_##kind(out, c, name)
    CACHE_ITEM_STATS(CACHE_CLASS_COPY)
#undef CACHE_CLASS_COPY
}

/* Zero one class's counters ("stats reset"). */
static inline void
cache_class_counters_reset(struct cache_class_counters *c)
{
#define CACHE_CLASS_RESET(name, kind, total) CACHE_RESET_##kind(c->name)
    CACHE_ITEM_STATS(CACHE_CLASS_RESET)
#undef CACHE_CLASS_RESET
}

#endif
