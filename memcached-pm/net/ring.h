/*
 * ring.h: the io_uring event engine (-o event_engine=io_uring): one ring
 * per worker in place of its libevent loop.
 *
 * A worker's sockets are sources on its ring.  A stream source (a plain
 * TCP or UNIX connection) is driven by completions: a multishot receive
 * fills buffers from the worker's provided-buffer ring into the source's
 * inbox, which ring_read() copies out; ring_writev() hands the reply to
 * a send that goes into the ring and returns EAGAIN, and the next call
 * once the send completed returns what it sent.  So the connection's
 * state machine reads and writes as it does on epoll, and every reply of
 * a loop pass goes out in the one io_uring_enter() that also waits for
 * the next pass.  A readiness source (TLS, UDP, the worker's eventfd)
 * gets a one-shot poll per wait, which is level-triggered epoll's
 * behaviour.
 *
 * The owner of a source says what it waits for (ring_wait()); when that
 * is ready, its callback runs, with EV_READ or EV_WRITE as libevent
 * passes them.  A source is removed with ring_remove(): its operations
 * are cancelled and its done() runs once none is left in the ring, so
 * the buffers a send points into live until the kernel is through.
 *
 * Everything here runs on the thread that owns the ring: no lock.
 */
#ifndef MCPM_RING_H
#define MCPM_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "memcached-pm/base/stats.h"

struct ring;
struct ring_io;

typedef void (*ring_cb)(int fd, short what, void *arg);

struct ring_config {
    unsigned entries;       /* submission queue; the completion queue
                               has four times as many */
    unsigned buffers;       /* provided receive buffers, a power of two */
    size_t   buffer_size;
    bool     sqpoll;        /* a kernel thread polls the submissions */
    unsigned files;         /* streams whose sockets are registered files
                               (no file lookup per operation); 0: none */
};

/* Whether this kernel runs what the engine needs (rings, provided buffer
 * rings, multishot receives); false with the reason in why. */
bool ring_probe(char *why, size_t len);

/* A ring for one worker, counting in counters; NULL with the reason
 * in why.  It may be made on another thread than the one that runs it
 * (ring_run() takes it over). */
struct ring *ring_new(const struct ring_config *cfg,
                      struct thread_stats *counters, char *why, size_t len);
void ring_free(struct ring *r);

/* A source on fd: a stream driven by completions, or (poll) one that
 * only learns readiness.  NULL when out of memory. */
struct ring_io *ring_add(struct ring *r, int fd, bool poll, ring_cb cb,
                         void *arg);

/* Wait for EV_READ and/or EV_WRITE (0: nothing) until said otherwise. */
void ring_wait(struct ring_io *io, short what);

/* Run the callback again in the next pass, with `what` (a yield). */
void ring_again(struct ring_io *io, short what);

/* Remove the source: cancel what it has in the ring; done(arg) runs in
 * a later pass once nothing of it is left there (then the fd may be
 * closed and what its last send pointed into freed). */
void ring_remove(struct ring_io *io, void (*done)(void *arg), void *arg);

/* As ring_remove(), but a stream source keeps in its inbox what its
 * receive still brings in until the ring is through with it, for done()
 * to take with ring_read() (a connection handed to another process takes
 * every byte it was sent). */
void ring_detach(struct ring_io *io, void (*done)(void *arg), void *arg);

/* The worker lets go of every source of the ring (a handover), in two
 * steps.  From ring_leave() on, a source removed submits no cancel of
 * its own: its receive stays armed, and what it still brings in is kept
 * for done().  Once every connection has left, ring_let_go() withdraws
 * the provided buffers: a receive finds none from then on and leaves the
 * bytes in the socket, for the process the socket went to.  A removed
 * source is then through as soon as its send is, and the n receives
 * still armed go with the ring, in bulk.  Cancelling each would cost the
 * kernel a step per connection in the clients' pause (and a cancel of
 * "any" walks the whole poll table per request it finds). */
void ring_leave(struct ring *r);
void ring_let_go(struct ring *r);

/* The transport calls for a stream source, as read(2), readv(2) and
 * writev(2) behave on a non-blocking socket: bytes, 0 at the end of the
 * stream, -1 with errno (EAGAIN: nothing yet).  ring_writev()'s iovecs
 * must stay as they are until a call returns what was sent; a write to
 * a peer gone raises SIGPIPE, which the process ignores (main.c). */
ssize_t ring_read(struct ring_io *io, void *buf, size_t n);
ssize_t ring_readv(struct ring_io *io, const struct iovec *iov, int n);
ssize_t ring_writev(struct ring_io *io, struct iovec *iov, size_t n);

/* Received bytes are waiting in the inbox. */
bool ring_pending(const struct ring_io *io);

/* Call tick(arg) about once a second from the loop. */
void ring_set_tick(struct ring *r, ring_cb tick, void *arg);

/*
 * Run the loop: each pass submits what the last one queued and waits
 * for completions, runs the callbacks of what is ready, frees the
 * removed sources the ring is through with, then calls end_pass()
 * (group commit; NULL: none).  ring_break() ends it once the removed
 * sources are gone.  ring_pass() is one pass, for tests: it waits only
 * when `wait` (and nothing is ready); it returns the callbacks run.
 */
void ring_run(struct ring *r, void (*end_pass)(void));

/* Hand what the last pass queued to the kernel now (a ring that another
 * loop waits on: ring_pass(), then this). */
void ring_submit(struct ring *r);
void ring_break(struct ring *r);
unsigned ring_pass(struct ring *r, bool wait);

#endif
