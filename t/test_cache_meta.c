/*
 * test_cache_meta.c: the meta protocol's storage operations (cache_mget,
 * cache_mstore, cache_mdelete, cache_mdelta) with each of their knobs.
 */
#include "storage/cache/cache.h"
#include "storage/base/hash.h"
#include "storage/cache/cache_delta.h"
#include "storage/cache/cache_open.h"
#include "storage/slab/item.h"
#include "t/cache_test.h"
#include "t/tap.h"

#include <string.h>

static struct cache_options opts;

static void
defaults(struct cache_options *o)
{
    test_cache_options(o);
}

/* A filled, unlinked item for cache_store()/cache_mstore(). */
static struct item *
mk(const char *k, const char *v, uint32_t flags, rel_time_t exp)
{
    enum cache_status st;
    struct item *it = cache_alloc(k, strlen(k), test_hv(k), flags, exp,
                                  (uint32_t)strlen(v), &st);
    struct iovec iov;

    if (it != NULL) {
        item_value_iov(it, 0, &iov, 1);
        memcpy(iov.iov_base, v, strlen(v));
        memcpy((char *)iov.iov_base + strlen(v), "\r\n", 2);
    }
    return it;
}

static enum cache_status
put(const char *k, const char *v, uint32_t flags, rel_time_t exp)
{
    struct item *it = mk(k, v, flags, exp);
    enum cache_status st;

    if (it == NULL) {
        return CACHE_NO_MEMORY;
    }
    st = cache_store(it, CACHE_SET, 0);
    cache_release(it);
    return st;
}

static enum cache_status
mput(const char *k, const char *v, rel_time_t exp, struct cache_mstore *a)
{
    struct item *it = mk(k, v, 0, exp);
    enum cache_status st;

    if (it == NULL) {
        return CACHE_NO_MEMORY;
    }
    st = cache_mstore(it, a);
    cache_release(it);
    return st;
}

/* A meta get with the given knobs; NULL on a miss.  Caller releases. */
static struct item *
mg(const char *k, struct cache_mget *a)
{
    enum cache_status st;

    return cache_mget(k, strlen(k), test_hv(k), a, &st);
}

/* One field of k as a plain get sees it: 'c' cas, 'e' exptime, 'f'
 * flags, 's' ITEM_STALE, 'z' ITEM_TOKEN_SENT, 'l' vlen; -1 when missing. */
static int64_t
peek(const char *k, char what)
{
    struct item *it = test_get(k);
    int64_t v = -1;

    if (it == NULL) {
        return -1;
    }
    switch (what) {
    case 'c': v = (int64_t)item_cas(it); break;
    case 'e': v = item_exptime(it); break;
    case 'f': v = item_client_flags(it); break;
    case 's': v = (item_flags(it) & ITEM_STALE) != 0; break;
    case 'z': v = (item_flags(it) & ITEM_TOKEN_SENT) != 0; break;
    case 'l': v = item_vlen(it); break;
    default: break;
    }
    cache_release(it);
    return v;
}

static void
test_vivify(void)
{
    rel_time_t now = clock_now();
    struct cache_mget a = { .vivify = true, .vivify_exptime = now + 30 };
    enum cache_status st;
    struct item *it;

    it = cache_mget("v", 1, test_hv("v"), &a, &st);
    ok(it != NULL && a.created && a.win, "N on a miss: created, wins");
    ok(!a.token_sent && !a.stale && !a.fetched, "fresh item's state");
    is_int(st, CACHE_MISS, "status says it was a miss");
    is_int(item_vlen(it), 0, "empty value");
    is_int(item_exptime(it), now + 30, "vivify exptime");
    is_int(item_cas(it), 2, "first unique");
    cache_release(it);
    memset(&a, 0, sizeof(a));
    a.vivify = true;
    a.vivify_exptime = now + 30;
    it = mg("v", &a);
    ok(it != NULL && !a.created && !a.win, "second mg: a hit, no win");
    ok(a.token_sent, "second mg sees the token sent (Z)");
    ok(a.fetched, "the vivifying mg bumped it (h1)");
    cache_release(it);

    memset(&a, 0, sizeof(a));
    a.vivify = true;
    a.vivify_cas = 9001;
    it = mg("v2", &a);
    is_int(it != NULL ? item_cas(it) : 0, 9001, "E sets the vivified cas");
    cache_release(it);
    memset(&a, 0, sizeof(a));
    it = cache_mget("nope", 4, test_hv("nope"), &a, &st);
    ok(it == NULL && st == CACHE_MISS && !a.created, "miss without N");
}

static void
test_recache(void)
{
    rel_time_t now = clock_now();
    struct cache_mget a = { .recache = true, .recache_before = now + 30 };
    struct item *it;

    put("r", "x", 0, now + 10);
    it = mg("r", &a);
    ok(it != NULL && a.win && !a.token_sent, "R under the threshold wins");
    cache_release(it);
    it = mg("r", &a);
    ok(it != NULL && !a.win && a.token_sent, "then only Z");
    cache_release(it);

    put("r", "x", 0, now + 100);
    it = mg("r", &a);
    ok(it != NULL && !a.win && !a.token_sent, "R over the threshold");
    cache_release(it);
    put("r", "x", 0, 0);
    it = mg("r", &a);
    ok(it != NULL && !a.win, "R never wins on an item without TTL");
    cache_release(it);
}

static void
test_touch_and_bump(void)
{
    rel_time_t now = clock_now();
    struct cache_mget a = { .no_bump = true };
    struct item *it;

    put("b", "x", 0, now + 50);
    it = mg("b", &a);
    ok(it != NULL && !a.fetched, "not fetched yet");
    is_int(a.atime, now, "atime is the store time");
    cache_release(it);
    it = mg("b", &a);
    ok(it != NULL && !a.fetched, "u did not mark it fetched");
    cache_release(it);
    memset(&a, 0, sizeof(a));
    a.touch = true;
    a.exptime = now + 500;
    it = mg("b", &a);
    ok(!a.fetched && a.exptime_before == now + 50, "state before touch");
    is_int(item_exptime(it), now + 500, "T sets exptime");
    cache_release(it);
    memset(&a, 0, sizeof(a));
    it = mg("b", &a);
    ok(a.fetched, "a plain mg marked it fetched");
    is_int(a.exptime_before, now + 500, "touch kept");
    cache_release(it);
}

static void
test_md_invalidate(void)
{
    rel_time_t now = clock_now();
    struct cache_mdelete d = { .invalidate = true, .touch = true,
                               .exptime = now + 30 };
    struct cache_mget a = { 0 };
    uint64_t c0;
    struct item *it;

    put("s", "old", 0, 0);
    c0 = (uint64_t)peek("s", 'c');
    is_int(cache_mdelete("s", 1, test_hv("s"), &d), CACHE_DELETED, "md I");
    is_str(test_val("s"), "old", "the value stays");
    ok((uint64_t)peek("s", 'c') > c0, "with a new cas");
    is_int(peek("s", 'e'), now + 30, "and T's exptime");
    it = mg("s", &a);
    ok(it != NULL && a.stale && a.win && !a.token_sent, "stale: X W");
    cache_release(it);
    it = mg("s", &a);
    ok(it != NULL && a.stale && !a.win && a.token_sent, "then Z X");
    cache_release(it);

    d.touch = false;
    d.new_cas = 4242;
    cache_mdelete("s", 1, test_hv("s"), &d);
    is_int(peek("s", 'c'), 4242, "md I E sets the cas");
    is_int(peek("s", 'z'), 0, "md I clears the token");
    is_int(peek("s", 'e'), now + 30, "no T: exptime kept");
    it = mg("s", &a);
    ok(it != NULL && a.win, "the next mg wins again");
    cache_release(it);
}

static void
test_ms_invalidate(void)
{
    rel_time_t now = clock_now();
    struct cache_mget g = { 0 };
    struct cache_mstore a = { .op = CACHE_SET, .compare = true,
                              .invalidate = true };
    uint64_t c;
    struct item *it;

    put("i", "v1", 0, now + 100);
    it = mg("i", &(struct cache_mget){ .recache = true,
                                        .recache_before = now + 200 });
    cache_release(it);
    c = (uint64_t)peek("i", 'c');
    a.compare_cas = c - 1;
    is_int(mput("i", "v0", 0, &a), CACHE_STORED, "lower cas with I");
    is_str(test_val("i"), "v0", "stored");
    is_int(peek("i", 'e'), now + 100, "old exptime kept");
    is_int(peek("i", 's'), 1, "stale");
    is_int(peek("i", 'z'), 1, "token sent carried over");
    ok(a.cas > c && a.cas == (uint64_t)peek("i", 'c'), "out cas");
    it = mg("i", &g);
    ok(it != NULL && g.stale && g.token_sent && !g.win, "mg: Z X");
    cache_release(it);

    a.compare_cas = (uint64_t)peek("i", 'c') + 5;
    is_int(mput("i", "v9", 0, &a), CACHE_EXISTS, "higher cas: EX");
    a.invalidate = false;
    a.compare_cas = 1;
    is_int(mput("i", "v9", 0, &a), CACHE_EXISTS, "lower cas without I");
    a.compare_cas = (uint64_t)peek("i", 'c');
    is_int(mput("i", "v2", now + 7, &a), CACHE_STORED, "match");
    is_int(peek("i", 's'), 0, "a matching store is not stale");
    is_int(peek("i", 'e'), now + 7, "and has its own exptime");
}

static void
test_ms_compare(void)
{
    struct cache_mstore a = { .op = CACHE_SET, .compare = true };

    a.compare_cas = 12345678;
    is_int(mput("cmp", "x", 0, &a), CACHE_NOT_FOUND, "C on a miss: NF");
    a.op = CACHE_REPLACE;
    is_int(mput("cmp", "x", 0, &a), CACHE_NOT_FOUND, "MR C on a miss");
    a.op = CACHE_APPEND;
    is_int(mput("cmp", "x", 0, &a), CACHE_NOT_STORED, "MA C on a miss");
    a.op = CACHE_ADD;
    is_int(mput("cmp", "a", 0, &a), CACHE_STORED, "ME C on a miss");
    is_int(mput("cmp", "b", 0, &a), CACHE_NOT_STORED, "ME C on a hit");

    a.op = CACHE_SET;
    is_int(mput("cmp", "y", 0, &a), CACHE_EXISTS, "set C mismatch");
    is_str(test_val("cmp"), "a", "unchanged");
    a.compare_cas = (uint64_t)peek("cmp", 'c');
    is_int(mput("cmp", "y", 0, &a), CACHE_STORED, "set C match");
    ok(a.cas == (uint64_t)peek("cmp", 'c') && a.vlen == 1, "out cas, vlen");
    a.op = CACHE_REPLACE;
    is_int(mput("cmp", "z", 0, &a), CACHE_EXISTS, "replace C mismatch");
    a.compare_cas = (uint64_t)peek("cmp", 'c');
    is_int(mput("cmp", "z", 0, &a), CACHE_STORED, "replace C match");
    a.op = CACHE_APPEND;
    a.compare_cas = 1;
    is_int(mput("cmp", "!", 0, &a), CACHE_EXISTS, "append C mismatch");
    a.compare_cas = (uint64_t)peek("cmp", 'c');
    is_int(mput("cmp", "!!", 0, &a), CACHE_STORED, "append C match");
    is_str(test_val("cmp"), "z!!", "appended");
    ok(a.cas == (uint64_t)peek("cmp", 'c') && a.vlen == 3,
       "out: the combined item");
}

static void
test_append_vivify(void)
{
    rel_time_t now = clock_now();
    struct cache_mstore a = { .op = CACHE_APPEND, .vivify = true,
                              .vivify_exptime = now + 40 };

    is_int(mput("av", "one", now + 999, &a), CACHE_STORED,
           "append N on a miss");
    is_str(test_val("av"), "one", "value stored as is");
    is_int(peek("av", 'e'), now + 40, "with the vivify exptime");
    a.op = CACHE_PREPEND;
    is_int(mput("av", "zero", 0, &a), CACHE_STORED, "prepend N on a hit");
    is_str(test_val("av"), "zeroone", "concatenated");
    is_int(peek("av", 'e'), now + 40, "old exptime kept");
    is_int(a.vlen, 7, "out vlen after prepend");
    a.vivify = false;
    is_int(mput("av2", "x", 0, &a), CACHE_NOT_STORED, "no N: NS");
}

static void
test_explicit_cas(void)
{
    struct cache_mstore a = { .op = CACHE_SET, .new_cas = 777777 };
    uint64_t c;

    is_int(mput("e", "x", 0, &a), CACHE_STORED, "ms E");
    is_int(peek("e", 'c'), 777777, "item has E's cas");
    is_int(a.cas, 777777, "out cas");
    a.new_cas = 0;
    mput("e", "y", 0, &a);
    c = a.cas;
    ok(c != 777778 && c < 777777, "E does not move the counter");
    a.op = CACHE_APPEND;
    a.new_cas = 31337;
    mput("e", "z", 0, &a);
    is_int(peek("e", 'c'), 31337, "append E");
    is_str(test_val("e"), "yz", "appended");
}

static void
test_md(void)
{
    rel_time_t now = clock_now();
    struct cache_mdelete d = { .tombstone = true };
    uint64_t c;

    put("t", "hello", 42, now + 50);
    c = (uint64_t)peek("t", 'c');
    is_int(cache_mdelete("t", 1, test_hv("t"), &d), CACHE_DELETED, "md x");
    is_int(peek("t", 'l'), 0, "empty value");
    is_int(peek("t", 'f'), 0, "client flags from F (none: 0)");
    is_int(peek("t", 'e'), 0, "exptime from T (none: never)");
    is_int((uint64_t)peek("t", 'c'), c, "the old cas");
    ok(d.clsid != 0, "clsid out");
    d.new_cas = 55555;
    d.client_flags = 7;
    d.exptime = now + 9;
    cache_mdelete("t", 1, test_hv("t"), &d);
    is_int(peek("t", 'c'), 55555, "md x E");
    is_int(peek("t", 'f'), 7, "md x F");
    is_int(peek("t", 'e'), now + 9, "md x T");

    memset(&d, 0, sizeof(d));
    d.compare = true;
    d.compare_cas = 1;
    is_int(cache_mdelete("t", 1, test_hv("t"), &d), CACHE_EXISTS,
           "md C mismatch");
    d.compare_cas = 55555;
    is_int(cache_mdelete("t", 1, test_hv("t"), &d), CACHE_DELETED,
           "md C match");
    is_int(peek("t", 'l'), -1, "gone");
    is_int(cache_mdelete("t", 1, test_hv("t"), &d), CACHE_NOT_FOUND,
           "md on a miss");
    d.compare = false;
    d.invalidate = true;
    is_int(cache_mdelete("t", 1, test_hv("t"), &d), CACHE_NOT_FOUND,
           "md I on a miss");
}

static enum cache_status
ma(const char *k, struct cache_mdelta *a)
{
    return cache_mdelta(k, strlen(k), test_hv(k), a);
}

static void
test_ma(void)
{
    rel_time_t now = clock_now();
    struct cache_mdelta a = { .incr = true, .delta = 1, .vivify = true,
                              .vivify_exptime = now + 60, .initial = 10 };

    is_int(ma("n", &a), CACHE_OK, "ma N on a miss");
    ok(a.created && a.value == 10, "created holding J");
    is_str(test_val("n"), "10", "stored as text");
    is_int(a.exptime_after, now + 60, "vivify exptime");
    is_int(a.cas, peek("n", 'c'), "out cas");
    ok(a.clsid != 0, "clsid");
    is_int(ma("n", &a), CACHE_OK, "ma on the hit");
    ok(!a.created && a.value == 11, "incremented, not created");
    a.incr = false;
    a.delta = 100;
    ma("n", &a);
    is_int(a.value, 0, "decr stops at 0");

    a.compare = true;
    a.compare_cas = 3;
    is_int(ma("n", &a), CACHE_EXISTS, "C mismatch");
    is_str(test_val("n"), "0 ", "unchanged");
    a.compare_cas = (uint64_t)peek("n", 'c');
    a.incr = true;
    a.delta = 5;
    a.new_cas = 8888;
    a.touch = true;
    a.exptime = now + 5;
    is_int(ma("n", &a), CACHE_OK, "C match");
    is_int(a.value, 5, "value");
    ok(a.cas == 8888 && peek("n", 'c') == 8888, "E");
    ok(a.exptime_after == now + 5 && peek("n", 'e') == now + 5, "T");

    memset(&a, 0, sizeof(a));
    a.incr = true;
    a.delta = 1;
    is_int(ma("none", &a), CACHE_NOT_FOUND, "no N: NF");
    put("word", "abc", 0, 0);
    is_int(ma("word", &a), CACHE_NON_NUMERIC, "non-numeric");
}

static void
test_refcount_overflow(void)
{
    struct cache_mget a = { .vivify = true };
    struct item *it;

    put("busy", "x", 0, 0);
    it = test_get("busy");
    for (int i = 0; i < 60000; i++) {
        item_ref_incr(it);
    }
    ok(mg("busy", &a) == NULL && !a.created,
       "refcount limit: a miss, and no second item vivified");
    for (int i = 0; i < 60000; i++) {
        item_ref_decr(it);
    }
    cache_release(it);
    it = mg("busy", &a);
    ok(it != NULL && !a.created, "found again once let go");
    cache_release(it);
}

/* -C: no cas kept; memcached's cas test then never matches a set. */
static void
test_no_cas(void)
{
    struct cache_mstore a = { .op = CACHE_SET, .compare = true,
                              .compare_cas = 0 };
    struct item *it;

    cache_shutdown();
    opts.use_cas = false;
    if (cache_init(&opts, 4) != 0) {
        ok(0, "re-init without cas");
        return;
    }
    put("nc", "a", 0, 0);
    is_int(peek("nc", 'c'), 0, "no cas kept");
    it = mk("nc", "b", 0, 0);
    is_int(cache_store(it, CACHE_CAS, 0), CACHE_EXISTS, "cas 0: EXISTS");
    cache_release(it);
    is_int(mput("nc", "b", 0, &a), CACHE_EXISTS, "ms C0: EX");
    a.op = CACHE_APPEND;
    a.compare_cas = 5;
    is_int(mput("nc", "c", 0, &a), CACHE_STORED, "append ignores C");
    is_str(test_val("nc"), "ac", "appended");
}

int
main(void)
{
    clock_init();
    defaults(&opts);
    if (cache_init(&opts, 4) != 0) {
        return 1;
    }
    test_vivify();
    test_recache();
    test_touch_and_bump();
    test_md_invalidate();
    test_ms_invalidate();
    test_ms_compare();
    test_append_vivify();
    test_explicit_cas();
    test_md();
    test_ma();
    test_refcount_overflow();
    test_no_cas();
    cache_shutdown();
    return done_testing();
}
