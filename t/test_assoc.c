/*
 * test_assoc.c: the hash table: init limits, insert/find/delete, forced
 * collision chains of many lengths, the walk, the prefetch hint, the
 * batched prefetch walk (storage/index/prefetch.h) against plain lookups over
 * chains of every length up to past its depth limit, growth paused in the
 * middle of a level (find, insert, delete, walk and prefetch over split
 * and unsplit buckets, then resume), and growth by the inserts alone.
 * Growth under concurrent lookups is test_assoc_grow.c's.
 *
 * Items are test-local (assoc_test.h).
 */
#include "storage/index/assoc.h"

#include "storage/base/hash.h"
#include "storage/base/locks.h"
#include "storage/base/quiesce.h"
#include "storage/index/prefetch.h"
#include "storage/slab/chunkid.h"
#include "storage/slab/item.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "t/assoc_test.h"
#include "t/tap.h"


/* ---- batched prefetch ------------------------------------------------- */

static const struct item *
head_of(uint32_t hv)
{
    bool empty;

    return assoc_hint_head(assoc_bucket_hint(hv), &empty);
}

/* Position of `it` in its chain (0: the bucket's first), or -1. */
static int
chain_pos(const struct item *it)
{
    uint32_t hv = ihash(it);
    const struct item *p;
    int pos = 0;

    locks_lock(hv);
    p = head_of(hv);
    while (p != NULL && p != it) {
        p = p->h_next;
        pos++;
    }
    locks_unlock(hv);
    return p == it ? pos : -1;
}

/*
 * Walk items v[0..n) and as many keys that are not there, in batches of
 * `batch`, and compare each key's `found` with a locked lookup: the same
 * item, or NULL for an absent key and for an item deeper in its chain
 * than the walk looks.  1 if every key agrees.
 */
static int
prefetch_agrees(struct item **v, uint32_t n, unsigned batch)
{
    struct prefetch_key *k = calloc(2 * (size_t)n, sizeof(*k));
    char (*absent)[32] = calloc(n, sizeof(*absent));
    uint32_t i, total = 2 * n;
    int good = 1;

    if (k == NULL || absent == NULL) {
        abort();
    }
    for (i = 0; i < n; i++) {
        k[2 * i].key = ikey(v[i]);
        k[2 * i].nkey = v[i]->nkey;
        snprintf(absent[i], sizeof(absent[i]), "absent:%u", i);
        k[2 * i + 1].key = absent[i];
        k[2 * i + 1].nkey = strlen(absent[i]);
    }
    for (i = 0; i < total; i++) {
        k[i].hv = hash_key(k[i].key, k[i].nkey);
    }
    for (i = 0; i < total; i += batch) {
        prefetch_walk(k + i, total - i < batch ? total - i : batch, true);
    }
    for (i = 0; i < total && good; i++) {
        const struct item *want = find_locked(k[i].key, k[i].nkey);

        if (want != NULL && chain_pos(want) >= PREFETCH_CHAIN_MAX) {
            want = NULL;
        }
        if (k[i].sure && k[i].found != find_locked(k[i].key, k[i].nkey)) {
            printf("# key %.*s: the walk is sure of a wrong answer\n",
                   (int)k[i].nkey, k[i].key);
            good = 0;
        }
        if (want != NULL && !k[i].sure) {
            printf("# key %.*s: found, but the walk is not sure\n",
                   (int)k[i].nkey, k[i].key);
            good = 0;
        }
        if (k[i].found != want) {
            printf("# key %.*s: walk found %p, lookup %p\n",
                   (int)k[i].nkey, k[i].key, (const void *)k[i].found,
                   (const void *)want);
            good = 0;
        }
    }
    free(k);
    free(absent);
    return good;
}

/* Keys whose hash lands in bucket b of a 2^5 table, len of them. */
static struct item **
colliding(uint32_t b, uint32_t len, bool cas)
{
    struct item **v = calloc(len, sizeof(*v));
    char key[64];
    uint32_t got = 0;

    for (uint32_t j = 0; got < len; j++) {
        snprintf(key, sizeof(key), "bucket%u:%u", b, j);
        if ((hash_key(key, strlen(key)) & 31) == b) {
            v[got] = make_item(key, got, cas && got % 2);
            got++;
        }
    }
    return v;
}

static void
test_prefetch_chains(void)
{
    static const unsigned batches[] = { 1, 2, 3, 16, 128, 300 };
    struct item **all = calloc(31 * 16, sizeof(*all));
    uint32_t n = 0, len;
    int good = 1, deep = 0;

    assoc_init(5, 1);
    /* Bucket b holds a chain of b items: 1 .. 20, past the walk's limit
     * of PREFETCH_CHAIN_MAX; buckets 21 .. 31 hold one item each. */
    for (uint32_t b = 1; b < 32; b++) {
        struct item **v;

        len = b <= 20 ? b : 1;
        v = colliding(b, len, true);
        for (uint32_t i = 0; i < len; i++) {
            insert_locked(v[i]);
            all[n++] = v[i];
        }
        free(v);
    }
    for (uint32_t i = 0; i < n; i++) {
        deep += chain_pos(all[i]) >= PREFETCH_CHAIN_MAX;
    }
    ok(deep > 0, "some items sit deeper than the walk looks");
    for (size_t i = 0; i < sizeof(batches) / sizeof(batches[0]); i++) {
        good &= prefetch_agrees(all, n, batches[i]);
    }
    ok(good, "prefetch finds what lookups find, chains of 1..20, "
       "batches of 1..300");
    {
        struct prefetch_key k = { ikey(all[0]), all[0]->nkey, ihash(all[0]),
                                  all[1], false, 0 };

        prefetch_walk(&k, 0, true);
        ok(k.found == all[1], "an empty batch touches no key");
        prefetch_walk(&k, 1, true);
        ok(k.found == all[0], "a batch of one finds its item");
    }
    assoc_destroy();
    for (uint32_t i = 0; i < n; i++) {
        item_drop(all[i]);
    }
    free(all);
}

/* ---- tests ------------------------------------------------------------ */

static void
test_init(void)
{
    uint64_t p, b, e;

    ok(assoc_init(16, 1) != 0, "init refused without item locks");
    is_int(locks_init(4), 0, "lock power 4");
    ok(assoc_init(4, 1) != 0, "hash power == lock power refused");
    ok(assoc_init(3, 1) != 0, "hash power < lock power refused");
    ok(assoc_init(33, 1) != 0, "hash power 33 refused");
    is_int(assoc_init(6, 1), 0, "hash power 6");
    ok(assoc_init(6, 1) != 0, "second init refused");
    assoc_stats(&p, &b, &e);
    is_int(p, 6, "hash_power_level 6");
    is_int(b, 64 * sizeof(uint32_t), "hash_bytes 64 buckets of 4 bytes");
    is_int(e, 0, "not expanding");
    assoc_destroy();
    is_int(assoc_init(0, 0), 0, "power 0 means the default");
    assoc_stats(&p, &b, &e);
    is_int(p, 16, "default hash_power_level 16");
    is_int(b, 262144, "default hash_bytes 262144, half of memcached's");
    assoc_destroy();
}

static void
test_basic(void)
{
    struct item *a = make_item("abcdef", 0, false);
    struct item *b = make_item("beta", 1, true);
    uint32_t hv = ihash(a);

    assoc_init(5, 1);
    ok(find_locked("abcdef", 6) == NULL, "empty table finds nothing");
    insert_locked(a);
    insert_locked(b);
    ok(find_item(a), "find a plain item");
    ok(find_item(b), "find an item with a CAS before its key");
    locks_lock(hv);
    ok(assoc_find("abcde", 5, hv) == NULL, "a prefix does not match");
    ok(assoc_find("abcdeX", 6, hv) == NULL, "last byte must match");
    ok(assoc_find("abcdefg", 7, hv) == NULL, "a longer key does not match");
    ok(head_of(hv) == a,
       "hint is the slot whose head is the item");
    assoc_delete("nosuch", 6, hv);
    locks_unlock(hv);
    ok(find_item(a), "deleting a missing key leaves others");
    delete_locked(a);
    ok(find_locked("abcdef", 6) == NULL, "deleted item is gone");
    ok(a->h_next == NULL, "delete clears h_next");
    ok(find_item(b), "other item stays");
    delete_locked(b);
    assoc_destroy();
    item_drop(a);
    item_drop(b);
}

/* Keys that all land in bucket `target` of a 2^5 table. */
static struct item **
colliding_items(uint32_t n, uint32_t target)
{
    struct item **v = calloc(n, sizeof(*v));
    char key[32];
    uint32_t i = 0, seq = 0;

    if (v == NULL) {
        abort();
    }
    while (i < n) {
        snprintf(key, sizeof(key), "chain:%u", seq++);
        if ((hash_key(key, strlen(key)) & 31) == target) {
            v[i] = make_item(key, i, i % 2);
            i++;
        }
    }
    return v;
}

/* Delete position `pos` of a chain of n, check the rest; 1 if all good. */
static int
chain_case(uint32_t n, uint32_t pos)
{
    struct item **v = colliding_items(n, 7);
    uint8_t *live = malloc(n);
    uint64_t total;
    uint32_t i;
    int good = 1;

    for (i = 0; i < n; i++) {
        insert_locked(v[i]);
        live[i] = 1;
    }
    delete_locked(v[pos]);
    live[pos] = 0;
    good &= find_locked(ikey(v[pos]), v[pos]->nkey) == NULL;
    for (i = 0; i < n; i++) {
        good &= i == pos || find_item(v[i]);
    }
    good &= census_matches(v, n, live, &total) && total == n - 1;
    for (i = 0; i < n; i++) {
        if (i != pos) {
            delete_locked(v[i]);
        }
        item_drop(v[i]);
    }
    good &= census_matches(v, 0, live, &total) && total == 0;
    free(v);
    free(live);
    return good;
}

static void
test_chains(void)
{
    static const uint32_t lens[] = { 1, 2, 3, 5, 8, 17, 64, 250 };
    char name[64];
    size_t i;

    assoc_init(5, 1);
    for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        uint32_t n = lens[i];

        snprintf(name, sizeof(name), "chain of %u: delete head", n);
        ok(chain_case(n, n - 1), name);     /* last inserted is the head */
        snprintf(name, sizeof(name), "chain of %u: delete tail", n);
        ok(chain_case(n, 0), name);
        snprintf(name, sizeof(name), "chain of %u: delete middle", n);
        ok(chain_case(n, n / 2), name);
    }
    assoc_destroy();
}

static void
test_walk_stop(void)
{
    struct item *v[100];
    struct census c = { 0, NULL, 0, 0, 10 };
    char key[16];
    int i;

    assoc_init(5, 1);
    for (i = 0; i < 100; i++) {
        snprintf(key, sizeof(key), "w%d", i);
        v[i] = make_item(key, (uint32_t)i, false);
        insert_locked(v[i]);
    }
    assoc_walk(census_fn, &c);
    is_int(c.total, 10, "walk stops when fn returns non-zero");
    is_int(c.unlocked, 0, "walk holds each item's lock");
    assoc_destroy();
    for (i = 0; i < 100; i++) {
        item_drop(v[i]);
    }
}

static void
test_expand_small(void)
{
    struct item *v[100];
    uint8_t live[100];
    uint64_t p, total;
    char key[16];
    int i, good = 1;

    assoc_init(5, 1);
    for (i = 0; i < 100; i++) {
        snprintf(key, sizeof(key), "e%d", i);
        v[i] = make_item(key, (uint32_t)i, i % 3 == 0);
        insert_locked(v[i]);
        live[i] = 1;
    }
    assoc_maybe_expand(100);        /* no thread yet: remembered */
    ok(assoc_thread_start(NULL) == 0, "expander starts");
    ok(wait_settled(100, 10), "expansion settles");
    stats(&p, NULL, NULL);
    /* 66 buckets: past 2^6, as memcached's 2^7 for 100 items */
    is_int(p, 7, "100 items grow 2^5 into level 7");
    is_int(buckets(), 66, "... to 66 buckets (1.5 items each)");
    assoc_maybe_expand(99);         /* exactly 1.5 x 66: no growth */
    usleep(100 * 1000);
    is_int(buckets(), 66, "1.5 items per bucket does not trigger");
    assoc_maybe_expand(102);
    ok(wait_settled(102, 10), "three more items settle");
    is_int(buckets(), 68, "... in 68 buckets");
    for (i = 0; i < 100; i++) {
        good &= find_item(v[i]);
    }
    ok(good, "all items found after growth");
    ok(census_matches(v, 100, live, &total) && total == 100,
       "walk sees each item once");
    assoc_destroy();
    for (i = 0; i < 100; i++) {
        item_drop(v[i]);
    }
}


/*
 * Catch the expander in the middle of a level: hold stripe 15, which
 * every 16th bucket needs, and ask for growth; the expander (nothing
 * inserts, so it splits itself) stalls at bucket 15, and stop makes it
 * give up.  Everything must then work over split and unsplit buckets.
 * 1 when it stalled there.
 */
static int
pause_expansion(void)
{
    int i, stalled;

    locks_lock(15);
    for (i = 0; i < 20000 && buckets() < (1u << 16) + 15; i++) {
        assoc_maybe_expand(PAUSE_ITEMS);
        usleep(1000);
    }
    stalled = buckets() == (1u << 16) + 15;
    assoc_thread_stop();
    locks_unlock(15);
    return stalled;
}

/* Insert, delete and find with the move half done; 1 if all good. */
static int
churn_while_paused(struct item **v, uint8_t *live, struct item **extra,
                   uint32_t nextra)
{
    uint32_t i, hv;
    int good = 1;

    for (i = 0; i < PAUSE_ITEMS; i += 97) {
        delete_locked(v[i]);
        live[i] = 0;
    }
    for (i = 0; i < nextra; i++) {
        insert_locked(extra[i]);
        hv = ihash(extra[i]);
        locks_lock(hv);
        good &= head_of(hv) == extra[i];
        locks_unlock(hv);
    }
    for (i = 0; i < PAUSE_ITEMS; i++) {
        good &= live[i] ? find_item(v[i]) :
                find_locked(ikey(v[i]), v[i]->nkey) == NULL;
    }
    for (i = 0; i < nextra; i++) {
        good &= find_item(extra[i]);
    }
    return good;
}

static void
test_paused_expansion(void)
{
    struct item **v = make_many(PAUSE_ITEMS, "paused:%u");
    struct item **extra = make_many(1000, "extra:%u");
    uint8_t *live = malloc(PAUSE_ITEMS);
    uint64_t p, b, e, total;
    uint32_t i;

    assoc_destroy();
    assoc_init(16, 1);
    for (i = 0; i < PAUSE_ITEMS; i++) {
        insert_locked(v[i]);
        live[i] = 1;
    }
    assoc_thread_start(NULL);
    ok(pause_expansion(), "growth stalled at the held bucket, mid-level");
    stats(&p, &b, &e);
    is_int(p, 17, "level 17 while 2^16 is split: reached");
    is_int(e, 1, "hash_is_expanding 1: the table is short of buckets");
    ok(buckets() > (1u << 16) && buckets() < PAUSE_ITEMS * 2 / 3,
       "some buckets of level 16 split, not all wanted");
    ok(census_matches(v, PAUSE_ITEMS, live, &total) &&
       total == PAUSE_ITEMS, "walk over split and unsplit buckets sees "
       "each once");
    ok(churn_while_paused(v, live, extra, 1000),
       "find/insert/delete/hint right with the level half split");
    ok(prefetch_agrees(v, PAUSE_ITEMS, 16) &&
       prefetch_agrees(extra, 1000, 16),
       "prefetch finds what lookups find, split and unsplit");
    ok(assoc_thread_start(NULL) == 0, "expander restarts");
    ok(wait_settled(PAUSE_ITEMS, 60), "resumed growth finishes");
    stats(&p, &b, &e);
    is_int(p, 17, "level 17 after it");
    is_int(b, PAUSE_ITEMS * 2 / 3 * sizeof(uint32_t),
           "hash_bytes: 4 bytes a bucket, 1.5 items a bucket");
    ok(churn_while_paused(v, live, extra, 0), "all still right after");
    assoc_destroy();
    free_many(v, PAUSE_ITEMS);
    free_many(extra, 1000);
    free(live);
}

/* ---- growth by the inserts ------------------------------------------- */

/*
 * No expander: each insert, made known as the expander would make the
 * count known, is followed by assoc_grow_step() under the inserter's own
 * lock, as link_in() does.  The table stays within a few buckets of its
 * load all along; a step whose next bucket shares the inserter's stripe
 * gives up and the next insert makes up for it.
 */
static void
test_grow_by_inserts(void)
{
    struct item **v = make_many(PAUSE_ITEMS, "step:%u");
    uint64_t worst = 0, p, b, e;
    uint32_t i, hv;
    int gave_up = 0, found = 1;
    char name[80];

    assoc_destroy();
    assoc_init(16, 1);
    for (i = 0; i < PAUSE_ITEMS; i++) {
        uint64_t want = (uint64_t)(i + 1) * 2 / ASSOC_LOAD_X2, before;

        hv = ihash(v[i]);
        locks_lock(hv);
        assoc_insert(v[i], hv);
        assoc_maybe_expand(i + 1);
        before = buckets();
        assoc_grow_step();
        if (before < want && buckets() == before) {
            gave_up++;
        }
        locks_unlock(hv);
        if (want > buckets() && want - buckets() > worst) {
            worst = want - buckets();
        }
    }
    assoc_maybe_expand(PAUSE_ITEMS);    /* a count counts once read twice */
    assoc_grow_step();          /* holding no lock: nothing is busy */
    assoc_grow_step();
    stats(&p, &b, &e);
    snprintf(name, sizeof(name), "the table never more than 4 buckets "
             "short (%llu)", (unsigned long long)worst);
    ok(worst <= 4, name);
    snprintf(name, sizeof(name), "steps meeting the inserter's own stripe "
             "gave up (%d)", gave_up);
    ok(gave_up > 0, name);
    is_int(b, PAUSE_ITEMS * 2 / ASSOC_LOAD_X2 * sizeof(uint32_t),
           "the table ends at its load");
    is_int(p, 17, "level 17");
    is_int(e, 0, "hash_is_expanding 0: not short");
    /* a count high for one read (an item counted twice as it moves) */
    assoc_maybe_expand(PAUSE_ITEMS + 300);
    assoc_maybe_expand(PAUSE_ITEMS);
    assoc_grow_step();
    stats(&p, &b, &e);
    is_int(b, PAUSE_ITEMS * 2 / ASSOC_LOAD_X2 * sizeof(uint32_t),
           "a count high for one read only is not split for");
    for (i = 0; i < PAUSE_ITEMS; i++) {
        found &= find_item(v[i]);
    }
    ok(found, "every item found after the inserts' splits");
    assoc_destroy();
    assoc_init(16, 1);
    free_many(v, PAUSE_ITEMS);
}

int
main(void)
{
    if (chunkid_init(PAGE_SIZE, PERPAGE) != 0) {
        abort();
    }
    test_init();
    test_basic();
    test_chains();
    test_prefetch_chains();
    test_walk_stop();
    test_expand_small();
    test_paused_expansion();
    test_grow_by_inserts();
    locks_destroy();
    chunkid_destroy();
    return done_testing();
}
