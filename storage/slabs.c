/*
 * slabs.c: size classes, pages, free lists and the page mover.
 *
 * -m is respected exactly: at most limit / page_size pages are ever taken
 * from the tier.  memcached instead lets every class take its first page
 * past the limit (up to 63 MiB over -m); here a class that runs out of
 * memory with nothing to evict has the page mover bring it a page from
 * another class at once (slabs_steal_page()).
 *
 * The page mover takes one page of the source class out of service: its
 * free chunks leave the free list and chunks freed while it runs are not
 * listed again (slabs_free() checks the range).  Live items are handed to
 * lru_evacuate() one by one, without the slabs lock, until every chunk of
 * the page is free; then the page goes to the destination class or to the
 * global pool (class 0).
 *
 * With two tiers, state is kept per tier class (SLABS_TC): each tier has
 * its own classes, pool and limit, and a page only ever moves within its
 * tier.
 */
#include "storage/slabs.h"
#include "storage/item.h"
#include "storage/lru.h"
#include "storage/persist.h"
#include "storage/prefetch.h"
#include "storage/tier.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Passes over a page before items readers hold are unlinked anyway
 * (about 25 ms of backoff). */
#define FORCE_PASS 8

struct slab_class {
    size_t       size;          /* chunk size */
    unsigned     perslab;       /* chunks per page */
    struct item *slots;         /* free chunks */
    uint64_t     sl_curr;       /* number of free chunks */
    char       **pages;
    unsigned     npages;
    unsigned     cap;
    uint64_t     requested;     /* bytes asked for by live items */
};

struct automove_win {
    uint64_t     evicted[SLABS_TC_MAX];         /* at the last tick */
    uint64_t     window_evicts[SLABS_TC_MAX];
};

#define NTIERS 2

static struct {
    const struct cache_options *opts;
    pthread_mutex_t    lock;
    struct slab_class  cls[SLABS_TC_MAX];       /* by tier class */
    unsigned           largest;
    size_t             page_size;
    size_t             chunk_max;
    size_t             prefix;          /* bytes before each item */
    struct tier       *tiers[NTIERS];   /* by tier id; NULL if unused */
    unsigned           home;            /* where new items go */
    unsigned           mtier;           /* the tier -m sizes */
    /* page mover, under lock; src and dst are tier classes */
    pthread_t          mover;
    bool               mover_on;
    bool               mover_stop;
    pthread_cond_t     cond;
    pthread_cond_t     done;
    bool               pending;
    int                src, dst;
    int                pick_cursor;
    char              *move_start;
    char              *move_end;
    struct cache_stats mst;
    struct automove_win win;
} sl;

/* ---- class table ------------------------------------------------------ */

static size_t
align8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

/* Class id has the same chunks in every tier. */
static void
set_class(unsigned id, size_t size)
{
    for (unsigned t = 0; t < NTIERS; t++) {
        sl.cls[SLABS_TC(t, id)].size = size;
        sl.cls[SLABS_TC(t, id)].perslab = (unsigned)(sl.page_size / size);
    }
}

/* The tier of a tier class, and the page pool of that tier. */
static struct tier *
tier_of(unsigned tc)
{
    return sl.tiers[SLABS_TC_TIER(tc)];
}

static struct slab_class *
pool_of(unsigned tc)
{
    return &sl.cls[SLABS_TC(SLABS_TC_TIER(tc), 0)];
}

/* "a-b-c": explicit chunk sizes, as -o slab_sizes. */
static unsigned
table_from_list(const char *list)
{
    unsigned id = 0;
    const char *p = list;

    while (*p != '\0' && id < CACHE_MAX_CLASSES - 2) {
        char *end;
        unsigned long v = strtoul(p, &end, 10);

        /* Sizes must hold a header and grow; the rest of a bad list is
         * ignored rather than carved into overlapping chunks. */
        if (end == p || v < sizeof(struct item) + 8 + sl.prefix ||
            v >= sl.chunk_max ||
            (id > 0 && align8(v) <= sl.cls[id].size)) {
            break;
        }
        set_class(++id, align8(v));
        p = *end == '-' ? end + 1 : end;
    }
    return id;
}

static unsigned
table_from_factor(double factor, unsigned chunk_min)
{
    unsigned size = (unsigned)sizeof(struct item) + chunk_min;
    unsigned id = 0;

    while (id < CACHE_MAX_CLASSES - 2 &&
           size < (double)sl.chunk_max / factor) {
        size = (unsigned)align8(size);
        set_class(++id, size);
        size = (unsigned)(size * factor);
    }
    return id;
}

/* PMEM chunks carry the commit prefix; the page table starts empty. */
static int
pmem_init(struct tier *tier)
{
    char err[256];

    if (persist_init(tier, err, sizeof(err)) != 0) {
        fprintf(stderr, "slabs: memory file: %s\n", err);
        return -1;
    }
    sl.prefix = PERSIST_PREFIX;
    return 0;
}

int
slabs_init(const struct cache_options *opts, struct tier *dram,
           struct tier *pmem)
{
    unsigned n;

    memset(&sl, 0, sizeof(sl));
    sl.opts = opts;
    sl.tiers[TIER_DRAM] = dram;
    sl.tiers[TIER_PMEM] = pmem;
    sl.home = dram != NULL && (pmem == NULL ||
                               opts->tier_policy == CACHE_TIER_CAPACITY)
              ? TIER_DRAM : TIER_PMEM;
    sl.mtier = dram != NULL ? TIER_DRAM : TIER_PMEM;
    sl.page_size = opts->page_size;
    sl.chunk_max = opts->slab_chunk_max;
    if ((dram == NULL && pmem == NULL) ||
        (dram != NULL && dram->id != TIER_DRAM) ||
        (pmem != NULL && pmem->id != TIER_PMEM)) {
        fprintf(stderr, "slabs: no tier, or a tier in the wrong place\n");
        return -1;
    }
    if (sl.chunk_max == 0 || sl.chunk_max > sl.page_size ||
        opts->factor <= 1.0) {
        fprintf(stderr, "slabs: bad chunk max or factor\n");
        return -1;
    }
    if (pmem != NULL && pmem_init(pmem) != 0) {
        return -1;
    }
    pthread_mutex_init(&sl.lock, NULL);
    pthread_cond_init(&sl.cond, NULL);
    pthread_cond_init(&sl.done, NULL);
    n = opts->slab_sizes != NULL ? table_from_list(opts->slab_sizes)
                                 : table_from_factor(opts->factor,
                                                     opts->chunk_min);
    sl.largest = n + 1;
    set_class(sl.largest, sl.chunk_max);
    if (sl.cls[1].size < sl.prefix + sizeof(struct item) + 8) {
        /* A chunk must hold the prefix and a header, or carving it would
         * write into the next one. */
        fprintf(stderr, "slabs: chunks of %zu bytes cannot hold an item in "
                "the memory file\n", sl.cls[1].size);
        persist_destroy();
        return -1;
    }
    if (opts->verbose > 1) {
        for (unsigned i = 1; i <= sl.largest; i++) {
            fprintf(stderr, "slab class %3u: chunk size %9zu perslab %7u\n",
                    i, sl.cls[i].size, sl.cls[i].perslab);
        }
    }
    return 0;
}

void
slabs_destroy(void)
{
    slabs_mover_stop();
    for (unsigned tc = 0; tc < SLABS_TC_MAX; tc++) {
        for (unsigned p = 0; p < sl.cls[tc].npages; p++) {
            tier_page_free(tier_of(tc), sl.cls[tc].pages[p]);
        }
        free(sl.cls[tc].pages);
    }
    if (sl.prefix != 0) {
        persist_destroy();
    }
    for (unsigned t = 0; t < NTIERS; t++) {
        tier_destroy(&sl.tiers[t]);
    }
    pthread_mutex_destroy(&sl.lock);
    pthread_cond_destroy(&sl.cond);
    pthread_cond_destroy(&sl.done);
    memset(&sl, 0, sizeof(sl));
}

unsigned
slabs_clsid(size_t size)
{
    if (size == 0 || size + sl.prefix > sl.chunk_max) {
        return 0;
    }
    for (unsigned i = 1; i <= sl.largest; i++) {
        if (size + sl.prefix <= sl.cls[i].size) {
            return i;
        }
    }
    return 0;
}

size_t
slabs_size(unsigned id)
{
    id = SLABS_TC_ID(id);
    return id >= 1 && id <= sl.largest ? sl.cls[id].size - sl.prefix : 0;
}

unsigned
slabs_largest(void)
{
    return sl.largest;
}

size_t
slabs_chunk_max(void)
{
    return sl.chunk_max - sl.prefix;
}

struct tier *
slabs_tier(unsigned tier_id)
{
    return tier_id < NTIERS ? sl.tiers[tier_id] : NULL;
}

unsigned
slabs_home_tier(void)
{
    return sl.home;
}

/* A class of a tier in use (not a pool). */
static bool
tc_valid(unsigned tc)
{
    unsigned id = SLABS_TC_ID(tc);

    return tc < SLABS_TC_MAX && id >= 1 && id <= sl.largest &&
           tier_of(tc) != NULL;
}

/* The item in chunk i of a page of class c. */
static struct item *
chunk_item(const struct slab_class *c, char *page, unsigned i)
{
    return (struct item *)(page + (size_t)i * c->size + sl.prefix);
}

/* ---- pages and chunks: slabs lock held -------------------------------- */

/* A page off every list goes back to its tier while serving: a prefetch
 * walk (prefetch.h) may still be reading an item header in it. */
static void
give_back(struct tier *t, char *page)
{
    prefetch_quiesce();
    tier_page_free(t, page);
}

static int
add_page(struct slab_class *c, char *page)
{
    if (c->npages == c->cap) {
        unsigned cap = c->cap ? c->cap * 2 : 16;
        char **np = realloc(c->pages, cap * sizeof(*np));

        if (np == NULL) {
            return -1;
        }
        c->pages = np;
        c->cap = cap;
    }
    c->pages[c->npages] = page;
    /* npages is read without the lock by slabs_npages(). */
    __atomic_store_n(&c->npages, c->npages + 1, __ATOMIC_RELAXED);
    return 0;
}

/* Take the last page off a class's list.  Lock held. */
static char *
pop_page(struct slab_class *c)
{
    __atomic_store_n(&c->npages, c->npages - 1, __ATOMIC_RELAXED);
    return c->pages[c->npages];
}

static void
push_free(struct slab_class *c, struct item *it)
{
    item_flags_store(it, ITEM_SLABBED);
    it->refcount = 0;
    it->prev = NULL;
    it->next = c->slots;
    if (c->slots != NULL) {
        c->slots->prev = it;
    }
    c->slots = it;
    c->sl_curr++;
}

static void
unlink_free(struct slab_class *c, struct item *it)
{
    if (it->prev != NULL) {
        it->prev->next = it->next;
    } else {
        c->slots = it->next;
    }
    if (it->next != NULL) {
        it->next->prev = it->prev;
    }
    it->next = it->prev = NULL;
    c->sl_curr--;
}

static void
carve(unsigned tc, char *page)
{
    struct slab_class *c = &sl.cls[tc];

    for (unsigned i = 0; i < c->perslab; i++) {
        struct item *it = chunk_item(c, page, i);

        if (sl.prefix != 0) {
            memset(persist_prefix_of(it), 0, sl.prefix);
        }
        it->clsid = (uint8_t)SLABS_TC_ID(tc);
        it->tier = (uint8_t)SLABS_TC_TIER(tc);
        push_free(c, it);
    }
    if (SLABS_TC_TIER(tc) == TIER_PMEM) {
        /* Every commit word of the new cut is 0 in the file before the
         * page table says how the page is cut. */
        tier_persist(tier_of(tc), page, sl.page_size);
        persist_page_set(page, SLABS_TC_ID(tc));
    }
}

/* A page for tier class tc from its tier's pool or the tier. */
static bool
grow(unsigned tc)
{
    struct slab_class *pool = pool_of(tc);
    char *page;

    if (pool->npages > 0) {
        page = pop_page(pool);
    } else {
        page = tier_page_alloc(tier_of(tc));
        if (page == NULL) {
            return false;
        }
    }
    if (add_page(&sl.cls[tc], page) != 0) {
        sl.mst.malloc_fails++;
        add_page(pool, page);   /* cannot fail: the slot was just freed */
        return false;
    }
    carve(tc, page);
    return true;
}

void *
slabs_alloc(size_t size, unsigned tc)
{
    struct slab_class *c = &sl.cls[tc];
    struct item *it = NULL;

    if (!tc_valid(tc)) {
        return NULL;
    }
    pthread_mutex_lock(&sl.lock);
    if (c->sl_curr > 0 || grow(tc)) {
        it = c->slots;
        unlink_free(c, it);
        c->requested += size;
        it->h_next = NULL;
        item_flags_store(it, 0);
        it->clsid = (uint8_t)SLABS_TC_ID(tc);
        it->tier = (uint8_t)SLABS_TC_TIER(tc);
        __atomic_store_n(&it->refcount, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&sl.lock);
    return it;
}

void
slabs_free(void *ptr, size_t size, unsigned tc)
{
    struct slab_class *c = &sl.cls[tc];
    struct item *it = ptr;

    pthread_mutex_lock(&sl.lock);
    c->requested -= size;
    it->clsid = (uint8_t)SLABS_TC_ID(tc);
    if ((char *)ptr >= sl.move_start && (char *)ptr < sl.move_end) {
        /* In the page being moved: free, but not for reuse. */
        item_flags_store(it, ITEM_SLABBED);
        it->refcount = 0;
    } else {
        push_free(c, it);
    }
    pthread_mutex_unlock(&sl.lock);
}

/* ---- recovery --------------------------------------------------------- */

unsigned
slabs_perslab(unsigned id)
{
    id = SLABS_TC_ID(id);
    return id >= 1 && id <= sl.largest ? sl.cls[id].perslab : 0;
}

void *
slabs_chunk(unsigned id, void *page, unsigned i)
{
    return chunk_item(&sl.cls[SLABS_TC_ID(id)], page, i);
}

int
slabs_recover_page(unsigned id, void *page,
                   size_t (*keep)(void *chunk, void *ctx), void *ctx)
{
    unsigned tc = SLABS_TC(TIER_PMEM, id);
    struct slab_class *c = &sl.cls[tc];
    int rc = -1;

    pthread_mutex_lock(&sl.lock);
    if (id <= sl.largest && tc_valid(tc) && add_page(c, page) == 0) {
        for (unsigned i = 0; i < c->perslab; i++) {
            struct item *it = chunk_item(c, page, i);
            size_t used = keep(it, ctx);

            if (used != 0) {
                c->requested += used;
            } else {
                it->clsid = (uint8_t)id;
                it->tier = TIER_PMEM;
                push_free(c, it);
            }
        }
        rc = 0;
    }
    pthread_mutex_unlock(&sl.lock);
    return rc;
}

/* ---- stats and limits ------------------------------------------------- */

bool
slabs_class_stats(unsigned tc, struct cache_slab_stats *out)
{
    struct slab_class *c = &sl.cls[tc];

    memset(out, 0, sizeof(*out));
    if (!tc_valid(tc)) {
        return false;
    }
    pthread_mutex_lock(&sl.lock);
    out->chunk_size = c->size;
    out->chunks_per_page = c->perslab;
    out->total_pages = c->npages;
    out->total_chunks = (uint64_t)c->npages * c->perslab;
    out->free_chunks = c->sl_curr;
    out->used_chunks = out->total_chunks - c->sl_curr;
    out->free_chunks_end = 0;
    pthread_mutex_unlock(&sl.lock);
    return out->total_pages > 0;
}

unsigned
slabs_npages(unsigned tc)
{
    return __atomic_load_n(&sl.cls[tc].npages, __ATOMIC_RELAXED);
}

uint64_t
slabs_requested(unsigned tc)
{
    uint64_t r;

    pthread_mutex_lock(&sl.lock);
    r = sl.cls[tc].requested;
    pthread_mutex_unlock(&sl.lock);
    return r;
}

void
slabs_totals(struct cache_stats *out)
{
    pthread_mutex_lock(&sl.lock);
    out->limit_maxbytes = sl.tiers[sl.mtier]->limit;
    out->total_malloced = out->slab_global_page_pool = 0;
    for (unsigned t = 0; t < NTIERS; t++) {
        if (sl.tiers[t] != NULL) {
            out->total_malloced += sl.tiers[t]->used;
            out->slab_global_page_pool += sl.cls[SLABS_TC(t, 0)].npages;
        }
    }
    out->malloc_fails = sl.mst.malloc_fails;
    pthread_mutex_unlock(&sl.lock);
}

void
slabs_tier_usage(unsigned tier_id, uint64_t *limit, uint64_t *used)
{
    struct tier *t = slabs_tier(tier_id);

    pthread_mutex_lock(&sl.lock);
    *limit = t != NULL ? t->limit : 0;
    *used = t != NULL ? t->used : 0;
    pthread_mutex_unlock(&sl.lock);
}

int
slabs_set_memlimit(size_t bytes)
{
    struct tier *t = sl.tiers[sl.mtier];
    struct slab_class *pool = &sl.cls[SLABS_TC(sl.mtier, 0)];
    int rc = 0;

    pthread_mutex_lock(&sl.lock);
    if (!tier_set_limit(t, bytes)) {
        rc = -1;
    }
    /* Pool pages over the new limit go back to the tier at once; pages
     * in classes come back through the mover (automove). */
    while (rc == 0 && t->used > bytes && pool->npages > 0) {
        give_back(t, pop_page(pool));
    }
    pthread_mutex_unlock(&sl.lock);
    return rc;
}

/* ---- page mover ------------------------------------------------------- */

/* A class of tier t other than dst with a page to spare, round robin. */
static int
pick_any(unsigned t, int dst)
{
    for (unsigned n = 0; n < sl.largest; n++) {
        int id = (int)(sl.pick_cursor++ % sl.largest) + 1;

        if (id != dst && sl.cls[SLABS_TC(t, id)].npages > 1) {
            return id;
        }
    }
    return -1;
}

/* A page donor in tier t for a starving class: one with spare pages, or
 * whose free chunks add up to a page (its items fit in the rest).  Lock
 * held. */
static int
pick_donor(unsigned t, int dst)
{
    for (unsigned id = 1; id <= sl.largest; id++) {
        struct slab_class *c = &sl.cls[SLABS_TC(t, id)];

        if ((int)id != dst && c->npages > 0 &&
            (c->npages > 1 || c->sl_curr >= c->perslab)) {
            return (int)id;
        }
    }
    return -1;
}

/* Validate and queue a move between classes src and dst of tier t.  Lock
 * held. */
static enum cache_status
reassign_locked(unsigned t, int src, int dst, bool donor)
{
    if (!sl.mover_on) {
        return CACHE_DISABLED;
    }
    if (sl.pending) {
        return CACHE_BUSY;
    }
    if (src == dst) {
        return CACHE_SAME;
    }
    if (src == -1) {
        src = donor ? pick_donor(t, dst) : pick_any(t, dst);
    }
    if (src < 0 || src > (int)sl.largest || dst < 0 ||
        dst > (int)sl.largest) {
        return CACHE_BADCLASS;
    }
    if (sl.cls[SLABS_TC(t, src)].npages < (donor ? 1u : 2u)) {
        return CACHE_NOSPARE;
    }
    sl.pending = true;
    sl.src = (int)SLABS_TC(t, src);
    sl.dst = (int)SLABS_TC(t, dst);
    pthread_cond_signal(&sl.cond);
    return CACHE_OK;
}

static enum cache_status
reassign_in(unsigned t, int src, int dst)
{
    enum cache_status st;

    pthread_mutex_lock(&sl.lock);
    st = reassign_locked(t, src, dst, false);
    pthread_mutex_unlock(&sl.lock);
    return st;
}

enum cache_status
slabs_reassign(int src, int dst)
{
    return reassign_in(sl.home, src, dst);
}

/* Start a move: take the page out of the free list.  Lock held. */
static char *
move_begin(struct slab_class *c)
{
    char *page = c->pages[0];

    sl.move_start = page;
    sl.move_end = page + (size_t)c->perslab * c->size;
    for (unsigned i = 0; i < c->perslab; i++) {
        struct item *it = chunk_item(c, page, i);

        if (item_flags(it) & ITEM_SLABBED) {
            unlink_free(c, it);
        }
    }
    return page;
}

/* Copy the key of an item whose owner may still be writing it (no item
 * lock yet): byte-wise relaxed loads, so the race is a declared one.
 * lru_evacuate() checks the copy under the item lock before trusting it. */
static size_t
copy_key_racy(const struct item *it, char *key, size_t room)
{
    size_t nkey = __atomic_load_n(&it->nkey, __ATOMIC_RELAXED);
    const char *src = item_key(it);

    /* A chunk being set up may hold any nkey: stay inside it. */
    if (nkey > room) {
        nkey = room;
    }
    for (size_t i = 0; i < nkey; i++) {
        key[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
    }
    return nkey;
}

/*
 * Hand one live chunk to the LRU side.  Returns 0 if it is free now or
 * will be, 1 if busy.  Lock not held on entry or exit.
 */
static int
evacuate_chunk(struct item *chunk, size_t size, bool force)
{
    struct item *it = chunk;
    bool is_chunk;
    char key[256];
    size_t nkey;

    pthread_mutex_lock(&sl.lock);
    if (item_flags(chunk) & ITEM_SLABBED) {
        pthread_mutex_unlock(&sl.lock);
        return 0;
    }
    is_chunk = (item_flags(chunk) & ITEM_CHUNK) != 0;
    if (is_chunk) {
        it = __atomic_load_n(&((struct item_chunk *)chunk)->head,
                             __ATOMIC_ACQUIRE);
    }
    if (it == NULL || item_ref_incr(it) == 1) {
        /* Being set up or being freed right now. */
        if (it != NULL) {
            item_ref_decr(it);
        }
        pthread_mutex_unlock(&sl.lock);
        return 1;
    }
    /* A head item is set up before its chunks point at it; only a
     * chunk of this page can be half-written. */
    nkey = copy_key_racy(it, key, is_chunk ? 255
                         : size - sizeof(struct item) - sizeof(uint64_t));
    pthread_mutex_unlock(&sl.lock);
    return lru_evacuate(it, key, nkey,
                        !is_chunk && !(item_flags(it) & ITEM_CHUNKED), force,
                        &sl.mst);
}

/* Walk the page until every chunk is free. */
static void
move_drain(struct slab_class *c, char *page)
{
    useconds_t backoff = 100;

    for (unsigned pass = 0;; pass++) {
        unsigned busy = 0, live = 0;

        for (unsigned i = 0; i < c->perslab; i++) {
            struct item *it = chunk_item(c, page, i);

            pthread_mutex_lock(&sl.lock);
            live += !(item_flags(it) & ITEM_SLABBED);
            pthread_mutex_unlock(&sl.lock);
            busy += (unsigned)evacuate_chunk(it, c->size - sl.prefix,
                                             pass >= FORCE_PASS);
        }
        if (live == 0) {
            return;
        }
        pthread_mutex_lock(&sl.lock);
        sl.mst.slab_reassign_busy_items += busy;
        pthread_mutex_unlock(&sl.lock);
        usleep(backoff);
        backoff = backoff < 100000 ? backoff * 2 : backoff;
    }
}

/* Finish: give the empty page to tier class dst.  Lock held. */
static void
move_end(struct slab_class *c, char *page, unsigned dst)
{
    struct tier *t = tier_of(dst);
    bool to_pool = SLABS_TC_ID(dst) == 0;

    c->pages[0] = pop_page(c);
    sl.move_start = sl.move_end = NULL;
    if (t->id == TIER_PMEM && to_pool) {
        persist_page_set(page, 0);
    }
    if (to_pool && t->used > t->limit) {
        give_back(t, page);
    } else {
        add_page(&sl.cls[dst], page);
        if (!to_pool) {
            carve(dst, page);
        }
    }
    sl.mst.slabs_moved++;
}

static void
move_one(unsigned src, unsigned dst)
{
    struct slab_class *c = &sl.cls[src];
    char *page;

    if (SLABS_TC_ID(src) == 0) {
        page = c->pages[0];
        move_end(c, page, dst);
        return;
    }
    sl.mst.slab_reassign_running = 1;
    page = move_begin(c);
    pthread_mutex_unlock(&sl.lock);
    move_drain(c, page);
    pthread_mutex_lock(&sl.lock);
    move_end(c, page, dst);
    sl.mst.slab_reassign_running = 0;
}

static void *
mover_thread(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&sl.lock);
    while (!sl.mover_stop) {
        if (!sl.pending) {
            pthread_cond_wait(&sl.cond, &sl.lock);
            continue;
        }
        if (sl.cls[sl.src].npages > 0) {
            move_one((unsigned)sl.src, (unsigned)sl.dst);
        }
        sl.pending = false;
        pthread_cond_broadcast(&sl.done);
    }
    pthread_mutex_unlock(&sl.lock);
    return NULL;
}

int
slabs_mover_start(void)
{
    pthread_mutex_lock(&sl.lock);
    sl.mover_stop = false;
    if (pthread_create(&sl.mover, NULL, mover_thread, NULL) != 0) {
        pthread_mutex_unlock(&sl.lock);
        return -1;
    }
    pthread_setname_np(sl.mover, "mc-slabmaint");
    sl.mover_on = true;
    pthread_mutex_unlock(&sl.lock);
    return 0;
}

void
slabs_mover_stop(void)
{
    pthread_mutex_lock(&sl.lock);
    if (!sl.mover_on) {
        pthread_mutex_unlock(&sl.lock);
        return;
    }
    sl.mover_stop = true;
    sl.mover_on = false;
    pthread_cond_broadcast(&sl.cond);
    pthread_mutex_unlock(&sl.lock);
    pthread_join(sl.mover, NULL);
}

void
slabs_mover_wait(void)
{
    pthread_mutex_lock(&sl.lock);
    while (sl.pending && sl.mover_on) {
        pthread_cond_wait(&sl.done, &sl.lock);
    }
    pthread_mutex_unlock(&sl.lock);
}

/* Wait for the move in progress to finish, until the deadline.  Lock
 * held. */
static bool
wait_idle(const struct timespec *deadline)
{
    while (sl.pending && sl.mover_on) {
        if (pthread_cond_timedwait(&sl.done, &sl.lock, deadline) != 0) {
            return false;
        }
    }
    return true;
}

bool
slabs_steal_page(unsigned tc, unsigned ms)
{
    struct timespec dl;
    unsigned before;
    bool got = false;

    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += (time_t)(ms / 1000);
    dl.tv_nsec += (long)(ms % 1000) * 1000000;
    if (dl.tv_nsec >= 1000000000) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&sl.lock);
    if (!wait_idle(&dl)) {
        pthread_mutex_unlock(&sl.lock);
        return false;
    }
    before = sl.cls[tc].npages;
    if (reassign_locked(SLABS_TC_TIER(tc), -1, (int)SLABS_TC_ID(tc),
                        true) == CACHE_OK) {
        got = wait_idle(&dl) && sl.cls[tc].npages > before;
    }
    pthread_mutex_unlock(&sl.lock);
    return got;
}

void
slabs_mover_stats(struct cache_stats *out)
{
    pthread_mutex_lock(&sl.lock);
    out->slab_reassign_rescues = sl.mst.slab_reassign_rescues;
    out->slab_reassign_chunk_rescues = sl.mst.slab_reassign_chunk_rescues;
    out->slab_reassign_inline_reclaim = sl.mst.slab_reassign_inline_reclaim;
    out->slab_reassign_busy_items = sl.mst.slab_reassign_busy_items;
    out->slab_reassign_busy_deletes = sl.mst.slab_reassign_busy_deletes;
    out->slab_reassign_busy_nomem = sl.mst.slab_reassign_busy_nomem;
    out->slab_reassign_running = sl.mst.slab_reassign_running;
    out->slabs_moved = sl.mst.slabs_moved;
    pthread_mutex_unlock(&sl.lock);
}

void
slabs_stats_reset(void)
{
    uint64_t running;

    pthread_mutex_lock(&sl.lock);
    running = sl.mst.slab_reassign_running;
    memset(&sl.mst, 0, sizeof(sl.mst));
    sl.mst.slab_reassign_running = running;
    pthread_mutex_unlock(&sl.lock);
}

/* ---- automove --------------------------------------------------------- */

void
slabs_note_eviction(unsigned tc)
{
    if (sl.opts->slab_automove == 2) {
        reassign_in(SLABS_TC_TIER(tc), -1, (int)SLABS_TC_ID(tc));
    }
}

/* Shift this tick's evictions into the class's window (a bit per tick,
 * so windows longer than 64 ticks are clamped to 64). */
static bool
window_update(unsigned tc, const struct cache_item_stats *is)
{
    unsigned w = sl.opts->automove_window;
    uint64_t mask = w >= 64 || w == 0 ? ~(uint64_t)0
                                      : ((uint64_t)1 << w) - 1;
    uint64_t bits = sl.win.window_evicts[tc];

    bits = (bits << 1) | (is->evicted != sl.win.evicted[tc]);
    sl.win.evicted[tc] = is->evicted;
    sl.win.window_evicts[tc] = bits & mask;
    return (bits & mask) != 0;
}

static bool
class_has_spare_free(unsigned tc)
{
    struct slab_class *c = &sl.cls[tc];
    struct tier *t = tier_of(tc);
    bool spare;

    pthread_mutex_lock(&sl.lock);
    spare = c->npages > 2 && c->sl_curr > c->perslab * 5 / 2 &&
            t->used + sl.page_size > t->limit;
    pthread_mutex_unlock(&sl.lock);
    return spare;
}

/* After cache_memlimit lowered the limit: give the tier back a page of
 * the class with the most, one per tick.  True if a move was queued. */
static bool
shrink_to_limit(unsigned t)
{
    unsigned best = 0, most = 1;
    bool over;

    pthread_mutex_lock(&sl.lock);
    over = sl.tiers[t]->used > sl.tiers[t]->limit;
    for (unsigned id = 1; over && id <= sl.largest; id++) {
        if (sl.cls[SLABS_TC(t, id)].npages > most) {
            most = sl.cls[SLABS_TC(t, id)].npages;
            best = id;
        }
    }
    pthread_mutex_unlock(&sl.lock);
    return best != 0 && reassign_in(t, (int)best, 0) == CACHE_OK;
}

/* The windowed automove decision for one tier; true if a move was
 * queued. */
static bool
automove_tier(unsigned t)
{
    int youngest = -1, oldest = -1;
    uint64_t young_age = UINT64_MAX, old_age = 0;

    if (shrink_to_limit(t)) {
        return true;
    }
    if (sl.opts->slab_automove != 1) {
        return false;
    }
    for (unsigned id = 1; id <= sl.largest; id++) {
        unsigned tc = SLABS_TC(t, id);
        struct cache_item_stats is;
        bool evicting;

        lru_item_stats(tc, &is);
        evicting = window_update(tc, &is);
        if (!evicting && class_has_spare_free(tc)) {
            return reassign_in(t, (int)id, 0) == CACHE_OK;
        }
        if (evicting && is.age < young_age) {
            young_age = is.age;
            youngest = (int)id;
        }
        if (slabs_npages(tc) > 2 && is.age > old_age) {
            old_age = is.age;
            oldest = (int)id;
        }
    }
    return youngest > 0 && oldest > 0 && youngest != oldest &&
           (double)young_age < (double)old_age * sl.opts->automove_ratio &&
           reassign_in(t, oldest, youngest) == CACHE_OK;
}

void
slabs_automove_tick(void)
{
    if (!sl.mover_on) {
        return;
    }
    for (unsigned t = 0; t < NTIERS; t++) {
        if (sl.tiers[t] != NULL && automove_tier(t)) {
            return;
        }
    }
}
