/*
 * slabs_stats.c: the slab allocator's figures and its limit
 * (slabs_stats.h).
 *
 * Locking: the slabs lock, as slabs.c; the threads' caches are read
 * racily.
 */
#include "storage/slab/slabs_stats.h"
#include "storage/slab/slabs_priv.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

bool
slabs_class_stats(unsigned tc, struct cache_slab_stats *out)
{
    struct slab_class *c = &sl.cls[tc];

    memset(out, 0, sizeof(*out));
    if (!slabs_tc_valid(tc)) {
        return false;
    }
    pthread_mutex_lock(&sl.lock);
    out->chunk_size = c->size;
    out->chunks_per_page = c->perslab;
    out->total_pages = c->npages;
    out->total_chunks = (uint64_t)c->npages * c->perslab;
    out->free_chunks = c->sl_curr;
    for (struct tcache *t = atomic_load(&sl.caches); t != NULL;
         t = t->next) {
        out->free_chunks += __atomic_load_n(&t->n[tc], __ATOMIC_RELAXED);
    }
    out->used_chunks = out->total_chunks - out->free_chunks;
    out->free_chunks_end = 0;
    pthread_mutex_unlock(&sl.lock);
    return out->total_pages > 0;
}

unsigned
slabs_npages(unsigned tc)
{
    return __atomic_load_n(&sl.cls[tc].npages, __ATOMIC_RELAXED);
}

uint64_t
slabs_requested(unsigned tc)
{
    uint64_t r;

    pthread_mutex_lock(&sl.lock);
    r = sl.cls[tc].requested;
    pthread_mutex_unlock(&sl.lock);
    for (struct tcache *t = atomic_load(&sl.caches); t != NULL;
         t = t->next) {
        r += (uint64_t)__atomic_load_n(&t->requested[tc], __ATOMIC_RELAXED);
    }
    return r;
}

void
slabs_totals(struct cache_stats *out)
{
    pthread_mutex_lock(&sl.lock);
    out->limit_maxbytes = sl.tiers[sl.mtier]->limit;
    for (unsigned t = 0; t < SLABS_NTIERS; t++) {
        if (sl.tiers[t] != NULL) {
            out->total_malloced += sl.tiers[t]->used;
            out->slab_global_page_pool += sl.cls[SLABS_TC(t, 0)].npages;
        }
    }
    out->malloc_fails += sl.st.malloc_fails;
    out->slabs_moved += sl.st.slabs_moved;
    pthread_mutex_unlock(&sl.lock);
}

void
slabs_stats_reset(void)
{
    pthread_mutex_lock(&sl.lock);
    cache_stats_reset_counters(&sl.st);
    pthread_mutex_unlock(&sl.lock);
}

void
slabs_tier_usage(unsigned tier_id, uint64_t *limit, uint64_t *used)
{
    struct tier *t = slabs_tier(tier_id);

    pthread_mutex_lock(&sl.lock);
    *limit = t != NULL ? t->limit : 0;
    *used = t != NULL ? t->used : 0;
    pthread_mutex_unlock(&sl.lock);
}

int
slabs_set_memlimit(size_t bytes)
{
    struct tier *t = sl.tiers[sl.mtier];
    struct slab_class *pool = &sl.cls[SLABS_TC(sl.mtier, 0)];
    int rc = 0;

    pthread_mutex_lock(&sl.lock);
    if (!tier_set_limit(t, bytes)) {
        rc = -1;
    }
    /* Pool pages over the new limit go back to the tier at once; pages
     * in classes come back through the mover (automove). */
    while (rc == 0 && t->used > bytes && pool->npages > 0) {
        slabs_give_back(t, slabs_pop_page(pool));
    }
    sl.shrinking = rc == 0 && t->used > bytes;
    pthread_mutex_unlock(&sl.lock);
    return rc;
}

bool
slabs_shrinking(unsigned tier_id)
{
    struct tier *t = slabs_tier(tier_id);
    bool over;

    pthread_mutex_lock(&sl.lock);
    over = sl.shrinking && tier_id == sl.mtier && t->used > t->limit;
    sl.shrinking = over;
    pthread_mutex_unlock(&sl.lock);
    return over;
}

