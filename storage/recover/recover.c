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
#include "storage/recover/recover.h"
#include "storage/base/affinity.h"
#include "storage/base/hash.h"
#include "storage/recover/recover_check.h"
#include "storage/recover/recover_link.h"
#include "storage/slab/chunkid.h"
#include "storage/slab/item.h"
#include "storage/slab/persist.h"
#include "storage/slab/slabs.h"
#include "storage/slab/slabs_image.h"
#include "storage/tier/pagetab.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KEY_MAX         250

/* Run fn on every worker, each in a thread of its own but the first; a
 * worker whose thread cannot start runs here afterwards instead. */
static void
run_threads(struct recovery *rc, void *(*fn)(void *))
{
    pthread_t tid[MAX_THREADS];
    bool started[MAX_THREADS] = { false };

    for (unsigned i = 1; i < rc->nthreads; i++) {
        started[i] = pthread_create(&tid[i], NULL, fn, &rc->w[i]) == 0;
        if (started[i]) {
            affinity_apply(tid[i], AFFINITY_RECOVERY, i);
        }
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
        if (slabs_recover_name(id, rc->pages[rc->npages].page) != 0) {
            fprintf(stderr, "recovery: more pages than chunk ids can "
                    "name (%u)\n", chunkid_capacity());
            return -1;
        }
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

/* A live head: checked now if it can be (a chunked one waits for its
 * pieces), hashed, and linked soon (recover_link_push()) or kept with its
 * hash and time. */
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
    if (!(item_flags(it) & ITEM_CHUNKED) && !recover_head_ok(w, it, id)) {
        return;
    }
    h.hv = hash_key(item_key(it), it->nkey);
    if (item_flags(it) & ITEM_CHUNKED) {
        (void)recover_link_seen(w->rc, h.hv);
        w->oom |= !recover_vec_push(&w->heads, &h);
    } else {
        recover_link_push(w, &h);
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
            w->oom |= !recover_vec_push(&w->pieces, &pc);
        }
    }
}

/* With -v, a line on stderr every progress_ms (a second) of the scan:
 * pages read of the total, items linked so far (after a clean stop the
 * scan links them; after a crash a later phase does) and their rate.
 * Whichever scan thread finishes a page past the due time writes it,
 * under a lock and with the counts read then, so that the lines go up
 * even when two threads fall due one right after the other. */
static void
note_progress(struct recovery *rc)
{
    static pthread_mutex_t note_lock = PTHREAD_MUTEX_INITIALIZER;
    uint64_t now, due, every, linked = 0;
    size_t done;

    __atomic_add_fetch(&rc->scanned, 1, __ATOMIC_RELAXED);
    if (rc->p->verbose == 0) {
        return;
    }
    now = clock_mono_us();
    due = __atomic_load_n(&rc->next_note_us, __ATOMIC_RELAXED);
    every = (rc->p->progress_ms ? rc->p->progress_ms : 1000) * 1000ull;
    if (now < due ||
        !__atomic_compare_exchange_n(&rc->next_note_us, &due, now + every,
                                     false, __ATOMIC_RELAXED,
                                     __ATOMIC_RELAXED)) {
        return;
    }
    pthread_mutex_lock(&note_lock);
    done = __atomic_load_n(&rc->scanned, __ATOMIC_RELAXED);
    for (unsigned i = 0; i < rc->nthreads; i++) {
        linked += __atomic_load_n(&rc->w[i].linked, __ATOMIC_RELAXED);
    }
    if (done > rc->noted) {
        rc->noted = done;
        fprintf(stderr, "recovery: scanned %zu of %zu pages, %llu items "
                "linked, %.0f items/s\n", done, rc->npages,
                (unsigned long long)linked,
                (double)linked * 1e6 / (double)(now - rc->started_us + 1));
    }
    pthread_mutex_unlock(&note_lock);
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
    recover_link_drain(w);
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

    if (claim_pages(rc) != 0 || recover_link_runs_new(rc) != 0) {
        return -1;
    }
    /* The table must be sized before the scan links into it: for at
     * most a head a chunk. */
    for (size_t i = 0; i < rc->npages; i++) {
        nheads += slabs_perslab(rc->pages[i].clsid);
    }
    if (recover_link_presize(rc, nheads) != 0) {
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
    run_threads(rc, recover_link_thread);
    t1 = clock_mono_us();
    out->link_seconds = t1 - t0;
    t0 = t1;
    if (free_pages(rc) != 0) {
        return -1;
    }
    t1 = clock_mono_us();
    out->free_seconds = t1 - t0;
    t0 = t1;
    if (recover_link_lrus(rc) != 0) {
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
        .check_crc = p->check_crc,
        .now = p->now,
        .flush_time = p->flush_time,
        .tier = t,
        .largest = slabs_largest(),
        .nthreads = thread_count(p),
        .unlink = PTHREAD_MUTEX_INITIALIZER,
    };
    uint64_t start = clock_mono_us();
    int ret;

    rc.started_us = start;
    rc.next_note_us = start + (p->progress_ms ? p->progress_ms : 1000) *
                              1000ull;
    memset(out, 0, sizeof(*out));
    out->checksummed = p->check_crc;
    out->threads = rc.nthreads;
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
    recover_link_runs_free(&rc);
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
