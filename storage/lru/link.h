/*
 * link.h: items entering and leaving the cache.
 *
 * A linked item is in three places at once, and this module keeps them
 * in step: the hash table (assoc.h), a list of its tier class (lru.h),
 * and, when it lives in the memory file, the file itself, live by its
 * commit word (persist.h).  ITEM_LINKED marks it, and the link holds one
 * reference.  The order is the persistence rule: an item is committed in
 * the file before it is linked, and dies in the file before it is
 * unlinked, so a crash never brings back what a client saw deleted, nor
 * loses what a client saw stored.
 *
 * Also here: whether a linked item still counts (expiry and flush_all),
 * and the sizes of linked items ("stats sizes").
 *
 * Locking: every call that takes hv expects the caller to hold
 * locks_lock(hv); do_link_unlink() also the item's list lock.
 */
#ifndef MCPM_STORAGE_LINK_H
#define MCPM_STORAGE_LINK_H

#include <stdbool.h>
#include <stdint.h>

#include "storage/base/options.h"
#include "storage/slab/item.h"

/* Keep opts (the first list of a new item reads lru_segmented, temp_lru
 * and temporary_ttl); the sizes histogram when track_sizes.  0 or -1. */
int  link_init(const struct cache_options *opts);
void link_destroy(void);

/* The hash of an item's key (hash.h), for a thread that found the item
 * on a list and must take its item lock. */
uint32_t link_hv(const struct item *it);

/* The list a new item enters: HOT, TEMP for a short TTL, COLD in flat
 * mode. */
enum item_lru link_first_list(const struct item *it);

/*
 * Link n in place of old (NULL: none) at the head of list `which`.  An
 * item in the file is committed first, so a crash leaves old or n live,
 * never neither; then old dies in the file and n takes its place
 * (link_swap()).  The caller keeps its reference to n.
 */
void link_replace(struct item *old, struct item *n, uint32_t hv,
                  enum item_lru which);

/* Link an item already committed (or volatile) at the head of `which`. */
void link_in(struct item *it, uint32_t hv, enum item_lru which);

/*
 * Recovery's link of items read back from the file, older than anything
 * stored since the start: link_hash_oldest() puts one in the table (its
 * item lock held, its refcount 0: no one has seen it), named for COLD;
 * a run of such items then joins COLD's tail in one lru_splice_tail(),
 * their item locks held until then, so that no one reaches an item
 * between the table and the list.  link_in_oldest() is both for one.
 */
void link_hash_oldest(struct item *it, uint32_t hv);
void link_in_oldest(struct item *it, uint32_t hv);

/* Unlink if linked: dead in the file, off its list and out of the table;
 * the link's reference is dropped (the memory may be freed).  While a
 * recovery runs the key is noted as removed (storage/index/tomb.h), as
 * do_link_unlink() notes it. */
void link_unlink(struct item *it, uint32_t hv);

/* link_unlink() of a linked item that an item of the same key replaces
 * at once, with no note: recovery's older twin. */
void link_unlink_older(struct item *it, uint32_t hv);

/* link_unlink() of a linked item whose list lock the caller holds. */
void do_link_unlink(struct item *it, uint32_t hv);

/* n takes linked item old's place: in the table, and on list `which`
 * before old leaves its list, so that the items a class or the cache
 * counts never dip while a key moves.  old stays alive in the file; the
 * link's reference to old becomes the caller's (to drop, or for the cache
 * policy's copy to hold its original by). */
void link_swap(struct item *old, struct item *n, uint32_t hv,
               enum item_lru which);

/* ---- liveness -------------------------------------------------------- */

/* Expired (exptime reached) or flushed at `now`; *flushed says which. */
bool link_is_dead(const struct item *it, rel_time_t now, bool *flushed);

/* The same for an item whose exptime, time and CAS unique are these. */
bool link_dead_at(rel_time_t exptime, rel_time_t time, uint64_t cas,
                  rel_time_t now, bool *flushed);

/*
 * flush_all: items with time <= when read as dead once when <= now, and
 * so do items whose unique is at or below cas (an immediate flush_all
 * with CAS on, cas_fence(); 0: none) stamped in the flush's second
 * (when + 1) at the latest.  As memcached does: an item read
 * in the flush's second has a time above `when` and sits anywhere in its
 * list, out of reach of link_flush_recent(); its unique tells.
 */
void link_set_flush(rel_time_t when, uint64_t cas);

/* The unique the last immediate flush_all fenced, or 0. */
uint64_t link_flush_cas(void);

/* An immediate flush also unlinks, from the list heads, the items stored
 * after `when` (within the last second), as memcached does.  No lock
 * held. */
void link_flush_recent(rel_time_t when);

/* ---- stats sizes ----------------------------------------------------- */

/* emit(size, count) per 32-byte bucket with linked items; false when
 * track_sizes is off. */
bool link_sizes(void (*emit)(uint64_t size, uint64_t count, void *ctx),
                void *ctx);

#endif
