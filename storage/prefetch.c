/*
 * prefetch.c: the batched lookup walk (prefetch.h has the state machine).
 *
 * A walk in progress is counted in its thread's slot of `active`; one
 * slot per thread (64 of them, shared round robin beyond that), each on
 * its own cache line, so walks on different workers never touch a shared
 * line.  prefetch_quiesce() waits for each slot to read 0 once: any walk
 * that began before the caller made its memory unreachable has ended by
 * then, and one that begins later cannot reach it.  The slot increment is
 * sequentially consistent, so a walk that loads a table pointer after it
 * is seen by the quiescer, or sees the pointer already cleared.
 */
#include "storage/prefetch.h"
#include "storage/assoc.h"
#include "storage/item.h"
#include "storage/locks.h"

#include <sched.h>
#include <stdatomic.h>

#define SLOTS 64

enum step { STEP_SLOT, STEP_HEAD, STEP_CHAIN, STEP_DONE };

static struct {
    _Atomic unsigned n;
    char pad[64 - sizeof(unsigned)];
} active[SLOTS];

static _Atomic unsigned slot_next;
static _Thread_local int slot_mine = -1;

static unsigned
my_slot(void)
{
    if (slot_mine < 0) {
        slot_mine = (int)(atomic_fetch_add(&slot_next, 1) % SLOTS);
    }
    return (unsigned)slot_mine;
}

void
prefetch_quiesce(void)
{
    atomic_thread_fence(memory_order_seq_cst);
    for (unsigned i = 0; i < SLOTS; i++) {
        while (atomic_load(&active[i].n) != 0) {
            sched_yield();
        }
    }
}

/*
 * Relaxed loads of fields other threads write under locks.  A pointer
 * the walk follows may be stale, but it always points where an item
 * header was once, in a page still mapped (prefetch_quiesce() guards the
 * frees), and the key compare stops at the first byte that differs from
 * the key sought: it reads no further than that old item's key did.
 */
static const struct item *
load_ptr(const struct item *const *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static bool
key_matches(const struct item *it, uint16_t flags, const char *key,
            size_t nkey)
{
    const char *k = it->data + ((flags & ITEM_CAS) ? sizeof(uint64_t) : 0);

    if (__atomic_load_n(&it->nkey, __ATOMIC_RELAXED) != nkey) {
        return false;
    }
    for (size_t i = 0; i < nkey; i++) {
        if (__atomic_load_n(&k[i], __ATOMIC_RELAXED) != key[i]) {
            return false;
        }
    }
    return true;
}

/* The header and key of an item span its first two cache lines. */
static void
prefetch_item(const struct item *it)
{
    __builtin_prefetch(it);
    __builtin_prefetch((const char *)it + 64);
}

/* The first line of an unchunked item's value. */
static void
prefetch_value(const struct item *it, uint16_t flags, size_t nkey)
{
    size_t off = ((flags & ITEM_CAS) ? sizeof(uint64_t) : 0) + nkey + 1 +
                 ((flags & ITEM_CFLAGS) ? sizeof(uint32_t) : 0);

    if (!(flags & ITEM_CHUNKED)) {
        __builtin_prefetch(it->data + off);
    }
}

/* One step of key k's walk; returns the step it is at now. */
static enum step
advance(struct prefetch_key *k, enum step s, const void **at,
        unsigned *depth, bool values)
{
    const struct item *it;
    uint16_t flags;

    switch (s) {
    case STEP_SLOT:
        *at = assoc_bucket_hint(k->hv);
        if (*at == NULL) {
            return STEP_DONE;
        }
        __builtin_prefetch(*at);
        locks_prefetch(k->hv);
        return STEP_HEAD;
    case STEP_HEAD:
        it = load_ptr(*at);
        if (it == NULL) {
            return STEP_DONE;
        }
        prefetch_item(it);
        *at = it;
        *depth = 1;
        return STEP_CHAIN;
    case STEP_CHAIN:
        it = *at;
        flags = item_flags(it);
        if (key_matches(it, flags, k->key, k->nkey)) {
            k->found = it;
            if (values) {
                prefetch_value(it, flags, k->nkey);
            }
            return STEP_DONE;
        }
        it = load_ptr((const struct item *const *)&it->h_next);
        if (it == NULL || ++*depth > PREFETCH_CHAIN_MAX) {
            return STEP_DONE;
        }
        prefetch_item(it);
        *at = it;
        return STEP_CHAIN;
    default:
        return STEP_DONE;
    }
}

/* Walk up to PREFETCH_BATCH_MAX keys side by side. */
static void
walk_window(struct prefetch_key *keys, unsigned n, bool values)
{
    enum step step[PREFETCH_BATCH_MAX];
    const void *at[PREFETCH_BATCH_MAX];
    unsigned depth[PREFETCH_BATCH_MAX];
    unsigned left = n;

    for (unsigned i = 0; i < n; i++) {
        step[i] = STEP_SLOT;
        keys[i].found = NULL;
    }
    while (left > 0) {
        for (unsigned i = 0; i < n; i++) {
            if (step[i] != STEP_DONE) {
                step[i] = advance(&keys[i], step[i], &at[i], &depth[i],
                                  values);
                left -= step[i] == STEP_DONE;
            }
        }
    }
}

void
prefetch_walk(struct prefetch_key *keys, unsigned n, bool values)
{
    unsigned slot = my_slot();

    atomic_fetch_add(&active[slot].n, 1);
    for (unsigned i = 0; i < n; i += PREFETCH_BATCH_MAX) {
        walk_window(keys + i, n - i < PREFETCH_BATCH_MAX
                              ? n - i : PREFETCH_BATCH_MAX, values);
    }
    atomic_fetch_sub_explicit(&active[slot].n, 1, memory_order_release);
}
