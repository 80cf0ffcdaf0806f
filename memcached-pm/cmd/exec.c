/*
 * exec.c: the shared execution path (exec.h).
 */
#include "config.h"

#include "memcached-pm/cmd/exec.h"

#include <stdio.h>

#include "memcached-pm/base/settings.h"
#include "memcached-pm/watch/logger.h"
#include "storage/cache/cache_delta.h"
#include "storage/cache/cache_peek.h"

/* ---- reads ------------------------------------------------------------ */

void
exec_miss(struct thread_stats *ts, bool touch, enum cache_status st)
{
    if (touch) {
        STAT_INCR(ts->cmd_touch);
        STAT_INCR(ts->touch_misses);
    } else {
        STAT_INCR(ts->cmd_get);
        STAT_INCR(ts->get_misses);
    }
    if (st == CACHE_EXPIRED) {
        STAT_INCR(ts->get_expired);
    } else if (st == CACHE_FLUSHED) {
        STAT_INCR(ts->get_flushed);
    }
}

/* A hit on an item of class clsid, in LRU lru, in the file or not. */
static void
count_hit(struct thread_stats *ts, bool touch, unsigned clsid,
          enum item_lru lru, bool in_pmem)
{
    struct slab_stats *ss = &ts->slab[clsid];

    if (in_pmem) {
        STAT_INCR(ts->hits_pmem);
    } else {
        STAT_INCR(ts->hits_dram);
    }
    if (touch) {
        /* memcached counts a touch's hit apart from the LRU's hits. */
        STAT_INCR(ts->cmd_touch);
        STAT_INCR(ss->touch_hits);
        return;
    }
    STAT_INCR(ts->cmd_get);
    STAT_INCR(ss->get_hits);
    switch (lru) {
    case ITEM_LRU_HOT: STAT_INCR(ss->hits_to_hot); break;
    case ITEM_LRU_WARM: STAT_INCR(ss->hits_to_warm); break;
    case ITEM_LRU_COLD: STAT_INCR(ss->hits_to_cold); break;
    case ITEM_LRU_TEMP: STAT_INCR(ss->hits_to_temp); break;
    }
}

void
exec_hit(struct thread_stats *ts, bool touch, const struct item *it)
{
    count_hit(ts, touch, item_clsid(it), item_lru(it), item_in_pmem(it));
}

int
exec_get_peek(struct thread_stats *ts, const struct prefetch_key *k,
              uint32_t vmax, bool bump,
              int (*send)(const struct cache_view *v, void *arg), void *arg)
{
    struct cache_view v;

    switch (cache_peek(k, vmax, &v)) {
    case CACHE_PEEK_MISS:
        exec_miss(ts, false, CACHE_MISS);
        return 0;
    case CACHE_PEEK_HIT:
        if (!bump) {
            v.mark = 0;
        }
        if (send(&v, arg) != 0) {
            return -1;
        }
        count_hit(ts, false, v.clsid, (enum item_lru)v.lru, v.in_pmem);
        STAT_INCR(ts->lockfree_hits);
        return 1;
    default:
        return -1;
    }
}

struct item *
exec_mget(struct thread_stats *ts, const char *key, size_t nkey,
          uint32_t hv, struct cache_mget *a, enum cache_status *st)
{
    struct item *it = cache_mget(key, nkey, hv, a, st);

    if (it == NULL) {
        exec_miss(ts, false, *st);
    } else {
        exec_hit(ts, a->touch, it);
    }
    return it;
}

struct item *
exec_touch(struct thread_stats *ts, const char *key, size_t nkey,
           uint32_t hv, rel_time_t exptime)
{
    enum cache_status st;
    struct item *it = cache_touch(key, nkey, hv, exptime, &st);

    STAT_INCR(ts->cmd_touch);
    if (it == NULL) {
        STAT_INCR(ts->touch_misses);
    } else {
        STAT_INCR(ts->slab[item_clsid(it)].touch_hits);
    }
    return it;
}

/* ---- stores ----------------------------------------------------------- */

/* exec_alloc() could not have its item: count why, and drop a set's old
 * value. */
void
exec_refused(struct thread_stats *ts, const char *key, size_t nkey,
             uint32_t hv, bool is_set, enum cache_status st)
{
    if (st == CACHE_TOO_LARGE) {
        STAT_INCR(ts->store_too_large);
    } else {
        STAT_INCR(ts->store_no_memory);
    }
    if (is_set) {
        struct cache_mdelete d = { 0 };

        cache_mdelete(key, nkey, hv, &d);
    }
}

bool
exec_data_ok(struct thread_stats *ts, const struct item *it)
{
    STAT_INCR(ts->slab[item_clsid(it)].cmd_set);
    return item_value_crlf_ok(it);
}

/* The command memcached names a store by in its log: a set or replace
 * that compares is a cas. */
static enum cache_op
logged_op(const struct cache_mstore *a)
{
    if (a->compare && (a->op == CACHE_SET || a->op == CACHE_REPLACE)) {
        return CACHE_CAS;
    }
    return a->op;
}

enum cache_status
exec_store(struct thread_stats *ts, struct item *it, struct cache_mstore *a)
{
    unsigned clsid = item_clsid(it);
    enum cache_status st = cache_mstore(it, a);

    if (logger_wants(LOG_MUTATIONS)) {
        /* a stored append or prepend is logged as the joined item */
        bool joined = st == CACHE_STORED && a->vlen != 0;

        logger_store(st, logged_op(a), item_key(it), item_nkey(it),
                     joined ? a->vlen : item_vlen(it),
                     joined ? a->exptime : item_exptime(it), clsid);
    }
    if (!a->compare) {
        return st;
    }
    if (st == CACHE_STORED) {
        STAT_INCR(ts->slab[clsid].cas_hits);
    } else if (st == CACHE_EXISTS) {
        STAT_INCR(ts->slab[clsid].cas_badval);
    } else if (st == CACHE_NOT_FOUND) {
        STAT_INCR(ts->cas_misses);
    }
    return st;
}

/* ---- the rest ----------------------------------------------------------- */

enum cache_status
exec_delete(struct thread_stats *ts, const char *key, size_t nkey,
            uint32_t hv, struct cache_mdelete *a, enum exec_deleter by)
{
    enum cache_status st = cache_mdelete(key, nkey, hv, a);

    if (st == CACHE_DELETED) {
        STAT_INCR(ts->slab[a->clsid].delete_hits);
        if (by != EXEC_DEL_BINARY && !a->invalidate &&
            logger_wants(LOG_DELETIONS)) {
            logger_delete(by == EXEC_DEL_META, key, nkey, a->clsid, a->vlen);
        }
    } else if (st == CACHE_EXISTS || st == CACHE_NOT_FOUND) {
        STAT_INCR(ts->delete_misses);
    }
    return st;
}

enum cache_status
exec_delta(struct thread_stats *ts, const char *key, size_t nkey,
           uint32_t hv, struct cache_mdelta *a)
{
    enum cache_status st = cache_mdelta(key, nkey, hv, a);

    if (st == CACHE_OK && a->created && logger_wants(LOG_MUTATIONS)) {
        /* memcached stores a new counter with an add */
        char digits[24];

        logger_store(CACHE_STORED, CACHE_ADD, key, nkey,
                     (uint32_t)snprintf(digits, sizeof(digits), "%llu",
                                        (unsigned long long)a->value),
                     a->vivify_exptime, a->clsid);
    }
    if (st == CACHE_OK && !a->created) {
        STAT_INCR(*(a->incr ? &ts->slab[a->clsid].incr_hits
                            : &ts->slab[a->clsid].decr_hits));
    } else if (st == CACHE_NOT_FOUND) {
        STAT_INCR(*(a->incr ? &ts->incr_misses : &ts->decr_misses));
    }
    return st;
}

/* flush_all [delay]: items stored up to `when` are gone.  At once with
 * CAS on, that is the second before this one, the CAS fence taking this
 * second's (cache_flush()); with CAS off, as memcached, this second too,
 * what is stored later in it included. */
void
exec_flush(struct thread_stats *ts, int64_t delay)
{
    rel_time_t when = delay > 0 ? clock_realtime(delay) - 1
                                : clock_now() - (settings.cache.use_cas ? 1 : 0);

    STAT_INCR(ts->cmd_flush);
    settings_set_oldest(when);
    cache_flush(when);
}
