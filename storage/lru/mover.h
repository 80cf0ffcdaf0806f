/*
 * mover.h: the page mover thread (slab rebalancer) and automove.
 *
 * It carries out the page moves slabs.h queues (slabs reassign, a class
 * starving for a page, automove): the page is taken out of service, each
 * live chunk's item is handed to place_evacuate() (rescued into another
 * chunk of its class, or moved out of the class as the policy says),
 * items readers hold are waited for and, after 8 passes (about 25 ms),
 * unlinked anyway; then slabs gives the empty page to its new class.
 *
 * Automove, once a second (mover_tick()): any mode hands pages back to the
 * tier after cache_memlimit lowered its limit; mode 1 moves a page from
 * the class with the oldest COLD tail to one that evicted within the
 * window when its tail is younger by automove_ratio, and gives the pool a
 * page of a class with too many free chunks.  Mode 2 also answers every
 * eviction with a page (evict.c).
 */
#ifndef MCPM_STORAGE_MOVER_H
#define MCPM_STORAGE_MOVER_H

#include "storage/base/metrics.h"
#include "storage/base/options.h"

/* Start the thread and attach it to slabs' requests (opts kept: the
 * automove fields are re-read).  0 or -1. */
int  mover_start(const struct cache_options *opts);

/* Detach and join (a move in progress finishes first); a no-op if not
 * running. */
void mover_stop(void);

/* Once a second: the automove decision, when the thread runs. */
void mover_tick(void);

/* slab_reassign_* into "stats"; reset zeroes the counters. */
void mover_stats(struct cache_stats *out);
void mover_stats_reset(void);

#endif
