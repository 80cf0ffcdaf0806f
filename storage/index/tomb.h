/*
 * tomb.h: the keys that left the index while a recovery runs.
 *
 * After a crash the node serves at once, and recovery links the memory
 * file's items behind it (recover.h).  A key that leaves the index
 * meanwhile (deleted, evicted, expired, flushed), or is deleted before
 * recovery has reached it, must not come back with an older copy the scan
 * finds later.  So each such key is noted here with the seq below which
 * its copies are older than the removal (the seq mark the recovery
 * started at), and recovery drops every copy it covers.  So is a key
 * stored while the table holds none of it: in this recovery its new copy
 * wins by its seq anyway, but after a crash the next one may read the
 * old copy's page first and would serve it until it reached the new.
 *
 * A crash during the recovery must not forget them either: every note is
 * appended to a log beside the memory file (written before the removal is
 * answered; synced too under power durability), which the next start
 * reads back before it serves.  A recovery that ends has dropped, and
 * cleared in the file, every copy the notes cover: it removes the log.
 *
 * Locking: tomb_note() and tomb_covers() expect the key's item lock
 * (locks_lock(hv)) held; the table is striped like the item locks.
 */
#ifndef MCPM_STORAGE_TOMB_H
#define MCPM_STORAGE_TOMB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Start noting keys, each covering copies with a seq up to `mark`.  The
 * log at `path` (NULL: none) is read first when it belongs to the file
 * (`file_id`, the superblock's epoch): its keys are covered as they were
 * noted; then it is appended to, synced after each note when `sync`.
 * `filter_bits`: the log2 of the bits of the filter below.  0, or -1
 * with a message on stderr.  Before serving, the hash table empty.
 */
int  tomb_begin(const char *path, uint64_t file_id, uint64_t mark,
                bool sync, unsigned filter_bits);

/* True between tomb_begin() and tomb_end(). */
bool tomb_active(void);

/* The key left the index (or was deleted unseen) while recovering. */
void tomb_note(const char *key, size_t nkey, uint32_t hv);

/* Is a copy of the key with this seq older than a removal noted? */
bool tomb_covers(const char *key, size_t nkey, uint32_t hv, uint64_t seq);

/*
 * A filter of the hashes the table has held, or lost, since the start:
 * two bits of 2^filter_bits for each hash, in one word, set by every
 * insert into the table (assoc.c calls tomb_mark()) and every note.
 * Recovery searches the table and the notes only for a head whose bits
 * were both set already (tomb_test_mark()); the rest, most of them, cost
 * it no search.
 * Item lock held, as for the notes.
 */
void tomb_mark(uint32_t hv);
bool tomb_test_mark(uint32_t hv);
/* The filter's word for hv, to prefetch; and whether its bits are set
 * now (no lock: a guess, for prefetching what a search will read). */
const void *tomb_hint(uint32_t hv);
bool tomb_maybe(uint32_t hv);

/*
 * An immediate flush_all while recovering: every copy up to the mark is
 * gone, whatever its key (the items' times, to the second, cannot tell a
 * copy written just before the crash from one stored since).  Logged as
 * the notes are.  Takes every item lock once: a recovery thread linking
 * an item meanwhile has finished, and every later one sees it.  No item
 * lock held.
 */
void tomb_flush(void);
bool tomb_flushed(uint64_t seq);

/* Keys noted (the log's and this run's). */
uint64_t tomb_count(void);

/* Stop noting and free the notes; with `done`, the recovery they served
 * has ended and the log is removed, else it is kept for the next start. */
void tomb_end(bool done);

#endif
