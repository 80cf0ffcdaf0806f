/*
 * prefetch.c: the batched lookup walk (prefetch.h has the state machine).
 *
 * A walk is a lock-free read section (quiesce.h): the hash table and the
 * slab pages wait for it before they free memory it may be reading.
 */
#include "storage/index/prefetch.h"
#include "storage/base/locks.h"
#include "storage/base/quiesce.h"
#include "storage/index/assoc.h"
#include "storage/slab/item.h"

enum step { STEP_SLOT, STEP_HEAD, STEP_CHAIN, STEP_DONE };

/*
 * Relaxed loads of fields other threads write under locks.  A pointer
 * the walk follows may be stale, but it always points where an item
 * header was once, in a page still mapped (quiesce_wait() guards the
 * frees), and the key compare stops at the first aligned word that
 * differs from the key sought: it reads no further than the word holding
 * that old item's last matching key byte (item_key_equal_relaxed()).
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
    return item_key_equal_relaxed(k, key, nkey);
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
    bool empty;

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
        /* The count, then the slot, as a lookup reads them: with the
         * table or its split point moved since STEP_SLOT, the slot is
         * another one and the answer only a hint. */
        k->seq = locks_seq_begin(k->hv);
        k->sure = !(k->seq & 1) && assoc_bucket_hint(k->hv) == *at;
        it = assoc_hint_head(*at, &empty);
        if (it == NULL) {
            k->sure = k->sure && empty;
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
        if (it == NULL) {
            return STEP_DONE;
        }
        if (++*depth > PREFETCH_CHAIN_MAX) {
            k->sure = false;
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
        keys[i].sure = false;
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
    quiesce_enter();
    for (unsigned i = 0; i < n; i += PREFETCH_BATCH_MAX) {
        walk_window(keys + i, n - i < PREFETCH_BATCH_MAX
                              ? n - i : PREFETCH_BATCH_MAX, values);
    }
    quiesce_exit();
}
