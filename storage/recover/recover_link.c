/*
 * recover_link.c: recovery's links (recover_link.h).
 *
 * The node serves while these run: a head goes into the table under its
 * item lock, and into COLD's tail before that lock is let go
 * (link_hash_oldest(), lru_splice_tail()), and only if nothing newer of
 * its key is known:
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
#include "storage/lru/lru.h"
#include "storage/lru/policy.h"
#include "storage/slab/persist.h"
#include "storage/slab/slabs.h"

#include <stdlib.h>

unsigned
recover_link_presize(uint64_t n)
{
    uint64_t power, bytes, expanding;

    assoc_presize(n);
    assoc_stats(&power, &bytes, &expanding);
    return (unsigned)power;
}

/* The seq of what stands for an item in the file, or the highest for an
 * item that lives in DRAM only (stored since the start). */
static uint64_t
table_seq(const struct item *it)
{
    const struct item *f = policy_durable((struct item *)it);

    return f != NULL ? recover_seq_of(f) : UINT64_MAX;
}

enum verdict {
    WIN,                        /* nothing newer of its key is known */
    TWIN,                       /* it beats an older copy in the table */
    LOSE,                       /* something newer is known, or dead */
};

/* May the head come back?  Item lock held.  A copy in the table that it
 * beats (*old) is one the recovery linked: anything stored since the
 * start has a higher seq.  Counts what loses (the twin, its caller). */
static enum verdict
judge(struct worker *w, struct item *it, uint32_t hv, struct item **old)
{
    uint64_t seq = recover_seq_of(it);
    bool flushed;

    if (tomb_flushed(seq)) {
        w->flushed++;
        return LOSE;
    }
    if (link_is_dead(it, clock_now(), &flushed)) {
        if (flushed) {
            w->flushed++;
        } else {
            w->expired++;
        }
        return LOSE;
    }
    if (!tomb_test_mark(hv)) {
        return WIN;             /* nothing of its hash known: no search */
    }
    if (tomb_covers(item_key(it), it->nkey, hv, seq)) {
        w->removed++;
        return LOSE;
    }
    *old = assoc_find(item_key(it), it->nkey, hv);
    if (*old == NULL) {
        return WIN;
    }
    if (table_seq(*old) > seq) {
        w->replaced++;
        return LOSE;
    }
    return TWIN;
}

/* A head that does not come back: dead in the file, its chunk free, and
 * its chain's if it holds one.  Held by a reference across the kill: on
 * a worker that helps (recover_help()) in a group commit, the group holds
 * the item until it syncs the kill, and frees it then. */
static void
drop(struct item *it)
{
    item_ref_incr(it);
    persist_kill(it);
    item_release(it);
}

/* A chunked head whose chain did not come together: its own chunk only
 * (the pieces are freed with those no head claimed). */
static void
drop_unchained(struct item *it, unsigned clsid)
{
    persist_kill(it);
    slabs_free(it, item_header_size(it), SLABS_TC(TIER_PMEM, clsid));
}

static void
count_linked(struct worker *w)
{
    __atomic_store_n(&w->linked, w->linked + 1, __ATOMIC_RELAXED);
}

/* One head, its locks taken one at a time. */
static void
link_head(struct worker *w, struct item *it, uint32_t hv)
{
    struct item *old = NULL;
    enum verdict v;

    locks_lock(hv);
    v = judge(w, it, hv, &old);
    if (v == TWIN) {
        link_unlink_older(old, hv);
        w->replaced++;
    }
    if (v != LOSE) {
        link_in_oldest(it, hv);
    }
    locks_unlock(hv);
    if (v == WIN) {
        count_linked(w);        /* (in place of a twin: as many as before) */
    } else if (v == LOSE) {
        drop(it);
    }
}

/*
 * A run of up to BATCH heads of one page (one class) into the table,
 * each under its item lock, then into COLD in one splice, their locks
 * held until then: two recovery threads linking items of the same class
 * pass the list's lock back and forth once a run, not once an item.
 * Item locks are only tried while others are held; a head whose lock is
 * busy (held by the other thread's run, most often, or by the worker that
 * helps, recover_help()) goes to `busy`, or with `busy` NULL is linked
 * afterwards the slow way, waiting for its lock.  A head with an older
 * twin in the table takes its place in the run, the twin unlinked while
 * the head's lock is held.
 *
 * Every head's bucket, filter word and lock are cache misses (and, over
 * a table of hundreds of megabytes, TLB misses), prefetched FAR heads
 * ahead; NEAR heads ahead, a head whose filter bit is set will search
 * its bucket's chain: its first item is prefetched too.
 */
#define BATCH   64
#define FAR     16
#define NEAR    8

static void
prefetch_far(const struct head *h)
{
    __builtin_prefetch(assoc_bucket_hint(h->hv), 1);
    __builtin_prefetch(tomb_hint(h->hv), 1);
    locks_prefetch(h->hv);
}

static void
prefetch_near(const struct head *h)
{
    bool empty;

    if (tomb_maybe(h->hv)) {
        __builtin_prefetch(assoc_hint_head(assoc_bucket_hint(h->hv),
                                           &empty));
    }
}

/* A head whose lock was busy: to `busy` for later, or linked now the
 * slow way (busy NULL).  A head no vector has room for stays unlinked,
 * and the recovery ends incomplete (the next start scans again). */
static void
put_off(struct worker *w, const struct head *h, struct vec *busy)
{
    if (busy == NULL) {
        link_head(w, h->it, h->hv);
    } else if (!recover_vec_push(busy, h)) {
        w->oom = true;
    }
}

/* Link h[from, to) (of n, for the prefetches), all of one class. */
static void
link_batch(struct worker *w, const struct head *h, size_t from, size_t to,
           size_t n, struct vec *busy)
{
    size_t later[BATCH], lost[BATCH], held[BATCH];
    size_t nlater = 0, nlost = 0, nheld = 0, ntwins = 0;
    struct item *prev = NULL;
    uint64_t bytes = 0;

    for (size_t i = from; i < to; i++) {
        struct item *old = NULL;
        enum verdict v;

        if (i + FAR < n) {
            prefetch_far(&h[i + FAR]);
        }
        if (i + NEAR < n) {
            prefetch_near(&h[i + NEAR]);
        }
        if (!locks_trylock(h[i].hv)) {
            later[nlater++] = i;
            continue;
        }
        v = judge(w, h[i].it, h[i].hv, &old);
        if (v == LOSE) {
            locks_unlock(h[i].hv);
            lost[nlost++] = i;
            continue;
        }
        if (v == TWIN) {
            link_unlink_older(old, h[i].hv);
            w->replaced++;
            ntwins++;           /* in place of a twin: as many as before */
        }
        link_hash_oldest(h[i].it, h[i].hv);
        bytes += item_ntotal(h[i].it);
        h[i].it->prev = prev;
        if (prev != NULL) {
            prev->next = h[i].it;
        }
        prev = h[i].it;
        held[nheld++] = i;
    }
    if (nheld > 0) {
        prev->next = NULL;
        lru_splice_tail(h[held[0]].it, prev, nheld, bytes);
        for (size_t i = 0; i < nheld; i++) {
            locks_unlock(h[held[i]].hv);
        }
        __atomic_store_n(&w->linked, w->linked + nheld - ntwins,
                         __ATOMIC_RELAXED);
    }
    for (size_t i = 0; i < nlater; i++) {
        put_off(w, &h[later[i]], busy);
    }
    for (size_t i = 0; i < nlost; i++) {
        drop(h[lost[i]].it);
    }
}

static void
link_runs(struct worker *w, const struct head *h, size_t n, struct vec *busy)
{
    for (size_t j = 0; j < n && j < FAR; j++) {
        prefetch_far(&h[j]);
    }
    for (size_t j = 0; j < n && j < NEAR; j++) {
        prefetch_near(&h[j]);
    }
    for (size_t i = 0; i < n;) {
        size_t to = i + 1;

        while (to < n && to < i + BATCH && h[to].clsid == h[i].clsid) {
            to++;
        }
        link_batch(w, h, i, to, n, busy);
        i = to;
    }
}

/* The heads of the page a thread gave to its class (w->page), in runs;
 * those whose lock was busy once more at the end, and only then waited
 * for.  A helper never waits for an item lock (its caller may hold one):
 * what is still busy then waits for the end (w->later). */
void
recover_link_pages(struct worker *w, bool helper)
{
    link_runs(w, w->page.v, w->page.n, &w->busy);
    w->page.n = 0;
    link_runs(w, w->busy.v, w->busy.n, helper ? &w->later : NULL);
    w->busy.n = 0;
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

    for (unsigned i = 0; i < rc->nworkers; i++) {
        n += rc->w[i].pieces.n;
    }
    rc->pieces = malloc((n ? n : 1) * sizeof(*rc->pieces));
    if (rc->pieces == NULL) {
        return -1;
    }
    for (unsigned i = 0; i < rc->nworkers; i++) {
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
    for (unsigned i = 0; i < rc->nworkers; i++) {
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
    for (unsigned i = 0; i < rc->nworkers; i++) {
        const struct head *h = rc->w[i].heads.v;

        for (size_t j = 0; j < rc->w[i].heads.n; j++) {
            if (h[j].it != NULL) {
                link_head(w0, h[j].it, h[j].hv);
            }
        }
        link_runs(w0, rc->w[i].later.v, rc->w[i].later.n, NULL);
        rc->w[i].later.n = 0;
    }
    return 0;
}
