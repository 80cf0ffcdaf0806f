/*
 * mover.c: the page mover thread and automove (mover.h).
 *
 * Locking: the thread holds no lock of its own; slabs_move_visit() runs
 * its callback under the slabs lock, place_evacuate() takes item locks.
 * The counters are written by the mover thread only and read racily.
 */
#include "storage/lru/mover.h"
#include "storage/base/affinity.h"
#include "storage/lru/lru.h"
#include "storage/lru/place.h"
#include "storage/slab/slabs.h"
#include "storage/slab/slabs_image.h"
#include "storage/slab/slabs_move.h"
#include "storage/slab/slabs_stats.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

/* Passes over a page before items readers hold are unlinked anyway
 * (about 25 ms of backoff). */
#define FORCE_PASS 8

static struct {
    const struct cache_options *opts;
    pthread_t           thread;
    bool                running;
    struct cache_stats  st;             /* slab_reassign_* */
    uint64_t            evicted[SLABS_TC_MAX];      /* at the last tick */
    uint64_t            window[SLABS_TC_MAX];       /* a bit per tick;
                                                       the mover reads */
    uint64_t            ticks;          /* automove decisions so far */
} mv;

/* ---- emptying a page -------------------------------------------------- */

/* What a visit of a live chunk took: its item, referenced, and a copy of
 * its key. */
struct visit {
    struct item *it;
    char         key[256];
    size_t       nkey;
    bool         rescue;        /* an unchunked item: may be copied */
    struct item_chunk *piece;   /* the chunk, when a piece of a value */
};

/* Copy the key of an item whose owner may still be writing it (no item
 * lock yet): byte-wise relaxed loads, so the race is a declared one.
 * place_evacuate() checks the copy under the item lock before trusting
 * it. */
static size_t
copy_key_racy(const struct item *it, char *key, size_t room)
{
    size_t nkey = __atomic_load_n(&it->nkey, __ATOMIC_RELAXED);
    const char *src = item_key(it);

    /* A chunk being set up may hold any nkey: stay inside it. */
    if (nkey > room) {
        nkey = room;
    }
    for (size_t i = 0; i < nkey; i++) {
        key[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
    }
    return nkey;
}

/* Under the slabs lock: take a reference to the item owning a live chunk
 * (the chunk itself, or the head of the value it is a piece of).  0 when
 * taken, 1 when the item is being set up or freed right now. */
static int
take_item(void *chunk, size_t room, void *ctx)
{
    struct visit *v = ctx;
    struct item *it = chunk;
    bool piece = (item_flags(it) & ITEM_CHUNK) != 0;

    if (piece) {
        it = __atomic_load_n(&((struct item_chunk *)chunk)->head,
                             __ATOMIC_ACQUIRE);
    }
    if (it == NULL || item_ref_incr(it) == 1) {
        if (it != NULL) {
            item_ref_decr(it);
        }
        return 1;
    }
    /* A head item is set up before its pieces point at it; only a piece
     * of this page can be half-written. */
    v->nkey = copy_key_racy(it, v->key, piece ? 255 : room -
                            sizeof(struct item) - sizeof(uint64_t));
    v->it = it;
    v->rescue = !piece && !(item_flags(it) & ITEM_CHUNKED);
    v->piece = piece ? chunk : NULL;
    return 0;
}

/* Walk the page until every chunk is free. */
static void
drain(unsigned src, char *page)
{
    unsigned per = slabs_perslab(src);
    useconds_t backoff = 100;

    for (unsigned pass = 0;; pass++) {
        unsigned busy = 0, live = 0;

        for (unsigned i = 0; i < per; i++) {
            struct visit v;
            int rc = slabs_move_visit(page, i, take_item, &v);

            if (rc < 0) {
                continue;
            }
            live++;
            busy += rc == 0 ? (unsigned)place_evacuate(v.it, v.key, v.nkey,
                                                       v.rescue, v.piece,
                                                       pass >= FORCE_PASS,
                                                       &mv.st)
                            : 1;
        }
        if (live == 0) {
            return;
        }
        mv.st.slab_reassign_busy_items += busy;
        usleep(backoff);
        backoff = backoff < 100000 ? backoff * 2 : backoff;
    }
}

static bool spare_free(unsigned tc);

/* A page of src went back to the pool: under automove the next goes at
 * once, while the class still has pages of free chunks and has not
 * evicted within the window (memcached paces moves between classes to
 * one a second, not these). */
static void
again_to_pool(unsigned src, unsigned dst)
{
    if (SLABS_TC_ID(dst) == 0 && SLABS_TC_ID(src) != 0 &&
        mv.opts->slab_automove == 1 &&
        __atomic_load_n(&mv.window[src], __ATOMIC_RELAXED) == 0 &&
        spare_free(src)) {
        slabs_reassign(SLABS_TC_TIER(src), (int)SLABS_TC_ID(src), 0);
    }
}

static void *
mover_thread(void *arg)
{
    unsigned src, dst;

    (void)arg;
    while (slabs_move_next(&src, &dst)) {
        char *page = slabs_move_begin(src, dst);

        if (page != NULL) {
            __atomic_store_n(&mv.st.slab_reassign_running, 1,
                             __ATOMIC_RELAXED);
            drain(src, page);
            slabs_move_end(page);
            __atomic_store_n(&mv.st.slab_reassign_running, 0,
                             __ATOMIC_RELAXED);
        }
        slabs_move_done();
        again_to_pool(src, dst);
    }
    return NULL;
}

int
mover_start(const struct cache_options *opts)
{
    if (mv.running) {
        return 0;
    }
    memset(&mv, 0, sizeof(mv));
    mv.opts = opts;
    slabs_mover_attach(true);
    if (pthread_create(&mv.thread, NULL, mover_thread, NULL) != 0) {
        slabs_mover_attach(false);
        return -1;
    }
    pthread_setname_np(mv.thread, "mc-slabmaint");
    affinity_apply(mv.thread, AFFINITY_BG, 0);
    mv.running = true;
    return 0;
}

void
mover_stop(void)
{
    if (!mv.running) {
        return;
    }
    slabs_mover_attach(false);
    pthread_join(mv.thread, NULL);
    mv.running = false;
}

void
mover_stats(struct cache_stats *out)
{
    cache_stats_add(out, &mv.st);
}

void
mover_stats_reset(void)
{
    cache_stats_reset_counters(&mv.st);
}

/* ---- automove --------------------------------------------------------- */

/* Shift this tick's evictions into the class's window (a bit per tick,
 * so windows longer than 64 ticks are clamped to 64); true if the class
 * evicted within the window. */
static bool
window_update(unsigned tc, uint64_t evicted)
{
    unsigned w = mv.opts->automove_window;
    uint64_t mask = w >= 64 || w == 0 ? ~(uint64_t)0
                                      : ((uint64_t)1 << w) - 1;
    uint64_t bits = (mv.window[tc] << 1) | (evicted != mv.evicted[tc]);

    mv.evicted[tc] = evicted;
    __atomic_store_n(&mv.window[tc], bits & mask, __ATOMIC_RELAXED);
    return (bits & mask) != 0;
}

/* A class with pages to spare whose tier is full: more than two pages and
 * two and a half pages of free chunks. */
static bool
spare_free(unsigned tc)
{
    struct cache_slab_stats ss;
    uint64_t limit, used;

    slabs_class_stats(tc, &ss);
    slabs_tier_usage(SLABS_TC_TIER(tc), &limit, &used);
    return ss.total_pages > 2 && ss.free_chunks > ss.chunks_per_page * 5 / 2
           && used + mv.opts->page_size > limit;
}

/* After cache_memlimit lowered the limit: give the tier back a page of
 * the class with the most, one per tick.  True if a move was queued. */
static bool
shrink_to_limit(unsigned t)
{
    unsigned best = 0, most = 1;
    bool over = slabs_shrinking(t);

    for (unsigned id = 1; over && id <= slabs_largest(); id++) {
        if (slabs_npages(SLABS_TC(t, id)) > most) {
            most = slabs_npages(SLABS_TC(t, id));
            best = id;
        }
    }
    return best != 0 && slabs_reassign(t, (int)best, 0) == CACHE_OK;
}

/* The windowed automove decision for one tier; true if a move was
 * queued. */
static bool
automove_tier(unsigned t)
{
    int youngest = -1, oldest = -1;
    uint64_t young_age = UINT64_MAX, old_age = 0;

    if (shrink_to_limit(t)) {
        return true;
    }
    if (mv.opts->slab_automove != 1) {
        return false;
    }
    for (unsigned id = 1; id <= slabs_largest(); id++) {
        unsigned tc = SLABS_TC(t, id);
        struct cache_item_stats is;
        bool evicting;

        lru_item_stats(tc, &is);
        evicting = window_update(tc, is.evicted);
        if (!evicting && spare_free(tc)) {
            return slabs_reassign(t, (int)id, 0) == CACHE_OK;
        }
        if (evicting && is.age < young_age) {
            young_age = is.age;
            youngest = (int)id;
        }
        if (slabs_npages(tc) > 2 && is.age > old_age) {
            old_age = is.age;
            oldest = (int)id;
        }
    }
    /* Between classes only once a whole window has been seen, as
     * memcached's automover waits (no page moves on the first 30 s of a
     * fresh cache's evictions). */
    return mv.ticks > mv.opts->automove_window &&
           youngest > 0 && oldest > 0 && youngest != oldest &&
           (double)young_age < (double)old_age * mv.opts->automove_ratio &&
           slabs_reassign(t, oldest, youngest) == CACHE_OK;
}

void
mover_tick(void)
{
    if (!mv.running) {
        return;
    }
    mv.ticks++;
    for (unsigned t = 0; t < SLABS_NTIERS; t++) {
        if (slabs_tier(t) != NULL && automove_tier(t)) {
            return;
        }
    }
}
