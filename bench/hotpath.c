/*
 * hotpath: the cost of the read path's shared writes, without sockets.
 *
 * Threads look keys up in the storage layer in a tight loop and copy the
 * value out, as a worker answering "get" does, in one of two ways:
 *   ref   cache_get(): a reference taken under the key's lock, the value
 *         copied after it, the reference dropped (two atomic writes to
 *         the item's header, shared by every reader of the key)
 *   peek  cache_peek(): no lock and no reference; the value copied while
 *         the stripe's sequence count is watched (nothing shared is
 *         written; a lookup that must take the lock falls back to ref)
 *   set   cache_alloc() and cache_store() of the key, as a SET does (the
 *         thread's cache of free chunks, the LRU list lock, the stripe
 *         lock, the counters; the slab lock once a batch)
 *   set-locked  the same without the thread's cache of free chunks: the
 *         slab lock at every alloc and free
 * and, for scale, two loops with nothing but a counter:
 *   shared   one atomic add per step on a counter every thread adds to
 *   private  one add per step on a counter of the thread's own line
 * Keys: 1 (every thread on one key), 100, or 100000 drawn uniformly.
 * Each configuration runs at every thread count up to -t, for -s seconds
 * (per count), and prints million operations per second, for more
 * than one thread the speed-up over one thread, and for peek the share
 * of lookups that had to take the lock after all.
 *
 *   bench/hotpath [-t threads] [-s seconds] [-k keys,...] [-m modes,...]
 *                 [-c cpu-list]
 * -c pins thread i to the i-th CPU of the list (default: not pinned).
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "storage/base/affinity.h"
#include "storage/base/hash.h"
#include "storage/cache/cache.h"
#include "storage/cache/cache_open.h"
#include "storage/cache/cache_peek.h"
#include "storage/slab/item.h"

#define MAX_THREADS 64
#define VALUE_LEN 32

enum mode { MODE_REF, MODE_PEEK, MODE_SET, MODE_SET_LOCKED, MODE_SHARED,
            MODE_PRIVATE };
static const char *const mode_names[] = { "ref", "peek", "set",
                                          "set-locked", "shared",
                                          "private" };

struct key {
    char s[16];
    size_t n;
    uint32_t hv;
};

struct worker {
    pthread_t t;
    unsigned id;
    uint64_t ops;
    uint64_t locked;                    /* peek: lookups that took the lock */
    uint64_t rng;
    char buf[VALUE_LEN + 2];
    _Alignas(64) uint64_t mine;         /* private counter, own line */
} __attribute__((aligned(64)));

static struct key *keys;
static unsigned nkeys;
static enum mode mode;
static atomic_bool go, stop;
static _Alignas(64) _Atomic uint64_t shared_counter;
static struct cpu_list pins;

static uint64_t
next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void
copy_out(const struct item *it, struct worker *w)
{
    memcpy(w->buf, it->data + item_value_off(it), item_vlen(it) + 2);
}

static void
get_ref(const struct key *k, struct worker *w)
{
    enum cache_status st;
    struct item *it = cache_get(k->s, k->n, k->hv, &st);

    if (it != NULL) {
        copy_out(it, w);
        cache_release(it);
    }
}

/* A SET of k: a new item, filled, linked in place of the old one. */
static bool
store_key(const struct key *k)
{
    enum cache_status st;
    struct item *it = cache_alloc(k->s, k->n, k->hv, 0, 0, VALUE_LEN, &st);
    struct iovec iov;

    if (it == NULL) {
        return false;
    }
    item_value_iov(it, 0, &iov, 1);
    memset(iov.iov_base, 'v', VALUE_LEN);
    memcpy((char *)iov.iov_base + VALUE_LEN, "\r\n", 2);
    cache_store(it, CACHE_SET, 0);
    cache_release(it);
    return true;
}

static void
step(struct worker *w)
{
    const struct key *k = &keys[nkeys == 1 ? 0 : next_rand(&w->rng) % nkeys];
    struct prefetch_key pk;
    struct cache_view v;

    switch (mode) {
    case MODE_REF:
        get_ref(k, w);
        break;
    case MODE_PEEK:
        prefetch_key_set(&pk, k->s, k->n, k->hv);
        switch (cache_peek(&pk, VALUE_LEN, &v)) {
        case CACHE_PEEK_HIT:
            memcpy(w->buf, v.value, v.vlen + 2);
            if (cache_peek_end(&v)) {
                break;
            }
            /* fall through */
        case CACHE_PEEK_LOCK:
            w->locked++;
            get_ref(k, w);
            break;
        default:
            break;
        }
        break;
    case MODE_SET:
    case MODE_SET_LOCKED:
        store_key(k);
        break;
    case MODE_SHARED:
        atomic_fetch_add_explicit(&shared_counter, 1, memory_order_relaxed);
        break;
    case MODE_PRIVATE:
        __atomic_store_n(&w->mine, w->mine + 1, __ATOMIC_RELAXED);
        break;
    }
}

static void *
run(void *arg)
{
    struct worker *w = arg;

    if (mode != MODE_SET_LOCKED) {
        cache_thread_cache(true);       /* as a server's worker does */
    }
    while (!atomic_load(&go)) {
    }
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        for (int i = 0; i < 64; i++) {
            step(w);
        }
        w->ops += 64;
    }
    cache_thread_cache(false);
    return NULL;
}

static uint64_t locked_total;

static double
measure(unsigned nthreads, double seconds)
{
    static struct worker w[MAX_THREADS];
    struct timespec t0, t1;
    uint64_t total = 0;

    locked_total = 0;
    atomic_store(&go, false);
    atomic_store(&stop, false);
    for (unsigned i = 0; i < nthreads; i++) {
        memset(&w[i], 0, sizeof(w[i]));
        w[i].id = i;
        w[i].rng = 0x9e3779b97f4a7c15ULL * (i + 1);
        pthread_create(&w[i].t, NULL, run, &w[i]);
        if (pins.n > 0) {
            cpu_set_t set;

            CPU_ZERO(&set);
            CPU_SET(pins.cpu[i % pins.n], &set);
            pthread_setaffinity_np(w[i].t, sizeof(set), &set);
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    atomic_store(&go, true);
    usleep((useconds_t)(seconds * 1e6));
    atomic_store(&stop, true);
    for (unsigned i = 0; i < nthreads; i++) {
        pthread_join(w[i].t, NULL);
        total += w[i].ops;
        locked_total += w[i].locked;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)total / ((double)(t1.tv_sec - t0.tv_sec) +
                            (double)(t1.tv_nsec - t0.tv_nsec) / 1e9) / 1e6;
}

static int
store_keys(unsigned n)
{
    free(keys);
    keys = calloc(n, sizeof(*keys));
    if (keys == NULL) {
        return -1;
    }
    nkeys = n;
    for (unsigned i = 0; i < n; i++) {
        struct key *k = &keys[i];

        k->n = (size_t)snprintf(k->s, sizeof(k->s), "key:%u", i);
        k->hv = hash_key(k->s, k->n);
        if (!store_key(k)) {
            return -1;
        }
    }
    return 0;
}

/* One mode on the stored keys at each thread count up to maxt: a row
 * each.  -1 for an unknown mode. */
static int
run_mode(const char *name, unsigned nkeys_now, unsigned maxt, double seconds)
{
    double one = 0;

    for (mode = MODE_REF; mode <= MODE_PRIVATE; mode++) {
        if (strcmp(name, mode_names[mode]) == 0) {
            break;
        }
    }
    if (mode > MODE_PRIVATE) {
        fprintf(stderr, "hotpath: unknown mode %s\n", name);
        return -1;
    }
    for (unsigned t = 1; t <= maxt; t *= 2) {
        double mops = measure(t, seconds);
        char locked[16] = "-", speedup[16] = "-";

        if (mode == MODE_PEEK) {
            snprintf(locked, sizeof(locked), "%.1f%%",
                     100.0 * (double)locked_total / (mops * 1e6 * seconds));
        }
        if (t == 1) {
            one = mops;
        } else {
            snprintf(speedup, sizeof(speedup), "%.2fx", mops / one);
        }
        printf("%-8s %7u %7u %10.2f %8s %8s\n", name, nkeys_now, t, mops,
               speedup, locked);
        fflush(stdout);
    }
    return 0;
}

static int
usage(void)
{
    fprintf(stderr, "usage: hotpath [-t threads] [-s seconds] "
            "[-k keys,...] [-m ref,peek,set,set-locked,shared,private] "
            "[-c cpu-list]\n");
    return 1;
}

int
main(int argc, char **argv)
{
    unsigned maxt = 2;
    double seconds = 2;
    char keylist[256] = "1,100,100000", modelist[256] = "ref,peek";
    struct cache_options o;
    char err[256];
    int ch;

    while ((ch = getopt(argc, argv, "t:s:k:m:c:")) != -1) {
        switch (ch) {
        case 't': maxt = (unsigned)atoi(optarg); break;
        case 's': seconds = atof(optarg); break;
        case 'k': snprintf(keylist, sizeof(keylist), "%s", optarg); break;
        case 'm': snprintf(modelist, sizeof(modelist), "%s", optarg); break;
        case 'c':
            if (cpu_list_parse(optarg, &pins, err, sizeof(err)) != 0) {
                fprintf(stderr, "hotpath: -c: %s\n", err);
                return 1;
            }
            break;
        default:
            return usage();
        }
    }
    if (maxt < 1 || maxt > MAX_THREADS) {
        fprintf(stderr, "hotpath: -t 1..%d\n", MAX_THREADS);
        return 1;
    }
    clock_init();
    cache_options_defaults(&o);
    o.mem_limit = (size_t)256 << 20;
    o.hashpower = 18;
    o.lru_crawler = false;
    o.slab_reassign = false;
    o.slab_automove = 0;
    if (cache_init(&o, maxt) != 0) {
        fprintf(stderr, "hotpath: cache_init failed\n");
        return 1;
    }
    printf("%-8s %7s %7s %10s %8s %8s\n", "mode", "keys", "threads",
           "Mops/s", "speedup", "locked");
    for (char *ks = strtok(keylist, ","); ks != NULL; ks = strtok(NULL, ",")) {
        unsigned n = (unsigned)atoi(ks);
        char modes[256], *save = NULL;

        if (n == 0 || store_keys(n) != 0) {
            fprintf(stderr, "hotpath: cannot store %s keys\n", ks);
            return 1;
        }
        snprintf(modes, sizeof(modes), "%s", modelist);
        for (char *ms = strtok_r(modes, ",", &save); ms != NULL;
             ms = strtok_r(NULL, ",", &save)) {
            if (run_mode(ms, n, maxt, seconds) != 0) {
                return 1;
            }
        }
    }
    return 0;
}
