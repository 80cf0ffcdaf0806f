/*
 * stats.c: the per-worker counter blocks and their sum.
 */
#include "config.h"

#include "memcached-pm/stats.h"

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
    stats.threads = calloc(nworkers, sizeof(*stats.threads));
    if (stats.threads == NULL) {
        return -1;
    }
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

#define LOAD(f) __atomic_load_n(&(f), __ATOMIC_RELAXED)
#define SUM_THREAD(name) out->name += LOAD(t->name);
#define SUM_SLAB(name) out->slab[c].name += LOAD(t->slab[c].name);

static void
sum_raw(struct thread_stats *out)
{
    memset(out, 0, sizeof(*out));
    for (unsigned i = 0; i < stats.nthreads; i++) {
        const struct thread_stats *t = &stats.threads[i];

        THREAD_STATS(SUM_THREAD)
        for (unsigned c = 0; c < CACHE_MAX_CLASSES; c++) {
            SLAB_STATS(SUM_SLAB)
        }
    }
}

#define SUB_THREAD(name) out->name -= baseline.name;
#define SUB_SLAB(name) out->slab[c].name -= baseline.slab[c].name;

void
stats_sum(struct thread_stats *out)
{
    sum_raw(out);
    pthread_mutex_lock(&base_lock);
    THREAD_STATS(SUB_THREAD)
    for (unsigned c = 0; c < CACHE_MAX_CLASSES; c++) {
        SLAB_STATS(SUB_SLAB)
    }
    pthread_mutex_unlock(&base_lock);
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
