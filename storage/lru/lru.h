/*
 * lru.h: the segmented LRU lists of every tier class, and their counters.
 *
 * Each tier class (slabs.h SLABS_TC) has four lists, HOT, WARM, COLD and
 * TEMP (enum item_lru), each a doubly linked list of items through
 * it->next and it->prev with its size, its bytes and its own mutex.  An
 * item names its list: its tier, its class and the LRU bits of it->clsid.
 * This module only puts items on lists, moves them and takes them off;
 * which items go where is decided above it: link.h (enter and leave),
 * evict.h (tails), maint.h (the maintainer), place.h (tiers).
 *
 * Locking: a mutex per list.  do_lru_*() calls expect the caller to hold
 * the lock of the list they act on (lru_lock()); the others take it.  The
 * lists of a class nest only in index order (HOT, WARM, COLD, TEMP), and
 * with two tiers a DRAM list before any of the file's.  An item's list
 * changes only under its item lock and the list locks.  A thread holding
 * a list lock only trylocks item locks.
 *
 * The crawler walks a list with a cursor: a fake item (nkey 0, flags
 * ITEM_LINKED only) that sits on the list, uncounted, and moves from the
 * tail towards the head one item at a time.
 */
#ifndef MCPM_STORAGE_LRU_H
#define MCPM_STORAGE_LRU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/base/metrics.h"
#include "storage/base/options.h"
#include "storage/slab/item.h"
#include "storage/slab/slabs.h"

#define LRU_NLISTS 4

/* Keep opts (lru_segmented is re-read at every hit).  0 or -1. */
int  lru_init(const struct cache_options *opts);
void lru_destroy(void);

/* The memory file's lists (ends, sizes, bytes) and its classes' counts
 * for a successor that maps the file at the same address
 * (cache_image.c), classes 0..largest: written to dst (NULL: the bytes
 * needed only), the bytes.  lru_image_load() takes them into empty
 * lists: 0, or -1 when the length does not fit.  Before serving. */
size_t lru_image(void *dst, unsigned largest);
int  lru_image_load(const void *src, size_t len, unsigned largest);

/* Before any section of an image is loaded: 0 when lru_image_load()
 * would take these bytes and every list end is an item in the memory
 * file (in_file()), else -1. */
int  lru_image_check(const void *src, size_t len, unsigned largest,
                     bool (*in_file)(const void *p));

void lru_lock(unsigned tc, enum item_lru which);
void lru_unlock(unsigned tc, enum item_lru which);

/* The tier class of an item's lists. */
static inline unsigned
lru_tc(const struct item *it)
{
    return SLABS_TC(it->tier, it->clsid & ITEM_CLSID_MASK);
}

/* Name the list an item goes to: on no list, or with its locks held. */
static inline void
lru_set(struct item *it, enum item_lru which)
{
    __atomic_store_n(&it->clsid, (uint8_t)((it->clsid & ITEM_CLSID_MASK) |
                                           ((unsigned)which <<
                                            ITEM_LRU_SHIFT)),
                     __ATOMIC_RELAXED);
}

/* At the head of the item's list, and off it.  lru_unlinked(): off it,
 * ITEM_LINKED cleared under the list's lock, so that a thread walking the
 * list sees a linked item or none. */
void lru_push(struct item *it);
void lru_remove(struct item *it);
void lru_unlinked(struct item *it);
/* A chain of n items of one list (linked by next and prev; `bytes` in
 * all, their ntotal) at its tail, older than the list: recovery's, each
 * item's lock held by the caller, so that no one reaches them between
 * the hash table and the list.  Takes the list's lock. */
void lru_splice_tail(struct item *first, struct item *last, uint64_t n,
                     uint64_t bytes);
void do_lru_push(struct item *it);
void do_lru_remove(struct item *it);

/* To the head of list `to` of its class, one lock at a time. */
void lru_move(struct item *it, enum item_lru to);

/* From its list, locked by the caller, to the head of list `to`, whose
 * lock is taken nested: `to` is never before the item's list. */
void do_lru_move(struct item *it, enum item_lru to);

/* From its list, locked by the caller, to the head of an earlier list
 * `to`, whose lock is only tried: false (nothing moved) when busy. */
bool do_lru_try_move(struct item *it, enum item_lru to);

/* A locked list's ends (cursors included); walk with it->prev/next. */
struct item *do_lru_head(unsigned tc, enum item_lru which);
struct item *do_lru_tail(unsigned tc, enum item_lru which);

static inline bool
lru_is_cursor(const struct item *it)
{
    return it->nkey == 0 && item_flags(it) == ITEM_LINKED;
}

/*
 * A hit: FETCHED, then on a second hit ACTIVE (a flag; the maintainer
 * moves the item when it reaches a tail).  In flat mode (lru_segmented
 * off) a hit at most once a minute moves the item to its list's head.
 * Caller holds the item lock.
 */
void lru_hit(struct item *it);

/*
 * A hit without the lock (cache_peek.c): false when lru_hit() on an item
 * whose flags and time are these would move it between lists (flat mode,
 * once a minute): that one takes the lock.  Else *mark is the flag the
 * hit sets (FETCHED or ACTIVE), or 0; lru_hit_mark() sets it on an item
 * whose flags are still `seen` (a compare-and-swap: an item unlinked,
 * freed or changed meanwhile is left as it is), ACTIVE with the time, as
 * lru_hit() does.
 */
bool lru_hit_lockfree(uint16_t flags, rel_time_t time, rel_time_t now,
                      uint16_t *mark);
void lru_hit_mark(struct item *it, uint16_t seen, uint16_t mark);

/* ---- the crawler's cursor ---------------------------------------------- */

/* Put the cursor at the tail of a list. */
void lru_cursor_insert(struct item *cursor, unsigned tc,
                       enum item_lru which);

/* Move the cursor past the item before it, in place (sizes never change,
 * so a stats read never misses an item the cursor passes), and return
 * that item; NULL when the cursor was at the head: it is off the list. */
struct item *do_lru_cursor_step(struct item *cursor);

/* Take the cursor off its list (if it is on one). */
void lru_cursor_remove(struct item *cursor);

/* ---- figures and counters ---------------------------------------------- */

/* Items and bytes of a tier class (TEMP's bytes only if with_temp), of
 * one list, and the age of a list's tail item (0 when empty).  Read
 * without locks; a class's items and bytes are counted as items join and
 * leave it, so moves between its lists do not disturb them. */
uint64_t lru_class_items(unsigned tc);
uint64_t lru_items_in_class(unsigned id);        /* in every tier */
uint64_t lru_class_bytes(unsigned tc, bool with_temp);
uint64_t lru_list_size(unsigned tc, enum item_lru which);
uint64_t lru_list_bytes(unsigned tc, enum item_lru which);
rel_time_t lru_tail_age(unsigned tc, enum item_lru which, rel_time_t now);

/* The counters of each tier class, bumped with relaxed atomics by
 * whoever counts the event: LRU_COUNT(tc, evicted, 1).  Zeroed by
 * lru_init() and lru_stats_reset(). */
extern struct cache_class_counters lru_class_counters[SLABS_TC_MAX];

#define LRU_COUNT(tc, field, n) \
    __atomic_add_fetch(&lru_class_counters[tc].field, (n), __ATOMIC_RELAXED)

/* "stats items" of a tier class: false if it has no items. */
bool lru_item_stats(unsigned tc, struct cache_item_stats *out);

/* Items, bytes and the TOTAL counters of the tier classes of tier t (or
 * of every tier when t is SLABS_NTIERS), added into out. */
void lru_totals(unsigned t, struct cache_stats *out);

/* "stats reset": zero every class's counters. */
void lru_stats_reset(void);

#endif
