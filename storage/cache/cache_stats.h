/*
 * cache_stats.h: the facade's figures and dumps (cache_stats.c); the tables of
 * figures are in metrics.h.
 */
#ifndef MCPM_STORAGE_CACHE_STATS_H
#define MCPM_STORAGE_CACHE_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/base/metrics.h"
#include "storage/base/options.h"

/* The "stats" figures of storage. */
void cache_stats(struct cache_stats *out);

/* Largest class id in use by the slab table (classes are 1..n). */
unsigned cache_nclasses(void);

/* Fill one class's figures ("stats slabs", "stats items"; with two tiers
 * a class's figures add up both); false if the class has no pages
 * (slabs) or no items (items), in which case memcached prints nothing for
 * it. */
bool cache_slab_stats(unsigned id, struct cache_slab_stats *out);
bool cache_item_stats(unsigned id, struct cache_item_stats *out);

/* stats sizes: emit(size, count) per 32-byte bucket with items; false when
 * track_sizes is off. */
bool cache_sizes(void (*emit)(uint64_t size, uint64_t count, void *ctx),
                 void *ctx);

/* "stats tiers": fill up to max entries, one per tier in use; returns how
 * many.  Their hits are the caller's to fill. */
unsigned cache_tier_stats(struct cache_tier_stats *out, unsigned max);

/* What start-up read back from the memory file (all 0 for a new file);
 * false when there is no memory file. */
bool cache_recovery_stats(struct cache_recovery *out);

/* stats reset: zero the counters (metrics.h COUNTER, TOTAL, LAST). */
void cache_stats_reset(void);

/* An item as stats cachedump shows it. */
struct cache_dumped {
    const char *key;
    size_t      nkey;
    uint32_t    vlen;
    int64_t     exptime;        /* Unix time, 0: never */
};

/*
 * stats cachedump: call emit(d, ctx) for each item on class id's COLD
 * LRU (each tier's), head first, as memcached dumps them; items with
 * binary keys are left out.  Holds each list's lock for its walk (emit
 * must not call into storage).  Stops when emit returns non-zero.
 */
void cache_cachedump(unsigned id,
                     int (*emit)(const struct cache_dumped *d, void *ctx),
                     void *ctx);

/* An item as lru_crawler metadump shows it. */
struct cache_meta {
    const char *key;
    size_t      nkey;
    int64_t     exptime;        /* Unix time, -1: never */
    int64_t     atime;          /* last access, Unix time */
    uint64_t    cas;
    bool        fetched;
    unsigned    clsid;
    size_t      size;           /* bytes the item takes */
    uint32_t    client_flags;
    bool        key_binary;     /* stored with meta's b flag */
};

/*
 * lru_crawler metadump: call emit(m, ctx) for each live item of the given
 * classes (all if classes is NULL).  Runs in the caller's thread, a few
 * buckets at a time under the item locks (emit must not call into
 * storage).  Stops early when emit returns non-zero.
 */
void cache_metadump(const bool classes[CACHE_MAX_CLASSES],
                    int (*emit)(const struct cache_meta *m, void *ctx),
                    void *ctx);

#endif
