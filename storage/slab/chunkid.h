/*
 * chunkid.h: 32-bit names for item chunks.
 *
 * The hash table (assoc.h) keeps a 32-bit id per bucket instead of a
 * pointer, which halves the DRAM a bucket costs.  An id names a chunk by
 * the page it is in and its index in that page:
 *
 *   id = page number << index_bits | chunk index      (0: no chunk)
 *
 * index_bits is just enough for the most chunks a page of the smallest
 * class holds (14 for 1 MiB pages of 96-byte chunks), leaving the rest for
 * page numbers (2^18 - 1 pages, 256 GiB of 1 MiB pages).  Page numbers are
 * handed out by slabs as pages are cut for a class, and taken back when a
 * page goes back to its tier; a page keeps its number when it moves
 * between classes (it is only cut again).
 *
 *   page table:  number -> first chunk's item address, chunk size, chunks
 *   reverse map: page address >> page_shift -> number (two-level radix)
 *
 * Locking: chunkid_page_*() run under the slabs lock.  chunkid_of() and
 * chunkid_ptr() are for an item whose page cannot change hands (the
 * caller holds a reference or the item's lock while it is linked);
 * chunkid_peek() is for lock-free readers in a read section (quiesce.h).
 */
#ifndef MCPM_STORAGE_CHUNKID_H
#define MCPM_STORAGE_CHUNKID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * A page's entry.  geo packs the chunk size (high half) and the chunk
 * count (low half) into one word, so that a lock-free reader never pairs
 * the size of one cut with the count of another.  A free entry has count
 * 0 and the next free number as its "size".
 */
struct chunkid_page {
    char       *first;          /* item address of chunk 0; NULL: free */
    uint64_t    geo;            /* size << 32 | count */
};

struct chunkid_table {
    struct chunkid_page *pages; /* by page number, 0 unused */
    unsigned    index_bits;
    uint32_t    index_mask;
};

extern struct chunkid_table chunkid_tab;

/*
 * Pages of page_size bytes (a power of two, aligned to it), holding at
 * most max_perslab chunks each.  0, or -1 when the sizes cannot be named
 * in 32 bits or the tables cannot be reserved.
 */
int  chunkid_init(size_t page_size, unsigned max_perslab);
void chunkid_destroy(void);

/*
 * The page numbers as they stand, for a successor that maps the memory
 * file at the same address (cache_image.c): written to dst (NULL: only
 * the bytes needed), the bytes.  chunkid_image_load() takes them into a
 * table that named nothing yet: 0, or -1 when they do not fit it (other
 * page or chunk counts).  Before serving, under no lock.
 */
size_t chunkid_image(void *dst);
int    chunkid_image_load(const void *src, size_t len);

/* Before any section of an image is loaded: 0 when chunkid_image_load()
 * would take these bytes and every page they name is in the memory file
 * (in_file()), else -1. */
int    chunkid_image_check(const void *src, size_t len,
                           bool (*in_file)(const void *p));

/* Pages that can have a number at once (racy, for stats and messages). */
uint32_t chunkid_capacity(void);
uint32_t chunkid_pages_named(void);

/*
 * Page `page` is cut into n chunks of `size` bytes, chunk 0's item at
 * `first`: give it a number if it has none.  -1 when every number is
 * taken (the page cannot hold items).
 */
int  chunkid_page_set(void *page, char *first, uint32_t size, uint32_t n);
/* The page goes back to its tier: its number is free again. */
void chunkid_page_drop(void *page);

/* The id of the item at `p` (in a named page); 0 for NULL. */
uint32_t chunkid_of(const void *p);

/* The item an id names; NULL for 0. */
static inline void *
chunkid_ptr(uint32_t id)
{
    const struct chunkid_page *pg;

    if (id == 0) {
        return NULL;
    }
    pg = &chunkid_tab.pages[id >> chunkid_tab.index_bits];
    return pg->first + (size_t)(id & chunkid_tab.index_mask) *
                       (size_t)(pg->geo >> 32);
}

/*
 * chunkid_ptr() without a lock, for a reader whose id may be stale: the
 * page may have been cut again or have left since.  NULL for 0, for a
 * page without a number and for an index past the page's chunks;
 * otherwise the start of a chunk inside a page that stays mapped for the
 * read section (this page, or the one that had the number before: both
 * are only given back after a quiesce_wait()).
 */
static inline void *
chunkid_peek(uint32_t id)
{
    const struct chunkid_page *pg;
    char *first;
    uint64_t geo;
    uint32_t i = id & chunkid_tab.index_mask;

    if (id == 0) {
        return NULL;
    }
    pg = &chunkid_tab.pages[id >> chunkid_tab.index_bits];
    first = __atomic_load_n(&pg->first, __ATOMIC_ACQUIRE);
    geo = __atomic_load_n(&pg->geo, __ATOMIC_ACQUIRE);
    if (first == NULL || i >= (uint32_t)geo) {
        return NULL;
    }
    return first + (size_t)i * (size_t)(geo >> 32);
}

#endif
