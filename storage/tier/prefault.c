/*
 * prefault.c: a memory file's pages faulted in ahead of their first use
 * (prefault.h).
 */
#include "storage/tier/prefault.h"
#include "storage/base/affinity.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>

/* Pages kept faulted in past the furthest handed out (32 MB of 1 MB
 * pages: a few hundred milliseconds of the fastest load). */
#define PREFAULT_AHEAD 32

struct prefault {
    char           *first;
    size_t          page_size;
    size_t          npages;
    _Atomic size_t  frontier;   /* past the furthest page handed out */
    _Atomic size_t  faulted;     /* pages below it faulted in */
    pthread_mutex_t lock;
    pthread_cond_t  cond;
    bool            stop;       /* under lock */
    pthread_t       thread;
};

static size_t
wanted(const struct prefault *w)
{
    size_t want = atomic_load_explicit(&w->frontier, memory_order_relaxed) +
                  PREFAULT_AHEAD;

    return want < w->npages ? want : w->npages;
}

static void *
prefault_main(void *arg)
{
    struct prefault *w = arg;

    pthread_setname_np(pthread_self(), "mc-prefault");
    pthread_mutex_lock(&w->lock);
    while (!w->stop) {
        size_t i = atomic_load_explicit(&w->faulted, memory_order_relaxed);

        if (i >= wanted(w)) {
            pthread_cond_wait(&w->cond, &w->lock);
            continue;
        }
        pthread_mutex_unlock(&w->lock);
        (void)madvise(w->first + i * w->page_size, w->page_size,
                      MADV_POPULATE_WRITE);
        atomic_store_explicit(&w->faulted, i + 1, memory_order_relaxed);
        pthread_mutex_lock(&w->lock);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

struct prefault *
prefault_start(char *first, size_t page_size, size_t npages)
{
    struct prefault *w = calloc(1, sizeof(*w));

    if (w == NULL) {
        return NULL;
    }
    w->first = first;
    w->page_size = page_size;
    w->npages = npages;
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    if (pthread_create(&w->thread, NULL, prefault_main, w) != 0) {
        pthread_cond_destroy(&w->cond);
        pthread_mutex_destroy(&w->lock);
        free(w);
        return NULL;
    }
    affinity_apply(w->thread, AFFINITY_BG, 0);
    return w;
}

void
prefault_note(struct prefault *w, size_t index)
{
    size_t f = atomic_load_explicit(&w->frontier, memory_order_relaxed);

    while (index + 1 > f &&
           !atomic_compare_exchange_weak_explicit(&w->frontier, &f,
                                                  index + 1,
                                                  memory_order_relaxed,
                                                  memory_order_relaxed)) {
    }
    /* the thread sleeps once it is PREFAULT_AHEAD pages ahead: woken when
     * the allocations have used half of that */
    if (atomic_load_explicit(&w->faulted, memory_order_relaxed) +
        PREFAULT_AHEAD / 2 < wanted(w)) {
        pthread_mutex_lock(&w->lock);
        pthread_cond_signal(&w->cond);
        pthread_mutex_unlock(&w->lock);
    }
}

void
prefault_stop(struct prefault *w)
{
    if (w == NULL) {
        return;
    }
    pthread_mutex_lock(&w->lock);
    w->stop = true;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
    free(w);
}
