/*
 * recover_link.h: recovery's links (recover_link.c): each head that passed
 * its checks into the hash table and its class's LRU runs.
 */
#ifndef MCPM_STORAGE_RECOVER_LINK_H
#define MCPM_STORAGE_RECOVER_LINK_H

#include <stdbool.h>
#include <stdint.h>

#include "storage/recover/recover_check.h"

/* The hash table presized for n heads, and after a crash the bitmap of
 * hashes seen; -1 when out of memory. */
int      recover_link_presize(struct recovery *rc, uint64_t n);
/* After a crash: set hv's bit in the bitmap; true if it was set already
 * (a twin may be live).  After a clean stop always false. */
bool     recover_link_seen(const struct recovery *rc, uint32_t hv);
/* The scan's unchunked head that passed its checks: linked RING heads
 * later, or kept if it may have a twin; drain at the end of the scan. */
void     recover_link_push(struct worker *w, const struct head *h);
void     recover_link_drain(struct worker *w);
/* The link phase, one per worker thread: the kept heads of its range of
 * buckets into the table. */
void    *recover_link_thread(void *arg);
/* Each worker's LRU runs; the kept heads that were linked into them and
 * every worker's runs into the lists (-1 when out of memory); freed, and
 * joined, after a failure. */
int      recover_link_runs_new(struct recovery *rc);
int      recover_link_lrus(struct recovery *rc);
void     recover_link_runs_free(struct recovery *rc);

#endif
