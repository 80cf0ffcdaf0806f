/*
 * link.c: linking, unlinking, liveness and flush_all (link.h).
 */
#include "storage/lru/link.h"
#include "storage/base/hash.h"
#include "storage/base/locks.h"
#include "storage/index/assoc.h"
#include "storage/index/tomb.h"
#include "storage/lru/lru.h"
#include "storage/lru/policy.h"
#include "storage/slab/persist.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

static struct {
    const struct cache_options *opts;
    rel_time_t  flush_time;
    uint64_t    flush_cas;
    uint64_t   *histo;          /* track_sizes: 32-byte buckets */
    size_t      nhisto;
} ln;

int
link_init(const struct cache_options *opts)
{
    memset(&ln, 0, sizeof(ln));
    ln.opts = opts;
    if (opts->track_sizes) {
        ln.nhisto = opts->item_size_max / 32 + 2;
        ln.histo = calloc(ln.nhisto, sizeof(*ln.histo));
        if (ln.histo == NULL) {
            return -1;
        }
    }
    return 0;
}

void
link_destroy(void)
{
    free(ln.histo);
    memset(&ln, 0, sizeof(ln));
}

uint32_t
link_hv(const struct item *it)
{
    return hash_key(item_key(it), item_nkey(it));
}

static void
histo_add(const struct item *it, int64_t n)
{
    size_t b = (item_ntotal(it) + 31) / 32;

    if (ln.histo != NULL && b < ln.nhisto) {
        __atomic_add_fetch(&ln.histo[b], (uint64_t)n, __ATOMIC_RELAXED);
    }
}

enum item_lru
link_first_list(const struct item *it)
{
    const struct cache_options *o = ln.opts;

    if (!o->lru_segmented) {
        return ITEM_LRU_COLD;
    }
    if (o->temp_lru && it->exptime != 0 &&
        it->exptime <= clock_now() + o->temporary_ttl) {
        return ITEM_LRU_TEMP;
    }
    return ITEM_LRU_HOT;
}

/* ---- in --------------------------------------------------------------- */

void
link_in(struct item *it, uint32_t hv, enum item_lru which)
{
    lru_set(it, which);
    item_flags_set(it, ITEM_LINKED);
    item_ref_incr(it);
    assoc_insert(it, hv);
    lru_push(it);
    histo_add(it, 1);
    assoc_grow_step();
}

void
link_in_oldest(struct item *it, uint32_t hv)
{
    it->next = it->prev = NULL;
    link_hash_oldest(it, hv);
    lru_splice_tail(it, it, 1, item_ntotal(it));
}

void
link_hash_oldest(struct item *it, uint32_t hv)
{
    lru_set(it, ITEM_LRU_COLD);
    item_flags_set(it, ITEM_LINKED);
    __atomic_store_n(&it->refcount, 1, __ATOMIC_RELAXED);  /* unseen yet */
    assoc_insert(it, hv);
    histo_add(it, 1);
}

/* ---- out -------------------------------------------------------------- */

/* An item leaving the cache dies in the file first: itself, or the
 * original a copy stands for. */
static void
kill_in_file(struct item *it)
{
    struct item *f = policy_durable(it);

    if (f != NULL) {
        persist_kill(f);
    }
}

/* The same for an item replaced by one just committed: its death must
 * not reach the medium before its successor does. */
static void
retire_in_file(struct item *it)
{
    struct item *f = policy_durable(it);

    if (f != NULL) {
        persist_retire(f);
    }
}

/* While a recovery runs, a key that leaves the table is noted, so that
 * an older copy the recovery reaches later stays out (tomb.h). */
static void
note_gone(const struct item *it, uint32_t hv)
{
    if (tomb_active()) {
        tomb_note(item_key(it), item_nkey(it), hv);
    }
}

void
do_link_unlink(struct item *it, uint32_t hv)
{
    note_gone(it, hv);
    kill_in_file(it);
    item_flags_clear(it, ITEM_LINKED);
    assoc_delete(item_key(it), item_nkey(it), hv);
    do_lru_remove(it);
    histo_add(it, -1);
    item_release(it);
}

void
link_swap(struct item *old, struct item *n, uint32_t hv, enum item_lru which)
{
    assoc_delete(item_key(old), item_nkey(old), hv);
    link_in(n, hv, which);
    lru_unlinked(old);
    histo_add(old, -1);
}

void
link_replace(struct item *old, struct item *n, uint32_t hv,
             enum item_lru which)
{
    if (n->tier == TIER_PMEM) {
        persist_commit(n);
    }
    if (old == NULL || !(item_flags(old) & ITEM_LINKED)) {
        /* While a recovery runs, a copy of the key it has not read back
         * yet is older: noted as a removal is, it never comes back, nor
         * after a crash, when this one's page may be read after its. */
        note_gone(n, hv);
        link_in(n, hv, which);
        return;
    }
    retire_in_file(old);
    link_swap(old, n, hv, which);
    item_release(old);
}

void
link_unlink(struct item *it, uint32_t hv)
{
    if (!(item_flags(it) & ITEM_LINKED)) {
        return;
    }
    note_gone(it, hv);
    link_unlink_older(it, hv);
}

void
link_unlink_older(struct item *it, uint32_t hv)
{
    kill_in_file(it);
    lru_unlinked(it);
    assoc_delete(item_key(it), item_nkey(it), hv);
    histo_add(it, -1);
    item_release(it);
}

/* ---- liveness --------------------------------------------------------- */

void
link_set_flush(rel_time_t when, uint64_t cas)
{
    __atomic_store_n(&ln.flush_time, when, __ATOMIC_RELAXED);
    __atomic_store_n(&ln.flush_cas, cas, __ATOMIC_RELAXED);
}

uint64_t
link_flush_cas(void)
{
    return __atomic_load_n(&ln.flush_cas, __ATOMIC_RELAXED);
}

bool
link_is_dead(const struct item *it, rel_time_t now, bool *flushed)
{
    return link_dead_at(it->exptime, item_time(it), item_cas(it), now,
                        flushed);
}

bool
link_dead_at(rel_time_t exptime, rel_time_t time, uint64_t cas,
             rel_time_t now, bool *flushed)
{
    rel_time_t ft = __atomic_load_n(&ln.flush_time, __ATOMIC_RELAXED);
    uint64_t fc = __atomic_load_n(&ln.flush_cas, __ATOMIC_RELAXED);

    *flushed = false;
    if (exptime != 0 && exptime <= now) {
        return true;
    }
    if (ft == 0 && fc == 0) {
        return false;           /* no flush_all since the start */
    }
    /* The fence takes what was stamped before the flush, in its second
     * at the latest: a value stored later under a unique a client chose
     * (meta E) below the fence stays (memcached's oldest_cas would take
     * it whenever it came). */
    if ((ft != 0 && ft <= now && time <= ft) ||
        (fc != 0 && cas != 0 && cas <= fc && time <= ft + 1)) {
        *flushed = true;
        return true;
    }
    return false;
}

/* A flushed item leaves: counted as memcached counts the dead items its
 * LRU maintainer takes off a tail (reclaimed, and expired_unfetched when
 * nobody read it).  Item lock held. */
static void
flush_one(unsigned tc, struct item *it, uint32_t hv)
{
    if (!(item_flags(it) & ITEM_LINKED)) {
        return;
    }
    LRU_COUNT(tc, reclaimed, 1);
    if (!(item_flags(it) & ITEM_FETCHED)) {
        LRU_COUNT(tc, expired_unfetched, 1);
    }
    link_unlink(it, hv);
}

/* The item lock of a list item was busy: wait for it the right way round
 * (item lock first), then unlink the item if it is still linked.  Returns
 * with the list lock held again. */
static void
flush_busy(unsigned tc, enum item_lru l, struct item *it, uint32_t hv)
{
    item_ref_incr(it);
    lru_unlock(tc, l);
    locks_lock(hv);
    flush_one(tc, it, hv);
    locks_unlock(hv);
    item_release(it);
    lru_lock(tc, l);
}

/*
 * Unlink items newer than `when` from the head of one list; stops at the
 * first older one.  An item whose lock is busy is waited for, so that a
 * flush never leaves a recent item behind, and the walk restarts.
 */
static void
flush_list(unsigned tc, enum item_lru l, rel_time_t when)
{
    struct item *it, *next;

    lru_lock(tc, l);
    for (it = do_lru_head(tc, l); it != NULL; it = next) {
        uint32_t hv;

        next = it->next;
        if (lru_is_cursor(it)) {
            continue;
        }
        if (item_time(it) <= when) {
            if (!tomb_active()) {
                break;
            }
            /* recovered items join a list at its tail, older than what
             * is behind them: the walk goes on past them */
            continue;
        }
        hv = link_hv(it);
        if (!locks_trylock(hv)) {
            flush_busy(tc, l, it, hv);
            next = do_lru_head(tc, l);
            continue;
        }
        item_ref_incr(it);
        LRU_COUNT(tc, reclaimed, 1);
        if (!(item_flags(it) & ITEM_FETCHED)) {
            LRU_COUNT(tc, expired_unfetched, 1);
        }
        do_link_unlink(it, hv);
        item_release(it);
        locks_unlock(hv);
    }
    lru_unlock(tc, l);
}

void
link_flush_recent(rel_time_t when)
{
    for (unsigned tc = 1; tc < SLABS_TC_MAX; tc++) {
        for (unsigned l = 0; l < LRU_NLISTS; l++) {
            flush_list(tc, (enum item_lru)l, when);
        }
    }
}

/* ---- stats sizes ------------------------------------------------------ */

bool
link_sizes(void (*emit)(uint64_t size, uint64_t count, void *ctx),
           void *ctx)
{
    if (ln.histo == NULL) {
        return false;
    }
    for (size_t b = 0; b < ln.nhisto; b++) {
        uint64_t n = __atomic_load_n(&ln.histo[b], __ATOMIC_RELAXED);

        if (n != 0) {
            emit(b * 32, n, ctx);
        }
    }
    return true;
}
