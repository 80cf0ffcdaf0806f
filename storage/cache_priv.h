/*
 * cache_priv.h: the facade's own state, shared by its three files and
 * nothing else: cache_open.c (life cycle) fills it, cache.c (requests)
 * and cache_stats.c (figures) read it.
 */
#ifndef MCPM_STORAGE_CACHE_PRIV_H
#define MCPM_STORAGE_CACHE_PRIV_H

#include <stdint.h>

#include "storage/metrics.h"
#include "storage/options.h"
#include "storage/sblock.h"

struct cache_priv {
    struct cache_options *opts;     /* the daemon's; runtime fields move */
    uint64_t              total_items;      /* items stored since start */
    struct sblock         sb;       /* the memory file's (sb.tier NULL:
                                       no file) */
    struct cache_recovery recovery; /* what start-up read back */
};

extern struct cache_priv cache_priv;

#endif
