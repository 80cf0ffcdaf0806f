/*
 * lru.h: the segmented LRU (HOT, WARM, COLD, TEMP per slab class), item
 * linking, eviction on allocation and the maintainer thread.
 *
 * Each of the four lists of each class has its own mutex.  An item's list
 * (the LRU bits of it->clsid) only changes under its item lock and the list
 * locks; lists are only nested in index order (HOT, WARM, COLD, TEMP) so
 * that a move HOT->COLD never deadlocks with another thread.  Threads that
 * already hold a list lock only trylock item locks.
 *
 * Lists and counters are kept per tier class (slabs.h SLABS_TC): the calls
 * below that take an id take a tier class, which in a DRAM-only server is
 * the class id itself.  An item's lists are chosen by it->tier and its
 * class.  With two tiers, list locks of the DRAM tier rank before those of
 * the memory file's: a demotion holds a DRAM item and takes file lists.
 */
#ifndef MCPM_STORAGE_LRU_H
#define MCPM_STORAGE_LRU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/cache.h"

/* Keep opts (runtime fields are re-read).  0 or -1. */
int  lru_init(const struct cache_options *opts);
void lru_destroy(void);

/*
 * Memory for `size` bytes in slab class id: slabs first, then reclaim or
 * evict from the COLD tail of class lru_id's LRU (pushing a HOT tail item
 * to COLD when COLD is empty), up to 10 tries, then a page moved from
 * another class.  lru_id is id itself except for the chunks of chunked
 * items, whose owners live in the largest class's LRU.  NULL (counting
 * outofmemory) when nothing can be freed or eviction is off.  No LRU or
 * slabs lock may be held; an item lock may.
 */
void *lru_alloc(size_t size, unsigned tc, unsigned lru_tc);

/* Link a new item: hash table, LRU head (HOT, TEMP for short TTLs, COLD in
 * flat mode), ITEM_LINKED and one reference.  Caller holds lock(hv). */
void lru_link(struct item *it, uint32_t hv);

/* Recovery: put an item read back from the memory file, already in the
 * hash table, at the head of its class's COLD list (link the oldest
 * first) with the link's reference.  Before any other storage thread
 * starts: it takes no lock. */
void lru_link_recovered(struct item *it);

/* Undo lru_link() if linked: the link's reference is dropped (the memory
 * may be freed).  Caller holds lock(hv). */
void lru_unlink(struct item *it, uint32_t hv);


/* A hit: FETCHED, then ACTIVE (set as a flag; the maintainer moves the
 * item).  Under tier_policy capacity a second hit on an item in the
 * memory file moves it to DRAM: the item to serve is returned, and the
 * caller's reference (which it must hold) has moved to it.  Caller holds
 * lock(hv). */
struct item *lru_bump(struct item *it, uint32_t hv);

/* Expired (exptime reached) or flushed at `now`; *flushed says which. */
bool lru_is_dead(const struct item *it, rel_time_t now, bool *flushed);

/* flush_all: items with time <= when read as dead once when <= now. */
void lru_set_flush(rel_time_t when);

/* An immediate flush also unlinks, from the list heads, the items stored
 * after `when` (within the last second), as memcached does.  No lock. */
void lru_flush_recent(rel_time_t when);

/*
 * The page mover's hand-off: `it` is an allocated item (or the head of a
 * chunk) whose reference the mover took, `key` a copy of its key.  Rescue
 * (copy to another chunk of its class) if `rescue`, else unlink it; an
 * item readers hold is left alone unless `force`, then unlinked so that
 * its chunk frees when they let go.  Drops the mover's reference in all
 * cases.  Returns 0 when the item left its chunk (or will when readers
 * let go), 1 when busy (retry later).
 */
int  lru_evacuate(struct item *it, const char *key, size_t nkey,
                  bool rescue, bool force, struct cache_stats *mst);

/* One maintainer pass over tier class tc: moves made. */
unsigned lru_juggle(unsigned tc);

int  lru_maintainer_start(void);
void lru_maintainer_stop(void);

/*
 * The crawler's cursor: a fake item (nkey 0, flags ITEM_LINKED only) that
 * walks a list from its tail towards the head.  insert puts it at the
 * tail; step moves it past one item, reclaiming that item if dead, and
 * returns 1 (checked one), 0 (skipped a busy one) or -1 (reached the head,
 * cursor removed).  *had_ttl is set when the item had an exptime.
 */
void lru_crawler_insert(struct item *cursor, unsigned tc, enum item_lru l);
int  lru_crawler_step(struct item *cursor, bool *had_ttl);
void lru_crawler_remove(struct item *cursor);

/* Stats: per tier class ("stats items"), totals, reset. */
bool lru_item_stats(unsigned tc, struct cache_item_stats *out);
void lru_totals(struct cache_stats *out);
void lru_stats_reset(void);
uint64_t lru_class_items(unsigned tc);

/* Items of class id in every tier. */
uint64_t lru_items_in_class(unsigned id);

/* lru_totals() of one tier's classes only (no maintainer figures). */
void lru_tier_totals(unsigned tier_id, struct cache_stats *out);

/* Items a tier received from the other: promotions into DRAM, demotions
 * into the memory file (0 for the other direction). */
void lru_tier_moves(unsigned tier_id, uint64_t *promotions,
                    uint64_t *demotions);

/* stats sizes: the histogram (when track_sizes). */
bool lru_sizes(void (*emit)(uint64_t size, uint64_t count, void *ctx),
               void *ctx);

#endif
