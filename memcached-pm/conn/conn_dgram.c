/*
 * conn_dgram.c: a connection's reply queue cut into messages, for UDP
 * (conn.h): where each request's reply ends, and the queue's bytes copied
 * out in order into datagrams.
 *
 * Locking: the connection's worker alone.
 */
#include "config.h"

#include "memcached-pm/conn/conn.h"

#include <stdlib.h>
#include <string.h>

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
