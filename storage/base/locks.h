/*
 * locks.h: the striped item lock table.
 *
 * 2^power mutexes; a key's lock is locks[hv & mask].  Because the lock
 * power is kept below the hash power (and the table only grows), every
 * bucket of the old and the new hash table maps to exactly one lock, so
 * holding lock(hv) guards the key's bucket chain through a resize.
 *
 * Lock order everywhere in storage/: item lock, then LRU lock, then slabs
 * lock.  Background threads that already hold an LRU lock use
 * locks_trylock() and skip busy items.
 */
#ifndef MCPM_STORAGE_LOCKS_H
#define MCPM_STORAGE_LOCKS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/*
 * A mutex for storage's short critical sections (stripes, LRU lists, the
 * slab classes): adaptive, so a thread that finds it taken spins a while
 * before it sleeps.  Held for a few hundred cycles at most, a plain mutex
 * under two storing workers put both to sleep in the kernel and woke them
 * there, which cost more than the work the lock guards.
 */
int locks_mutex_init(pthread_mutex_t *m);

/* Power from the worker count as memcached picks it (10..15); a given
 * `requested` power of 0 means "from nworkers". */
unsigned locks_power_for(unsigned nworkers);

int  locks_init(unsigned power);
void locks_destroy(void);
unsigned locks_power(void);

void locks_lock(uint32_t hv);
void locks_unlock(uint32_t hv);
bool locks_trylock(uint32_t hv);

/* Ask for lock(hv)'s cache line ahead of taking it (prefetch walks). */
void locks_prefetch(uint32_t hv);

/*
 * Reading without the lock (a seqlock's reader): take the stripe's count
 * before the reads, and after them ask whether it is unchanged.  An odd
 * count means a holder is at work: the reads cannot be trusted.  Reads
 * between the two may see memory being changed; they must be bounded and
 * their results thrown away unless locks_seq_same() says true (and memory
 * freed meanwhile must stay mapped: quiesce.h).
 */
uint32_t locks_seq_begin(uint32_t hv);
bool locks_seq_same(uint32_t hv, uint32_t seq);

/* Take or drop every stripe, in index order: the hash table swap. */
void locks_lock_all(void);
void locks_unlock_all(void);

#endif
