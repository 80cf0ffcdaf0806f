/*
 * test_tcache.c: threads' caches of free chunks (slabs_thread_cache()):
 * the memory limit kept to the page while two caching threads allocate
 * at once, every chunk back and counted after they stop, cached chunks
 * counted as free, large classes never cached, and the page mover
 * emptying a page whose free chunks sit in a thread's cache.
 */
#include "storage/slab/slabs.h"
#include "storage/slab/slabs_image.h"
#include "storage/slab/slabs_move.h"
#include "storage/slab/slabs_stats.h"
#include "storage/tier/tier.h"
#include "t/cache_test.h"
#include "t/tap.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MB          ((size_t)1 << 20)
#define PAGES       4

static void
slabs_only(size_t limit)
{
    struct cache_options o;
    struct tier *t;

    test_cache_options(&o);
    o.mem_limit = limit;
    t = tier_dram_create(o.mem_limit, o.page_size, false);
    if (t == NULL || slabs_init(&o, t, NULL, 0) != 0) {
        exit(1);
    }
}

static uint64_t
used_bytes(void)
{
    uint64_t limit, used;

    slabs_tier_usage(TIER_DRAM, &limit, &used);
    return used;
}

struct filler {
    pthread_t t;
    void    **got;
    unsigned  n, cap;
};

/* Allocate from class 1 until refused; keep everything. */
static void *
fill(void *arg)
{
    struct filler *f = arg;
    void *p;

    slabs_thread_cache(true);
    while (f->n < f->cap && (p = slabs_alloc(96, 1)) != NULL) {
        f->got[f->n++] = p;
    }
    return NULL;
}

static void *
give_back(void *arg)
{
    struct filler *f = arg;

    for (unsigned i = 0; i < f->n; i++) {
        slabs_free(f->got[i], 96, 1);
    }
    slabs_thread_cache(false);
    return NULL;
}

static int
cmp_ptr(const void *a, const void *b)
{
    const char *x = *(void *const *)a, *y = *(void *const *)b;

    return x < y ? -1 : x > y;
}

static void
test_limit_two_threads(void)
{
    struct filler f[2];
    struct cache_slab_stats st;
    unsigned per, total = 0, dup = 0;
    void **all;

    slabs_only(PAGES * MB);
    per = slabs_perslab(1);
    for (int i = 0; i < 2; i++) {
        f[i].cap = PAGES * per + 1;
        f[i].n = 0;
        f[i].got = calloc(f[i].cap, sizeof(void *));
        pthread_create(&f[i].t, NULL, fill, &f[i]);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(f[i].t, NULL);
        total += f[i].n;
    }
    is_int(used_bytes(), PAGES * MB, "two caching threads: exactly the "
           "limit's pages taken");
    /* what the other thread still caches when one is refused */
    ok(total <= PAGES * per && total >= PAGES * per - 2 * SLABS_TCACHE_MAX,
       "every chunk of them handed out but what a cache holds");
    all = calloc(total, sizeof(void *));
    memcpy(all, f[0].got, f[0].n * sizeof(void *));
    memcpy(all + f[0].n, f[1].got, f[1].n * sizeof(void *));
    qsort(all, total, sizeof(void *), cmp_ptr);
    for (unsigned i = 1; i < total; i++) {
        dup += all[i] == all[i - 1];
    }
    is_int(dup, 0, "no chunk handed out twice");
    is_int(slabs_requested(1), (uint64_t)total * 96,
           "requested bytes count what the caches handed out");
    for (int i = 0; i < 2; i++) {
        pthread_create(&f[i].t, NULL, give_back, &f[i]);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(f[i].t, NULL);
        free(f[i].got);
    }
    ok(slabs_class_stats(1, &st), "class 1 has pages");
    is_int(st.free_chunks, st.total_chunks, "every chunk back and free");
    is_int(slabs_requested(1), 0, "no bytes requested");
    free(all);
    slabs_destroy();
}

/* A large chunk, from a thread without a cache. */
static void *
alloc_big(void *arg)
{
    *(void **)arg = slabs_alloc(200000, slabs_clsid(200000));
    return NULL;
}

static void
test_counted_free(void)
{
    struct cache_slab_stats st;
    void *p, *big, *again = NULL;
    pthread_t other;

    slabs_only(64 * MB);
    slabs_thread_cache(true);
    p = slabs_alloc(96, 1);
    ok(p != NULL, "a chunk through the cache");
    slabs_class_stats(1, &st);
    is_int(st.used_chunks, 1, "one used: the cached ones count as free");
    is_int(st.free_chunks, st.total_chunks - 1, "the rest free");
    slabs_free(p, 96, 1);
    slabs_class_stats(1, &st);
    is_int(st.used_chunks, 0, "freed into the cache: none used");
    big = slabs_alloc(200000, slabs_clsid(200000));
    ok(big != NULL, "a large chunk");
    slabs_free(big, 200000, slabs_clsid(200000));
    /* not cached: the next thread to ask gets that very chunk back */
    pthread_create(&other, NULL, alloc_big, &again);
    pthread_join(other, NULL);
    ok(again == big, "a large class's chunk goes straight back to its "
       "class");
    slabs_free(again, 200000, slabs_clsid(200000));
    slabs_thread_cache(false);
    slabs_destroy();
}

static int
in_use(void *chunk, size_t room, void *ctx)
{
    (void)chunk;
    (void)room;
    (*(unsigned *)ctx)++;
    return 0;
}

static void
test_mover_takes_cached(void)
{
    unsigned per, busy = 0, inside = 0;
    void **keep, *p;
    char *page;

    slabs_only(64 * MB);
    per = slabs_perslab(1);
    keep = calloc(per, sizeof(void *));
    slabs_thread_cache(true);
    /* Fill the first page and open a second; then give the first's
     * chunks back: the cache takes them (and drains past its max). */
    for (unsigned i = 0; i < per; i++) {
        keep[i] = slabs_alloc(96, 1);
    }
    p = slabs_alloc(96, 1);
    for (unsigned i = 0; i < per; i++) {
        slabs_free(keep[i], 96, 1);
    }
    slabs_mover_attach(true);
    page = slabs_move_begin(SLABS_TC(TIER_DRAM, 1), SLABS_TC(TIER_DRAM, 0));
    ok(page != NULL, "the move takes the class's first page");
    for (unsigned i = 0; page != NULL && i < per; i++) {
        slabs_move_visit(page, i, in_use, &busy);
    }
    is_int(busy, 0, "the mover sees the page empty, cached chunks free");
    /* While the page drains, nothing the thread allocates is in it: its
     * cache was purged of the page's chunks. */
    for (unsigned i = 0; i < 4 * SLABS_TCACHE_MAX; i++) {
        keep[i] = slabs_alloc(96, 1);
        inside += page != NULL && (char *)keep[i] >= page &&
                  (char *)keep[i] < page + MB;
    }
    is_int(inside, 0, "no chunk of the page being moved handed out");
    if (page != NULL) {
        slabs_move_end(page);
    }
    slabs_move_done();
    slabs_mover_attach(false);
    for (unsigned i = 0; i < 4 * SLABS_TCACHE_MAX; i++) {
        slabs_free(keep[i], 96, 1);
    }
    slabs_free(p, 96, 1);
    slabs_thread_cache(false);
    free(keep);
    slabs_destroy();
}

int
main(void)
{
    test_limit_two_threads();
    test_counted_free();
    test_mover_takes_cached();
    return done_testing();
}
