/*
 * recover.c: reading a memory file's items back (recover.h).
 *
 * Phases, each finished before the next starts:
 *
 *   1 claim    one thread: every page the page table gives a class is
 *              claimed in the tier; a byte naming no class is cleared.
 *   2 scan     threads over the pages: each chunk's commit word sorts it
 *              into a head (odd: a live item, its header checked against
 *              its chunk), a piece of a chunked value (even) or free (0).
 *              Volatile fields (links, refcount, LRU bits) are reset.
 *              Everything else recovery needs of a head is read here,
 *              while the pages stream through in memory order: an
 *              unchunked head's crc, expiry and flush checks and its
 *              key's hash.  After a clean stop such a head then goes
 *              straight into the hash table and its thread's LRU runs;
 *              otherwise (and a chunked head always) it is kept, with
 *              its hash and time, for the next phases.
 *   3 pieces   one thread: the pieces sorted by (seq, index).
 *   4 link     threads over the kept heads: rebuild a chunked value's
 *              chain from the pieces with its seq and check it, and put
 *              the heads in the hash table (each thread owns a range of
 *              buckets), keeping the higher seq of a key.
 *   5 free     one thread: each page goes to its class; chunks neither
 *              linked nor claimed by a linked item go on the free lists,
 *              their commit words zeroed and persisted.
 *   6 lru      one thread: the kept heads that were linked into runs by
 *              age, then every thread's runs into COLD, oldest first.
 *
 * A chunk's flags say where it stands between phases: ITEM_LINKED for a
 * head in the hash table, ITEM_CHUNK for a piece claimed by a head that
 * passed its checks, 0 for anything else.
 */
#include "storage/recover.h"
#include "storage/assoc.h"
#include "storage/hash.h"
#include "storage/item.h"
#include "storage/link.h"
#include "storage/lru.h"
#include "storage/pagetab.h"
#include "storage/persist.h"
#include "storage/slabs.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KEY_MAX         250
#define MAX_THREADS     16

struct page_ref {
    void       *page;
    unsigned    clsid;
};

struct piece {
    uint64_t            seq;
    uint32_t            index;
    unsigned            clsid;  /* of the page it sits in */
    struct item_chunk  *ch;
};

/* A growable array of fixed-size elements. */
struct vec {
    void       *v;
    size_t      n, cap, size;
};

/* A head the scan found, and what the later phases need of it. */
struct head {
    struct item        *it;
    uint32_t            hv;         /* its key's hash */
    rel_time_t          time;
};

/* Heads a scan thread holds back, their buckets prefetched, before it
 * links them (a clean restart). */
#define RING    16

/* What one scan/link thread works on and finds. */
struct worker {
    struct recovery    *rc;
    unsigned            id;
    struct vec          heads;      /* struct head */
    struct vec          pieces;     /* struct piece */
    struct lru_runs    *runs;       /* the COLD lists it rebuilds */
    struct head         ring[RING]; /* linked in the scan, RING behind */
    uint64_t            nring;      /* heads through the ring so far */
    uint64_t            linked;     /* in the hash table and the runs */
    uint64_t            torn, expired, flushed, replaced;
    bool                oom;
};

struct recovery {
    const struct recover_params *p;
    struct tier        *tier;
    struct page_ref    *pages;
    size_t              npages;
    unsigned            largest;
    unsigned            nthreads;
    pthread_mutex_t     unlink;     /* a twin out of the scan's runs */
    struct worker      *w;
    struct piece       *pieces;     /* all of them, sorted */
    unsigned            bucket_power;   /* the hash table's, once sized */
    uint64_t           *seen;       /* after a crash: hashes inserted */
    uint32_t            seen_mask;  /* bit of a hash in seen */
    size_t              npieces;
    size_t              scanned;    /* pages, for progress */
};

/* ---- small helpers ---------------------------------------------------- */

static bool
vec_push(struct vec *a, const void *elem)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 1024;
        void *nv = realloc(a->v, cap * a->size);

        if (nv == NULL) {
            return false;
        }
        a->v = nv;
        a->cap = cap;
    }
    memcpy((char *)a->v + a->n * a->size, elem, a->size);
    a->n++;
    return true;
}

static uint64_t
seq_of(const void *chunk)
{
    return __atomic_load_n(&persist_prefix_of(chunk)->commit,
                           __ATOMIC_RELAXED) >> 1;
}

/* Run fn on every worker, each in a thread of its own but the first; a
 * worker whose thread cannot start runs here afterwards instead. */
static void
run_threads(struct recovery *rc, void *(*fn)(void *))
{
    pthread_t tid[MAX_THREADS];
    bool started[MAX_THREADS] = { false };

    for (unsigned i = 1; i < rc->nthreads; i++) {
        started[i] = pthread_create(&tid[i], NULL, fn, &rc->w[i]) == 0;
    }
    fn(&rc->w[0]);
    for (unsigned i = 1; i < rc->nthreads; i++) {
        if (started[i]) {
            pthread_join(tid[i], NULL);
        } else {
            fn(&rc->w[i]);
        }
    }
}

/* ---- 1 claim ------------------------------------------------------------ */

static int
claim_pages(struct recovery *rc)
{
    size_t n;
    const unsigned char *table = pagetab_get(&n);

    rc->pages = calloc(n ? n : 1, sizeof(*rc->pages));
    if (rc->pages == NULL) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned id = table[i];

        if (id == 0) {
            continue;
        }
        if (id > rc->largest || !tier_pmem_claim(rc->tier, i)) {
            /* Only a damaged table names no class: the page is free. */
            pagetab_set(tier_pmem_page(rc->tier, i), 0);
            continue;
        }
        rc->pages[rc->npages].page = tier_pmem_page(rc->tier, i);
        rc->pages[rc->npages].clsid = id;
        rc->npages++;
    }
    return 0;
}

/* ---- 2 scan ------------------------------------------------------------- */

/* Does the head's header describe an item that fits a chunk of class id
 * with these settings?  Read nothing past the chunk. */
static bool
head_fits(const struct item *it, unsigned id, const struct recovery *rc)
{
    uint16_t f = (uint16_t)(item_flags(it) & PERSIST_FLAGS);
    size_t room = slabs_size(id);

    if (it->nkey == 0 || it->nkey > KEY_MAX || it->nbytes < 2 ||
        ((f & ITEM_CAS) != 0) != rc->p->use_cas) {
        return false;
    }
    if (f & ITEM_CHUNKED) {
        /* Its clsid is the largest class (its LRU); its own chunk is of
         * the class its header size picks. */
        return (it->clsid & ITEM_CLSID_MASK) == rc->largest &&
               item_header_size(it) <= room &&
               slabs_clsid(item_header_size(it)) == id;
    }
    return (it->clsid & ITEM_CLSID_MASK) == id && item_ntotal(it) <= room;
}

/* Forget what the last run kept in the header's volatile fields. */
static void
reset_head(struct item *it)
{
    it->next = it->prev = it->h_next = NULL;
    it->refcount = 0;
    item_flags_store(it, (uint16_t)(item_flags(it) &
                                    (PERSIST_FLAGS | ITEM_TOKEN_SENT)));
    it->clsid &= ITEM_CLSID_MASK;
    it->tier = TIER_PMEM;
}

static bool
piece_fits(const struct item_chunk *ch, unsigned id)
{
    return ch->size == slabs_size(id) - sizeof(*ch) && ch->used > 0 &&
           ch->used <= ch->size;
}

static bool head_ok(struct worker *w, struct item *it, unsigned head_id);
static void link_head(struct worker *w, const struct head *h);
static unsigned age_rank(const struct recovery *rc, rel_time_t time);

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
static bool
may_have_twin(const struct recovery *rc, uint32_t hv)
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
    if (may_have_twin(w->rc, h->hv)) {
        w->oom |= !vec_push(&w->heads, h);
    } else {
        link_head(w, h);
    }
}

static void
ring_push(struct worker *w, const struct head *h)
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

static void
ring_drain(struct worker *w)
{
    uint64_t from = w->nring > RING ? w->nring - RING : 0;

    for (uint64_t i = from; i < w->nring; i++) {
        ring_settle(w, &w->ring[i % RING]);
    }
}

/* A live head: checked now if it can be (a chunked one waits for its
 * pieces), hashed, and linked now (ring_push()) or kept with its hash
 * and time. */
static void
scan_head(struct worker *w, struct item *it, unsigned id)
{
    struct head h = { .it = it, .time = item_time(it) };

    if (!head_fits(it, id, w->rc)) {
        item_flags_store(it, 0);
        w->torn++;
        return;
    }
    reset_head(it);
    if (!(item_flags(it) & ITEM_CHUNKED) && !head_ok(w, it, id)) {
        return;
    }
    h.hv = hash_murmur3(item_key(it), it->nkey);
    if (item_flags(it) & ITEM_CHUNKED) {
        (void)may_have_twin(w->rc, h.hv);
        w->oom |= !vec_push(&w->heads, &h);
    } else {
        ring_push(w, &h);
    }
}

static void
scan_chunk(struct worker *w, void *chunk, unsigned id)
{
    uint64_t commit = persist_prefix_of(chunk)->commit;
    struct item *it = chunk;

    if (commit == 0) {
        item_flags_store(it, 0);
    } else if (commit & 1) {
        scan_head(w, it, id);
    } else {
        struct item_chunk *ch = chunk;
        struct piece pc = {
            .seq = commit >> 1,
            .index = persist_prefix_of(chunk)->crc,
            .clsid = id,
            .ch = ch,
        };

        __atomic_store_n(&ch->flags, 0, __ATOMIC_RELAXED);
        ch->refcount = 0;
        if (piece_fits(ch, id)) {
            w->oom |= !vec_push(&w->pieces, &pc);
        }
    }
}

/* Progress on stderr in tenths, for a large file (256 pages in use,
 * 256 MB of items, take a noticeable moment to scan). */
static void
note_progress(struct recovery *rc)
{
    size_t done = __atomic_add_fetch(&rc->scanned, 1, __ATOMIC_RELAXED);

    if (rc->p->verbose > 0 && rc->npages >= 256 &&
        done * 10 / rc->npages != (done - 1) * 10 / rc->npages) {
        fprintf(stderr, "recovery: scanned %zu of %zu pages\n", done,
                rc->npages);
    }
}

static void *
scan_thread(void *arg)
{
    struct worker *w = arg;
    struct recovery *rc = w->rc;

    for (size_t i = w->id; i < rc->npages; i += rc->nthreads) {
        unsigned id = rc->pages[i].clsid;
        unsigned n = slabs_perslab(id);

        for (unsigned c = 0; c < n; c++) {
            scan_chunk(w, slabs_chunk(id, rc->pages[i].page, c), id);
        }
        note_progress(rc);
    }
    ring_drain(w);
    return NULL;
}

/* ---- 3 pieces ----------------------------------------------------------- */

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

        if (v->n != 0) {
            memcpy(rc->pieces + rc->npieces, v->v,
                   v->n * sizeof(struct piece));
            rc->npieces += v->n;
        }
    }
    qsort(rc->pieces, rc->npieces, sizeof(*rc->pieces), piece_cmp);
    return 0;
}

/* ---- 4 link ------------------------------------------------------------- */

/* The first piece tagged with seq, or NULL. */
static const struct piece *
find_pieces(const struct recovery *rc, uint64_t seq)
{
    size_t lo = 0, hi = rc->npieces;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (rc->pieces[mid].seq < seq) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo < rc->npieces && rc->pieces[lo].seq == seq ? &rc->pieces[lo]
                                                        : NULL;
}

/* Claimed pieces go back to unclaimed (the head was dropped). */
static void
release_chain(struct item *it)
{
    if (!(item_flags(it) & ITEM_CHUNKED)) {
        return;
    }
    for (struct item_chunk *ch = item_first_chunk(it); ch != NULL;
         ch = ch->next) {
        __atomic_store_n(&ch->flags, 0, __ATOMIC_RELAXED);
    }
}

/* Claim one piece for a chain; false if a head claimed it already. */
static bool
claim_piece(struct item_chunk *ch)
{
    uint16_t none = 0;

    return __atomic_compare_exchange_n(&ch->flags, &none, ITEM_CHUNK, false,
                                       __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

/*
 * Put the chain of a chunked head together from the pieces tagged with its
 * seq: indexes 0..k-1 with no gap, every piece but the last a full chunk of
 * the largest class, nbytes in all.  False (nothing claimed) otherwise.
 */
static bool
build_chain(const struct recovery *rc, struct item *it, unsigned head_id)
{
    const struct piece *pc = find_pieces(rc, seq_of(it));
    const struct piece *end = rc->pieces + rc->npieces;
    struct item_chunk *prev = NULL;
    uint64_t total = 0;
    uint32_t index = 0;

    item_set_first_chunk(it, NULL);
    for (; pc != NULL && pc < end && pc->seq == seq_of(it); pc++, index++) {
        struct item_chunk *ch = pc->ch;

        if (pc->index != index || total >= it->nbytes ||
            (prev != NULL && (prev->clsid != rc->largest ||
                              prev->used != prev->size)) ||
            !claim_piece(ch)) {
            break;
        }
        ch->head = it;
        ch->prev = prev;
        ch->next = NULL;
        ch->clsid = (uint8_t)pc->clsid;
        ch->tier = TIER_PMEM;
        if (prev != NULL) {
            prev->next = ch;
        } else {
            ch->orig_clsid = (uint8_t)head_id;
            item_set_first_chunk(it, ch);
        }
        total += ch->used;
        prev = ch;
    }
    if (total != it->nbytes || (pc < end && pc != NULL &&
                                pc->seq == seq_of(it))) {
        release_chain(it);
        return false;
    }
    return true;
}

/* Why a head cannot come back, counted; or true if it can. */
static bool
head_ok(struct worker *w, struct item *it, unsigned head_id)
{
    const struct recover_params *p = w->rc->p;

    if ((item_flags(it) & ITEM_CHUNKED) && !build_chain(w->rc, it, head_id)) {
        w->torn++;
        return false;
    }
    if ((p->check_crc && persist_crc(it) != persist_prefix_of(it)->crc) ||
        !item_value_crlf_ok(it)) {
        release_chain(it);
        w->torn++;
        return false;
    }
    if (it->exptime != 0 && it->exptime <= p->now) {
        release_chain(it);
        w->expired++;
        return false;
    }
    if (p->flush_time != 0 && p->flush_time <= p->now &&
        item_time(it) <= p->flush_time) {
        release_chain(it);
        w->flushed++;
        return false;
    }
    return true;
}

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
    w->linked--;    /* counted by the scan thread; only the sum is read */
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

    if (old == NULL || seq_of(old) < seq_of(it)) {
        if (old != NULL) {
            assoc_delete(item_key(old), old->nkey, hv);
            if (old->refcount != 0) {
                unlink_scanned(w, old);
            }
            item_flags_clear(old, ITEM_LINKED);
            release_chain(old);
            w->replaced++;
        }
        item_flags_set(it, ITEM_LINKED);
        assoc_insert(it, hv);
    } else {
        release_chain(it);
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
 * Every head, its bucket and the first item chained there are cache
 * misses (and, over a file of gigabytes, TLB misses): a software pipeline
 * keeps them in flight.  At step i head i and its bucket are prefetched
 * (the scan kept its hash); head i - 2d (a chunked one checked first,
 * now that its pieces are known) goes into the table.  d spans AHEAD of
 * this thread's heads.
 */
#define AHEAD   32

static void
link_span(struct worker *w, const struct head *heads, size_t n)
{
    size_t d = AHEAD * w->rc->nthreads;

    for (size_t i = 0; i < n + 2 * d; i++) {
        if (i < n && mine(w, heads[i].hv)) {
            __builtin_prefetch(heads[i].it, 1);
            __builtin_prefetch(assoc_bucket_hint(heads[i].hv), 1);
        }
        if (i >= 2 * d && i - 2 * d < n && mine(w, heads[i - 2 * d].hv)) {
            const struct head *h = &heads[i - 2 * d];

            if (!(item_flags(h->it) & ITEM_CHUNKED) ||
                head_ok(w, h->it, head_class(h->it))) {
                insert_head(w, h->it, h->hv);
            }
        }
    }
}

static void *
link_thread(void *arg)
{
    struct worker *w = arg;

    for (unsigned i = 0; i < w->rc->nthreads; i++) {
        link_span(w, w->rc->w[i].heads.v, w->rc->w[i].heads.n);
    }
    return NULL;
}

/* A hash table that holds n items without growing, if it is larger. */
static int
presize_hash(struct recovery *rc, uint64_t n)
{
    uint64_t power, bytes, expanding;
    unsigned want;

    assoc_stats(&power, &bytes, &expanding);
    want = (unsigned)power;
    /* The table grows past 1.5 items a bucket. */
    while (want < 32 && (((uint64_t)1 << want) * 3) / 2 < n) {
        want++;
    }
    rc->bucket_power = want;
    if (rc->p->check_crc) {
        unsigned bits = want + 4 > 32 ? 32 : want + 4 < 6 ? 6 : want + 4;

        rc->seen_mask = (uint32_t)(((uint64_t)1 << bits) - 1);
        rc->seen = calloc(((size_t)1 << bits) / 64, sizeof(*rc->seen));
        if (rc->seen == NULL) {
            return -1;
        }
    }
    if (want == power) {
        return 0;
    }
    assoc_destroy();
    return assoc_init(want, rc->p->hash_bulk_move);
}

/* ---- 5 free ------------------------------------------------------------- */

/* keep() for slabs_recover_page: bytes in use, or 0 after zeroing a stale
 * commit word (counted in *dirty, so the page gets persisted). */
static size_t
keep_chunk(void *chunk, void *ctx)
{
    struct persist_prefix *p = persist_prefix_of(chunk);
    struct item *it = chunk;
    uint16_t f = item_flags(it);

    if (f & ITEM_LINKED) {
        return (f & ITEM_CHUNKED) ? item_header_size(it) : item_ntotal(it);
    }
    if (f & ITEM_CHUNK) {
        return sizeof(struct item_chunk) + ((struct item_chunk *)chunk)->used;
    }
    if (p->commit != 0) {
        p->commit = 0;
        (*(unsigned *)ctx)++;
    }
    return 0;
}

static int
free_pages(struct recovery *rc)
{
    size_t page_size = rc->tier->page_size;

    for (size_t i = 0; i < rc->npages; i++) {
        unsigned dirty = 0;

        if (slabs_recover_page(rc->pages[i].clsid, rc->pages[i].page,
                               keep_chunk, &dirty) != 0) {
            return -1;
        }
        if (dirty != 0) {
            tier_persist(rc->tier, rc->pages[i].page, page_size);
        }
    }
    return 0;
}

/* ---- 6 lru -------------------------------------------------------------- */

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
    uint32_t age = time < rc->p->now ? rc->p->now - time : 0;
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
    w->linked++;
}

/* The scan's link of a head (ring_push()): table, then runs. */
static void
link_head(struct worker *w, const struct head *h)
{
    item_flags_set(h->it, ITEM_LINKED);
    assoc_insert_shared(h->it, h->hv);
    run_head(w, h);
}

/* The heads the link phase put in the table, each thread's into its own
 * runs (one thread: no other runs yet), then every thread's runs joined. */
static int
link_lrus(struct recovery *rc)
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

/* Runs for every worker; joined by link_lrus(), or here after a failure. */
static int
runs_new(struct recovery *rc)
{
    for (unsigned i = 0; i < rc->nthreads; i++) {
        rc->w[i].runs = lru_runs_new(LRU_RUNS);
        if (rc->w[i].runs == NULL) {
            return -1;
        }
    }
    return 0;
}

static void
runs_free(struct recovery *rc)
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

/* ---- the whole run ------------------------------------------------------ */

/* One thread per CPU this process may run on (taskset, cgroups). */
static unsigned
thread_count(const struct recover_params *p)
{
    cpu_set_t set;
    unsigned cpus = 1;
    unsigned n;

    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) {
        cpus = (unsigned)CPU_COUNT(&set);
    }
    n = p->nthreads ? p->nthreads : cpus;

    return n > MAX_THREADS ? MAX_THREADS : n;
}

static int
phases(struct recovery *rc, struct cache_recovery *out)
{
    uint64_t nheads = 0;
    uint64_t t0 = clock_mono_us(), t1;

    if (claim_pages(rc) != 0 || runs_new(rc) != 0) {
        return -1;
    }
    /* The table must be sized before the scan links into it: for at
     * most a head a chunk. */
    for (size_t i = 0; i < rc->npages; i++) {
        nheads += slabs_perslab(rc->pages[i].clsid);
    }
    if (presize_hash(rc, nheads) != 0) {
        return -1;
    }
    run_threads(rc, scan_thread);
    for (unsigned i = 0; i < rc->nthreads; i++) {
        if (rc->w[i].oom) {
            return -1;
        }
    }
    if (gather_pieces(rc) != 0) {
        return -1;
    }
    t1 = clock_mono_us();
    out->scan_seconds = t1 - t0;
    t0 = t1;
    run_threads(rc, link_thread);
    t1 = clock_mono_us();
    out->link_seconds = t1 - t0;
    t0 = t1;
    if (free_pages(rc) != 0) {
        return -1;
    }
    t1 = clock_mono_us();
    out->free_seconds = t1 - t0;
    t0 = t1;
    if (link_lrus(rc) != 0) {
        return -1;
    }
    out->lru_seconds = clock_mono_us() - t0;
    out->pages = rc->npages;
    for (unsigned i = 0; i < rc->nthreads; i++) {
        out->items += rc->w[i].linked;
        out->dropped_torn += rc->w[i].torn;
        out->dropped_expired += rc->w[i].expired;
        out->dropped_flushed += rc->w[i].flushed;
        out->dropped_replaced += rc->w[i].replaced;
    }
    return 0;
}

int
recover_run(struct tier *t, const struct recover_params *p,
            struct cache_recovery *out)
{
    struct recovery rc = {
        .p = p,
        .tier = t,
        .largest = slabs_largest(),
        .nthreads = thread_count(p),
        .unlink = PTHREAD_MUTEX_INITIALIZER,
    };
    uint64_t start = clock_mono_us();
    int ret;

    memset(out, 0, sizeof(*out));
    out->checksummed = p->check_crc;
    rc.w = calloc(rc.nthreads, sizeof(*rc.w));
    if (rc.w == NULL) {
        fprintf(stderr, "recovery: out of memory\n");
        return -1;
    }
    for (unsigned i = 0; i < rc.nthreads; i++) {
        rc.w[i].rc = &rc;
        rc.w[i].id = i;
        rc.w[i].heads.size = sizeof(struct head);
        rc.w[i].pieces.size = sizeof(struct piece);
    }
    ret = phases(&rc, out);
    if (ret != 0) {
        fprintf(stderr, "recovery: out of memory\n");
    }
    runs_free(&rc);
    for (unsigned i = 0; i < rc.nthreads; i++) {
        free(rc.w[i].heads.v);
        free(rc.w[i].pieces.v);
    }
    free(rc.w);
    free(rc.pieces);
    free(rc.pages);
    free(rc.seen);
    out->seconds = clock_mono_us() - start;
    return ret;
}
