/*
 * lookahead.h: batched lookups on the request path (storage/index/prefetch.h).
 *
 * Two kinds of batch, walked side by side before they run:
 *
 *   a multiget    its keys, prefetch_batch at a time (lookahead_window()
 *                 hashes the next window, lookahead_walk() walks it);
 *   a pipeline    when a read brings more than one request, the requests
 *                 whose bytes are all there are parsed ahead
 *                 (lookahead_pipeline()), their keys hashed and walked,
 *                 and they then run one by one from what was parsed
 *                 (lookahead_take()), their hashes reused
 *                 (lookahead_hash()).
 *
 * The state is per worker (struct lookahead), used by one connection at a
 * time: what was parsed ahead points into that connection's read buffer,
 * and is dropped (lookahead_drop()) before the buffer moves or the
 * connection goes.  Touched by its worker's thread only: no lock.
 */
#ifndef MCPM_LOOKAHEAD_H
#define MCPM_LOOKAHEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memcached-pm/base/stats.h"
#include "memcached-pm/conn/conn.h"
#include "proto/binary.h"
#include "proto/request.h"
#include "proto/text.h"
#include "proto/token.h"
#include "storage/base/hash.h"
#include "storage/index/prefetch.h"

#define NO_KEY PREFETCH_BATCH_MAX

/* A request of a pipeline parsed ahead; it runs from here instead of
 * being parsed a second time. */
struct ahead_req {
    size_t              off;     /* where it starts in the rbuf */
    size_t              len;     /* what the parser took: a text line, or
                                    a binary header, extras and key */
    struct prefetch_key key;     /* its first key, hashed and walked (key
                                    NULL: none) */
    unsigned            pf_at;   /* ... its place in the batch, or NO_KEY */
    union {
        struct request      req;     /* text */
        struct bin_request  bin;     /* binary */
    };
};

struct lookahead {
    struct prefetch_key  pf[PREFETCH_BATCH_MAX];  /* a batch being walked */
    /* ahead[next..n) parsed from conn's read buffer (NULL: none);
     * prefetch_batch entries. */
    struct ahead_req    *ahead;
    struct conn         *conn;
    unsigned             n, next;
    /* The running request's key as the look-ahead hashed it (key NULL:
     * none), so that it is not hashed again. */
    struct prefetch_key  memo;
};

/* Room for a batch of prefetch_batch requests.  0 or -1. */
int  lookahead_init(struct lookahead *la);
void lookahead_destroy(struct lookahead *la);

/*
 * The request `first` (parsed, `len` bytes of line) begins c's unread
 * bytes and more follow: parse the requests after it whose bytes are all
 * there, up to prefetch_batch keys of them, and walk their keys side by
 * side.  Returns the bytes covered from c->rstart (the caller looks
 * again past them); 0 when prefetch_batch is under 2.
 */
size_t lookahead_pipeline(struct conn *c, const struct request *first,
                          size_t len);

/* The next request parsed ahead for c, if it starts at c->rstart (else
 * NULL); its key's hash is kept for lookahead_hash(). */
struct ahead_req *lookahead_take(struct conn *c);

/*
 * The binary form of a pipeline (a run of GETKQ ... NOOP is the binary
 * multiget): the binary request `first` (`len` bytes parsed) begins c's
 * unread bytes and more follow; parse the requests after it that are all
 * there, up to prefetch_batch keys, and walk their keys.  Returns the
 * bytes covered from c->rstart.  They run from lookahead_take(), as the
 * text ones do.
 */
size_t lookahead_pipeline_bin(struct conn *c, const struct bin_request *first,
                              size_t len);

/* c's read buffer is about to move or be freed: forget what was parsed
 * from it. */
void lookahead_drop(struct conn *c);

/* The running request is done: its hash is forgotten. */
static inline void
lookahead_done(struct conn *c)
{
    c->la->memo.key = NULL;
}

/* hash_key(key, nkey), or the look-ahead's hash of those very bytes
 * when the running request was parsed by it. */
static inline uint32_t
lookahead_hash(const struct conn *c, const char *key, size_t nkey)
{
    const struct prefetch_key *m = &c->la->memo;

    if (m->key == key && m->nkey == nkey) {
        return m->hv;
    }
    return hash_key(key, nkey);
}

/* The running request's key: the look-ahead's (hashed, and walked with
 * the keys after it) when it parsed those very bytes, else *k, hashed
 * now. */
static inline const struct prefetch_key *
lookahead_key(const struct conn *c, const char *key, size_t nkey,
              struct prefetch_key *k)
{
    const struct prefetch_key *m = &c->la->memo;

    if (m->key == key && m->nkey == nkey) {
        return m;
    }
    prefetch_key_set(k, key, nkey, hash_key(key, nkey));
    return k;
}

/* Hash up to `max` more keys of a multiget key list into pf; how many.
 * c: the connection whose request it is (its hashes reused), or NULL. */
static inline unsigned
lookahead_keys(const struct conn *c, struct token *cursor,
               struct prefetch_key *pf, unsigned max)
{
    struct token key;
    unsigned n = 0;

    while (n < max && text_next_key(cursor, &key) > 0) {
        prefetch_key_set(&pf[n], key.p, key.len,
                         c != NULL ? lookahead_hash(c, key.p, key.len)
                                   : hash_key(key.p, key.len));
        n++;
    }
    return n;
}

/* lookahead_keys() into c's batch, returned in *pf.  Inline, as every
 * GET's key goes through it. */
static inline unsigned
lookahead_window(struct conn *c, struct token *cursor,
                 struct prefetch_key **pf, unsigned max)
{
    *pf = c->la->pf;
    return lookahead_keys(c, cursor, c->la->pf, max);
}

/* Walk the n keys of a batch side by side when there are two or more,
 * counting the batch (prefetch_batches, prefetch_keys). */
static inline void
lookahead_walk(struct conn *c, struct prefetch_key *pf, unsigned n)
{
    if (n > 1) {
        prefetch_walk(pf, n, true);
        STAT_INCR(c->stats->prefetch_batches);
        STAT_ADD(c->stats->prefetch_keys, n);
    }
}

#endif
