/*
 * cache.h: the storage facade.  The daemon talks to storage/ through this
 * header and item.h only (and the types options.h, status.h and
 * metrics.h declare).
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
#include "storage/slab/item.h"
#include "storage/base/metrics.h"
#include "storage/base/observe.h"
#include "storage/base/options.h"
#include "storage/index/prefetch.h"
#include "storage/base/status.h"

enum cache_op {
    CACHE_SET, CACHE_ADD, CACHE_REPLACE, CACHE_APPEND, CACHE_PREPEND,
    CACHE_CAS
};

/* ---- life cycle (cache_open.c) ----------------------------------------
 *
 * cache_options_defaults() (options.h) gives memcached 1.6's defaults:
 * 64 MB, 1 MB pages and items, factor 1.25 from 48 bytes, CAS on,
 * segmented LRU with its maintainer, crawler, page mover with automove 1.
 * lock_power 0 means "from the worker count".
 */

/* Set up slabs, hash table, locks and LRUs and start the background
 * threads the options ask for.  Returns 0, or -1 with a message on stderr. */
int  cache_init(struct cache_options *opts, unsigned nworkers);

/* Stop the background threads and free all memory.  No call may be in
 * flight. */
void cache_shutdown(void);

/* The first half of cache_shutdown(): the background threads stop, the
 * memory file is left clean and its lock let go, so that another server
 * may open it at once; the memory (gigabytes of mapping to take down) is
 * freed by cache_shutdown() later.  No call but cache_shutdown() may
 * follow. */
void cache_stop(void);

/*
 * A takeover's successor can skip the scan of the memory file that
 * rebuilds the DRAM index: it maps the file at the address this node has
 * it at, so that the pointers in the items stay good, and takes the DRAM
 * state that describes them (the hash table, the chunk ids, the slab
 * classes' pages and free lists, the LRU lists and counts).  After
 * cache_stop(), cache_image_write() writes that state into fd (a memfd)
 * for the successor, which gives it to cache_init() as opts->image_fd.
 * It is taken only where it fits exactly (the same file and superblock
 * generation, layout, classes and hash, the file mapped at the address,
 * every item in the file: tier_policy pmem, without the simulator);
 * else, as without one, the file is scanned.  0, or -1 (nothing written:
 * a cache with items in DRAM, or the write failed).
 */
int cache_image_write(int fd);

/* After cache_stop() of a clean stop: the same image, kept beside the
 * memory file (<file>.index) for its next start, which takes it in place
 * of the scan when the file is as this stop left it (cache_image.c).  0,
 * or -1 (none written: the next start scans). */
int cache_image_save(void);

/* While serving: about the bytes cache_image_write() would write now (0:
 * it would write none), to tell the successor. */
size_t cache_image_size(void);

/* While serving: a memfd for the image, of about the size it will take,
 * its pages allocated, cleared and mapped now, so that writing the image
 * into it (cache_image_write() with this fd), in the clients' pause,
 * only copies.  -1 when there will be no image. */
int cache_image_room(void);

/* A successor, told the size of the index to come, makes room for it
 * before its predecessor stops, so that taking the index (in the
 * clients' pause) copies into memory that is there.  Before
 * cache_init().  0 or -1. */
int cache_image_stage(size_t bytes);

/* Once a second from the daemon's clock: expansion check, automove, and
 * the memory file's note of when the server last ran. */
void cache_tick(void);

/* A bulk load of about `items` is to come into an empty cache: the hash
 * table takes their size at once, so that the load neither grows it nor
 * walks long chains meanwhile.  Nothing once an item is in. */
void cache_presize(uint64_t items);

/* Under -e, with no <file>.meta: may the memory file at path come from a
 * build that kept none (layout 2), rather than from one whose metadata an
 * operator removed to start cold? */
bool cache_file_may_lack_meta(const char *path);

/* Whether the file at path is a memory file of memcached-pm's (of any
 * layout it reads), by its superblock: not memcached's, not empty. */
bool cache_file_is_ours(const char *path);

/* Does a live process hold the memory file at path (its lock)?  A killed
 * server's files close only once its io_uring workers have gone, a few
 * milliseconds after the process. */
bool cache_file_busy(const char *path);

/*
 * Durability of the memory file (tier.h enum tier_durability), as stats
 * settings names it: "process" or "power", and how it flushes: "none",
 * "cache_lines" or "msync".  NULL without a memory file.
 */
const char *cache_durability(void);
const char *cache_flush_method(void);

/* A thread that stores often (a worker) keeps a few free chunks of each
 * class of its own, so that its stores and deletes rarely take the slab
 * allocator's lock (slabs.h): on before its first request, off before it
 * exits. */
void cache_thread_cache(bool on);

/*
 * Group commit, where the memory file flushes by msync (persist.h): an
 * event loop's thread joins (false: nothing to group, every store is
 * durable when its call returns), and then, before any reply that
 * acknowledges a change goes out, syncs what its calls left pending.
 * Every pass of the loop ends with a sync when something is pending.
 */
bool cache_group_join(void);
bool cache_group_pending(void);
void cache_group_sync(void);
void cache_group_leave(void);       /* before the thread exits */

/* ---- requests (cache.c) ------------------------------------------------ */

/* Look a key up.  A hit returns the item with a reference and marks it
 * fetched/active for the LRU; a miss returns NULL and says why in *st. */
struct item *cache_get(const char *key, size_t nkey, uint32_t hv,
                       enum cache_status *st);

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
    /* for mg's flags */
    bool        fetched;        /* h: fetched before */
    bool        stale;          /* X (a stale item's hit may win: lock) */
    bool        token_sent;     /* Z */
    bool        key_binary;     /* b: the key came base64-encoded */
    rel_time_t  atime;          /* l: last access */
    rel_time_t  exptime;        /* t */
    uint32_t    hv, seq;        /* cache_peek_end()'s: */
    struct item *item;          /* the item, */
    uint16_t    flags;          /* its flags as read, */
    uint16_t    mark;           /* the LRU mark the hit sets (or 0) */
};

/* k: the key and its hash, and what a batched walk found (prefetch.h;
 * its answer is taken while the stripe count vouches for it). */
enum cache_peek cache_peek(const struct prefetch_key *k, uint32_t vmax,
                           struct cache_view *v);
bool cache_peek_end(const struct cache_view *v);

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

/* ---- administration (cache_open.c) ------------------------------------- */

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

/* ---- figures (cache_stats.c); the tables are in metrics.h -------------- */

/* The "stats" figures of storage. */
void cache_stats(struct cache_stats *out);

/* Largest class id in use by the slab table (classes are 1..n). */
unsigned cache_nclasses(void);

/* Fill one class's figures ("stats slabs", "stats items"; with two tiers
 * a class's figures add up both); false if the class has no pages
 * (slabs) or no items (items), in which case memcached prints nothing for
 * it. */
bool cache_slab_stats(unsigned id, struct cache_slab_stats *out);
bool cache_item_stats(unsigned id, struct cache_item_stats *out);

/* stats sizes: emit(size, count) per 32-byte bucket with items; false when
 * track_sizes is off. */
bool cache_sizes(void (*emit)(uint64_t size, uint64_t count, void *ctx),
                 void *ctx);

/* "stats tiers": fill up to max entries, one per tier in use; returns how
 * many.  Their hits are the caller's to fill. */
unsigned cache_tier_stats(struct cache_tier_stats *out, unsigned max);

/* What start-up read back from the memory file (all 0 for a new file);
 * false when there is no memory file. */
bool cache_recovery_stats(struct cache_recovery *out);

/* stats reset: zero the counters (metrics.h COUNTER, TOTAL, LAST). */
void cache_stats_reset(void);

/* An item as stats cachedump shows it. */
struct cache_dumped {
    const char *key;
    size_t      nkey;
    uint32_t    vlen;
    int64_t     exptime;        /* Unix time, 0: never */
};

/*
 * stats cachedump: call emit(d, ctx) for each item on class id's COLD
 * LRU (each tier's), head first, as memcached dumps them; items with
 * binary keys are left out.  Holds each list's lock for its walk (emit
 * must not call into storage).  Stops when emit returns non-zero.
 */
void cache_cachedump(unsigned id,
                     int (*emit)(const struct cache_dumped *d, void *ctx),
                     void *ctx);

/* An item as lru_crawler metadump shows it. */
struct cache_meta {
    const char *key;
    size_t      nkey;
    int64_t     exptime;        /* Unix time, -1: never */
    int64_t     atime;          /* last access, Unix time */
    uint64_t    cas;
    bool        fetched;
    unsigned    clsid;
    size_t      size;           /* bytes the item takes */
    uint32_t    client_flags;
    bool        key_binary;     /* stored with meta's b flag */
};

/*
 * lru_crawler metadump: call emit(m, ctx) for each live item of the given
 * classes (all if classes is NULL).  Runs in the caller's thread, a few
 * buckets at a time under the item locks (emit must not call into
 * storage).  Stops early when emit returns non-zero.
 */
void cache_metadump(const bool classes[CACHE_MAX_CLASSES],
                    int (*emit)(const struct cache_meta *m, void *ctx),
                    void *ctx);

#endif
