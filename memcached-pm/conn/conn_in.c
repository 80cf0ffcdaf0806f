/*
 * conn_in.c: a connection's input (conn_in.h): its read buffer, made
 * room in, grown for a long line, given back while idle under -o
 * read_buf_mem_limit; a value read into a new item, from the buffer and
 * then straight from the socket.
 *
 * Locking: the connection's worker alone.
 */
#include "config.h"

#include "memcached-pm/conn/conn_in.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "memcached-pm/net/transport.h"
#include "memcached-pm/watch/logger.h"

#define RBUF_MAX       (2 * 1024 * 1024)  /* longest multiget line */

/* Make room at the end of the read buffer: slide unparsed bytes to the
 * front, grow for a long multiget line, shrink an idle big buffer. */
static int
rbuf_room(struct conn *c)
{
    size_t have = c->rend - c->rstart;

    if (c->rbuf == NULL) {      /* given back while idle (conn_idle()) */
        if ((c->rbuf = conn_buf_rbuf(&c->list->buf, c->stats)) == NULL) {
            return -1;
        }
        c->rsize = CONN_RBUF_SIZE;
    }
    if (have == 0 && c->rsize > CONN_RBUF_SIZE) {
        char *small = malloc(CONN_RBUF_SIZE);
        if (small != NULL) {
            conn_buf_gauge_rbuf(&c->list->buf, 0, CONN_RBUF_SIZE - (int64_t)c->rsize);
            free(c->rbuf);
            c->rbuf = small;
            c->rsize = CONN_RBUF_SIZE;
        }
    }
    if (c->rstart > 0) {
        memmove(c->rbuf, c->rbuf + c->rstart, have);
        c->pf_end = c->pf_end > c->rstart ? c->pf_end - c->rstart : 0;
        c->rstart = 0;
        c->rend = have;
    }
    if (c->rend == c->rsize) {
        char *big;

        if (c->rsize >= RBUF_MAX || !conn_buf_may_grow(&c->list->buf, c->stats, c->rsize)) {
            return -1;
        }
        big = realloc(c->rbuf, c->rsize * 2);
        if (big == NULL) {
            return -1;
        }
        conn_buf_gauge_rbuf(&c->list->buf, 0, (int64_t)c->rsize);
        c->rbuf = big;
        c->rsize *= 2;
    }
    return 0;
}

/* A read's result as the callers take it: the bytes (counted), 0 when
 * the socket had none, -1 when it is closed or failed. */
static inline ssize_t
got_bytes(struct conn *c, ssize_t n)
{
    if (n > 0) {
        STAT_ADD(c->stats->bytes_read, (uint64_t)n);
        c->active = true;
        return n;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return 0;
    }
    if (n == 0) {
        c->close_reason = LOG_CLOSE_NORMAL;     /* the client hung up */
    }
    return -1;
}

ssize_t
conn_read(struct conn *c)
{
    ssize_t n;

    if (rbuf_room(c) != 0) {
        return -1;
    }
    n = io_read(c->fd, c->tls, c->rio, c->rbuf + c->rend, c->rsize - c->rend);
#ifdef ENABLE_TLS
    if (n > 0 && c->tls != NULL && !c->tls_named) {
        /* The handshake is done: keep the client's name where stats
         * conns can read it without the session. */
        char cn[64];

        tls_peer_cn(c->tls, cn, sizeof(cn));
        if (cn[0] != '\0') {
            c->peer_cn = strdup(cn);
        }
        __atomic_store_n(&c->tls_named, true, __ATOMIC_RELEASE);
    }
#endif
    if (n > 0) {
        c->read_short = (size_t)n < c->rsize - c->rend &&
                        !io_pending(c->tls, c->rio);
        c->rend += (size_t)n;
    }
    return got_bytes(c, n);
}

int
conn_fill_input(struct conn *c, const char *p, size_t n)
{
    size_t size = c->rsize > CONN_RBUF_SIZE ? c->rsize : CONN_RBUF_SIZE;

    while (size < n) {
        size *= 2;
    }
    if (size != c->rsize) {
        char *b = realloc(c->rbuf, size);

        if (b == NULL) {
            return -1;
        }
        conn_buf_gauge_rbuf(&c->list->buf, c->rbuf == NULL ? 1 : 0,
                        (int64_t)size - (int64_t)c->rsize);
        c->rbuf = b;
        c->rsize = size;
    }
    memcpy(c->rbuf, p, n);
    c->rstart = c->pf_end = 0;
    c->rend = n;
    return 0;
}

void
conn_nread_buffered(struct conn *c)
{
    size_t want = conn_value_len(c, c->nitem) - c->nread_off;
    size_t have = c->rend - c->rstart;
    size_t take = want < have ? want : have;
    struct iovec iov[16];
    size_t n, done = 0;

    while (done < take &&
           (n = conn_value_iov(c, c->nitem, c->nread_off, iov, 16)) > 0) {
        for (size_t i = 0; i < n && done < take; i++) {
            size_t part = iov[i].iov_len < take - done ? iov[i].iov_len
                          : take - done;

            memcpy(iov[i].iov_base, c->rbuf + c->rstart + done, part);
            done += part;
            c->nread_off += part;
        }
    }
    c->rstart += done;
}

ssize_t
conn_nread_direct(struct conn *c)
{
    struct iovec iov[64];
    size_t n = conn_value_iov(c, c->nitem, c->nread_off, iov, 64);
    ssize_t got = io_readv(c->fd, c->tls, c->rio, iov, (int)n);

    if (got > 0) {
        c->nread_off += (size_t)got;
        if (io_pending(c->tls, c->rio)) {
            c->read_short = false;  /* what follows the value is in TLS */
        }
    }
    return got_bytes(c, got);
}
