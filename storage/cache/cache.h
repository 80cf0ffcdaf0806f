/*
 * cache.h: the storage facade's requests (cache.c): what a client's
 * command does to the cache.  The daemon talks to storage/ through the
 * facade's headers (this one, cache_delta.h, cache_peek.h, cache_open.h,
 * cache_image.h, cache_stats.h), item.h's accessors, and the types
 * options.h, status.h and metrics.h declare.
 *
 * Every call is thread-safe: it hashes nothing (the caller passes hv =
 * hash_key(key, nkey), computed once per request so that prefetch can
 * reuse it), takes the key's item lock, then the LRU and slab locks in that
 * order, and counts only what storage alone can know (evictions, reclaims,
 * expansions).  Request counters (get_hits, cmd_set, ...) are the caller's:
 * the results below say everything needed to count them per worker thread.
 *
 * References: cache_get(), cache_touch() and cache_alloc() return an item
 * holding one reference for the caller, who must give it back with
 * cache_release() when the reply that points into it has been written.  A
 * replaced or deleted item stays readable until then.
 */
#ifndef MCPM_STORAGE_CACHE_H
#define MCPM_STORAGE_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/base/clock.h"
#include "storage/base/metrics.h"
#include "storage/base/options.h"
#include "storage/base/status.h"
#include "storage/slab/item.h"

enum cache_op {
    CACHE_SET, CACHE_ADD, CACHE_REPLACE, CACHE_APPEND, CACHE_PREPEND,
    CACHE_CAS
};

/* ---- requests (cache.c) ------------------------------------------------ */

/* Look a key up.  A hit returns the item with a reference and marks it
 * fetched/active for the LRU; a miss returns NULL and says why in *st. */
struct item *cache_get(const char *key, size_t nkey, uint32_t hv,
                       enum cache_status *st);

/* cache_get() that also sets a new exptime on a hit (touch, gat). */
struct item *cache_touch(const char *key, size_t nkey, uint32_t hv,
                         rel_time_t exptime, enum cache_status *st);

/* A new unlinked item with room for vlen + 2 value bytes, one reference.
 * NULL with *st = CACHE_TOO_LARGE or CACHE_NO_MEMORY.  May evict. */
struct item *cache_alloc(const char *key, size_t nkey, uint32_t hv,
                         uint32_t client_flags, rel_time_t exptime,
                         uint32_t vlen, enum cache_status *st);

/* Give back a reference; the last one frees the item's memory. */
void cache_release(struct item *it);

/*
 * Link a filled item from cache_alloc() under op's rules (memcached's
 * do_store_item): CACHE_STORED, CACHE_NOT_STORED, CACHE_EXISTS (cas
 * mismatch) or CACHE_NOT_FOUND (cas on a missing key); append/prepend may
 * give CACHE_NO_MEMORY or CACHE_TOO_LARGE.  req_cas is the cas unique of a
 * CACHE_CAS.  The caller still releases its reference afterwards.  On
 * CACHE_STORED the item's cas is the new unique.
 */
enum cache_status cache_store(struct item *it, enum cache_op op,
                              uint64_t req_cas);

/* Unlink a key: CACHE_DELETED, CACHE_NOT_FOUND, or CACHE_EXISTS when cas is
 * non-zero and differs.  On CACHE_DELETED, *clsid (if not NULL) gets the
 * item's class for per-class stats. */
enum cache_status cache_delete(const char *key, size_t nkey, uint32_t hv,
                               uint64_t cas, unsigned *clsid);

/* flush_all: items stored at or before `when` (a rel_time_t; now - 1 for an
 * immediate flush, later for a delayed one) read as missing from then on. */
void cache_flush(rel_time_t when);

/* ---- meta protocol operations -------------------------------------------
 *
 * The meta commands (mg ms md ma me) need the same operations with more
 * knobs, all applied under the key's item lock in one step so that another
 * client never sees half of them.  Field names follow the meta flags.
 */

/* mg (and me): look up, optionally touch, vivify, hand out a win token. */
struct cache_mget {
    /* in */
    bool        no_bump;        /* u: no LRU bump, no fetched/atime change */
    bool        peek;           /* me: report only, change nothing */
    bool        touch;          /* T: set exptime */
    rel_time_t  exptime;
    bool        vivify;         /* N: on a miss create an empty item */
    rel_time_t  vivify_exptime;
    uint64_t    vivify_cas;     /* E: cas of the created item, 0: next */
    bool        recache;        /* R: win if 0 < exptime < recache_before */
    rel_time_t  recache_before;
    /* out: the item as it was before this command */
    bool        fetched;        /* h */
    rel_time_t  atime;          /* l */
    rel_time_t  exptime_before; /* t when T comes later in the request */
    bool        created;        /* vivified by this call */
    bool        win;            /* W: this client won the recache token */
    bool        stale;          /* X */
    bool        token_sent;     /* Z: a token had been handed out already */
};

/*
 * memcached's mg semantics: a hit (or a vivified item) is returned with a
 * reference; win is set for a vivified item, for R when no token was sent
 * yet and the remaining TTL is under the threshold, and for a stale item
 * whose token was not sent yet; a win marks the token sent.  Unless
 * no_bump, a hit is bumped and marked fetched like cache_get().  A miss
 * returns NULL with *st as cache_get(); a failed vivify returns NULL with
 * CACHE_MISS.
 */
struct item *cache_mget(const char *key, size_t nkey, uint32_t hv,
                        struct cache_mget *a, enum cache_status *st);

/* ms: cache_store() with the meta flags. */
struct cache_mstore {
    /* in */
    enum cache_op op;           /* SET ADD REPLACE APPEND PREPEND */
    bool        compare;        /* C: act only if the cas matches ... */
    uint64_t    compare_cas;
    bool        invalidate;     /* I: ... or is lower: then store stale,
                                   keeping the old exptime and token */
    uint64_t    new_cas;        /* E: cas of the stored item, 0: next */
    bool        vivify;         /* N: append/prepend on a miss store the
                                   value as a new item ... */
    rel_time_t  vivify_exptime; /* ... with this exptime */
    /* out: the linked item after the store (for c, s and the log) */
    uint64_t    cas;
    uint32_t    vlen;
    rel_time_t  exptime;
};

/* CACHE_STORED, CACHE_NOT_STORED, CACHE_EXISTS, CACHE_NOT_FOUND (compare on
 * a missing key), CACHE_NO_MEMORY or CACHE_TOO_LARGE (append/prepend).  The
 * caller keeps and releases its reference. */
enum cache_status cache_mstore(struct item *it, struct cache_mstore *a);

/* md: delete, mark stale, or leave an empty tombstone. */
struct cache_mdelete {
    /* in */
    bool        compare;        /* C */
    uint64_t    compare_cas;
    uint64_t    new_cas;        /* E, with I or x; 0: next */
    bool        invalidate;     /* I: keep the item, mark it stale, give it
                                   a new cas, clear its token-sent mark */
    bool        touch;          /* T with I: the stale item's exptime */
    rel_time_t  exptime;        /* T (0 without), also the tombstone's */
    bool        tombstone;      /* x: replace the item by one with an
                                   empty value, client_flags, exptime and
                                   the old cas (or E); with I that one is
                                   then marked stale, with a new cas */
    uint32_t    client_flags;   /* F, for x */
    /* out */
    unsigned    clsid;
    uint32_t    vlen;           /* the value bytes of the item found */
};

/* CACHE_DELETED (also for I and x), CACHE_NOT_FOUND, CACHE_EXISTS, or
 * CACHE_NO_MEMORY when x could not allocate. */
enum cache_status cache_mdelete(const char *key, size_t nkey, uint32_t hv,
                                struct cache_mdelete *a);

#endif
