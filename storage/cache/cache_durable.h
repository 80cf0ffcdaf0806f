/*
 * cache_durable.h: what a store in the memory file survives, and the
 * group commit of an event loop's thread (cache_durable.c).
 */
#ifndef MCPM_STORAGE_CACHE_DURABLE_H
#define MCPM_STORAGE_CACHE_DURABLE_H

#include <stdbool.h>
#include <stdint.h>

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
 * durable when its call returns).  Before a reply that acknowledges a
 * change goes out, the change must be durable: noted() is the thread's
 * clock of changes, durable() how far they are durable.  A removal needs
 * more, *settled: until then an item that the removed one had replaced
 * could come back; killed() is noted() at the thread's last removal (of
 * any item, any cause).  At the end of each pass the thread syncs what is pending, or with a waker submits it
 * to the flusher thread and goes on (true; false: it synced after all),
 * wake(arg) called from there once more of it is durable.
 */
bool cache_group_join(void (*wake)(void *), void *arg);
bool cache_group_pending(void);
void cache_group_sync(void);
bool cache_group_submit(void);
uint64_t cache_group_noted(void);
uint64_t cache_group_durable(uint64_t *settled);
uint64_t cache_group_killed(void);
void cache_group_leave(void);       /* before the thread exits */

#endif
