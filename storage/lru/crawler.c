/*
 * crawler.c: the LRU crawler thread.
 *
 * A crawl puts a cursor item at the tail of each list of a class and lets
 * crawler_step() move it towards the head one item at a time; the step
 * only trylocks item locks, so the crawler never waits on a worker while
 * holding a list lock.  Lists are crawled one after the other.
 *
 * Locking: the thread's state and requests are under cr.lock; a crawl
 * runs without it.
 */
#include "storage/lru/crawler.h"
#include "storage/base/affinity.h"
#include "storage/base/locks.h"
#include "storage/lru/link.h"
#include "storage/lru/lru.h"
#include "storage/slab/slabs.h"

#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define AUTO_MIN_S  5
#define AUTO_MAX_S  60
#define SLEEP_EVERY 1000

static struct {
    const struct cache_options *opts;
    pthread_mutex_t lock;
    pthread_cond_t  cond;
    pthread_cond_t  idle;
    pthread_t       thread;
    bool            on;
    bool            stop;
    bool            pending;
    bool            want[CACHE_MAX_CLASSES];
    rel_time_t      next_auto[CACHE_MAX_CLASSES];
    unsigned        interval[CACHE_MAX_CLASSES];
    struct cache_stats st;      /* lru_crawler_starts, _running */
} cr;

static bool
should_stop(void)
{
    return __atomic_load_n(&cr.stop, __ATOMIC_RELAXED);
}

/* The item the cursor passed: reclaim it if dead.  List, item locked;
 * our reference held. */
static int
check(unsigned tc, struct item *it, uint32_t hv, bool *had_ttl)
{
    bool flushed;

    LRU_COUNT(tc, crawler_items_checked, 1);
    *had_ttl = it->exptime != 0;
    if (link_is_dead(it, clock_now(), &flushed)) {
        LRU_COUNT(tc, crawler_reclaimed, 1);
        if (!(item_flags(it) & ITEM_FETCHED)) {
            LRU_COUNT(tc, expired_unfetched, 1);
        }
        do_link_unlink(it, hv);
    }
    return 1;
}

int
crawler_step(struct item *cursor, bool *had_ttl)
{
    unsigned tc = lru_tc(cursor);
    enum item_lru which = item_lru(cursor);
    struct item *it;
    uint32_t hv;
    int rc = 0;

    *had_ttl = false;
    lru_lock(tc, which);
    it = do_lru_cursor_step(cursor);
    if (it == NULL) {
        lru_unlock(tc, which);
        return -1;
    }
    if (lru_is_cursor(it)) {
        lru_unlock(tc, which);
        return 0;
    }
    hv = link_hv(it);
    if (locks_trylock(hv)) {
        if (item_ref_incr(it) == 2) {
            rc = check(tc, it, hv, had_ttl);
        }
        item_release(it);
        locks_unlock(hv);
    }
    lru_unlock(tc, which);
    return rc;
}

/* Crawl one list; true if it held an item with an exptime. */
static bool
crawl_list(unsigned id, enum item_lru which, uint64_t *checked)
{
    struct item cursor_mem;
    struct item *cursor = &cursor_mem;
    unsigned limit = cr.opts->crawler_tocrawl;
    bool any_ttl = false, ttl;
    unsigned n = 0;
    int rc;

    lru_cursor_insert(cursor, id, which);
    while ((rc = crawler_step(cursor, &ttl)) >= 0) {
        any_ttl |= ttl;
        n += (unsigned)rc;
        if (rc > 0 && ++*checked % SLEEP_EVERY == 0 &&
            cr.opts->crawler_sleep_us > 0) {
            usleep(cr.opts->crawler_sleep_us);
        }
        if ((limit != 0 && n >= limit) || should_stop()) {
            lru_cursor_remove(cursor);
            break;
        }
    }
    return any_ttl;
}

static void
crawl_class(unsigned id, uint64_t *checked)
{
    bool ttl = false;

    for (unsigned t = TIER_DRAM; t <= TIER_PMEM; t++) {
        if (slabs_tier(t) == NULL) {
            continue;
        }
        for (unsigned l = ITEM_LRU_HOT;
             l <= ITEM_LRU_TEMP && !should_stop(); l++) {
            ttl |= crawl_list(SLABS_TC(t, id), (enum item_lru)l, checked);
        }
    }
    /* Schedule the next automatic crawl of this class. */
    if (ttl) {
        cr.interval[id] = AUTO_MIN_S;
    } else {
        cr.interval[id] = cr.interval[id] * 2 > AUTO_MAX_S
                        ? AUTO_MAX_S : cr.interval[id] * 2;
    }
    cr.next_auto[id] = clock_now() + cr.interval[id];
}

static void
crawl(const bool want[CACHE_MAX_CLASSES])
{
    uint64_t checked = 0;

    for (unsigned id = 1; id <= slabs_largest() && !should_stop(); id++) {
        if (want[id]) {
            crawl_class(id, &checked);
        }
    }
}

/* Classes due for an automatic crawl; false if none. */
static bool
auto_due(bool want[CACHE_MAX_CLASSES])
{
    rel_time_t now = clock_now();
    bool any = false;

    memset(want, 0, CACHE_MAX_CLASSES * sizeof(bool));
    for (unsigned id = 1; id <= slabs_largest(); id++) {
        if (cr.interval[id] == 0) {
            /* As memcached's first crawl, at start, of a cache that holds
             * nothing yet: the next is a minute and five seconds on.
             * Until then what expires is the LRU maintainer's to take
             * (counted as reclaimed, not crawler_reclaimed). */
            cr.interval[id] = AUTO_MAX_S;
            cr.next_auto[id] = now + AUTO_MAX_S + AUTO_MIN_S;
        }
        if (now >= cr.next_auto[id] && lru_items_in_class(id) > 0) {
            want[id] = true;
            any = true;
        }
    }
    return any;
}

static void
wait_a_second(void)
{
    struct timespec ts;

    clock_deadline(&ts, 1000000);
    pthread_cond_timedwait(&cr.cond, &cr.lock, &ts);
}

/* A crawl begins: counted, and running until the thread is done. */
static void
crawl_begins(void)
{
    cr.st.lru_crawler_running = 1;
    cr.st.lru_crawler_starts++;
}

static void *
crawler_thread(void *arg)
{
    bool want[CACHE_MAX_CLASSES];

    (void)arg;
    pthread_mutex_lock(&cr.lock);
    while (!cr.stop) {
        if (cr.pending) {
            memcpy(want, cr.want, sizeof(want));
            cr.pending = false;         /* counted when asked for */
        } else if (!auto_due(want)) {
            wait_a_second();
            continue;
        } else {
            crawl_begins();
        }
        pthread_mutex_unlock(&cr.lock);
        crawl(want);
        pthread_mutex_lock(&cr.lock);
        cr.st.lru_crawler_running = 0;
        pthread_cond_broadcast(&cr.idle);
    }
    cr.st.lru_crawler_running = 0;
    pthread_cond_broadcast(&cr.idle);
    pthread_mutex_unlock(&cr.lock);
    return NULL;
}

int
crawler_init(const struct cache_options *opts)
{
    memset(&cr, 0, sizeof(cr));
    cr.opts = opts;
    pthread_mutex_init(&cr.lock, NULL);
    pthread_cond_init(&cr.cond, NULL);
    pthread_cond_init(&cr.idle, NULL);
    return opts->lru_crawler ? crawler_enable(true) : 0;
}

int
crawler_enable(bool on)
{
    int rc = 0;

    if (!on) {
        pthread_mutex_lock(&cr.lock);
        if (cr.on) {
            __atomic_store_n(&cr.stop, true, __ATOMIC_RELAXED);
            pthread_cond_broadcast(&cr.cond);
            pthread_mutex_unlock(&cr.lock);
            pthread_join(cr.thread, NULL);
            pthread_mutex_lock(&cr.lock);
            cr.on = false;
            cr.pending = false;
        }
        pthread_mutex_unlock(&cr.lock);
        return 0;
    }
    pthread_mutex_lock(&cr.lock);
    if (!cr.on) {
        __atomic_store_n(&cr.stop, false, __ATOMIC_RELAXED);
        rc = pthread_create(&cr.thread, NULL, crawler_thread, NULL) == 0
           ? 0 : -1;
        cr.on = rc == 0;
        if (cr.on) {
            pthread_setname_np(cr.thread, "mc-itemcrawler");
            affinity_apply(cr.thread, AFFINITY_BG, 0);
        }
    }
    pthread_mutex_unlock(&cr.lock);
    return rc;
}

void
crawler_destroy(void)
{
    crawler_enable(false);
    pthread_mutex_destroy(&cr.lock);
    pthread_cond_destroy(&cr.cond);
    pthread_cond_destroy(&cr.idle);
}

enum cache_status
crawler_request(const bool classes[CACHE_MAX_CLASSES])
{
    enum cache_status st = CACHE_NOTSTARTED;

    /* As memcached: any class id below the limit may be asked for, and
     * an empty one is crawled at once; class 0 is the page pool. */
    if (classes[0]) {
        return CACHE_BADCLASS;
    }
    pthread_mutex_lock(&cr.lock);
    if (!cr.on) {
        st = CACHE_DISABLED;
    } else if (cr.pending || cr.st.lru_crawler_running) {
        st = CACHE_BUSY;
    } else {
        for (unsigned id = 1; id < CACHE_MAX_CLASSES; id++) {
            cr.want[id] = classes[id] && id <= slabs_largest();
            st = classes[id] ? CACHE_OK : st;
        }
        cr.pending = st == CACHE_OK;
        /* Started and running from the OK on, as memcached's: a client
         * that waits for lru_crawler_running 0 waits for this crawl. */
        if (cr.pending) {
            crawl_begins();
        }
        pthread_cond_signal(&cr.cond);
    }
    pthread_mutex_unlock(&cr.lock);
    return st;
}

void
crawler_wait(void)
{
    pthread_mutex_lock(&cr.lock);
    while (cr.on && (cr.pending || cr.st.lru_crawler_running)) {
        pthread_cond_wait(&cr.idle, &cr.lock);
    }
    pthread_mutex_unlock(&cr.lock);
}

void
crawler_stats(struct cache_stats *out)
{
    pthread_mutex_lock(&cr.lock);
    cache_stats_add(out, &cr.st);
    pthread_mutex_unlock(&cr.lock);
}

void
crawler_stats_reset(void)
{
    pthread_mutex_lock(&cr.lock);
    cache_stats_reset_counters(&cr.st);
    pthread_mutex_unlock(&cr.lock);
}
