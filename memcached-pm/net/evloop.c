/*
 * evloop.c: a worker's event loop on epoll (evloop.h).
 *
 * A pass: the sources activated in the last pass become ready, then
 * epoll_wait() adds what the kernel reports (without waiting when
 * something is ready already), the tick runs when it is due, and the
 * ready sources run, first come first served.  A source is on at most
 * one list, so the list it is on says whether it runs this pass (ready)
 * or the next (later), and forgetting it takes it off either.
 */
#include "config.h"

#include "memcached-pm/net/evloop.h"
#include "memcached-pm/net/sys.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Events taken from the kernel per epoll_wait(). */
#define EVLOOP_BATCH 64

struct evloop {
    int                 epfd;
    bool                broken;
    bool                closing;        /* evloop_close_soon() */
    void              **graves;         /* what evloop_bury() keeps */
    size_t              ngraves;
    size_t              cgraves;
    struct evsrc       *ready;          /* runs this pass */
    struct evsrc      **ready_tail;
    struct evsrc       *later;          /* activated: runs next pass */
    struct evsrc      **later_tail;
    evloop_cb           tick;
    void               *tick_arg;
    int64_t             tick_due;       /* ms, CLOCK_MONOTONIC */
    int64_t             now;            /* ms, when the last wait ended */
    struct epoll_event  events[EVLOOP_BATCH];
};

/* ---- the lists -------------------------------------------------------- */

/* Append s to the list whose tail is *tail. */
static void
push(struct evsrc ***tail, struct evsrc *s)
{
    s->next = NULL;
    s->pprev = *tail;
    **tail = s;
    *tail = &s->next;
}

/* Take s off the list it is on. */
static void
unlink_src(struct evloop *l, struct evsrc *s)
{
    struct evsrc ***tail = NULL;

    if (s->next != NULL) {
        s->next->pprev = s->pprev;
    } else if (l->ready_tail == &s->next) {
        tail = &l->ready_tail;
    } else {
        tail = &l->later_tail;
    }
    *s->pprev = s->next;
    if (tail != NULL) {
        *tail = s->pprev;
    }
    s->pprev = NULL;
    s->next = NULL;
}

/* ---- sources ---------------------------------------------------------- */

struct evloop *
evloop_new(void)
{
    struct evloop *l = calloc(1, sizeof(*l));

    if (l == NULL) {
        return NULL;
    }
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (l->epfd < 0) {
        free(l);
        return NULL;
    }
    l->ready_tail = &l->ready;
    l->later_tail = &l->later;
    return l;
}

void
evloop_free(struct evloop *l)
{
    if (l != NULL) {
        close(l->epfd);
        for (size_t i = 0; i < l->ngraves; i++) {
            free(l->graves[i]);
        }
        free(l->graves);
        free(l);
    }
}

void
evloop_bury(struct evloop *l, void *mem)
{
    if (!l->closing) {
        free(mem);
        return;
    }
    if (l->ngraves == l->cgraves) {
        size_t cap = l->cgraves ? l->cgraves * 2 : 64;
        void **v = realloc(l->graves, cap * sizeof(*v));

        if (v == NULL) {
            return;     /* kept for good: freed, it could be read */
        }
        l->graves = v;
        l->cgraves = cap;
    }
    l->graves[l->ngraves++] = mem;
}

void
evsrc_init(struct evsrc *s, int fd, evloop_cb cb, void *arg)
{
    *s = (struct evsrc){ .fd = fd, .cb = cb, .arg = arg };
}

int
evloop_change(struct evloop *l, struct evsrc *s, short what)
{
    struct epoll_event ev = {
        .events = ((what & EV_READ) ? EPOLLIN : 0u) |
                  ((what & EV_WRITE) ? EPOLLOUT : 0u),
        .data.ptr = s,
    };
    int op = s->want == 0 ? EPOLL_CTL_ADD
             : what == 0 ? EPOLL_CTL_DEL : EPOLL_CTL_MOD;

    if (epoll_ctl(l->epfd, op, s->fd, &ev) != 0) {
        return -1;
    }
    s->want = what;
    return 0;
}

void
evloop_activate(struct evloop *l, struct evsrc *s, short what)
{
    s->fired |= what;
    if (s->pprev == NULL) {
        push(&l->later_tail, s);
    }
}

void
evloop_forget(struct evloop *l, struct evsrc *s)
{
    if (s->pprev != NULL) {
        unlink_src(l, s);
    }
    s->fired = 0;
    if (s->want != 0 && !l->closing) {
        /* A descriptor whose file lives on elsewhere (passed to the
         * mc-log thread or a successor) would stay in the set. */
        (void)epoll_ctl(l->epfd, EPOLL_CTL_DEL, s->fd, NULL);
    }
    s->want = 0;
}

/* ---- the loop --------------------------------------------------------- */

static int64_t
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
evloop_close_soon(struct evloop *l)
{
    l->closing = true;
}

void
evloop_tick(struct evloop *l, evloop_cb fn, void *arg)
{
    l->tick = fn;
    l->tick_arg = arg;
    l->now = now_ms();
    l->tick_due = l->now + 1000;
}

/* How long epoll_wait() may wait: not at all with sources ready, until
 * the tick with one, else until something happens.  The time is the
 * last wait's end, not read again: a tick may come as late as that
 * pass's work took, and a pass costs one clock read, not two. */
static int
wait_ms(const struct evloop *l)
{
    int64_t left;

    if (l->ready != NULL) {
        return 0;
    }
    if (l->tick == NULL) {
        return -1;
    }
    left = l->tick_due - l->now;
    return left < 0 ? 0 : (int)left;
}

/* What the kernel reported, as the source's events. */
static short
fired_of(uint32_t events, short want)
{
    short what = 0;

    if (events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP | EPOLLERR)) {
        what |= EV_READ;
    }
    if (events & (EPOLLOUT | EPOLLHUP | EPOLLERR)) {
        what |= EV_WRITE;
    }
    return (short)(what & want);
}

static int
pass(struct evloop *l)
{
    int n;

    /* last pass's activations first, in their order */
    if (l->later != NULL) {
        *l->ready_tail = l->later;
        l->later->pprev = l->ready_tail;
        l->ready_tail = l->later_tail;
        l->later = NULL;
        l->later_tail = &l->later;
    }
    /* not epoll_wait(): a cancellation point, whose bookkeeping costs a
     * worker more than the rest of this pass (sys.h says why) */
    n = (int)sys_call6(SYS_epoll_pwait, l->epfd, (long)l->events,
                       EVLOOP_BATCH, wait_ms(l), 0, 0);
    if (n < 0) {
        if (errno != EINTR) {
            return -1;
        }
        n = 0;
    }
    for (int i = 0; i < n; i++) {
        struct evsrc *s = l->events[i].data.ptr;
        short what = fired_of(l->events[i].events, s->want);

        if (what != 0) {
            s->fired |= what;
            if (s->pprev == NULL) {
                push(&l->ready_tail, s);
            }
        }
    }
    if (l->tick != NULL && (l->now = now_ms()) >= l->tick_due) {
        l->tick_due += 1000;
        if (l->tick_due <= l->now) {
            l->tick_due = l->now + 1000;        /* the loop was stalled */
        }
        l->tick(-1, 0, l->tick_arg);
    }
    while (l->ready != NULL && !l->broken) {
        struct evsrc *s = l->ready;
        short what = s->fired;

        unlink_src(l, s);
        s->fired = 0;
        s->cb(s->fd, what, s->arg);
    }
    return 0;
}

int
evloop_run(struct evloop *l, bool once)
{
    while (!l->broken) {
        if (pass(l) != 0) {
            return -1;
        }
        if (once) {
            break;
        }
    }
    return 0;
}

void
evloop_break(struct evloop *l)
{
    l->broken = true;
}

bool
evloop_broken(const struct evloop *l)
{
    return l->broken;
}
