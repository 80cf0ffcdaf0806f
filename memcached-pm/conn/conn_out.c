/*
 * conn_out.c: a connection's reply queue (conn_out.h): lines copied into
 * an arena of blocks, values pointed at in item memory while the queue
 * holds a reference, sent with one writev; on a UDP socket the queue cut
 * into messages, one a request, copied out into datagrams.
 *
 * Locking: the connection's worker alone.
 */
#include "config.h"

#include "memcached-pm/conn/conn_out.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memcached-pm/base/log.h"
#include "memcached-pm/net/transport.h"
#include "proto/binary.h"
#include "storage/cache/cache.h"
#include "storage/cache/cache_peek.h"

#define IOV_KEEP       1024           /* iovec entries kept between
                                         requests */
#define IOV_BATCH      (IOV_MAX < 1024 ? IOV_MAX : 1024)

/* ---- output queue ----------------------------------------------------- */

int
conn_out_take(struct conn *c)
{
    if ((c->obuf_head = conn_buf_obuf(&c->list->buf)) == NULL) {
        return -1;
    }
    c->obuf_cur = c->obuf_head;
    return 0;
}

static int
iov_push(struct conn *c, void *base, size_t len)
{
    if (c->iov_len == c->iov_cap) {
        size_t cap = c->iov_cap ? c->iov_cap * 2 : CONN_IOV_MIN;
        struct iovec *iov = c->iov_cap ? realloc(c->iov, cap * sizeof(*iov))
                                       : conn_buf_iov(&c->list->buf);

        if (iov == NULL) {
            return -1;
        }
        c->iov = iov;
        c->iov_cap = cap;
    }
    c->iov[c->iov_len].iov_base = base;
    c->iov[c->iov_len].iov_len = len;
    c->iov_len++;
    c->out_bytes += len;
    return 0;
}

/* Point the queue at bytes just written into the current arena block,
 * growing the last iovec when it ends exactly there. */
static int
iov_push_arena(struct conn *c, char *p, size_t n)
{
    if (c->iov_len > c->iov_sent) {
        struct iovec *last = &c->iov[c->iov_len - 1];

        if ((char *)last->iov_base + last->iov_len == p) {
            last->iov_len += n;
            c->out_bytes += n;
            return 0;
        }
    }
    return iov_push(c, p, n);
}

/* A block with room for n bytes (n <= OBUF_SIZE), or NULL. */
static struct obuf *
arena_room(struct conn *c, size_t n)
{
    struct obuf *b = c->obuf_cur;

    if (OBUF_SIZE - b->used >= n) {
        return b;
    }
    if (b->next == NULL && (b->next = conn_buf_obuf(&c->list->buf)) == NULL) {
        return NULL;
    }
    b = b->next;
    b->used = 0;
    c->obuf_cur = b;
    return b;
}

char *
conn_out_reserve(struct conn *c, size_t n)
{
    struct obuf *b;

    if (n > OBUF_SIZE || (b = arena_room(c, n)) == NULL) {
        return NULL;
    }
    return b->data + b->used;
}

void
conn_out_commit_push(struct conn *c, size_t used)
{
    struct obuf *b = c->obuf_cur;
    char *p = b->data + b->used;

    if (c->noreply || used == 0) {
        return;
    }
    b->used += used;
    if (iov_push_arena(c, p, used) != 0) {
        b->used -= used;
        c->close_after_write = true;
    }
}

int
conn_out_any(struct conn *c, const char *s, size_t n)
{
    if (c->noreply) {
        return 0;
    }
    while (n > 0) {
        size_t part = n < OBUF_SIZE ? n : OBUF_SIZE;
        char *p = conn_out_reserve(c, part);

        if (p == NULL) {
            c->close_after_write = true;
            return -1;
        }
        memcpy(p, s, part);
        conn_out_commit(c, part);
        s += part;
        n -= part;
    }
    return 0;
}

void
conn_log_reply_line(const struct conn *c, const char *line, size_t n)
{
    if (n >= 2 && line[n - 2] == '\r') {
        n -= 2;
    }
    log_write(">%d %.*s", c->fd, (int)n, line);
}

int
conn_out_bin(struct conn *c, uint16_t status, uint64_t cas,
             const char *ext, uint8_t extlen, const char *key,
             uint16_t nkey, const char *val, uint32_t nval)
{
    char h[BIN_HEADER_LEN];

    bin_compose_header(h, c->bin_opcode, status, c->bin_opaque, cas, extlen,
                       nkey, (uint32_t)extlen + nkey + nval);
    if (settings.verbose > 1) {
        if (status != BIN_SUCCESS && status != BIN_AUTH_CONTINUE) {
            log_write(">%d Writing an error: %s", c->fd,
                      bin_status_text(status));
        }
        log_bin_header(c->fd, '>', "Writing bin response:",
                       (const unsigned char *)h);
    }
    return conn_out(c, h, sizeof(h)) || conn_out(c, ext, extlen) ||
           conn_out(c, key, nkey) || conn_out(c, val, nval) ? -1 : 0;
}

enum process_result
conn_swallow(struct conn *c, int rsp, uint64_t bytes)
{
    conn_out_rsp(c, rsp);
    c->swallow = bytes;
    return PROCESS_SWALLOW;
}

static int
refs_push(struct conn *c, struct item *it)
{
    if (c->nrefs == c->refs_cap) {
        size_t cap = c->refs_cap ? c->refs_cap * 2 : 32;
        struct item **refs = realloc(c->refs, cap * sizeof(*refs));

        if (refs == NULL) {
            return -1;
        }
        c->refs = refs;
        c->refs_cap = cap;
    }
    c->refs[c->nrefs++] = it;
    return 0;
}

/* A short value is copied after the bytes queued before it, and its item
 * let go at once: the reply stays one run of bytes (one iovec for the
 * kernel to walk, not three) and no reference waits for the write. */
static bool
value_copied(const struct conn *c, struct item *it)
{
    return conn_value_len(c, it) <= CONN_VALUE_COPY_MAX && !c->noreply &&
           !(item_flags(it) & ITEM_CHUNKED);
}

/* Commit `used` bytes written at the reserved position with the value
 * copied after them, and let the item go. */
static int
commit_with_value(struct conn *c, size_t used, struct item *it)
{
    struct obuf *b = c->obuf_cur;
    size_t n = conn_value_len(c, it);

    memcpy(b->data + b->used + used, item_value(it), n);
    conn_out_commit(c, used + n);
    cache_release(it);
    return 0;
}

int
conn_out_view(struct conn *c, const struct cache_view *v, size_t line_max,
              bool with_value,
              size_t (*line)(char *p, const struct cache_view *v, void *arg),
              void *arg)
{
    size_t vlen = !with_value ? 0
                  : v->vlen + (c->proto == CONN_BINARY ? 0 : 2);
    char *p = conn_out_reserve(c, line_max + vlen);
    size_t n = 0;

    if (p != NULL && (n = line(p, v, arg)) != 0) {
        memcpy(p + n, v->value, vlen);
    }
    if (!cache_peek_end(v) || n == 0) {
        return -1;
    }
    conn_out_commit(c, n + vlen);
    return 0;
}

char *
conn_out_reserve_value(struct conn *c, size_t line_max, struct item *it)
{
    return conn_out_reserve(c, line_max + (value_copied(c, it)
                                           ? conn_value_len(c, it) : 0));
}

int
conn_out_line_value(struct conn *c, size_t used, struct item *it)
{
    if (value_copied(c, it)) {
        return commit_with_value(c, used, it);
    }
    conn_out_commit(c, used);
    return conn_out_value(c, it);
}

int
conn_out_value(struct conn *c, struct item *it)
{
    struct iovec iov[16];
    size_t off = 0, n;

    if (value_copied(c, it) && conn_out_reserve(c, conn_value_len(c, it))) {
        return commit_with_value(c, 0, it);
    }
    if (refs_push(c, it) != 0) {
        cache_release(it);
        c->close_after_write = true;
        return -1;
    }
    while ((n = conn_value_iov(c, it, off, iov, 16)) > 0) {
        for (size_t i = 0; i < n; i++) {
            if (iov_push(c, iov[i].iov_base, iov[i].iov_len) != 0) {
                c->close_after_write = true;
                return -1;
            }
            off += iov[i].iov_len;
        }
    }
    return 0;
}

/* Everything sent: give references back and rewind the arena. */
static void
out_reset(struct conn *c)
{
    struct obuf *b = c->obuf_head, *extra;

    conn_release_refs(c);
    conn_resp_give_back(c);
    c->iov_len = c->iov_sent = 0;
    c->out_bytes = 0;
    if (b != NULL) {
        /* The first block stays for what the input still holds; the
         * rest go back to the worker. */
        while ((extra = b->next) != NULL) {
            b->next = extra->next;
            conn_buf_obuf_back(&c->list->buf, extra);
        }
        b->used = 0;
        c->obuf_cur = b;
    }
    if (c->iov_cap > IOV_KEEP) {
        free(c->iov);
        c->iov = NULL;
        c->iov_cap = 0;
    }
    if (c->refs_cap > IOV_KEEP) {
        free(c->refs);
        c->refs = NULL;
        c->refs_cap = 0;
    }
}

void
conn_out_discard(struct conn *c)
{
    out_reset(c);
}

int
conn_flush(struct conn *c)
{
    while (c->iov_sent < c->iov_len) {
        size_t left = c->iov_len - c->iov_sent;
        ssize_t n = io_writev(c->fd, c->tls, c->rio, &c->iov[c->iov_sent],
                              left < IOV_BATCH ? left : IOV_BATCH);

        if (n < 0) {
            return (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -1;
        }
        STAT_ADD(c->stats->bytes_written, (uint64_t)n);
        c->out_bytes -= (size_t)n;
        while (n > 0) {
            struct iovec *v = &c->iov[c->iov_sent];

            if ((size_t)n >= v->iov_len) {
                n -= (ssize_t)v->iov_len;
                c->iov_sent++;
            } else {
                v->iov_base = (char *)v->iov_base + n;
                v->iov_len -= (size_t)n;
                n = 0;
            }
        }
    }
    out_reset(c);
    return 1;
}

/* ---- UDP: the queue cut into messages -------------------------------- */

void
conn_msg_end(struct conn *c, bool keep_empty)
{
    size_t last = c->nmsgs > 0 ? c->msgs[c->nmsgs - 1].end : 0;

    if (c->out_bytes == last && !keep_empty) {
        return;
    }
    if (c->nmsgs == c->msgs_cap) {
        struct conn_msg *m = realloc(c->msgs, 2 * c->msgs_cap * sizeof(*m));

        if (m == NULL) {
            return;     /* the reply joins the message before it */
        }
        c->msgs = m;
        c->msgs_cap *= 2;
    }
    c->msgs[c->nmsgs].end = c->out_bytes;
    c->msgs[c->nmsgs].dgram = c->dgram;
    c->msgs[c->nmsgs].drop = false;
    c->nmsgs++;
}

size_t
conn_out_copy(struct conn *c, struct conn_out_pos *pos, char *dst, size_t n)
{
    size_t done = 0;

    while (done < n && pos->iov < c->iov_len) {
        const struct iovec *v = &c->iov[pos->iov];
        size_t part = v->iov_len - pos->off;

        if (part > n - done) {
            part = n - done;
        }
        if (dst != NULL) {
            memcpy(dst + done, (const char *)v->iov_base + pos->off, part);
        }
        done += part;
        pos->off += part;
        if (pos->off == v->iov_len) {
            pos->iov++;
            pos->off = 0;
        }
    }
    return done;
}

void
conn_out_sent(struct conn *c)
{
    conn_out_discard(c);
    c->nmsgs = 0;
}
