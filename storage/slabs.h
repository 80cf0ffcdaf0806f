/*
 * slabs.h: the slab allocator.
 *
 * Memory comes from a tier in pages; each page is cut into equal chunks of
 * one size class.  Class ids run 1..n with growing chunk sizes; class 0 is
 * the global pool of pages not given to any class (returned by the page
 * mover or by automove).  Free chunks are kept per class on a list, marked
 * ITEM_SLABBED.
 *
 *   page (1 MiB):  | chunk | chunk | chunk | ... | (tail unused)
 *   class 1 = 48 + chunk_min, then x factor rounded up to 8, last class
 *   exactly slab_chunk_max.
 *
 * Two tiers may be live at once (tier_policy cache and capacity): each has
 * its own pages, free lists, global pool and limit, over one class table.
 * Slabs (and the LRUs) name a class in a tier by a "tier class",
 * SLABS_TC(tier, id); in a DRAM-only server it is the class id itself.
 * With a memory file every chunk of either tier starts with the 16-byte
 * commit prefix, so an item has the same class in both tiers and moves
 * between them chunk for chunk.
 *
 * Locking: one mutex (the "slabs lock"), the innermost lock of storage/:
 * nothing else is taken while it is held, except item trylocks by the page
 * mover.
 */
#ifndef MCPM_STORAGE_SLABS_H
#define MCPM_STORAGE_SLABS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/cache.h"

struct tier;

/* A class in a tier (tier ids are TIER_DRAM 0 and TIER_PMEM 1); the
 * global pool of a tier is SLABS_TC(tier, 0). */
#define SLABS_TC(tier, id)  ((unsigned)(tier) << 6 | (unsigned)(id))
#define SLABS_TC_TIER(tc)   ((unsigned)(tc) >> 6)
#define SLABS_TC_ID(tc)     ((unsigned)(tc) & 0x3f)
#define SLABS_TC_MAX        (2 * CACHE_MAX_CLASSES)

/* Build the class table and take the tiers (owned by slabs from now on):
 * one or both of a volatile tier (id TIER_DRAM) and the memory file's.
 * 0, or -1 with a message on stderr. */
int  slabs_init(const struct cache_options *opts, struct tier *dram,
                struct tier *pmem);

/* A tier slabs takes pages from, NULL if it is not in use (tests reach
 * the PMEM simulator through it).  Owned by slabs. */
struct tier *slabs_tier(unsigned tier_id);

/* The tier new items go to under the policy: DRAM for dram and
 * capacity, the memory file for pmem and cache. */
unsigned slabs_home_tier(void);

/* Stop the mover and give every page back to the tier. */
void slabs_destroy(void);

/* The class whose chunks hold `size` bytes; 0 if none is large enough.
 * Class ids are the same in every tier. */
unsigned slabs_clsid(size_t size);

/* Bytes an item may take in a class's chunks (the chunk size less the
 * per-chunk prefix: 16 with a memory file, else 0; id may be a tier
 * class), the largest class id, and the item bytes of its chunks. */
size_t   slabs_size(unsigned id);
unsigned slabs_largest(void);
size_t   slabs_chunk_max(void);

/*
 * A free chunk of tier class tc for an item of `size` bytes, taking a new
 * page from the tier's global pool or the tier when the class has none
 * free.  The chunk comes back with its 48-byte header zeroed except
 * refcount 1, clsid and tier.  NULL when the tier's limit is reached.
 */
void *slabs_alloc(size_t size, unsigned tc);

/* Give a chunk back (refcount already 0). */
void  slabs_free(void *ptr, size_t size, unsigned tc);

/* "stats slabs" for one tier class: false when it has no pages. */
bool  slabs_class_stats(unsigned tc, struct cache_slab_stats *out);

/* Pages a tier class holds now (a racy read, good for a heuristic). */
unsigned slabs_npages(unsigned tc);

/* Bytes requested by the items living in a tier class (mem_requested). */
uint64_t slabs_requested(unsigned tc);

/* Totals for "stats": the limit of the tier -m sizes (with two tiers the
 * file's is in slabs_tier_usage()), the bytes of pages taken and the
 * pages in the global pools of every tier. */
void  slabs_totals(struct cache_stats *out);

/* One tier's limit and the bytes of pages it handed out. */
void  slabs_tier_usage(unsigned tier_id, uint64_t *limit, uint64_t *used);

/* New memory limit (-m: the DRAM tier's, or the file's under
 * tier_policy=pmem): 0, or -1 if the tier cannot follow. */
int   slabs_set_memlimit(size_t bytes);

/*
 * Ask the page mover to move one page of the home tier from class src
 * (-1: any class with spare pages) to dst (0: the global pool).  Returns
 * at once: CACHE_OK when the move was queued, else CACHE_BUSY,
 * CACHE_BADCLASS, CACHE_NOSPARE, CACHE_SAME or CACHE_DISABLED (no mover
 * thread).
 */
enum cache_status slabs_reassign(int src, int dst);

/* Start/stop the page mover thread. */
int   slabs_mover_start(void);
void  slabs_mover_stop(void);

/* Once a second: the windowed automove decision (mode 1). */
void  slabs_automove_tick(void);

/* An eviction happened in tier class tc: automove mode 2 moves a page to
 * it. */
void  slabs_note_eviction(unsigned tc);

/* Mover figures for "stats"; reset zeroes them (not slab_reassign_running)
 * as memcached's "stats reset" does. */
void  slabs_mover_stats(struct cache_stats *out);
void  slabs_stats_reset(void);

/*
 * Recovery of the PMEM tier, before serving.  slabs_perslab() and
 * slabs_chunk() name chunk i of a page of class id (the item address, past
 * the tier's prefix).  slabs_recover_page() gives a page the tier holds
 * (tier_pmem_claim) to class id as it is, without carving it: each chunk
 * is offered to keep(), whose answer is the bytes its item asks for
 * (counted as requested; the chunk stays in use) or 0 (the chunk goes on
 * the free list).  keep() runs under the slabs lock and takes no lock.
 * -1 if id is not a class or memory for the page list runs out.
 */
unsigned slabs_perslab(unsigned id);
void    *slabs_chunk(unsigned id, void *page, unsigned i);
int      slabs_recover_page(unsigned id, void *page,
                            size_t (*keep)(void *chunk, void *ctx),
                            void *ctx);

/* Wait until the mover is idle (tests). */
void  slabs_mover_wait(void);

/*
 * Tier class tc is out of memory and has nothing to evict (typically it
 * has no page at all while others hold all of the tier): have the mover
 * bring it a page from any class of its tier with spare pages, waiting up
 * to ms milliseconds.  True if a page arrived.  No slabs lock held; item
 * locks may be (the mover only trylocks them).
 */
bool  slabs_steal_page(unsigned tc, unsigned ms);

#endif
