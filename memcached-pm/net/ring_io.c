/*
 * ring_io.c: the sources of a worker's ring and the transport of its
 * streams (ring.h): waits, removal, and reads and sends through the
 * inbox and the ring; and the probe of what the kernel offers.
 */
#include "config.h"

#include "memcached-pm/net/ring_priv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

/* ---- sources ---------------------------------------------------------- */

struct ring_io *
ring_add(struct ring *r, int fd, bool poll, ring_cb cb, void *arg)
{
    struct ring_io *io = calloc(1, sizeof(*io));

    if (io == NULL) {
        return NULL;
    }
    io->r = r;
    io->fd = fd;
    io->slot = -1;
    io->poll = poll;
    io->cb = cb;
    io->arg = arg;
    io->in_head = io->in_tail = NO_BUF;
    if (!poll && r->nslots > 0) {
        /* its file registered with the others added before the next
         * submission: one system call for a worker's batch of adopted
         * connections, not one each */
        int slot = r->slots[r->nslots - 1];

        if (r->nreg == RING_REG_MAX ||
            (r->nreg > 0 && slot != r->reg_first + (int)r->nreg)) {
            ring_register(r);
        }
        if (r->nreg == 0) {
            r->reg_first = slot;
        }
        r->reg[r->nreg++] = io;
        io->slot = slot;
        r->nslots--;
    }
    return io;
}

void
ring_wait(struct ring_io *io, short what)
{
    struct ring *r = io->r;

    io->want = what;
    if (io->poll) {
        if (!io->poll_armed) {
            if (what != 0 && !io->queued) {
                ring_arm_poll(r, io);
            }
        } else if (io->polled != what && !io->poll_cancelled) {
            /* its completion re-arms it for what is wanted now */
            io->poll_cancelled = true;
            ring_cancel(r, ud(io, OP_POLL));
        }
        return;
    }
    if (what & EV_READ) {
        if (io->in_head != NO_BUF || io->eof || io->err != 0) {
            ring_ready(r, io, EV_READ);
        } else {
            ring_want_recv(r, io);
        }
    }
    if ((what & EV_WRITE) && !io->send_busy) {
        ring_ready(r, io, EV_WRITE);
    }
}

void
ring_again(struct ring_io *io, short what)
{
    ring_ready(io->r, io, what);
}

void
ring_remove(struct ring_io *io, void (*done)(void *arg), void *arg)
{
    struct ring *r = io->r;

    if (io->removed) {
        return;
    }
    io->removed = true;
    if (r->nreg > 0 && io->slot >= r->reg_first &&
        io->slot < r->reg_first + (int)r->nreg) {
        ring_register(r);       /* while its fd is open */
    }
    io->done = done;
    io->arg = arg;              /* cb is not called once removed */
    io->want = 0;
    if (io->starved) {
        struct ring_io **p = &r->starved;

        while (*p != io) {
            p = &(*p)->starved_next;
        }
        *p = io->starved_next;
        io->starved = false;
    }
    if (io->inflight > 0 && r->leaving) {
        /* let go of in bulk (ring_let_go()) */
    } else if (io->inflight > 0) {
        /* Each operation by its user_data: the kernel finds that in a
         * hash, where a cancel by fd walks every request of the ring (a
         * worker letting go of all its connections at a handover would
         * pay the square of their number). */
        STAT_INCR(r->stats->ring_close_deferred);
        if (io->recv_armed) {
            ring_cancel(r, ud(io, OP_RECV));
        }
        if (io->poll_armed && !io->poll_cancelled) {
            io->poll_cancelled = true;
            ring_cancel(r, ud(io, OP_POLL));
        }
        if (io->send_busy) {
            ring_cancel(r, ud(io, OP_SEND));
        }
    }
    io->removed_next = r->removed;
    r->removed = io;
}

void
ring_detach(struct ring_io *io, void (*done)(void *arg), void *arg)
{
    io->keep_inbox = true;
    ring_remove(io, done, arg);
}

/* ---- the transport ---------------------------------------------------- */

/* Copy up to n inbox bytes into dst, giving emptied buffers back. */
static size_t
inbox_take(struct ring *r, struct ring_io *io, char *dst, size_t n)
{
    size_t done = 0;

    while (done < n && io->in_head != NO_BUF) {
        int bid = io->in_head;
        size_t part = r->buf_len[bid] - io->in_off;

        if (part > n - done) {
            part = n - done;
        }
        memcpy(dst + done, r->bufs + (size_t)bid * r->buf_size + io->in_off,
               part);
        done += part;
        io->in_off += (unsigned)part;
        if (io->in_off == r->buf_len[bid]) {
            io->in_head = r->buf_next[bid];
            io->in_off = 0;
            io->in_bufs--;
            ring_buf_return(r, bid);
        }
    }
    return done;
}

static ssize_t
read_end(struct ring_io *io, size_t done)
{
    if (done > 0) {
        if (io->in_head == NO_BUF) {
            ring_want_recv(io->r, io);
        }
        return (ssize_t)done;
    }
    if (io->eof) {
        return 0;
    }
    if (io->err != 0) {
        errno = io->err;
        return -1;
    }
    ring_want_recv(io->r, io);
    errno = EAGAIN;
    return -1;
}

ssize_t
ring_read(struct ring_io *io, void *buf, size_t n)
{
    return read_end(io, inbox_take(io->r, io, buf, n));
}

ssize_t
ring_readv(struct ring_io *io, const struct iovec *iov, int n)
{
    size_t done = 0;

    for (int i = 0; i < n; i++) {
        size_t got = inbox_take(io->r, io, iov[i].iov_base, iov[i].iov_len);

        done += got;
        if (got < iov[i].iov_len) {
            break;
        }
    }
    return read_end(io, done);
}

ssize_t
ring_writev(struct ring_io *io, struct iovec *iov, size_t n)
{
    struct io_uring_sqe *sqe;
    size_t asked = 0;

    if (io->send_done) {
        io->send_done = false;
        if (io->send_res < 0) {
            errno = -io->send_res;
            return -1;
        }
        return io->send_res;
    }
    if (!io->send_busy && (sqe = ring_sqe(io->r)) != NULL) {
        /* writev, not sendmsg: the kernel takes the iovecs as it
         * submits, and the source keeps no msghdr (SIGPIPE is ignored,
         * so a peer gone answers EPIPE alike). */
        io_uring_prep_writev(sqe, ring_target(io), iov, (unsigned)n,
                             (uint64_t)-1);
        for (size_t i = 0; i < n; i++) {
            asked += iov[i].iov_len;
        }
        io->send_asked = asked > UINT32_MAX ? UINT32_MAX : (uint32_t)asked;
        ring_fixed(sqe, io);
        io_uring_sqe_set_data64(sqe, ud(io, OP_SEND));
        io->send_busy = true;
        io->inflight++;
    }
    errno = EAGAIN;
    return -1;
}

bool
ring_pending(const struct ring_io *io)
{
    return io->in_head != NO_BUF;
}

/* ---- the probe -------------------------------------------------------- */

/* The engine needs multishot receives into provided buffers: try one on
 * a socket pair. */
bool
ring_probe(char *why, size_t len)
{
    struct ring_config cfg = { .entries = 8, .buffers = 2, .buffer_size = 64 };
    struct ring *r = ring_new(&cfg, NULL, why, len);
    struct io_uring_sqe *sqe;
    struct io_uring_cqe *cqe;
    int sv[2];
    bool ok = false;

    if (r == NULL) {
        return false;
    }
    if (ring_enable(r) != 0 ||
        socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
        snprintf(why, len, "cannot start a ring");
        ring_free(r);
        return false;
    }
    sqe = io_uring_get_sqe(&r->uring);
    io_uring_prep_recv_multishot(sqe, sv[0], NULL, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = BGID;
    if (write(sv[1], "x", 1) == 1 &&
        io_uring_submit_and_wait(&r->uring, 1) >= 0 &&
        io_uring_peek_cqe(&r->uring, &cqe) == 0) {
        ok = cqe->res == 1 && (cqe->flags & IORING_CQE_F_MORE);
        if (!ok) {
            snprintf(why, len, "multishot receive: %s",
                     cqe->res < 0 ? strerror(-cqe->res) : "not kept");
        }
    } else {
        snprintf(why, len, "multishot receive: no completion");
    }
    close(sv[0]);
    close(sv[1]);
    ring_free(r);
    return ok;
}
