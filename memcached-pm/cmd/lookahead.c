/*
 * lookahead.c: multiget windows and the pipeline look-ahead
 * (lookahead.h).
 *
 * Locking: none; a worker's look-ahead is touched by its thread only, and
 * the walk it starts takes no lock (storage/index/prefetch.h).
 */
#include "config.h"

#include "memcached-pm/cmd/lookahead.h"

#include <stdlib.h>
#include <string.h>

#include "memcached-pm/base/settings.h"
#include "memcached-pm/base/stats.h"
#include "proto/binary.h"
#include "proto/text.h"
#include "storage/base/hash.h"

int
lookahead_init(struct lookahead *la)
{
    memset(la, 0, sizeof(*la));
    if (settings.prefetch_batch > 1) {
        la->ahead = calloc(settings.prefetch_batch, sizeof(*la->ahead));
        if (la->ahead == NULL) {
            return -1;
        }
    }
    return 0;
}

void
lookahead_destroy(struct lookahead *la)
{
    free(la->ahead);
    la->ahead = NULL;
}

/* The bytes of a request's data block after its line (with "\r\n"):
 * the stores and ms carry one.  SIZE_MAX when an ms length is bad (the
 * request will be refused; the scan stops there). */
static size_t
data_bytes(const struct request *req)
{
    uint32_t v;

    if (req_has_data(req->type)) {
        return (size_t)req->vlen + 2;
    }
    if (req->type == REQ_MS) {
        return req->ntokens >= 3 && token_u32(&req->tokens[2], &v)
               ? (size_t)v + 2 : SIZE_MAX;
    }
    return 0;
}

/* After the walk: the running request (first, whose key is pf[0] if it
 * has one) and the k parsed ahead keep their keys with the walk's
 * answers, since a multiget among them walks its own keys in this
 * batch's room. */
static void
keep_answers(struct lookahead *w, bool first_key, unsigned k)
{
    w->memo = first_key ? w->pf[0] : (struct prefetch_key){ 0 };
    for (unsigned i = 0; i < k; i++) {
        struct ahead_req *a = &w->ahead[i];

        a->key = a->pf_at != NO_KEY ? w->pf[a->pf_at]
                                    : (struct prefetch_key){ 0 };
    }
}

/* Add the keys a request will look up to pf[n..max); the new n. */
static unsigned
add_keys(const struct request *req, struct prefetch_key *pf, unsigned n,
         unsigned max)
{
    struct token key = req->key;

    switch (req->type) {
    case REQ_GET: case REQ_GETS: case REQ_GAT: case REQ_GATS: {
        struct token cursor = req->keys;

        return n + lookahead_keys(NULL, &cursor, pf + n, max - n);
    }
    case REQ_MG: case REQ_MS: case REQ_MD: case REQ_MA: case REQ_ME:
        if (req->ntokens < 2) {
            return n;
        }
        key = req->tokens[1];
        break;
    case REQ_SET: case REQ_ADD: case REQ_REPLACE: case REQ_APPEND:
    case REQ_PREPEND: case REQ_CAS: case REQ_DELETE: case REQ_INCR:
    case REQ_DECR: case REQ_TOUCH:
        break;
    default:
        return n;
    }
    if (key.len == 0 || key.len > PROTO_KEY_MAX) {
        return n;
    }
    prefetch_key_set(&pf[n], key.p, key.len, hash_key(key.p, key.len));
    return n + 1;
}

size_t
lookahead_pipeline(struct conn *c, const struct request *first, size_t len)
{
    struct lookahead *w = c->la;
    unsigned max = settings.prefetch_batch, n, k = 0;
    struct prefetch_key *pf = w->pf;
    const char *buf = c->rbuf + c->rstart;
    size_t have = c->rend - c->rstart, off = len;
    size_t data = data_bytes(first);
    bool first_key;

    if (max < 2 || first->type == REQ_ERROR || data > have - off) {
        return 0;
    }
    off += data;
    n = add_keys(first, pf, 0, max);
    first_key = n > 0;
    while (n < max && k < max && off < have) {
        struct ahead_req *a = &w->ahead[k];
        ssize_t line = text_parse(&a->req, buf + off, have - off);
        unsigned m;

        if (line <= 0 || a->req.type == REQ_ERROR) {
            break;
        }
        data = data_bytes(&a->req);
        if (data > have - off - (size_t)line) {
            break;
        }
        m = add_keys(&a->req, pf, n, max);
        a->pf_at = m > n ? n : NO_KEY;
        a->off = c->rstart + off;
        a->len = (size_t)line;
        n = m;
        k++;
        off += (size_t)line + data;
    }
    w->conn = k > 0 ? c : NULL;
    w->n = k;
    w->next = 0;
    lookahead_walk(c, pf, n);
    keep_answers(w, first_key, k);
    return off;
}

/* ---- binary pipelines ------------------------------------------------- */

/* Add a binary request's key to pf[n], if it has one; the new n. */
static unsigned
bin_add_key(const struct bin_request *r, struct prefetch_key *pf, unsigned n)
{
    if (r->cmd == BIN_CMD_ERROR || r->cmd == BIN_CMD_STAT ||
        r->cmd == BIN_CMD_SASL || r->key.len == 0) {
        return n;
    }
    prefetch_key_set(&pf[n], r->key.p, r->key.len,
                     hash_key(r->key.p, r->key.len));
    return n + 1;
}

/* The bytes a binary request takes in all: what bin_parse() read, and the
 * value that follows a store. */
static size_t
bin_bytes(const struct bin_request *r, size_t parsed)
{
    return parsed + (bin_has_value(r->cmd) ? r->vlen : 0);
}

size_t
lookahead_pipeline_bin(struct conn *c, const struct bin_request *first,
                       size_t len)
{
    struct lookahead *w = c->la;
    unsigned max = settings.prefetch_batch, n, k = 0;
    struct prefetch_key *pf = w->pf;
    const char *buf = c->rbuf + c->rstart;
    size_t have = c->rend - c->rstart, off = bin_bytes(first, len);
    bool first_key;

    if (max < 2 || off > have) {
        return 0;
    }
    n = bin_add_key(first, pf, 0);
    first_key = n > 0;
    while (n < max && k < max && off < have) {
        struct ahead_req *a = &w->ahead[k];
        ssize_t m = bin_parse(&a->bin, buf + off, have - off);
        unsigned more;

        if (m <= 0 || a->bin.cmd == BIN_CMD_ERROR ||
            bin_bytes(&a->bin, (size_t)m) > have - off) {
            break;
        }
        more = bin_add_key(&a->bin, pf, n);
        a->pf_at = more > n ? n : NO_KEY;
        a->off = c->rstart + off;
        a->len = (size_t)m;
        n = more;
        k++;
        off += bin_bytes(&a->bin, (size_t)m);
    }
    w->conn = k > 0 ? c : NULL;
    w->n = k;
    w->next = 0;
    lookahead_walk(c, pf, n);
    keep_answers(w, first_key, k);
    return off;
}

struct ahead_req *
lookahead_take(struct conn *c)
{
    struct lookahead *w = c->la;
    struct ahead_req *a;

    if (w->conn != c) {
        return NULL;
    }
    a = &w->ahead[w->next];
    if (a->off != c->rstart) {
        /* not where this connection is (cannot happen: a guard) */
        w->conn = NULL;
        return NULL;
    }
    if (++w->next == w->n) {
        w->conn = NULL;
    }
    w->memo = a->key;
    return a;
}

void
lookahead_drop(struct conn *c)
{
    if (c->la->conn == c) {
        c->la->conn = NULL;
    }
}


