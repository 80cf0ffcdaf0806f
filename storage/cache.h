/*
 * cache.h: the storage facade.  The daemon talks to storage/ through this
 * header and item.h only.
 *
 * Every call is thread-safe: it hashes nothing (the caller passes hv =
 * hash_murmur3(key, nkey), computed once per request so that prefetch can
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

#include "storage/clock.h"
#include "storage/item.h"

#define CACHE_MAX_CLASSES 64    /* class ids 1..63; 0 is the page pool */

/*
 * Options.  cache_init() keeps the pointer: the fields marked "runtime" may
 * be changed later by the daemon (lru tune, slabs automove, lru_crawler
 * sleep, ...) and are read by storage's threads on their next step.
 */
/* Where items live (-o tier_policy). */
enum cache_tier_policy {
    CACHE_TIER_DRAM,                /* DRAM only */
    CACHE_TIER_PMEM,                /* every item in the memory file */
    CACHE_TIER_CACHE,               /* every item in the file, items read
                                       often copied into DRAM */
    CACHE_TIER_CAPACITY             /* new items in DRAM, its COLD tail
                                       demoted into the file */
};

struct cache_options {
    size_t      mem_limit;          /* -m, bytes */
    enum cache_tier_policy tier_policy;
    const char *memory_file;        /* the PMEM tier's file (-e, -o
                                       memory_file), or NULL */
    size_t      memory_file_size;   /* its size in bytes */
    bool        pmem_strict;        /* the file under the power-loss
                                       simulator (tests; see tier.h) */
    unsigned    pmem_crash_after;   /* strict: once serving, die by
                                       SIGKILL at this persist (tests) */
    bool        memory_file_reinit; /* discard a file written under other
                                       settings, or corrupt, rather than
                                       refuse to start */
    const char *memory_kind;        /* -o memory_kind: "dax:<dir>" or
                                       "kmem", items in a volatile
                                       memkind heap instead of malloc
                                       (tier_policy dram), or NULL */
    size_t      page_size;          /* 1 MiB */
    size_t      item_size_max;      /* -I, bytes */
    size_t      slab_chunk_max;     /* largest chunk; above it items chunk */
    double      factor;             /* -f */
    unsigned    chunk_min;          /* -n: key + value space of class 1 */
    const char *slab_sizes;         /* "a-b-c" or NULL */
    bool        use_cas;            /* not -C */
    bool        evict;              /* not -M */
    bool        prealloc;           /* -L */
    unsigned    hashpower;          /* initial table size, 2^n buckets */
    bool        hash_expand;        /* grow the table in a thread */
    unsigned    hash_bulk_move;     /* buckets moved per step (default 1) */
    unsigned    lock_power;         /* 2^n striped item locks */
    bool        lru_segmented;      /* lru_maintainer: HOT/WARM/COLD */
    unsigned    hot_lru_pct;        /* runtime */
    unsigned    warm_lru_pct;       /* runtime */
    double      hot_max_factor;     /* runtime */
    double      warm_max_factor;    /* runtime */
    bool        temp_lru;           /* runtime */
    rel_time_t  temporary_ttl;      /* runtime */
    bool        lru_crawler;        /* runtime: crawler thread enabled */
    unsigned    crawler_sleep_us;   /* runtime */
    unsigned    crawler_tocrawl;    /* runtime: 0 = unlimited */
    bool        slab_reassign;      /* page mover thread */
    int         slab_automove;      /* runtime: 0, 1 or 2 */
    double      automove_ratio;     /* runtime */
    unsigned    automove_window;    /* runtime */
    double      automove_freeratio; /* runtime */
    unsigned    tail_repair_time;   /* seconds, 0 off */
    bool        track_sizes;        /* stats sizes histogram */
    int         verbose;
};

enum cache_status {
    CACHE_OK = 0,
    CACHE_HIT = 0,
    CACHE_MISS,             /* not there */
    CACHE_EXPIRED,          /* was there, expired: counts get_expired */
    CACHE_FLUSHED,          /* was there, flushed: counts get_flushed */
    CACHE_STORED,
    CACHE_NOT_STORED,
    CACHE_EXISTS,           /* cas mismatch */
    CACHE_NOT_FOUND,
    CACHE_DELETED,
    CACHE_TOO_LARGE,        /* over item_size_max: store_too_large */
    CACHE_NO_MEMORY,        /* no memory and nothing evictable, or -M */
    CACHE_NON_NUMERIC,      /* incr/decr on a value that is not a number */
    CACHE_BUSY,
    CACHE_BADCLASS,
    CACHE_NOSPARE,
    CACHE_SAME,
    CACHE_NOTSTARTED,
    CACHE_DISABLED
};

enum cache_op {
    CACHE_SET, CACHE_ADD, CACHE_REPLACE, CACHE_APPEND, CACHE_PREPEND,
    CACHE_CAS
};

/* memcached 1.6's defaults: 64 MB, 1 MB pages and items, factor 1.25 from
 * 48 bytes, CAS on, segmented LRU with its maintainer, crawler, page mover
 * with automove 1.  lock_power 0 means "from the worker count". */
void cache_options_defaults(struct cache_options *o);

/* Set up slabs, hash table, locks and LRUs and start the background
 * threads the options ask for.  Returns 0, or -1 with a message on stderr. */
int  cache_init(struct cache_options *opts, unsigned nworkers);

/* Stop the background threads and free all memory.  No call may be in
 * flight. */
void cache_shutdown(void);

/* Once a second from the daemon's clock: expansion check, automove. */
void cache_tick(void);

/* ---- requests ---------------------------------------------------------- */

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

/*
 * incr/decr with memcached's rules: incr wraps at 2^64, decr stops at 0;
 * the value must be a decimal number of at most 20 digits.  CACHE_OK with
 * the new value in *value, CACHE_NOT_FOUND, CACHE_NON_NUMERIC or
 * CACHE_NO_MEMORY.  *clsid gets the item's class for per-class stats.
 */
enum cache_status cache_delta(const char *key, size_t nkey, uint32_t hv,
                              bool incr, uint64_t delta, uint64_t *value,
                              unsigned *clsid);

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
    /* out: the linked item after the store (for c and s) */
    uint64_t    cas;
    uint32_t    vlen;
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
    bool        touch;          /* T, only with I */
    rel_time_t  exptime;
    bool        tombstone;      /* x: replace the value by an empty one,
                                   keeping client flags and exptime */
    /* out */
    unsigned    clsid;
};

/* CACHE_DELETED (also for I and x), CACHE_NOT_FOUND, CACHE_EXISTS, or
 * CACHE_NO_MEMORY when x could not allocate. */
enum cache_status cache_mdelete(const char *key, size_t nkey, uint32_t hv,
                                struct cache_mdelete *a);

/* ma: incr/decr with the meta flags. */
struct cache_mdelta {
    /* in */
    bool        incr;
    uint64_t    delta;          /* D */
    bool        compare;        /* C */
    uint64_t    compare_cas;
    uint64_t    new_cas;        /* E; 0: next */
    bool        vivify;         /* N: on a miss create it holding initial */
    rel_time_t  vivify_exptime;
    uint64_t    initial;        /* J */
    bool        touch;          /* T: new exptime on success */
    rel_time_t  exptime;
    /* out */
    uint64_t    value;          /* the new value (initial when created) */
    uint64_t    cas;
    rel_time_t  exptime_after;  /* for t */
    unsigned    clsid;
    bool        created;
};

/* CACHE_OK, CACHE_NOT_FOUND, CACHE_EXISTS, CACHE_NON_NUMERIC, or
 * CACHE_NO_MEMORY (also when vivify could not store: the reply is NS). */
enum cache_status cache_mdelta(const char *key, size_t nkey, uint32_t hv,
                               struct cache_mdelta *a);

/* ---- administration ---------------------------------------------------- */

/* cache_memlimit: 0, or -1 when the new limit cannot be applied. */
int cache_set_memlimit(size_t bytes);

/* slabs reassign <src> <dst>: CACHE_OK, CACHE_BUSY, CACHE_BADCLASS,
 * CACHE_NOSPARE, CACHE_SAME or CACHE_DISABLED. */
enum cache_status cache_slabs_reassign(int src, int dst);

/* lru_crawler crawl: classes[i] true for each class id to crawl.  CACHE_OK,
 * CACHE_BUSY, CACHE_BADCLASS, CACHE_NOTSTARTED or CACHE_DISABLED. */
enum cache_status cache_crawl(const bool classes[CACHE_MAX_CLASSES]);

/* lru_crawler enable|disable: start or stop the crawler thread. */
int cache_crawler_enable(bool on);

/*
 * lru_crawler metadump / stats cachedump: call emit(line, len, ctx) for each
 * live item of the given classes (all if classes is NULL), formatted as
 * memcached's metadump lines ("key=... exp=... la=... cas=... fetch=...
 * cls=... size=...\n").  Runs in the caller's thread, a few buckets at a
 * time under the item locks.  Stops early when emit returns non-zero.
 */
void cache_metadump(const bool classes[CACHE_MAX_CLASSES],
                    int (*emit)(const char *line, size_t len, void *ctx),
                    void *ctx);

/* ---- stats ------------------------------------------------------------- */

/* Totals, named as in memcached's "stats". */
struct cache_stats {
    uint64_t curr_items, total_items, bytes;
    uint64_t limit_maxbytes, total_malloced, slab_global_page_pool;
    uint64_t evictions, reclaimed, expired_unfetched, evicted_unfetched;
    uint64_t evicted_active, crawler_reclaimed, crawler_items_checked;
    uint64_t lrutail_reflocked, moves_to_cold, moves_to_warm;
    uint64_t moves_within_lru, direct_reclaims, lru_bumps_dropped;
    uint64_t hash_power_level, hash_bytes, hash_is_expanding;
    uint64_t slab_reassign_rescues, slab_reassign_chunk_rescues;
    uint64_t slab_reassign_inline_reclaim, slab_reassign_busy_items;
    uint64_t slab_reassign_busy_deletes, slab_reassign_busy_nomem;
    uint64_t slab_reassign_last_busy_status, slab_reassign_running;
    uint64_t slabs_moved;
    uint64_t lru_crawler_running, lru_crawler_starts, lru_maintainer_juggles;
    uint64_t malloc_fails;
};

/* "stats slabs" for one class, and "stats items" for one class. */
struct cache_slab_stats {
    uint64_t chunk_size, chunks_per_page, total_pages, total_chunks;
    uint64_t used_chunks, free_chunks, free_chunks_end;
};

struct cache_item_stats {
    uint64_t number, number_hot, number_warm, number_cold, number_temp;
    uint64_t age_hot, age_warm, age, mem_requested;
    uint64_t evicted, evicted_nonzero, evicted_time, outofmemory;
    uint64_t tailrepairs, reclaimed, expired_unfetched, evicted_unfetched;
    uint64_t evicted_active, crawler_reclaimed, crawler_items_checked;
    uint64_t lrutail_reflocked, moves_to_cold, moves_to_warm;
    uint64_t moves_within_lru, direct_reclaims;
};

void cache_stats(struct cache_stats *out);

/* Largest class id in use by the slab table (classes are 1..n). */
unsigned cache_nclasses(void);

/* Fill one class's figures; false if the class has no pages (slabs) or no
 * items (items), in which case memcached prints nothing for it. */
bool cache_slab_stats(unsigned id, struct cache_slab_stats *out);
bool cache_item_stats(unsigned id, struct cache_item_stats *out);

/* stats sizes: emit(size, count) per 32-byte bucket with items; false when
 * track_sizes is off. */
bool cache_sizes(void (*emit)(uint64_t size, uint64_t count, void *ctx),
                 void *ctx);

/* One tier's figures ("stats tiers"). */
struct cache_tier_stats {
    const char *name;           /* "dram", "pmem", ... */
    bool        durable;        /* items survive a restart */
    bool        real_pmem;      /* the mapping is persistent memory */
    uint64_t    limit;          /* bytes of pages it may hand out */
    uint64_t    bytes;          /* bytes of pages handed out */
    uint64_t    items, item_bytes;
    uint64_t    evictions;
    uint64_t    promotions;     /* items copied up into DRAM */
    uint64_t    demotions;      /* items moved down out of DRAM */
    uint64_t    flushes;        /* persist calls, and the bytes they */
    uint64_t    flush_bytes;    /* covered */
};

/* Fill up to max entries, one per tier in use; returns how many. */
unsigned cache_tier_stats(struct cache_tier_stats *out, unsigned max);

/* What start-up read back from the memory file (all 0 for a new file). */
struct cache_recovery {
    uint64_t    items;          /* recovered and linked */
    uint64_t    pages;          /* pages the page table gave a class */
    uint64_t    torn;           /* a header, chain or checksum failed */
    uint64_t    expired;
    uint64_t    flushed;
    uint64_t    replaced;       /* an older live copy of a key */
    bool        checksummed;    /* the checksum pass ran (not clean) */
    double      seconds;
};

/* False when there is no memory file. */
bool cache_recovery_stats(struct cache_recovery *out);

/* stats reset: zero the counters above that memcached resets. */
void cache_stats_reset(void);

#endif
