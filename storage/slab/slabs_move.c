/*
 * slabs_move.c: page moves (slabs_move.h), requested here and carried out by
 * the page mover thread (mover.c).
 *
 * A move is a request (src, dst) queued one at a time: slabs_move_begin()
 * takes the page out of service, the mover empties it chunk by chunk
 * (slabs_move_visit()), and slabs_move_end() gives it to its new owner.
 * Chunks freed while the page drains are marked free but not listed again
 * (slabs_free() checks the range).
 *
 * Locking: the slabs lock, as slabs.c.
 */
#include "storage/slab/slabs_move.h"
#include "storage/base/clock.h"
#include "storage/base/quiesce.h"
#include "storage/slab/slabs_priv.h"
#include "storage/tier/pagetab.h"

#include <pthread.h>
#include <time.h>

/* ---- page moves: requests --------------------------------------------- */

/* A class of tier t other than dst with a page to spare, round robin. */
static int
pick_any(unsigned t, int dst)
{
    for (unsigned n = 0; n < sl.largest; n++) {
        int id = (int)(sl.mv.pick_cursor++ % sl.largest) + 1;

        if (id != dst && sl.cls[SLABS_TC(t, id)].npages > 1) {
            return id;
        }
    }
    return -1;
}

/* A page donor in tier t for a starving class: one with spare pages, or
 * whose free chunks add up to a page (its items fit in the rest). */
static int
pick_donor(unsigned t, int dst)
{
    for (unsigned id = 1; id <= sl.largest; id++) {
        struct slab_class *c = &sl.cls[SLABS_TC(t, id)];

        if ((int)id != dst && c->npages > 0 &&
            (c->npages > 1 || c->sl_curr >= c->perslab)) {
            return (int)id;
        }
    }
    return -1;
}

/* Validate and queue a move between classes src and dst of tier t.  A
 * request made while a move is under way waits behind it (one, as
 * memcached's mover takes a second request once it is between pages). */
static enum cache_status
do_reassign(unsigned t, int src, int dst, bool donor)
{
    if (!sl.mv.attached) {
        return CACHE_DISABLED;
    }
    if (sl.mv.held && t == TIER_PMEM) {
        return CACHE_BUSY;
    }
    if (sl.mv.pending && (sl.mv.queued || donor)) {
        return CACHE_BUSY;
    }
    if (src == dst) {
        return CACHE_SAME;
    }
    if (src == -1) {
        src = donor ? pick_donor(t, dst) : pick_any(t, dst);
    }
    if (src < 0 || src > (int)sl.largest || dst < 0 ||
        dst > (int)sl.largest) {
        return CACHE_BADCLASS;
    }
    if (sl.cls[SLABS_TC(t, src)].npages < (donor ? 1u : 2u)) {
        return CACHE_NOSPARE;
    }
    if (sl.mv.pending) {
        sl.mv.queued = true;
        sl.mv.next_src = SLABS_TC(t, src);
        sl.mv.next_dst = SLABS_TC(t, dst);
        return CACHE_OK;
    }
    sl.mv.pending = true;
    sl.mv.taken = false;
    sl.mv.src = SLABS_TC(t, src);
    sl.mv.dst = SLABS_TC(t, dst);
    pthread_cond_signal(&sl.cond);
    return CACHE_OK;
}

enum cache_status
slabs_reassign(unsigned tier, int src, int dst)
{
    enum cache_status st;

    pthread_mutex_lock(&sl.lock);
    st = do_reassign(tier, src, dst, false);
    pthread_mutex_unlock(&sl.lock);
    return st;
}

void
slabs_hold_moves(bool held)
{
    pthread_mutex_lock(&sl.lock);
    sl.mv.held = held;
    pthread_mutex_unlock(&sl.lock);
}

void
slabs_mover_wait(void)
{
    pthread_mutex_lock(&sl.lock);
    while (sl.mv.pending && sl.mv.attached) {
        pthread_cond_wait(&sl.done, &sl.lock);
    }
    pthread_mutex_unlock(&sl.lock);
}

/* Wait for the move in progress to finish, until the deadline. */
static bool
wait_idle(const struct timespec *deadline)
{
    while (sl.mv.pending && sl.mv.attached) {
        if (pthread_cond_timedwait(&sl.done, &sl.lock, deadline) != 0) {
            return false;
        }
    }
    return true;
}

bool
slabs_steal_page(unsigned tc, unsigned ms)
{
    struct timespec dl;
    unsigned before;
    bool got = false;

    clock_deadline(&dl, (uint64_t)ms * 1000);
    pthread_mutex_lock(&sl.lock);
    if (!wait_idle(&dl)) {
        pthread_mutex_unlock(&sl.lock);
        return false;
    }
    before = sl.cls[tc].npages;
    if (do_reassign(SLABS_TC_TIER(tc), -1, (int)SLABS_TC_ID(tc),
                    true) == CACHE_OK) {
        got = wait_idle(&dl) && sl.cls[tc].npages > before;
    }
    pthread_mutex_unlock(&sl.lock);
    return got;
}

/* ---- page moves: the mover's side ------------------------------------ */

void
slabs_mover_attach(bool on)
{
    pthread_mutex_lock(&sl.lock);
    sl.mv.attached = on;
    if (!on) {
        sl.mv.pending = sl.mv.queued = false;
        pthread_cond_broadcast(&sl.cond);
        pthread_cond_broadcast(&sl.done);
    }
    pthread_mutex_unlock(&sl.lock);
}

bool
slabs_move_next(unsigned *src, unsigned *dst)
{
    bool go;

    pthread_mutex_lock(&sl.lock);
    while (sl.mv.attached && (!sl.mv.pending || sl.mv.taken)) {
        pthread_cond_wait(&sl.cond, &sl.lock);
    }
    go = sl.mv.attached;
    if (go) {
        sl.mv.taken = true;
        *src = sl.mv.src;
        *dst = sl.mv.dst;
    }
    pthread_mutex_unlock(&sl.lock);
    return go;
}

/* Take the page (the source's first) off the source's list and give it
 * to the move's destination.  Lock held. */
static void
finish(char *page)
{
    struct slab_class *c = &sl.cls[sl.mv.src];
    unsigned dst = sl.mv.dst;
    struct tier *t = slabs_tier_of(dst);
    bool to_pool = SLABS_TC_ID(dst) == 0;

    c->pages[0] = slabs_pop_page(c);
    __atomic_store_n(&sl.mv.start, NULL, __ATOMIC_RELEASE);
    __atomic_store_n(&sl.mv.end, NULL, __ATOMIC_RELEASE);
    if (t->id == TIER_PMEM && to_pool) {
        pagetab_set(page, 0);
    }
    if (to_pool && t->used > t->limit) {
        slabs_give_back(t, page);
    } else {
        slabs_add_page(&sl.cls[dst], page);
        if (!to_pool) {
            slabs_cut(dst, page);
        }
    }
    sl.st.slabs_moved++;
}

char *
slabs_move_begin(unsigned src, unsigned dst)
{
    struct slab_class *c = &sl.cls[src];
    char *page = NULL;

    pthread_mutex_lock(&sl.lock);
    sl.mv.src = src;
    sl.mv.dst = dst;
    if (c->npages == 0) {
        goto out;
    }
    page = c->pages[0];
    if (SLABS_TC_ID(src) == 0) {
        /* A pool page holds no chunks: it moves at once. */
        finish(page);
        page = NULL;
        goto out;
    }
    __atomic_store_n(&sl.mv.start, page, __ATOMIC_RELEASE);
    __atomic_store_n(&sl.mv.end, page + (size_t)c->perslab * c->size,
                     __ATOMIC_RELEASE);
    for (unsigned i = 0; i < c->perslab; i++) {
        struct slabs_chunk *ch = slabs_chunk_at(c, page, i);
        uint16_t f = slabs_chunk_flags(ch);

        if ((f & SLABS_FREE) && !(f & SLABS_CACHED)) {
            slabs_unlink_free(c, ch);
        }
    }
out:
    pthread_mutex_unlock(&sl.lock);
    if (page != NULL) {
        /* after the range is public: see slabs.c, the thread caches */
        slabs_tcache_purge(src, page, page + (size_t)c->perslab * c->size);
    }
    return page;
}

unsigned
slabs_move_src(void)
{
    unsigned src;

    pthread_mutex_lock(&sl.lock);
    src = sl.mv.src;
    pthread_mutex_unlock(&sl.lock);
    return src;
}

int
slabs_move_visit(char *page, unsigned i,
                 int (*fn)(void *chunk, size_t room, void *ctx), void *ctx)
{
    struct slab_class *c = &sl.cls[sl.mv.src];
    struct slabs_chunk *ch = slabs_chunk_at(c, page, i);
    int rc = -1;

    pthread_mutex_lock(&sl.lock);
    if (!(slabs_chunk_flags(ch) & SLABS_FREE)) {
        rc = fn(ch, c->size - sl.prefix, ctx);
    }
    pthread_mutex_unlock(&sl.lock);
    return rc;
}

void
slabs_move_end(char *page)
{
    /* The page is about to be cut into another class's chunks: a
     * lock-free reader (cache_peek.c, prefetch.c) that reached one of its
     * items before they were all unlinked must be done reading first. */
    quiesce_wait();
    pthread_mutex_lock(&sl.lock);
    finish(page);
    pthread_mutex_unlock(&sl.lock);
}

void
slabs_move_done(void)
{
    pthread_mutex_lock(&sl.lock);
    sl.mv.taken = false;
    sl.mv.pending = sl.mv.queued;
    if (sl.mv.queued) {
        sl.mv.queued = false;
        sl.mv.src = sl.mv.next_src;
        sl.mv.dst = sl.mv.next_dst;
    }
    pthread_cond_broadcast(&sl.done);
    pthread_mutex_unlock(&sl.lock);
}
