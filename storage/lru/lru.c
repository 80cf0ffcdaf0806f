/*
 * lru.c: the lists of every tier class, their cursors and counters
 * (lru.h).
 *
 * Locking: a list's head, tail and links are changed under its mutex.
 * Its size and bytes change under it too but are read without it (stats,
 * the maintainer's shares), hence the relaxed atomic stores.  The
 * counters are bumped with relaxed atomic adds by any thread.
 */
#include "storage/lru/lru.h"
#include "storage/base/locks.h"
#include "storage/base/tslot.h"
#include "storage/slab/slabs_stats.h"

#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define UPDATE_INTERVAL 60      /* flat mode: seconds between moves */

struct lru_list {
    pthread_mutex_t lock;
    struct item    *head;
    struct item    *tail;
    uint64_t        size;
    uint64_t        bytes;
};

/* What a class holds, counted as items join and leave its lists and not
 * as they move between them: a move takes an item off one list before it
 * goes on the next, and a sum of the lists' sizes would miss it.  Kept
 * per thread slot (tslot.h): every store and every removal counts, and
 * one counter per class shared by all workers was a cache line they all
 * wrote.  A slot may go below zero (an item counted in by one thread, out
 * by another); the sum over the slots, modulo 2^64, is the count. */
struct lru_class {
    uint64_t items;
    uint64_t bytes;
};

static struct {
    const struct cache_options *opts;
    struct lru_list             lists[SLABS_TC_MAX][LRU_NLISTS];
    struct lru_class            classes[TSLOT_MAX][SLABS_TC_MAX]
                                __attribute__((aligned(64)));
} lru;

struct cache_class_counters lru_class_counters[SLABS_TC_MAX];

static struct lru_list *
list_at(unsigned tc, enum item_lru which)
{
    return &lru.lists[tc][which];
}

static struct lru_list *
list_of(const struct item *it)
{
    return list_at(lru_tc(it), item_lru(it));
}

int
lru_init(const struct cache_options *opts)
{
    memset(&lru, 0, sizeof(lru));
    memset(lru_class_counters, 0, sizeof(lru_class_counters));
    lru.opts = opts;
    for (unsigned i = 0; i < SLABS_TC_MAX; i++) {
        for (unsigned l = 0; l < LRU_NLISTS; l++) {
            locks_mutex_init(&lru.lists[i][l].lock);
        }
    }
    return 0;
}

void
lru_destroy(void)
{
    for (unsigned i = 0; i < SLABS_TC_MAX; i++) {
        for (unsigned l = 0; l < LRU_NLISTS; l++) {
            pthread_mutex_destroy(&lru.lists[i][l].lock);
        }
    }
}

struct image_list {
    uint64_t head, tail, size, bytes;
};

struct image_class {
    struct image_list lists[LRU_NLISTS];
    uint64_t          items, bytes;
};

size_t
lru_image(void *dst, unsigned largest)
{
    struct image_class *out = dst;

    for (unsigned id = 0; out != NULL && id <= largest; id++) {
        unsigned tc = SLABS_TC(TIER_PMEM, id);

        for (unsigned l = 0; l < LRU_NLISTS; l++) {
            const struct lru_list *ls = list_at(tc, (enum item_lru)l);

            out[id].lists[l] = (struct image_list){
                (uint64_t)(uintptr_t)ls->head, (uint64_t)(uintptr_t)ls->tail,
                ls->size, ls->bytes };
        }
        out[id].items = lru_class_items(tc);
        out[id].bytes = lru_class_bytes(tc, true);
    }
    return (size_t)(largest + 1) * sizeof(struct image_class);
}

/* A list end of an image: none, or in the file. */
static bool
end_ok(uint64_t end, bool (*in_file)(const void *p))
{
    return end == 0 || in_file((const void *)(uintptr_t)end);
}

int
lru_image_check(const void *src, size_t len, unsigned largest,
                bool (*in_file)(const void *p))
{
    if (len != lru_image(NULL, largest)) {
        return -1;
    }
    for (unsigned id = 0; id <= largest; id++) {
        struct image_class ic;

        memcpy(&ic, (const char *)src + id * sizeof(ic), sizeof(ic));
        for (unsigned l = 0; l < LRU_NLISTS; l++) {
            if (!end_ok(ic.lists[l].head, in_file) ||
                !end_ok(ic.lists[l].tail, in_file)) {
                return -1;
            }
        }
    }
    return 0;
}

int
lru_image_load(const void *src, size_t len, unsigned largest)
{
    if (len != lru_image(NULL, largest)) {
        return -1;
    }
    for (unsigned id = 0; id <= largest; id++) {
        unsigned tc = SLABS_TC(TIER_PMEM, id);
        struct image_class ic;

        memcpy(&ic, (const char *)src + id * sizeof(ic), sizeof(ic));
        for (unsigned l = 0; l < LRU_NLISTS; l++) {
            struct lru_list *ls = list_at(tc, (enum item_lru)l);

            ls->head = (struct item *)(uintptr_t)ic.lists[l].head;
            ls->tail = (struct item *)(uintptr_t)ic.lists[l].tail;
            ls->size = ic.lists[l].size;
            ls->bytes = ic.lists[l].bytes;
        }
        lru.classes[0][tc].items = ic.items;
        lru.classes[0][tc].bytes = ic.bytes;
    }
    return 0;
}

void
lru_lock(unsigned tc, enum item_lru which)
{
    pthread_mutex_lock(&list_at(tc, which)->lock);
}

void
lru_unlock(unsigned tc, enum item_lru which)
{
    pthread_mutex_unlock(&list_at(tc, which)->lock);
}

/* ---- list primitives: the list's lock held ---------------------------- */

static void
count_list(struct lru_list *l, int dir, size_t bytes)
{
    __atomic_store_n(&l->size, dir > 0 ? l->size + 1 : l->size - 1,
                     __ATOMIC_RELAXED);
    __atomic_store_n(&l->bytes, dir > 0 ? l->bytes + bytes
                                        : l->bytes - bytes,
                     __ATOMIC_RELAXED);
}

/* The chain first..last (linked by next and prev) onto the head of the
 * list whose ends are *head and *tail. */
static void
chain_push(struct item **head, struct item **tail, struct item *first,
           struct item *last)
{
    first->prev = NULL;
    last->next = *head;
    if (*head != NULL) {
        (*head)->prev = last;
    } else {
        *tail = last;
    }
    *head = first;
}

/* it out of the list whose ends are *head and *tail. */
static void
chain_cut(struct item **head, struct item **tail, struct item *it)
{
    if (it->prev != NULL) {
        it->prev->next = it->next;
    } else {
        *head = it->next;
    }
    if (it->next != NULL) {
        it->next->prev = it->prev;
    } else {
        *tail = it->prev;
    }
    it->next = it->prev = NULL;
}

static void
push_head(struct lru_list *l, struct item *it)
{
    chain_push(&l->head, &l->tail, it, it);
    if (!lru_is_cursor(it)) {
        count_list(l, 1, item_ntotal(it));
    }
}

static void
take_out(struct lru_list *l, struct item *it)
{
    chain_cut(&l->head, &l->tail, it);
    if (!lru_is_cursor(it)) {
        count_list(l, -1, item_ntotal(it));
    }
}

/* An item joins (dir 1) or leaves (-1) its class. */
static void
count_class(const struct item *it, int dir)
{
    struct lru_class *c = &lru.classes[tslot_mine()][lru_tc(it)];
    uint64_t bytes = item_ntotal(it);

    if (lru_is_cursor(it)) {
        return;
    }
    if (dir > 0) {
        __atomic_add_fetch(&c->items, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&c->bytes, bytes, __ATOMIC_RELAXED);
    } else {
        __atomic_sub_fetch(&c->items, 1, __ATOMIC_RELAXED);
        __atomic_sub_fetch(&c->bytes, bytes, __ATOMIC_RELAXED);
    }
}

void
do_lru_push(struct item *it)
{
    count_class(it, 1);
    push_head(list_of(it), it);
}

void
lru_splice_tail(struct item *first, struct item *last, uint64_t n,
                uint64_t bytes)
{
    struct lru_list *l = list_of(first);
    struct lru_class *c = &lru.classes[tslot_mine()][lru_tc(first)];

    __atomic_add_fetch(&c->items, n, __ATOMIC_RELAXED);
    __atomic_add_fetch(&c->bytes, bytes, __ATOMIC_RELAXED);
    pthread_mutex_lock(&l->lock);
    first->prev = l->tail;
    last->next = NULL;
    if (l->tail != NULL) {
        l->tail->next = first;
    } else {
        l->head = first;
    }
    l->tail = last;
    __atomic_store_n(&l->size, l->size + n, __ATOMIC_RELAXED);
    __atomic_store_n(&l->bytes, l->bytes + bytes, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&l->lock);
}

void
do_lru_remove(struct item *it)
{
    take_out(list_of(it), it);
    count_class(it, -1);
}

void
lru_push(struct item *it)
{
    struct lru_list *l = list_of(it);

    count_class(it, 1);
    pthread_mutex_lock(&l->lock);
    push_head(l, it);
    pthread_mutex_unlock(&l->lock);
}

void
lru_remove(struct item *it)
{
    struct lru_list *l = list_of(it);

    pthread_mutex_lock(&l->lock);
    take_out(l, it);
    pthread_mutex_unlock(&l->lock);
    count_class(it, -1);
}

void
lru_unlinked(struct item *it)
{
    struct lru_list *l = list_of(it);

    pthread_mutex_lock(&l->lock);
    item_flags_clear(it, ITEM_LINKED);
    take_out(l, it);
    pthread_mutex_unlock(&l->lock);
    count_class(it, -1);
}

void
lru_move(struct item *it, enum item_lru to)
{
    struct lru_list *l = list_of(it);

    pthread_mutex_lock(&l->lock);
    take_out(l, it);
    pthread_mutex_unlock(&l->lock);
    lru_set(it, to);
    l = list_of(it);
    pthread_mutex_lock(&l->lock);
    push_head(l, it);
    pthread_mutex_unlock(&l->lock);
}

void
do_lru_move(struct item *it, enum item_lru to)
{
    struct lru_list *from = list_of(it), *dst;

    take_out(from, it);
    lru_set(it, to);
    dst = list_of(it);
    if (dst != from) {
        pthread_mutex_lock(&dst->lock);
    }
    push_head(dst, it);
    if (dst != from) {
        pthread_mutex_unlock(&dst->lock);
    }
}

bool
do_lru_try_move(struct item *it, enum item_lru to)
{
    struct lru_list *dst = list_at(lru_tc(it), to);

    if (pthread_mutex_trylock(&dst->lock) != 0) {
        return false;
    }
    take_out(list_of(it), it);
    lru_set(it, to);
    push_head(dst, it);
    pthread_mutex_unlock(&dst->lock);
    return true;
}

struct item *
do_lru_head(unsigned tc, enum item_lru which)
{
    return list_at(tc, which)->head;
}

struct item *
do_lru_tail(unsigned tc, enum item_lru which)
{
    return list_at(tc, which)->tail;
}

/* ---- hits ------------------------------------------------------------- */

static void
hit_flat(struct item *it)
{
    rel_time_t now = clock_now();

    if (!(item_flags(it) & ITEM_FETCHED)) {
        item_flags_set(it, ITEM_FETCHED);
    }
    if (item_time(it) + UPDATE_INTERVAL < now &&
        (item_flags(it) & ITEM_LINKED)) {
        item_time_store(it, now);
        lru_move(it, item_lru(it));
    }
}

bool
lru_hit_lockfree(uint16_t flags, rel_time_t time, rel_time_t now,
                 uint16_t *mark)
{
    *mark = 0;
    if (!lru.opts->lru_segmented) {
        if (time + UPDATE_INTERVAL < now && (flags & ITEM_LINKED)) {
            return false;
        }
        if (!(flags & ITEM_FETCHED)) {
            *mark = ITEM_FETCHED;
        }
        return true;
    }
    if (!(flags & ITEM_ACTIVE)) {
        *mark = (flags & ITEM_FETCHED) ? ITEM_ACTIVE : ITEM_FETCHED;
    }
    return true;
}

void
lru_hit_mark(struct item *it, uint16_t seen, uint16_t mark)
{
    if (__atomic_compare_exchange_n(&it->flags, &seen,
                                    (uint16_t)(seen | mark), false,
                                    __ATOMIC_RELAXED, __ATOMIC_RELAXED) &&
        mark == ITEM_ACTIVE) {
        item_time_store(it, clock_now());
    }
}

void
lru_hit(struct item *it)
{
    if (!lru.opts->lru_segmented) {
        hit_flat(it);
        return;
    }
    if (item_flags(it) & ITEM_ACTIVE) {
        return;
    }
    if (!(item_flags(it) & ITEM_FETCHED)) {
        item_flags_set(it, ITEM_FETCHED);
        return;
    }
    /* A second hit marks the item active, wherever it is; no list lock is
     * taken on a GET.  The maintainer moves active items when they reach
     * a tail: HOT and WARM ones to WARM, COLD ones back to WARM. */
    item_time_store(it, clock_now());
    item_flags_set(it, ITEM_ACTIVE);
}

/* ---- the crawler's cursor --------------------------------------------- */

void
lru_cursor_insert(struct item *cursor, unsigned tc, enum item_lru which)
{
    struct lru_list *l = list_at(tc, which);

    memset(cursor, 0, sizeof(*cursor));
    item_flags_store(cursor, ITEM_LINKED);
    cursor->clsid = (uint8_t)(SLABS_TC_ID(tc) |
                              ((unsigned)which << ITEM_LRU_SHIFT));
    cursor->tier = (uint8_t)SLABS_TC_TIER(tc);
    pthread_mutex_lock(&l->lock);
    cursor->prev = l->tail;
    if (l->tail != NULL) {
        l->tail->next = cursor;
    } else {
        l->head = cursor;
    }
    l->tail = cursor;
    pthread_mutex_unlock(&l->lock);
}

void
lru_cursor_remove(struct item *cursor)
{
    if (!(item_flags(cursor) & ITEM_LINKED)) {
        return;
    }
    lru_remove(cursor);
    item_flags_store(cursor, 0);
}

struct item *
do_lru_cursor_step(struct item *c)
{
    struct lru_list *l = list_of(c);
    struct item *it = c->prev;
    struct item *before;

    if (it == NULL) {
        take_out(l, c);
        item_flags_store(c, 0);
        return NULL;
    }
    /* Swap the cursor with the item before it. */
    before = it->prev;
    if (before != NULL) {
        before->next = c;
    } else {
        l->head = c;
    }
    c->prev = before;
    it->next = c->next;
    if (c->next != NULL) {
        c->next->prev = it;
    } else {
        l->tail = it;
    }
    c->next = it;
    it->prev = c;
    return it;
}

/* ---- figures ------------------------------------------------------------ */

static uint64_t
ld(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

uint64_t
lru_list_size(unsigned tc, enum item_lru which)
{
    return ld(&list_at(tc, which)->size);
}

uint64_t
lru_list_bytes(unsigned tc, enum item_lru which)
{
    return ld(&list_at(tc, which)->bytes);
}

uint64_t
lru_class_items(unsigned tc)
{
    uint64_t n = 0;

    for (unsigned i = 0; i < TSLOT_MAX; i++) {
        n += ld(&lru.classes[i][tc].items);
    }
    return n;
}

uint64_t
lru_items_in_class(unsigned id)
{
    uint64_t n = 0;

    for (unsigned t = 0; t < SLABS_NTIERS; t++) {
        n += lru_class_items(SLABS_TC(t, id));
    }
    return n;
}

uint64_t
lru_class_bytes(unsigned tc, bool with_temp)
{
    uint64_t total = 0;

    if (with_temp) {
        for (unsigned i = 0; i < TSLOT_MAX; i++) {
            total += ld(&lru.classes[i][tc].bytes);
        }
        return total;
    }
    for (unsigned l = 0; l < LRU_NLISTS; l++) {
        if (l != ITEM_LRU_TEMP) {
            total += lru_list_bytes(tc, (enum item_lru)l);
        }
    }
    return total;
}

rel_time_t
lru_tail_age(unsigned tc, enum item_lru which, rel_time_t now)
{
    struct lru_list *l = list_at(tc, which);
    rel_time_t age = 0;
    struct item *it;

    pthread_mutex_lock(&l->lock);
    for (it = l->tail; it != NULL && lru_is_cursor(it); it = it->prev) {
    }
    if (it != NULL && now > item_time(it)) {
        age = now - item_time(it);
    }
    pthread_mutex_unlock(&l->lock);
    return age;
}

bool
lru_item_stats(unsigned tc, struct cache_item_stats *o)
{
    rel_time_t now = clock_now();

    memset(o, 0, sizeof(*o));
    if (SLABS_TC_ID(tc) == 0 || tc >= SLABS_TC_MAX ||
        lru_class_items(tc) == 0) {
        return false;
    }
    o->number_hot = lru_list_size(tc, ITEM_LRU_HOT);
    o->number_warm = lru_list_size(tc, ITEM_LRU_WARM);
    o->number_cold = lru_list_size(tc, ITEM_LRU_COLD);
    o->number_temp = lru_list_size(tc, ITEM_LRU_TEMP);
    o->number = lru_class_items(tc);
    o->age_hot = lru_tail_age(tc, ITEM_LRU_HOT, now);
    o->age_warm = lru_tail_age(tc, ITEM_LRU_WARM, now);
    o->age = lru_tail_age(tc, ITEM_LRU_COLD, now);
    o->mem_requested = slabs_requested(tc);
    cache_class_counters_copy(o, &lru_class_counters[tc]);
    return true;
}

void
lru_totals(unsigned t, struct cache_stats *out)
{
    unsigned from = t < SLABS_NTIERS ? SLABS_TC(t, 1) : 1;
    unsigned to = t < SLABS_NTIERS ? SLABS_TC(t + 1, 0) : SLABS_TC_MAX;

    for (unsigned tc = from; tc < to; tc++) {
        out->curr_items += lru_class_items(tc);
        out->bytes += lru_class_bytes(tc, true);
        cache_class_counters_total(out, &lru_class_counters[tc]);
    }
}

void
lru_stats_reset(void)
{
    for (unsigned tc = 0; tc < SLABS_TC_MAX; tc++) {
        cache_class_counters_reset(&lru_class_counters[tc]);
    }
}
