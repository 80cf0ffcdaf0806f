/*
 * slabs_stats.h: the slab allocator's figures, for stats and the page
 * mover's heuristics, and the limit of the tier -m sizes (slabs_stats.c).
 */
#ifndef MCPM_STORAGE_SLABS_STATS_H
#define MCPM_STORAGE_SLABS_STATS_H

#include <stdbool.h>
#include <stdint.h>

#include "storage/base/metrics.h"
#include "storage/slab/slabs.h"

/* ---- figures -----------------------------------------------------------
 * Racy reads where said, good for stats and heuristics. */

/* "stats slabs" for one tier class: false when it has no pages. */
bool  slabs_class_stats(unsigned tc, struct cache_slab_stats *out);

/* Pages a tier class holds now (racy). */
unsigned slabs_npages(unsigned tc);

/* Bytes requested by the items living in a tier class (mem_requested). */
uint64_t slabs_requested(unsigned tc);

/* Into "stats": limit_maxbytes (the tier -m sizes), total_malloced and
 * slab_global_page_pool (every tier), malloc_fails, slabs_moved. */
void  slabs_totals(struct cache_stats *out);

/* One tier's limit and the bytes of pages it handed out. */
void  slabs_tier_usage(unsigned tier_id, uint64_t *limit, uint64_t *used);

/* "stats reset": malloc_fails and slabs_moved. */
void  slabs_stats_reset(void);

/* New limit for the tier -m sizes: 0, or -1 if the tier cannot follow.
 * Pages of the pool over it go back at once; automove returns the rest. */
int   slabs_set_memlimit(size_t bytes);

/* Is tier tier_id over a limit lowered by slabs_set_memlimit()?  (Over
 * the limit otherwise, by the first pages of classes, it stays.) */
bool  slabs_shrinking(unsigned tier_id);

#endif
