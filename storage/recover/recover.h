/*
 * recover.h: reading the items of a memory file back at start-up.
 *
 * The superblock has been loaded and matches the settings; slabs, the hash
 * table and the LRUs are set up and empty; no thread serves yet.  Recovery
 * then trusts only what the commit order made durable (persist.h): the
 * page table, commit words, checksums and the piece tags of chunked items.
 * Every pointer and every volatile header field is rebuilt.
 *
 *   page table --> claim pages --> scan chunks (threads) --> sort pieces
 *     --> check heads, rebuild chains, keep the newest of a key (threads)
 *     --> free lists, stale commit words cleared --> LRUs, oldest first
 *
 * An item comes back only if its commit word is live, its header fits its
 * chunk, its chain is whole, its checksum matches (checked unless the last
 * shutdown was clean), it has not expired, no flush_all covers it and no
 * newer live copy of its key exists.  Every other chunk is freed and its
 * commit word zeroed and persisted before serving, so nothing dropped can
 * come back on a later restart.
 */
#ifndef MCPM_STORAGE_RECOVER_H
#define MCPM_STORAGE_RECOVER_H

#include <stdbool.h>
#include <stdint.h>

#include "storage/base/clock.h"
#include "storage/base/metrics.h"

struct tier;

struct recover_params {
    bool        check_crc;      /* false after a clean shutdown */
    bool        use_cas;        /* items must have the CAS slot or not */
    rel_time_t  now;            /* in the file's time (clock_adopt_epoch) */
    rel_time_t  flush_time;     /* flush_all cut-off; 0 = none */
    unsigned    nthreads;       /* scan threads; 0 = one per CPU */
    unsigned    hash_bulk_move; /* for a hash table presized to fit */
    int         verbose;        /* > 0: progress on stderr */
    unsigned    progress_ms;    /* between progress lines (0: 1000) */
};

/*
 * Recover the PMEM tier `t` (owned by slabs) as above.  0 on success; -1
 * with a message on stderr if memory for the scan runs out or a thread
 * cannot start (nothing is served then; the file is as it was, or with
 * dead chunks cleared).  Not thread-safe: call once, before serving.
 */
int recover_run(struct tier *t, const struct recover_params *p,
                struct cache_recovery *out);

#endif
