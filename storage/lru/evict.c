/*
 * evict.c: tail pulls, eviction and allocation by eviction (evict.h).
 */
#include "storage/lru/evict.h"
#include "storage/base/locks.h"
#include "storage/base/observe.h"
#include "storage/lru/link.h"
#include "storage/lru/lru.h"
#include "storage/slab/persist.h"
#include "storage/slab/slabs.h"
#include "storage/slab/slabs_move.h"
#include "storage/slab/slabs_stats.h"

#define TAIL_TRIES      5
#define ALLOC_TRIES     10
#define STEAL_WAIT_MS   500
/* In a flush group an evicted item's chunk comes back only when the group
 * syncs (persist_kill()), so an allocation that has to evict there evicts
 * up to this many, syncs once and finds all their chunks free: one sync
 * per GROUP_EVICTS evictions rather than one per allocation. */
#define GROUP_EVICTS    8

static const struct cache_options *opts;
static bool (*room)(unsigned tc);

void
evict_init(const struct cache_options *o)
{
    opts = o;
}

void
evict_set_room(bool (*fn)(unsigned tc))
{
    __atomic_store_n(&room, fn, __ATOMIC_RELEASE);
}

/* Memory the room callback finds for tc, before an eviction. */
static bool
find_room(unsigned tc)
{
    bool (*fn)(unsigned) = __atomic_load_n(&room, __ATOMIC_ACQUIRE);

    return fn != NULL && fn(tc);
}

/*
 * A chunk of tc.  While the room callback is set (the file is read back),
 * a class with no free chunk listed has its next page read back before
 * it takes a new one: the free chunks wait in its pages not read yet, and
 * a new page cut for each class written early in each recovery left,
 * after a few hundred crashes, every page of the file to some class,
 * mostly free, and the class that needed one evicting.
 */
static void *
alloc_or_read_back(size_t size, unsigned tc)
{
    void *mem;

    if (__atomic_load_n(&room, __ATOMIC_RELAXED) == NULL) {
        return slabs_alloc(size, tc);
    }
    while ((mem = slabs_alloc_free(size, tc)) == NULL && find_room(tc)) {
    }
    return mem != NULL ? mem : slabs_alloc(size, tc);
}

bool
evict_allowed(void)
{
    return opts->evict;
}

/* ---- the pull --------------------------------------------------------- */

/* A held item at a tail whose last use is tail_repair_time ago. */
static bool
tail_stuck(const struct item *it)
{
    unsigned t = opts->tail_repair_time;

    return t != 0 && item_time(it) + t < clock_now();
}

/* Unlink a dead item found at a tail (list locked, item locked). */
static void
reclaim(unsigned tc, struct item *it, uint32_t hv)
{
    LRU_COUNT(tc, reclaimed, 1);
    if (!(item_flags(it) & ITEM_FETCHED)) {
        LRU_COUNT(tc, expired_unfetched, 1);
    }
    do_link_unlink(it, hv);
}

/* One tail item, list locked: reclaim it if dead, else hand it to the
 * puller.  Returns true when the pull ends here (at the first live
 * item). */
static bool
pull_item(unsigned tc, enum item_lru which, struct item *it,
          struct evict_pull *p)
{
    uint32_t hv = link_hv(it);
    bool flushed, live = true;

    if (!locks_trylock(hv)) {
        return false;
    }
    if (item_ref_incr(it) != 2) {
        /* Someone holds it (a reply being written): skip, unless it has
         * been held past -o tail_repair_time, when it is unlinked (its
         * memory goes when the holder lets go). */
        LRU_COUNT(tc, lrutail_reflocked, 1);
        if (tail_stuck(it)) {
            LRU_COUNT(tc, tailrepairs, 1);
            do_link_unlink(it, hv);
            item_release(it);
        } else {
            item_ref_decr(it);
        }
        locks_unlock(hv);
        return false;
    }
    if (link_is_dead(it, clock_now(), &flushed)) {
        reclaim(tc, it, hv);
        p->done++;
        live = false;
    } else if (p->fn != NULL) {
        enum evict_act act = p->fn(it, hv, tc, which, p->ctx);

        if (act == EVICT_HOLD) {
            p->held = it;
            p->held_hv = hv;
            return true;
        }
        p->done += act == EVICT_DONE;
    }
    item_release(it);
    locks_unlock(hv);
    return live;
}

int
evict_pull(unsigned tc, enum item_lru which, struct evict_pull *p)
{
    struct item *it, *prev;
    int tries = TAIL_TRIES;

    lru_lock(tc, which);
    for (it = do_lru_tail(tc, which); it != NULL && tries > 0;
         it = prev, tries--) {
        prev = it->prev;
        if (!lru_is_cursor(it) && pull_item(tc, which, it, p)) {
            break;
        }
    }
    lru_unlock(tc, which);
    return p->done;
}

/* ---- evicting --------------------------------------------------------- */

/* Count an eviction, and tell watch's evictions stream. */
static void
count_eviction(unsigned tc, const struct item *it)
{
    rel_time_t now = clock_now(), t = item_time(it);

    if (observing(OBSERVE_EVICT)) {
        observe_hooks->evict(it);
    }
    LRU_COUNT(tc, evicted, 1);
    __atomic_store_n(&lru_class_counters[tc].evicted_time,
                     now > t ? now - t : 0, __ATOMIC_RELAXED);
    if (it->exptime != 0) {
        LRU_COUNT(tc, evicted_nonzero, 1);
    }
    if (!(item_flags(it) & ITEM_FETCHED)) {
        LRU_COUNT(tc, evicted_unfetched, 1);
    }
    if (item_flags(it) & ITEM_ACTIVE) {
        LRU_COUNT(tc, evicted_active, 1);
    }
}

/* Automove mode 2 answers every eviction with a page for the class. */
static void
note_eviction(unsigned tc)
{
    if (opts->slab_automove == 2) {
        slabs_reassign(SLABS_TC_TIER(tc), -1, (int)SLABS_TC_ID(tc));
    }
}

void
do_evict_item(struct item *it, uint32_t hv, unsigned tc)
{
    count_eviction(tc, it);
    do_link_unlink(it, hv);
    note_eviction(tc);
}

void
evict_item(struct item *it, uint32_t hv, unsigned tc)
{
    count_eviction(tc, it);
    link_unlink(it, hv);
    note_eviction(tc);
}

/* A live item at the COLD tail goes, unless -M. */
static enum evict_act
evict_tail(struct item *it, uint32_t hv, unsigned tc, enum item_lru which,
           void *ctx)
{
    (void)ctx;
    if (which != ITEM_LRU_COLD || !opts->evict) {
        return EVICT_STOP;
    }
    do_evict_item(it, hv, tc);
    return EVICT_DONE;
}

static int
evict_cold(unsigned tc)
{
    struct evict_pull p = { .fn = evict_tail };

    return evict_pull(tc, ITEM_LRU_COLD, &p);
}

static enum evict_act
force_cold(struct item *it, uint32_t hv, unsigned tc, enum item_lru which,
           void *ctx)
{
    (void)hv;
    (void)which;
    (void)ctx;
    LRU_COUNT(tc, moves_to_cold, 1);
    do_lru_move(it, ITEM_LRU_COLD);
    return EVICT_DONE;
}

int
evict_force_cold(unsigned tc)
{
    struct evict_pull p = { .fn = force_cold };

    return evict_pull(tc, ITEM_LRU_HOT, &p);
}

/* ---- allocation ------------------------------------------------------- */

void *
evict_retry(size_t size, unsigned tc, unsigned lru_tc,
            int (*cold)(unsigned lru_tc))
{
    /* Without the segmented LRU (no_modern) no maintainer walks the tails:
     * as in memcached, every allocation first takes back what is dead at
     * its class's tail, so a new item reuses a flushed or expired one's
     * memory (reclaimed, expired_unfetched). */
    if (!opts->lru_segmented) {
        struct evict_pull p = { .fn = NULL };

        evict_pull(lru_tc, ITEM_LRU_COLD, &p);
    }
    for (int i = 0; i < ALLOC_TRIES; i++) {
        void *mem = alloc_or_read_back(size, tc);
        int n;

        if (mem != NULL) {
            return mem;
        }
        if (persist_group_holds()) {
            persist_group_sync();
            continue;
        }
        if (find_room(tc)) {
            i--;                /* not a try: no item left for it */
            continue;
        }
        LRU_COUNT(lru_tc, direct_reclaims, 1);
        n = cold(lru_tc);
        if (n <= 0 && opts->lru_segmented) {
            n = evict_force_cold(lru_tc);
        }
        if (n <= 0) {
            break;
        }
        for (int j = 1; j < GROUP_EVICTS && persist_group_holds(); j++) {
            if (cold(lru_tc) <= 0) {
                break;
            }
        }
    }
    return NULL;
}

/*
 * A class with no page, or no items to evict, cannot make room by itself:
 * take a page from another class (unless -M forbids making room).  Busy
 * tails alone fail at once, as in memcached.
 */
static void *
steal(size_t size, unsigned tc, unsigned lru_tc)
{
    if (opts->evict && opts->slab_reassign &&
        (slabs_npages(tc) == 0 || lru_class_items(lru_tc) == 0) &&
        slabs_steal_page(tc, STEAL_WAIT_MS)) {
        return slabs_alloc(size, tc);
    }
    return NULL;
}

void *
evict_mem(size_t size, unsigned tc, unsigned lru_tc)
{
    void *mem = evict_retry(size, tc, lru_tc, evict_cold);

    if (mem == NULL) {
        mem = steal(size, tc, lru_tc);
    }
    if (mem == NULL) {
        LRU_COUNT(lru_tc, outofmemory, 1);
    }
    return mem;
}
