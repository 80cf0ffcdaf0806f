/*
 * test_peek.c: the lock-free lookup (cache_peek) against writers.
 *
 * Readers peek at two hot keys as fast as they can while a writer
 * replaces and deletes one (values of changing length, every byte after
 * the version the same letter) and increments the other in place.  A
 * copy that cache_peek_end() accepts must be whole: one version's letter
 * throughout, the right length, a number that never goes backwards.  A
 * lookup the peek refuses goes through cache_get(), as a worker's does.
 * Every other lookup first walks its key as a batch does (prefetch.h), so
 * that the peek may take the walk's answer: the writer has had time to
 * change the key between the two, which the answer must not hide.
 */
#include "storage/cache/cache.h"
#include "storage/base/clock.h"
#include "storage/cache/cache_delta.h"
#include "storage/cache/cache_open.h"
#include "storage/cache/cache_peek.h"
#include "storage/index/prefetch.h"

#include "t/cache_test.h"
#include "t/tap.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#define READERS 2
#define ROUNDS 200000
#define VMAX 1000

static atomic_bool stop;
static atomic_uint_fast64_t acked_count;    /* the counter's last incr */

struct reader {
    pthread_t t;
    uint64_t peeked, refused, bad, walked;
    char why[128];
};

static void
put(const char *k, const char *v, size_t n)
{
    enum cache_status st;
    struct item *it = cache_alloc(k, strlen(k), test_hv(k), 0, 0,
                                  (uint32_t)n, &st);
    struct iovec iov;

    if (it == NULL) {
        return;
    }
    item_value_iov(it, 0, &iov, 1);
    memcpy(iov.iov_base, v, n);
    memcpy((char *)iov.iov_base + n, "\r\n", 2);
    cache_store(it, CACHE_SET, 0);
    cache_release(it);
}

/* "<version>:" then the version's letter up to n bytes. */
static size_t
hot_value(char *buf, unsigned version)
{
    size_t n = 8 + (version * 37) % (VMAX - 8);
    int head = snprintf(buf, 16, "%u:", version);

    memset(buf + head, 'a' + (int)(version % 26), n - (size_t)head);
    return n;
}

static void *
writer(void *arg)
{
    char buf[VMAX + 16];
    char num[32];
    uint64_t v;
    unsigned clsid;

    (void)arg;
    for (unsigned i = 1; i <= ROUNDS; i++) {
        put("hot", buf, hot_value(buf, i));
        if (i % 7 == 0) {
            cache_delete("hot", 3, test_hv("hot"), 0, NULL);
        }
        if (cache_delta("count", 5, test_hv("count"), true, 1, &v,
                        &clsid) ==
            CACHE_OK) {
            atomic_store(&acked_count, v);
        }
        if (i % 1000 == 0) {
            /* a longer number now and then: replaced, not in place */
            snprintf(num, sizeof(num), "%llu",
                     (unsigned long long)atomic_load(&acked_count));
            put("count", num, strlen(num));
        }
    }
    atomic_store(&stop, true);
    return NULL;
}

static bool
whole_hot(const char *v, uint32_t n, struct reader *r)
{
    unsigned version = (unsigned)strtoul(v, NULL, 10);
    char want[VMAX + 16];

    if (n != hot_value(want, version) || memcmp(v, want, n) != 0 ||
        memcmp(v + n, "\r\n", 2) != 0) {
        snprintf(r->why, sizeof(r->why), "torn hot value, %u bytes", n);
        return false;
    }
    return true;
}

static bool
sane_count(const char *v, uint32_t n, uint64_t floor, uint64_t *last,
           struct reader *r)
{
    char buf[32];
    uint64_t c;

    if (n == 0 || n >= sizeof(buf) || memcmp(v + n, "\r\n", 2) != 0) {
        snprintf(r->why, sizeof(r->why), "torn counter, %u bytes", n);
        return false;
    }
    memcpy(buf, v, n);
    buf[n] = '\0';
    c = strtoull(buf, NULL, 10);
    if (c < floor || c < *last) {
        snprintf(r->why, sizeof(r->why), "counter %llu after %llu",
                 (unsigned long long)c, (unsigned long long)floor);
        return false;
    }
    *last = c;
    return true;
}

static void *
reader(void *arg)
{
    struct reader *r = arg;
    static const char *const keys[2] = { "hot", "count" };
    char copy[VMAX + 16];
    uint64_t last = 0;

    for (unsigned i = 0; !atomic_load(&stop); i++) {
        const char *k = keys[i & 1];
        struct prefetch_key pk;
        uint64_t floor;
        struct cache_view v;
        enum cache_peek p;
        uint32_t n = 0;
        bool good;

        prefetch_key_set(&pk, k, strlen(k), test_hv(k));
        if (i & 2) {
            prefetch_walk(&pk, 1, false);
            r->walked += pk.sure;
        }
        floor = atomic_load(&acked_count);
        p = cache_peek(&pk, VMAX, &v);

        if (p == CACHE_PEEK_HIT) {
            n = v.vlen;
            memcpy(copy, v.value, n + 2);
            if (!cache_peek_end(&v)) {
                p = CACHE_PEEK_LOCK;
            }
        }
        if (p == CACHE_PEEK_LOCK) {
            struct item *it = test_get(k);

            r->refused++;
            if (it != NULL) {
                cache_release(it);
            }
            continue;
        }
        if (p == CACHE_PEEK_MISS) {
            continue;
        }
        r->peeked++;
        good = (i & 1) ? sane_count(copy, n, floor, &last, r)
                       : whole_hot(copy, n, r);
        if (!good) {
            r->bad++;
        }
    }
    return NULL;
}

/* A peek at k with a walk's answer taken before `change` ran: "MISS",
 * "LOCK", or the value. */
static const char *
peek_after(const char *k, void (*change)(const char *k), bool *sure)
{
    static char out[VMAX + 16];
    struct prefetch_key pk;
    struct cache_view v;

    prefetch_key_set(&pk, k, strlen(k), test_hv(k));
    prefetch_walk(&pk, 1, false);
    *sure = pk.sure;
    if (change != NULL) {
        change(k);
    }
    switch (cache_peek(&pk, VMAX, &v)) {
    case CACHE_PEEK_MISS:
        return "MISS";
    case CACHE_PEEK_HIT:
        snprintf(out, sizeof(out), "%.*s", (int)v.vlen, v.value);
        return cache_peek_end(&v) ? out : "LOCK";
    default:
        return "LOCK";
    }
}

static void
put_new(const char *k)
{
    put(k, "new", 3);
}

static void
drop(const char *k)
{
    cache_delete(k, strlen(k), test_hv(k), 0, NULL);
}

/* The walk's answer is taken only while nothing changed the key. */
static void
test_walk_answer(void)
{
    const char *got;
    bool sure;

    put("w", "old", 3);
    got = peek_after("w", NULL, &sure);
    is_str(got, "old", "a walked key's value");
    ok(sure, "... the walk was sure of it");
    got = peek_after("w", put_new, &sure);
    is_str(got, "new",
           "replaced after the walk: the new value, not the walk's item");
    got = peek_after("w", drop, &sure);
    is_str(got, "MISS", "deleted after the walk: a miss");
    got = peek_after("w", NULL, &sure);
    is_str(got, "MISS", "an absent key walked");
    ok(sure, "... the walk was sure it is absent");
    got = peek_after("w", put_new, &sure);
    is_str(got, "new", "stored after the walk found nothing: the value");
    drop("w");
}

int
main(void)
{
    struct cache_options o;
    struct reader r[READERS];
    pthread_t w;
    uint64_t peeked = 0, bad = 0, walked = 0;

    clock_init();
    test_cache_options(&o);
    if (cache_init(&o, READERS + 1) != 0) {
        return 1;
    }
    test_walk_answer();
    put("count", "0", 1);
    memset(r, 0, sizeof(r));
    for (int i = 0; i < READERS; i++) {
        pthread_create(&r[i].t, NULL, reader, &r[i]);
    }
    pthread_create(&w, NULL, writer, NULL);
    pthread_join(w, NULL);
    for (int i = 0; i < READERS; i++) {
        pthread_join(r[i].t, NULL);
        peeked += r[i].peeked;
        bad += r[i].bad;
        walked += r[i].walked;
        if (r[i].bad != 0) {
            printf("# reader %d: %s\n", i, r[i].why);
        }
    }
    printf("# %llu copies served without the lock\n",
           (unsigned long long)peeked);
    ok(peeked > 1000, "readers were served without the lock");
    ok(walked > 1000, "walks were sure of their answer");
    is_int(bad, 0, "every copy accepted was whole and current");
    ok(strcmp(test_val("count"), "200000") == 0, "every incr counted");
    cache_shutdown();
    return done_testing();
}
