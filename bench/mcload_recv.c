/*
 * mcload_recv.c: replies in: every reply parsed and checked (framing,
 * key, size and value bytes) against the request it answers, its latency
 * recorded.
 */
#include "config.h"

#include "bench/mcload_recv.h"

#include "bench/mcload_hist.h"
#include "bench/mcload_keys.h"
#include "bench/mcload_send.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum parse { PARSE_DONE, PARSE_MORE, PARSE_BAD };

static bool
is_error_line(const char *line, size_t len)
{
    return (len == 5 && memcmp(line, "ERROR", 5) == 0) ||
           (len >= 6 && memcmp(line, "ERROR ", 6) == 0) ||
           (len >= 13 && memcmp(line, "CLIENT_ERROR ", 13) == 0) ||
           (len >= 12 && memcmp(line, "SERVER_ERROR", 12) == 0);
}

/* Key, size and bytes of a value block must be what we stored (a text
 * block with its "\r\n", a binary value alone). */
static bool
value_ok(uint64_t idx, const char *data, size_t n)
{
    if (n != vsize(idx)) {
        return false;
    }
    if (!o.verify) {
        return true;
    }
    return memcmp(data, vbytes(idx), n) == 0 &&
           (o.proto == PROTO_BINARY ||
            (data[n] == '\r' && data[n + 1] == '\n'));
}

static bool
key_is(uint64_t idx, const char *key, size_t klen)
{
    char want[MAX_KEY_LEN + 24];
    size_t n = key_format(want, idx);

    return n == klen && memcmp(want, key, n) == 0;
}

/*
 * Parses "<key> <flags> <bytes>" after "VALUE ".  Returns the byte count,
 * or -1 on a malformed line.
 */
static long
parse_value_line(const char *p, const char *end, const char **key,
                 size_t *klen)
{
    const char *sp = memchr(p, ' ', (size_t)(end - p));
    char *num_end;
    long n;

    if (sp == NULL) {
        return -1;
    }
    *key = p;
    *klen = (size_t)(sp - p);
    p = memchr(sp + 1, ' ', (size_t)(end - sp - 1));
    if (p == NULL) {
        return -1;
    }
    n = strtol(p + 1, &num_end, 10);
    if (num_end == p + 1 || n < 0 || (num_end != end && *num_end != ' ')) {
        return -1;
    }
    return n;
}

/* Finds which requested key (at or after r->cur) a VALUE line is for. */
static int
match_key(struct req *r, const char *key, size_t klen)
{
    for (int i = r->cur; i < r->nkeys; i++) {
        if (key_is(r->keys[i], key, klen)) {
            return i;
        }
    }
    return -1;
}

struct line {
    const char *p;      /* start of the line */
    size_t len;         /* without \r\n */
    size_t total;       /* with the line end */
    const char *rest;   /* bytes after the line */
    size_t avail;       /* how many of them are buffered */
};

static enum parse
parse_text_value(struct conn *c, struct req *r, const struct line *l,
                 size_t *used)
{
    struct counters *k = conn_counters(c);
    const char *key;
    size_t klen;
    long n = parse_value_line(l->p + 6, l->p + l->len, &key, &klen);
    int at;

    if (n < 0) {
        return PARSE_BAD;
    }
    if (l->avail < (size_t)n + 2) {
        return PARSE_MORE;
    }
    *used = l->total + (size_t)n + 2;
    at = match_key(r, key, klen);
    if (at < 0) {
        return PARSE_BAD;   /* a key we did not ask for: stream is lost */
    }
    r->cur = at + 1;
    /* a wrong value is still a hit to the server, and an error to us */
    r->nhits++;
    if (!value_ok(r->keys[at], l->rest, (size_t)n)) {
        k->errors++;
    }
    return PARSE_MORE;
}

/* One line of a text reply; PARSE_DONE when the request is answered. */
static enum parse
parse_text(struct conn *c, struct req *r, const struct line *l, size_t *used)
{
    struct counters *k = conn_counters(c);

    *used = l->total;
    if (r->op == OP_SET) {
        if (l->len == 6 && memcmp(l->p, "STORED", 6) == 0) {
            k->sets++;
        } else {
            k->errors++;
        }
        return PARSE_DONE;
    }
    if (l->len > 6 && memcmp(l->p, "VALUE ", 6) == 0) {
        *used = 0;
        return parse_text_value(c, r, l, used);
    }
    if (l->len == 3 && memcmp(l->p, "END", 3) == 0) {
        k->get_reqs++;
        k->get_keys += (uint64_t)r->nkeys;
        k->hits += (uint64_t)r->nhits;
        k->misses += (uint64_t)(r->nkeys - r->nhits);
        return PARSE_DONE;
    }
    if (is_error_line(l->p, l->len)) {
        k->errors++;
        return PARSE_DONE;
    }
    return PARSE_BAD;
}

static enum parse
parse_meta_value(struct conn *c, struct req *r, const struct line *l,
                 size_t *used)
{
    struct counters *k = conn_counters(c);
    char *end;
    long n = strtol(l->p + 3, &end, 10);

    if (end == l->p + 3 || n < 0 ||
        (end != l->p + l->len && *end != ' ')) {
        return PARSE_BAD;
    }
    if (l->avail < (size_t)n + 2) {
        *used = 0;
        return PARSE_MORE;
    }
    *used = l->total + (size_t)n + 2;
    r->nhits++;
    if (!value_ok(r->keys[r->cur], l->rest, (size_t)n)) {
        k->errors++;
    }
    return PARSE_DONE;
}

/* Called after each mg reply; counts the request once all are in. */
static enum parse
meta_get_step(struct counters *k, struct req *r)
{
    int answered;

    if (++r->cur < r->nkeys) {
        return PARSE_MORE;
    }
    /* a key answered with an error line is neither a hit nor a miss */
    answered = r->nkeys - r->nerrs;
    k->get_reqs++;
    k->get_keys += (uint64_t)answered;
    k->hits += (uint64_t)r->nhits;
    k->misses += (uint64_t)(answered - r->nhits);
    return PARSE_DONE;
}

/* One meta reply (to one mg or ms); a request of N mg needs N of them. */
static enum parse
parse_meta(struct conn *c, struct req *r, const struct line *l, size_t *used)
{
    struct counters *k = conn_counters(c);
    enum parse rc;

    *used = l->total;
    if (r->op == OP_SET) {
        if (l->len == 2 && memcmp(l->p, "HD", 2) == 0) {
            k->sets++;
        } else {
            k->errors++;
        }
        return PARSE_DONE;
    }
    if (l->len > 3 && memcmp(l->p, "VA ", 3) == 0) {
        rc = parse_meta_value(c, r, l, used);
        if (rc != PARSE_DONE) {
            return rc;
        }
    } else if (l->len == 2 && memcmp(l->p, "EN", 2) == 0) {
        /* a miss: counted below from nhits */
    } else if (is_error_line(l->p, l->len)) {
        k->errors++;
        r->nerrs++;
    } else {
        return PARSE_BAD;
    }
    return meta_get_step(k, r);
}

/* Splits the next line off the input; false if it is not complete yet. */
static bool
next_line(struct buf *b, struct line *l)
{
    size_t have = b->len - b->off;
    const char *p, *nl;

    /* Nothing buffered yet (a wake-up with no datagram): no buffer at
     * all, perhaps, and memchr() must not see its NULL. */
    if (have == 0) {
        return false;
    }
    p = b->data + b->off;
    nl = memchr(p, '\n', have);
    if (nl == NULL) {
        return false;
    }
    l->p = p;
    l->total = (size_t)(nl - p) + 1;
    l->len = l->total - 1;
    if (l->len > 0 && p[l->len - 1] == '\r') {
        l->len--;
    }
    l->rest = nl + 1;
    l->avail = have - l->total;
    return true;
}

static void
req_complete(struct conn *c, struct req *r, uint64_t now)
{
    struct counters *k = conn_counters(c);

    k->requests++;
    c->w->t_last = now;
    if (c->w->phase == PHASE_RUN) {
        hist_add(&c->w->hist, now > r->sent ? now - r->sent : 0);
    }
    c->head = (c->head + 1) % o.depth;
    c->inflight--;
}

static uint32_t
be32(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;

    return (uint32_t)u[0] << 24 | (uint32_t)u[1] << 16 |
           (uint32_t)u[2] << 8 | u[3];
}

/* One binary reply packet (header and body all buffered). */
static enum parse
parse_binary(struct conn *c, struct req *r, const char *p)
{
    struct counters *k = conn_counters(c);
    uint8_t op = (uint8_t)p[1], ext = (uint8_t)p[4];
    uint16_t kl = (uint16_t)((uint8_t)p[2] << 8 | (uint8_t)p[3]);
    uint16_t status = (uint16_t)((uint8_t)p[6] << 8 | (uint8_t)p[7]);
    uint32_t body = be32(p + 8);
    int at;

    if ((uint8_t)p[0] != 0x81 || (uint32_t)ext + kl > body) {
        return PARSE_BAD;
    }
    if (r->op == OP_SET) {
        if (op != BIN_SET) {
            return PARSE_BAD;
        }
        if (status == 0) {
            k->sets++;
        } else {
            k->errors++;
        }
        return PARSE_DONE;
    }
    if (op == BIN_NOOP || (op == BIN_GETK && r->nkeys == 1 && status != 0)) {
        if (status != 0 && status != 1) {
            k->errors++;
            return PARSE_DONE;
        }
        k->get_reqs++;
        k->get_keys += (uint64_t)r->nkeys;
        k->hits += (uint64_t)r->nhits;
        k->misses += (uint64_t)(r->nkeys - r->nhits);
        return PARSE_DONE;
    }
    if ((op != BIN_GETK && op != BIN_GETKQ) || status != 0 || ext != 4) {
        return PARSE_BAD;
    }
    at = match_key(r, p + BIN_HDR + ext, kl);
    if (at < 0) {
        return PARSE_BAD;
    }
    r->cur = at + 1;
    r->nhits++;
    if (!value_ok(r->keys[at], p + BIN_HDR + ext + kl, body - ext - kl)) {
        k->errors++;
    }
    if (r->nkeys == 1) {
        k->get_reqs++;
        k->get_keys++;
        k->hits++;
        return PARSE_DONE;
    }
    return PARSE_MORE;
}

/* The binary form of conn_parse(): whole packets off the input. */
static int
conn_parse_binary(struct conn *c, uint64_t now)
{
    struct buf *b = &c->in;

    while (c->inflight > 0 && b->len - b->off >= BIN_HDR) {
        const char *p = b->data + b->off;
        size_t need = BIN_HDR + (size_t)be32(p + 8);
        struct req *r = &c->ring[c->head];
        enum parse rc;

        if (need > (size_t)o.vmax + MAX_KEY_LEN + 4 + BIN_HDR + MAX_LINE) {
            conn_counters(c)->errors++;
            return -1;      /* no reply of ours is that long */
        }
        if (b->len - b->off < need) {
            break;
        }
        rc = parse_binary(c, r, p);
        if (rc == PARSE_BAD) {
            conn_counters(c)->errors++;
            return -1;
        }
        b->off += need;
        if (rc == PARSE_DONE) {
            req_complete(c, r, now);
        }
    }
    if (c->inflight == 0 && b->off < b->len) {
        conn_counters(c)->errors++;     /* bytes nobody asked for */
        return -1;
    }
    return 0;
}

/* Consumes every complete reply; -1 when the stream cannot be trusted. */
int
conn_parse(struct conn *c, uint64_t now)
{
    struct line l;

    if (o.proto == PROTO_BINARY) {
        return conn_parse_binary(c, now);
    }

    while (c->inflight > 0 && next_line(&c->in, &l)) {
        struct req *r = &c->ring[c->head];
        size_t used = 0;
        enum parse rc = o.proto == PROTO_TEXT ? parse_text(c, r, &l, &used)
                                              : parse_meta(c, r, &l, &used);

        if (rc == PARSE_BAD) {
            conn_counters(c)->errors++;
            return -1;
        }
        if (used == 0) {
            break;      /* a value block is still on its way */
        }
        c->in.off += used;
        if (rc == PARSE_DONE) {
            req_complete(c, r, now);
        }
    }
    if (c->inflight == 0 && c->in.off < c->in.len) {
        conn_counters(c)->errors++;     /* bytes nobody asked for */
        return -1;
    }
    if (c->in.len - c->in.off > MAX_LINE &&
        memchr(c->in.data + c->in.off, '\n', MAX_LINE) == NULL) {
        return -1;
    }
    return 0;
}

/* After replies: top the pipeline up, or retire the connection. */
void
conn_advance(struct conn *c)
{
    if (c->fd < 0) {
        return;
    }
    if (conn_fill(c, now_ns()) < 0) {
        conn_close(c, true);
        return;
    }
    if (c->inflight == 0) {
        struct worker *w = c->w;

        if (paced(w) && !w->stopping && w->budget > 0) {
            return;             /* the pace timer lets the next out */
        }
        conn_idle(c);
        return;
    }
    conn_flush(c);
}
