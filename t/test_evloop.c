/*
 * test_evloop.c: the epoll engine's loop (memcached-pm/net/evloop.h) on
 * socket pairs: readiness, changes of what a source waits for, runs by
 * hand in the next pass, sources forgotten from another's callback (and
 * one whose file lives on in a duplicate), the tick and the break.
 */
#include "config.h"

#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "memcached-pm/net/evloop.h"
#include "t/tap.h"

/* What a source's callback saw, and what it does when it runs. */
struct seen {
    struct evloop *l;
    unsigned       calls;
    short          what;
    unsigned       pass;            /* the pass of its last run */
    struct evsrc  *forget;          /* forget this one */
    bool           again;           /* activate itself */
    bool           stop;            /* break the loop */
    struct evsrc  *self;
};

static unsigned passes;

static void
on_ready(int fd, short what, void *arg)
{
    struct seen *s = arg;

    (void)fd;
    s->calls++;
    s->what = what;
    s->pass = passes;
    if (s->forget != NULL) {
        evloop_forget(s->l, s->forget);
    }
    if (s->again) {
        evloop_activate(s->l, s->self, EV_READ);
    }
    if (s->stop) {
        evloop_break(s->l);
    }
}

static void
pair(int sv[2])
{
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
        perror("socketpair");
        exit(1);
    }
}

static void
once(struct evloop *l)
{
    passes++;
    if (evloop_run(l, true) != 0) {
        perror("evloop_run");
        exit(1);
    }
}

static struct evloop *
loop_new(void)
{
    struct evloop *l = evloop_new();

    if (l == NULL) {
        perror("evloop_new");
        exit(1);
    }
    return l;
}

static void
test_readiness(void)
{
    struct evloop *l = loop_new();
    struct seen s = { .l = l };
    struct evsrc src;
    int sv[2];
    char b;

    pair(sv);
    evsrc_init(&src, sv[0], on_ready, &s);
    is_int(evloop_want(l, &src, EV_READ), 0, "wait for reading");
    is_int(evloop_want(l, &src, EV_READ), 0, "asking the same again");
    ok(write(sv[1], "x", 1) == 1, "the peer writes");
    once(l);
    is_int(s.calls, 1, "readable: the callback ran once");
    is_int(s.what, EV_READ, "... with EV_READ");
    once(l);
    is_int(s.calls, 2, "level-triggered: unread, it runs again");
    ok(read(sv[0], &b, 1) == 1, "read the byte");

    is_int(evloop_want(l, &src, EV_WRITE), 0, "wait for writing instead");
    once(l);
    is_int(s.calls, 3, "writable at once");
    is_int(s.what, EV_WRITE, "... with EV_WRITE");
    is_int(evloop_want(l, &src, EV_READ | EV_WRITE), 0, "wait for both");
    ok(write(sv[1], "y", 1) == 1, "the peer writes");
    once(l);
    is_int(s.what, EV_READ | EV_WRITE, "both in one run");
    is_int(evloop_want(l, &src, 0), 0, "wait for nothing");
    is_int(src.want, 0, "... registered for nothing");

    s.calls = 0;
    close(sv[1]);
    is_int(evloop_want(l, &src, EV_WRITE), 0, "wait for writing");
    once(l);
    is_int(s.calls, 1, "a peer gone wakes a writer");
    evloop_forget(l, &src);
    close(sv[0]);
    evloop_free(l);
}

static void
test_activate(void)
{
    struct evloop *l = loop_new();
    struct seen a = { .l = l, .again = true }, b = { .l = l };
    struct evsrc sa, sb;
    int sv[2], tv[2];

    pair(sv);
    pair(tv);
    evsrc_init(&sa, sv[0], on_ready, &a);
    evsrc_init(&sb, tv[0], on_ready, &b);
    a.self = &sa;
    evloop_want(l, &sa, EV_READ);
    evloop_want(l, &sb, EV_READ);
    evloop_activate(l, &sa, EV_READ);
    once(l);
    is_int(a.calls, 1, "activated: it runs in the next pass, not ready");
    is_int(a.what, EV_READ, "... with what it was given");
    once(l);
    is_int(a.calls, 2, "a source that activates itself runs once a pass");
    ok(write(tv[1], "x", 1) == 1, "the other one's peer writes");
    once(l);
    is_int(a.calls, 3, "again");
    is_int(b.calls, 1, "... and the ready one has its turn in that pass");
    a.again = false;
    once(l);
    is_int(a.calls, 4, "the last activation runs");
    /* nothing is activated now; b stays readable, so the pass returns */
    once(l);
    is_int(a.calls, 4, "no activation, no run");

    /* activated twice before the pass: one run, with both events */
    a.what = 0;
    evloop_activate(l, &sa, EV_READ);
    evloop_activate(l, &sa, EV_WRITE);
    once(l);
    is_int(a.calls, 5, "activated twice: one run");
    is_int(a.what, EV_READ | EV_WRITE, "... with both");

    evloop_forget(l, &sa);
    evloop_forget(l, &sb);
    close(sv[0]);
    close(sv[1]);
    close(tv[0]);
    close(tv[1]);
    evloop_free(l);
}

static void
test_forget(void)
{
    struct evloop *l = loop_new();
    struct seen a = { .l = l }, b = { .l = l };
    struct evsrc sa, sb;
    int sv[2], tv[2], dup_fd;

    pair(sv);
    pair(tv);
    evsrc_init(&sa, sv[0], on_ready, &a);
    evsrc_init(&sb, tv[0], on_ready, &b);
    evloop_want(l, &sa, EV_READ);
    evloop_want(l, &sb, EV_READ);
    ok(write(sv[1], "x", 1) == 1 && write(tv[1], "x", 1) == 1,
       "both peers write");
    /* whichever runs first forgets the other */
    a.forget = &sb;
    b.forget = &sa;
    once(l);
    is_int(a.calls + b.calls, 1, "ready together, the one forgotten "
           "by the other's callback does not run");
    a.forget = b.forget = NULL;
    if (a.calls == 1) {
        evloop_want(l, &sb, EV_READ);
    } else {
        evloop_want(l, &sa, EV_READ);
    }
    once(l);
    is_int(a.calls + b.calls, 3, "waiting again, it runs");

    /* forgotten while activated: the run is dropped */
    a.calls = b.calls = 0;
    evloop_activate(l, &sa, EV_READ);
    evloop_forget(l, &sa);
    once(l);
    is_int(a.calls, 0, "forgotten after an activation: no run");

    /* a descriptor whose file lives on: forgetting takes it out of the
     * set, so the duplicate's data wakes nothing */
    evloop_forget(l, &sb);
    dup_fd = dup(tv[0]);
    evsrc_init(&sb, tv[0], on_ready, &b);
    evloop_want(l, &sb, EV_READ);
    evloop_forget(l, &sb);
    close(tv[0]);
    evloop_want(l, &sa, EV_READ);
    b.calls = 0;
    once(l);
    is_int(b.calls, 0, "forgotten and closed, its duplicate's data "
           "wakes nothing");
    ok(a.calls >= 1, "(the pass ran: the other source is ready)");
    evloop_forget(l, &sa);
    close(dup_fd);
    close(tv[1]);
    close(sv[0]);
    close(sv[1]);
    evloop_free(l);
}

static int64_t
ms_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
test_tick_and_break(void)
{
    struct evloop *l = loop_new();
    struct seen t = { .l = l, .stop = true }, a = { .l = l };
    struct evsrc sa;
    int64_t start = ms_now(), took;
    int sv[2];

    evloop_tick(l, on_ready, &t);
    /* nothing else in the loop: the pass waits for the tick */
    while (t.calls == 0 && ms_now() - start < 5000) {
        once(l);
    }
    took = ms_now() - start;
    is_int(t.calls, 1, "the tick ran");
    ok(took >= 900 && took < 3000, "... about a second later");
    ok(evloop_broken(l), "a callback broke the loop");
    is_int(evloop_run(l, false), 0, "a broken loop returns at once");
    evloop_free(l);

    l = loop_new();
    pair(sv);
    a.l = l;
    a.stop = true;
    evsrc_init(&sa, sv[0], on_ready, &a);
    evloop_want(l, &sa, EV_WRITE);
    is_int(evloop_run(l, false), 0, "run until broken");
    is_int(a.calls, 1, "... by the callback that ran");
    evloop_forget(l, &sa);
    close(sv[0]);
    close(sv[1]);
    evloop_free(l);
}

int
main(void)
{
    test_readiness();
    test_activate();
    test_forget();
    test_tick_and_break();
    return done_testing();
}
