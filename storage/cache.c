/*
 * cache.c: the storage facade (cache.h).
 *
 * Every request takes the key's item lock for its whole decision, so that
 * the store rules (memcached's do_store_item), incr/decr and delete see one
 * consistent item.  The LRU and slabs locks are only taken below, in that
 * order.  The GET hit path touches only the item lock and the item.
 *
 * The meta operations (cache_mstore, cache_mdelete, cache_mdelta) are the
 * general forms; the classic store, delete and incr/decr fill in their
 * knobs and call them, so both protocols share one set of rules.
 */
#include "storage/cache.h"
#include "storage/assoc.h"
#include "storage/crawler.h"
#include "storage/hash.h"
#include "storage/item.h"
#include "storage/locks.h"
#include "storage/lru.h"
#include "storage/persist.h"
#include "storage/recover.h"
#include "storage/slabs.h"
#include "storage/sblock.h"
#include "storage/tier.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UPDATE_INTERVAL 60
#define INCR_MAX_LEN    24
#define REFCOUNT_LIMIT  60000   /* refuse a fetch before the 16 bits wrap */

static struct {
    struct cache_options *opts;
    uint64_t cas_id;            /* last unique handed out */
    uint64_t total_items;
    struct sblock sb;           /* the memory file's, with the PMEM tier */
    struct cache_recovery recovery;
} ca;

/* ---- life cycle ------------------------------------------------------- */

static int
start_threads(struct cache_options *o)
{
    if (o->lru_segmented && lru_maintainer_start() != 0) {
        return -1;
    }
    if (o->slab_reassign && slabs_mover_start() != 0) {
        return -1;
    }
    if (o->hash_expand && assoc_thread_start() != 0) {
        return -1;
    }
    return crawler_init(o);
}

/* Stop every thread (each stop is a no-op if it never started). */
static void
stop_threads(void)
{
    crawler_destroy();
    lru_maintainer_stop();
    slabs_mover_stop();
    assoc_thread_stop();
}

/* The PMEM tier over opts->memory_file: the superblock's reserve, then as
 * many pages as the file holds. */
static struct tier *
pmem_tier_open(const struct cache_options *opts)
{
    struct tier_pmem_options po = {
        .path = opts->memory_file,
        .size = opts->memory_file_size,
        .page_size = opts->page_size,
        /* The superblock copies, then the page table (a byte a page). */
        .reserve = SBLOCK_SIZE +
                   opts->memory_file_size / opts->page_size,
        .create = true,
        .strict = opts->pmem_strict,
    };
    char err[512];
    struct tier *t = tier_pmem_open(&po, err, sizeof(err));

    if (t == NULL) {
        fprintf(stderr, "%s\n", err);
    } else if (opts->verbose > 0) {
        /* Durability costs differ: a cache-line flush on PMEM, an msync
         * of whole pages on any other file. */
        fprintf(stderr, "memory file %s: %s\n", opts->memory_file,
                tier_pmem_is_pmem(t) ? "persistent memory (pmem_persist)"
                                     : "not persistent memory (msync)");
    }
    return t;
}

/* The settings that decide where items sit in the file. */
static void
pmem_params(const struct cache_options *opts, struct tier *t,
            struct sblock_params *p, uint32_t *sizes)
{
    unsigned n = slabs_largest();

    for (unsigned i = 0; i < n; i++) {
        sizes[i] = (uint32_t)slabs_size(i + 1);
    }
    *p = (struct sblock_params) {
        .file_size = tier_pmem_mapped_len(t),
        .reserve = (uint64_t)((char *)tier_pmem_page(t, 0) -
                              (char *)tier_pmem_base(t)),
        .page_size = (uint32_t)opts->page_size,
        .chunk_max = (uint32_t)slabs_chunk_max(),
        .item_max = (uint32_t)opts->item_size_max,
        .nclasses = n,
        .class_sizes = sizes,
        .use_cas = opts->use_cas,
    };
}

/* A new (or discarded) file: every page free, then a fresh superblock
 * whose epoch is this process's rel 0.  The page table is cleared first:
 * a new superblock over an old table would bring the old pages back. */
static int
pmem_new_file(const struct cache_options *opts, struct tier *t,
              const struct sblock_params *p)
{
    char err[512];

    persist_clear_table();
    if (sblock_init_new(&ca.sb, t, tier_pmem_base(t), p, err,
                        sizeof(err)) != SBLOCK_OK) {
        fprintf(stderr, "memory file %s: %s\n", opts->memory_file, err);
        return -1;
    }
    ca.sb.epoch = (int64_t)clock_process_started();
    sblock_commit(&ca.sb);
    return 0;
}

/*
 * Open the file's superblock: 1 when the file holds items to recover
 * (ca.sb loaded), 0 when it starts empty (new, or discarded as
 * memory_file_reinit asks), -1 to refuse it (another layout or settings,
 * or no valid superblock copy, without memory_file_reinit).
 */
static int
pmem_superblock(const struct cache_options *opts, struct tier *t)
{
    uint32_t sizes[CACHE_MAX_CLASSES];
    struct sblock_params p;
    char err[512];
    int st = SBLOCK_EMPTY;

    pmem_params(opts, t, &p, sizes);
    if (!tier_pmem_created(t)) {
        st = sblock_load(t, tier_pmem_base(t), &p, &ca.sb, err, sizeof(err));
    }
    if (st == SBLOCK_OK) {
        return 1;
    }
    if (st == SBLOCK_INCOMPATIBLE || st == SBLOCK_CORRUPT) {
        if (!opts->memory_file_reinit) {
            fprintf(stderr, "memory file %s: %s\n", opts->memory_file, err);
            return -1;
        }
        fprintf(stderr, "memory file %s: %s; discarding its contents as "
                "memory_file_reinit asks\n", opts->memory_file, err);
    }
    return pmem_new_file(opts, t, &p);
}

/* The DRAM policy's tier: malloc, or a memkind heap when memory_kind
 * names one (volatile too, so the rest of storage sees DRAM). */
static struct tier *
dram_tier_open(const struct cache_options *opts)
{
    char err[512];
    struct tier *t;

    if (opts->memory_kind == NULL) {
        return tier_dram_create(opts->mem_limit, opts->page_size,
                                opts->prealloc);
    }
    t = tier_memkind_create(opts->memory_kind, opts->mem_limit,
                            opts->page_size, err, sizeof(err));
    if (t == NULL) {
        fprintf(stderr, "%s\n", err);
    }
    return t;
}

/* Slabs on the tiers the policy names (DRAM, the memory file, or both);
 * the tiers belong to slabs once this succeeds.  1 when the memory file
 * holds items to recover. */
static int
memory_init(struct cache_options *opts)
{
    enum cache_tier_policy pol = opts->tier_policy;
    struct tier *dram = NULL, *pmem = NULL;
    int old = 0;

    if (pol != CACHE_TIER_PMEM && (dram = dram_tier_open(opts)) == NULL) {
        return -1;
    }
    if (pol != CACHE_TIER_DRAM && (pmem = pmem_tier_open(opts)) == NULL) {
        tier_destroy(&dram);
        return -1;
    }
    if (slabs_init(opts, dram, pmem) != 0) {
        tier_destroy(&dram);
        tier_destroy(&pmem);
        return -1;
    }
    if (pmem != NULL && (old = pmem_superblock(opts, pmem)) < 0) {
        slabs_destroy();
        return -1;
    }
    return old;
}

/*
 * Read the file's items back (recover.h), in the file's time, then mark
 * the file not clean before anything is served: from here on a crash
 * must bring the checksum pass back.
 */
static int
pmem_recover(struct cache_options *opts)
{
    struct recover_params p = {
        .check_crc = !ca.sb.clean,
        .use_cas = opts->use_cas,
        .hash_bulk_move = opts->hash_bulk_move,
        .verbose = opts->verbose,
    };

    if (ca.sb.epoch != 0) {
        clock_adopt_epoch(ca.sb.epoch);
    }
    p.now = clock_now();
    if (ca.sb.flush_time != 0) {
        int64_t rel = ca.sb.flush_time - (int64_t)clock_process_started();

        p.flush_time = rel < 1 ? 1 : (rel_time_t)rel;
        lru_set_flush(p.flush_time);
    }
    if (recover_run(slabs_tier(TIER_PMEM), &p, &ca.recovery) != 0) {
        return -1;
    }
    if (opts->verbose > 0) {
        fprintf(stderr, "memory file %s: recovered %llu items from %llu "
                "pages in %.3f s\n", opts->memory_file,
                (unsigned long long)ca.recovery.items,
                (unsigned long long)ca.recovery.pages,
                ca.recovery.seconds);
    }
    ca.sb.clean = false;
    sblock_commit(&ca.sb);
    return 0;
}

/* The memory file's superblock rules seq and CAS from now on: no value
 * at or below its mark is handed out again. */
static void
pmem_serve(void)
{
    if (ca.opts->pmem_crash_after != 0) {
        tier_pmem_crash_after(slabs_tier(TIER_PMEM),
                              ca.opts->pmem_crash_after);
    }
    persist_set_sblock(&ca.sb);
    if (ca.sb.cas_hwm > ca.cas_id) {
        ca.cas_id = ca.sb.cas_hwm;
    }
}

void
cache_options_defaults(struct cache_options *o)
{
    memset(o, 0, sizeof(*o));
    o->mem_limit = (size_t)64 << 20;
    o->page_size = (size_t)1 << 20;
    o->item_size_max = (size_t)1 << 20;
    o->slab_chunk_max = (size_t)512 << 10;
    o->factor = 1.25;
    o->chunk_min = 48;
    o->use_cas = true;
    o->evict = true;
    o->hashpower = 16;
    o->hash_expand = true;
    o->hash_bulk_move = 1;
    o->lru_segmented = true;
    o->hot_lru_pct = 20;
    o->warm_lru_pct = 40;
    o->hot_max_factor = 0.2;
    o->warm_max_factor = 2.0;
    o->temporary_ttl = 61;
    o->lru_crawler = true;
    o->crawler_sleep_us = 100;
    o->slab_reassign = true;
    o->slab_automove = 1;
    o->automove_ratio = 0.8;
    o->automove_window = 10;
    o->automove_freeratio = 0.01;
}

int
cache_init(struct cache_options *opts, unsigned nworkers)
{
    unsigned lp = opts->lock_power ? opts->lock_power
                                   : locks_power_for(nworkers);
    int old;

    memset(&ca, 0, sizeof(ca));
    ca.opts = opts;
    /* 1.6.45 starts the counter at 1: the first item gets cas 2. */
    ca.cas_id = 1;
    if (locks_init(lp) != 0) {
        fprintf(stderr, "cache: cannot set up %u item locks\n", 1u << lp);
        return -1;
    }
    if (assoc_init(opts->hashpower, opts->hash_bulk_move) != 0) {
        fprintf(stderr, "cache: cannot set up the hash table (hashpower "
                "%u, item lock power %u)\n", opts->hashpower, lp);
        goto fail_locks;
    }
    old = memory_init(opts);
    if (old < 0) {
        goto fail_assoc;
    }
    if (lru_init(opts) != 0) {
        goto fail_slabs;
    }
    if (old > 0 && pmem_recover(opts) != 0) {
        lru_destroy();
        goto fail_slabs;
    }
    if (ca.sb.tier != NULL) {
        pmem_serve();
    }
    if (start_threads(opts) != 0) {
        fprintf(stderr, "cache: cannot start storage threads\n");
        stop_threads();
        lru_destroy();
        goto fail_slabs;
    }
    return 0;
fail_slabs:
    slabs_destroy();
fail_assoc:
    assoc_destroy();
fail_locks:
    locks_destroy();
    return -1;
}

void
cache_shutdown(void)
{
    stop_threads();
    /* Nothing writes any more: the file is consistent as it stands. */
    if (ca.sb.tier != NULL) {
        persist_set_sblock(NULL);
        ca.sb.clean = true;
        sblock_commit(&ca.sb);
        ca.sb.tier = NULL;
    }
    lru_destroy();
    slabs_destroy();
    assoc_destroy();
    locks_destroy();
}

void
cache_tick(void)
{
    if (ca.opts->hash_expand) {
        uint64_t n = 0;

        for (unsigned id = 1; id <= slabs_largest(); id++) {
            n += lru_items_in_class(id);
        }
        assoc_maybe_expand(n);
    }
    slabs_automove_tick();
}

/* ---- lookups ---------------------------------------------------------- */

/* Find a live item under lock(hv); a dead one is unlinked on the way and
 * *st says why. */
static struct item *
find_live(const char *key, size_t nkey, uint32_t hv, enum cache_status *st)
{
    struct item *it = assoc_find(key, nkey, hv);
    bool flushed;

    *st = CACHE_MISS;
    if (it == NULL) {
        return NULL;
    }
    if (lru_is_dead(it, clock_now(), &flushed)) {
        lru_unlink(it, hv);
        *st = flushed ? CACHE_FLUSHED : CACHE_EXPIRED;
        return NULL;
    }
    *st = CACHE_HIT;
    return it;
}

/* The item in the memory file whose state a change to `it` must reach
 * before the reply: it, or the original a DRAM copy stands for; NULL for
 * an item in DRAM only. */
static struct item *
file_item(struct item *it)
{
    return it->tier == TIER_PMEM ? it : item_original(it);
}

/* A new TTL for a live item: one aligned 4-byte store, durable before the
 * reply when the item is in the memory file (exptime is outside the CRC). */
static void
set_exptime(struct item *it, rel_time_t exptime)
{
    struct item *f = file_item(it);

    __atomic_store_n(&it->exptime, exptime, __ATOMIC_RELAXED);
    if (f != NULL) {
        __atomic_store_n(&f->exptime, exptime, __ATOMIC_RELAXED);
        persist_exptime(f);
    }
}

/* Take a reader's reference, or refuse (a miss, as memcached) before the
 * 16-bit count could wrap. */
static bool
ref_for_reader(struct item *it, enum cache_status *st)
{
    if (__atomic_load_n(&it->refcount, __ATOMIC_RELAXED) >= REFCOUNT_LIMIT) {
        *st = CACHE_MISS;
        return false;
    }
    item_ref_incr(it);
    return true;
}

/* find_live() plus the reader's reference; lock(hv) held. */
static struct item *
fetch_live(const char *key, size_t nkey, uint32_t hv, enum cache_status *st)
{
    struct item *it = find_live(key, nkey, hv, st);

    if (it != NULL && !ref_for_reader(it, st)) {
        return NULL;
    }
    return it;
}

struct item *
cache_get(const char *key, size_t nkey, uint32_t hv, enum cache_status *st)
{
    struct item *it;

    locks_lock(hv);
    it = fetch_live(key, nkey, hv, st);
    if (it != NULL) {
        it = lru_bump(it, hv);
    }
    locks_unlock(hv);
    return it;
}

struct item *
cache_touch(const char *key, size_t nkey, uint32_t hv, rel_time_t exptime,
            enum cache_status *st)
{
    struct item *it;

    locks_lock(hv);
    it = fetch_live(key, nkey, hv, st);
    if (it != NULL) {
        set_exptime(it, exptime);
        it = lru_bump(it, hv);
    }
    locks_unlock(hv);
    return it;
}

struct item *
cache_alloc(const char *key, size_t nkey, uint32_t hv,
            uint32_t client_flags, rel_time_t exptime, uint32_t vlen,
            enum cache_status *st)
{
    struct item *it;

    (void)hv;
    if (item_size(nkey, client_flags, vlen, ca.opts->use_cas) >
        ca.opts->item_size_max) {
        *st = CACHE_TOO_LARGE;
        return NULL;
    }
    it = item_alloc(key, nkey, client_flags, exptime, vlen,
                    ca.opts->use_cas);
    *st = it != NULL ? CACHE_OK : CACHE_NO_MEMORY;
    return it;
}

void
cache_release(struct item *it)
{
    item_release(it);
}

/* ---- linking ---------------------------------------------------------- */

/* With a memory file, no CAS leaves here before the superblock's mark
 * covers it, so a restart never hands it out again. */
static uint64_t
next_cas(void)
{
    uint64_t cas = __atomic_add_fetch(&ca.cas_id, 1, __ATOMIC_RELAXED);

    if (ca.sb.tier != NULL) {
        sblock_reserve_seq(&ca.sb, cas);
    }
    return cas;
}

/* The cas unique a new value gets: the client's (meta E) or the next. */
static uint64_t
cas_for(uint64_t wanted)
{
    if (!ca.opts->use_cas) {
        return 0;
    }
    if (wanted == 0) {
        return next_cas();
    }
    if (ca.sb.tier != NULL) {
        sblock_reserve_seq(&ca.sb, wanted);
    }
    return wanted;
}

/* Link `it` in place of `old` (may be NULL) with cas_for(wanted).  In the
 * memory file the new item is committed before the old one dies (in
 * lru_unlink), so a crash leaves one or both live, never neither. */
static void
link_new(struct item *old, struct item *it, uint32_t hv, uint64_t wanted)
{
    item_set_cas(it, cas_for(wanted));
    if (it->tier == TIER_PMEM) {
        item_time_store(it, clock_now());
        persist_commit(it);
    }
    if (old != NULL) {
        lru_unlink(old, hv);
    }
    lru_link(it, hv);
    __atomic_add_fetch(&ca.total_items, 1, __ATOMIC_RELAXED);
}

/* A new unlinked item holding `len` bytes of `val` (no "\r\n" in val). */
static struct item *
small_item(const char *key, size_t nkey, uint32_t client_flags,
           rel_time_t exptime, const char *val, size_t len)
{
    struct item *n = item_alloc(key, nkey, client_flags, exptime,
                                (uint32_t)len, ca.opts->use_cas);

    if (n != NULL) {
        memcpy(item_value(n), val, len);
        memcpy(item_value(n) + len, "\r\n", 2);
    }
    return n;
}

/* ---- meta get --------------------------------------------------------- */

/* What mg reports about the item as it was before this command. */
static void
mget_record(const struct item *it, struct cache_mget *a)
{
    uint16_t f = item_flags(it);

    a->fetched = (f & ITEM_FETCHED) != 0;
    a->atime = item_time(it);
    a->exptime_before = it->exptime;
    a->token_sent = (f & ITEM_TOKEN_SENT) != 0;
    a->stale = (f & ITEM_STALE) != 0;
}

/* Touch, hand out the win token, bump: in memcached's order, after the
 * "before" state was recorded.  Returns the item to serve (lru_bump()). */
static struct item *
mget_apply(struct item *it, uint32_t hv, struct cache_mget *a)
{
    if (a->touch) {
        set_exptime(it, a->exptime);
    }
    if (a->created) {
        a->win = true;
    } else if (a->recache && !a->token_sent && it->exptime != 0 &&
               it->exptime < a->recache_before) {
        a->win = true;
    }
    /* A stale item goes to the first client that asks after it. */
    if (a->stale && !a->token_sent) {
        a->win = true;
    }
    if (a->win) {
        /* Durable, so a restart does not hand out a second token. */
        struct item *f = file_item(it);

        item_flags_set(it, ITEM_TOKEN_SENT);
        if (f != NULL) {
            item_flags_set(f, ITEM_TOKEN_SENT);
            persist_flags(f);
        }
    }
    return a->no_bump ? it : lru_bump(it, hv);
}

/* N on a miss: an empty item, linked; the allocation's reference becomes
 * the caller's.  lock(hv) held, the key known to be absent. */
static struct item *
mget_vivify(const char *key, size_t nkey, uint32_t hv, struct cache_mget *a)
{
    struct item *it = small_item(key, nkey, 0, a->vivify_exptime, "", 0);

    if (it == NULL) {
        return NULL;
    }
    link_new(NULL, it, hv, a->vivify_cas);
    a->created = true;
    return it;
}

struct item *
cache_mget(const char *key, size_t nkey, uint32_t hv, struct cache_mget *a,
           enum cache_status *st)
{
    struct item *it;

    a->fetched = a->created = a->win = a->stale = a->token_sent = false;
    a->atime = a->exptime_before = 0;
    locks_lock(hv);
    it = find_live(key, nkey, hv, st);
    if (it == NULL && a->vivify) {
        it = mget_vivify(key, nkey, hv, a);
        if (it == NULL) {
            *st = CACHE_MISS;
        }
    } else if (it != NULL && !ref_for_reader(it, st)) {
        /* Refcount overflow: a miss, and never a second vivified copy. */
        it = NULL;
    }
    if (it != NULL) {
        mget_record(it, a);
        if (!a->peek) {
            it = mget_apply(it, hv, a);
        }
    }
    locks_unlock(hv);
    return it;
}

/* ---- stores ----------------------------------------------------------- */

/* memcached's cas test: none asked (or no cas kept), match, lower than the
 * item's with invalidate (stale), or mismatch. */
enum store_cas { CAS_NONE, CAS_MATCH, CAS_STALE, CAS_BAD };

static enum store_cas
store_cas_test(const struct item *old, const struct cache_mstore *a)
{
    uint64_t have = item_cas(old);

    if (!a->compare || a->compare_cas == 0 || !ca.opts->use_cas) {
        return CAS_NONE;
    }
    if (a->compare_cas == have) {
        return CAS_MATCH;
    }
    if (a->invalidate && a->compare_cas < have) {
        return CAS_STALE;
    }
    return CAS_BAD;
}

static enum cache_status
store_done(struct item *it, struct cache_mstore *a)
{
    a->cas = item_cas(it);
    a->vlen = item_vlen(it);
    return CACHE_STORED;
}

/* append/prepend: a new item holding old and new data, keeping the old
 * item's flags and exptime. */
static enum cache_status
store_concat(struct item *old, struct item *it, struct cache_mstore *a,
             uint32_t hv)
{
    uint32_t ov = item_vlen(old), nv = item_vlen(it);
    struct item *n;

    if (item_size(item_nkey(it), item_client_flags(old), ov + nv,
                  ca.opts->use_cas) > ca.opts->item_size_max) {
        return CACHE_TOO_LARGE;
    }
    n = item_alloc(item_key(it), item_nkey(it), item_client_flags(old),
                   item_exptime(old), ov + nv, ca.opts->use_cas);
    if (n == NULL) {
        return CACHE_NO_MEMORY;
    }
    if (a->op == CACHE_APPEND) {
        item_value_move(n, 0, old, 0, ov);
        item_value_move(n, ov, it, 0, (size_t)nv + 2);
    } else {
        item_value_move(n, 0, it, 0, nv);
        item_value_move(n, nv, old, 0, (size_t)ov + 2);
    }
    link_new(old, n, hv, a->new_cas);
    item_set_cas(it, item_cas(n));
    store_done(n, a);
    item_release(n);
    return CACHE_STORED;
}

/* The key exists (old): memcached's rules per op.  cas_mode: a set or
 * replace that must pass the cas test (cas, or ms with C). */
static enum cache_status
store_over(struct item *old, struct item *it, struct cache_mstore *a,
           bool cas_mode, uint32_t hv)
{
    enum store_cas r = store_cas_test(old, a);

    switch (a->op) {
    case CACHE_ADD:
        /* add fails but keeps the existing item fresh; C plays no part. */
        if (item_time(old) + UPDATE_INTERVAL < clock_now()) {
            item_time_store(old, clock_now());
        }
        return CACHE_NOT_STORED;
    case CACHE_APPEND:
    case CACHE_PREPEND:
        if (r != CAS_NONE && r != CAS_MATCH) {
            return CACHE_EXISTS;
        }
        return store_concat(old, it, a, hv);
    default:
        break;
    }
    if (cas_mode && r == CAS_STALE) {
        /* An older writer's value, accepted but marked stale: it keeps
         * the TTL and any token already handed out. */
        it->exptime = old->exptime;
        item_flags_set(it, (uint16_t)(ITEM_STALE |
                       (item_flags(old) & ITEM_TOKEN_SENT)));
    } else if (cas_mode && r != CAS_MATCH) {
        return CACHE_EXISTS;
    }
    link_new(old, it, hv, a->new_cas);
    return store_done(it, a);
}

/* The key is missing. */
static enum cache_status
store_miss(struct item *it, struct cache_mstore *a, bool cas_mode,
           uint32_t hv)
{
    if (cas_mode) {
        return CACHE_NOT_FOUND;
    }
    switch (a->op) {
    case CACHE_APPEND:
    case CACHE_PREPEND:
        if (!a->vivify) {
            return CACHE_NOT_STORED;
        }
        it->exptime = a->vivify_exptime;
        break;
    case CACHE_REPLACE:
        return CACHE_NOT_STORED;
    default:
        break;
    }
    link_new(NULL, it, hv, a->new_cas);
    return store_done(it, a);
}

enum cache_status
cache_mstore(struct item *it, struct cache_mstore *a)
{
    uint32_t hv = hash_murmur3(item_key(it), item_nkey(it));
    bool cas_mode = a->op == CACHE_CAS ||
                    (a->compare && (a->op == CACHE_SET ||
                                    a->op == CACHE_REPLACE));
    enum cache_status st, dummy;
    struct item *old;

    a->cas = 0;
    a->vlen = 0;
    locks_lock(hv);
    old = find_live(item_key(it), item_nkey(it), hv, &dummy);
    if (old != NULL) {
        st = store_over(old, it, a, cas_mode, hv);
    } else {
        st = store_miss(it, a, cas_mode, hv);
    }
    locks_unlock(hv);
    return st;
}

enum cache_status
cache_store(struct item *it, enum cache_op op, uint64_t req_cas)
{
    struct cache_mstore a = {
        .op = op,
        .compare = op == CACHE_CAS || req_cas != 0,
        .compare_cas = req_cas,
    };

    return cache_mstore(it, &a);
}

/* ---- deletes ---------------------------------------------------------- */

/* md I in the memory file: a stale copy takes the item's place, since
 * the cas the commit covers changes. */
static enum cache_status
mdelete_stale_copy(struct item *it, const struct cache_mdelete *a,
                   uint32_t hv)
{
    struct item *n;

    /* Our reference keeps `it` whole while the allocation may evict. */
    item_ref_incr(it);
    n = item_alloc(item_key(it), item_nkey(it), item_client_flags(it),
                   a->touch ? a->exptime : it->exptime, item_vlen(it),
                   ca.opts->use_cas);
    if (n != NULL) {
        item_value_move(n, 0, it, 0, it->nbytes);
        item_flags_set(n, (uint16_t)(ITEM_STALE | (item_flags(it) &
                       (ITEM_FETCHED | ITEM_KEY_BINARY))));
        link_new(it, n, hv, a->new_cas);
        item_time_store(n, item_time(it));
        item_release(n);
    }
    item_release(it);
    return n != NULL ? CACHE_DELETED : CACHE_NO_MEMORY;
}

/* md I: keep the item, stale, with a new cas and no token handed out. */
static void
mdelete_stale(struct item *it, const struct cache_mdelete *a)
{
    if (a->touch) {
        it->exptime = a->exptime;
    }
    item_flags_set(it, ITEM_STALE);
    item_flags_clear(it, ITEM_TOKEN_SENT);
    item_set_cas(it, cas_for(a->new_cas));
}

/* md x: an empty item in its place, same client flags and exptime. */
static enum cache_status
mdelete_tombstone(struct item *it, const struct cache_mdelete *a,
                  uint32_t hv)
{
    struct item *n;

    /* Our reference keeps `it` whole while the allocation may evict. */
    item_ref_incr(it);
    n = small_item(item_key(it), item_nkey(it), item_client_flags(it),
                   it->exptime, "", 0);
    if (n != NULL) {
        link_new(it, n, hv, a->new_cas);
        item_release(n);
    }
    item_release(it);
    return n != NULL ? CACHE_DELETED : CACHE_NO_MEMORY;
}

enum cache_status
cache_mdelete(const char *key, size_t nkey, uint32_t hv,
              struct cache_mdelete *a)
{
    enum cache_status st;
    struct item *it;

    a->clsid = 0;
    locks_lock(hv);
    it = find_live(key, nkey, hv, &st);
    if (it == NULL) {
        st = CACHE_NOT_FOUND;
    } else if (a->compare && item_cas(it) != a->compare_cas) {
        st = CACHE_EXISTS;
    } else {
        a->clsid = item_clsid(it);
        st = CACHE_DELETED;
        if (a->invalidate && file_item(it) != NULL) {
            st = mdelete_stale_copy(it, a, hv);
        } else if (a->invalidate) {
            mdelete_stale(it, a);
        } else if (a->tombstone) {
            st = mdelete_tombstone(it, a, hv);
        } else {
            lru_unlink(it, hv);
        }
    }
    locks_unlock(hv);
    return st;
}

enum cache_status
cache_delete(const char *key, size_t nkey, uint32_t hv, uint64_t cas,
             unsigned *clsid)
{
    struct cache_mdelete a = { .compare = cas != 0, .compare_cas = cas };
    enum cache_status st = cache_mdelete(key, nkey, hv, &a);

    if (st == CACHE_DELETED && clsid != NULL) {
        *clsid = a.clsid;
    }
    return st;
}

/* ---- incr / decr ------------------------------------------------------ */

/* memcached's safe_strtoull on the value (which ends in "\r\n"). */
static bool
parse_u64(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno == ERANGE) {
        return false;
    }
    if (*end == ' ' || *end == '\r' || *end == '\n' || *end == '\t' ||
        (*end == '\0' && end != s)) {
        /* strtoull takes "-1" as a huge number; memcached refuses it. */
        if ((long long)v < 0 && strchr(s, '-') != NULL) {
            return false;
        }
        *out = v;
        return true;
    }
    return false;
}

static bool
read_number(struct item *it, uint64_t *v)
{
    char buf[INCR_MAX_LEN + 3];
    size_t n;

    if (it->nbytes <= 2 || (item_flags(it) & ITEM_CHUNKED)) {
        return false;
    }
    if (it->nbytes <= INCR_MAX_LEN + 2) {
        n = item_value_copy(it, buf, sizeof(buf) - 1);
        buf[n] = '\0';
        return parse_u64(buf, v);
    }
    /* Longer values: parse in place; the "\r\n" stops strtoull. */
    return parse_u64(item_value(it), v);
}

/* The meta knobs on the item now holding the number, and what ma
 * reports of it. */
static void
delta_finish(struct item *it, struct cache_mdelta *a)
{
    /* As memcached, E overrides the unique already taken for the value. */
    if (a->new_cas != 0 && ca.opts->use_cas) {
        item_set_cas(it, a->new_cas);
    }
    /* T updates the TTL of a counter that existed; one that N created
     * keeps N's TTL, as memcached. */
    if (a->touch && !a->created) {
        set_exptime(it, a->exptime);
    }
    a->cas = item_cas(it);
    a->exptime_after = it->exptime;
    a->clsid = item_clsid(it);
}

/* A new item holding `num` padded with spaces to `vlen` bytes. */
static struct item *
number_item(const struct item *it, const char *num, size_t len, size_t vlen)
{
    struct item *n = item_alloc(item_key(it), item_nkey(it),
                                item_client_flags(it), item_exptime(it),
                                (uint32_t)vlen, ca.opts->use_cas);

    if (n != NULL) {
        memset(item_value(n), ' ', vlen);
        memcpy(item_value(n), num, len);
        memcpy(item_value(n) + vlen, "\r\n", 2);
    }
    return n;
}

/* Write the new number: in place (padded with spaces) when it fits and
 * nobody else holds the item, else as a new item.  In the memory file it
 * is never changed in place (a torn number would be live), nor in a DRAM
 * copy of an item there: a new item padded as the in-place write would
 * be replaces it, so replies stay the same. */
static enum cache_status
write_number(struct item *it, uint64_t v, uint32_t hv, struct cache_mdelta *a)
{
    char num[INCR_MAX_LEN];
    int len = snprintf(num, sizeof(num), "%llu", (unsigned long long)v);
    bool fits = (uint32_t)len + 2 <= it->nbytes &&
                __atomic_load_n(&it->refcount, __ATOMIC_ACQUIRE) == 2;
    struct item *n;

    if (fits && file_item(it) == NULL) {
        memset(item_value(it) + len, ' ', it->nbytes - 2 - (size_t)len);
        memcpy(item_value(it), num, (size_t)len);
        item_set_cas(it, cas_for(0));
        delta_finish(it, a);
        return CACHE_OK;
    }
    n = number_item(it, num, (size_t)len,
                    fits ? it->nbytes - 2 : (size_t)len);
    if (n == NULL) {
        return CACHE_NO_MEMORY;
    }
    /* E is the new item's cas from the start, so the commit covers it. */
    link_new(it, n, hv, a->new_cas);
    delta_finish(n, a);
    item_release(n);
    return CACHE_OK;
}

/* The key exists and passed the cas test; lock(hv) held. */
static enum cache_status
delta_apply(struct item *it, uint32_t hv, struct cache_mdelta *a)
{
    enum cache_status st;
    uint64_t v;

    item_ref_incr(it);
    a->clsid = item_clsid(it);
    if (!read_number(it, &v)) {
        st = CACHE_NON_NUMERIC;
    } else {
        v = a->incr ? v + a->delta : (a->delta > v ? 0 : v - a->delta);
        a->value = v;
        st = write_number(it, v, hv, a);
    }
    item_release(it);
    return st;
}

/* ma N on a miss: the key holding the decimal text of `initial`. */
static enum cache_status
delta_vivify(const char *key, size_t nkey, uint32_t hv,
             struct cache_mdelta *a)
{
    char num[INCR_MAX_LEN];
    int len = snprintf(num, sizeof(num), "%llu",
                       (unsigned long long)a->initial);
    struct item *n = small_item(key, nkey, 0, a->vivify_exptime, num,
                                (size_t)len);

    if (n == NULL) {
        return CACHE_NO_MEMORY;
    }
    link_new(NULL, n, hv, a->new_cas);
    a->value = a->initial;
    a->created = true;
    delta_finish(n, a);
    item_release(n);
    return CACHE_OK;
}

enum cache_status
cache_mdelta(const char *key, size_t nkey, uint32_t hv,
             struct cache_mdelta *a)
{
    enum cache_status st;
    struct item *it;

    a->value = a->cas = 0;
    a->exptime_after = 0;
    a->clsid = 0;
    a->created = false;
    locks_lock(hv);
    it = find_live(key, nkey, hv, &st);
    if (it == NULL) {
        st = a->vivify ? delta_vivify(key, nkey, hv, a) : CACHE_NOT_FOUND;
    } else if (a->compare && a->compare_cas != 0 &&
               item_cas(it) != a->compare_cas) {
        a->clsid = item_clsid(it);
        st = CACHE_EXISTS;
    } else {
        st = delta_apply(it, hv, a);
    }
    locks_unlock(hv);
    return st;
}

enum cache_status
cache_delta(const char *key, size_t nkey, uint32_t hv, bool incr,
            uint64_t delta, uint64_t *value, unsigned *clsid)
{
    struct cache_mdelta a = { .incr = incr, .delta = delta };
    enum cache_status st = cache_mdelta(key, nkey, hv, &a);

    if (st != CACHE_NOT_FOUND) {
        *clsid = a.clsid;
    }
    if (st == CACHE_OK) {
        *value = a.value;
    }
    return st;
}

/* ---- administration --------------------------------------------------- */

void
cache_flush(rel_time_t when)
{
    /* Durable before the reply, as wall-clock seconds: rel_time_t does
     * not survive a restart. */
    if (ca.sb.tier != NULL) {
        sblock_set_flush(&ca.sb, when == 0 ? 0 : (int64_t)when +
                         (int64_t)clock_process_started());
    }
    lru_set_flush(when);
    if (when != 0 && when <= clock_now()) {
        lru_flush_recent(when);
    }
}

int
cache_set_memlimit(size_t bytes)
{
    if (slabs_set_memlimit(bytes) != 0) {
        return -1;
    }
    ca.opts->mem_limit = bytes;
    return 0;
}

enum cache_status
cache_slabs_reassign(int src, int dst)
{
    if (!ca.opts->slab_reassign) {
        return CACHE_DISABLED;
    }
    return slabs_reassign(src, dst);
}

enum cache_status
cache_crawl(const bool classes[CACHE_MAX_CLASSES])
{
    return crawler_request(classes);
}

int
cache_crawler_enable(bool on)
{
    return crawler_enable(on);
}

/* ---- metadump --------------------------------------------------------- */

struct dump_ctx {
    const bool *classes;
    int       (*emit)(const char *line, size_t len, void *ctx);
    void       *ctx;
};

/* Percent-encode everything but RFC 3986 unreserved characters. */
static size_t
uri_encode(char *out, const char *in, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;

    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)in[i];

        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
            (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
            c == '~') {
            out[o++] = (char)c;
        } else {
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    out[o] = '\0';
    return o;
}

static int
dump_one(struct item *it, void *arg)
{
    struct dump_ctx *d = arg;
    char key[3 * 256], line[3 * 256 + 200];
    time_t base = clock_process_started();
    bool flushed;
    int len;

    if ((d->classes != NULL && !d->classes[item_clsid(it)]) ||
        lru_is_dead(it, clock_now(), &flushed)) {
        return 0;
    }
    uri_encode(key, item_key(it), item_nkey(it));
    len = snprintf(line, sizeof(line),
                   "key=%s exp=%lld la=%lld cas=%llu fetch=%s cls=%u "
                   "size=%zu\n", key,
                   it->exptime == 0 ? -1LL : (long long)(it->exptime + base),
                   (long long)(item_time(it) + base),
                   (unsigned long long)item_cas(it),
                   (item_flags(it) & ITEM_FETCHED) ? "yes" : "no",
                   item_clsid(it), item_ntotal(it));
    return d->emit(line, (size_t)len, d->ctx);
}

void
cache_metadump(const bool classes[CACHE_MAX_CLASSES],
               int (*emit)(const char *line, size_t len, void *ctx),
               void *ctx)
{
    struct dump_ctx d = { classes, emit, ctx };

    assoc_walk(dump_one, &d);
}

/* ---- stats ------------------------------------------------------------ */

void
cache_stats(struct cache_stats *out)
{
    memset(out, 0, sizeof(*out));
    lru_totals(out);
    slabs_totals(out);
    slabs_mover_stats(out);
    crawler_stats(out);
    assoc_stats(&out->hash_power_level, &out->hash_bytes,
                &out->hash_is_expanding);
    out->total_items = __atomic_load_n(&ca.total_items, __ATOMIC_RELAXED);
}

unsigned
cache_nclasses(void)
{
    return slabs_largest();
}

/* With two tiers, "stats slabs" and "stats items" show each class as the
 * sum of its two tier classes (ages: the older tail). */
bool
cache_slab_stats(unsigned id, struct cache_slab_stats *out)
{
    struct cache_slab_stats p;
    bool any = slabs_class_stats(SLABS_TC(TIER_DRAM, id), out);

    if (slabs_class_stats(SLABS_TC(TIER_PMEM, id), &p)) {
        out->chunk_size = p.chunk_size;
        out->chunks_per_page = p.chunks_per_page;
        out->total_pages += p.total_pages;
        out->total_chunks += p.total_chunks;
        out->used_chunks += p.used_chunks;
        out->free_chunks += p.free_chunks;
        out->free_chunks_end += p.free_chunks_end;
        any = true;
    }
    return any;
}

static uint64_t
max_u64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

bool
cache_item_stats(unsigned id, struct cache_item_stats *out)
{
    struct cache_item_stats d, p;
    bool in_dram = lru_item_stats(SLABS_TC(TIER_DRAM, id), &d);
    bool in_pmem = lru_item_stats(SLABS_TC(TIER_PMEM, id), &p);
    uint64_t *o = (uint64_t *)out;
    const uint64_t *dq = (const uint64_t *)&d, *pq = (const uint64_t *)&p;

    if (!in_dram || !in_pmem) {
        *out = in_dram ? d : p;
        return in_dram || in_pmem;
    }
    for (size_t i = 0; i < sizeof(*out) / sizeof(*o); i++) {
        o[i] = dq[i] + pq[i];
    }
    out->age_hot = max_u64(d.age_hot, p.age_hot);
    out->age_warm = max_u64(d.age_warm, p.age_warm);
    out->age = max_u64(d.age, p.age);
    out->evicted_time = max_u64(d.evicted_time, p.evicted_time);
    return true;
}

bool
cache_sizes(void (*emit)(uint64_t size, uint64_t count, void *ctx),
            void *ctx)
{
    return lru_sizes(emit, ctx);
}

unsigned
cache_tier_stats(struct cache_tier_stats *out, unsigned max)
{
    unsigned n = 0;

    for (unsigned id = TIER_DRAM; id <= TIER_PMEM && n < max; id++) {
        struct tier *t = slabs_tier(id);
        struct cache_tier_stats *o = &out[n];
        struct cache_stats s;

        if (t == NULL) {
            continue;
        }
        memset(&s, 0, sizeof(s));
        lru_tier_totals(id, &s);
        memset(o, 0, sizeof(*o));
        o->name = t->ops->name;
        o->durable = id == TIER_PMEM;
        o->real_pmem = id == TIER_PMEM && tier_pmem_is_pmem(t);
        slabs_tier_usage(id, &o->limit, &o->bytes);
        o->items = s.curr_items;
        o->item_bytes = s.bytes;
        o->evictions = s.evictions;
        lru_tier_moves(id, &o->promotions, &o->demotions);
        if (id == TIER_PMEM) {
            tier_pmem_flush_stats(t, &o->flushes, &o->flush_bytes);
        }
        n++;
    }
    return n;
}

bool
cache_recovery_stats(struct cache_recovery *out)
{
    *out = ca.recovery;
    return ca.sb.tier != NULL;
}

void
cache_stats_reset(void)
{
    lru_stats_reset();
    slabs_stats_reset();
    crawler_stats_reset();
    __atomic_store_n(&ca.total_items, 0, __ATOMIC_RELAXED);
}
