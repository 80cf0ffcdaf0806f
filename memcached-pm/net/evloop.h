/*
 * evloop.h: a worker's event loop on epoll (-o event_engine=epoll, and
 * wherever io_uring cannot be used): its connections, its UDP sockets
 * and its eventfd are sources on one epoll set.
 *
 * A source stays registered, level-triggered, for what its owner last
 * asked (evloop_want()); asking the same again costs nothing, so a
 * connection that reads, answers and reads again makes one system call
 * per turn, epoll_wait(), besides its own read and write.  Ready sources
 * run in the order they became ready, each once a pass; a source made
 * ready by hand (evloop_activate(): a connection that yielded) runs in
 * the next pass, after the others had theirs.  A source is forgotten
 * (evloop_forget()) before its memory goes or its fd is closed or handed
 * on, even from inside another source's callback.
 *
 * The events are libevent's EV_READ and EV_WRITE, so a callback serves
 * this loop and the io_uring engine's (ring.h) alike.  Everything here
 * runs on the thread that owns the loop: no lock.
 */
#ifndef MCPM_EVLOOP_H
#define MCPM_EVLOOP_H

#include <stdbool.h>

#include <event2/event.h>

struct evloop;

typedef void (*evloop_cb)(int fd, short what, void *arg);

struct evsrc {
    int           fd;
    short         want;         /* what it is registered for (0: not) */
    short         fired;        /* what is ready since it last ran */
    evloop_cb     cb;
    void         *arg;
    struct evsrc **pprev;       /* on a ready list: what points to it */
    struct evsrc *next;
};

/* A loop, or NULL (errno set). */
struct evloop *evloop_new(void);
void evloop_free(struct evloop *l);

/* A source on fd that is not registered yet; memory of the caller's. */
void evsrc_init(struct evsrc *s, int fd, evloop_cb cb, void *arg);

/* Wait for EV_READ and/or EV_WRITE (0: nothing) until said otherwise.
 * 0, or -1 with errno when epoll refuses.  (Asking what is asked
 * already is the common case, and inline.) */
int evloop_change(struct evloop *l, struct evsrc *s, short what);

static inline int
evloop_want(struct evloop *l, struct evsrc *s, short what)
{
    return what == s->want ? 0 : evloop_change(l, s, what);
}

/* Run the callback in the next pass with `what`, ready or not. */
void evloop_activate(struct evloop *l, struct evsrc *s, short what);

/* Stop waiting, and drop a run still to come. */
void evloop_forget(struct evloop *l, struct evsrc *s);

/* The loop is let go of with every source in it (a handover): a source
 * forgotten from now on leaves the epoll set only when the set is freed
 * (evloop_free()), not by a system call of its own. */
void evloop_close_soon(struct evloop *l);

/* free() for memory holding a forgotten source: while the loop closes,
 * the kernel may still report the source (the loop ignores it, having
 * forgotten it), so the memory is kept until evloop_free(). */
void evloop_bury(struct evloop *l, void *mem);

/* fn(-1, 0, arg) about once a second, between passes (NULL: never). */
void evloop_tick(struct evloop *l, evloop_cb fn, void *arg);

/* Run passes until evloop_break(); with once, one pass (which waits for
 * something to be ready).  0, or -1 when epoll_wait fails. */
int evloop_run(struct evloop *l, bool once);
void evloop_break(struct evloop *l);
bool evloop_broken(const struct evloop *l);

#endif
