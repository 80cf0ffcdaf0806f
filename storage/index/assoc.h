/*
 * assoc.h: the chained hash table that indexes items, kept in DRAM.
 *
 * Buckets are 32-bit chunk ids (chunkid.h) of each chain's first item;
 * items chain through item->h_next.  The table grows by linear hashing,
 * a bucket at a time: when cache_tick() sees more than ASSOC_LOAD_X2 / 2
 * items per bucket it wakes the expander thread, which follows the item
 * count from then on, and the workers that link items split buckets
 * (each under its item lock, a few hundred nanoseconds) until the load
 * is back to that.  No table is ever copied or doubled, so
 * the table's DRAM is about 4 / 1.5 bytes per item at every moment.
 *
 * Locking: every call that takes hv expects the caller to hold
 * locks_lock(hv).
 */
#ifndef MCPM_STORAGE_ASSOC_H
#define MCPM_STORAGE_ASSOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct item;

/* Twice the items per bucket the table grows to keep. */
#define ASSOC_LOAD_X2 3

int  assoc_init(unsigned hashpower, unsigned bulk_move);
void assoc_destroy(void);

/* Before serving, with the table empty: size it for `items` at once
 * (recovery knows how many it will link). */
void assoc_presize(uint64_t items);

/* Its image for a successor: assoc_image.h. */

struct item *assoc_find(const char *key, size_t nkey, uint32_t hv);
void assoc_insert(struct item *it, uint32_t hv);       /* key not present */

/*
 * assoc_find() without the lock, inside a read section (quiesce.h), for
 * a reader that took the stripe's count `seq` (locks.h) before: each
 * item is looked at only after the count said the pointer to it was
 * good, and its key only after the count said its length was.  *ok false:
 * the count moved, the table is growing or the chain is long; take the
 * lock.  *ok true: the item found (its fields not yet checked), or NULL
 * for a key that was not there.
 */
struct item *assoc_peek(const char *key, size_t nkey, uint32_t hv,
                        uint32_t seq, bool *ok);
void assoc_delete(const char *key, size_t nkey, uint32_t hv);

/* Start or stop the expander thread.  items (may be NULL) counts the
 * linked items: while a load keeps the table growing, the expander asks
 * it every 10 ms rather than wait for the next assoc_maybe_expand(). */
int  assoc_thread_start(uint64_t (*items)(void));
void assoc_thread_stop(void);

/* Wake the expander when the table is short of buckets for curr_items;
 * cheap, never blocks. */
void assoc_maybe_expand(uint64_t curr_items);

/* After linking an item (its lock held): when the table is short of
 * buckets, split a few of them, unless another thread is splitting or
 * their locks are busy.  Two loads when the table is not short. */
void assoc_grow_step(void);

/* hash_power_level: log2 of the smallest power of two of buckets not
 * below the table's (memcached's level once it has grown past as many
 * items: after 131,072 items from 2^16, 17);
 * hash_bytes: the buckets in use; hash_is_expanding: splitting now. */
void assoc_stats(uint64_t *hash_power_level, uint64_t *hash_bytes,
                 uint64_t *hash_is_expanding);

/*
 * Visit every linked item: fn(it, ctx) is called under the item's lock, a
 * bucket at a time, so it may take a reference but must not unlink.  Holds
 * growth off while it runs.  Stops when fn returns non-zero.
 */
void assoc_walk(int (*fn)(struct item *it, void *ctx), void *ctx);

/* Address of the bucket slot hv maps to, for prefetch; no lock needed,
 * the slot is only a hint.  assoc_hint_head() reads the first item of the
 * slot's chain, lock-free (chunkid_peek()): NULL for an empty bucket
 * (*empty) or a stale id. */
const void *assoc_bucket_hint(uint32_t hv);
const struct item *assoc_hint_head(const void *hint, bool *empty);

#endif
