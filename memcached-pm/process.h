/*
 * process.h: a parsed request in, storage calls, replies queued on the
 * connection.  The only room of the daemon that calls storage/ for
 * requests.
 */
#ifndef MCPM_PROCESS_H
#define MCPM_PROCESS_H

#include "memcached-pm/conn.h"
#include "proto/request.h"
#include "storage/prefetch.h"

enum process_result {
    PROCESS_OK,          /* reply queued (or suppressed), parse on */
    PROCESS_NREAD,       /* c->nitem allocated: read its value next */
    PROCESS_SWALLOW,     /* c->swallow data bytes to discard next */
    PROCESS_CLOSE        /* close after writing what is queued */
};

/* Execute one request.  req's strings point into c's read buffer and stay
 * valid for the call only. */
enum process_result process_request(struct conn *c, struct request *req);

/* Walk the n keys of pf side by side (storage/prefetch.h) when there
 * are two or more, counting the batch. */
void process_prefetch(struct conn *c, struct prefetch_key *pf, unsigned n);

/*
 * A pipeline: the requests complete in buf[0, len), up to prefetch_batch
 * keys of them, have their keys hashed and walked side by side before
 * they run one by one.  Returns the bytes of the requests looked at (the
 * caller looks again past them); 0 when prefetch_batch is under 2.
 */
/* The look-ahead of a pipeline; see process.c. */
size_t process_prefetch_pipeline(struct conn *c, const struct request *first,
                                 size_t len);

/* The next request the look-ahead parsed for c, if it starts at
 * c->rstart (else NULL); its key's hash is kept for process_key_hash().
 * process_ahead_drop(): c's read buffer is about to move or be freed,
 * forget what was parsed from it. */
struct ahead_req *process_ahead_take(struct conn *c);
void process_ahead_drop(struct conn *c);

/* hash_murmur3(key, nkey), or the look-ahead's hash of those very bytes
 * when the running request was parsed by it. */
uint32_t process_key_hash(const struct conn *c, const char *key,
                          size_t nkey);

/* Count a hit on `it` for get (or touch when `touch`): per-class hits and
 * which LRU segment served it. */
void process_count_hit(struct conn *c, bool touch, const struct item *it);

/*
 * A store whose item could not be allocated (st: CACHE_TOO_LARGE or out of
 * memory): count it, queue memcached's SERVER_ERROR, drop the key's old
 * value when the store was a plain set (a failed set must not leave it
 * readable), and swallow the vlen-byte data block.
 */
enum process_result process_store_refused(struct conn *c,
                                          enum cache_status st,
                                          const char *key, size_t nkey,
                                          uint32_t hv, bool is_set,
                                          uint32_t vlen);

/* Count a miss for get (or touch), with its cause (expired, flushed). */
void process_count_miss(struct conn *c, bool touch, enum cache_status st);

/* The value of c->nitem has been read in full: check it, store it, reply,
 * and release the item. */
void process_store(struct conn *c);

#endif
