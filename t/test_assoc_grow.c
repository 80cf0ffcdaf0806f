/*
 * test_assoc_grow.c: the hash table grows from 2^12 while one thread
 * inserts and deletes and two others keep finding what is already there,
 * half of their lookups lock-free; every item is found, none twice, and
 * the table ends at the level memcached's would.
 */
#include "storage/index/assoc.h"

#include "storage/base/locks.h"
#include "storage/base/quiesce.h"
#include "storage/slab/chunkid.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "t/assoc_test.h"
#include "t/tap.h"

/* ---- growth under concurrent lookups ---------------------------------- */

struct grow {
    struct item **items;
    uint32_t *hvs;
    uint32_t n;
    _Atomic uint32_t inserted;      /* items[0..inserted) were linked */
    atomic_uchar *deleted;          /* set after the unlink completed */
    atomic_bool done;
    _Atomic uint64_t live;
    _Atomic uint64_t lookups, misses, ghosts;
    _Atomic uint64_t peeks;         /* lock-free lookups that answered */
    atomic_bool saw_expanding;
    _Atomic unsigned readers;       /* readers running: the inserter waits */
};

static void
grow_delete(struct grow *g, uint32_t d)
{
    uint32_t hv = g->hvs[d];

    locks_lock(hv);
    assoc_delete(ikey(g->items[d]), g->items[d]->nkey, hv);
    locks_unlock(hv);
    atomic_store(&g->deleted[d], 1);
    atomic_fetch_sub(&g->live, 1);
}

static void *
grow_inserter(void *arg)
{
    struct grow *g = arg;
    uint32_t i, hv;

    /* Start inserting only once both readers run, so that a loaded
     * machine cannot finish the growth before they look at it. */
    while (atomic_load(&g->readers) < 2) {
        sched_yield();
    }
    for (i = 0; i < g->n; i++) {
        hv = g->hvs[i];
        locks_lock(hv);
        assoc_insert(g->items[i], hv);
        locks_unlock(hv);
        atomic_store(&g->inserted, i + 1);
        atomic_fetch_add(&g->live, 1);
        if (i >= DEL_LAG && (i - DEL_LAG) % DEL_EVERY == 0) {
            grow_delete(g, i - DEL_LAG);
        }
        if (i % 1024 == 0) {
            assoc_maybe_expand(atomic_load(&g->live));
        }
    }
    return NULL;
}

/* Half the lookups go to the newest keys, whose buckets move last. */
static uint32_t
pick(uint32_t n, unsigned *seed)
{
    uint32_t r = (uint32_t)rand_r(seed);

    if ((r & 1) && n > 1000) {
        return n - 1 - (r >> 1) % 1000;
    }
    return (r >> 1) % n;
}

/* Odd lookups go without the lock (assoc_peek); an answer it is sure
 * of must be as right as a locked one. */
static void
grow_lookup_one(struct grow *g, uint32_t j, bool peek)
{
    struct item *it = g->items[j];
    uint32_t hv = g->hvs[j];
    int gone = j % DEL_EVERY == 0 && atomic_load(&g->deleted[j]);
    struct item *found = NULL;
    bool sure = false;

    if (peek) {
        uint32_t seq = locks_seq_begin(hv);

        if (!(seq & 1)) {           /* odd: a holder is at work */
            quiesce_enter();
            found = assoc_peek(ikey(it), it->nkey, hv, seq, &sure);
            quiesce_exit();
            atomic_fetch_add(&g->peeks, sure);
        }
    }
    if (!sure) {
        locks_lock(hv);
        found = assoc_find(ikey(it), it->nkey, hv);
        locks_unlock(hv);
    }
    if (gone && found != NULL) {
        atomic_fetch_add(&g->ghosts, 1);
    } else if (j % DEL_EVERY != 0 && found != it) {
        atomic_fetch_add(&g->misses, 1);
    }
}

static void *
grow_reader(void *arg)
{
    struct grow *g = arg;
    unsigned seed = (unsigned)(uintptr_t)&seed;
    uint64_t n_done = 0, e;
    uint32_t n;

    atomic_fetch_add(&g->readers, 1);
    /* Keep reading until the inserter is done and no expansion is left
     * running, so the readers overlap the last move on a loaded machine
     * too (the overlap is what the test is for). */
    for (;;) {
        bool done = atomic_load(&g->done);

        stats(NULL, NULL, &e);
        if (e) {
            atomic_store(&g->saw_expanding, true);
        } else if (done && n_done > 0) {
            break;      /* at least one look, if the run went by unseen */
        }
        n = atomic_load(&g->inserted);
        if (n == 0) {
            sched_yield();
            continue;
        }
        grow_lookup_one(g, pick(n, &seed), n_done & 1);
        n_done++;
    }
    atomic_fetch_add(&g->lookups, n_done);
    return NULL;
}

/* The expander follows the live count between the inserter's requests. */
static _Atomic uint64_t *grow_live;

static uint64_t
live_count(void)
{
    return atomic_load(grow_live);
}

static void
grow_setup(struct grow *g, uint32_t n)
{
    uint32_t i;

    memset(g, 0, sizeof(*g));
    g->n = n;
    g->items = make_many(n, "grow:%u:key");
    g->hvs = calloc(n, sizeof(*g->hvs));
    g->deleted = calloc(n, sizeof(*g->deleted));
    if (g->hvs == NULL || g->deleted == NULL) {
        abort();
    }
    for (i = 0; i < n; i++) {
        g->hvs[i] = ihash(g->items[i]);
    }
}

/* Every surviving key found, every deleted one gone, walk sees each once. */
static void
grow_check(struct grow *g, const char *what)
{
    uint8_t *live = malloc(g->n);
    uint64_t total, expect = 0;
    uint32_t i;
    int good = 1;
    char name[96];

    for (i = 0; i < g->n; i++) {
        live[i] = !atomic_load(&g->deleted[i]);
        expect += live[i];
        good &= live[i] ? find_item(g->items[i]) :
                find_locked(ikey(g->items[i]), g->items[i]->nkey) == NULL;
    }
    snprintf(name, sizeof(name), "%s: every key findable, deletes gone", what);
    ok(good, name);
    snprintf(name, sizeof(name), "%s: none lost or duplicated", what);
    ok(census_matches(g->items, g->n, live, &total) && total == expect,
       name);
    free(live);
}

/* One run; true if the readers saw a move under way.  Only then (or on
 * the last try) does it say whether they did: on a busy machine the
 * moves of a small table can all fall between two of a reader's looks,
 * and the run is tried again (every run's other checks count). */
static bool
grow_once(uint32_t n, unsigned bulk, uint64_t want_power, const char *what,
          bool last)
{
    struct grow g;
    pthread_t ins, rd[2];
    uint64_t p;
    char name[96];
    bool overlapped;
    int i;

    grow_setup(&g, n);
    assoc_init(12, bulk);
    grow_live = &g.live;
    assoc_thread_start(live_count);
    pthread_create(&ins, NULL, grow_inserter, &g);
    for (i = 0; i < 2; i++) {
        pthread_create(&rd[i], NULL, grow_reader, &g);
    }
    pthread_join(ins, NULL);
    atomic_store(&g.done, true);
    for (i = 0; i < 2; i++) {
        pthread_join(rd[i], NULL);
    }
    snprintf(name, sizeof(name), "%s: table settles", what);
    ok(wait_settled(atomic_load(&g.live), 120), name);
    snprintf(name, sizeof(name), "%s: no lookup missed (of %llu)", what,
             (unsigned long long)atomic_load(&g.lookups));
    ok(atomic_load(&g.misses) == 0 && atomic_load(&g.lookups) > 0, name);
    snprintf(name, sizeof(name), "%s: no deleted key found", what);
    is_int(atomic_load(&g.ghosts), 0, name);
    snprintf(name, sizeof(name), "%s: lock-free lookups answered (%llu)",
             what, (unsigned long long)atomic_load(&g.peeks));
    ok(atomic_load(&g.peeks) > 0, name);
    overlapped = atomic_load(&g.saw_expanding);
    if (overlapped || last) {
        snprintf(name, sizeof(name), "%s: lookups overlapped a move", what);
        ok(overlapped, name);
    }
    stats(&p, NULL, NULL);
    snprintf(name, sizeof(name), "%s: hash_power_level 12 -> %llu", what,
             (unsigned long long)want_power);
    is_int(p, want_power, name);
    grow_check(&g, what);
    assoc_destroy();
    free_many(g.items, n);
    free(g.hvs);
    free(g.deleted);
    return overlapped;
}

/* Up to 40 runs, until one overlaps a move: under two busy loops five
 * tries were seen to all fall between a reader's looks. */
#define GROW_TRIES 40

static void
grow_run(uint32_t n, unsigned bulk, uint64_t want_power, const char *what)
{
    for (int i = 0; i < GROW_TRIES; i++) {
        if (grow_once(n, bulk, want_power, what, i == GROW_TRIES - 1)) {
            return;
        }
    }
}

int
main(void)
{
    if (chunkid_init(PAGE_SIZE, PERPAGE) != 0) {
        abort();
    }
    locks_init(10);
    /* 1/7 deleted: 400k leave ~343k live (229k buckets, level 17), 100k
     * ~86k (57k buckets, level 15). */
    /* 6/7 of them live: 342,857 and 85,714 items, past 2^17 and 2^15
     * buckets, as memcached's 2^18 and 2^16 */
    grow_run(GROW_ITEMS, 1, 18, "400k, bulk 1");
    grow_run(GROW_ITEMS / 4, 64, 16, "100k, bulk 64");
    locks_destroy();
    chunkid_destroy();
    return done_testing();
}
