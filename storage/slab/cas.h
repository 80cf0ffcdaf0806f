/*
 * cas.h: CAS uniques.
 *
 * One counter for the whole cache, as memcached's: the first item stored
 * gets 2.  Each thread takes 16 uniques from it at a time and hands them
 * out itself, so that stores on different workers do not all write the
 * counter's cache line (doc/SHARED_WRITES.md).  A unique is never handed
 * out twice, and a key's new unique is always above the one it replaces
 * (meta's I mode compares them); uniques of different keys stored on
 * different workers interleave within a block.  With a memory file no
 * unique leaves here before the superblock's high-water mark covers it
 * (sblock_reserve_seq()), so a restart, clean or not, never hands one
 * out again.
 *
 * Thread-safe: an atomic add per block, and the reserve takes the
 * superblock's lock only when the mark must move.
 */
#ifndef MCPM_STORAGE_CAS_H
#define MCPM_STORAGE_CAS_H

#include <stdint.h>

struct sblock;

/* Start counting from 1 again, with no superblock. */
void cas_init(void);

/* Reserve against sb from now on (NULL: stop), and hand out only uniques
 * above the mark it holds now.  Before serving. */
void cas_use_sblock(struct sblock *sb);

/* The next unique of this thread above `floor` (the unique of the value
 * being replaced, or 0). */
uint64_t cas_next_above(uint64_t floor);

/* The unique a new value gets: `wanted` when the client chose it (meta E;
 * reserved all the same), else the next above floor. */
uint64_t cas_take(uint64_t wanted, uint64_t floor);

/*
 * flush_all: the highest unique handed out so far, and from now on every
 * thread hands out uniques above it only (its block is dropped).  Every
 * value stored before the call has a unique at or below it, every value
 * stored once it returned one above (a client's meta E aside).
 */
uint64_t cas_fence(void);

#endif
