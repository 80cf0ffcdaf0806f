/*
 * cache_peek.h: the facade's lock-free GET (cache_peek.c).
 */
#ifndef MCPM_STORAGE_CACHE_PEEK_H
#define MCPM_STORAGE_CACHE_PEEK_H

#include <stdbool.h>
#include <stdint.h>

#include "storage/base/clock.h"
#include "storage/index/prefetch.h"

struct item;

/*
 * A lookup that writes nothing other threads read (cache_peek.c;
 * doc/SHARED_WRITES.md): no lock, no reference, no LRU bump.  It reads
 * the item while watching its stripe's sequence count, so a change made
 * meanwhile is noticed and the lookup thrown away.
 *
 * CACHE_PEEK_HIT: *v points at the item's key and value; copy what is
 * needed, then cache_peek_end(v), which says whether the copy is good
 * (false: throw it away and use cache_get()).  CACHE_PEEK_MISS: the key
 * is not there (a plain miss, never an expired or flushed one).
 * CACHE_PEEK_LOCK: use cache_get(): a change was under way, the table is
 * growing, or the hit needs what only the lock allows (an expired or
 * flushed item to unlink, a move between lists (flat LRU) or tiers to
 * make, a chunked value or one longer than vmax, watch fetchers to tell).
 * A hit's LRU mark (FETCHED, then ACTIVE) is set by cache_peek_end(), on
 * the item's flags word alone, without the lock.
 */
enum cache_peek { CACHE_PEEK_LOCK, CACHE_PEEK_MISS, CACHE_PEEK_HIT };

struct cache_view {
    const char *key;
    const char *value;          /* vlen bytes, then "\r\n" */
    uint64_t    cas;
    uint32_t    client_flags;
    uint32_t    vlen;
    uint8_t     nkey;
    uint8_t     clsid;          /* slab class, for the hit's counters */
    uint8_t     lru;            /* enum item_lru */
    bool        in_pmem;
    /* for mg's flags (and cache_view_has()) */
    rel_time_t  atime;          /* l: last access */
    rel_time_t  exptime;        /* t */
    uint32_t    hv, seq;        /* cache_peek_end()'s: */
    struct item *item;          /* the item, */
    uint16_t    flags;          /* its flags as read, */
    uint16_t    mark;           /* the LRU mark the hit sets (or 0) */
};

/* Whether the item of a view had item flag f (ITEM_FETCHED: mg's h,
 * ITEM_STALE: X, ITEM_TOKEN_SENT: Z, ITEM_KEY_BINARY: b) as it was read:
 * from its flags word, not copied out for every GET. */
static inline bool
cache_view_has(const struct cache_view *v, uint16_t f)
{
    return (v->flags & f) != 0;
}

/* k: the key and its hash, and what a batched walk found (prefetch.h;
 * its answer is taken while the stripe count vouches for it). */
enum cache_peek cache_peek(const struct prefetch_key *k, uint32_t vmax,
                           struct cache_view *v);
bool cache_peek_end(const struct cache_view *v);

#endif
