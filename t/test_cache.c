/*
 * test_cache.c: the facade's request semantics (store table, cas, delete,
 * incr/decr, expiry, flush, metadump, concurrency, stats).
 */
#include "storage/cache/cache.h"
#include "storage/base/hash.h"
#include "storage/base/locks.h"
#include "storage/cache/cache_delta.h"
#include "storage/cache/cache_open.h"
#include "storage/cache/cache_stats.h"
#include "storage/lru/crawler.h"
#include "storage/lru/lru.h"
#include "storage/lru/maint.h"
#include "storage/slab/item.h"
#include "storage/slab/slabs.h"
#include "t/cache_test.h"
#include "t/tap.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct cache_options opts;

static void
defaults(struct cache_options *o)
{
    test_cache_options(o);
    o->slab_reassign = true;
    o->automove_window = 30;
    o->track_sizes = true;
    o->lru_crawler = true;
}

static void
fill(struct item *it, const char *val)
{
    struct iovec iov = { 0 };   /* (-O3 cannot see that it is filled) */
    size_t n = strlen(val);

    item_value_iov(it, 0, &iov, 1);
    memcpy(iov.iov_base, val, n);
    memcpy((char *)iov.iov_base + n, "\r\n", 2);
}

static enum cache_status
put(const char *k, const char *v, uint32_t flags, rel_time_t exp,
    enum cache_op op, uint64_t cas)
{
    enum cache_status st;
    struct item *it = cache_alloc(k, strlen(k), test_hv(k), flags, exp,
                                  (uint32_t)strlen(v), &st);

    if (it == NULL) {
        return st;
    }
    fill(it, v);
    st = cache_store(it, op, cas);
    cache_release(it);
    return st;
}

static uint64_t
cas_of(const char *k)
{
    enum cache_status st;
    struct item *it = cache_get(k, strlen(k), test_hv(k), &st);
    uint64_t c;

    if (it == NULL) {
        return 0;
    }
    c = item_cas(it);
    cache_release(it);
    return c;
}

static void
test_store_table(void)
{
    is_int(put("a", "1", 0, 0, CACHE_SET, 0), CACHE_STORED, "set new");
    is_int(cas_of("a"), 2, "first cas handed out is 2");
    is_int(put("a", "2", 0, 0, CACHE_SET, 0), CACHE_STORED, "set over");
    is_str(test_val("a"), "2", "set replaces");
    is_int(put("a", "3", 0, 0, CACHE_ADD, 0), CACHE_NOT_STORED,
           "add on hit");
    is_str(test_val("a"), "2", "add kept the old value");
    is_int(put("b", "1", 0, 0, CACHE_ADD, 0), CACHE_STORED, "add on miss");
    is_int(put("c", "1", 0, 0, CACHE_REPLACE, 0), CACHE_NOT_STORED,
           "replace on miss");
    is_int(put("b", "9", 0, 0, CACHE_REPLACE, 0), CACHE_STORED,
           "replace on hit");
    is_str(test_val("b"), "9", "replaced");
    is_int(put("c", "x", 0, 0, CACHE_APPEND, 0), CACHE_NOT_STORED,
           "append on miss");
    is_int(put("c", "x", 0, 0, CACHE_PREPEND, 0), CACHE_NOT_STORED,
           "prepend on miss");
    is_int(put("c", "mid", 7, 0, CACHE_SET, 0), CACHE_STORED, "set c");
    is_int(put("c", "end", 0, 0, CACHE_APPEND, 0), CACHE_STORED, "append");
    is_int(put("c", "top", 0, 0, CACHE_PREPEND, 0), CACHE_STORED,
           "prepend");
    is_str(test_val("c"), "topmidend", "append and prepend data");
    {
        enum cache_status st;
        struct item *it = cache_get("c", 1, test_hv("c"), &st);

        is_int(item_client_flags(it), 7, "append keeps the old flags");
        cache_release(it);
    }
    is_int(put("nope", "1", 0, 0, CACHE_CAS, 5), CACHE_NOT_FOUND,
           "cas on miss");
    is_int(put("b", "1", 0, 0, CACHE_CAS, cas_of("b") + 100), CACHE_EXISTS,
           "cas mismatch");
    is_int(put("b", "cas", 0, 0, CACHE_CAS, cas_of("b")), CACHE_STORED,
           "cas match");
    is_str(test_val("b"), "cas", "cas stored");
}

static void
test_cas_and_delete(void)
{
    uint64_t c1, c2;
    unsigned cls;

    put("d", "1", 0, 0, CACHE_SET, 0);
    c1 = cas_of("d");
    put("d", "2", 0, 0, CACHE_SET, 0);
    c2 = cas_of("d");
    ok(c2 > c1, "every store gets a new cas");
    is_int(cache_delete("d", 1, test_hv("d"), c1, NULL), CACHE_EXISTS,
           "delete with a stale cas");
    cls = 0;
    is_int(cache_delete("d", 1, test_hv("d"), c2, &cls), CACHE_DELETED,
           "delete with the cas");
    is_int(cls, 1, "delete reports the class");
    is_int(cache_delete("d", 1, test_hv("d"), 0, NULL), CACHE_NOT_FOUND,
           "delete again");
    is_str(test_val("d"), "", "deleted");
}

static enum cache_status
delta(const char *k, bool incr, uint64_t d, uint64_t *v)
{
    unsigned cls;

    return cache_delta(k, strlen(k), test_hv(k), incr, d, v, &cls);
}

static void
test_delta(void)
{
    uint64_t v = 0, c;

    put("n", "15", 0, 0, CACHE_SET, 0);
    c = cas_of("n");
    is_int(delta("n", true, 5, &v), CACHE_OK, "incr");
    is_int(v, 20, "15 + 5");
    ok(cas_of("n") != c, "incr gives a new cas");
    is_int(delta("n", false, 100, &v), CACHE_OK, "decr");
    is_int(v, 0, "decr floors at 0");
    is_str(test_val("n"), "0 ", "in place, padded with a space");
    put("w", "18446744073709551615", 0, 0, CACHE_SET, 0);
    is_int(delta("w", true, 2, &v), CACHE_OK, "incr near 2^64");
    is_int(v, 1, "incr wraps");
    is_str(test_val("w"), "1                   ", "wrapped value padded");
    put("s", "9", 0, 0, CACHE_SET, 0);
    delta("s", true, 1, &v);
    is_str(test_val("s"), "10", "longer result: a new item");
    put("x", "abc", 0, 0, CACHE_SET, 0);
    is_int(delta("x", true, 1, &v), CACHE_NON_NUMERIC, "non-numeric");
    put("x", "12abc", 0, 0, CACHE_SET, 0);
    is_int(delta("x", true, 1, &v), CACHE_NON_NUMERIC, "digits then junk");
    put("x", "-1", 0, 0, CACHE_SET, 0);
    is_int(delta("x", true, 1, &v), CACHE_NON_NUMERIC, "negative");
    put("x", "123456789012345678901", 0, 0, CACHE_SET, 0);
    is_int(delta("x", true, 1, &v), CACHE_NON_NUMERIC, "over 2^64");
    is_int(delta("missing", true, 1, &v), CACHE_NOT_FOUND, "incr miss");
    {
        /* A reader holding the item forces a copy instead. */
        enum cache_status st;
        struct item *it = cache_get("n", 1, test_hv("n"), &st);

        delta("n", true, 7, &v);
        is_str(test_val("n"), "7", "copy when another reference exists");
        is_mem(item_value(it), 2, "0 ", "reader's bytes unchanged");
        cache_release(it);
    }
}

static void
test_expiry_and_flush(void)
{
    enum cache_status st;
    struct item *it;

    put("e", "1", 0, clock_now() - 1, CACHE_SET, 0);
    it = cache_get("e", 1, test_hv("e"), &st);
    ok(it == NULL && st == CACHE_EXPIRED, "expired on read");
    it = cache_get("e", 1, test_hv("e"), &st);
    ok(it == NULL && st == CACHE_MISS, "and unlinked");
    put("t", "1", 0, clock_now() + 100, CACHE_SET, 0);
    it = cache_touch("t", 1, test_hv("t"), clock_now() - 1, &st);
    ok(it != NULL && item_exptime(it) == clock_now() - 1, "touch");
    cache_release(it);
    is_str(test_val("t"), "", "touched into the past");
    put("f", "1", 0, 0, CACHE_SET, 0);
    cache_flush(clock_now() - 1);
    it = cache_get("f", 1, test_hv("f"), &st);
    ok(it == NULL, "flushed item gone");
    is_int(put("f", "2", 0, 0, CACHE_ADD, 0), CACHE_STORED,
           "add after flush");
    is_str(test_val("f"), "2", "a store after the flush is visible");
    cache_flush(0);
}

static int holder_ready;

/* Hold a key's item lock for a while, as a busy worker would. */
static void *
hold_lock(void *arg)
{
    uint32_t hv = *(uint32_t *)arg;

    locks_lock(hv);
    __atomic_store_n(&holder_ready, 1, __ATOMIC_RELEASE);
    usleep(100000);
    locks_unlock(hv);
    return NULL;
}

/* flush_all while a recent item's lock is busy still removes it. */
static void
test_flush_busy(void)
{
    uint32_t hv = test_hv("fb");
    pthread_t t;

    put("fb", "1", 0, 0, CACHE_SET, 0);
    pthread_create(&t, NULL, hold_lock, &hv);
    while (!__atomic_load_n(&holder_ready, __ATOMIC_ACQUIRE)) {
        usleep(1000);
    }
    cache_flush(clock_now() - 1);
    pthread_join(t, NULL);
    is_str(test_val("fb"), "", "flush waits for a busy item lock");
    is_int(put("fb", "2", 0, 0, CACHE_SET, 0), CACHE_STORED, "set again");
    is_str(test_val("fb"), "2", "and it is visible");
}

static int
collect(const struct cache_meta *m, void *ctx)
{
    char *out = ctx;

    snprintf(out + strlen(out), 4096 - strlen(out),
             "key=%.*s exp=%lld la=%lld cas=%llu fetch=%s cls=%u "
             "size=%zu\n", (int)m->nkey, m->key, (long long)m->exptime,
             (long long)m->atime, (unsigned long long)m->cas,
             m->fetched ? "yes" : "no", m->clsid, m->size);
    return 0;
}

static void
test_metadump(void)
{
    char out[4096] = "", want[256];
    bool cls[CACHE_MAX_CLASSES] = { false };
    enum cache_status st;
    struct item *it;

    cache_delete("a", 1, test_hv("a"), 0, NULL);
    put("a b", "xyz", 0, 0, CACHE_SET, 0);
    it = cache_get("a b", 3, test_hv("a b"), &st);
    cls[item_clsid(it)] = true;
    snprintf(want, sizeof(want),
             "key=a b exp=-1 la=%lld cas=%llu fetch=yes cls=%u "
             "size=%zu\n",
             (long long)(item_atime(it) + clock_process_started()),
             (unsigned long long)item_cas(it), item_clsid(it),
             item_ntotal(it));
    cache_release(it);
    cache_metadump(cls, collect, out);
    ok(strstr(out, want) != NULL, "metadump line");
    if (strstr(out, want) == NULL) {
        printf("# %s# want %s", out, want);
    }
}

#define NTHREADS 4
#define NINCR    2000

static void *
incr_thread(void *arg)
{
    uint64_t v;

    (void)arg;
    for (int i = 0; i < NINCR; i++) {
        delta("ctr", true, 1, &v);
    }
    return NULL;
}

static void
test_threads(void)
{
    pthread_t t[NTHREADS];

    put("ctr", "0", 0, 0, CACHE_SET, 0);
    for (int i = 0; i < NTHREADS; i++) {
        pthread_create(&t[i], NULL, incr_thread, NULL);
    }
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(t[i], NULL);
    }
    is_int(strtoull(test_val("ctr"), NULL, 10), NTHREADS * NINCR,
           "4 threads x N incr");
}

static void
test_stats(void)
{
    struct cache_stats s;
    struct cache_item_stats is;
    struct cache_slab_stats ss;
    uint64_t before;

    cache_stats(&s);
    before = s.curr_items;
    put("st1", "hello", 0, 0, CACHE_SET, 0);
    cache_stats(&s);
    is_int(s.curr_items, before + 1, "curr_items");
    is_int(s.limit_maxbytes, 64u << 20, "limit_maxbytes");
    ok(s.total_malloced >= (1u << 20), "total_malloced counts pages");
    ok(cache_item_stats(1, &is) && is.number > 0, "items in class 1");
    ok(cache_slab_stats(1, &ss) && ss.chunk_size == 96 &&
       ss.chunks_per_page == 10922 && ss.total_pages == 1, "slab class 1");
    is_int(ss.used_chunks + ss.free_chunks, ss.total_chunks,
           "used + free = total");
    ok(!cache_slab_stats(30, &ss), "unused class not listed");
    ok(s.total_items > 0 && s.lru_maintainer_juggles > 0,
       "counters running");
    before = s.lru_maintainer_juggles;
    cache_stats_reset();
    cache_stats(&s);
    is_int(s.total_items, 0, "reset total_items");
    ok(s.lru_maintainer_juggles < before, "reset juggles");
    ok(s.curr_items > 0, "curr_items is not a counter");
}

static void
test_crawler(void)
{
    bool cls[CACHE_MAX_CLASSES] = { false };
    struct cache_stats s0, s;
    enum cache_status st;
    char key[32];

    /* The maintainer would reclaim some of them at the HOT tail. */
    maint_stop();
    cache_stats(&s0);
    for (int i = 0; i < 50; i++) {
        snprintf(key, sizeof(key), "dead%d", i);
        /* exptime == now: dead at once, but only a reader or the
         * crawler finds out. */
        put(key, "0123456789012345678901234567890123456789", 0,
            clock_now(), CACHE_SET, 0);
    }
    cls[slabs_clsid(item_size(6, 0, 40, true))] = true;
    /* An automatic crawl may be running: BUSY until it ends. */
    while ((st = cache_crawl(cls)) == CACHE_BUSY) {
        crawler_wait();
    }
    is_int(st, CACHE_OK, "crawl requested");
    crawler_wait();
    cache_stats(&s);
    is_int(s.crawler_reclaimed - s0.crawler_reclaimed, 50,
           "crawler reclaimed the dead items");
    is_int(s0.curr_items - s.curr_items, 0, "curr_items back down");
    ok(s.lru_crawler_starts > s0.lru_crawler_starts, "lru_crawler_starts");
    crawler_wait();
    /* As memcached: an empty class, or one past the last, is crawled at
     * once; only the page pool's 0 is no class. */
    is_int(cache_crawl(cls), CACHE_OK, "a class with nothing left");
    crawler_wait();
    memset(cls, 0, sizeof(cls));
    cls[63] = true;
    is_int(cache_crawl(cls), CACHE_OK, "the last class id");
    crawler_wait();
    cls[63] = false;
    cls[0] = true;
    is_int(cache_crawl(cls), CACHE_BADCLASS, "class 0");
    cls[0] = false;
    cache_crawler_enable(false);
    cls[1] = true;
    is_int(cache_crawl(cls), CACHE_DISABLED, "disabled crawler");
    cache_crawler_enable(true);
    maint_start();
}

int
main(void)
{
    clock_init();
    defaults(&opts);
    if (cache_init(&opts, 4) != 0) {
        return 1;
    }
    test_store_table();
    test_cas_and_delete();
    test_delta();
    test_expiry_and_flush();
    test_flush_busy();
    test_metadump();
    test_threads();
    test_stats();
    test_crawler();
    cache_shutdown();
    return done_testing();
}
