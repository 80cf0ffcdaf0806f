/*
 * persist.h: the write side of item durability in the PMEM tier.
 *
 * Every chunk of a PMEM page starts with a 16-byte prefix; the item follows
 * it.  The prefix's commit word says whether the item is live:
 *
 *   | commit (8) | crc32c (4) | reserved (4) | item header (48) | ... |
 *
 *   commit = seq << 1 | 1    a live item; seq counts commits, so of two
 *                            live copies of a key the higher seq is newer
 *   commit = seq << 1        a piece of the chunked item committed with
 *                            seq; crc holds the piece's index in the chain
 *   commit = 0               free or dead
 *
 * The page table (pagetab.h) says how each page is cut; the superblock
 * (sblock.h) holds the rest.  doc/PERSISTENCE.md gives the commit order
 * these calls implement.
 *
 * Chunked items (values over the slab chunk limit): the pieces carry the
 * prefix too, tagged with their head's seq and their index, so recovery
 * can put a chain together without trusting a pointer; they are persisted
 * before the head item's commit word, whose CRC covers the whole value.
 *
 * seq never repeats across restarts: it is reserved against the
 * superblock's high-water mark (sblock_reserve_seq) before it is used.
 *
 * Locking: every call runs under the item's lock (or with the only
 * reference).  All calls are only for items of the PMEM tier
 * (it->tier == TIER_PMEM).
 */
#ifndef MCPM_STORAGE_PERSIST_H
#define MCPM_STORAGE_PERSIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/slab/item.h"
#include "storage/tier/tier.h"

#define PERSIST_PREFIX 16       /* bytes in front of an item in PMEM */

struct persist_prefix {
    uint64_t    commit;
    uint32_t    crc;
    uint32_t    reserved;
};

/* Take the PMEM tier `t` (not owned: slabs owns it).  Before serving. */
void persist_init(struct tier *t);

struct sblock;

/* From now on, raise the superblock's cas_hwm (sblock_reserve_seq) before
 * a seq is handed out, and hand out only numbers above the mark sb holds
 * now.  sb stays the caller's; NULL stops it.  Call after persist_init,
 * before serving. */
void persist_set_sblock(struct sblock *sb);

/* Forget the tier (it is being destroyed). */
void persist_destroy(void);

/* The prefix in front of a PMEM item or chunk piece. */
static inline struct persist_prefix *
persist_prefix_of(const void *it)
{
    return (struct persist_prefix *)((char *)(uintptr_t)it - PERSIST_PREFIX);
}

/* The flags the CRC covers and recovery keeps; the others are volatile. */
#define PERSIST_FLAGS (ITEM_CAS | ITEM_CFLAGS | ITEM_CHUNKED | \
                       ITEM_KEY_BINARY | ITEM_STALE)

/* CRC-32C of what recovery checks: nbytes, PERSIST_FLAGS, the class,
 * nkey, the CAS slot, key, client flags and value (not exptime/time). */
uint32_t persist_crc(const struct item *it);

/* The next seq, reserved in the superblock first. */
uint64_t persist_next_seq(void);

/* Steps 1-2: store the CRC, tag the chunk pieces with seq, persist prefix
 * .. end of item and the pieces.  The commit word stays as it is. */
void persist_prepare(struct item *it, uint64_t seq);

/* Step 3: store seq << 1 | 1 in the commit word with one 8-byte store and
 * persist those 8 bytes. */
void persist_publish(struct item *it, uint64_t seq);

/* persist_prepare + persist_publish with persist_next_seq: the new item is
 * durable and live; link it afterwards.  Set it->time first: recovery
 * judges flush_all by it. */
void persist_commit(struct item *it);

/* Dead: commit word 0, persisted.  Before unlinking and replying.  In a
 * group (below) the zero is durable only when the group syncs, so the
 * item is held by a reference until then: its chunk is not reused first
 * (persist_group_holds()). */
void persist_kill(struct item *it);

/* Dead, but only once the item that replaces it (committed just before)
 * is durable: at once, or in a group (below) after the group's commits
 * have synced, the item held by a reference until then so that its chunk
 * is not reused first.  A crash in between leaves both live; recovery
 * keeps the higher seq. */
void persist_retire(struct item *it);

/*
 * Group commit, for a thread that serves an event loop over a file
 * flushed by msync (tier_pmem_group_join()): its stores are noted, not
 * synced, and before a reply that acknowledges one goes out it must be
 * durable.  join is false (and nothing is grouped) for any other medium;
 * pending says whether the thread has noted anything since its last sync
 * or submit.
 *
 * sync: one sync for the thread's commits, kills and touches, and, if
 * it replaced items, a second one for the deaths of the items they
 * replaced; after what it submitted (a barrier).
 *
 * With a waker (asynchronous): submit hands all of it to the flusher
 * thread, the replaced items' deaths included (stored once their
 * successors are durable), and returns at once: true, or false when it
 * had to sync by itself (then all is durable now).  The killed and
 * replaced items stay held until their ticket is done.  noted,
 * durable, and the settled it returns beside (tier.h), tell a reply's
 * writes from what has reached the medium: a reply that acknowledges a
 * store needs durable, one that acknowledges a removal settled (until
 * then an item that the removed one replaced could come back).  killed: the thread's noted()
 * at its last kill.  leave syncs, waits for the flusher and frees the
 * thread's lists.
 */
bool persist_group_join(void (*wake)(void *), void *arg);
bool persist_group_pending(void);
void persist_group_sync(void);
bool persist_group_submit(void);
uint64_t persist_group_noted(void);
uint64_t persist_group_durable(uint64_t *settled);
uint64_t persist_group_killed(void);
void persist_group_leave(void);

/* Whether this thread holds items it killed in its group: an allocation
 * that finds no free chunk syncs the group (persist_group_sync()) to get
 * their chunks back before it evicts more. */
bool persist_group_holds(void);

/* After one aligned store to it->exptime: persist those 4 bytes. */
void persist_exptime(struct item *it);

/* After ITEM_TOKEN_SENT is set in place (an aligned 2-byte store): persist
 * the flags.  Outside the CRC; recovery keeps that bit and no other
 * volatile one. */
void persist_flags(struct item *it);

#endif
