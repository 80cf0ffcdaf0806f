/*
 * recover_link.c: recovery's links (recover_link.h).
 *
 * The node serves while these run: a head goes into the table and COLD
 * as any item does (link_in()), under its item lock, and only if nothing
 * newer of its key is known:
 *
 *   - a copy in the table with a higher seq: a value stored since the
 *     start (its seq is above the mark), or the newer of two copies a
 *     crash left (a replace cut between its commit and its kill).  A
 *     lower one is the older twin: it leaves the table for this head,
 *     without a note (tomb.h), since the key is not removed.
 *   - a removal since the start (tomb_covers()): a delete, or an unlink
 *     of any kind, of the key while it was linked or not yet.
 *   - dead by now: expired, or under a flush_all, as a lookup would say.
 *
 * A head that loses dies in the file and is freed (its page is its
 * class's already), as an unlinked item would be.
 */
#include "storage/recover/recover_link.h"
#include "storage/base/locks.h"
#include "storage/index/assoc.h"
#include "storage/index/tomb.h"
#include "storage/lru/link.h"
#include "storage/lru/policy.h"
#include "storage/slab/persist.h"
#include "storage/slab/slabs.h"

#include <stdlib.h>

void
recover_link_presize(uint64_t n)
{
    assoc_presize(n);
}

/* The seq of what stands for an item in the file, or the highest for an
 * item that lives in DRAM only (stored since the start). */
static uint64_t
table_seq(const struct item *it)
{
    const struct item *f = policy_durable((struct item *)it);

    return f != NULL ? recover_seq_of(f) : UINT64_MAX;
}

/* May the head come back?  Item lock held.  The older twin it beats
 * (one the recovery linked: anything stored since the start has a
 * higher seq) leaves the table, and *twin says so. */
static bool
newest(struct worker *w, struct item *it, uint32_t hv, bool *twin)
{
    uint64_t seq = recover_seq_of(it);
    struct item *old;
    bool flushed;

    if (tomb_covers(item_key(it), it->nkey, hv, seq)) {
        w->removed++;
        return false;
    }
    if (link_is_dead(it, clock_now(), &flushed)) {
        if (flushed) {
            w->flushed++;
        } else {
            w->expired++;
        }
        return false;
    }
    old = assoc_find(item_key(it), it->nkey, hv);
    if (old != NULL) {
        w->replaced++;
        if (table_seq(old) > seq) {
            return false;
        }
        link_unlink_older(old, hv);
        *twin = true;
    }
    return true;
}

/* A head that does not come back: dead in the file, its chunk free, and
 * its chain's if it holds one. */
static void
drop(struct item *it)
{
    persist_kill(it);
    item_free(it);
}

/* A chunked head whose chain did not come together: its own chunk only
 * (the pieces are freed with those no head claimed). */
static void
drop_unchained(struct item *it, unsigned clsid)
{
    persist_kill(it);
    slabs_free(it, item_header_size(it), SLABS_TC(TIER_PMEM, clsid));
}

static bool
link_head(struct worker *w, struct item *it, uint32_t hv)
{
    bool won, twin = false;

    locks_lock(hv);
    won = newest(w, it, hv, &twin);
    if (won) {
        link_in(it, hv, ITEM_LRU_COLD);
    }
    locks_unlock(hv);
    if (won && !twin) {
        /* (in place of a twin: as many linked as before) */
        __atomic_store_n(&w->linked, w->linked + 1, __ATOMIC_RELAXED);
    } else if (!won) {
        drop(it);
    }
    return won;
}

/*
 * Each head's bucket and lock are cache misses (and, over a table of
 * hundreds of megabytes, TLB misses): they are prefetched AHEAD heads
 * before the head is linked.
 */
#define AHEAD   8

void
recover_link_page(struct worker *w)
{
    const struct head *h = w->page.v;
    size_t n = w->page.n;

    for (size_t i = 0; i < n; i++) {
        if (i + AHEAD < n) {
            __builtin_prefetch(assoc_bucket_hint(h[i + AHEAD].hv), 1);
            locks_prefetch(h[i + AHEAD].hv);
        }
        (void)link_head(w, h[i].it, h[i].hv);
    }
    w->page.n = 0;
}

/* ---- the chunked values, at the end -------------------------------- */

static int
piece_cmp(const void *a, const void *b)
{
    const struct piece *x = a, *y = b;

    if (x->seq != y->seq) {
        return x->seq < y->seq ? -1 : 1;
    }
    return x->index < y->index ? -1 : x->index > y->index;
}

static int
gather_pieces(struct recovery *rc)
{
    size_t n = 0;

    for (unsigned i = 0; i < rc->nthreads; i++) {
        n += rc->w[i].pieces.n;
    }
    rc->pieces = malloc((n ? n : 1) * sizeof(*rc->pieces));
    if (rc->pieces == NULL) {
        return -1;
    }
    for (unsigned i = 0; i < rc->nthreads; i++) {
        struct vec *v = &rc->w[i].pieces;

        for (size_t j = 0; j < v->n; j++) {
            rc->pieces[rc->npieces++] = ((struct piece *)v->v)[j];
        }
    }
    qsort(rc->pieces, rc->npieces, sizeof(*rc->pieces), piece_cmp);
    return 0;
}

/* A piece no head claimed: dead in the file, free. */
static void
drop_piece(struct recovery *rc, const struct piece *pc)
{
    struct item_chunk *ch = pc->ch;

    persist_prefix_of(ch)->commit = 0;
    tier_persist(rc->tier, persist_prefix_of(ch), sizeof(uint64_t));
    slabs_free(ch, sizeof(*ch) + ch->used, SLABS_TC(TIER_PMEM, pc->clsid));
}

int
recover_link_chunked(struct recovery *rc)
{
    struct worker *w0 = &rc->w[0];

    if (gather_pieces(rc) != 0) {
        return -1;
    }
    /* Chains first, so that every piece a head will hold is claimed
     * before any head is linked (and can be freed by a delete). */
    for (unsigned i = 0; i < rc->nthreads; i++) {
        struct head *h = rc->w[i].heads.v;

        for (size_t j = 0; j < rc->w[i].heads.n; j++) {
            if (!recover_head_ok(w0, h[j].it, h[j].clsid)) {
                drop_unchained(h[j].it, h[j].clsid);
                h[j].it = NULL;
            }
        }
    }
    for (size_t i = 0; i < rc->npieces; i++) {
        if (!(__atomic_load_n(&rc->pieces[i].ch->flags, __ATOMIC_RELAXED) &
              ITEM_CHUNK)) {
            drop_piece(rc, &rc->pieces[i]);
        }
    }
    for (unsigned i = 0; i < rc->nthreads; i++) {
        const struct head *h = rc->w[i].heads.v;

        for (size_t j = 0; j < rc->w[i].heads.n; j++) {
            if (h[j].it != NULL) {
                (void)link_head(w0, h[j].it, h[j].hv);
            }
        }
    }
    return 0;
}
