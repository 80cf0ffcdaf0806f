/*
 * maint.h: the LRU maintainer thread.
 *
 *   new item --> HOT --(tail, over hot_lru_pct or too old)--> COLD --> evict
 *                 |  (tail, ACTIVE)                            ^  |
 *                 v                                            |  | ACTIVE
 *                WARM --(tail, over warm_lru_pct or too old)---+  | at the
 *                 ^  (tail, ACTIVE: back to the WARM head)        | tail
 *                 +-----------------------------------------------+
 *
 * Hits in any list only set flags and it->time (lru_hit(): no list lock on
 * a GET); the maintainer moves items at the tails, keeping HOT and WARM to
 * their shares of the class's bytes and ages, and sending active COLD
 * items back to WARM.  Each class is juggled on its own backoff: 1 ms after
 * a pass that moved items, doubling up to 1 s while passes find nothing.
 * TEMP (short TTLs) is only ever reclaimed.
 */
#ifndef MCPM_STORAGE_MAINT_H
#define MCPM_STORAGE_MAINT_H

#include "storage/base/metrics.h"
#include "storage/base/options.h"

/* Keep opts (the shares and factors are re-read at every pass). */
void maint_init(const struct cache_options *opts);

int  maint_start(void);
void maint_stop(void);          /* a no-op if not running */

/* One pass over tier class tc: the number of items moved (tests). */
unsigned maint_juggle(unsigned tc);

/* lru_maintainer_juggles into "stats"; reset zeroes it. */
void maint_stats(struct cache_stats *out);
void maint_stats_reset(void);

#endif
