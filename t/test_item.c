/*
 * test_item.c: item size math, the -I limit, chunked values and
 * references.
 */
#include "storage/cache/cache.h"
#include "storage/base/hash.h"
#include "storage/cache/cache_open.h"
#include "storage/lru/lru.h"
#include "storage/lru/maint.h"
#include "storage/slab/item.h"
#include "t/cache_test.h"
#include "t/tap.h"

#include <stdlib.h>
#include <string.h>

static struct cache_options opts;

static void
defaults(struct cache_options *o)
{
    test_cache_options(o);
}

static void
test_sizes(void)
{
    enum cache_status st;
    struct item *it;

    is_int(sizeof(struct item), 48, "48-byte header");
    is_int(item_size(3, 0, 3, true), 65, "foo/3 bytes is 65 (me size=)");
    is_int(item_size(3, 0, 3, false), 57, "without cas");
    is_int(item_size(3, 5, 3, true), 69, "client flags add 4");
    is_int(item_size(1, 0, 1048516, true), 1048576, "largest value fits");
    it = cache_alloc("k", 1, hash_key("k", 1), 0, 0, 1048516, &st);
    ok(it != NULL && st == CACHE_OK, "1048516 bytes for key k allocates");
    if (it != NULL) {
        is_int(item_ntotal(it), 1048576, "ntotal of it");
        cache_release(it);
    }
    it = cache_alloc("k", 1, hash_key("k", 1), 0, 0, 1048517, &st);
    ok(it == NULL && st == CACHE_TOO_LARGE, "one more is too large");
    it = cache_alloc("foo", 3, hash_key("foo", 3), 9, 77, 3, &st);
    is_mem(item_key(it), item_nkey(it), "foo", "key");
    is_int(item_client_flags(it), 9, "flags");
    is_int(item_exptime(it), 77, "exptime");
    is_int(item_vlen(it), 3, "vlen");
    is_int(item_clsid(it), 1, "class 1");
    is_int(item_lru(it), ITEM_LRU_HOT, "not linked: HOT bits");
    cache_release(it);
}

/* Fill a value through item_value_iov() with a position pattern. */
static void
write_pattern(struct item *it, uint32_t vlen)
{
    struct iovec iov[8];
    size_t off = 0, n;

    while ((n = item_value_iov(it, off, iov, 8)) > 0) {
        for (size_t i = 0; i < n; i++) {
            unsigned char *p = iov[i].iov_base;

            for (size_t j = 0; j < iov[i].iov_len; j++, off++) {
                p[j] = off < vlen ? (unsigned char)(off * 7 + 3)
                     : off == vlen ? '\r' : '\n';
            }
        }
    }
}

static bool
check_pattern(const struct item *it, uint32_t vlen)
{
    struct iovec iov;
    size_t off = 0;

    while (item_value_iov(it, off, &iov, 1) == 1) {
        const unsigned char *p = iov.iov_base;

        for (size_t j = 0; j < iov.iov_len; j++, off++) {
            unsigned char want = off < vlen ? (unsigned char)(off * 7 + 3)
                               : off == vlen ? '\r' : '\n';
            if (p[j] != want) {
                return false;
            }
        }
    }
    return off == (size_t)vlen + 2;
}

static void
test_chunked(void)
{
    uint32_t vlen = 1000000;
    uint32_t hv = hash_key("big", 3);
    enum cache_status st;
    struct item *it = cache_alloc("big", 3, hv, 0, 0, vlen, &st);
    struct iovec iov[4];

    ok(it != NULL, "chunked item allocated");
    if (it == NULL) {
        return;
    }
    ok(item_value_iov(it, 0, iov, 4) >= 2, "value spans chunks");
    write_pattern(it, vlen);
    ok(item_value_crlf_ok(it), "crlf at the end of the chain");
    is_int(cache_store(it, CACHE_SET, 0), CACHE_STORED, "stored");
    cache_release(it);
    it = cache_get("big", 3, hv, &st);
    ok(it != NULL && check_pattern(it, vlen), "round trip through iovs");
    ok(item_value_iov(it, vlen + 1, iov, 4) == 1 &&
       *(char *)iov[0].iov_base == '\n', "iov from an offset");
    is_int(item_value_iov(it, vlen + 2, iov, 4), 0, "nothing past the end");
    is_int(item_ntotal(it), item_size(3, 0, vlen, true), "ntotal");
    cache_release(it);
    it = cache_alloc("big", 3, hv, 0, 0, 3, &st);
    memcpy(item_value(it), "xyz\r\n", 5);
    is_int(cache_store(it, CACHE_APPEND, 0), CACHE_STORED, "append to it");
    cache_release(it);
    it = cache_get("big", 3, hv, &st);
    {
        char tail[5];
        struct iovec v;
        size_t got = 0;

        while (got < 5 && item_value_iov(it, vlen + got, &v, 1) == 1) {
            size_t n = v.iov_len < 5 - got ? v.iov_len : 5 - got;

            memcpy(tail + got, v.iov_base, n);
            got += n;
        }
        is_int(item_vlen(it), vlen + 3, "appended length");
        is_mem(tail, got, "xyz\r\n", "appended bytes after the chain");
    }
    cache_release(it);
    is_int(cache_delete("big", 3, hv, 0, NULL), CACHE_DELETED, "deleted");
}

static void
test_refcounts(void)
{
    uint32_t hv = hash_key("r", 1);
    enum cache_status st;
    struct item *a, *b, *old;
    char buf[16];

    a = cache_alloc("r", 1, hv, 0, 0, 3, &st);
    is_int(a->refcount, 1, "alloc gives one reference");
    memcpy(item_value(a), "one\r\n", 5);
    cache_store(a, CACHE_SET, 0);
    is_int(a->refcount, 2, "linking adds one");
    cache_release(a);
    old = cache_get("r", 1, hv, &st);
    is_int(old->refcount, 2, "a reader adds one");
    b = cache_alloc("r", 1, hv, 0, 0, 3, &st);
    memcpy(item_value(b), "two\r\n", 5);
    cache_store(b, CACHE_SET, 0);
    cache_release(b);
    is_int(old->refcount, 1, "replaced: only the reader holds it");
    ok(!(old->flags & ITEM_LINKED), "no longer linked");
    is_mem(buf, item_value_copy(old, buf, sizeof(buf)), "one\r\n",
           "reader's bytes intact after replace");
    cache_release(old);
    b = cache_get("r", 1, hv, &st);
    is_mem(buf, item_value_copy(b, buf, sizeof(buf)), "two\r\n", "new one");
    cache_release(b);
}

/* The relaxed key compare against memcmp: keys of 0..40 bytes at an
 * aligned and a misaligned place, equal, differing at each byte, and
 * equal with different bytes after the key (which must not count). */
static void
test_key_equal(void)
{
    _Alignas(8) char item[64];
    char probe[48];
    unsigned bad = 0;

    for (size_t off = 4; off <= 5; off++) {
        char *ik = item + off;

        for (size_t n = 0; n <= 40; n++) {
            for (size_t i = 0; i < n; i++) {
                ik[i] = probe[i] = (char)('a' + (i * 5 + n) % 26);
            }
            memset(ik + n, '!', sizeof(item) - off - n);
            bad += !item_key_equal_relaxed(ik, probe, n);
            for (size_t at = 0; at < n; at++) {
                probe[at] ^= 0x20;
                bad += item_key_equal_relaxed(ik, probe, n);
                probe[at] ^= 0x20;
            }
        }
    }
    is_int(bad, 0, "keys compare as memcmp does, the bytes after ignored");
}

int
main(void)
{
    test_key_equal();
    clock_init();
    defaults(&opts);
    if (cache_init(&opts, 4) != 0) {
        return 1;
    }
    /* The maintainer's passing references would blur the counts. */
    maint_stop();
    test_sizes();
    test_chunked();
    test_refcounts();
    cache_shutdown();
    return done_testing();
}
