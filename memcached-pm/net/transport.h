/*
 * transport.h: how a stream connection's bytes cross its socket, plain or
 * TLS (tls.h), behind one interface: read, readv, writev, pending, the
 * readiness to wait for, and close.
 *
 * A connection is its socket, its TLS session (NULL: plain) and, under
 * the io_uring engine, its source on the worker's ring (ring.h; NULL on
 * epoll, and for TLS, which the ring only polls).  conn.c is the only
 * caller; the state machine asks only which readiness to wait for.  The
 * calls follow the system calls they replace: bytes, 0 when the peer
 * closed, -1 with errno (EAGAIN when the socket has no room or no data).
 * A plain connection pays two predictable branches.
 */
#ifndef MCPM_TRANSPORT_H
#define MCPM_TRANSPORT_H

#include <errno.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <event2/event.h>

#include "memcached-pm/net/ring.h"
#include "memcached-pm/net/sys.h"
#include "memcached-pm/security/tls.h"

/*
 * The system calls themselves.  glibc's read(), readv() and sendmsg() are
 * cancellation points: in a process with threads each call turns the
 * thread's asynchronous cancellation on and off around the system call,
 * two atomic read-modify-writes and about 30 instructions, a third of
 * what a GET spent in libc.  No worker is ever cancelled, so the plain
 * transport enters the kernel itself (sys.h).
 */
static inline ssize_t
sys_read(int fd, void *buf, size_t n)
{
    return sys_call3(SYS_read, fd, (long)buf, (long)n);
}

static inline ssize_t
sys_readv(int fd, const struct iovec *iov, int n)
{
    return sys_call3(SYS_readv, fd, (long)iov, n);
}

static inline ssize_t
sys_sendmsg(int fd, const struct msghdr *msg, int flags)
{
#ifdef SYS_sendmsg
    return sys_call3(SYS_sendmsg, fd, (long)msg, flags);
#else
    return sendmsg(fd, msg, flags);
#endif
}

static inline ssize_t
io_read(int fd, struct tls *tls, struct ring_io *rio, void *buf, size_t n)
{
#ifdef ENABLE_TLS
    if (tls != NULL) {
        return tls_read(tls, buf, n);
    }
#else
    (void)tls;
#endif
    if (rio != NULL) {
        return ring_read(rio, buf, n);
    }
    return sys_read(fd, buf, n);
}

static inline ssize_t
io_readv(int fd, struct tls *tls, struct ring_io *rio,
         const struct iovec *iov, int n)
{
#ifdef ENABLE_TLS
    if (tls != NULL) {
        return tls_readv(tls, iov, n);
    }
#else
    (void)tls;
#endif
    if (rio != NULL) {
        return ring_readv(rio, iov, n);
    }
    return sys_readv(fd, iov, n);
}

static inline ssize_t
io_writev(int fd, struct tls *tls, struct ring_io *rio, struct iovec *iov,
          size_t n)
{
    struct msghdr msg = { .msg_iov = iov, .msg_iovlen = n };

#ifdef ENABLE_TLS
    if (tls != NULL) {
        return tls_writev(tls, iov, (int)n);
    }
#else
    (void)tls;
#endif
    if (rio != NULL) {
        return ring_writev(rio, iov, n);
    }
    return sys_sendmsg(fd, &msg, MSG_NOSIGNAL);
}

/* Bytes already taken off the socket wait for a read: polling would not
 * see them. */
static inline bool
io_pending(const struct tls *tls, const struct ring_io *rio)
{
#ifdef ENABLE_TLS
    if (tls != NULL) {
        return tls_pending(tls);
    }
#else
    (void)tls;
#endif
    return rio != NULL && ring_pending(rio);
}

/* What to poll for after an EAGAIN: `usual` (EV_READ after a read,
 * EV_WRITE after a write), unless TLS waits for the other direction. */
static inline short
io_wait_for(const struct tls *tls, short usual)
{
#ifdef ENABLE_TLS
    if (tls != NULL) {
        return tls_wants_write(tls) ? EV_WRITE : EV_READ;
    }
#else
    (void)tls;
#endif
    return usual;
}

/* End the session (close_notify) before the socket closes. */
static inline void
io_close(struct tls **tls)
{
#ifdef ENABLE_TLS
    tls_free(*tls);
#endif
    *tls = NULL;
}

#endif
