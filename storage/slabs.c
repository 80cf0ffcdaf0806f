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
 */
#include "storage/slabs.h"
#include "storage/item.h"
#include "storage/lru.h"
#include "storage/persist.h"
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
    uint64_t     evicted[CACHE_MAX_CLASSES];    /* at the last tick */
    uint64_t     window_evicts[CACHE_MAX_CLASSES];
    unsigned     ticks;
};

static struct {
    const struct cache_options *opts;
    pthread_mutex_t    lock;
    struct slab_class  cls[CACHE_MAX_CLASSES];
    unsigned           largest;
    size_t             page_size;
    size_t             chunk_max;
    size_t             prefix;          /* bytes before each item */
    struct tier       *tier;
    uint64_t           pages_total;     /* pages taken from the tier */
    /* page mover, under lock */
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

static void
set_class(unsigned id, size_t size)
{
    sl.cls[id].size = size;
    sl.cls[id].perslab = (unsigned)(sl.page_size / size);
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
slabs_init(const struct cache_options *opts, struct tier *tier)
{
    unsigned n;

    memset(&sl, 0, sizeof(sl));
    sl.opts = opts;
    sl.tier = tier;
    sl.page_size = opts->page_size;
    sl.chunk_max = opts->slab_chunk_max;
    if (sl.chunk_max == 0 || sl.chunk_max > sl.page_size ||
        opts->factor <= 1.0) {
        fprintf(stderr, "slabs: bad chunk max or factor\n");
        return -1;
    }
    if (tier->id == TIER_PMEM && pmem_init(tier) != 0) {
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
    for (unsigned i = 0; i < CACHE_MAX_CLASSES; i++) {
        for (unsigned p = 0; p < sl.cls[i].npages; p++) {
            tier_page_free(sl.tier, sl.cls[i].pages[p]);
        }
        free(sl.cls[i].pages);
    }
    if (sl.prefix != 0) {
        persist_destroy();
    }
    tier_destroy(&sl.tier);
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
slabs_tier(void)
{
    return sl.tier;
}

/* The item in chunk i of a page of class c. */
static struct item *
chunk_item(const struct slab_class *c, char *page, unsigned i)
{
    return (struct item *)(page + (size_t)i * c->size + sl.prefix);
}

/* ---- pages and chunks: slabs lock held -------------------------------- */

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
carve(unsigned id, char *page)
{
    struct slab_class *c = &sl.cls[id];

    for (unsigned i = 0; i < c->perslab; i++) {
        struct item *it = chunk_item(c, page, i);

        if (sl.prefix != 0) {
            memset(persist_prefix_of(it), 0, sl.prefix);
        }
        it->clsid = (uint8_t)id;
        it->tier = sl.tier->id;
        push_free(c, it);
    }
    if (sl.prefix != 0) {
        /* Every commit word of the new cut is 0 in the file before the
         * page table says how the page is cut. */
        tier_persist(sl.tier, page, sl.page_size);
        persist_page_set(page, id);
    }
}

/* A page for class id from the global pool or the tier. */
static bool
grow(unsigned id)
{
    struct slab_class *pool = &sl.cls[0];
    char *page;

    if (pool->npages > 0) {
        page = pop_page(pool);
    } else {
        page = tier_page_alloc(sl.tier);
        if (page == NULL) {
            return false;
        }
        sl.pages_total++;
    }
    if (add_page(&sl.cls[id], page) != 0) {
        sl.mst.malloc_fails++;
        add_page(pool, page);   /* cannot fail: the slot was just freed */
        return false;
    }
    carve(id, page);
    return true;
}

void *
slabs_alloc(size_t size, unsigned id)
{
    struct slab_class *c = &sl.cls[id];
    struct item *it = NULL;

    if (id == 0 || id > sl.largest) {
        return NULL;
    }
    pthread_mutex_lock(&sl.lock);
    if (c->sl_curr > 0 || grow(id)) {
        it = c->slots;
        unlink_free(c, it);
        c->requested += size;
        it->h_next = NULL;
        item_flags_store(it, 0);
        it->clsid = (uint8_t)id;
        it->tier = sl.tier->id;
        __atomic_store_n(&it->refcount, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&sl.lock);
    return it;
}

void
slabs_free(void *ptr, size_t size, unsigned id)
{
    struct slab_class *c = &sl.cls[id];
    struct item *it = ptr;

    pthread_mutex_lock(&sl.lock);
    c->requested -= size;
    it->clsid = (uint8_t)id;
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
    return id >= 1 && id <= sl.largest ? sl.cls[id].perslab : 0;
}

void *
slabs_chunk(unsigned id, void *page, unsigned i)
{
    return chunk_item(&sl.cls[id], page, i);
}

int
slabs_recover_page(unsigned id, void *page,
                   size_t (*keep)(void *chunk, void *ctx), void *ctx)
{
    struct slab_class *c = &sl.cls[id];
    int rc = -1;

    pthread_mutex_lock(&sl.lock);
    if (id >= 1 && id <= sl.largest && add_page(c, page) == 0) {
        sl.pages_total++;
        for (unsigned i = 0; i < c->perslab; i++) {
            struct item *it = chunk_item(c, page, i);
            size_t used = keep(it, ctx);

            if (used != 0) {
                c->requested += used;
            } else {
                it->clsid = (uint8_t)id;
                it->tier = sl.tier->id;
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
slabs_class_stats(unsigned id, struct cache_slab_stats *out)
{
    struct slab_class *c = &sl.cls[id];

    memset(out, 0, sizeof(*out));
    if (id == 0 || id > sl.largest) {
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
slabs_npages(unsigned id)
{
    return __atomic_load_n(&sl.cls[id].npages, __ATOMIC_RELAXED);
}

uint64_t
slabs_requested(unsigned id)
{
    uint64_t r;

    pthread_mutex_lock(&sl.lock);
    r = sl.cls[id].requested;
    pthread_mutex_unlock(&sl.lock);
    return r;
}

void
slabs_totals(struct cache_stats *out)
{
    pthread_mutex_lock(&sl.lock);
    out->limit_maxbytes = sl.tier->limit;
    out->total_malloced = sl.tier->used;
    out->slab_global_page_pool = sl.cls[0].npages;
    out->malloc_fails = sl.mst.malloc_fails;
    pthread_mutex_unlock(&sl.lock);
}

int
slabs_set_memlimit(size_t bytes)
{
    int rc = 0;

    pthread_mutex_lock(&sl.lock);
    if (!tier_set_limit(sl.tier, bytes)) {
        rc = -1;
    }
    /* Pool pages over the new limit go back to the tier at once; pages
     * in classes come back through the mover (automove). */
    while (rc == 0 && sl.tier->used > bytes && sl.cls[0].npages > 0) {
        tier_page_free(sl.tier, pop_page(&sl.cls[0]));
        sl.pages_total--;
    }
    pthread_mutex_unlock(&sl.lock);
    return rc;
}

/* ---- page mover ------------------------------------------------------- */

/* A class other than dst with a page to spare, round robin. */
static int
pick_any(int dst)
{
    for (unsigned n = 0; n < sl.largest; n++) {
        int id = (int)(sl.pick_cursor++ % sl.largest) + 1;

        if (id != dst && sl.cls[id].npages > 1) {
            return id;
        }
    }
    return -1;
}

/* A page donor for a starving class: one with spare pages, or whose free
 * chunks add up to a page (its items fit in the rest).  Lock held. */
static int
pick_donor(int dst)
{
    for (unsigned id = 1; id <= sl.largest; id++) {
        struct slab_class *c = &sl.cls[id];

        if ((int)id != dst && c->npages > 0 &&
            (c->npages > 1 || c->sl_curr >= c->perslab)) {
            return (int)id;
        }
    }
    return -1;
}

/* Validate and queue a move.  Lock held. */
static enum cache_status
reassign_locked(int src, int dst, bool donor)
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
        src = donor ? pick_donor(dst) : pick_any(dst);
    }
    if (src < 0 || src > (int)sl.largest || dst < 0 ||
        dst > (int)sl.largest) {
        return CACHE_BADCLASS;
    }
    if (sl.cls[src].npages < (donor ? 1u : 2u)) {
        return CACHE_NOSPARE;
    }
    sl.pending = true;
    sl.src = src;
    sl.dst = dst;
    pthread_cond_signal(&sl.cond);
    return CACHE_OK;
}

enum cache_status
slabs_reassign(int src, int dst)
{
    enum cache_status st;

    pthread_mutex_lock(&sl.lock);
    st = reassign_locked(src, dst, false);
    pthread_mutex_unlock(&sl.lock);
    return st;
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

/* Finish: give the empty page to dst.  Lock held. */
static void
move_end(struct slab_class *c, char *page, int dst)
{
    c->pages[0] = pop_page(c);
    sl.move_start = sl.move_end = NULL;
    if (sl.prefix != 0 && dst == 0) {
        persist_page_set(page, 0);
    }
    if (dst == 0 && sl.tier->used > sl.tier->limit) {
        tier_page_free(sl.tier, page);
        sl.pages_total--;
    } else {
        add_page(&sl.cls[dst], page);
        if (dst != 0) {
            carve((unsigned)dst, page);
        }
    }
    sl.mst.slabs_moved++;
}

static void
move_one(int src, int dst)
{
    struct slab_class *c = &sl.cls[src];
    char *page;

    if (src == 0) {
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
            move_one(sl.src, sl.dst);
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
slabs_steal_page(unsigned id, unsigned ms)
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
    before = sl.cls[id].npages;
    if (reassign_locked(-1, (int)id, true) == CACHE_OK) {
        got = wait_idle(&dl) && sl.cls[id].npages > before;
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
slabs_note_eviction(unsigned id)
{
    if (sl.opts->slab_automove == 2) {
        slabs_reassign(-1, (int)id);
    }
}

/* Shift this tick's evictions into the class's window (a bit per tick,
 * so windows longer than 64 ticks are clamped to 64). */
static bool
window_update(unsigned id, const struct cache_item_stats *is)
{
    unsigned w = sl.opts->automove_window;
    uint64_t mask = w >= 64 || w == 0 ? ~(uint64_t)0
                                      : ((uint64_t)1 << w) - 1;
    uint64_t bits = sl.win.window_evicts[id];

    bits = (bits << 1) | (is->evicted != sl.win.evicted[id]);
    sl.win.evicted[id] = is->evicted;
    sl.win.window_evicts[id] = bits & mask;
    return (bits & mask) != 0;
}

static bool
class_has_spare_free(unsigned id)
{
    struct slab_class *c = &sl.cls[id];
    bool spare;

    pthread_mutex_lock(&sl.lock);
    spare = c->npages > 2 && c->sl_curr > c->perslab * 5 / 2 &&
            sl.tier->used + sl.page_size > sl.tier->limit;
    pthread_mutex_unlock(&sl.lock);
    return spare;
}

/* After cache_memlimit lowered the limit: give the tier back a page of
 * the class with the most, one per tick.  True if a move was queued. */
static bool
shrink_to_limit(void)
{
    unsigned best = 0, most = 1;
    bool over;

    pthread_mutex_lock(&sl.lock);
    over = sl.tier->used > sl.tier->limit;
    for (unsigned id = 1; over && id <= sl.largest; id++) {
        if (sl.cls[id].npages > most) {
            most = sl.cls[id].npages;
            best = id;
        }
    }
    pthread_mutex_unlock(&sl.lock);
    return best != 0 && slabs_reassign((int)best, 0) == CACHE_OK;
}

void
slabs_automove_tick(void)
{
    int youngest = -1, oldest = -1;
    uint64_t young_age = UINT64_MAX, old_age = 0;

    if (!sl.mover_on || shrink_to_limit() || sl.opts->slab_automove != 1) {
        return;
    }
    for (unsigned id = 1; id <= sl.largest; id++) {
        struct cache_item_stats is;
        bool evicting;

        lru_item_stats(id, &is);
        evicting = window_update(id, &is);
        if (!evicting && class_has_spare_free(id)) {
            slabs_reassign((int)id, 0);
            return;
        }
        if (evicting && is.age < young_age) {
            young_age = is.age;
            youngest = (int)id;
        }
        if (slabs_npages(id) > 2 && is.age > old_age) {
            old_age = is.age;
            oldest = (int)id;
        }
    }
    if (youngest > 0 && oldest > 0 && youngest != oldest &&
        (double)young_age < (double)old_age * sl.opts->automove_ratio) {
        slabs_reassign(oldest, youngest);
    }
}
