/*
 * cache_open.h: the facade's life cycle and administration (cache_open.c):
 * opening the cache and its memory file, the calls a worker makes as it
 * starts and ends, the clock's tick, and the operator's commands that
 * change the cache's shape.
 */
#ifndef MCPM_STORAGE_CACHE_OPEN_H
#define MCPM_STORAGE_CACHE_OPEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/base/options.h"
#include "storage/base/status.h"

/*
 * cache_options_defaults() (options.h) gives memcached 1.6's defaults:
 * 64 MB, 1 MB pages and items, factor 1.25 from 48 bytes, CAS on,
 * segmented LRU with its maintainer, crawler, page mover with automove 1.
 * lock_power 0 means "from the worker count".
 */

/* Set up slabs, hash table, locks and LRUs and start the background
 * threads the options ask for.  Returns 0, or -1 with a message on stderr.
 * A memory file not stopped cleanly (or without an index that fits) is
 * read back while the node serves (storage/recover/recover.h): a key not
 * read back yet is a miss, and `stats` says how far it has come. */
int  cache_init(struct cache_options *opts, unsigned nworkers);

/* True while the memory file's items are still being read back. */
bool cache_recovering(void);

/* Wait until they are all back (tests, and a caller that serves only
 * then). */
void cache_recovery_wait(void);

/* Stop the background threads and free all memory.  No call may be in
 * flight. */
void cache_shutdown(void);

/* The first half of cache_shutdown(): a recovery still running and the
 * background threads stop, the memory file is left clean (unless that
 * recovery had items left to read: the next start scans again) and its
 * lock let go, so that another server may open it at once; the memory
 * (gigabytes of mapping to take down) is freed by cache_shutdown()
 * later.  last: no other process takes the file over now (a stop, not a
 * handover): a file written without flushes goes to its disk whole
 * first, so that a machine restart keeps it.  No call but
 * cache_shutdown() may follow. */
void cache_stop(bool last);

/* Once a second from the daemon's clock: expansion check, automove, and
 * the memory file's note of when the server last ran. */
void cache_tick(void);

/* A bulk load of about `items` is to come into an empty cache: the hash
 * table takes their size at once, so that the load neither grows it nor
 * walks long chains meanwhile.  Nothing once an item is in. */
void cache_presize(uint64_t items);

/* Under -e, with no <file>.meta: may the memory file at path come from a
 * build that kept none (layout 2), rather than from one whose metadata an
 * operator removed to start cold? */
bool cache_file_may_lack_meta(const char *path);

/* Whether the file at path is a memory file of memcached-pm's (of any
 * layout it reads), by its superblock: not memcached's, not empty. */
bool cache_file_is_ours(const char *path);

/* Does a live process hold the memory file at path (its lock)?  A killed
 * server's files close only once its io_uring workers have gone, a few
 * milliseconds after the process. */
bool cache_file_busy(const char *path);

/* A thread that stores often (a worker) keeps a few free chunks of each
 * class of its own, so that its stores and deletes rarely take the slab
 * allocator's lock (slabs.h): on before its first request, off before it
 * exits. */
void cache_thread_cache(bool on);

/* ---- administration ---------------------------------------------------- */

/* cache_memlimit: 0, or -1 when the new limit cannot be applied. */
int cache_set_memlimit(size_t bytes);

/* slabs reassign <src> <dst>: CACHE_OK, CACHE_BUSY, CACHE_BADCLASS,
 * CACHE_NOSPARE, CACHE_SAME or CACHE_DISABLED. */
enum cache_status cache_slabs_reassign(int src, int dst);

/* lru_crawler crawl: classes[i] true for each class id to crawl.  CACHE_OK,
 * CACHE_BUSY, CACHE_BADCLASS, CACHE_NOTSTARTED or CACHE_DISABLED. */
enum cache_status cache_crawl(const bool classes[CACHE_MAX_CLASSES]);

/* lru_crawler enable|disable: start or stop the crawler thread. */
int cache_crawler_enable(bool on);

#endif
