/*
 * test_slabs.c: the class table, the exact memory limit and the page
 * mover.
 */
#include "storage/cache/cache.h"
#include "storage/base/hash.h"
#include "storage/cache/cache_open.h"
#include "storage/cache/cache_stats.h"
#include "storage/lru/lru.h"
#include "storage/lru/maint.h"
#include "storage/slab/item.h"
#include "storage/slab/slabs.h"
#include "storage/slab/slabs_image.h"
#include "storage/slab/slabs_move.h"
#include "storage/slab/slabs_stats.h"
#include "storage/tier/tier.h"
#include "t/cache_test.h"
#include "t/tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void
defaults(struct cache_options *o)
{
    test_cache_options(o);
    o->slab_reassign = true;
    o->automove_window = 30;
}

/* Start slabs alone on a DRAM tier. */
static void
slabs_only(const struct cache_options *o)
{
    struct tier *t = tier_dram_create(o->mem_limit, o->page_size, false);

    if (t == NULL || slabs_init(o, t, NULL, 0) != 0) {
        exit(1);
    }
}

static void
test_default_table(void)
{
    static const size_t want[] = { 96, 120, 152, 192, 240, 304, 384, 480,
                                   600, 752, 944, 1184 };
    struct cache_options o;
    bool same = true;

    defaults(&o);
    slabs_only(&o);
    for (unsigned i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        same = same && slabs_size(i + 1) == want[i];
    }
    ok(same, "first 12 classes as memcached's");
    is_int(slabs_largest(), 39, "39 classes");
    is_int(slabs_size(38), 394840, "class 38");
    is_int(slabs_size(39), 524288, "last class is slab_chunk_max");
    is_int(slabs_clsid(96), 1, "96 fits class 1");
    is_int(slabs_clsid(97), 2, "97 needs class 2");
    is_int(slabs_clsid(524288), 39, "chunk max fits the last");
    is_int(slabs_clsid(524289), 0, "above it: no class");
    slabs_destroy();
}

static void
test_variants(void)
{
    struct cache_options o;

    defaults(&o);
    o.factor = 2.0;
    slabs_only(&o);
    ok(slabs_size(1) == 96 && slabs_size(2) == 192 && slabs_size(3) == 384,
       "-f 2");
    is_int(slabs_size(slabs_largest() - 1), 196608, "-f 2 last grown");
    slabs_destroy();
    defaults(&o);
    o.chunk_min = 100;
    slabs_only(&o);
    ok(slabs_size(1) == 152 && slabs_size(2) == 192, "-n 100");
    slabs_destroy();
    defaults(&o);
    o.slab_sizes = "100-200-1000";
    slabs_only(&o);
    ok(slabs_size(1) == 104 && slabs_size(2) == 200 &&
       slabs_size(3) == 1000 && slabs_size(4) == 524288 &&
       slabs_largest() == 4, "slab_sizes");
    slabs_destroy();
    o.slab_sizes = "200-100-300";
    slabs_only(&o);
    ok(slabs_size(1) == 200 && slabs_largest() == 2,
       "slab_sizes stops at a size that does not grow");
    slabs_destroy();
    o.slab_sizes = "8-100";
    slabs_only(&o);
    is_int(slabs_largest(), 1, "slab_sizes smaller than a header ignored");
    slabs_destroy();
}

static void
test_mem_limit(void)
{
    struct cache_options o;
    struct cache_stats s;
    void **one;
    void *p[4];
    unsigned per, got = 0;

    defaults(&o);
    o.mem_limit = 3u << 20;
    slabs_only(&o);
    per = slabs_perslab(1);
    one = calloc(per + 1, sizeof(*one));
    p[0] = slabs_alloc(96, 1);
    p[1] = slabs_alloc(120, 2);
    p[2] = slabs_alloc(152, 3);
    p[3] = slabs_alloc(192, 4);
    ok(p[0] && p[1] && p[2], "three pages for three classes");
    ok(p[3] != NULL, "a fourth class gets its first page past -m");
    memset(&s, 0, sizeof(s));
    slabs_totals(&s);
    is_int(s.total_malloced, 4u << 20, "the limit and one page taken");
    /* a class that has a page gets no second one past the limit */
    for (unsigned i = 0; one != NULL && i <= per; i++) {
        if ((one[i] = slabs_alloc(96, 1)) != NULL) {
            got++;
        }
    }
    is_int(got, per - 1, "class 1 keeps to its one page");
    for (unsigned i = 0; one != NULL && i <= per; i++) {
        if (one[i] != NULL) {
            slabs_free(one[i], 96, 1);
        }
    }
    free(one);
    for (int i = 0; i < 4; i++) {
        slabs_free(p[i], slabs_size((unsigned)i + 1), (unsigned)i + 1);
    }
    slabs_destroy();
}

static char *
value_for(unsigned i, char *buf, size_t vlen)
{
    memset(buf, 'a' + (char)(i % 26), vlen);
    snprintf(buf, vlen, "%u", i);
    buf[strlen(buf)] = '-';
    return buf;
}

#define VLEN 9000

static void
store(unsigned i)
{
    char key[32], val[VLEN];
    enum cache_status st;
    struct item *it;

    snprintf(key, sizeof(key), "key%u", i);
    it = cache_alloc(key, strlen(key), hash_key(key, strlen(key)), 0,
                     0, VLEN, &st);
    memcpy(item_value(it), value_for(i, val, VLEN), VLEN);
    memcpy(item_value(it) + VLEN, "\r\n", 2);
    cache_store(it, CACHE_SET, 0);
    cache_release(it);
}

/* 1 if key i reads back intact, 0 if gone or wrong. */
static int
intact(unsigned i)
{
    char key[32], val[VLEN];
    enum cache_status st;
    struct item *it;
    int good;

    snprintf(key, sizeof(key), "key%u", i);
    it = cache_get(key, strlen(key), hash_key(key, strlen(key)), &st);
    if (it == NULL) {
        return 0;
    }
    good = memcmp(item_value(it), value_for(i, val, VLEN), VLEN) == 0 &&
           item_value_crlf_ok(it);
    cache_release(it);
    return good;
}

static void
test_reassign(void)
{
    struct cache_options o;
    struct cache_slab_stats a, b;
    struct cache_stats s;
    unsigned cls, per, n, alive = 0;
    char key[32];

    defaults(&o);
    clock_init();
    if (cache_init(&o, 4) != 0) {
        exit(1);
    }
    /* Its passing references would make items look busy. */
    maint_stop();
    cls = slabs_clsid(item_size(5, 0, VLEN, true));
    per = (unsigned)((1u << 20) / slabs_size(cls));
    n = per + 10;
    for (unsigned i = 0; i < n; i++) {
        store(i);
    }
    /* Free room in the second page for the first page's items. */
    for (unsigned i = 0; i < 20; i++) {
        snprintf(key, sizeof(key), "key%u", i);
        cache_delete(key, strlen(key), hash_key(key, strlen(key)), 0,
                     NULL);
    }
    cache_slab_stats(cls, &a);
    is_int(a.total_pages, 2, "two pages in the class");
    is_int(cache_slabs_reassign((int)cls, (int)cls), CACHE_SAME, "SAME");
    is_int(cache_slabs_reassign(70, 1), CACHE_BADCLASS, "BADCLASS");
    is_int(cache_slabs_reassign(1, 2), CACHE_NOSPARE, "NOSPARE");
    is_int(cache_slabs_reassign((int)cls, 1), CACHE_OK, "reassign OK");
    slabs_mover_wait();
    cache_slab_stats(cls, &a);
    cache_slab_stats(1, &b);
    is_int(a.total_pages, 1, "source lost a page");
    is_int(b.total_pages, 1, "destination got it");
    is_int(b.free_chunks, 10922, "carved into class 1 chunks");
    for (unsigned i = 20; i < n; i++) {
        alive += (unsigned)intact(i);
    }
    is_int(alive, n - 20, "every item rescued intact");
    cache_stats(&s);
    is_int(s.slabs_moved, 1, "slabs_moved");
    is_int(s.slab_reassign_rescues, per - 20, "one rescue per live item");
    cache_shutdown();
}

static enum cache_status
put_small(unsigned i, uint32_t vlen)
{
    char key[32];
    enum cache_status st;
    struct item *it;

    snprintf(key, sizeof(key), "s%u", i);
    it = cache_alloc(key, strlen(key), hash_key(key, strlen(key)), 0,
                     0, vlen, &st);
    if (it == NULL) {
        return st;
    }
    memset(item_value(it), 'x', vlen + 2);
    st = cache_store(it, CACHE_SET, 0);
    cache_release(it);
    return st;
}

/* Memory full of one class, in a tier that cannot grow past -m (-L, as a
 * file): a store in another class gets a page moved to it instead of
 * failing, and -m still holds. */
static void
test_starved_class(void)
{
    struct cache_options o;
    struct cache_slab_stats a, b;
    struct cache_stats s;
    unsigned i;

    defaults(&o);
    o.mem_limit = 4u << 20;
    o.prealloc = true;
    clock_init();
    if (cache_init(&o, 4) != 0) {
        exit(1);
    }
    for (i = 0; i < 4 * 10922 + 100; i++) {
        put_small(i, 10);
    }
    cache_slab_stats(1, &a);
    is_int(a.total_pages, 4, "one class holds all of -m");
    is_int(put_small(1u << 30, 5000), CACHE_STORED,
           "a store in an empty class succeeds");
    cache_slab_stats(1, &a);
    cache_slab_stats(slabs_clsid(item_size(11, 0, 5000, true)), &b);
    ok(a.total_pages == 3 && b.total_pages == 1, "a page was moved");
    cache_stats(&s);
    is_int(s.total_malloced, 4u << 20, "still exactly -m");
    cache_shutdown();
}

/* A page of chunks whose items fill their class: a copy has no free
 * chunk there and the class being emptied never takes a new page, so
 * the owners of its chunks are unlinked; the others stay. */
static void
test_reassign_chunks(void)
{
    struct cache_options o;
    struct cache_slab_stats a;
    struct cache_stats s;
    enum cache_status st;
    unsigned left = 0;

    defaults(&o);
    clock_init();
    if (cache_init(&o, 4) != 0) {
        exit(1);
    }
    maint_stop();
    for (unsigned i = 0; i < 3; i++) {
        char key[8];
        struct item *it;

        snprintf(key, sizeof(key), "big%u", i);
        it = cache_alloc(key, 4, hash_key(key, 4), 0, 0, 1000000, &st);
        cache_store(it, CACHE_SET, 0);
        cache_release(it);
    }
    cache_slab_stats(slabs_largest(), &a);
    is_int(a.total_pages, 3, "three chunked items: three pages of chunks");
    is_int(cache_slabs_reassign((int)slabs_largest(), 1), CACHE_OK,
           "reassign a page of chunks");
    slabs_mover_wait();
    cache_stats(&s);
    is_int(s.slabs_moved, 1, "moved");
    cache_slab_stats(slabs_largest(), &a);
    is_int(a.total_pages, 2, "one page fewer");
    for (unsigned i = 0; i < 3; i++) {
        char key[8];
        struct item *it;

        snprintf(key, sizeof(key), "big%u", i);
        it = cache_get(key, 4, hash_key(key, 4), &st);
        if (it != NULL) {
            left++;
            cache_release(it);
        }
    }
    ok(left >= 1 && left <= 2, "owners of that page's chunks unlinked");
    is_int(s.slab_reassign_inline_reclaim, 3 - left, "counted");
    cache_shutdown();
}

/* An item a reader holds is waited for, then unlinked; the page moves
 * once the reader lets go, and the reader's bytes stay intact. */
static void
test_reassign_busy(void)
{
    struct cache_options o;
    struct cache_stats s;
    struct item *held;
    enum cache_status st;
    unsigned cls, per;

    defaults(&o);
    clock_init();
    if (cache_init(&o, 4) != 0) {
        exit(1);
    }
    maint_stop();
    cls = slabs_clsid(item_size(5, 0, VLEN, true));
    per = (unsigned)((1u << 20) / slabs_size(cls));
    for (unsigned i = 0; i < per + 1; i++) {
        store(i);
    }
    held = cache_get("key0", 4, hash_key("key0", 4), &st);
    is_int(cache_slabs_reassign((int)cls, 1), CACHE_OK, "reassign queued");
    usleep(200000);
    cache_stats(&s);
    is_int(s.slab_reassign_running, 1, "mover waits for the reader");
    ok(s.slab_reassign_busy_items > 0, "busy item counted");
    is_int(s.slab_reassign_busy_deletes, 1, "then unlinks it");
    is_int(intact(0), 0, "the held key reads as gone");
    {
        char val[VLEN];

        ok(memcmp(item_value(held), value_for(0, val, VLEN), VLEN) == 0,
           "reader's bytes intact");
    }
    cache_release(held);
    slabs_mover_wait();
    cache_stats(&s);
    is_int(s.slabs_moved, 1, "page moved after the release");
    is_int(intact(1) + intact(per), 2, "other items rescued");
    cache_shutdown();
}

/* Automove (mode 1): a page goes from the class whose COLD tail is oldest
 * to the one evicting young items. */
static void
test_automove(void)
{
    struct cache_options o;
    struct cache_slab_stats a, b;
    struct item *tail = NULL;
    enum cache_status st;
    unsigned big = slabs_clsid(item_size(10, 0, 5000, true));
    unsigned i, a_before;

    defaults(&o);
    o.mem_limit = 6u << 20;
    o.slab_automove = 1;
    o.automove_window = 3;
    clock_init();
    if (cache_init(&o, 4) != 0) {
        exit(1);
    }
    maint_stop();
    big = slabs_clsid(item_size(10, 0, 5000, true));
    for (i = 0; i < 3 * 10922; i++) {
        put_small(i, 10);
    }
    maint_juggle(1);
    /* Age class 1's COLD tail (the key stored first sits there) as much
     * as the clock allows: it starts at 2 and this test does not tick. */
    tail = cache_get("s0", 2, hash_key("s0", 2), &st);
    ok(tail != NULL && item_lru(tail) == ITEM_LRU_COLD, "s0 in COLD");
    if (tail != NULL) {
        item_time_store(tail, 1);
        cache_release(tail);
    }
    /* Between classes automove waits out a whole window first. */
    for (i = 0; i <= o.automove_window; i++) {
        cache_tick();
    }
    for (i = 0; i < 1000; i++) {
        put_small(1000000 + i, 5000);
    }
    cache_slab_stats(1, &a);
    a_before = (unsigned)a.total_pages;
    cache_tick();
    slabs_mover_wait();
    cache_slab_stats(1, &a);
    cache_slab_stats(big, &b);
    is_int(a.total_pages, a_before - 1, "old class gave a page");
    is_int(b.total_pages, 4, "evicting class got it");
    cache_shutdown();
}

/* cache_memlimit lowered: automove hands pages back until -m holds. */
static void
test_lower_limit(void)
{
    struct cache_options o;
    struct cache_stats s;

    defaults(&o);
    o.mem_limit = 8u << 20;
    clock_init();
    if (cache_init(&o, 4) != 0) {
        exit(1);
    }
    for (unsigned i = 0; i < 8 * 10922; i++) {
        put_small(i, 10);
    }
    cache_stats(&s);
    is_int(s.total_malloced, 8u << 20, "memory full");
    is_int(cache_set_memlimit(4u << 20), 0, "limit lowered");
    for (int i = 0; i < 8; i++) {
        cache_tick();
        slabs_mover_wait();
    }
    cache_stats(&s);
    is_int(s.total_malloced, 4u << 20, "pages given back down to -m");
    is_int(s.limit_maxbytes, 4u << 20, "limit_maxbytes");
    ok(s.curr_items > 0 && s.curr_items <= 4 * 10922, "items fit in it");
    cache_shutdown();
}

int
main(void)
{
    test_default_table();
    test_variants();
    test_mem_limit();
    test_reassign();
    test_reassign_busy();
    test_reassign_chunks();
    test_starved_class();
    test_automove();
    test_lower_limit();
    return done_testing();
}
