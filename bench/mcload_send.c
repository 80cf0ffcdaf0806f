/*
 * mcload_send.c: requests out: building text, meta and binary requests
 * into a connection's output buffer, keeping its depth (and --rate's
 * pace), writing and closing; UDP's framed datagrams.
 */
#include "config.h"

#include "bench/mcload_send.h"

#include "bench/mcload_hist.h"
#include "bench/mcload_keys.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int
buf_reserve(struct buf *b, size_t need)
{
    size_t cap;
    char *p;

    if (b->off > 0 && (b->off == b->len || b->cap - b->len < need)) {
        memmove(b->data, b->data + b->off, b->len - b->off);
        b->len -= b->off;
        b->off = 0;
    }
    if (b->cap - b->len >= need) {
        return 0;
    }
    cap = b->cap ? b->cap : READ_CHUNK;
    while (cap - b->len < need) {
        cap *= 2;
    }
    p = realloc(b->data, cap);
    if (p == NULL) {
        return -1;
    }
    b->data = p;
    b->cap = cap;
    return 0;
}

struct counters *
conn_counters(struct conn *c)
{
    return c->w->phase == PHASE_RUN ? &c->w->run : &c->w->pre;
}

static uint64_t
pick_key(struct worker *w)
{
    switch (w->phase == PHASE_PRELOAD ? DIST_SEQ : o.dist) {
    case DIST_ZIPF:
        return zipf_next(&w->zipf, &w->rng);
    case DIST_SEQ:
        if (w->seq_next >= w->seq_hi) {
            w->seq_next = w->seq_lo;
        }
        return w->seq_next++;
    case DIST_UNIFORM:
    default:
        return rng_next(&w->rng) % o.keys;
    }
}

/* A binary request header; the extras, key and value follow it. */
static char *
bin_header(char *p, uint8_t op, size_t keylen, uint8_t extlen,
           size_t bodylen)
{
    memset(p, 0, BIN_HDR);
    p[0] = (char)0x80;
    p[1] = (char)op;
    p[2] = (char)(keylen >> 8);
    p[3] = (char)keylen;
    p[4] = (char)extlen;
    p[8] = (char)(bodylen >> 24);
    p[9] = (char)(bodylen >> 16);
    p[10] = (char)(bodylen >> 8);
    p[11] = (char)bodylen;
    return p + BIN_HDR;
}

static int
put_set(struct buf *b, uint64_t idx)
{
    uint32_t n = vsize(idx);
    char *p;

    if (buf_reserve(b, MAX_KEY_LEN + 64 + n) < 0) {
        return -1;
    }
    p = b->data + b->len;
    if (o.proto == PROTO_BINARY) {
        char key[MAX_KEY_LEN + 24];
        size_t kl = key_format(key, idx);

        p = bin_header(p, BIN_SET, kl, 8, 8 + kl + n);
        memset(p, 0, 8);                /* flags and exptime */
        memcpy(p + 8, key, kl);
        memcpy(p + 8 + kl, vbytes(idx), n);
        b->len = (size_t)(p + 8 + kl + n - b->data);
        return 0;
    }
    if (o.proto == PROTO_TEXT) {
        memcpy(p, "set ", 4);
        p += 4;
        p += key_format(p, idx);
        p += sprintf(p, " 0 0 %" PRIu32 "\r\n", n);
    } else {
        memcpy(p, "ms ", 3);
        p += 3;
        p += key_format(p, idx);
        p += sprintf(p, " %" PRIu32 "\r\n", n);
    }
    memcpy(p, vbytes(idx), n);
    p += n;
    memcpy(p, "\r\n", 2);
    b->len = (size_t)(p + 2 - b->data);
    return 0;
}

static int
put_get(struct buf *b, const uint64_t *keys, int nkeys)
{
    char *p;

    if (buf_reserve(b, (size_t)(nkeys + 1) * (MAX_KEY_LEN + BIN_HDR + 24))
        < 0) {
        return -1;
    }
    p = b->data + b->len;
    if (o.proto == PROTO_BINARY) {
        /* One key: GETK.  More: GETKQ for each (misses are silent), then
         * NOOP, the binary multiget as libmemcached sends it. */
        for (int i = 0; i < nkeys; i++) {
            char key[MAX_KEY_LEN + 24];
            size_t kl = key_format(key, keys[i]);

            p = bin_header(p, nkeys == 1 ? BIN_GETK : BIN_GETKQ, kl, 0, kl);
            memcpy(p, key, kl);
            p += kl;
        }
        if (nkeys > 1) {
            p = bin_header(p, BIN_NOOP, 0, 0, 0);
        }
    } else if (o.proto == PROTO_TEXT) {
        memcpy(p, "get", 3);
        p += 3;
        for (int i = 0; i < nkeys; i++) {
            *p++ = ' ';
            p += key_format(p, keys[i]);
        }
        memcpy(p, "\r\n", 2);
        p += 2;
    } else {
        for (int i = 0; i < nkeys; i++) {
            memcpy(p, "mg ", 3);
            p += 3;
            p += key_format(p, keys[i]);
            memcpy(p, " v\r\n", 4);
            p += 4;
        }
    }
    b->len = (size_t)(p - b->data);
    return 0;
}

/* UDP: one request, framed, sent as a datagram of its own at once (the
 * out buffer is only where it is built). */
static int
udp_request(struct conn *c, bool get, const struct req *r)
{
    struct buf *b = &c->out;
    size_t start = b->len;
    char *f;
    int rc;

    if (buf_reserve(b, UDP_FRAME) < 0) {
        return -1;
    }
    b->len += UDP_FRAME;
    rc = get ? put_get(b, r->keys, r->nkeys) : put_set(b, r->keys[0]);
    if (rc < 0) {
        return -1;
    }
    f = b->data + start;
    memset(f, 0, UDP_FRAME);
    f[0] = (char)(c->udp_id >> 8);
    f[1] = (char)c->udp_id;
    f[5] = 1;                       /* one datagram */
    c->udp_id++;
    rc = send(c->fd, f, b->len - start, 0) < 0 ? -1 : 0;
    b->len = start;
    return rc;
}

/* UDP: take every datagram waiting, frames off, into the input.  0, or
 * -1 on a socket error. */
int
udp_receive(struct conn *c)
{
    char d[UDP_READ_MAX];

    for (;;) {
        ssize_t n = recv(c->fd, d, sizeof(d), 0);

        if (n < 0) {
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
        }
        if (n <= UDP_FRAME || buf_reserve(&c->in, (size_t)n) < 0) {
            continue;
        }
        memcpy(c->in.data + c->in.len, d + UDP_FRAME, (size_t)n - UDP_FRAME);
        c->in.len += (size_t)n - UDP_FRAME;
    }
}

/* --rate: the run may have sent (now - start) * rate / threads by now. */
bool
paced(const struct worker *w)
{
    return o.rate > 0 && w->phase == PHASE_RUN;
}

static bool
pace_allows(const struct worker *w)
{
    double due;

    if (!paced(w)) {
        return true;
    }
    due = (double)(now_ns() - w->t_start) * 1e-9 * o.rate / o.threads;
    return (double)w->paced < due;
}

static bool
may_send(struct conn *c)
{
    struct worker *w = c->w;

    return c->active && !w->stopping && w->budget > 0 &&
           c->inflight < o.depth && pace_allows(w);
}

/* Queue requests up to the pipeline depth; all share the send stamp. */
int
conn_fill(struct conn *c, uint64_t stamp)
{
    struct worker *w = c->w;

    while (may_send(c)) {
        int slot = (c->head + c->inflight) % o.depth;
        struct req *r = &c->ring[slot];
        bool get = w->phase == PHASE_RUN && rng_unit(&w->rng) < o.get_ratio;
        int rc;

        r->sent = stamp;
        r->cur = 0;
        r->nhits = 0;
        r->nerrs = 0;
        r->op = get ? OP_GET : OP_SET;
        r->nkeys = get ? o.multiget : 1;
        for (int i = 0; i < r->nkeys; i++) {
            r->keys[i] = pick_key(w);
        }
        if (o.udp) {
            rc = udp_request(c, get, r);
        } else {
            rc = get ? put_get(&c->out, r->keys, r->nkeys)
                     : put_set(&c->out, r->keys[0]);
        }
        if (rc < 0) {
            return -1;
        }
        c->inflight++;
        w->budget--;
        w->paced += paced(w);
    }
    return 0;
}

void
conn_flush(struct conn *c)
{
    struct buf *b = &c->out;

    while (b->off < b->len) {
        ssize_t n = c->tls ? tls_client_write(c->tls, b->data + b->off,
                                              b->len - b->off)
                           : write(c->fd, b->data + b->off, b->len - b->off);

        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                break;
            }
            conn_close(c, true);
            return;
        }
        b->off += (size_t)n;
    }
    if (b->off == b->len) {
        b->off = b->len = 0;
    }
    if ((b->off < b->len) != c->want_write) {
        c->want_write = b->off < b->len;
        if (c->want_write) {
            event_add(c->ev_write, NULL);
        } else {
            event_del(c->ev_write);
        }
    }
}

/* The worker's loop ends when its last connection goes idle or dies. */
static void
worker_conn_done(struct worker *w)
{
    w->active--;
    if (w->active == 0) {
        event_base_loopbreak(w->base);
    }
}

/* Retire an idle connection (keep the socket for the next phase). */
void
conn_idle(struct conn *c)
{
    event_del(c->ev_read);
    event_del(c->ev_write);
    c->want_write = false;
    c->active = false;
    worker_conn_done(c->w);
}

void
conn_close(struct conn *c, bool failed)
{
    struct counters *k = conn_counters(c);

    if (failed) {
        k->conn_errors++;
        k->errors += (uint64_t)c->inflight;
    }
    c->inflight = 0;
    event_del(c->ev_read);
    event_del(c->ev_write);
    close(c->fd);
    c->fd = -1;
    if (c->active) {
        c->active = false;
        worker_conn_done(c->w);
    }
}
