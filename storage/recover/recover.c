/*
 * recover.c: reading a memory file's items back while the node serves
 * (recover.h).
 *
 *   start    the caller's thread: every page the page table gives a class
 *            is claimed in the tier (a byte naming no class is cleared),
 *            and the hash table sized for a head in every chunk.
 *   pages    threads, each taking the next page in file order: its
 *            chunks sorted by their commit words into heads (odd: a live
 *            item, its header checked against its chunk), pieces of
 *            chunked values (even) and free chunks (0); an unchunked
 *            head's checks (crc, expiry, flush) and hash done while its
 *            lines stream through; what failed cleared in the file; the
 *            page given to its class (its free chunks to the free list);
 *            then its heads linked (recover_link.c).
 *   chunked  one thread, once every page is done: the pieces sorted,
 *            chains rebuilt, the pieces no head claimed freed, the heads
 *            linked.
 *
 * Until its page is given to its class nothing else can reach a chunk;
 * from then on it is the slabs' like any other (a head that loses is
 * freed as an item is).  Every head and piece waiting for the end is
 * counted in use, and the page mover is held off meanwhile.
 */
#include "storage/recover/recover.h"
#include "storage/base/affinity.h"
#include "storage/base/hash.h"
#include "storage/index/tomb.h"
#include "storage/recover/recover_check.h"
#include "storage/recover/recover_link.h"
#include "storage/slab/chunkid.h"
#include "storage/slab/item.h"
#include "storage/slab/persist.h"
#include "storage/slab/slabs.h"
#include "storage/slab/slabs_image.h"
#include "storage/slab/slabs_move.h"
#include "storage/tier/pagetab.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* ---- start ------------------------------------------------------------ */

static int
claim_pages(struct recovery *rc)
{
    size_t n;
    const unsigned char *table = pagetab_get(&n);

    rc->pages = calloc(n ? n : 1, sizeof(*rc->pages));
    rc->taken = calloc(n ? n : 1, 1);
    if (rc->pages == NULL || rc->taken == NULL) {
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

/* ---- pages -------------------------------------------------------------- */

/* Does the head's header describe an item that fits a chunk of class id
 * with these settings?  Read nothing past the chunk. */
static bool
head_fits(const struct item *it, unsigned id, const struct recovery *rc)
{
    uint16_t f = (uint16_t)(item_flags(it) & PERSIST_FLAGS);
    size_t room = slabs_size(id);

    if (it->nkey == 0 || it->nkey > ITEM_KEY_MAX || it->nbytes < 2 ||
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

/* A chunk that does not come back: its commit word cleared (the page is
 * persisted once the scan of it is done). */
static void
clear(void *chunk, unsigned *dirty)
{
    persist_prefix_of(chunk)->commit = 0;
    item_flags_store(chunk, 0);
    (*dirty)++;
}

/* A live head: checked now if it can be (a chunked one waits for its
 * pieces) and hashed, for the page's links or for the end. */
static void
scan_head(struct worker *w, struct item *it, unsigned id, unsigned *dirty)
{
    struct head h = { .it = it, .clsid = id };

    if (!head_fits(it, id, w->rc)) {
        clear(it, dirty);
        w->torn++;
        return;
    }
    reset_head(it);
    if (!(item_flags(it) & ITEM_CHUNKED) && !recover_head_ok(w, it, id)) {
        clear(it, dirty);
        return;
    }
    h.hv = hash_key(item_key(it), it->nkey);
    w->oom |= !recover_vec_push((item_flags(it) & ITEM_CHUNKED) ? &w->heads
                                                                : &w->page,
                                &h);
}

static void
scan_chunk(struct worker *w, void *chunk, unsigned id, unsigned *dirty)
{
    uint64_t commit = persist_prefix_of(chunk)->commit;

    if (commit == 0) {
        item_flags_store(chunk, 0);
    } else if (commit & 1) {
        scan_head(w, chunk, id, dirty);
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
        } else {
            clear(chunk, dirty);
        }
    }
}

/* keep() for slabs_recover_page: the bytes a chunk the scan kept holds
 * (a head, or a piece waiting for its head), or 0: free. */
static size_t
keep_chunk(void *chunk, void *ctx)
{
    uint64_t commit = persist_prefix_of(chunk)->commit;
    struct item *it = chunk;

    (void)ctx;
    if (commit == 0) {
        return 0;
    }
    if (commit & 1) {
        return (item_flags(it) & ITEM_CHUNKED) ? item_header_size(it)
                                               : item_ntotal(it);
    }
    return sizeof(struct item_chunk) + ((struct item_chunk *)chunk)->used;
}

/* One page whole: scanned, what failed cleared in the file, given to its
 * class, its heads linked.  A worker that helps (in a flush group, under
 * power durability) makes the clears durable before the chunks can be
 * handed out again, as a kill is (persist_kill()). */
static void
recover_page(struct worker *w, const struct page_ref *pg, bool helper)
{
    unsigned id = pg->clsid, n = slabs_perslab(id), dirty = 0;

    for (unsigned c = 0; c < n; c++) {
        scan_chunk(w, slabs_chunk(id, pg->page, c), id, &dirty);
    }
    if (dirty != 0) {
        tier_persist(w->rc->tier, pg->page, w->rc->tier->page_size);
        if (tier_pmem_group_pending(w->rc->tier)) {
            tier_pmem_group_sync(w->rc->tier);
        }
    }
    if (slabs_recover_page(id, pg->page, keep_chunk, NULL) != 0) {
        w->oom = true;
        return;
    }
    recover_link_pages(w, helper);
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

/* Take page i, unless another thread (or a helper) did.  A thread that
 * finds it taken by a helper sees the helper counted in rc->helping
 * (the helper counts itself first): the end waits for it. */
static bool
take(struct recovery *rc, size_t i)
{
    unsigned char no = 0;

    return __atomic_compare_exchange_n(&rc->taken[i], &no, 1, false,
                                       __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

/* The next page in file order no one took, or npages. */
static size_t
take_next(struct recovery *rc)
{
    for (;;) {
        size_t i = __atomic_fetch_add(&rc->next_page, 1, __ATOMIC_RELAXED);

        if (i >= rc->npages || take(rc, i)) {
            return i < rc->npages ? i : rc->npages;
        }
    }
}

static void *
page_thread(void *arg)
{
    struct worker *w = arg;
    struct recovery *rc = w->rc;

    while (!__atomic_load_n(&rc->stop, __ATOMIC_RELAXED) && !w->oom) {
        size_t i = take_next(rc);

        if (i >= rc->npages) {
            break;
        }
        recover_page(w, &rc->pages[i], false);
        note_progress(rc);
        if (rc->p->pace_us != 0) {
            struct timespec ts = {
                .tv_sec = rc->p->pace_us / 1000000,
                .tv_nsec = (long)(rc->p->pace_us % 1000000) * 1000,
            };

            nanosleep(&ts, NULL);
        }
    }
    return NULL;
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

/* ---- help ------------------------------------------------------------- */

/*
 * A worker that finds no free chunk of a class in the file, and no page
 * to cut, while the file is read back reads a page of that class back
 * itself rather than evict: the pages not read yet hold the class's free
 * chunks (and its dead items) as much as the ones read.  Up to HELPERS
 * workers at once, each in a worker slot of its own, whose chunked heads
 * and pieces wait for the end with the threads'.  The caller may hold an
 * item lock: a helper waits for none (recover_link_pages()), so waiting
 * for a slot cannot close a circle.
 */
bool
recover_help(struct recovery *rc, unsigned clsid)
{
    struct worker *w = NULL;
    size_t i = rc != NULL ? rc->npages : 0;

    if (!recover_running(rc) || __atomic_load_n(&rc->stop, __ATOMIC_RELAXED)) {
        return false;
    }
    if (clsid >= sizeof(rc->spent) ||
        __atomic_load_n(&rc->spent[clsid], __ATOMIC_RELAXED)) {
        return false;
    }
    __atomic_add_fetch(&rc->helping, 1, __ATOMIC_ACQ_REL);
    for (size_t j = __atomic_load_n(&rc->next_page, __ATOMIC_RELAXED);
         clsid != 0 && j < rc->npages && i == rc->npages; j++) {
        if (rc->pages[j].clsid == clsid && take(rc, j)) {
            i = j;
        }
    }
    if (clsid == 0) {
        i = take_next(rc);
    } else if (i == rc->npages) {
        /* none left, and none comes: later calls need not look */
        __atomic_store_n(&rc->spent[clsid], true, __ATOMIC_RELAXED);
    }
    if (i < rc->npages) {
        for (unsigned k = rc->nthreads; w == NULL && k < rc->nworkers; k++) {
            if (pthread_mutex_trylock(&rc->w[k].help) == 0) {
                w = &rc->w[k];
            }
        }
        if (w == NULL) {
            w = &rc->w[rc->nthreads];
            pthread_mutex_lock(&w->help);
        }
        recover_page(w, &rc->pages[i], true);
        note_progress(rc);
        pthread_mutex_unlock(&w->help);
    }
    __atomic_sub_fetch(&rc->helping, 1, __ATOMIC_ACQ_REL);
    return i < rc->npages;
}

/* Every page taken, the threads done: wait for the helpers still on
 * one. */
static void
wait_helpers(struct recovery *rc)
{
    static const struct timespec tick = { .tv_nsec = 100000 };

    while (__atomic_load_n(&rc->helping, __ATOMIC_ACQUIRE) != 0) {
        nanosleep(&tick, NULL);
    }
}

/* The figures so far: the threads' counts, read as they run. */
static void
figures(const struct recovery *rc, struct cache_recovery *out)
{
    memset(out, 0, sizeof(*out));
    out->checksummed = rc->check_crc;
    out->threads = rc->nthreads;
    out->pages = rc->npages;
    out->pages_done = __atomic_load_n(&rc->scanned, __ATOMIC_RELAXED);
    out->running = __atomic_load_n(&rc->running, __ATOMIC_ACQUIRE);
    out->removals = tomb_count();
    for (unsigned i = 0; i < rc->nworkers; i++) {
        const struct worker *w = &rc->w[i];

        out->items += __atomic_load_n(&w->linked, __ATOMIC_RELAXED);
        out->dropped_torn += __atomic_load_n(&w->torn, __ATOMIC_RELAXED);
        out->dropped_expired += __atomic_load_n(&w->expired,
                                                __ATOMIC_RELAXED);
        out->dropped_flushed += __atomic_load_n(&w->flushed,
                                                __ATOMIC_RELAXED);
        out->dropped_replaced += __atomic_load_n(&w->replaced,
                                                 __ATOMIC_RELAXED);
        out->dropped_removed += __atomic_load_n(&w->removed,
                                                __ATOMIC_RELAXED);
    }
    out->start_seconds = rc->start_len_us;
    out->seconds = clock_mono_us() - rc->started_us;
}

/* The recovery's own thread: the pages (with helpers), then the chunked
 * values; the removals noted are let go of once everything is back. */
static void *
recovery_thread(void *arg)
{
    struct recovery *rc = arg;
    bool oom = false;
    uint64_t t0, t1;

    run_threads(rc, page_thread);
    wait_helpers(rc);
    for (unsigned i = 0; i < rc->nworkers; i++) {
        oom |= rc->w[i].oom;
    }
    t1 = clock_mono_us();
    rc->complete = !oom && !__atomic_load_n(&rc->stop, __ATOMIC_RELAXED) &&
                   recover_link_chunked(rc) == 0;
    if (!rc->complete && !__atomic_load_n(&rc->stop, __ATOMIC_RELAXED)) {
        fprintf(stderr, "recovery: out of memory: some items of the file "
                "are not back (the next start scans it again)\n");
    }
    t0 = clock_mono_us();
    figures(rc, &rc->out);
    tomb_end(rc->complete);
    rc->out.scan_seconds = t1 - rc->started_us - rc->start_len_us;
    rc->out.link_seconds = t0 - t1;
    rc->out.seconds = t0 - rc->started_us;
    rc->out.running = 0;
    if (rc->p->verbose > 0) {
        fprintf(stderr, "memory file %s: recovered %llu items from %llu "
                "pages in %.3f s%s\n", rc->p->name,
                (unsigned long long)rc->out.items,
                (unsigned long long)rc->out.pages,
                (double)rc->out.seconds / 1e6,
                rc->complete ? "" : " (stopped before the end)");
    }
    slabs_hold_moves(false);
    __atomic_store_n(&rc->running, false, __ATOMIC_RELEASE);
    return NULL;
}

static void
recovery_free(struct recovery *rc)
{
    for (unsigned i = 0; rc->w != NULL && i < rc->nworkers; i++) {
        pthread_mutex_destroy(&rc->w[i].help);
        free(rc->w[i].page.v);
        free(rc->w[i].busy.v);
        free(rc->w[i].later.v);
        free(rc->w[i].heads.v);
        free(rc->w[i].pieces.v);
    }
    free(rc->w);
    free(rc->pieces);
    free(rc->pages);
    free(rc->taken);
    free(rc);
}

static struct recovery *
recovery_new(struct tier *t, const struct recover_params *p)
{
    struct recovery *rc = calloc(1, sizeof(*rc));

    if (rc == NULL) {
        return NULL;
    }
    rc->p = p;
    rc->check_crc = p->check_crc;
    rc->now = p->now;
    rc->flush_time = p->flush_time;
    rc->flush_cas = p->flush_cas;
    rc->tier = t;
    rc->largest = slabs_largest();
    rc->nthreads = thread_count(p);
    rc->started_us = clock_mono_us();
    rc->next_note_us = rc->started_us +
                       (p->progress_ms ? p->progress_ms : 1000) * 1000ull;
    rc->nworkers = rc->nthreads + HELPERS;
    rc->w = calloc(rc->nworkers, sizeof(*rc->w));
    if (rc->w == NULL) {
        free(rc);
        return NULL;
    }
    for (unsigned i = 0; i < rc->nworkers; i++) {
        pthread_mutex_init(&rc->w[i].help, NULL);
        rc->w[i].rc = rc;
        rc->w[i].id = i;
        rc->w[i].page.size = sizeof(struct head);
        rc->w[i].busy.size = sizeof(struct head);
        rc->w[i].later.size = sizeof(struct head);
        rc->w[i].heads.size = sizeof(struct head);
        rc->w[i].pieces.size = sizeof(struct piece);
    }
    return rc;
}

struct recovery *
recover_start(struct tier *t, const struct recover_params *p)
{
    struct recovery *rc = recovery_new(t, p);
    uint64_t nheads = 0;
    unsigned power;

    if (rc == NULL || claim_pages(rc) != 0) {
        fprintf(stderr, "recovery: cannot start: out of memory\n");
        if (rc != NULL) {
            recovery_free(rc);
        }
        return NULL;
    }
    /* For at most a head a chunk: the table does not grow meanwhile. */
    for (size_t i = 0; i < rc->npages; i++) {
        nheads += slabs_perslab(rc->pages[i].clsid);
    }
    power = recover_link_presize(nheads);
    /* 16 bits of filter a bucket: 2 bytes for 1.5 items at most */
    if (tomb_begin(p->tomb_log, p->file_id, p->mark, p->sync, power + 4)
        != 0) {
        recovery_free(rc);
        return NULL;
    }
    slabs_hold_moves(true);
    rc->running = true;
    rc->start_len_us = clock_mono_us() - rc->started_us;
    if (pthread_create(&rc->thread, NULL, recovery_thread, rc) != 0) {
        fprintf(stderr, "recovery: cannot start a thread\n");
        slabs_hold_moves(false);
        tomb_end(false);
        recovery_free(rc);
        return NULL;
    }
    pthread_setname_np(rc->thread, "mc-recover");
    affinity_apply(rc->thread, AFFINITY_RECOVERY, 0);
    return rc;
}

bool
recover_running(const struct recovery *rc)
{
    return rc != NULL && __atomic_load_n(&rc->running, __ATOMIC_ACQUIRE);
}

bool
recover_complete(const struct recovery *rc)
{
    return rc != NULL && !recover_running(rc) && rc->complete;
}

void
recover_progress(const struct recovery *rc, struct cache_recovery *out)
{
    if (recover_running(rc)) {
        figures(rc, out);
    } else {
        *out = rc->out;
    }
}

bool
recover_finish(struct recovery *rc, bool stop, struct cache_recovery *out)
{
    bool complete;

    if (rc == NULL) {
        return true;
    }
    if (stop) {
        __atomic_store_n(&rc->stop, true, __ATOMIC_RELAXED);
    }
    pthread_join(rc->thread, NULL);
    complete = rc->complete;
    if (out != NULL) {
        *out = rc->out;
    }
    recovery_free(rc);
    return complete;
}
