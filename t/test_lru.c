/*
 * test_lru.c: the segmented LRU: where items enter, the maintainer's
 * moves, COLD hits, eviction from the COLD tail and -M.
 */
#include "storage/cache/cache.h"
#include "storage/base/hash.h"
#include "storage/cache/cache_open.h"
#include "storage/lru/crawler.h"
#include "storage/lru/lru.h"
#include "storage/lru/maint.h"
#include "storage/slab/item.h"
#include "storage/slab/slabs.h"
#include "t/cache_test.h"
#include "t/tap.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct cache_options opts;

static void
defaults(struct cache_options *o)
{
    test_cache_options(o);
    o->temp_lru = true;
}

static void
start(void)
{
    clock_init();
    if (cache_init(&opts, 4) != 0) {
        exit(1);
    }
    /* The test drives the maintainer by hand. */
    maint_stop();
}

static enum cache_status
put(unsigned i, uint32_t vlen, rel_time_t exp)
{
    char key[32];
    enum cache_status st;
    struct item *it;

    snprintf(key, sizeof(key), "k%u", i);
    it = cache_alloc(key, strlen(key), hash_key(key, strlen(key)), 0,
                     exp, vlen, &st);
    if (it == NULL) {
        return st;
    }
    memset(item_value(it), 'v', vlen);
    memcpy(item_value(it) + vlen, "\r\n", 2);
    st = cache_store(it, CACHE_SET, 0);
    cache_release(it);
    return st;
}

/* Look key i up; returns its sub-LRU, or -1 when missing. */
static int
get(unsigned i)
{
    char key[32];
    enum cache_status st;
    struct item *it;
    int l;

    snprintf(key, sizeof(key), "k%u", i);
    it = cache_get(key, strlen(key), hash_key(key, strlen(key)), &st);
    if (it == NULL) {
        return -1;
    }
    l = (int)item_lru(it);
    cache_release(it);
    return l;
}

static void
test_segments(void)
{
    struct cache_item_stats is;
    int l;

    put(1000, 10, clock_now() + 30);
    is_int(get(1000), ITEM_LRU_TEMP, "short TTL enters TEMP");
    for (unsigned i = 0; i < 100; i++) {
        put(i, 10, 0);
    }
    is_int(get(99), ITEM_LRU_HOT, "new items enter HOT");
    get(99);                            /* second hit: ACTIVE */
    get(5);
    maint_juggle(1);
    lru_item_stats(1, &is);
    ok(is.number_cold > 0, "HOT over its share moves to COLD");
    ok(is.number_hot <= 20 + 1, "HOT kept near hot_lru_pct");
    ok(is.moves_to_cold > 0, "moves_to_cold counted");
    is_int(get(0), ITEM_LRU_COLD, "oldest items are COLD");
    is_int(get(99), ITEM_LRU_HOT, "active head item not at the tail yet");
    l = get(0);                         /* second hit in COLD */
    is_int(l, ITEM_LRU_COLD, "a COLD hit only marks the item active");
    lru_item_stats(1, &is);
    is_int(is.moves_to_warm, 0, "no move on the request path");
    maint_juggle(1);                      /* k0 is the COLD tail */
    lru_item_stats(1, &is);
    is_int(is.moves_to_warm, 1, "the maintainer moves it: moves_to_warm");
    is_int(get(0), ITEM_LRU_WARM, "an active COLD tail item goes to WARM");
    maint_juggle(1);                      /* k0 active again, WARM's tail */
    lru_item_stats(1, &is);
    is_int(is.moves_within_lru, 1, "ACTIVE WARM tail reshuffled");
    is_int(get(0), ITEM_LRU_WARM, "still WARM");
    is_int(is.number_temp, 1, "number_temp");
    is_int(is.number, 101, "number");
    put(1001, 10, clock_now());         /* TEMP, and dead at once */
    {
        enum cache_status st;
        struct item *it = cache_touch("k1000", 5, hash_key("k1000", 5),
                                      clock_now(), &st);

        cache_release(it);              /* the TEMP tail is dead too */
    }
    maint_juggle(1);
    lru_item_stats(1, &is);
    is_int(is.number_temp, 0, "the maintainer reclaims dead TEMP items");
    is_int(is.reclaimed, 2, "reclaimed counted");
}

/* A juggle moves every active item at a COLD tail, however many: 40
 * items in a class of their own, made active in COLD, all reach WARM in
 * one juggle, and none is left for the next. */
static void
test_juggle_many(void)
{
    struct cache_item_stats is;
    unsigned cls = slabs_clsid(item_size(5, 0, 3000, true));
    uint64_t before;
    unsigned cold = 0;

    for (unsigned i = 0; i < 40; i++) {
        put(2000 + i, 3000, 0);
    }
    maint_juggle(cls);                  /* HOT over its share: to COLD */
    for (unsigned i = 0; i < 40; i++) {
        if (get(2000 + i) == ITEM_LRU_COLD) {
            get(2000 + i);              /* second hit: ACTIVE */
            cold++;
        }
    }
    ok(cold > 16, "many active COLD items");
    lru_item_stats(cls, &is);
    before = is.moves_to_warm;
    maint_juggle(cls);
    lru_item_stats(cls, &is);
    is_int(is.moves_to_warm - before, cold, "one juggle moves them all");
    maint_juggle(cls);
    lru_item_stats(cls, &is);
    is_int(is.moves_to_warm - before, cold, "none was left for the next");
}

static void
test_eviction(void)
{
    struct cache_item_stats is;
    unsigned cls = slabs_clsid(item_size(5, 0, 100000, true));
    unsigned per = (unsigned)((1u << 20) / slabs_size(cls)), n;

    /* 64 pages: enough for a few classes; fill one class past all of
     * memory. */
    for (n = 0; n < per * 70; n++) {
        if (put(10000 + n, 100000, 0) != CACHE_STORED) {
            break;
        }
    }
    is_int(n, per * 70, "every store succeeded by evicting");
    lru_item_stats(cls, &is);
    ok(is.evicted > 0, "evictions counted");
    is_int(is.evicted_unfetched, is.evicted, "all evicted unfetched");
    is_int(get(10000), -1, "the oldest item was evicted");
    ok(get(10000 + n - 1) >= 0, "the newest is there");
    ok(is.direct_reclaims > 0, "direct_reclaims counted");
}

static void
test_no_evict(void)
{
    struct cache_item_stats is;
    unsigned cls;
    unsigned n;
    enum cache_status st = CACHE_STORED;

    defaults(&opts);
    opts.evict = false;
    opts.mem_limit = 2u << 20;
    start();
    cls = slabs_clsid(item_size(5, 0, 100000, true));
    for (n = 0; n < 100 && st == CACHE_STORED; n++) {
        st = put(n, 100000, 0);
    }
    is_int(st, CACHE_NO_MEMORY, "-M: out of memory");
    ok(get(0) >= 0, "-M: nothing evicted");
    lru_item_stats(cls, &is);
    ok(is.outofmemory > 0, "outofmemory counted");
    is_int(is.evicted, 0, "no evictions");
    cache_shutdown();
}

/* Flat LRU (lru_segmented off): one list per class, COLD. */
static void
test_flat(void)
{
    struct cache_item_stats is;
    unsigned n;

    defaults(&opts);
    opts.lru_segmented = false;
    opts.mem_limit = 2u << 20;
    start();
    put(1, 10, 0);
    is_int(get(1), ITEM_LRU_COLD, "flat: items enter COLD");
    for (n = 0; n < 100; n++) {
        if (put(100 + n, 100000, 0) != CACHE_STORED) {
            break;
        }
    }
    is_int(n, 100, "flat: stores evict");
    lru_item_stats(slabs_clsid(item_size(4, 0, 100000, true)), &is);
    ok(is.evicted > 0 && is.number_hot == 0, "flat: evicted from COLD");
    cache_shutdown();
}

/* A reader of the class's item count while the crawler walks the list
 * must never see an item missing: the cursor moves in place. */
static bool reading;
static unsigned crawl_id;

static void *
count_reader(void *arg)
{
    uint64_t *low = arg;

    while (__atomic_load_n(&reading, __ATOMIC_ACQUIRE)) {
        uint64_t n = lru_class_items(crawl_id);

        if (n < __atomic_load_n(low, __ATOMIC_RELAXED)) {
            __atomic_store_n(low, n, __ATOMIC_RELEASE);
        }
    }
    return NULL;
}

static void
test_crawler_counts(void)
{
    struct item *cursor = calloc(1, sizeof(struct item) + 8);
    uint64_t low = UINT64_MAX;
    pthread_t reader;
    unsigned steps = 0;
    bool ttl;

    defaults(&opts);
    opts.lru_segmented = false;
    opts.mem_limit = 8u << 20;
    start();
    for (unsigned i = 0; i < 3000; i++) {
        put(i, 10, 0);
    }
    crawl_id = slabs_clsid(item_size(5, 0, 10, true));
    if (!ok(cursor != NULL && lru_class_items(crawl_id) == 3000,
            "crawler: 3000 items in one class")) {
        free(cursor);
        cache_shutdown();
        return;
    }
    __atomic_store_n(&reading, true, __ATOMIC_RELEASE);
    pthread_create(&reader, NULL, count_reader, &low);
    /* Crawl only once the reader reads, and walk the list 50 times. */
    while (__atomic_load_n(&low, __ATOMIC_ACQUIRE) == UINT64_MAX) {
        sched_yield();
    }
    for (int pass = 0; pass < 50; pass++) {
        lru_cursor_insert(cursor, crawl_id, ITEM_LRU_COLD);
        while (crawler_step(cursor, &ttl) >= 0) {
            steps++;
        }
    }
    __atomic_store_n(&reading, false, __ATOMIC_RELEASE);
    pthread_join(reader, NULL);
    ok(steps >= 50 * 3000, "crawler: the cursor passed every item, 50 times");
    is_int(low, 3000, "crawler: the count never dipped while it walked");
    free(cursor);
    cache_shutdown();
}

/* -o tail_repair_time: an item held at the COLD tail longer than that is
 * unlinked when an eviction reaches it (counted in tailrepairs), while
 * the holder's reference keeps its memory readable until released. */
static void
test_tail_repair(void)
{
    struct cache_item_stats is;
    enum cache_status st;
    struct item *held;
    unsigned cls, n;

    defaults(&opts);
    opts.mem_limit = 2u << 20;
    opts.tail_repair_time = 1;      /* the option says 10 s at least */
    start();
    cls = slabs_clsid(item_size(5, 0, 100000, true));
    is_int(put(0, 100000, 0), CACHE_STORED, "tail repair: stored");
    held = cache_get("k0", 2, hash_key("k0", 2), &st);
    ok(held != NULL, "a reader holds k0");
    sleep(3);
    clock_tick();
    for (n = 1; n < 60; n++) {
        put(n, 100000, 0);
    }
    lru_item_stats(cls, &is);
    ok(is.tailrepairs >= 1, "tailrepairs counted");
    is_int(get(0), -1, "the held item was unlinked");
    ok(held != NULL && item_value(held)[0] == 'v' &&
       item_value(held)[99999] == 'v', "the holder still reads its value");
    cache_release(held);
    is_int(put(0, 100000, 0), CACHE_STORED, "the key can be stored again");
    cache_shutdown();
}

int
main(void)
{
    defaults(&opts);
    start();
    test_segments();
    test_juggle_many();
    test_eviction();
    cache_shutdown();
    test_no_evict();
    test_flat();
    test_crawler_counts();
    test_tail_repair();
    return done_testing();
}
