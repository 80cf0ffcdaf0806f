/*
 * assoc.h: the chained hash table that indexes items, kept in DRAM.
 *
 * An array of 2^n bucket heads; items chain through item->h_next.  When
 * cache_tick() sees more than 1.5 items per bucket it wakes the expander
 * thread, which takes every item lock (locks_lock_all(), a few hundred
 * microseconds), allocates a table twice the size, makes it primary and lets
 * go; then it moves the old buckets over hash_bulk_move at a time, each under
 * its item lock.  A lookup during the move uses the old table for buckets
 * not yet moved (old index >= expand_bucket) and the new one otherwise.
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

int  assoc_init(unsigned hashpower, unsigned bulk_move);
void assoc_destroy(void);

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
/* assoc_insert() by several threads at once, with no lock, while the
 * table neither grows nor is read nor loses an item (recovery): a
 * compare-and-swap on the bucket.  Whoever reads the table next must
 * have synchronized with the inserting threads (joined them). */
void assoc_insert_shared(struct item *it, uint32_t hv);
void assoc_delete(const char *key, size_t nkey, uint32_t hv);

/* Start or stop the expander thread. */
int  assoc_thread_start(void);
void assoc_thread_stop(void);

/* Wake the expander when items > 1.5 x buckets; cheap, never blocks. */
void assoc_maybe_expand(uint64_t curr_items);

void assoc_stats(uint64_t *hash_power_level, uint64_t *hash_bytes,
                 uint64_t *hash_is_expanding);

/*
 * Visit every linked item: fn(it, ctx) is called under the item's lock, a
 * bucket at a time, so it may take a reference but must not unlink.  Waits
 * while the table is being expanded.  Stops when fn returns non-zero.
 */
void assoc_walk(int (*fn)(struct item *it, void *ctx), void *ctx);

/* Address of the bucket slot hv maps to (in whichever table holds it now),
 * for prefetch; no lock needed, the pointer is only a hint. */
const void *assoc_bucket_hint(uint32_t hv);

#endif
