/*
 * cache_durable.h: what a store in the memory file survives, and the
 * group commit of an event loop's thread (cache_durable.c).
 */
#ifndef MCPM_STORAGE_CACHE_DURABLE_H
#define MCPM_STORAGE_CACHE_DURABLE_H

#include <stdbool.h>

/*
 * Durability of the memory file (tier.h enum tier_durability), as stats
 * settings names it: "process" or "power", and how it flushes: "none",
 * "cache_lines" or "msync".  NULL without a memory file.
 */
const char *cache_durability(void);
const char *cache_flush_method(void);

/*
 * Group commit, where the memory file flushes by msync (persist.h): an
 * event loop's thread joins (false: nothing to group, every store is
 * durable when its call returns), and then, before any reply that
 * acknowledges a change goes out, syncs what its calls left pending.
 * Every pass of the loop ends with a sync when something is pending.
 */
bool cache_group_join(void);
bool cache_group_pending(void);
void cache_group_sync(void);
void cache_group_leave(void);       /* before the thread exits */

#endif
