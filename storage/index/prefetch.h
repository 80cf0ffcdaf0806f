/*
 * prefetch.h: batched lookups that keep many cache misses in flight.
 *
 * A lookup on a large table is a chain of dependent loads (the bucket slot,
 * the item header it points to, the next item of the chain when the key
 * differs, the value), each a cache miss waiting on the one before.
 * prefetch_walk() takes a batch of keys whose hashes are known and walks
 * them round robin, one step per key per round: each step issues the next
 * load of its key as a prefetch and moves on, so the misses of the whole
 * batch overlap.  It takes no lock and no reference and changes nothing;
 * the requests then run as usual, under their locks, and find the lines
 * in cache.
 *
 * One key's walk:
 *
 *          prefetch its slot        slot empty
 *   SLOT ---------------------> HEAD ----------------------------> DONE
 *                                 |                                 ^
 *                                 | prefetch the item it names      |
 *                                 v                                 |
 *          key differs:         CHAIN ---- chain ends, or ----------+
 *          prefetch h_next  +--> |  |      PREFETCH_CHAIN_MAX items  |
 *                           +----+  |                                |
 *                                   | key matches: note it (found),  |
 *                                   | prefetch its value (reads)     |
 *                                   +--------------------------------+
 *
 * Safety: the walk reads slots and item fields that other threads change
 * under their locks, with relaxed atomic loads; what it sees may be stale,
 * which costs one useless prefetch and nothing else.
 *
 * The walk's answer: before it reads a key's slot it notes the count of
 * the key's lock stripe (locks.h), and a walk that reached the end of the
 * chain, or the key, with that count even is sure of its answer for as
 * long as the count stays the same, since every change of the chain and
 * of the items on it is made under that stripe's lock.  cache_peek()
 * checks the count and takes the answer instead of walking the chain a
 * second time.  The memory it reads
 * is never unmapped under it: a walk is a read section (quiesce.h), and a
 * hash table replaced by an expansion or a slab page given back to the
 * system is freed only after quiesce_wait().
 */
#ifndef MCPM_STORAGE_PREFETCH_H
#define MCPM_STORAGE_PREFETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct item;

/* Items of one chain a walk looks at before it gives up on a key, and
 * keys walked side by side (a longer batch is walked in windows). */
#define PREFETCH_CHAIN_MAX 8
#define PREFETCH_BATCH_MAX 256

struct prefetch_key {
    const char *key;
    size_t      nkey;
    uint32_t    hv;             /* hash_key(key, nkey) */
    /* out: the item whose key matched as the walk passed, or NULL; never
     * a reference */
    const struct item *found;
    /* out: found is the answer (the key's item, or NULL: none) while the
     * key's stripe count is still seq (the walk's answer, above) */
    bool        sure;
    uint32_t    seq;
};

/* A key to walk or look up, its hash known; no answer yet. */
static inline void
prefetch_key_set(struct prefetch_key *k, const char *key, size_t nkey,
                 uint32_t hv)
{
    *k = (struct prefetch_key){ .key = key, .nkey = nkey, .hv = hv };
}

/* Walk keys[0..n) as above; `values`: prefetch the values of the items
 * found too (reads).  Any thread, no lock held or taken. */
void prefetch_walk(struct prefetch_key *keys, unsigned n, bool values);

#endif
