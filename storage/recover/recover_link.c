/*
 * recover_link.c: recovery's links (recover_link.h): each head into the
 * hash table and into its class's LRU runs, in the scan for a head that
 * cannot have a twin, and in the link phase for the heads kept back.
 *
 * Locking: none on the table.  Scan threads push onto buckets with a
 * compare-and-swap; link threads each own a range of buckets.  Each
 * worker has its own set of runs; a twin leaving the runs takes the
 * recovery's unlink mutex.
 */
#include "storage/recover/recover_link.h"
#include "storage/index/assoc.h"
#include "storage/lru/link.h"
#include "storage/lru/lru.h"
#include "storage/slab/slabs.h"

#include <stdlib.h>

static void link_head(struct worker *w, const struct head *h);
static unsigned age_rank(const struct recovery *rc, rel_time_t time);

/* ---- in the scan ------------------------------------------------------ */

/*
 * A head that passed its checks goes into the hash table and its
 * thread's LRU runs in the scan, while its lines are in the cache, unless
 * another copy of its key may be live: then it is kept, with its hash and
 * time, for the link phase, which compares the copies.  Linking in the
 * scan saves writing a list of every head (fresh memory) and reading
 * every item back later.  The scan threads share the table, so the push
 * is a compare-and-swap; nothing reads the table before they are joined.
 * Each head waits RING heads in a ring, so that its bucket (and its bit,
 * below) has been prefetched.
 *
 * After a clean stop no key has two live copies (a replace kills the old
 * copy before its reply, a start kills the copies it dropped, and a
 * clean stop waits for every request in flight), so every unchunked head
 * is linked in the scan.  After a crash a replace may have been cut
 * between its commit and its kill.  Then a bitmap, 16 bits per bucket,
 * remembers which hashes (bits of them) were seen: a head whose bit was
 * clear is the first of its key and is linked; one whose bit was set
 * already (about one in twenty) may have a twin and is kept.  Two copies
 * of a key have the same hash, so at most one of them is linked here.
 * A chunked head, whose pieces are not all known yet, is always kept, and
 * sets its bit too.
 */
bool
recover_link_seen(const struct recovery *rc, uint32_t hv)
{
    uint32_t bit = hv & rc->seen_mask;
    uint64_t m = (uint64_t)1 << (bit & 63);

    if (rc->seen == NULL) {
        return false;
    }
    return (__atomic_fetch_or(&rc->seen[bit >> 6], m, __ATOMIC_RELAXED) &
            m) != 0;
}

static const void *
seen_hint(const struct recovery *rc, uint32_t hv)
{
    return rc->seen != NULL ? &rc->seen[(hv & rc->seen_mask) >> 6] : NULL;
}

/* The head RING behind: linked, or kept if it may have a twin. */
static void
ring_settle(struct worker *w, const struct head *h)
{
    if (recover_link_seen(w->rc, h->hv)) {
        w->oom |= !recover_vec_push(&w->heads, h);
    } else {
        link_head(w, h);
    }
}

void
recover_link_push(struct worker *w, const struct head *h)
{
    struct head *slot = &w->ring[w->nring % RING];

    __builtin_prefetch(assoc_bucket_hint(h->hv), 1);
    __builtin_prefetch(seen_hint(w->rc, h->hv), 1);
    if (w->nring >= RING) {
        ring_settle(w, slot);
    }
    *slot = *h;
    w->nring++;
}

void
recover_link_drain(struct worker *w)
{
    uint64_t from = w->nring > RING ? w->nring - RING : 0;

    for (uint64_t i = from; i < w->nring; i++) {
        ring_settle(w, &w->ring[i % RING]);
    }
}

/* ---- the link phase (4) ---------------------------------------------- */

/* A copy the scan linked, out of its runs again (it lost to a twin).
 * Another link thread may be unlinking a neighbour: one at a time. */
static void
unlink_scanned(struct worker *w, struct item *it)
{
    struct recovery *rc = w->rc;
    struct lru_runs *sets[MAX_THREADS];

    for (unsigned i = 0; i < rc->nthreads; i++) {
        sets[i] = rc->w[i].runs;
    }
    pthread_mutex_lock(&rc->unlink);
    link_unrecovered(sets, rc->nthreads, it, age_rank(rc, item_time(it)));
    pthread_mutex_unlock(&rc->unlink);
    /* counted by the scan thread; only the sum is read */
    __atomic_store_n(&w->linked, w->linked - 1, __ATOMIC_RELAXED);
}

/*
 * A kept head into the hash table (hv is the key's hash), unless a newer
 * copy of the key is there.  No lock: only this thread touches the
 * bucket.  After a clean stop only chunked heads are kept, and no key has
 * two copies: nothing to search.  After a crash the bucket's chain is
 * searched; the copy found may be one the scan linked, now in its runs
 * (a reference), or a head kept and linked here before (none yet).
 */
static void
insert_head(struct worker *w, struct item *it, uint32_t hv)
{
    struct item *old = w->rc->seen != NULL
                       ? assoc_find(item_key(it), it->nkey, hv) : NULL;

    if (old == NULL || recover_seq_of(old) < recover_seq_of(it)) {
        if (old != NULL) {
            assoc_delete(item_key(old), old->nkey, hv);
            if (old->refcount != 0) {
                unlink_scanned(w, old);
            }
            item_flags_clear(old, ITEM_LINKED);
            recover_release_chain(old);
            w->replaced++;
        }
        item_flags_set(it, ITEM_LINKED);
        assoc_insert(it, hv);
    } else {
        recover_release_chain(it);
        w->replaced++;
    }
}

/* The class of the page a head sits in: its clsid, or for a chunked head
 * the class its header size picks. */
static unsigned
head_class(const struct item *it)
{
    if (item_flags(it) & ITEM_CHUNKED) {
        return slabs_clsid(item_header_size(it));
    }
    return it->clsid & ITEM_CLSID_MASK;
}

/*
 * The link threads split the table, not the heads: thread t takes the
 * heads of the t-th of nthreads equal ranges of buckets, from every scan
 * thread's list, so that each bucket, and each key's copies, have one
 * owner and no lock is taken.  (A multiply, not a division: this runs
 * for every head in every thread.)
 */
static bool
mine(const struct worker *w, uint32_t hv)
{
    const struct recovery *rc = w->rc;
    uint64_t bucket = hv & (((uint64_t)1 << rc->bucket_power) - 1);

    return ((bucket * rc->nthreads) >> rc->bucket_power) == w->id;
}

/*
 * Every head and its bucket are cache misses (and, over a file of
 * gigabytes, TLB misses): a software pipeline keeps them in flight.  At
 * step i head i and its bucket are prefetched (the scan kept its hash);
 * head i - d (a chunked one checked first, now that its pieces are
 * known) goes into the table.  d spans AHEAD of this thread's heads.
 */
#define AHEAD   32

static void
link_span(struct worker *w, const struct head *heads, size_t n)
{
    size_t d = AHEAD * w->rc->nthreads;

    for (size_t i = 0; i < n + d; i++) {
        if (i < n && mine(w, heads[i].hv)) {
            __builtin_prefetch(heads[i].it, 1);
            __builtin_prefetch(assoc_bucket_hint(heads[i].hv), 1);
        }
        if (i >= d && i - d < n && mine(w, heads[i - d].hv)) {
            const struct head *h = &heads[i - d];

            if (!(item_flags(h->it) & ITEM_CHUNKED) ||
                recover_head_ok(w, h->it, head_class(h->it))) {
                insert_head(w, h->it, h->hv);
            }
        }
    }
}

void *
recover_link_thread(void *arg)
{
    struct worker *w = arg;

    for (unsigned i = 0; i < w->rc->nthreads; i++) {
        link_span(w, w->rc->w[i].heads.v, w->rc->w[i].heads.n);
    }
    return NULL;
}

/* A hash table that holds n items without growing, if it is larger.
 * The link threads own buckets by hv mod 2^level, which every key of a
 * bucket shares whether or not the bucket is split (assoc.c). */
int
recover_link_presize(struct recovery *rc, uint64_t n)
{
    uint64_t power, bytes, expanding;

    assoc_presize(n);
    assoc_stats(&power, &bytes, &expanding);
    rc->bucket_power = (unsigned)power;
    if (rc->check_crc) {
        unsigned want = rc->bucket_power + 1;
        unsigned bits = want + 4 > 32 ? 32 : want + 4 < 6 ? 6 : want + 4;

        rc->seen_mask = (uint32_t)(((uint64_t)1 << bits) - 1);
        rc->seen = calloc(((size_t)1 << bits) / 64, sizeof(*rc->seen));
        if (rc->seen == NULL) {
            return -1;
        }
    }
    return 0;
}

/* ---- the LRU runs (6) ------------------------------------------------- */

/*
 * Eviction after a restart should take the oldest items first, so each
 * class's COLD list is rebuilt in order of the items' times, newest at
 * the head.  Not by sorting them: each linked head joins one of LRU_RUNS
 * runs of its class by its age at the restart, and the runs are joined
 * oldest first (lru_runs_join()).  The rank is the age to the second
 * for the first 256 s, then to 1/128 of the age (a day-old item to 11
 * minutes), so that it is known from the item alone, in the scan.  Each
 * item is touched once; a sort would have written every head once more
 * into an array as large as the heads, fresh memory the kernel must zero.
 */
#define LRU_RUNS    4096

static unsigned
age_rank(const struct recovery *rc, rel_time_t time)
{
    uint32_t age = time < rc->now ? rc->now - time : 0;
    unsigned b, e;

    if (age < 256) {
        b = age;
    } else {
        /* age >> e in [128, 256): steps of 1/128 of the age */
        e = (unsigned)(31 - __builtin_clz(age)) - 7;
        b = 256 + (e - 1) * 128 + ((age >> e) - 128);
    }
    return LRU_RUNS - 1 - b;        /* b < 3328: 0 is the oldest */
}

/* A head that is in the hash table (ITEM_LINKED), into its runs. */
static void
run_head(struct worker *w, const struct head *h)
{
    if (link_recovered(w->runs, h->it, age_rank(w->rc, h->time)) != 0) {
        w->oom = true;
    }
    __atomic_store_n(&w->linked, w->linked + 1, __ATOMIC_RELAXED);
}

/* The scan's link of a head (recover_link_push()): table, then runs. */
static void
link_head(struct worker *w, const struct head *h)
{
    item_flags_set(h->it, ITEM_LINKED);
    assoc_insert_shared(h->it, h->hv);
    run_head(w, h);
}

/* The heads the link phase put in the table, each thread's into its own
 * runs (one thread: no other runs yet), then every thread's runs joined. */
int
recover_link_lrus(struct recovery *rc)
{
    struct lru_runs *sets[MAX_THREADS];
    bool oom = false;

    for (unsigned i = 0; i < rc->nthreads; i++) {
        struct worker *w = &rc->w[i];
        const struct head *h = w->heads.v;
        size_t n = w->heads.n;

        for (size_t j = 0; j < n; j++) {
            if (j + AHEAD < n) {
                __builtin_prefetch(h[j + AHEAD].it, 1);
            }
            if (item_flags(h[j].it) & ITEM_LINKED) {
                run_head(w, &h[j]);
            }
        }
        sets[i] = w->runs;
        w->runs = NULL;
        oom |= w->oom;
    }
    lru_runs_join(sets, rc->nthreads);
    return oom ? -1 : 0;
}

/* Runs for every worker; joined by recover_link_lrus(), or after a
 * failure by recover_link_runs_free(). */
int
recover_link_runs_new(struct recovery *rc)
{
    for (unsigned i = 0; i < rc->nthreads; i++) {
        rc->w[i].runs = lru_runs_new(LRU_RUNS);
        if (rc->w[i].runs == NULL) {
            return -1;
        }
    }
    return 0;
}

void
recover_link_runs_free(struct recovery *rc)
{
    struct lru_runs *sets[MAX_THREADS];
    unsigned n = 0;

    for (unsigned i = 0; i < rc->nthreads; i++) {
        if (rc->w[i].runs != NULL) {
            sets[n++] = rc->w[i].runs;
            rc->w[i].runs = NULL;
        }
    }
    if (n > 0) {
        lru_runs_join(sets, n);     /* nothing is served after a failure */
    }
}
