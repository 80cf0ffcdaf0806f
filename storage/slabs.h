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
 * Page moves: a move of one page from a class to another (or to the pool)
 * is requested here (slabs_reassign(), slabs_steal_page()) and carried out
 * by the page mover thread (mover.c), which empties the page of its items
 * through the calls at the end of this header.
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

/* ---- recovery ----------------------------------------------------------
 *
 * Before serving.  slabs_perslab() and slabs_chunk() name chunk i of a
 * page of class id (the item address, past the prefix).
 * slabs_recover_page() gives a page the PMEM tier holds (tier_pmem_claim)
 * to class id as it is, without cutting it again: each chunk is offered
 * to keep(), whose answer is the bytes its item asks for (counted as
 * requested; the chunk stays in use) or 0 (the chunk goes on the free
 * list).  keep() runs under the slabs lock and takes no lock.  -1 if id is
 * not a class or memory for the page list runs out.
 */
unsigned slabs_perslab(unsigned id);
void    *slabs_chunk(unsigned id, void *page, unsigned i);

/*
 * The memory file's classes as they stand (their pages, free lists and
 * bytes in use, the page pool's), for a successor that maps the file at
 * the same address (cache_image.c): written to dst (NULL: the bytes
 * needed only), the bytes.  slabs_image_load() takes them into classes
 * that hold nothing yet, claiming each page in the tier: 0, or -1 when
 * they do not fit (other classes, a page outside the file or claimed
 * twice, memory).  Without a DRAM tier; before serving.
 */
size_t   slabs_image(void *dst);
int      slabs_image_load(const void *src, size_t len);
/* Name the chunks of a page cut for class id (chunkid.h) before its items
 * are linked; -1 when every page number is taken. */
int      slabs_recover_name(unsigned id, void *page);
int      slabs_recover_page(unsigned id, void *page,
                            size_t (*keep)(void *chunk, void *ctx),
                            void *ctx);

/* ---- page moves: requests -------------------------------------------- */

/*
 * Move one page of tier `tier` from class src (-1: any class with pages
 * to spare) to dst (0: the pool).  Returns at once: CACHE_OK when the move
 * was queued (behind the one under way, if any: one may wait), else
 * CACHE_BUSY (one waits already), CACHE_BADCLASS, CACHE_NOSPARE,
 * CACHE_SAME or CACHE_DISABLED (no mover is attached).
 */
enum cache_status slabs_reassign(unsigned tier, int src, int dst);

/*
 * Tier class tc is out of memory and has nothing to evict (typically it
 * has no page while others hold the whole tier): have the mover bring it
 * a page from any class of its tier with one to spare, waiting up to ms
 * milliseconds.  True if a page arrived.  No slabs lock held; item locks
 * may be (the mover only trylocks them).
 */
bool  slabs_steal_page(unsigned tc, unsigned ms);

/* Wait until no move is queued or running (tests). */
void  slabs_mover_wait(void);

/* ---- page moves: the mover's side (mover.c) --------------------------- */

/* A mover thread takes requests from now on (on), or no longer: queued
 * requests are dropped and slabs_move_next() returns false. */
void  slabs_mover_attach(bool on);

/* Wait for a request: its source and destination tier classes, or false
 * when the mover is detached. */
bool  slabs_move_next(unsigned *src, unsigned *dst);

/*
 * Start the move: take the source's first page out of service (its free
 * chunks leave the free list, and chunks freed while it drains are not
 * listed again) and return it.  NULL when there is nothing to drain: the
 * class has no page, or the source is a pool, whose page moved at once.
 */
char *slabs_move_begin(unsigned src, unsigned dst);

/*
 * Chunk i of the page being moved: -1 if it is free; else fn(chunk, room,
 * ctx) runs under the slabs lock (so the chunk cannot be freed meanwhile;
 * fn may take a reference but no lock) and its result is returned.  room:
 * the bytes of the chunk past the prefix.
 */
int   slabs_move_visit(char *page, unsigned i,
                       int (*fn)(void *chunk, size_t room, void *ctx),
                       void *ctx);

/* The page is empty: give it to the destination (cut for its class, or
 * into the pool, or back to the tier when the tier is over its limit). */
void  slabs_move_end(char *page);

/* The request is done (moved or not): the next may be queued. */
void  slabs_move_done(void);

#endif
