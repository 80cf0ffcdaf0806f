/*
 * exec.h: what every protocol's requests have in common, done once.
 *
 * A front end (process.c for text, process_meta.c for meta, and binary
 * after them) turns its syntax into these calls and their results into
 * its replies.  Each call makes the storage call (storage/cache/cache.h holds
 * the rules themselves: CAS, incr and decr, touch, sizes) and counts what
 * memcached counts for it in the calling worker's block (ts), so that a
 * rule or a counter exists once whatever the protocol.
 *
 * Keys come with their hash (the look-ahead's, lookahead_hash()).  Items
 * returned carry a reference for the caller (cache_release()).
 */
#ifndef MCPM_EXEC_H
#define MCPM_EXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memcached-pm/base/stats.h"
#include "storage/cache/cache.h"
#include "storage/cache/cache_delta.h"
#include "storage/cache/cache_peek.h"

/* ---- reads ------------------------------------------------------------ */

/* Count a read's hit on `it` (a get, or a gat/mg T when `touch`): the
 * command, its class's hits, the tier and the LRU segment that served
 * it. */
void exec_hit(struct thread_stats *ts, bool touch, const struct item *it);

/*
 * A plain get (or mg) through cache_peek() (doc/SHARED_WRITES.md), for
 * values of at most vmax bytes: on a hit, send(v, arg) queues the reply
 * (conn_out_view(): 0) or cannot (-1), and in both cases has ended the
 * peek (cache_peek_end(); conn_out_view() does).  The hit or the miss is
 * counted here.  1: a hit sent, 0: a miss, -1: nothing done, answer
 * through the lock path.  bump: the hit marks the item for the LRU
 * (fetched, then active); an mg with u does not.
 */
int exec_get_peek(struct thread_stats *ts, const struct prefetch_key *k,
                  uint32_t vmax, bool bump,
                  int (*send)(const struct cache_view *v, void *arg),
                  void *arg);

/* Count a read's miss, with its cause (expired, flushed). */
void exec_miss(struct thread_stats *ts, bool touch, enum cache_status st);

/* get/gets, and gat/gats when `touch` (new exptime): the item or NULL,
 * counted.  Inline: every GET comes through here. */
static inline struct item *
exec_get(struct thread_stats *ts, const char *key, size_t nkey, uint32_t hv,
         bool touch, rel_time_t exptime)
{
    enum cache_status st;
    struct item *it = touch ? cache_touch(key, nkey, hv, exptime, &st)
                            : cache_get(key, nkey, hv, &st);

    if (it == NULL) {
        exec_miss(ts, touch, st);
    } else {
        exec_hit(ts, touch, it);
    }
    return it;
}

/* mg: cache_mget(), counted as memcached counts mg (a miss as a get miss
 * even with T; a hit as a touch with T). */
struct item *exec_mget(struct thread_stats *ts, const char *key,
                       size_t nkey, uint32_t hv, struct cache_mget *a,
                       enum cache_status *st);

/* touch: a new exptime; cmd_touch and touch_hits or touch_misses. */
struct item *exec_touch(struct thread_stats *ts, const char *key,
                        size_t nkey, uint32_t hv, rel_time_t exptime);

/* ---- stores ----------------------------------------------------------- */

/*
 * The item a store's value is read into.  NULL when it cannot be had,
 * *st saying why (CACHE_TOO_LARGE: store_too_large, else
 * store_no_memory); a failed `set` also deletes the key, so that its old
 * value is not read back after the client was told the set failed.
 */
void exec_refused(struct thread_stats *ts, const char *key, size_t nkey,
                  uint32_t hv, bool is_set, enum cache_status st);

static inline struct item *
exec_alloc(struct thread_stats *ts, const char *key, size_t nkey,
           uint32_t hv, uint32_t client_flags, rel_time_t exptime,
           uint32_t vlen, bool is_set, enum cache_status *st)
{
    struct item *it = cache_alloc(key, nkey, hv, client_flags, exptime,
                                  vlen, st);

    if (it == NULL) {
        exec_refused(ts, key, nkey, hv, is_set, *st);
    }
    return it;
}

/* The value has been read: count the set (cmd_set), and whether it ends
 * in "\r\n" as it must. */
bool exec_data_ok(struct thread_stats *ts, const struct item *it);

/* Store it under a's rules (cache_mstore()); a compare counts cas_hits,
 * cas_badval or cas_misses. */
enum cache_status exec_store(struct thread_stats *ts, struct item *it,
                             struct cache_mstore *a);

/* ---- the rest ----------------------------------------------------------- */

/* Who deletes, for watch's deletions stream: memcached logs a text
 * delete and an md that removes, not a binary delete. */
enum exec_deleter { EXEC_DEL_BINARY, EXEC_DEL_TEXT, EXEC_DEL_META };

/* delete / md: delete_hits or delete_misses (a cas mismatch too). */
enum cache_status exec_delete(struct thread_stats *ts, const char *key,
                              size_t nkey, uint32_t hv,
                              struct cache_mdelete *a, enum exec_deleter by);

/* incr, decr / ma: incr_ or decr_hits (not for a counter N created) or
 * misses. */
enum cache_status exec_delta(struct thread_stats *ts, const char *key,
                             size_t nkey, uint32_t hv,
                             struct cache_mdelta *a);

/* flush_all: items stored up to the second before `delay` seconds from
 * now (0: now) read as missing from then on; cmd_flush. */
void exec_flush(struct thread_stats *ts, int64_t delay);


#endif
