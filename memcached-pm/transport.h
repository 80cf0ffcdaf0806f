/*
 * transport.h: how a stream connection's bytes cross its socket, plain or
 * TLS (tls.h), behind one interface: read, readv, writev, pending, the
 * readiness to wait for, and close.
 *
 * conn.c is the only caller; the state machine asks only which readiness
 * to wait for.  The calls follow the system calls they replace: bytes,
 * 0 when the peer closed, -1 with errno (EAGAIN when the socket has no
 * room or no data).  A plain connection pays one predictable branch.
 */
#ifndef MCPM_TRANSPORT_H
#define MCPM_TRANSPORT_H

#include <errno.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <event2/event.h>

#include "memcached-pm/conn.h"
#include "memcached-pm/tls.h"

static inline ssize_t
io_read(struct conn *c, void *buf, size_t n)
{
#ifdef ENABLE_TLS
    if (c->tls != NULL) {
        return tls_read(c->tls, buf, n);
    }
#endif
    return read(c->fd, buf, n);
}

static inline ssize_t
io_readv(struct conn *c, const struct iovec *iov, int n)
{
#ifdef ENABLE_TLS
    if (c->tls != NULL) {
        return tls_readv(c->tls, iov, n);
    }
#endif
    return readv(c->fd, iov, n);
}

static inline ssize_t
io_writev(struct conn *c, struct iovec *iov, size_t n)
{
    struct msghdr msg = { .msg_iov = iov, .msg_iovlen = n };

#ifdef ENABLE_TLS
    if (c->tls != NULL) {
        return tls_writev(c->tls, iov, (int)n);
    }
#endif
    return sendmsg(c->fd, &msg, MSG_NOSIGNAL);
}

/* Bytes already taken off the socket wait for a read: polling would not
 * see them. */
static inline bool
io_pending(const struct conn *c)
{
#ifdef ENABLE_TLS
    return c->tls != NULL && tls_pending(c->tls);
#else
    (void)c;
    return false;
#endif
}

/* What to poll for after an EAGAIN: `usual` (EV_READ after a read,
 * EV_WRITE after a write), unless TLS waits for the other direction. */
static inline short
io_wait_for(const struct conn *c, short usual)
{
#ifdef ENABLE_TLS
    if (c->tls != NULL) {
        return tls_wants_write(c->tls) ? EV_WRITE : EV_READ;
    }
#endif
    return usual;
}

/* End the session (close_notify) before the socket closes. */
static inline void
io_close(struct conn *c)
{
#ifdef ENABLE_TLS
    tls_free(c->tls);
    c->tls = NULL;
#else
    (void)c;
#endif
}

#endif
