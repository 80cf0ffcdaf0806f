/*
 * crawler.h: the LRU crawler thread, which walks the lists of chosen
 * classes from tail to head with a cursor and reclaims expired and
 * flushed items.
 *
 * Crawls are requested (lru_crawler crawl) or scheduled by the thread
 * itself: a class is crawled again 5 s after a crawl that saw items with
 * an exptime, and after an interval doubling up to 60 s while its crawls
 * see none (a simplification of memcached's TTL histograms).
 */
#ifndef MCPM_STORAGE_CRAWLER_H
#define MCPM_STORAGE_CRAWLER_H

#include <stdbool.h>

#include "storage/base/metrics.h"
#include "storage/base/options.h"
#include "storage/base/status.h"
#include "storage/slab/item.h"

/* Keep opts; start the thread if opts->lru_crawler.  0 or -1. */
int  crawler_init(const struct cache_options *opts);

/* Stop the thread (waits for a crawl in progress to give up). */
void crawler_destroy(void);

/* lru_crawler enable / disable: 0, or -1 if the thread cannot start. */
int  crawler_enable(bool on);

/* Queue a crawl of the classes marked true: CACHE_OK, CACHE_BUSY,
 * CACHE_BADCLASS, CACHE_NOTSTARTED (none has items) or CACHE_DISABLED. */
enum cache_status crawler_request(const bool classes[CACHE_MAX_CLASSES]);

/* Block until no crawl is queued or running (tests). */
void crawler_wait(void);

/*
 * Move a cursor (lru.h) one item towards its list's head, reclaiming the
 * item it passes if that is dead.  Returns 1 (checked one), 0 (skipped a
 * busy one) or -1 (reached the head: the cursor is off the list).
 * *had_ttl: the item had an exptime.  Takes the list lock, then only
 * trylocks the item's.
 */
int  crawler_step(struct item *cursor, bool *had_ttl);

/* lru_crawler_running and lru_crawler_starts; reset zeroes the starts. */
void crawler_stats(struct cache_stats *out);
void crawler_stats_reset(void);

#endif
