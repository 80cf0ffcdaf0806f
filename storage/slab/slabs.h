/*
 * slabs.h: size classes, pages and free chunks.
 *
 * Memory comes from a tier in pages; each page is cut into equal chunks of
 * one size class.  Class ids run 1..n with growing chunk sizes; class 0 is
 * the global pool of pages not given to any class (returned by the page
 * mover or by automove).  Free chunks are kept per class on a list.
 *
 *   page (1 MiB):  | chunk | chunk | chunk | ... | (tail unused)
 *   class 1 = 48 + chunk_min, then x factor rounded up to 8, last class
 *   exactly slab_chunk_max.
 *
 * Two tiers may be live at once (tier_policy cache and capacity): each has
 * its own pages, free lists, global pool and limit, over one class table.
 * A class in a tier is a "tier class", SLABS_TC(tier, id); in a DRAM-only
 * server it is the class id itself.  With a memory file every chunk of
 * either tier starts with a prefix of `prefix` bytes (persist.h's commit
 * word), so an item has the same class in both tiers and moves between
 * them chunk for chunk.
 *
 * slabs knows nothing of items: a chunk is a struct slabs_chunk header
 * (below) that the item layer lays its own headers over.  Pages of the
 * memory file are recorded in its page table (pagetab.h) when they change
 * hands.
 *
 * Page moves (slabs_move.h), the figures (slabs_stats.h) and the classes
 * taken back from the memory file (slabs_image.h) have headers of their
 * own; the state they share is slabs_priv.h's.
 *
 * Locking: one mutex, the "slabs lock", the innermost lock of storage/:
 * nothing else is taken while it is held.
 */
#ifndef MCPM_STORAGE_SLABS_H
#define MCPM_STORAGE_SLABS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/base/metrics.h"
#include "storage/base/options.h"
#include "storage/base/status.h"
#include "storage/tier/tier.h"

/* A class in a tier (tier ids are TIER_DRAM 0 and TIER_PMEM 1); the
 * global pool of a tier is SLABS_TC(tier, 0). */
#define SLABS_TC(tier, id)  ((unsigned)(tier) << 6 | (unsigned)(id))
#define SLABS_TC_TIER(tc)   ((unsigned)(tc) >> 6)
#define SLABS_TC_ID(tc)     ((unsigned)(tc) & 0x3f)
#define SLABS_TC_MAX        (2 * CACHE_MAX_CLASSES)
#define SLABS_NTIERS        2

/*
 * The first 48 bytes of every chunk.  A free chunk is this header, flags
 * SLABS_FREE, on its class's free list; an allocated chunk is handed out
 * with next, prev and hint zeroed, flags 0, refcount 1, and clsid and tier
 * set, and the item layer lays struct item or struct item_chunk over it,
 * keeping refcount, flags, clsid and tier at these offsets (item.c checks
 * that).  flags is read by other threads with relaxed atomic loads.
 */
struct slabs_chunk {
    struct slabs_chunk *next;
    struct slabs_chunk *prev;
    void       *hint;           /* the item layer's (hash chain) */
    uint32_t    opaque[3];      /* the item layer's */
    uint16_t    refcount;
    uint16_t    flags;
    uint8_t     clsid;
    uint8_t     opaque2;
    uint8_t     tier;
    uint8_t     opaque3;
};

#define SLABS_CACHED 0x8000     /* free, in a thread's cache (with FREE) */
#define SLABS_FREE 0x0004       /* the chunk is on a free list (or in a
                                   page being moved, not for reuse) */

/*
 * Build the class table and take the tiers (owned by slabs from now on):
 * one or both of a volatile tier (id TIER_DRAM) and the memory file's
 * (TIER_PMEM, whose page table must be set up: pagetab_init()).  prefix:
 * bytes in front of every chunk's item.  The tier -m sizes is DRAM's when
 * there is one.  0, or -1 with a message on stderr.
 */
int  slabs_init(const struct cache_options *opts, struct tier *dram,
                struct tier *pmem, size_t prefix);

/* Give every page back to its tier and destroy the tiers.  No page move
 * may be running. */
void slabs_destroy(void);

/* A tier slabs takes pages from, NULL if it is not in use (tests reach
 * the PMEM simulator through it).  Owned by slabs. */
struct tier *slabs_tier(unsigned tier_id);

/* The class whose chunks hold `size` bytes; 0 if none is large enough.
 * Class ids are the same in every tier. */
unsigned slabs_clsid(size_t size);

/* Bytes an item may take in a class's chunks (the chunk size less the
 * prefix; id may be a tier class), the largest class id, and the item
 * bytes of its chunks. */
size_t   slabs_size(unsigned id);
unsigned slabs_largest(void);
size_t   slabs_chunk_max(void);

/*
 * A free chunk of tier class tc for an item of `size` bytes (counted as
 * requested), taking a new page from the tier's pool or the tier when the
 * class has none free.  NULL when the tier's limit is reached.
 */
void *slabs_alloc(size_t size, unsigned tc);

/* The same from the class's free chunks only, never a new page: the page
 * mover's rescues, which must not grow the class they empty a page of. */
void *slabs_alloc_free(size_t size, unsigned tc);

/*
 * The calling thread keeps up to SLABS_TCACHE_MAX free chunks of each
 * class of chunks up to SLABS_TCACHE_CHUNK_MAX bytes of its own (on),
 * taken from and given back to its class SLABS_TCACHE_BATCH at a time
 * under the slabs lock, so that most of its slabs_alloc() and
 * slabs_free() calls take only a lock no other thread wants.  (Larger
 * chunks are rarer, costlier to fill than to lock for, and a cache of
 * them would hold memory the limit counts: 32 chunks of a 512 KiB class
 * are 16 pages.)  Off gives them back (before the thread exits).  A
 * cached chunk is free (SLABS_FREE | SLABS_CACHED) and counted as free;
 * it is in a page already taken, so the memory limit is unchanged; the
 * page mover takes a page's chunks out of every cache before it empties
 * the page.
 */
#define SLABS_TCACHE_MAX   32
#define SLABS_TCACHE_BATCH 16
#define SLABS_TCACHE_CHUNK_MAX 1024
void slabs_thread_cache(bool on);

/* Give a chunk back (its refcount is 0). */
void  slabs_free(void *ptr, size_t size, unsigned tc);

#endif
