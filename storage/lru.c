/*
 * lru.c: segmented LRU lists, linking, eviction and the maintainer thread.
 *
 *   new item --> HOT --(tail, over hot_lru_pct or too old)--> COLD --> evict
 *                 |  (tail, ACTIVE)                            ^  |
 *                 v                                            |  | ACTIVE
 *                WARM --(tail, over warm_lru_pct or too old)---+  | hit
 *                 ^  (tail, ACTIVE: back to the WARM head)        |
 *                 +-----------------------------------------------+
 *
 * Hits in HOT and WARM only set flags and it->time (no list lock); the
 * maintainer moves items at the tails.  An ACTIVE hit in COLD moves the
 * item to WARM directly in the reader's thread (memcached queues it to the
 * maintainer instead; the direct move keeps it simple and takes two
 * uncontended list locks one after the other).
 */
#include "storage/lru.h"
#include "storage/assoc.h"
#include "storage/hash.h"
#include "storage/locks.h"
#include "storage/persist.h"
#include "storage/slabs.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NLRU            4
#define TAIL_TRIES      5
#define ALLOC_TRIES     10
#define JUGGLE_MAX      500
#define UPDATE_INTERVAL 60
#define SLEEP_MIN_US    1000
#define SLEEP_MAX_US    1000000
#define STEAL_WAIT_MS   500

struct lru_list {
    pthread_mutex_t lock;
    struct item    *head;
    struct item    *tail;
    uint64_t        size;
    uint64_t        bytes;
};

/* Counters of one class, bumped with relaxed atomics. */
struct lru_counters {
    uint64_t evicted, evicted_nonzero, evicted_time, outofmemory;
    uint64_t reclaimed, expired_unfetched, evicted_unfetched;
    uint64_t evicted_active, crawler_reclaimed, crawler_items_checked;
    uint64_t lrutail_reflocked, moves_to_cold, moves_to_warm;
    uint64_t moves_within_lru, direct_reclaims;
};

enum pull_mode {
    PULL_MAINT, PULL_EVICT, PULL_FORCE_COLD, PULL_RECLAIM, PULL_DEMOTE
};

static struct {
    const struct cache_options *opts;
    struct lru_list     lists[SLABS_TC_MAX][NLRU];     /* by tier class */
    struct lru_counters ctr[SLABS_TC_MAX];
    rel_time_t          flush_time;
    uint64_t           *histo;      /* track_sizes: 32-byte buckets */
    size_t              nhisto;
    uint64_t            juggles;
    uint64_t            promotions;     /* items moved up into DRAM */
    uint64_t            demotions;      /* items moved down into the file */
    pthread_t           thread;
    bool                running;
    bool                stop;
    pthread_mutex_t     wait_lock;
    pthread_cond_t      wait_cond;
} lru;

#define COUNT(id, field, n) \
    __atomic_add_fetch(&lru.ctr[(id)].field, (n), __ATOMIC_RELAXED)

/* The tier class whose lists hold the item. */
static unsigned
tc_of(const struct item *it)
{
    return SLABS_TC(it->tier, it->clsid & ITEM_CLSID_MASK);
}

static struct lru_list *
list_of(const struct item *it)
{
    return &lru.lists[tc_of(it)][it->clsid >> ITEM_LRU_SHIFT];
}

static struct item *move_to_tier(struct item *it, uint32_t hv, unsigned t,
                                 unsigned which);
static struct item *cache_copy(struct item *it, uint32_t hv);
static void uncache(struct item *c, uint32_t hv);

static bool
is_cursor(const struct item *it)
{
    return it->nkey == 0 && item_flags(it) == ITEM_LINKED;
}

static uint32_t
item_hv(const struct item *it)
{
    return hash_murmur3(item_key(it), item_nkey(it));
}

int
lru_init(const struct cache_options *opts)
{
    memset(&lru, 0, sizeof(lru));
    lru.opts = opts;
    for (unsigned i = 0; i < SLABS_TC_MAX; i++) {
        for (unsigned l = 0; l < NLRU; l++) {
            pthread_mutex_init(&lru.lists[i][l].lock, NULL);
        }
    }
    pthread_mutex_init(&lru.wait_lock, NULL);
    pthread_cond_init(&lru.wait_cond, NULL);
    if (opts->track_sizes) {
        lru.nhisto = opts->item_size_max / 32 + 2;
        lru.histo = calloc(lru.nhisto, sizeof(*lru.histo));
        if (lru.histo == NULL) {
            return -1;
        }
    }
    return 0;
}

void
lru_destroy(void)
{
    lru_maintainer_stop();
    for (unsigned i = 0; i < SLABS_TC_MAX; i++) {
        for (unsigned l = 0; l < NLRU; l++) {
            pthread_mutex_destroy(&lru.lists[i][l].lock);
        }
    }
    free(lru.histo);
    lru.histo = NULL;
}

/* ---- list primitives: caller holds the list lock ---------------------- */

/* Sizes change under the list lock but are read without it for stats and
 * shares, hence the relaxed atomic stores. */
static void
count_list(struct lru_list *l, int dir, size_t bytes)
{
    __atomic_store_n(&l->size, dir > 0 ? l->size + 1 : l->size - 1,
                     __ATOMIC_RELAXED);
    __atomic_store_n(&l->bytes, dir > 0 ? l->bytes + bytes
                                        : l->bytes - bytes,
                     __ATOMIC_RELAXED);
}

static void
list_push_head(struct lru_list *l, struct item *it)
{
    it->prev = NULL;
    it->next = l->head;
    if (l->head != NULL) {
        l->head->prev = it;
    }
    l->head = it;
    if (l->tail == NULL) {
        l->tail = it;
    }
    if (!is_cursor(it)) {
        count_list(l, 1, item_ntotal(it));
    }
}

static void
list_remove(struct lru_list *l, struct item *it)
{
    if (it->prev != NULL) {
        it->prev->next = it->next;
    } else {
        l->head = it->next;
    }
    if (it->next != NULL) {
        it->next->prev = it->prev;
    } else {
        l->tail = it->prev;
    }
    it->next = it->prev = NULL;
    if (!is_cursor(it)) {
        count_list(l, -1, item_ntotal(it));
    }
}

static void
set_lru(struct item *it, unsigned which)
{
    __atomic_store_n(&it->clsid, (uint8_t)((it->clsid & ITEM_CLSID_MASK) |
                                           (which << ITEM_LRU_SHIFT)),
                     __ATOMIC_RELAXED);
}

/* ---- link / unlink ---------------------------------------------------- */

static void
histo_add(const struct item *it, int64_t n)
{
    size_t b = (item_ntotal(it) + 31) / 32;

    if (lru.histo != NULL && b < lru.nhisto) {
        __atomic_add_fetch(&lru.histo[b], (uint64_t)n, __ATOMIC_RELAXED);
    }
}

static unsigned
first_lru(const struct item *it)
{
    const struct cache_options *o = lru.opts;

    if (!o->lru_segmented) {
        return ITEM_LRU_COLD;
    }
    if (o->temp_lru && it->exptime != 0 &&
        it->exptime <= clock_now() + o->temporary_ttl) {
        return ITEM_LRU_TEMP;
    }
    return ITEM_LRU_HOT;
}

/* Link into the list already named by it->clsid. */
static void
link_in_place(struct item *it, uint32_t hv)
{
    struct lru_list *l = list_of(it);

    item_flags_set(it, ITEM_LINKED);
    item_ref_incr(it);
    assoc_insert(it, hv);
    pthread_mutex_lock(&l->lock);
    list_push_head(l, it);
    pthread_mutex_unlock(&l->lock);
    histo_add(it, 1);
}

void
lru_link(struct item *it, uint32_t hv)
{
    item_time_store(it, clock_now());
    set_lru(it, first_lru(it));
    link_in_place(it, hv);
}

void
lru_link_recovered(struct item *it)
{
    set_lru(it, ITEM_LRU_COLD);
    item_flags_set(it, ITEM_LINKED);
    item_ref_incr(it);
    /* No other thread runs yet: no list lock (10M items, 10M locks). */
    list_push_head(list_of(it), it);
    histo_add(it, 1);
}

/* An item leaving the cache dies in the file first: itself, or the
 * original a copy stands for. */
static void
kill_in_file(struct item *it)
{
    struct item *orig = item_original(it);

    if (it->tier == TIER_PMEM) {
        persist_kill(it);
    } else if (orig != NULL) {
        persist_kill(orig);
    }
}

/* Unlink with the item's list lock already held by the caller. */
static void
unlink_nolock(struct item *it, uint32_t hv)
{
    kill_in_file(it);
    item_flags_clear(it, ITEM_LINKED);
    assoc_delete(item_key(it), item_nkey(it), hv);
    list_remove(list_of(it), it);
    histo_add(it, -1);
    item_release(it);
}

/* Take a linked item off its list and out of the table; the link's
 * reference is the caller's to drop or pass on.  Caller holds lock(hv). */
static void
detach(struct item *it, uint32_t hv)
{
    struct lru_list *l = list_of(it);

    pthread_mutex_lock(&l->lock);
    item_flags_clear(it, ITEM_LINKED);
    list_remove(l, it);
    pthread_mutex_unlock(&l->lock);
    assoc_delete(item_key(it), item_nkey(it), hv);
    histo_add(it, -1);
}

void
lru_unlink(struct item *it, uint32_t hv)
{
    if (!(item_flags(it) & ITEM_LINKED)) {
        return;
    }
    /* Dead in the file before it is gone from the table. */
    kill_in_file(it);
    detach(it, hv);
    item_release(it);
}

/* ---- liveness --------------------------------------------------------- */

void
lru_set_flush(rel_time_t when)
{
    __atomic_store_n(&lru.flush_time, when, __ATOMIC_RELAXED);
}

bool
lru_is_dead(const struct item *it, rel_time_t now, bool *flushed)
{
    rel_time_t ft = __atomic_load_n(&lru.flush_time, __ATOMIC_RELAXED);

    *flushed = false;
    if (it->exptime != 0 && it->exptime <= now) {
        return true;
    }
    if (ft != 0 && ft <= now && item_time(it) <= ft) {
        *flushed = true;
        return true;
    }
    return false;
}

/* ---- hits ------------------------------------------------------------- */

/* Move an item between lists of its class; never two list locks held. */
static void
move_between(struct item *it, unsigned to)
{
    struct lru_list *from = list_of(it);

    pthread_mutex_lock(&from->lock);
    list_remove(from, it);
    pthread_mutex_unlock(&from->lock);
    set_lru(it, to);
    pthread_mutex_lock(&list_of(it)->lock);
    list_push_head(list_of(it), it);
    pthread_mutex_unlock(&list_of(it)->lock);
}

static void
bump_flat(struct item *it)
{
    rel_time_t now = clock_now();

    item_flags_set(it, ITEM_FETCHED);
    if (item_time(it) + UPDATE_INTERVAL < now &&
        (item_flags(it) & ITEM_LINKED)) {
        item_time_store(it, now);
        move_between(it, it->clsid >> ITEM_LRU_SHIFT);
    }
}

static void
bump(struct item *it)
{
    if (!lru.opts->lru_segmented) {
        bump_flat(it);
        return;
    }
    if (item_flags(it) & ITEM_ACTIVE) {
        return;
    }
    if (!(item_flags(it) & ITEM_FETCHED)) {
        item_flags_set(it, ITEM_FETCHED);
        return;
    }
    /* A second hit marks the item active, wherever it is; no LRU lock is
     * taken on a GET.  The maintainer moves active items when they reach
     * a tail: HOT and WARM ones to WARM, COLD ones back to WARM. */
    item_time_store(it, clock_now());
    item_flags_set(it, ITEM_ACTIVE);
}

/* Under tier_policy capacity, an item in the file hit a second time goes
 * back to DRAM (into the list a new item would), unless DRAM cannot make
 * room.  The caller's reference moves to the copy. */
static struct item *
promote(struct item *it, uint32_t hv)
{
    struct item *n;

    if (!(item_flags(it) & ITEM_LINKED) ||
        (n = move_to_tier(it, hv, TIER_DRAM, first_lru(it))) == NULL) {
        return it;
    }
    item_flags_set(n, ITEM_FETCHED);
    item_time_store(n, clock_now());
    item_release(it);
    __atomic_add_fetch(&lru.promotions, 1, __ATOMIC_RELAXED);
    return n;
}

struct item *
lru_bump(struct item *it, uint32_t hv)
{
    bool again = (item_flags(it) & ITEM_FETCHED) != 0;

    bump(it);
    if (!again || it->tier != TIER_PMEM) {
        return it;
    }
    switch (lru.opts->tier_policy) {
    case CACHE_TIER_CAPACITY:
        return promote(it, hv);
    case CACHE_TIER_CACHE:
        return cache_copy(it, hv);
    default:
        return it;
    }
}

/* ---- the tail pull ---------------------------------------------------- */

static void
count_eviction(unsigned id, const struct item *it, rel_time_t now)
{
    COUNT(id, evicted, 1);
    rel_time_t t = item_time(it);

    __atomic_store_n(&lru.ctr[id].evicted_time, now > t ? now - t : 0,
                     __ATOMIC_RELAXED);
    if (it->exptime != 0) {
        COUNT(id, evicted_nonzero, 1);
    }
    if (!(item_flags(it) & ITEM_FETCHED)) {
        COUNT(id, evicted_unfetched, 1);
    }
    if (item_flags(it) & ITEM_ACTIVE) {
        COUNT(id, evicted_active, 1);
    }
}

/* Where a HOT or WARM tail item should go under maintenance: its own
 * list (reshuffle), another, or nowhere (-1). */
static int
maint_target(unsigned id, unsigned cur, struct item *it, uint64_t total,
             rel_time_t cold_age)
{
    const struct cache_options *o = lru.opts;
    unsigned pct = cur == ITEM_LRU_HOT ? o->hot_lru_pct : o->warm_lru_pct;
    double factor = cur == ITEM_LRU_HOT ? o->hot_max_factor
                                        : o->warm_max_factor;
    rel_time_t now = clock_now(), t = item_time(it);
    rel_time_t age = now > t ? now - t : 0;

    if (item_flags(it) & ITEM_ACTIVE) {
        item_flags_clear(it, ITEM_ACTIVE);
        if (cur == ITEM_LRU_HOT) {
            COUNT(id, moves_to_warm, 1);
            return ITEM_LRU_WARM;
        }
        COUNT(id, moves_within_lru, 1);
        return ITEM_LRU_WARM;
    }
    if (lru.lists[id][cur].bytes > total * pct / 100 ||
        (double)age > (double)cold_age * factor) {
        COUNT(id, moves_to_cold, 1);
        return ITEM_LRU_COLD;
    }
    return -1;
}

/* Move an item out of list l (locked by the caller) into list `to`,
 * taking that list's lock nested: `to` is never lower than l's index. */
static void
relink_nested(struct lru_list *l, struct item *it, unsigned to)
{
    list_remove(l, it);
    set_lru(it, to);
    if (list_of(it) != l) {
        pthread_mutex_lock(&list_of(it)->lock);
    }
    list_push_head(list_of(it), it);
    if (list_of(it) != l) {
        pthread_mutex_unlock(&list_of(it)->lock);
    }
}

/*
 * An active item at the COLD tail goes back to WARM.  The WARM list lock
 * ranks below COLD's (nested locks are taken in list order), so it is only
 * tried: when busy, the item waits for the next pass.  Returns 1 if moved.
 */
static int
rescue_active(unsigned id, struct lru_list *l, struct item *it)
{
    struct lru_list *warm = &lru.lists[id][ITEM_LRU_WARM];

    if (!(item_flags(it) & ITEM_ACTIVE) ||
        pthread_mutex_trylock(&warm->lock) != 0) {
        return 0;
    }
    item_flags_clear(it, ITEM_ACTIVE);
    list_remove(l, it);
    set_lru(it, ITEM_LRU_WARM);
    list_push_head(warm, it);
    pthread_mutex_unlock(&warm->lock);
    COUNT(id, moves_to_warm, 1);
    return 1;
}

/* What a tail pull does with the first live item it finds. */
struct pull {
    enum pull_mode mode;
    uint64_t    total;          /* PULL_MAINT: the class's bytes */
    rel_time_t  cold_age;       /* PULL_MAINT: age of the COLD tail */
    int         done;           /* items reclaimed, moved or evicted */
    struct item *victim;        /* PULL_DEMOTE: that item, its lock and a */
    uint32_t    victim_hv;      /* reference kept for the caller */
};

/* Deal with one locked, referenced tail item; returns 1 if it moved or
 * left, 0 if the pull should stop here. */
static int
pull_one(unsigned id, unsigned cur, struct item *it, uint32_t hv,
         const struct pull *p)
{
    struct lru_list *l = &lru.lists[id][cur];
    int to;

    switch (p->mode) {
    case PULL_EVICT:
        if (cur != ITEM_LRU_COLD || !lru.opts->evict) {
            return 0;
        }
        count_eviction(id, it, clock_now());
        unlink_nolock(it, hv);
        slabs_note_eviction(id);
        return 1;
    case PULL_FORCE_COLD:
        COUNT(id, moves_to_cold, 1);
        relink_nested(l, it, ITEM_LRU_COLD);
        return 1;
    case PULL_MAINT:
        if (cur == ITEM_LRU_COLD) {
            return rescue_active(id, l, it);
        }
        if (cur != ITEM_LRU_HOT && cur != ITEM_LRU_WARM) {
            return 0;
        }
        to = maint_target(id, cur, it, p->total, p->cold_age);
        if (to < 0) {
            return 0;
        }
        relink_nested(l, it, (unsigned)to);
        return 1;
    default:
        return 0;
    }
}

/* Unlink a dead item found at a tail (list locked, item locked). */
static void
reclaim(unsigned id, struct item *it, uint32_t hv)
{
    COUNT(id, reclaimed, 1);
    if (!(item_flags(it) & ITEM_FETCHED)) {
        COUNT(id, expired_unfetched, 1);
    }
    unlink_nolock(it, hv);
}

/* One tail item, list locked: reclaim it if dead, else apply the pull's
 * mode.  Returns 1 when the pull should stop here. */
static int
pull_item(unsigned id, unsigned cur, struct item *it, struct pull *p)
{
    uint32_t hv = item_hv(it);
    bool flushed;
    int stop = 0;

    if (!locks_trylock(hv)) {
        return 0;
    }
    if (item_ref_incr(it) != 2) {
        /* Someone holds it (a reply being written): skip. */
        COUNT(id, lrutail_reflocked, 1);
        item_ref_decr(it);
        locks_unlock(hv);
        return 0;
    }
    if (lru_is_dead(it, clock_now(), &flushed)) {
        reclaim(id, it, hv);
        p->done++;
    } else if (p->mode == PULL_DEMOTE) {
        p->victim = it;
        p->victim_hv = hv;
        return 1;
    } else {
        if (p->mode != PULL_RECLAIM) {
            p->done += pull_one(id, cur, it, hv, p);
        }
        stop = 1;
    }
    item_release(it);
    locks_unlock(hv);
    return stop;
}

/*
 * Look at up to TAIL_TRIES items from the tail of list (id, cur): skip
 * busy ones, reclaim dead ones, and apply the pull to the first live one.
 * Returns how many items were reclaimed, moved or evicted.
 */
static int
pull_tail(unsigned id, unsigned cur, struct pull *p)
{
    struct lru_list *l = &lru.lists[id][cur];
    struct item *it, *prev;
    int tries = TAIL_TRIES;

    pthread_mutex_lock(&l->lock);
    for (it = l->tail; it != NULL && tries > 0; it = prev, tries--) {
        prev = it->prev;
        if (!is_cursor(it) && pull_item(id, cur, it, p)) {
            break;
        }
    }
    pthread_mutex_unlock(&l->lock);
    return p->done;
}

static int
pull(unsigned id, unsigned cur, enum pull_mode mode)
{
    struct pull p = { .mode = mode };

    return pull_tail(id, cur, &p);
}

/*
 * Make room in DRAM tier class id with two tiers: the COLD tail item
 * moves to the memory file rather than out of the cache (capacity), or,
 * being a copy, gives its place back to its original in the file (cache).
 * If the file has no room for it either, it is evicted (unless -M).  Both
 * count as demotions.
 */
static int
pull_demote(unsigned id)
{
    struct pull p = { .mode = PULL_DEMOTE };
    struct item *it, *n;

    pull_tail(id, ITEM_LRU_COLD, &p);
    if ((it = p.victim) == NULL) {
        return p.done;
    }
    /* Item lock and reference held, no list lock: moving it may evict in
     * the file, whose list locks rank after DRAM's anyway. */
    if (item_original(it) != NULL) {
        uncache(it, p.victim_hv);
        __atomic_add_fetch(&lru.demotions, 1, __ATOMIC_RELAXED);
        p.done++;
    } else if ((n = move_to_tier(it, p.victim_hv, TIER_PMEM,
                                 ITEM_LRU_COLD)) != NULL) {
        item_release(n);
        __atomic_add_fetch(&lru.demotions, 1, __ATOMIC_RELAXED);
        p.done++;
    } else if (lru.opts->evict && (item_flags(it) & ITEM_LINKED)) {
        count_eviction(id, it, clock_now());
        lru_unlink(it, p.victim_hv);
        slabs_note_eviction(id);
        p.done++;
    }
    locks_unlock(p.victim_hv);
    item_release(it);
    return p.done;
}

void *
lru_alloc(size_t size, unsigned id, unsigned lru_id)
{
    bool demote = SLABS_TC_TIER(lru_id) == TIER_DRAM &&
                  slabs_tier(TIER_PMEM) != NULL;
    void *mem = NULL;

    for (int i = 0; i < ALLOC_TRIES; i++) {
        int n;

        mem = slabs_alloc(size, id);
        if (mem != NULL) {
            return mem;
        }
        COUNT(lru_id, direct_reclaims, 1);
        n = demote ? pull_demote(lru_id)
                   : pull(lru_id, ITEM_LRU_COLD, PULL_EVICT);
        if (n <= 0 && lru.opts->lru_segmented) {
            n = pull(lru_id, ITEM_LRU_HOT, PULL_FORCE_COLD);
        }
        if (n <= 0) {
            break;
        }
    }
    /* A class with no page, or no items to evict, cannot make room by
     * itself: take a page from another class (unless -M forbids making
     * room).  Busy tails alone fail at once, as in memcached.  DRAM over
     * a memory file does not wait for the mover: the caller goes to the
     * file instead (capacity) or does without a copy (cache). */
    if (lru.opts->evict && lru.opts->slab_reassign && !demote &&
        (slabs_npages(id) == 0 || lru_class_items(lru_id) == 0) &&
        slabs_steal_page(id, STEAL_WAIT_MS)) {
        mem = slabs_alloc(size, id);
        if (mem != NULL) {
            return mem;
        }
    }
    if (!demote) {
        COUNT(lru_id, outofmemory, 1);  /* else the file is tried next */
    }
    return NULL;
}

/* ---- maintainer ------------------------------------------------------- */

static rel_time_t
tail_age(unsigned id, unsigned which, rel_time_t now)
{
    struct lru_list *l = &lru.lists[id][which];
    rel_time_t age = 0;
    struct item *it;

    pthread_mutex_lock(&l->lock);
    for (it = l->tail; it != NULL && is_cursor(it); it = it->prev) {
    }
    if (it != NULL && now > item_time(it)) {
        age = now - item_time(it);
    }
    pthread_mutex_unlock(&l->lock);
    return age;
}

static uint64_t
class_bytes(unsigned id, bool with_temp)
{
    uint64_t total = 0;

    for (unsigned l = 0; l < NLRU; l++) {
        if (l != ITEM_LRU_TEMP || with_temp) {
            total += __atomic_load_n(&lru.lists[id][l].bytes,
                                     __ATOMIC_RELAXED);
        }
    }
    return total;
}

unsigned
lru_juggle(unsigned id)
{
    uint64_t total = class_bytes(id, false);
    rel_time_t cold_age = tail_age(id, ITEM_LRU_COLD, clock_now());
    unsigned moved = 0;

    __atomic_add_fetch(&lru.juggles, 1, __ATOMIC_RELAXED);
    if (lru.opts->temp_lru) {
        for (int i = 0; i < JUGGLE_MAX; i++) {
            int n = pull(id, ITEM_LRU_TEMP, PULL_RECLAIM);

            if (n <= 0) {
                break;
            }
            moved += (unsigned)n;
        }
    }
    for (int i = 0; i < JUGGLE_MAX; i++) {
        struct pull p = { PULL_MAINT, total, cold_age, 0, NULL, 0 };
        int n;

        pull_tail(id, ITEM_LRU_HOT, &p);
        pull_tail(id, ITEM_LRU_WARM, &p);
        n = pull_tail(id, ITEM_LRU_COLD, &p);
        if (n <= 0) {
            break;
        }
        moved += (unsigned)n;
    }
    return moved;
}

static uint64_t
now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* Sleep up to us microseconds; false when asked to stop. */
static bool
maint_sleep(uint64_t us)
{
    struct timespec ts;
    bool go;

    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)(us / 1000000);
    ts.tv_nsec += (long)(us % 1000000) * 1000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&lru.wait_lock);
    if (!lru.stop) {
        pthread_cond_timedwait(&lru.wait_cond, &lru.wait_lock, &ts);
    }
    go = !lru.stop;
    pthread_mutex_unlock(&lru.wait_lock);
    return go;
}

/* Each class has its own backoff: 1 ms after a pass that moved items,
 * doubling up to 1 s while passes find nothing to do. */
static void *
maint_thread(void *arg)
{
    uint64_t next[SLABS_TC_MAX] = { 0 };
    uint64_t backoff[SLABS_TC_MAX];
    unsigned n = slabs_largest();

    (void)arg;
    for (unsigned i = 0; i < SLABS_TC_MAX; i++) {
        backoff[i] = SLEEP_MIN_US;
    }
    for (;;) {
        uint64_t t = now_us(), soonest = t + SLEEP_MAX_US;

        for (unsigned id = 1; id < SLABS_TC_MAX; id++) {
            if (SLABS_TC_ID(id) == 0 || SLABS_TC_ID(id) > n ||
                slabs_tier(SLABS_TC_TIER(id)) == NULL) {
                continue;
            }
            if (next[id] <= t) {
                backoff[id] = lru_juggle(id) > 0 ? SLEEP_MIN_US
                            : backoff[id] * 2 > SLEEP_MAX_US ? SLEEP_MAX_US
                            : backoff[id] * 2;
                next[id] = t + backoff[id];
            }
            if (next[id] < soonest) {
                soonest = next[id];
            }
        }
        t = now_us();
        if (!maint_sleep(soonest > t ? soonest - t : 0)) {
            return NULL;
        }
    }
}

int
lru_maintainer_start(void)
{
    if (lru.running) {
        return 0;
    }
    lru.stop = false;
    if (pthread_create(&lru.thread, NULL, maint_thread, NULL) != 0) {
        return -1;
    }
    pthread_setname_np(lru.thread, "mc-lrumaint");
    lru.running = true;
    return 0;
}

void
lru_maintainer_stop(void)
{
    if (!lru.running) {
        return;
    }
    pthread_mutex_lock(&lru.wait_lock);
    lru.stop = true;
    pthread_cond_signal(&lru.wait_cond);
    pthread_mutex_unlock(&lru.wait_lock);
    pthread_join(lru.thread, NULL);
    lru.running = false;
}

/* ---- page mover hand-off ---------------------------------------------- */

static bool
same_key(const struct item *it, const char *key, size_t nkey)
{
    return item_nkey(it) == nkey && memcmp(item_key(it), key, nkey) == 0;
}

/*
 * Put n, a filled copy of linked item it, in its place: in the hash table
 * and at the head of list `which` of n's tier class.  A copy in the file
 * is committed before the original goes (and dies in the file, if it was
 * there), so a crash leaves one of the two live, never neither.  lock(hv)
 * held; n keeps its allocation reference.
 */
static void
swap_in(struct item *it, struct item *n, uint32_t hv, unsigned which)
{
    if (n->tier == TIER_PMEM) {
        persist_commit(n);
    }
    lru_unlink(it, hv);
    set_lru(n, which);
    link_in_place(n, hv);
}

/* Copy a linked item into another chunk of its class and swap it in (a
 * copy's trailer, and with it the reference to its original, moves
 * too). */
static bool
rescue(struct item *it, uint32_t hv)
{
    size_t size = item_alloc_size(it);
    struct item *n = slabs_alloc(size, tc_of(it));

    if (n == NULL) {
        return false;
    }
    memcpy(n->data, it->data, size - sizeof(struct item));
    if (item_flags(it) & ITEM_COPY) {
        item_set_original(it, NULL);
    }
    item_time_store(n, item_time(it));
    n->exptime = it->exptime;
    n->nbytes = it->nbytes;
    item_flags_store(n, (uint16_t)(item_flags(it) & ~ITEM_LINKED));
    n->nkey = it->nkey;
    n->clsid = it->clsid;
    swap_in(it, n, hv, it->clsid >> ITEM_LRU_SHIFT);
    item_release(n);
    return true;
}

/*
 * Move linked item `it` to tier t, at the head of list `which`: a copy
 * (allocated there, which may evict there) carrying its value, cas,
 * access time, exptime and meta marks but not its hit marks, swapped into
 * its place.  Returns the copy with its allocation reference for the
 * caller, or NULL when t has no room.  lock(hv) and a reference held.
 */
static struct item *
move_to_tier(struct item *it, uint32_t hv, unsigned t, unsigned which)
{
    uint16_t keep = ITEM_TOKEN_SENT | ITEM_STALE | ITEM_KEY_BINARY;
    struct item *n = item_alloc_in(t, item_key(it), item_nkey(it),
                                   item_client_flags(it), it->exptime,
                                   item_vlen(it),
                                   (item_flags(it) & ITEM_CAS) != 0);

    if (n == NULL) {
        return NULL;
    }
    item_value_move(n, 0, it, 0, it->nbytes);
    item_set_cas(n, item_cas(it));
    item_time_store(n, item_time(it));
    item_flags_set(n, item_flags(it) & keep);
    swap_in(it, n, hv, which);
    return n;
}

/*
 * tier_policy cache: a DRAM copy of `it`, an unchunked item in the file
 * hit a second time, takes its place in the hash table and DRAM's lists
 * (where a new item would go); `it` leaves its list but stays committed
 * in the file, its link's reference held by the copy's trailer.  Returns
 * the copy with the caller's reference moved to it, or `it` when DRAM has
 * no room.  lock(hv) held.
 */
static struct item *
cache_copy(struct item *it, uint32_t hv)
{
    size_t ntotal = item_ntotal(it);
    unsigned id = slabs_clsid(ntotal + sizeof(it));
    unsigned tc = SLABS_TC(TIER_DRAM, id);
    uint16_t drop = ITEM_LINKED | ITEM_ACTIVE;
    struct item *n;

    if (id == 0 || (item_flags(it) & ITEM_CHUNKED) ||
        !(item_flags(it) & ITEM_LINKED) ||
        (n = lru_alloc(ntotal + sizeof(it), tc, tc)) == NULL) {
        return it;
    }
    memcpy(n->data, it->data, ntotal - sizeof(struct item));
    n->exptime = it->exptime;
    n->nbytes = it->nbytes;
    n->nkey = it->nkey;
    item_flags_store(n, (uint16_t)((item_flags(it) & ~drop) | ITEM_COPY |
                                   ITEM_FETCHED));
    item_time_store(n, clock_now());
    item_set_original(n, it);
    detach(it, hv);
    set_lru(n, first_lru(n));
    link_in_place(n, hv);
    item_release(it);
    __atomic_add_fetch(&lru.promotions, 1, __ATOMIC_RELAXED);
    return n;
}

/* Drop copy c: its original takes its place again at the head of the
 * file's COLD list, needing two more hits to be copied again; the copy's
 * reference becomes the link's.  lock(hv) held. */
static void
uncache(struct item *c, uint32_t hv)
{
    struct item *orig = item_original(c);

    item_set_original(c, NULL);
    lru_unlink(c, hv);
    item_flags_clear(orig, ITEM_FETCHED | ITEM_ACTIVE);
    item_time_store(orig, item_time(c));
    set_lru(orig, ITEM_LRU_COLD);
    link_in_place(orig, hv);
    item_release(orig);
}

/* The mover cannot keep an item in its class: a DRAM copy gives its
 * place back to its original in the file, a DRAM item over a memory file
 * (capacity) is demoted into it; otherwise, or when the file has no room,
 * it leaves the cache. */
static void
leave_chunk(struct item *it, uint32_t hv)
{
    struct item *n;

    if (item_original(it) != NULL) {
        uncache(it, hv);
    } else if (it->tier == TIER_DRAM && slabs_tier(TIER_PMEM) != NULL &&
               (n = move_to_tier(it, hv, TIER_PMEM, ITEM_LRU_COLD)) != NULL) {
        item_release(n);
        __atomic_add_fetch(&lru.demotions, 1, __ATOMIC_RELAXED);
    } else {
        lru_unlink(it, hv);
    }
}

/* Move a linked item out of its chunk; item lock held.  Returns 1 if
 * readers hold it and the mover should come back later. */
static int
evacuate_linked(struct item *it, uint32_t hv, bool rescue_it, bool force,
                struct cache_stats *mst)
{
    if (__atomic_load_n(&it->refcount, __ATOMIC_ACQUIRE) > 2) {
        if (!force) {
            return 1;
        }
        /* Held for long: unlink it, the chunk frees when they let go. */
        mst->slab_reassign_busy_deletes++;
        leave_chunk(it, hv);
    } else if (rescue_it && !(item_flags(it) & ITEM_CHUNKED) &&
               rescue(it, hv)) {
        mst->slab_reassign_rescues++;
    } else {
        mst->slab_reassign_inline_reclaim++;
        leave_chunk(it, hv);
    }
    return 0;
}

int
lru_evacuate(struct item *it, const char *key, size_t nkey, bool rescue_it,
             bool force, struct cache_stats *mst)
{
    uint32_t hv = hash_murmur3(key, nkey);
    int busy = 1;

    if (!locks_trylock(hv)) {
        item_release(it);
        return 1;
    }
    /* An original behind a DRAM copy is on no list: give it its place
     * back (found through the table, by the copied key) so it can move. */
    if (!(item_flags(it) & ITEM_LINKED)) {
        struct item *c = assoc_find(key, nkey, hv);

        if (c != NULL && item_original(c) == it) {
            uncache(c, hv);
        }
    }
    /* The key was copied without the item lock: only trust it if it is
     * still the item's key now that the lock is held. */
    if ((item_flags(it) & ITEM_LINKED) && same_key(it, key, nkey)) {
        busy = evacuate_linked(it, hv, rescue_it, force, mst);
    }
    locks_unlock(hv);
    item_release(it);
    return busy;
}

/* ---- crawler cursor --------------------------------------------------- */

void
lru_crawler_insert(struct item *cursor, unsigned tc, enum item_lru which)
{
    struct lru_list *l = &lru.lists[tc][which];

    memset(cursor, 0, sizeof(*cursor));
    item_flags_store(cursor, ITEM_LINKED);
    cursor->clsid = (uint8_t)(SLABS_TC_ID(tc) |
                              ((unsigned)which << ITEM_LRU_SHIFT));
    cursor->tier = (uint8_t)SLABS_TC_TIER(tc);
    pthread_mutex_lock(&l->lock);
    cursor->prev = l->tail;
    if (l->tail != NULL) {
        l->tail->next = cursor;
    } else {
        l->head = cursor;
    }
    l->tail = cursor;
    pthread_mutex_unlock(&l->lock);
}

void
lru_crawler_remove(struct item *cursor)
{
    struct lru_list *l = list_of(cursor);

    if (!(item_flags(cursor) & ITEM_LINKED)) {
        return;
    }
    pthread_mutex_lock(&l->lock);
    list_remove(l, cursor);
    pthread_mutex_unlock(&l->lock);
    item_flags_store(cursor, 0);
}

/* Swap the cursor with the item before it (towards the head), in place:
 * the list's size and bytes never change, so a stats read without the
 * lock never sees an item missing while the crawler walks by. */
static struct item *
cursor_advance(struct lru_list *l, struct item *c)
{
    struct item *it = c->prev;
    struct item *before = it->prev;

    if (before != NULL) {
        before->next = c;
    } else {
        l->head = c;
    }
    c->prev = before;
    it->next = c->next;
    if (c->next != NULL) {
        c->next->prev = it;
    } else {
        l->tail = it;
    }
    c->next = it;
    it->prev = c;
    return it;
}

/* Reclaim `it` (list locked, item lock taken, our reference held) if it
 * is dead. */
static int
crawl_check(unsigned id, struct item *it, uint32_t hv, bool *had_ttl)
{
    bool flushed;

    COUNT(id, crawler_items_checked, 1);
    *had_ttl = it->exptime != 0;
    if (lru_is_dead(it, clock_now(), &flushed)) {
        COUNT(id, crawler_reclaimed, 1);
        if (!(item_flags(it) & ITEM_FETCHED)) {
            COUNT(id, expired_unfetched, 1);
        }
        unlink_nolock(it, hv);
    }
    return 1;
}

int
lru_crawler_step(struct item *cursor, bool *had_ttl)
{
    struct lru_list *l = list_of(cursor);
    unsigned id = tc_of(cursor);
    struct item *it;
    uint32_t hv;
    int rc = 0;

    *had_ttl = false;
    pthread_mutex_lock(&l->lock);
    if (cursor->prev == NULL) {
        list_remove(l, cursor);
        item_flags_store(cursor, 0);
        pthread_mutex_unlock(&l->lock);
        return -1;
    }
    it = cursor_advance(l, cursor);
    if (is_cursor(it)) {
        pthread_mutex_unlock(&l->lock);
        return 0;
    }
    hv = item_hv(it);
    if (locks_trylock(hv)) {
        if (item_ref_incr(it) == 2) {
            rc = crawl_check(id, it, hv, had_ttl);
        }
        item_release(it);
        locks_unlock(hv);
    }
    pthread_mutex_unlock(&l->lock);
    return rc;
}

/* ---- stats ------------------------------------------------------------ */

static uint64_t
ld(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

uint64_t
lru_class_items(unsigned id)
{
    uint64_t n = 0;

    for (unsigned l = 0; l < NLRU; l++) {
        n += ld(&lru.lists[id][l].size);
    }
    return n;
}

static void
copy_counters(unsigned id, struct cache_item_stats *o)
{
    const struct lru_counters *c = &lru.ctr[id];

    o->evicted = ld(&c->evicted);
    o->evicted_nonzero = ld(&c->evicted_nonzero);
    o->evicted_time = ld(&c->evicted_time);
    o->outofmemory = ld(&c->outofmemory);
    o->reclaimed = ld(&c->reclaimed);
    o->expired_unfetched = ld(&c->expired_unfetched);
    o->evicted_unfetched = ld(&c->evicted_unfetched);
    o->evicted_active = ld(&c->evicted_active);
    o->crawler_reclaimed = ld(&c->crawler_reclaimed);
    o->crawler_items_checked = ld(&c->crawler_items_checked);
    o->lrutail_reflocked = ld(&c->lrutail_reflocked);
    o->moves_to_cold = ld(&c->moves_to_cold);
    o->moves_to_warm = ld(&c->moves_to_warm);
    o->moves_within_lru = ld(&c->moves_within_lru);
    o->direct_reclaims = ld(&c->direct_reclaims);
}

bool
lru_item_stats(unsigned id, struct cache_item_stats *o)
{
    rel_time_t now = clock_now();

    memset(o, 0, sizeof(*o));
    if (SLABS_TC_ID(id) == 0 || id >= SLABS_TC_MAX ||
        lru_class_items(id) == 0) {
        return false;
    }
    o->number_hot = ld(&lru.lists[id][ITEM_LRU_HOT].size);
    o->number_warm = ld(&lru.lists[id][ITEM_LRU_WARM].size);
    o->number_cold = ld(&lru.lists[id][ITEM_LRU_COLD].size);
    o->number_temp = ld(&lru.lists[id][ITEM_LRU_TEMP].size);
    o->number = o->number_hot + o->number_warm + o->number_cold +
                o->number_temp;
    o->age_hot = tail_age(id, ITEM_LRU_HOT, now);
    o->age_warm = tail_age(id, ITEM_LRU_WARM, now);
    o->age = tail_age(id, ITEM_LRU_COLD, now);
    o->mem_requested = slabs_requested(id);
    copy_counters(id, o);
    return true;
}

uint64_t
lru_items_in_class(unsigned id)
{
    return lru_class_items(SLABS_TC(TIER_DRAM, id)) +
           lru_class_items(SLABS_TC(TIER_PMEM, id));
}

/* Add the figures of tier classes [from, to) to out. */
static void
add_totals(unsigned from, unsigned to, struct cache_stats *out)
{
    for (unsigned id = from; id < to; id++) {
        const struct lru_counters *c = &lru.ctr[id];

        out->curr_items += lru_class_items(id);
        out->bytes += class_bytes(id, true);
        out->evictions += ld(&c->evicted);
        out->reclaimed += ld(&c->reclaimed);
        out->expired_unfetched += ld(&c->expired_unfetched);
        out->evicted_unfetched += ld(&c->evicted_unfetched);
        out->evicted_active += ld(&c->evicted_active);
        out->crawler_reclaimed += ld(&c->crawler_reclaimed);
        out->crawler_items_checked += ld(&c->crawler_items_checked);
        out->lrutail_reflocked += ld(&c->lrutail_reflocked);
        out->moves_to_cold += ld(&c->moves_to_cold);
        out->moves_to_warm += ld(&c->moves_to_warm);
        out->moves_within_lru += ld(&c->moves_within_lru);
        out->direct_reclaims += ld(&c->direct_reclaims);
    }
}

void
lru_totals(struct cache_stats *out)
{
    add_totals(1, SLABS_TC_MAX, out);
    out->lru_maintainer_juggles = ld(&lru.juggles);
}

void
lru_tier_totals(unsigned t, struct cache_stats *out)
{
    add_totals(SLABS_TC(t, 1), SLABS_TC(t + 1, 0), out);
}

void
lru_tier_moves(unsigned tier_id, uint64_t *promotions, uint64_t *demotions)
{
    *promotions = tier_id == TIER_DRAM ? ld(&lru.promotions) : 0;
    *demotions = tier_id == TIER_PMEM ? ld(&lru.demotions) : 0;
}

void
lru_stats_reset(void)
{
    __atomic_store_n(&lru.juggles, 0, __ATOMIC_RELAXED);
    for (unsigned id = 0; id < SLABS_TC_MAX; id++) {
        uint64_t *p = (uint64_t *)&lru.ctr[id];

        for (size_t i = 0; i < sizeof(lru.ctr[id]) / sizeof(*p); i++) {
            __atomic_store_n(&p[i], 0, __ATOMIC_RELAXED);
        }
    }
}

bool
lru_sizes(void (*emit)(uint64_t size, uint64_t count, void *ctx), void *ctx)
{
    if (lru.histo == NULL) {
        return false;
    }
    for (size_t b = 0; b < lru.nhisto; b++) {
        uint64_t n = ld(&lru.histo[b]);

        if (n != 0) {
            emit(b * 32, n, ctx);
        }
    }
    return true;
}

/* ---- flush ------------------------------------------------------------ */

/* The item lock of a list item was busy: wait for it the right way round
 * (item lock first), then unlink the item if it is still linked. */
static void
flush_busy(struct lru_list *l, struct item *it, uint32_t hv)
{
    item_ref_incr(it);
    pthread_mutex_unlock(&l->lock);
    locks_lock(hv);
    lru_unlink(it, hv);
    locks_unlock(hv);
    item_release(it);
    pthread_mutex_lock(&l->lock);
}

/*
 * Unlink items newer than `when` from the head of one list; stops at the
 * first older one.  An item whose lock is busy is waited for, so that a
 * flush never leaves a recent item behind, and the walk restarts.
 */
static void
flush_list(struct lru_list *l, rel_time_t when)
{
    struct item *it, *next;

    pthread_mutex_lock(&l->lock);
    for (it = l->head; it != NULL; it = next) {
        uint32_t hv;

        next = it->next;
        if (is_cursor(it)) {
            continue;
        }
        if (item_time(it) <= when) {
            break;
        }
        hv = item_hv(it);
        if (!locks_trylock(hv)) {
            flush_busy(l, it, hv);
            next = l->head;
            continue;
        }
        item_ref_incr(it);
        unlink_nolock(it, hv);
        item_release(it);
        locks_unlock(hv);
    }
    pthread_mutex_unlock(&l->lock);
}

void
lru_flush_recent(rel_time_t when)
{
    for (unsigned id = 1; id < SLABS_TC_MAX; id++) {
        for (unsigned l = 0; l < NLRU; l++) {
            flush_list(&lru.lists[id][l], when);
        }
    }
}
