/*
 * test_ring.c: the io_uring engine (memcached-pm/net/ring.h) on socket pairs:
 * receives into the inbox, sends, level-triggered polls, and its faults:
 * buffers running out, a source that does not read, short sends, a peer
 * gone while a send is in the ring, a source removed with a send in the
 * ring, and a completion queue overflow.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "memcached-pm/net/ring.h"
#include "memcached-pm/net/ring_types.h"   /* r->provided */
#include "t/tap.h"

static struct thread_stats counters;

/* What a source's callback saw. */
struct seen {
    unsigned calls;
    short    what;
};

static void
on_ready(int fd, short what, void *arg)
{
    struct seen *s = arg;

    (void)fd;
    s->calls++;
    s->what |= what;
}

static void
on_done(void *arg)
{
    (*(unsigned *)arg)++;
}

static struct ring *
ring_with(unsigned entries, unsigned buffers, unsigned files)
{
    struct ring_config cfg = {
        .entries = entries, .buffers = buffers, .buffer_size = 16384,
        .files = files
    };
    char why[128];
    struct ring *r = ring_new(&cfg, &counters, why, sizeof(why));

    if (r == NULL) {
        printf("# ring_new: %s\n", why);
        exit(1);
    }
    ring_pass(r, false);        /* this thread takes it over */
    return r;
}

static struct ring *
ring_of(unsigned entries, unsigned buffers)
{
    return ring_with(entries, buffers, 0);
}

static void
on_done_close(void *arg)
{
    close(*(int *)arg);
}

static void
pair(int sv[2])
{
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
        perror("socketpair");
        exit(1);
    }
}

/* Passes until the source's callback ran (or a bound). */
static void
pass_until(struct ring *r, const struct seen *s, unsigned calls)
{
    for (int i = 0; i < 100 && s->calls < calls; i++) {
        ring_pass(r, false);
        usleep(1000);
    }
}

/* Pass until a removed source's done() ran (or a bound); how often it
 * ran. */
static unsigned
pass_until_done(struct ring *r, const unsigned *done)
{
    for (int i = 0; i < 100 && *done == 0; i++) {
        ring_pass(r, false);
    }
    return *done;
}

/* Remove a source and pass until it is done: how often done() ran. */
static unsigned
drop(struct ring *r, struct ring_io *io)
{
    unsigned done = 0;

    ring_remove(io, on_done, &done);
    return pass_until_done(r, &done);
}

/* files: the stream's socket is a registered file (0: a plain fd). */
static void
test_receive_and_send(unsigned files)
{
    struct ring *r = ring_with(64, 16, files);
    struct seen s = { 0, 0 };
    char buf[64];
    struct iovec iov[2] = { { "hel", 3 }, { "lo", 2 } };
    int sv[2];
    struct ring_io *io;

    pair(sv);
    io = ring_add(r, sv[0], false, on_ready, &s);
    ring_wait(io, EV_READ);
    ok(ring_read(io, buf, sizeof(buf)) == -1 && errno == EAGAIN,
       "nothing received yet: EAGAIN");
    is_int(write(sv[1], "get a\r\n", 7), 7, "peer writes");
    pass_until(r, &s, 1);
    ok(s.calls == 1 && s.what == EV_READ, "the callback runs for the bytes");
    ok(ring_pending(io), "they wait in the inbox");
    is_int(ring_read(io, buf, 4), 4, "read part");
    is_int(ring_read(io, buf + 4, sizeof(buf)), 3, "then the rest");
    ok(memcmp(buf, "get a\r\n", 7) == 0, "in order");
    ok(!ring_pending(io), "the inbox is empty");

    ok(ring_writev(io, iov, 2) == -1 && errno == EAGAIN,
       "a send goes into the ring");
    s.calls = 0;
    s.what = 0;
    ring_wait(io, EV_WRITE);
    pass_until(r, &s, 1);
    ok(s.what == EV_WRITE, "its completion makes the source writable");
    is_int(ring_writev(io, iov, 2), 5, "the next call returns what it sent");
    is_int(read(sv[1], buf, sizeof(buf)), 5, "the peer has the reply");
    ok(memcmp(buf, "hello", 5) == 0, "byte for byte");

    close(sv[1]);
    s.calls = 0;
    ring_wait(io, EV_READ);
    pass_until(r, &s, 1);
    is_int(ring_read(io, buf, sizeof(buf)), 0, "the peer's close reads 0");
    is_int(drop(r, io), 1, "a removed source is done once");
    close(sv[0]);

    /* done() closes the socket: the peer sees the end at once, the
     * registered file let go of first */
    pair(sv);
    io = ring_add(r, sv[0], false, on_ready, &s);
    ring_wait(io, EV_READ);
    ring_pass(r, false);
    ring_remove(io, on_done_close, &sv[0]);
    for (int i = 0; i < 5; i++) {
        ring_pass(r, false);
    }
    is_int(read(sv[1], buf, sizeof(buf)), 0, "the peer reads the close");
    close(sv[1]);
    ring_free(r);
}

static void
test_poll_is_level_triggered(void)
{
    struct ring *r = ring_of(64, 16);
    struct seen s = { 0, 0 };
    char c;
    int sv[2];
    struct ring_io *io;

    pair(sv);
    io = ring_add(r, sv[0], true, on_ready, &s);
    ring_wait(io, EV_READ);
    ring_pass(r, false);
    is_int(s.calls, 0, "poll: nothing to read, no callback");
    is_int(write(sv[1], "x", 1), 1, "peer writes");
    pass_until(r, &s, 1);
    is_int(s.calls, 1, "poll: readable");
    pass_until(r, &s, 2);
    is_int(s.calls, 2, "poll: still readable while unread (level)");
    is_int(read(sv[0], &c, 1), 1, "read it");
    s.calls = 0;
    for (int i = 0; i < 5; i++) {
        ring_pass(r, false);
    }
    is_int(s.calls, 0, "poll: quiet once read");
    ring_wait(io, EV_WRITE);
    pass_until(r, &s, 1);
    ok(s.calls >= 1 && (s.what & EV_WRITE), "poll: re-armed for writing");
    is_int(drop(r, io), 1, "removed poll source done");
    close(sv[0]);
    close(sv[1]);
    ring_free(r);
}

/* One buffer for two talkers: the second runs out, then gets its bytes
 * once the first gave the buffer back. */
static void
test_buffers_run_out(void)
{
    struct ring *r = ring_of(64, 1);
    struct seen sa = { 0, 0 }, sb = { 0, 0 };
    int a[2], b[2];
    struct ring_io *ia, *ib;
    char buf[64];
    uint64_t before = counters.ring_recv_nobufs;
    size_t got_a = 0, got_b = 0;

    pair(a);
    pair(b);
    ia = ring_add(r, a[0], false, on_ready, &sa);
    ib = ring_add(r, b[0], false, on_ready, &sb);
    ring_wait(ia, EV_READ);
    ring_wait(ib, EV_READ);
    ring_pass(r, false);
    is_int(write(a[1], "aaaa", 4), 4, "a writes");
    is_int(write(b[1], "bbbb", 4), 4, "b writes");
    for (int i = 0; i < 200 && (got_a < 4 || got_b < 4); i++) {
        ssize_t n;

        ring_pass(r, false);
        /* read one source per pass, so the other waits for the buffer */
        if (i % 2 == 0 && (n = ring_read(ia, buf, sizeof(buf))) > 0) {
            ok(memcmp(buf, "aaaa", (size_t)n) == 0, "a's bytes");
            got_a += (size_t)n;
        } else if (i % 2 == 1 && (n = ring_read(ib, buf, sizeof(buf))) > 0) {
            ok(memcmp(buf, "bbbb", (size_t)n) == 0, "b's bytes");
            got_b += (size_t)n;
        }
        usleep(1000);
    }
    ok(got_a == 4 && got_b == 4, "both got everything");
    ok(counters.ring_recv_nobufs > before, "ring_recv_nobufs counted");
    is_int(drop(r, ia) + drop(r, ib), 2, "both removed and done");
    close(a[1]);
    close(b[1]);
    ring_free(r);
    close(a[0]);
    close(b[0]);
}

/* The kernel has 8 of a ring's buffers at first, and twice that once a
 * pass ends with sources that found none: twelve talkers that do not
 * read all get their bytes, and the ring then holds 16. */
static void
test_buffers_grow(void)
{
    enum { N = 12 };
    struct ring *r = ring_of(64, 64);
    struct seen s[N];
    struct ring_io *io[N];
    int sv[N][2];
    unsigned arrived = 0, dropped = 0;
    char c;

    is_int(r->provided, 8, "8 buffers at first");
    for (int i = 0; i < N; i++) {
        s[i] = (struct seen){ 0, 0 };
        pair(sv[i]);
        io[i] = ring_add(r, sv[i][0], false, on_ready, &s[i]);
        ring_wait(io[i], EV_READ);
    }
    ring_pass(r, false);
    for (int i = 0; i < N; i++) {
        is_int(write(sv[i][1], "x", 1), 1, "a talker writes");
    }
    for (int k = 0; k < 500 && arrived < N; k++) {
        ring_pass(r, false);    /* nobody reads: buffers stay taken */
        arrived = 0;
        for (int i = 0; i < N; i++) {
            arrived += s[i].calls > 0;
        }
        usleep(1000);
    }
    is_int(arrived, N, "every talker's byte arrived");
    is_int(r->provided, 16, "the kernel's share doubled");
    for (int i = 0; i < N; i++) {
        ok(ring_read(io[i], &c, 1) == 1 && c == 'x', "its byte");
        dropped += drop(r, io[i]);
        close(sv[i][1]);
        close(sv[i][0]);
    }
    is_int(dropped, N, "all removed and done");
    ring_free(r);
}

/* A source that does not read stops taking buffers (its receive pauses)
 * and gets every byte once it reads. */
static void
test_receive_pauses(void)
{
    struct ring *r = ring_of(64, 16);
    struct seen s = { 0, 0 };
    static char out[256 * 1024], in[256 * 1024];
    size_t sent = 0, got = 0;
    int sv[2], sz = 256 * 1024;
    struct ring_io *io;
    uint64_t before = counters.ring_recv_paused;

    pair(sv);
    setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
    fcntl(sv[1], F_SETFL, O_NONBLOCK);
    for (size_t i = 0; i < sizeof(out); i++) {
        out[i] = (char)(i * 7 + i / 251);
    }
    io = ring_add(r, sv[0], false, on_ready, &s);
    ring_wait(io, EV_READ);
    ring_pass(r, false);
    while (sent < sizeof(out)) {
        ssize_t n = write(sv[1], out + sent, sizeof(out) - sent);

        if (n > 0) {
            sent += (size_t)n;
        }
        ring_pass(r, false);
    }
    for (int i = 0; i < 50; i++) {
        ring_pass(r, false);
    }
    ok(counters.ring_recv_paused > before, "ring_recv_paused counted");
    for (int i = 0; i < 2000 && got < sizeof(in); i++) {
        ssize_t n = ring_read(io, in + got, sizeof(in) - got);

        if (n > 0) {
            got += (size_t)n;
        }
        ring_pass(r, false);
    }
    is_int(got, sizeof(in), "every byte after the pause");
    ok(memcmp(in, out, sizeof(in)) == 0, "in order");
    is_int(drop(r, io), 1, "removed and done");
    ring_free(r);
    close(sv[0]);
    close(sv[1]);
}

/* Fill the peer's socket so that a send waits in the ring. */
static ssize_t
fill(int fd)
{
    static char junk[65536];
    ssize_t total = 0, n;

    fcntl(fd, F_SETFL, O_NONBLOCK);
    while ((n = send(fd, junk, sizeof(junk), MSG_DONTWAIT)) > 0) {
        total += n;
    }
    return total;
}

/* A megabyte to send: more than a socket pair's buffer takes at once. */
static char big[1 << 20];

/* A short send, then a peer gone while the next one waits in the ring. */
static void
test_short_and_failed_sends(void)
{
    struct ring *r = ring_of(64, 16);
    struct seen s = { 0, 0 };
    struct iovec iov = { big, sizeof(big) };
    int sv[2];
    struct ring_io *io;
    ssize_t n;
    uint64_t short_before = counters.ring_send_short;
    uint64_t err_before = counters.ring_send_errors;

    /* short: a megabyte into a small socket buffer goes out in parts */
    pair(sv);
    io = ring_add(r, sv[0], false, on_ready, &s);
    ring_writev(io, &iov, 1);
    ring_wait(io, EV_WRITE);
    pass_until(r, &s, 1);
    n = ring_writev(io, &iov, 1);
    ok(n > 0 && (size_t)n < sizeof(big), "a short send returns its part");
    ok(counters.ring_send_short > short_before, "ring_send_short counted");

    /* the peer goes while the next send waits in the ring */
    ok(ring_writev(io, &iov, 1) == -1 && errno == EAGAIN, "next part queued");
    s.calls = 0;
    ring_pass(r, false);
    close(sv[1]);
    pass_until(r, &s, 1);
    n = ring_writev(io, &iov, 1);
    ok(n == -1 && (errno == EPIPE || errno == ECONNRESET),
       "a send to a peer gone fails with EPIPE/ECONNRESET");
    ok(counters.ring_send_errors > err_before, "ring_send_errors counted");
    is_int(drop(r, io), 1, "source done after its failed send");
    close(sv[0]);
    ring_free(r);
}

/* Removed with a send waiting in the ring: done only once the cancelled
 * send completed. */
static void
test_remove_with_a_send_in_the_ring(void)
{
    struct ring *r = ring_of(64, 16);
    struct seen s = { 0, 0 };
    struct iovec iov = { big, sizeof(big) };
    int sv[2];
    struct ring_io *io;
    unsigned done = 0;
    uint64_t before = counters.ring_close_deferred;

    pair(sv);
    fill(sv[0]);
    io = ring_add(r, sv[0], false, on_ready, &s);
    ok(ring_writev(io, &iov, 1) == -1 && errno == EAGAIN, "send waits");
    for (int i = 0; i < 5; i++) {
        ring_pass(r, false);
    }
    ring_remove(io, on_done, &done);
    is_int(done, 0, "not done while the send is in the ring");
    is_int(counters.ring_close_deferred - before, 1,
           "ring_close_deferred counted");
    is_int(pass_until_done(r, &done), 1,
           "done once the cancelled send completed");
    close(sv[0]);
    close(sv[1]);
    ring_free(r);
}

/* Forty sources ready at once on a ring whose completion queue holds 16:
 * the kernel keeps the rest, and every one is served. */
/* Passes until each of n sources, with 4 bytes waiting, has read them
 * (or a bound): how many did. */
static unsigned
serve_each(struct ring *r, struct ring_io **io, const struct seen *s,
           unsigned n)
{
    unsigned served = 0;
    char buf[8];

    for (int pass = 0; pass < 100 && served < n; pass++) {
        ring_pass(r, false);
        for (unsigned i = 0; i < n; i++) {
            if (s[i].calls > 0 && ring_read(io[i], buf, sizeof(buf)) == 4) {
                served++;
            }
        }
    }
    return served;
}

static void
test_completion_overflow(void)
{
    enum { N = 40 };
    struct ring *r = ring_of(4, 64);
    struct seen s[N];
    struct ring_io *io[N];
    int sv[N][2];
    unsigned served, dropped = 0;
    uint64_t before = counters.ring_cq_overflows;

    memset(s, 0, sizeof(s));
    for (int i = 0; i < N; i++) {
        pair(sv[i]);
        is_int(write(sv[i][1], "ping", 4), 4, "ready before it is armed");
        io[i] = ring_add(r, sv[i][0], false, on_ready, &s[i]);
        ring_wait(io[i], EV_READ);
    }
    served = serve_each(r, io, s, N);
    is_int(served, N, "every source served");
    ok(counters.ring_cq_overflows > before, "ring_cq_overflows counted");
    for (int i = 0; i < N; i++) {
        dropped += drop(r, io[i]);
    }
    is_int(dropped, N, "every source removed and done");
    ring_free(r);
    for (int i = 0; i < N; i++) {
        close(sv[i][0]);
        close(sv[i][1]);
    }
}

/* Sources added in one pass have their files registered in one call
 * before the next submission, 256 at most a call: 300 of them, each
 * with bytes waiting, are all served. */
static void
test_files_registered_in_batches(void)
{
    enum { N = 300 };
    struct ring *r = ring_with(1024, 64, N + 10);
    static struct seen s[N];
    static struct ring_io *io[N];
    static int sv[N][2];
    unsigned served, dropped = 0;

    memset(s, 0, sizeof(s));
    for (int i = 0; i < N; i++) {
        pair(sv[i]);
        if (write(sv[i][1], "ping", 4) != 4) {
            exit(1);
        }
        io[i] = ring_add(r, sv[i][0], false, on_ready, &s[i]);
        ring_wait(io[i], EV_READ);
    }
    served = serve_each(r, io, s, N);
    is_int(served, N, "300 sources registered in batches, each served");
    for (int i = 0; i < N; i++) {
        dropped += drop(r, io[i]);
        close(sv[i][0]);
        close(sv[i][1]);
    }
    is_int(dropped, N, "and removed");
    ring_free(r);
}

/* A batch the table refuses (here one socket closed behind the ring's
 * back before the registration) goes by fd: the other source, armed on
 * its slot already, is served all the same. */
static void
test_a_refused_batch_goes_by_fd(void)
{
    struct ring *r = ring_with(64, 16, 16);
    struct seen sa = { 0, 0 }, sb = { 0, 0 };
    struct ring_io *a, *b;
    int va[2], vb[2];
    char buf[8];

    pair(va);
    pair(vb);
    a = ring_add(r, va[0], false, on_ready, &sa);
    b = ring_add(r, vb[0], false, on_ready, &sb);
    ring_wait(a, EV_READ);
    ring_wait(b, EV_READ);
    close(va[0]);
    is_int(write(vb[1], "pong", 4), 4, "bytes for the other source");
    pass_until(r, &sb, 1);
    ok(sb.calls >= 1 && ring_read(b, buf, sizeof(buf)) == 4 &&
       memcmp(buf, "pong", 4) == 0, "served by its fd");
    is_int(drop(r, b), 1, "removed");
    is_int(drop(r, a), 1, "the other removed too");
    ring_free(r);
    close(va[1]);
    close(vb[0]);
    close(vb[1]);
}

int
main(void)
{
    char why[128];

    /* Sends are writes: a peer gone answers EPIPE, and SIGPIPE is
     * ignored, as the daemon ignores it (main.c). */
    signal(SIGPIPE, SIG_IGN);
    if (!ok(ring_probe(why, sizeof(why)), "the kernel runs the engine")) {
        printf("#   %s\n", why);
        return done_testing();
    }
    test_receive_and_send(0);
    test_receive_and_send(16);
    test_poll_is_level_triggered();
    test_buffers_run_out();
    test_buffers_grow();
    test_receive_pauses();
    test_short_and_failed_sends();
    test_remove_with_a_send_in_the_ring();
    test_completion_overflow();
    test_files_registered_in_batches();
    test_a_refused_batch_goes_by_fd();
    return done_testing();
}
