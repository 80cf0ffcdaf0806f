/*
 * ring.c: the io_uring event engine (ring.h): a worker's ring, its
 * provided buffers, its completions and its loop.
 *
 * user_data of every operation is its source's address with the kind of
 * operation in the low bits (sources are malloc()ed, so 16-aligned);
 * operations whose completions say nothing (cancels) carry OP_NONE.
 * Completions only record what happened and queue the source on the
 * ready list; callbacks run after the whole batch is in, so a callback
 * never runs inside another and a source is freed only between passes.
 */
#include "config.h"

#include "memcached-pm/net/ring_priv.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define RING_BUFS_FIRST 8       /* receive buffers the kernel has at first */

#include <event2/event.h>

/* ---- set-up ----------------------------------------------------------- */

/* Ring flags, best first: a single issuer whose completions run when it
 * asks for them (no interrupting task work), then without. */
static int
queue_init(struct io_uring *u, const struct ring_config *cfg, bool disabled)
{
    static const unsigned tries[] = {
        IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
        IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN,
        IORING_SETUP_COOP_TASKRUN,
        0
    };
    int rc = -EINVAL;

    for (size_t i = 0; i < sizeof(tries) / sizeof(tries[0]); i++) {
        struct io_uring_params p;

        memset(&p, 0, sizeof(p));
        p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_SUBMIT_ALL |
                  (disabled ? IORING_SETUP_R_DISABLED : 0);
        p.cq_entries = 4 * cfg->entries;
        if (cfg->sqpoll) {
            /* a poller thread submits: no deferred task work */
            p.flags |= IORING_SETUP_SQPOLL |
                       (tries[i] & IORING_SETUP_SINGLE_ISSUER);
            p.sq_thread_idle = 1000;
        } else {
            p.flags |= tries[i];
        }
        rc = io_uring_queue_init_params(cfg->entries, u, &p);
        if (rc != -EINVAL) {
            return rc;
        }
    }
    return rc;
}

/* Publish the buffers given back since the last submission. */
static void
publish_bufs(struct ring *r)
{
    if (r->returned > 0) {
        io_uring_buf_ring_advance(r->br, (int)r->returned);
        r->returned = 0;
    }
}

/*
 * Hand the kernel n more of the buffers it has not had yet (at most what
 * is left); false when it has had them all.  They go out a few at first
 * and more as receives find none: a worker whose connections send little
 * touches a few pages of its buffers, not all of them (a receive writes
 * a buffer's first page, and the ring hands them out in turn).
 */
static bool
provide_more(struct ring *r, unsigned n)
{
    int mask = io_uring_buf_ring_mask(r->nbufs);

    if (n > r->nbufs - r->provided) {
        n = r->nbufs - r->provided;
    }
    for (unsigned i = 0; i < n; i++) {
        unsigned bid = r->provided + i;

        io_uring_buf_ring_add(r->br, r->bufs + (size_t)bid * r->buf_size,
                              (unsigned)r->buf_size, (unsigned short)bid,
                              mask, (int)r->returned++);
    }
    r->provided += n;
    r->free_bufs += n;
    return n > 0;
}

static int
bufs_init(struct ring *r, const struct ring_config *cfg)
{
    struct io_uring_buf_reg reg;
    int rc;

    r->nbufs = cfg->buffers;
    r->buf_size = cfg->buffer_size;
    r->br_bytes = cfg->buffers * sizeof(struct io_uring_buf);
    r->br = mmap(NULL, r->br_bytes, PROT_READ | PROT_WRITE,
                 MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
    if (r->br == MAP_FAILED) {
        r->br = NULL;
        return -errno;
    }
    r->bufs = malloc(cfg->buffers * cfg->buffer_size);
    r->buf_next = malloc(cfg->buffers * sizeof(*r->buf_next));
    r->buf_len = malloc(cfg->buffers * sizeof(*r->buf_len));
    if (r->bufs == NULL || r->buf_next == NULL || r->buf_len == NULL) {
        return -ENOMEM;
    }
    memset(&reg, 0, sizeof(reg));
    reg.ring_addr = (uint64_t)(uintptr_t)r->br;
    reg.ring_entries = cfg->buffers;
    reg.bgid = BGID;
    rc = io_uring_register_buf_ring(&r->uring, &reg, 0);
    if (rc != 0) {
        return rc;
    }
    io_uring_buf_ring_init(r->br);
    provide_more(r, RING_BUFS_FIRST);
    publish_bufs(r);
    r->inbox_max = cfg->buffers >= 16 ? cfg->buffers / 8 : 2;
    return 0;
}

struct ring *
ring_new(const struct ring_config *cfg, struct thread_stats *counters,
         char *why, size_t len)
{
    struct ring *r = calloc(1, sizeof(*r));
    int rc;

    if (r == NULL) {
        snprintf(why, len, "out of memory");
        return NULL;
    }
    r->stats = counters;
    r->ready_tail = &r->ready;
    rc = queue_init(&r->uring, cfg, true);
    if (rc != 0) {
        snprintf(why, len, "io_uring_setup: %s", strerror(-rc));
        free(r);
        return NULL;
    }
    rc = bufs_init(r, cfg);
    if (rc != 0) {
        snprintf(why, len, "provided buffers: %s", strerror(-rc));
        ring_free(r);
        return NULL;
    }
    /* A table the kernel could not give leaves streams on plain fds. */
    if (cfg->files > 0 && (r->slots = malloc(cfg->files * sizeof(int))) &&
        io_uring_register_files_sparse(&r->uring, cfg->files) == 0) {
        while (r->nslots < cfg->files) {
            r->slots[r->nslots] = (int)(cfg->files - 1 - r->nslots);
            r->nslots++;
        }
    }
    return r;
}

void
ring_free(struct ring *r)
{
    if (r == NULL) {
        return;
    }
    io_uring_queue_exit(&r->uring);
    if (r->br != NULL) {
        munmap(r->br, r->br_bytes);
    }
    while (r->removed != NULL) {
        struct ring_io *io = r->removed;

        r->removed = io->removed_next;
        free(io);
    }
    while (r->husks != NULL) {
        struct ring_io *io = r->husks;

        r->husks = io->removed_next;
        free(io);
    }
    free(r->slots);
    free(r->bufs);
    free(r->buf_next);
    free(r->buf_len);
    free(r);
}

/* Start a ring made disabled, on the thread that will submit to it
 * (liburing 2.3 declares io_uring_enable_rings() but does not export
 * it). */
int
ring_enable(struct ring *r)
{
    return (int)syscall(__NR_io_uring_register, r->uring.ring_fd,
                        IORING_REGISTER_ENABLE_RINGS, NULL, 0);
}

/* ---- submissions ------------------------------------------------------ */

static void reap(struct ring *r);

/* The operations not yet submitted that name one of the n slots from
 * first by the table: by their sources' fds instead. */
static void
by_fd(struct ring *r, int first, unsigned n)
{
    struct io_uring_sq *sq = &r->uring.sq;

    for (unsigned h = sq->sqe_head; h != sq->sqe_tail; h++) {
        struct io_uring_sqe *sqe = &sq->sqes[h & sq->ring_mask];

        if ((sqe->flags & IOSQE_FIXED_FILE) && sqe->fd >= first &&
            sqe->fd < first + (int)n) {
            sqe->fd = r->reg[sqe->fd - r->reg_first]->fd;
            sqe->flags &= (uint8_t)~IOSQE_FIXED_FILE;
        }
    }
}

void
ring_register(struct ring *r)
{
    int fds[RING_REG_MAX];
    unsigned n = r->nreg;
    int rc;

    if (n == 0) {
        return;
    }
    for (unsigned i = 0; i < n; i++) {
        fds[i] = r->reg[i]->fd;
    }
    rc = io_uring_register_files_update(&r->uring, (unsigned)r->reg_first,
                                        fds, n);
    if (rc < (int)n) {
        /* the table would not take them: they go by fd, as without one */
        unsigned done = rc > 0 ? (unsigned)rc : 0;

        by_fd(r, r->reg_first + (int)done, n - done);
        for (unsigned i = done; i < n; i++) {
            r->reg[i]->slot = -1;
            r->slots[r->nslots++] = r->reg_first + (int)i;
        }
    }
    r->nreg = 0;
}

static int
submit(struct ring *r)
{
    ring_register(r);
    publish_bufs(r);
    return io_uring_submit(&r->uring);
}

/* Submit, and take the completions in (a ring with deferred task work
 * posts them only when asked): waiting for one, or not. */
static int
submit_and_get(struct ring *r, bool wait)
{
    ring_register(r);
    publish_bufs(r);
    return wait ? io_uring_submit_and_wait(&r->uring, 1)
                : io_uring_submit_and_get_events(&r->uring);
}

/* A free submission slot; when the queue is full, what is in it goes to
 * the kernel first (and completions are taken in if that is refused). */
struct io_uring_sqe *
ring_sqe(struct ring *r)
{
    struct io_uring_sqe *sqe;

    while ((sqe = io_uring_get_sqe(&r->uring)) == NULL) {
        if (!r->enabled) {
            return NULL;
        }
        if (submit(r) < 0 && !r->reaping) {
            reap(r);    /* the kernel wants its completions taken first */
        }
    }
    return sqe;
}

void
ring_buf_return(struct ring *r, int bid)
{
    io_uring_buf_ring_add(r->br, r->bufs + (size_t)bid * r->buf_size,
                          (unsigned)r->buf_size, (unsigned short)bid,
                          io_uring_buf_ring_mask(r->nbufs), (int)r->returned);
    r->returned++;
    r->free_bufs++;
}

void
ring_ready(struct ring *r, struct ring_io *io, short what)
{
    io->fired |= what;
    if (!io->queued) {
        io->queued = true;
        io->ready_next = NULL;
        *r->ready_tail = io;
        r->ready_tail = &io->ready_next;
    }
}

/* A slot for one of io's own operations; NULL when the ring has not been
 * taken over yet: io is queued so that the first pass arms it. */
static struct io_uring_sqe *
sqe_for(struct ring *r, struct ring_io *io)
{
    if (!r->enabled) {
        ring_ready(r, io, 0);
        return NULL;
    }
    return ring_sqe(r);
}

static void
arm_recv(struct ring *r, struct ring_io *io)
{
    struct io_uring_sqe *sqe = sqe_for(r, io);

    if (sqe == NULL) {
        return;
    }
    io_uring_prep_recv_multishot(sqe, ring_target(io), NULL, 0, 0);
    ring_fixed(sqe, io);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = BGID;
    io_uring_sqe_set_data64(sqe, ud(io, OP_RECV));
    io->recv_armed = true;
    io->recv_paused = false;
    io->inflight++;
}

/* Keep a receive armed while the source reads: after its inbox drained,
 * and only once there is a buffer for it. */
void
ring_want_recv(struct ring *r, struct ring_io *io)
{
    if (io->poll || io->removed || io->recv_armed || io->eof ||
        io->err != 0 || io->in_bufs > 0) {
        return;
    }
    if (r->free_bufs == 0) {
        if (!io->starved) {
            io->starved = true;
            io->starved_next = r->starved;
            r->starved = io;
        }
        return;
    }
    arm_recv(r, io);
}

void
ring_cancel(struct ring *r, uint64_t what)
{
    struct io_uring_sqe *sqe = ring_sqe(r);

    if (sqe != NULL) {
        io_uring_prep_cancel64(sqe, what, 0);
        io_uring_sqe_set_data64(sqe, ud(NULL, OP_NONE));
    }
}

void
ring_arm_poll(struct ring *r, struct ring_io *io)
{
    unsigned mask = ((io->want & EV_READ) ? POLLIN : 0) |
                    ((io->want & EV_WRITE) ? POLLOUT : 0);
    struct io_uring_sqe *sqe = sqe_for(r, io);

    if (sqe == NULL) {
        return;
    }
    io_uring_prep_poll_add(sqe, io->fd, mask);
    io_uring_sqe_set_data64(sqe, ud(io, OP_POLL));
    io->polled = io->want;
    io->poll_armed = true;
    io->poll_cancelled = false;
    io->inflight++;
}

static void
arm_tick(struct ring *r)
{
    struct io_uring_sqe *sqe;

    if (!r->enabled || (sqe = ring_sqe(r)) == NULL) {
        return;     /* take_over() arms it */
    }
    r->tick_ts.tv_sec = 1;
    r->tick_ts.tv_nsec = 0;
    io_uring_prep_timeout(sqe, &r->tick_ts, 0, 0);
    io_uring_sqe_set_data64(sqe, ud(r, OP_TIMER));
    r->tick_armed = true;
}

/* ---- completions ------------------------------------------------------ */

static void
inbox_push(struct ring *r, struct ring_io *io, int bid, unsigned n)
{
    r->buf_len[bid] = n;
    r->buf_next[bid] = NO_BUF;
    if (io->in_head == NO_BUF) {
        io->in_head = bid;
        io->in_off = 0;
    } else {
        r->buf_next[io->in_tail] = bid;
    }
    io->in_tail = bid;
    io->in_bufs++;
}

static void
got_recv(struct ring *r, struct ring_io *io, const struct io_uring_cqe *cqe)
{
    if (!(cqe->flags & IORING_CQE_F_MORE)) {
        io->recv_armed = false;
        io->inflight--;
    }
    if (cqe->flags & IORING_CQE_F_BUFFER) {
        int bid = (int)(cqe->flags >> IORING_CQE_BUFFER_SHIFT);

        r->free_bufs--;
        if ((io->removed && !io->keep_inbox) || cqe->res <= 0) {
            ring_buf_return(r, bid);
            return;
        }
        inbox_push(r, io, bid, (unsigned)cqe->res);
        if (io->recv_armed && !io->recv_paused &&
            io->in_bufs >= r->inbox_max) {
            /* It is not reading: stop taking buffers the others need,
             * as a full socket buffer stops a sender. */
            io->recv_paused = true;
            STAT_INCR(r->stats->ring_recv_paused);
            ring_cancel(r, ud(io, OP_RECV));
        }
    } else if (cqe->res == 0) {
        io->eof = true;
    } else if (cqe->res == -ENOBUFS) {
        STAT_INCR(r->stats->ring_recv_nobufs);
        ring_want_recv(r, io);
        return;
    } else if (cqe->res != -ECANCELED) {
        io->err = -cqe->res;
    }
    if (!io->removed && (io->want & EV_READ)) {
        ring_ready(r, io, EV_READ);
    }
}

static void
got_send(struct ring *r, struct ring_io *io, int res)
{
    io->send_busy = false;
    io->inflight--;
    if (io->removed) {
        return;
    }
    if (res < 0) {
        STAT_INCR(r->stats->ring_send_errors);
    } else if ((size_t)res < io->send_asked) {
        STAT_INCR(r->stats->ring_send_short);
    }
    io->send_res = res;
    io->send_done = true;
    if (io->want & EV_WRITE) {
        ring_ready(r, io, EV_WRITE);
    }
}

static void
got_poll(struct ring *r, struct ring_io *io, int res)
{
    short what = 0;

    io->poll_armed = false;
    io->inflight--;
    if (io->removed) {
        return;
    }
    if (res > 0) {
        what = ((res & (POLLIN | POLLERR | POLLHUP | POLLRDHUP))
                ? EV_READ : 0) |
               ((res & (POLLOUT | POLLERR | POLLHUP)) ? EV_WRITE : 0);
    } else if (res < 0 && res != -ECANCELED) {
        what = io->want;    /* let the owner's call find the error */
    }
    /* queued even with nothing to report: the pass re-arms it */
    ring_ready(r, io, what);
}

static void
on_cqe(struct ring *r, const struct io_uring_cqe *cqe)
{
    struct ring_io *io = (struct ring_io *)(uintptr_t)
                         (cqe->user_data & ~(uint64_t)OP_MASK);

    switch (cqe->user_data & OP_MASK) {
    case OP_RECV: got_recv(r, io, cqe); break;
    case OP_SEND: got_send(r, io, cqe->res); break;
    case OP_POLL: got_poll(r, io, cqe->res); break;
    case OP_TIMER:
        r->tick_armed = false;
        r->tick_due = true;
        break;
    default:
        break;
    }
}

/* Take in every completion there is, those the kernel held back while
 * the queue was full included. */
static void
reap(struct ring *r)
{
    r->reaping = true;
    for (;;) {
        struct io_uring_cqe *cqe;
        unsigned head, n = 0;

        io_uring_for_each_cqe(&r->uring, head, cqe) {
            on_cqe(r, cqe);
            n++;
        }
        io_uring_cq_advance(&r->uring, n);
        if (!io_uring_cq_has_overflow(&r->uring)) {
            r->reaping = false;
            return;
        }
        STAT_INCR(r->stats->ring_cq_overflows);
        io_uring_get_events(&r->uring);
    }
}

/* ---- the loop --------------------------------------------------------- */

void
ring_set_tick(struct ring *r, ring_cb tick, void *arg)
{
    r->tick = tick;
    r->tick_arg = arg;
    arm_tick(r);
}

/* Run the callbacks of what became ready; what becomes ready meanwhile
 * (a yield) waits for the next pass, after the kernel's news. */
static unsigned
run_ready(struct ring *r)
{
    struct ring_io *list = r->ready, *io;
    unsigned ran = 0;

    r->ready = NULL;
    r->ready_tail = &r->ready;
    while ((io = list) != NULL) {
        short what = io->fired & io->want;

        list = io->ready_next;
        io->queued = false;
        io->fired = 0;
        if (io->removed) {
            continue;
        }
        if (what != 0) {
            io->cb(io->fd, what, io->arg);
            ran++;
        }
        if (io->removed || io->queued || io->want == 0) {
            continue;
        }
        /* level-triggered: a readiness source still waiting polls again;
         * a stream that reads keeps its receive */
        if (!io->poll) {
            ring_want_recv(r, io);
        } else if (!io->poll_armed) {
            ring_arm_poll(r, io);
        }
    }
    return ran;
}

static void
arm_starved(struct ring *r)
{
    while (r->starved != NULL && r->free_bufs > 0) {
        struct ring_io *io = r->starved;

        r->starved = io->starved_next;
        io->starved = false;
        ring_want_recv(r, io);
    }
}

/* At a pass's end, the buffers its sources read given back: sources
 * that still find none make the kernel's share of them grow, twice what
 * it was (a burst of requests that the pass answered needs none). */
static void
feed_starved(struct ring *r)
{
    arm_starved(r);
    if (r->starved != NULL && provide_more(r, r->provided)) {
        arm_starved(r);
    }
}

void
ring_leave(struct ring *r)
{
    r->leaving = true;
}

void
ring_let_go(struct ring *r)
{
    int rc;

    if (r->let_go) {
        return;
    }
    rc = io_uring_unregister_buf_ring(&r->uring, BGID);
    if (rc == 0) {
        /* Every byte a receive took before is in the completion queue
         * now: its completions run in this thread, which holds the ring
         * while it unregisters. */
        r->let_go = true;
        reap(r);
        return;
    }
    /* Then each source's operations by themselves, as without leave. */
    r->leaving = false;
    for (struct ring_io *io = r->removed; io != NULL; io = io->removed_next) {
        if (io->recv_armed) {
            ring_cancel(r, ud(io, OP_RECV));
        }
        if (io->poll_armed && !io->poll_cancelled) {
            io->poll_cancelled = true;
            ring_cancel(r, ud(io, OP_POLL));
        }
    }
}

static void
take_over(struct ring *r)
{
    if (!r->enabled) {
        ring_enable(r);
        r->enabled = true;
        if (r->tick != NULL) {
            arm_tick(r);
        }
    }
}

/* Free the removed sources (ring_io.c's ring_remove()) nothing in the
 * ring points at any more, running their done(). */
static void
free_removed(struct ring *r)
{
    struct ring_io **p = &r->removed;
    struct ring_io *io;

    while ((io = *p) != NULL) {
        if ((r->let_go ? io->send_busy : io->inflight > 0) || io->queued ||
            io->starved) {
            p = &io->removed_next;
            continue;
        }
        *p = io->removed_next;
        if (r->let_go) {
            /* its receive may still complete (with no buffer): kept, and
             * its file left in the table, until the ring goes */
            if (io->done != NULL) {
                io->done(io->arg);
            }
            io->removed_next = r->husks;
            r->husks = io;
            continue;
        }
        if (io->slot >= 0) {
            /* the table holds the socket open: let go of it first */
            int none = -1;

            io_uring_register_files_update(&r->uring, (unsigned)io->slot,
                                           &none, 1);
            r->slots[r->nslots++] = io->slot;
        }
        if (io->done != NULL) {
            io->done(io->arg);          /* may take the inbox (detach) */
        }
        while (io->in_head != NO_BUF) {
            int bid = io->in_head;

            io->in_head = r->buf_next[bid];
            ring_buf_return(r, bid);
        }
        free(io);
    }
}

unsigned
ring_pass(struct ring *r, bool wait)
{
    unsigned ran;
    int rc;

    take_over(r);
    rc = submit_and_get(r, wait && r->ready == NULL);
    if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY &&
        rc != -ETIME) {
        fprintf(stderr, "io_uring_enter: %s\n", strerror(-rc));
    }
    reap(r);
    ran = run_ready(r);
    if (r->tick_due) {
        r->tick_due = false;
        if (r->tick != NULL) {
            r->tick(-1, 0, r->tick_arg);
            arm_tick(r);
        }
    }
    feed_starved(r);
    free_removed(r);
    return ran;
}

void
ring_run(struct ring *r, void (*end_pass)(void))
{
    while (!r->stop || r->removed != NULL) {
        ring_pass(r, true);
        if (end_pass != NULL) {
            end_pass();
        }
    }
}

void
ring_submit(struct ring *r)
{
    submit(r);
}

void
ring_break(struct ring *r)
{
    r->stop = true;
}
