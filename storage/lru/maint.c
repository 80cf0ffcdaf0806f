/*
 * maint.c: the LRU maintainer (maint.h).
 *
 * Locking: a pass takes list locks through evict_pull() and only trylocks
 * item locks.  The thread's own state (stop flag, condition) is under
 * wait_lock.
 */
#include "storage/lru/maint.h"
#include "storage/base/affinity.h"
#include "storage/lru/evict.h"
#include "storage/lru/lru.h"
#include "storage/slab/slabs.h"

#include <pthread.h>
#include <string.h>
#include <time.h>

#define JUGGLE_MAX      500
#define SLEEP_MIN_US    1000
#define SLEEP_MAX_US    1000000

static struct {
    const struct cache_options *opts;
    struct cache_stats  st;             /* lru_maintainer_juggles */
    pthread_t           thread;
    bool                running;
    bool                stop;
    pthread_mutex_t     wait_lock;
    pthread_cond_t      wait_cond;
} mt = {
    .wait_lock = PTHREAD_MUTEX_INITIALIZER,
    .wait_cond = PTHREAD_COND_INITIALIZER,
};

void
maint_init(const struct cache_options *opts)
{
    mt.opts = opts;
    cache_stats_reset_counters(&mt.st);
}

/* ---- one pass --------------------------------------------------------- */

/* The class's figures a pass judges its tails by. */
struct juggle {
    uint64_t    total;          /* bytes in HOT, WARM and COLD */
    rel_time_t  cold_age;       /* age of the COLD tail */
};

/* Where a live HOT or WARM tail item goes: WARM when active, COLD when
 * its list is over its share of the class's bytes or it is too old, else
 * it stays. */
static enum evict_act
hot_warm_tail(struct item *it, unsigned tc, enum item_lru which,
              const struct juggle *j)
{
    const struct cache_options *o = mt.opts;
    bool hot = which == ITEM_LRU_HOT;
    unsigned pct = hot ? o->hot_lru_pct : o->warm_lru_pct;
    double factor = hot ? o->hot_max_factor : o->warm_max_factor;
    rel_time_t now = clock_now(), t = item_time(it);
    rel_time_t age = now > t ? now - t : 0;

    if (item_flags(it) & ITEM_ACTIVE) {
        item_flags_clear(it, ITEM_ACTIVE);
        if (hot) {
            LRU_COUNT(tc, moves_to_warm, 1);
        } else {
            LRU_COUNT(tc, moves_within_lru, 1);
        }
        do_lru_move(it, ITEM_LRU_WARM);
        return EVICT_DONE;
    }
    if (lru_list_bytes(tc, which) > j->total * pct / 100 ||
        (double)age > (double)j->cold_age * factor) {
        LRU_COUNT(tc, moves_to_cold, 1);
        do_lru_move(it, ITEM_LRU_COLD);
        return EVICT_DONE;
    }
    return EVICT_STOP;
}

/*
 * An active item at the COLD tail goes back to WARM.  The WARM list lock
 * ranks below COLD's (nested locks are taken in list order), so it is only
 * tried: when busy, the item waits for the next pass.
 */
static enum evict_act
cold_tail(struct item *it, unsigned tc)
{
    if (!(item_flags(it) & ITEM_ACTIVE) ||
        !do_lru_try_move(it, ITEM_LRU_WARM)) {
        return EVICT_STOP;
    }
    item_flags_clear(it, ITEM_ACTIVE);
    LRU_COUNT(tc, moves_to_warm, 1);
    return EVICT_DONE;
}

static enum evict_act
juggle_tail(struct item *it, uint32_t hv, unsigned tc, enum item_lru which,
            void *ctx)
{
    (void)hv;
    switch (which) {
    case ITEM_LRU_HOT:
    case ITEM_LRU_WARM:
        return hot_warm_tail(it, tc, which, ctx);
    case ITEM_LRU_COLD:
        return cold_tail(it, tc);
    default:
        return EVICT_STOP;
    }
}

/* TEMP's dead items go; its live ones stay where they are. */
static unsigned
reclaim_temp(unsigned tc)
{
    unsigned moved = 0;

    for (int i = 0; i < JUGGLE_MAX; i++) {
        struct evict_pull p = { .fn = NULL };
        int n = evict_pull(tc, ITEM_LRU_TEMP, &p);

        if (n <= 0) {
            break;
        }
        moved += (unsigned)n;
    }
    return moved;
}

/* A list's pull, unless it looks empty: the look is relaxed, and an item
 * pushed as it looks waits for the next pass. */
static void
juggle_list(unsigned tc, enum item_lru which, struct evict_pull *p)
{
    if (lru_list_size(tc, which) != 0) {
        evict_pull(tc, which, p);
    }
}

unsigned
maint_juggle(unsigned tc)
{
    struct juggle j = {
        .total = lru_class_bytes(tc, false),
        .cold_age = lru_tail_age(tc, ITEM_LRU_COLD, clock_now()),
    };
    unsigned moved = 0;

    __atomic_add_fetch(&mt.st.lru_maintainer_juggles, 1, __ATOMIC_RELAXED);
    if (mt.opts->temp_lru) {
        moved += reclaim_temp(tc);
    }
    for (int i = 0; i < JUGGLE_MAX; i++) {
        struct evict_pull p = { .fn = juggle_tail, .ctx = &j };

        juggle_list(tc, ITEM_LRU_HOT, &p);
        juggle_list(tc, ITEM_LRU_WARM, &p);
        juggle_list(tc, ITEM_LRU_COLD, &p);
        if (p.done <= 0) {
            break;
        }
        moved += (unsigned)p.done;
    }
    return moved;
}

/* ---- the thread ------------------------------------------------------- */

/* Sleep up to us microseconds; false when asked to stop. */
static bool
maint_sleep(uint64_t us)
{
    struct timespec ts;
    bool go;

    clock_deadline(&ts, us);
    pthread_mutex_lock(&mt.wait_lock);
    if (!mt.stop) {
        pthread_cond_timedwait(&mt.wait_cond, &mt.wait_lock, &ts);
    }
    go = !mt.stop;
    pthread_mutex_unlock(&mt.wait_lock);
    return go;
}

/* The tier classes that exist: a class of the table, in a tier in use. */
static bool
juggled(unsigned tc)
{
    return SLABS_TC_ID(tc) != 0 && SLABS_TC_ID(tc) <= slabs_largest() &&
           slabs_tier(SLABS_TC_TIER(tc)) != NULL;
}

static void *
maint_thread(void *arg)
{
    uint64_t next[SLABS_TC_MAX] = { 0 };
    uint64_t backoff[SLABS_TC_MAX];

    (void)arg;
    for (unsigned i = 0; i < SLABS_TC_MAX; i++) {
        backoff[i] = SLEEP_MIN_US;
    }
    for (;;) {
        uint64_t t = clock_mono_us(), soonest = t + SLEEP_MAX_US;

        for (unsigned tc = 1; tc < SLABS_TC_MAX; tc++) {
            if (!juggled(tc)) {
                continue;
            }
            if (next[tc] <= t) {
                backoff[tc] = maint_juggle(tc) > 0 ? SLEEP_MIN_US
                            : backoff[tc] * 2 > SLEEP_MAX_US ? SLEEP_MAX_US
                            : backoff[tc] * 2;
                next[tc] = t + backoff[tc];
            }
            if (next[tc] < soonest) {
                soonest = next[tc];
            }
        }
        t = clock_mono_us();
        if (!maint_sleep(soonest > t ? soonest - t : 0)) {
            return NULL;
        }
    }
}

int
maint_start(void)
{
    if (mt.running) {
        return 0;
    }
    mt.stop = false;
    if (pthread_create(&mt.thread, NULL, maint_thread, NULL) != 0) {
        return -1;
    }
    pthread_setname_np(mt.thread, "mc-lrumaint");
    affinity_apply(mt.thread, AFFINITY_BG, 0);
    mt.running = true;
    return 0;
}

void
maint_stop(void)
{
    if (!mt.running) {
        return;
    }
    pthread_mutex_lock(&mt.wait_lock);
    mt.stop = true;
    pthread_cond_signal(&mt.wait_cond);
    pthread_mutex_unlock(&mt.wait_lock);
    pthread_join(mt.thread, NULL);
    mt.running = false;
}

void
maint_stats(struct cache_stats *out)
{
    out->lru_maintainer_juggles +=
        __atomic_load_n(&mt.st.lru_maintainer_juggles, __ATOMIC_RELAXED);
}

void
maint_stats_reset(void)
{
    cache_stats_reset_counters(&mt.st);
}
