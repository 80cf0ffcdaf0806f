/*
 * ring_none.c: the io_uring engine's calls in a build without liburing
 * (configure --disable-io-uring, or liburing-dev missing): the probe
 * says so and the workers run on epoll, so nothing else is ever called.
 */
#include "config.h"

#include "memcached-pm/net/ring.h"

#include <errno.h>
#include <stdio.h>

bool
ring_probe(char *why, size_t len)
{
    snprintf(why, len, "built without liburing");
    return false;
}

struct ring *
ring_new(const struct ring_config *cfg, struct thread_stats *counters,
         char *why, size_t len)
{
    (void)cfg;
    (void)counters;
    ring_probe(why, len);
    return NULL;
}

void ring_free(struct ring *r) { (void)r; }
struct ring_io *
ring_add(struct ring *r, int fd, bool poll, ring_cb cb, void *arg)
{
    (void)r; (void)fd; (void)poll; (void)cb; (void)arg;
    return NULL;
}
void ring_wait(struct ring_io *io, short what) { (void)io; (void)what; }
void ring_again(struct ring_io *io, short what) { (void)io; (void)what; }
void
ring_remove(struct ring_io *io, void (*done)(void *arg), void *arg)
{
    (void)io;
    done(arg);
}
void
ring_detach(struct ring_io *io, void (*done)(void *arg), void *arg)
{
    (void)io;
    done(arg);
}
ssize_t
ring_read(struct ring_io *io, void *buf, size_t n)
{
    (void)io; (void)buf; (void)n;
    errno = ENOSYS;
    return -1;
}
ssize_t
ring_readv(struct ring_io *io, const struct iovec *iov, int n)
{
    (void)io; (void)iov; (void)n;
    errno = ENOSYS;
    return -1;
}
ssize_t
ring_writev(struct ring_io *io, struct iovec *iov, size_t n)
{
    (void)io; (void)iov; (void)n;
    errno = ENOSYS;
    return -1;
}
bool ring_pending(const struct ring_io *io) { (void)io; return false; }
void ring_set_tick(struct ring *r, ring_cb t, void *a) { (void)r; (void)t; (void)a; }
void ring_run(struct ring *r, void (*e)(void)) { (void)r; (void)e; }
void ring_break(struct ring *r) { (void)r; }
void ring_submit(struct ring *r) { (void)r; }
unsigned ring_pass(struct ring *r, bool wait) { (void)r; (void)wait; return 0; }

void ring_leave(struct ring *r) { (void)r; }
void ring_let_go(struct ring *r) { (void)r; }
