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

/* The first round: every key's slot and lock stripe.  A key without a
 * table is done (slot NULL). */
static void
walk_slots(struct prefetch_key *keys, unsigned n, const void **slot)
{
    for (unsigned i = 0; i < n; i++) {
        keys[i].found = NULL;
        keys[i].sure = false;
        slot[i] = assoc_bucket_hint(keys[i].hv);
        if (slot[i] != NULL) {
            __builtin_prefetch(slot[i]);
            locks_prefetch(keys[i].hv);
        }
    }
}

/*
 * The second round: the stripe's count, then the slot, as a lookup reads
 * them (with the table or its split point moved since the first round,
 * the slot is another one and the answer only a hint), and the item it
 * names.  Returns how many keys go on down their chains (at[i] != NULL).
 */
static unsigned
walk_heads(struct prefetch_key *keys, unsigned n, const void **slot,
           const struct item **at)
{
    unsigned left = 0;

    for (unsigned i = 0; i < n; i++) {
        struct prefetch_key *k = &keys[i];
        bool empty;

        at[i] = NULL;
        if (slot[i] == NULL) {
            continue;
        }
        k->seq = locks_seq_begin(k->hv);
        k->sure = !(k->seq & 1) && assoc_bucket_hint(k->hv) == slot[i];
        at[i] = assoc_hint_head(slot[i], &empty);
        if (at[i] == NULL) {
            k->sure = k->sure && empty;
            continue;
        }
        prefetch_item(at[i]);
        left++;
    }
    return left;
}

/* One link of key k's chain, at item it (depth items in): the next item
 * to look at, or NULL when k is done. */
static const struct item *
walk_link(struct prefetch_key *k, const struct item *it, unsigned depth,
          bool values)
{
    uint16_t flags = item_flags(it);

    if (key_matches(it, flags, k->key, k->nkey)) {
        k->found = it;
        if (values) {
            prefetch_value(it, flags, k->nkey);
        }
        return NULL;
    }
    it = load_ptr((const struct item *const *)&it->h_next);
    if (it != NULL && depth == PREFETCH_CHAIN_MAX) {
        k->sure = false;
        return NULL;
    }
    if (it != NULL) {
        prefetch_item(it);
    }
    return it;
}

/* Walk up to PREFETCH_BATCH_MAX keys side by side: their slots, their
 * heads, then their chains a link a round. */
static void
walk_window(struct prefetch_key *keys, unsigned n, bool values)
{
    const void *slot[PREFETCH_BATCH_MAX];
    const struct item *at[PREFETCH_BATCH_MAX];
    unsigned left;

    walk_slots(keys, n, slot);
    left = walk_heads(keys, n, slot, at);
    for (unsigned depth = 1; left > 0; depth++) {
        for (unsigned i = 0; i < n; i++) {
            if (at[i] != NULL &&
                (at[i] = walk_link(&keys[i], at[i], depth, values)) == NULL) {
                left--;
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
