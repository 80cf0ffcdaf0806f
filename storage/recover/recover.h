/*
 * recover.h: reading the items of a memory file back, while the node
 * serves.
 *
 * The superblock has been loaded and matches the settings; slabs, the hash
 * table and the LRUs are set up and empty.  recover_start() claims the
 * pages the page table names and sizes the hash table (milliseconds at
 * any size), and returns; threads then read the pages back one at a time
 * while the workers serve, each page whole before the next:
 *
 *   scan its chunks --> its free chunks to its class --> its heads into
 *   the hash table and COLD, each under its item lock
 *
 * and, once every page is done, the chunked values:
 *
 *   pieces sorted --> chains rebuilt and checked --> unclaimed pieces
 *   freed --> the heads linked
 *
 * Recovery trusts only what the commit order made durable (persist.h):
 * the page table, commit words, checksums and the piece tags of chunked
 * items; every pointer and volatile header field is rebuilt.  An item
 * comes back only if its commit word is live, its header fits its chunk,
 * its chain is whole, its checksum matches (checked unless the last
 * shutdown was clean), it is neither expired nor flushed, and no copy of
 * its key is newer: neither one in the table (a twin the crash left, or
 * a value stored since the start) nor a removal since the start
 * (storage/index/tomb.h).  A key not linked yet is a miss; no value
 * older than the last one acknowledged is ever served.  (A crash
 * between a store's commit and the clear of the copy it replaces, a
 * store whose reply never went out, leaves both: the older may be linked
 * first and answer until the newer is read back, chunked values last of
 * all; then the newer wins.)  Every chunk that does not come back is freed
 * and its commit word cleared and persisted, so it cannot come back
 * later.
 */
#ifndef MCPM_STORAGE_RECOVER_H
#define MCPM_STORAGE_RECOVER_H

#include <stdbool.h>
#include <stdint.h>

#include "storage/base/clock.h"
#include "storage/base/metrics.h"

struct tier;
struct recovery;

struct recover_params {
    bool        check_crc;      /* false after a clean shutdown */
    bool        use_cas;        /* items must have the CAS slot or not */
    rel_time_t  now;            /* in the file's time (clock_adopt_epoch) */
    rel_time_t  flush_time;     /* flush_all cut-off; 0 = none */
    uint64_t    flush_cas;      /* and its CAS fence (link.h); 0 = none */
    uint64_t    mark;           /* the seq mark at the start: every copy
                                   in the file is at or below it */
    const char *tomb_log;       /* keys removed while recovering (tomb.h);
                                   NULL: not logged */
    uint64_t    file_id;        /* the log's file (the superblock epoch) */
    bool        sync;           /* sync the log (power durability) */
    unsigned    nthreads;       /* recovery threads; 0 = one per CPU */
    unsigned    pace_us;        /* each thread rests after each page */
    const char *name;           /* the file, for -v */
    int         verbose;        /* > 0: progress and the end on stderr */
    unsigned    progress_ms;    /* between progress lines (0: 1000) */
};

/*
 * Claim the file's pages, size the hash table and start the recovery
 * threads; it goes on while the caller serves.  NULL, with a message on
 * stderr, if memory or a thread is lacking (nothing linked then).  `p`
 * must outlive the recovery.
 */
struct recovery *recover_start(struct tier *t, const struct recover_params *p);

/* True until the last item is linked. */
bool recover_running(const struct recovery *rc);

/* True once it ended with every page read back (false for NULL). */
bool recover_complete(const struct recovery *rc);

/*
 * For a worker that finds no free chunk of slab class clsid in the file,
 * and no page to cut, while the file is read back: it reads a page of
 * that class back itself (its free chunks listed, its dead items freed,
 * its live ones linked and evictable), rather than evict the items read
 * back so far while the class's free chunks wait in pages not read yet.
 * True if it read one (try the allocation again), false when no page of
 * the class is left (or rc is NULL, or ended).  clsid 0: the next page of
 * any class.  The caller may hold an item lock; a helper never waits for
 * one.
 */
bool recover_help(struct recovery *rc, unsigned clsid);

/* How far it has come (final once it ended). */
void recover_progress(const struct recovery *rc, struct cache_recovery *out);

/*
 * Wait until it ends (with `stop`, after asking the threads to stop at
 * the next page) and free it; NULL is allowed.  True if every page was
 * read back: otherwise the file must be scanned again at the next start
 * (its superblock stays not clean), and the removals noted are kept for
 * it.
 */
bool recover_finish(struct recovery *rc, bool stop,
                    struct cache_recovery *out);

#endif
