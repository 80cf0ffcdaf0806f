/*
 * place.h: where items go, as the tier policy (policy.h) decides.
 *
 *   place_new()       a new item, in its home tier or the next one
 *   place_mem()       memory in a tier class: room made by eviction, or
 *                     for DRAM over a memory file by demotion
 *   place_hit()       a hit, which may promote the item (capacity) or copy
 *                     it into DRAM (cache)
 *   place_evacuate()  the page mover's hand-off: an item rescued into
 *                     another chunk of its class, demoted, given back to
 *                     its original, or dropped
 *
 * Moving an item (between tiers or chunks) allocates its new home, copies
 * value, cas, times and meta marks, and swaps it into the old one's place
 * in one step under the key's item lock (link_replace()): a move into
 * the file is committed before the old copy dies there.
 *
 * A DRAM copy (tier_policy cache) is an unchunked DRAM item standing in the
 * hash table and DRAM's lists for an original that stays committed in the
 * file but is on no list; the copy holds the original's link reference
 * through its trailer (item.h ITEM_COPY).
 *
 * Locking: as link.h; place_mem() and place_new() as evict.h.
 */
#ifndef MCPM_STORAGE_PLACE_H
#define MCPM_STORAGE_PLACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/base/metrics.h"
#include "storage/slab/item.h"

/* An item_mem_fn: slabs, then room made in lru_tc's tails by eviction or
 * demotion (policy_room()). */
void *place_mem(size_t size, unsigned tc, unsigned lru_tc);

/* A new item for the cache (item_new() in policy_home(), then in
 * policy_overflow()).  NULL when no tier has room. */
struct item *place_new(const char *key, size_t nkey, uint32_t client_flags,
                       rel_time_t exptime, uint32_t vlen, bool use_cas);

/* A new item in tier t (a move's new home). */
static inline struct item *
place_new_in(unsigned t, const char *key, size_t nkey, uint32_t client_flags,
             rel_time_t exptime, uint32_t vlen, bool use_cas)
{
    return item_new(place_mem, t, key, nkey, client_flags, exptime, vlen,
                    use_cas);
}

/*
 * A hit on linked item `it`, whose reference the caller holds: marked
 * fetched or active (lru_hit()), and promoted or copied into DRAM when the
 * policy says.  Returns the item to serve; the caller's reference has
 * moved to it.  Caller holds lock(hv).
 */
struct item *place_hit(struct item *it, uint32_t hv);

/*
 * The page mover's hand-off: `it` is an allocated item (or the head of
 * `piece`, a chunk of its value in the page) whose reference the mover
 * took, `key` a copy of its key taken without the item lock.  Rescue it
 * (a copy in another chunk of its class) if `rescue`, or the piece into
 * another chunk of its class (in DRAM), else move the item out of the
 * class (policy_leave()); an
 * item readers hold is left alone unless `force`, then unlinked so that
 * its chunk frees when they let go.  Drops the mover's reference in all
 * cases and counts in mst (slab_reassign_*).  Returns 0 when the item left
 * its chunk (or will when readers let go), 1 when busy (retry later).
 */
int place_evacuate(struct item *it, const char *key, size_t nkey,
                   bool rescue, struct item_chunk *piece, bool force,
                   struct cache_stats *mst);

/* Items a tier received from the other since start: promotions into DRAM,
 * demotions into the file (0 for the other direction). */
void place_tier_moves(unsigned tier, uint64_t *promotions,
                      uint64_t *demotions);

#endif
