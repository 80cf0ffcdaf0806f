/*
 * assoc_test.h: what the hash table's tests share (test_assoc.c,
 * test_assoc_grow.c): items of their own, in the storage/ layout, in
 * chunks of pages named as slabs names them (chunkid.h), since buckets
 * hold chunk ids; the item's `time` field carries its index so that
 * walks can count visits; and the locked calls and figures both use.
 */
#ifndef MCPM_T_ASSOC_TEST_H
#define MCPM_T_ASSOC_TEST_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "storage/base/hash.h"
#include "storage/base/locks.h"
#include "storage/index/assoc.h"
#include "storage/slab/chunkid.h"
#include "storage/slab/item.h"

#define GROW_ITEMS   400000
#define DEL_EVERY    7            /* keys i % 7 == 0 get deleted */
#define DEL_LAG      5000         /* ... this many inserts later */
#define PAUSE_ITEMS  150000

/* ---- test-local items ------------------------------------------------ */

#define PAGE_SIZE   ((size_t)1 << 20)
#define CHUNK       128u
#define PERPAGE     ((uint32_t)(PAGE_SIZE / CHUNK))

static char *page;              /* the page chunks come from */
static uint32_t page_used = PERPAGE;

/* A zeroed chunk of a named page; items are never given back. */
static inline struct item *
chunk_alloc(void)
{
    if (page_used == PERPAGE) {
        page = aligned_alloc(PAGE_SIZE, PAGE_SIZE);
        if (page == NULL ||
            chunkid_page_set(page, page, CHUNK, PERPAGE) != 0) {
            abort();
        }
        memset(page, 0, PAGE_SIZE);
        page_used = 0;
    }
    return (struct item *)(page + (size_t)CHUNK * page_used++);
}

static inline void
item_drop(struct item *it)
{
    (void)it;
}

static inline struct item *
make_item(const char *key, uint32_t id, bool cas)
{
    size_t nkey = strlen(key);
    size_t off = cas ? 8 : 0;
    struct item *it = chunk_alloc();

    if (sizeof(*it) + off + nkey + 1 > CHUNK) {
        abort();
    }
    if (cas) {
        memset(it->data, 0x5a, 8);  /* key lookups must skip the CAS */
    }
    memcpy(it->data + off, key, nkey + 1);
    it->nkey = (uint8_t)nkey;
    it->flags = ITEM_LINKED | (cas ? ITEM_CAS : 0);
    it->time = id;
    return it;
}

static inline const char *
ikey(const struct item *it)
{
    return it->data + ((it->flags & ITEM_CAS) ? 8 : 0);
}

static uint32_t
ihash(const struct item *it)
{
    return hash_key(ikey(it), it->nkey);
}

static inline struct item *
find_locked(const char *key, size_t nkey)
{
    uint32_t hv = hash_key(key, nkey);
    struct item *it;

    locks_lock(hv);
    it = assoc_find(key, nkey, hv);
    locks_unlock(hv);
    return it;
}

static inline void
insert_locked(struct item *it)
{
    uint32_t hv = ihash(it);

    locks_lock(hv);
    assoc_insert(it, hv);
    locks_unlock(hv);
}

static inline void
delete_locked(const struct item *it)
{
    uint32_t hv = ihash(it);

    locks_lock(hv);
    assoc_delete(ikey(it), it->nkey, hv);
    locks_unlock(hv);
}

static inline int
find_item(const struct item *it)
{
    return find_locked(ikey(it), it->nkey) == it;
}

/* ---- walk helpers ----------------------------------------------------- */

struct census {
    uint32_t nids;
    uint8_t *seen;              /* visits per id, saturating */
    uint64_t total;
    uint64_t unlocked;          /* visited without its item lock held */
    uint64_t limit;             /* stop after this many, 0: never */
};

static inline int
census_fn(struct item *it, void *ctx)
{
    struct census *c = ctx;
    uint32_t hv = ihash(it);

    /* The walker holds this stripe, so a trylock must fail. */
    if (locks_trylock(hv)) {
        c->unlocked++;
        locks_unlock(hv);
    }
    if (it->time < c->nids && c->seen[it->time] < 255) {
        c->seen[it->time]++;
    }
    c->total++;
    return c->limit != 0 && c->total >= c->limit;
}

/* Walk and compare visits with the expected live set; 1 if all match. */
static inline int
census_matches(struct item **items, uint32_t n, const uint8_t *live,
               uint64_t *total)
{
    struct census c = { n, calloc(n, 1), 0, 0, 0 };
    uint32_t i;
    int good;

    if (c.seen == NULL) {
        abort();
    }
    assoc_walk(census_fn, &c);
    good = c.unlocked == 0;
    for (i = 0; i < n && good; i++) {
        if (c.seen[i] != (live[i] ? 1 : 0) || items[i]->time != i) {
            printf("# item %u seen %u times, live %u\n", i, c.seen[i],
                   live[i]);
            good = 0;
        }
    }
    *total = c.total;
    free(c.seen);
    return good;
}

static inline void
stats(uint64_t *power, uint64_t *bytes, uint64_t *exp)
{
    uint64_t p, b, e;

    assoc_stats(&p, &b, &e);
    if (power != NULL) {
        *power = p;
    }
    if (bytes != NULL) {
        *bytes = b;
    }
    if (exp != NULL) {
        *exp = e;
    }
}

/* Buckets in use: hash_bytes at 4 bytes a bucket. */
static uint64_t
buckets(void)
{
    uint64_t b;

    stats(NULL, &b, NULL);
    return b / sizeof(uint32_t);
}

/* Keep asking until the table fits `items` and is not moving. */
static inline int
wait_settled(uint64_t items, int seconds)
{
    uint64_t e;
    int i;

    for (i = 0; i < seconds * 1000; i++) {
        assoc_maybe_expand(items);
        stats(NULL, NULL, &e);
        if (!e && buckets() >= items * 2 / ASSOC_LOAD_X2) {
            return 1;
        }
        usleep(1000);
    }
    return 0;
}

static inline struct item **
make_many(uint32_t n, const char *fmt)
{
    struct item **v = calloc(n, sizeof(*v));
    char key[64];
    uint32_t i;

    if (v == NULL) {
        abort();
    }
    for (i = 0; i < n; i++) {
        snprintf(key, sizeof(key), fmt, i);
        v[i] = make_item(key, i, i % 2);
    }
    return v;
}

static inline void
free_many(struct item **v, uint32_t n)
{
    uint32_t i;

    for (i = 0; i < n; i++) {
        item_drop(v[i]);
    }
    free(v);
}

#endif
