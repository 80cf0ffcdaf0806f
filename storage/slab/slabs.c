/*
 * slabs.c: size classes, pages and free lists (slabs.h); page moves are
 * in slabs_move.c.
 *
 * -m is respected exactly: at most limit / page_size pages are ever taken
 * from the tier.  memcached instead lets every class take its first page
 * past the limit (up to 63 MiB over -m); here a class that runs out of
 * memory with nothing to evict has the page mover bring it a page from
 * another class at once (slabs_steal_page()).
 *
 * With two tiers, state is kept per tier class (SLABS_TC): each tier has
 * its own classes, pool and limit, and a page only ever moves within its
 * tier.
 *
 * Locking: everything below is under the slabs lock, except the npages
 * counts, which are stored with relaxed atomics for racy readers.
 */
#include "storage/slab/slabs.h"
#include "storage/base/locks.h"
#include "storage/base/quiesce.h"
#include "storage/slab/chunkid.h"
#include "storage/slab/slabs_priv.h"
#include "storage/tier/pagetab.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct slabs_state sl;

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
    for (unsigned t = 0; t < SLABS_NTIERS; t++) {
        sl.cls[SLABS_TC(t, id)].size = size;
        sl.cls[SLABS_TC(t, id)].perslab = (unsigned)(sl.page_size / size);
    }
}

/* The tier of a tier class, and the page pool of that tier. */
struct tier *
slabs_tier_of(unsigned tc)
{
    return sl.tiers[SLABS_TC_TIER(tc)];
}

static struct slab_class *
pool_of(unsigned tc)
{
    return &sl.cls[SLABS_TC(SLABS_TC_TIER(tc), 0)];
}

/* The smallest chunk that holds a prefix and an item header with room to
 * spare (8 bytes of key and value). */
static size_t
chunk_min(void)
{
    return sl.prefix + sizeof(struct slabs_chunk) + 8;
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
        if (end == p || v < chunk_min() || v >= sl.chunk_max ||
            (id > 0 && align8(v) <= sl.cls[id].size)) {
            break;
        }
        set_class(++id, align8(v));
        p = *end == '-' ? end + 1 : end;
    }
    return id;
}

static unsigned
table_from_factor(double factor, unsigned min)
{
    unsigned size = (unsigned)sizeof(struct slabs_chunk) + min;
    unsigned id = 0;

    while (id < CACHE_MAX_CLASSES - 2 &&
           size < (double)sl.chunk_max / factor) {
        size = (unsigned)align8(size);
        set_class(++id, size);
        size = (unsigned)(size * factor);
    }
    return id;
}

static bool
tiers_ok(struct tier *dram, struct tier *pmem)
{
    if ((dram == NULL && pmem == NULL) ||
        (dram != NULL && dram->id != TIER_DRAM) ||
        (pmem != NULL && pmem->id != TIER_PMEM)) {
        fprintf(stderr, "slabs: no tier, or a tier in the wrong place\n");
        return false;
    }
    return true;
}

static void
print_classes(void)
{
    for (unsigned i = 1; i <= sl.largest; i++) {
        fprintf(stderr, "slab class %3u: chunk size %9zu perslab %7u\n",
                i, sl.cls[i].size, sl.cls[i].perslab);
    }
}

int
slabs_init(const struct cache_options *opts, struct tier *dram,
           struct tier *pmem, size_t prefix)
{
    struct tcache *caches = atomic_load(&sl.caches);
    unsigned n;

    memset(&sl, 0, sizeof(sl));
    atomic_store(&sl.caches, caches);       /* emptied by slabs_destroy() */
    if (!tiers_ok(dram, pmem)) {
        return -1;
    }
    sl.tiers[TIER_DRAM] = dram;
    sl.tiers[TIER_PMEM] = pmem;
    sl.mtier = dram != NULL ? TIER_DRAM : TIER_PMEM;
    sl.page_size = opts->page_size;
    sl.chunk_max = opts->slab_chunk_max;
    sl.prefix = prefix;
    if (sl.chunk_max == 0 || sl.chunk_max > sl.page_size ||
        opts->factor <= 1.0) {
        fprintf(stderr, "slabs: bad chunk max or factor\n");
        return -1;
    }
    n = opts->slab_sizes != NULL ? table_from_list(opts->slab_sizes)
                                 : table_from_factor(opts->factor,
                                                     opts->chunk_min);
    sl.largest = n + 1;
    set_class(sl.largest, sl.chunk_max);
    if (sl.cls[1].size < chunk_min()) {
        /* A chunk must hold the prefix and a header, or cutting it would
         * write into the next one. */
        fprintf(stderr, "slabs: chunks of %zu bytes cannot hold an item in "
                "the memory file\n", sl.cls[1].size);
        return -1;
    }
    if (chunkid_init(sl.page_size, sl.cls[1].perslab) != 0) {
        fprintf(stderr, "slabs: cannot name chunks of %zu-byte pages\n",
                sl.page_size);
        return -1;
    }
    locks_mutex_init(&sl.lock);
    pthread_cond_init(&sl.cond, NULL);
    pthread_cond_init(&sl.done, NULL);
    if (opts->verbose > 1) {
        print_classes();
    }
    return 0;
}

void
slabs_destroy(void)
{
    struct tcache *caches;

    for (unsigned tc = 0; tc < SLABS_TC_MAX; tc++) {
        for (unsigned p = 0; p < sl.cls[tc].npages; p++) {
            tier_page_free(slabs_tier_of(tc), sl.cls[tc].pages[p]);
        }
        free(sl.cls[tc].pages);
    }
    for (unsigned t = 0; t < SLABS_NTIERS; t++) {
        tier_destroy(&sl.tiers[t]);
    }
    chunkid_destroy();
    pthread_mutex_destroy(&sl.lock);
    pthread_cond_destroy(&sl.cond);
    pthread_cond_destroy(&sl.done);
    caches = atomic_load(&sl.caches);
    memset(&sl, 0, sizeof(sl));
    /* Threads' caches outlive the allocator (a thread keeps its own): its
     * pages are gone, so they are emptied. */
    for (struct tcache *t = caches; t != NULL; t = t->next) {
        memset(t->head, 0, sizeof(t->head));
        memset(t->n, 0, sizeof(t->n));
        memset(t->requested, 0, sizeof(t->requested));
    }
    atomic_store(&sl.caches, caches);
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
    return tier_id < SLABS_NTIERS ? sl.tiers[tier_id] : NULL;
}

/* The header of chunk i of a page of class c (past the prefix). */
struct slabs_chunk *
slabs_chunk_at(const struct slab_class *c, char *page, unsigned i)
{
    return (struct slabs_chunk *)(page + (size_t)i * c->size + sl.prefix);
}

uint16_t
slabs_chunk_flags(const struct slabs_chunk *ch)
{
    return __atomic_load_n(&ch->flags, __ATOMIC_RELAXED);
}

static void
set_chunk_flags(struct slabs_chunk *ch, uint16_t f)
{
    __atomic_store_n(&ch->flags, f, __ATOMIC_RELAXED);
}

/* ---- pages and chunks: slabs lock held -------------------------------- */

/* A page off every list goes back to its tier while serving: a prefetch
 * walk (prefetch.h) may still be reading an item header in it. */
void
slabs_give_back(struct tier *t, char *page)
{
    chunkid_page_drop(page);
    quiesce_wait();
    tier_page_free(t, page);
}

int
slabs_add_page(struct slab_class *c, char *page)
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

/* Take the last page off a class's list. */
char *
slabs_pop_page(struct slab_class *c)
{
    __atomic_store_n(&c->npages, c->npages - 1, __ATOMIC_RELAXED);
    return c->pages[c->npages];
}

void
slabs_push_free(struct slab_class *c, struct slabs_chunk *ch)
{
    set_chunk_flags(ch, SLABS_FREE);
    ch->refcount = 0;
    ch->prev = NULL;
    ch->next = c->slots;
    if (c->slots != NULL) {
        c->slots->prev = ch;
    }
    c->slots = ch;
    c->sl_curr++;
}

void
slabs_unlink_free(struct slab_class *c, struct slabs_chunk *ch)
{
    if (ch->prev != NULL) {
        ch->prev->next = ch->next;
    } else {
        c->slots = ch->next;
    }
    if (ch->next != NULL) {
        ch->next->prev = ch->prev;
    }
    ch->next = ch->prev = NULL;
    c->sl_curr--;
}

/* Name the page's chunks as class c cuts them (chunkid.h); -1 when no
 * page number is left. */
int
slabs_name_page(const struct slab_class *c, char *page)
{
    return chunkid_page_set(page, page + sl.prefix, (uint32_t)c->size,
                            c->perslab);
}

/* Cut a page into free chunks of tier class tc.  In the memory file every
 * prefix of the new cut is zero and durable before the page table says
 * how the page is cut.  The page has a number already (slabs_name_page()):
 * it keeps it. */
void
slabs_cut(unsigned tc, char *page)
{
    struct slab_class *c = &sl.cls[tc];

    slabs_name_page(c, page);
    for (unsigned i = 0; i < c->perslab; i++) {
        struct slabs_chunk *ch = slabs_chunk_at(c, page, i);

        memset((char *)ch - sl.prefix, 0, sl.prefix);
        ch->clsid = (uint8_t)SLABS_TC_ID(tc);
        ch->tier = (uint8_t)SLABS_TC_TIER(tc);
        slabs_push_free(c, ch);
    }
    if (SLABS_TC_TIER(tc) == TIER_PMEM) {
        tier_persist(slabs_tier_of(tc), page, sl.page_size);
        pagetab_set(page, SLABS_TC_ID(tc));
    }
}

/* A page for tier class tc from its tier's pool or the tier.  A class
 * with no page gets one even past the tier's limit where the tier can
 * grow, as memcached gives a class its first page past -m: a small
 * value after the large ones filled the memory is stored, not refused
 * (without the page mover, nothing else could make room for it). */
static bool
grow(unsigned tc)
{
    struct slab_class *pool = pool_of(tc);
    bool pooled = pool->npages > 0;
    char *page;

    if (pooled) {
        page = slabs_pop_page(pool);
    } else {
        page = tier_page_alloc(slabs_tier_of(tc));
        if (page == NULL && sl.cls[tc].npages == 0) {
            page = tier_page_alloc_past(slabs_tier_of(tc));
        }
        if (page == NULL) {
            return false;
        }
    }
    if (slabs_name_page(&sl.cls[tc], page) != 0 ||
        slabs_add_page(&sl.cls[tc], page) != 0) {
        sl.st.malloc_fails++;
        if (pooled) {
            slabs_add_page(pool, page);     /* its slot was just freed */
        } else {
            slabs_give_back(slabs_tier_of(tc), page);
        }
        return false;
    }
    slabs_cut(tc, page);
    return true;
}

/* Hand a free chunk out: off its list (or cache) already. */
static void
hand_out(struct slabs_chunk *ch, unsigned tc)
{
    ch->next = ch->prev = NULL;
    ch->hint = NULL;
    set_chunk_flags(ch, 0);
    ch->clsid = (uint8_t)SLABS_TC_ID(tc);
    ch->tier = (uint8_t)SLABS_TC_TIER(tc);
    __atomic_store_n(&ch->refcount, 1, __ATOMIC_RELEASE);
}

static void *
alloc(size_t size, unsigned tc, bool may_grow)
{
    struct slab_class *c = &sl.cls[tc];
    struct slabs_chunk *ch = NULL;

    if (!slabs_tc_valid(tc)) {
        return NULL;
    }
    pthread_mutex_lock(&sl.lock);
    if (c->sl_curr > 0 || (may_grow && grow(tc))) {
        ch = c->slots;
        slabs_unlink_free(c, ch);
        c->requested += size;
        hand_out(ch, tc);
    }
    pthread_mutex_unlock(&sl.lock);
    return ch;
}

void *
slabs_alloc_free(size_t size, unsigned tc)
{
    return alloc(size, tc, false);
}

static void
free_locked(struct slab_class *c, struct slabs_chunk *ch, unsigned tc)
{
    ch->clsid = (uint8_t)SLABS_TC_ID(tc);
    if (slabs_in_move(ch)) {
        /* In the page being moved: free, but not for reuse. */
        set_chunk_flags(ch, SLABS_FREE);
        ch->refcount = 0;
    } else {
        slabs_push_free(c, ch);
    }
}

bool
slabs_in_move(const void *ptr)
{
    const char *p = ptr;

    return p >= __atomic_load_n(&sl.mv.start, __ATOMIC_ACQUIRE) &&
           p < __atomic_load_n(&sl.mv.end, __ATOMIC_ACQUIRE);
}

/* ---- per-thread caches of free chunks ---------------------------------
 *
 * A cache's chunks are free (SLABS_FREE | SLABS_CACHED), off their
 * class's list and linked through ->next.  The owner works on its cache
 * under its own lock, taking the slabs lock only to refill or drain a
 * batch (lock order: cache, then slabs).  The mover publishes the page
 * it moves (sl.mv.start, end) and then takes each cache's lock to purge
 * the page's chunks: a free after that sees the range and goes to the
 * class's list; a free before it is purged; a refill takes only listed
 * chunks, which the page's no longer are. */

static _Thread_local struct tcache *mine;

/*
 * Small chunks only: 32 chunks of a large class would hold pages of the
 * limit away from the others.  The memory file's chunks are cached too: a
 * chunk killed in a flush group is freed only once the group has synced
 * (persist_kill()), so no cache hands out a chunk whose death is not yet
 * durable.
 */
static bool
cacheable(unsigned tc)
{
    return sl.cls[tc].size <= SLABS_TCACHE_CHUNK_MAX;
}

/* The owner's count, read racily by the stats (slabs_class_stats()). */
static void
set_count(struct tcache *t, unsigned tc, unsigned n)
{
    __atomic_store_n(&t->n[tc], (uint16_t)n, __ATOMIC_RELAXED);
}

static void
cache_push(struct tcache *t, unsigned tc, struct slabs_chunk *ch)
{
    set_chunk_flags(ch, SLABS_FREE | SLABS_CACHED);
    ch->refcount = 0;
    ch->prev = NULL;
    ch->next = t->head[tc];
    t->head[tc] = ch;
    set_count(t, tc, t->n[tc] + 1);
}

static void
add_requested(struct tcache *t, unsigned tc, int64_t d)
{
    __atomic_store_n(&t->requested[tc],
                     __atomic_load_n(&t->requested[tc], __ATOMIC_RELAXED) + d,
                     __ATOMIC_RELAXED);
}

/* Up to a batch of the class's free chunks into the cache (a new page
 * for the class only when it has none free); false if none was had. */
static bool
refill(struct tcache *t, unsigned tc)
{
    struct slab_class *c = &sl.cls[tc];
    unsigned got = 0;

    pthread_mutex_lock(&sl.lock);
    while (got < SLABS_TCACHE_BATCH && (c->sl_curr > 0 ||
                                        (got == 0 && grow(tc)))) {
        struct slabs_chunk *ch = c->slots;

        slabs_unlink_free(c, ch);
        cache_push(t, tc, ch);
        got++;
    }
    pthread_mutex_unlock(&sl.lock);
    return got > 0;
}

/* n chunks from the cache back to their class. */
static void
drain(struct tcache *t, unsigned tc, unsigned n)
{
    struct slab_class *c = &sl.cls[tc];

    if (n == 0) {
        return;
    }
    pthread_mutex_lock(&sl.lock);
    for (unsigned i = 0; i < n && t->head[tc] != NULL; i++) {
        struct slabs_chunk *ch = t->head[tc];

        t->head[tc] = ch->next;
        set_count(t, tc, t->n[tc] - 1);
        free_locked(c, ch, tc);
    }
    pthread_mutex_unlock(&sl.lock);
}

void *
slabs_alloc(size_t size, unsigned tc)
{
    struct tcache *t = mine;
    struct slabs_chunk *ch = NULL;

    if (t == NULL || !slabs_tc_valid(tc) || !cacheable(tc)) {
        return alloc(size, tc, true);
    }
    pthread_mutex_lock(&t->lock);
    if (t->n[tc] > 0 || refill(t, tc)) {
        ch = t->head[tc];
        t->head[tc] = ch->next;
        set_count(t, tc, t->n[tc] - 1);
        add_requested(t, tc, (int64_t)size);
        hand_out(ch, tc);
    }
    pthread_mutex_unlock(&t->lock);
    return ch;
}

void
slabs_free(void *ptr, size_t size, unsigned tc)
{
    struct slab_class *c = &sl.cls[tc];
    struct tcache *t = mine;

    if (t != NULL && cacheable(tc)) {
        pthread_mutex_lock(&t->lock);
        if (!slabs_in_move(ptr)) {
            ((struct slabs_chunk *)ptr)->clsid = (uint8_t)SLABS_TC_ID(tc);
            cache_push(t, tc, ptr);
            add_requested(t, tc, -(int64_t)size);
            if (t->n[tc] > SLABS_TCACHE_MAX) {
                drain(t, tc, SLABS_TCACHE_BATCH);
            }
            pthread_mutex_unlock(&t->lock);
            return;
        }
        pthread_mutex_unlock(&t->lock);
    }
    pthread_mutex_lock(&sl.lock);
    c->requested -= size;
    free_locked(c, ptr, tc);
    pthread_mutex_unlock(&sl.lock);
}

void
slabs_thread_cache(bool on)
{
    struct tcache *t = mine;

    if (on && t == NULL) {
        t = calloc(1, sizeof(*t));
        if (t == NULL) {
            return;             /* no cache: every call takes the lock */
        }
        pthread_mutex_init(&t->lock, NULL);
        t->next = atomic_load(&sl.caches);
        while (!atomic_compare_exchange_weak(&sl.caches, &t->next, t)) {
        }
        mine = t;
    } else if (!on && t != NULL) {
        pthread_mutex_lock(&t->lock);
        for (unsigned tc = 0; tc < SLABS_TC_MAX; tc++) {
            drain(t, tc, t->n[tc]);
        }
        pthread_mutex_lock(&sl.lock);
        for (unsigned tc = 0; tc < SLABS_TC_MAX; tc++) {
            sl.cls[tc].requested += (uint64_t)t->requested[tc];
            __atomic_store_n(&t->requested[tc], 0, __ATOMIC_RELAXED);
        }
        pthread_mutex_unlock(&sl.lock);
        pthread_mutex_unlock(&t->lock);
        /* the struct stays listed, empty, for a later on */
        mine = NULL;
    }
}

void
slabs_tcache_purge(unsigned tc, const char *start, const char *end)
{
    for (struct tcache *t = atomic_load(&sl.caches); t != NULL;
         t = t->next) {
        struct slabs_chunk **pp;

        pthread_mutex_lock(&t->lock);
        for (pp = &t->head[tc]; *pp != NULL;) {
            struct slabs_chunk *ch = *pp;

            if ((char *)ch >= start && (char *)ch < end) {
                *pp = ch->next;
                ch->next = NULL;
                set_count(t, tc, t->n[tc] - 1);
                set_chunk_flags(ch, SLABS_FREE);    /* free, not cached */
            } else {
                pp = &ch->next;
            }
        }
        pthread_mutex_unlock(&t->lock);
    }
}
