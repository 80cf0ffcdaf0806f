/*
 * stats.c: the per-worker counter blocks and their sum.
 */
#include "config.h"

#include "memcached-pm/base/stats.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct stats stats;

/* The sums at the last "stats reset"; guarded by base_lock. */
static struct thread_stats baseline;
static pthread_mutex_t base_lock = PTHREAD_MUTEX_INITIALIZER;

int
stats_init(unsigned nworkers)
{
    size_t bytes = nworkers * sizeof(*stats.threads);

    stats.threads = aligned_alloc(_Alignof(struct thread_stats), bytes);
    if (stats.threads == NULL) {
        return -1;
    }
    memset(stats.threads, 0, bytes);
    stats.nthreads = nworkers;
    return 0;
}

void
stats_destroy(void)
{
    free(stats.threads);
    stats.threads = NULL;
    stats.nthreads = 0;
}

/*
 * A thread_stats block is nothing but uint64_t counters (the THREAD rows
 * of STATS_GENERAL, then the CLASS_STATS of each class), so a sum or a
 * difference is taken word by word.
 */
#define NWORDS (sizeof(struct thread_stats) / sizeof(uint64_t))
_Static_assert(sizeof(struct thread_stats) % sizeof(uint64_t) == 0,
               "counters only");

static void
sum_raw(struct thread_stats *out)
{
    uint64_t *o = (uint64_t *)out;

    memset(out, 0, sizeof(*out));
    for (unsigned i = 0; i < stats.nthreads; i++) {
        const uint64_t *t = (const uint64_t *)&stats.threads[i];

        for (size_t w = 0; w < NWORDS; w++) {
            o[w] += __atomic_load_n(&t[w], __ATOMIC_RELAXED);
        }
    }
}

void
stats_sum(struct thread_stats *out)
{
    uint64_t *o = (uint64_t *)out;
    const uint64_t *b = (const uint64_t *)&baseline;

    sum_raw(out);
    pthread_mutex_lock(&base_lock);
    for (size_t w = 0; w < NWORDS; w++) {
        o[w] -= b[w];
    }
    pthread_mutex_unlock(&base_lock);
}

void
stats_class_total(const struct thread_stats *t, struct slab_stats *out)
{
    memset(out, 0, sizeof(*out));
    for (unsigned i = 0; i < CACHE_MAX_CLASSES; i++) {
#define ADD_CLASS(name, reply) out->name += t->slab[i].name;
        CLASS_STATS(ADD_CLASS)
#undef ADD_CLASS
    }
}

void
stats_reset(void)
{
    struct thread_stats now;

    sum_raw(&now);
    pthread_mutex_lock(&base_lock);
    baseline = now;
    pthread_mutex_unlock(&base_lock);
}
