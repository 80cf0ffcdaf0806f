/*
 * mcload: a closed-loop load generator for memcached-protocol servers.
 *
 * Each thread owns one event_base and a share of the connections.  Every
 * connection keeps up to `depth` requests in flight (with --rate, no
 * more than the rate has let out so far: a cap, so that the server has
 * time between batches, as with a client slower than it); each request carries
 * its own send time, so a pipelined request's latency runs from the moment
 * it went into the socket to the moment its reply was parsed.  Every reply
 * is validated (framing, key, size and value bytes), and anything the
 * server says that a correct server would not say counts as an error.
 *
 * Its files, bottom up, each with its header (mcload_conn.h: the
 * connection and worker types the upper three share):
 *   mcload_opts.c   argv -> struct opts (one global, read-only after main)
 *   mcload_hist.c   the clock; log-linear latency buckets, ~0.8% relative
 *                   precision
 *   mcload_keys.c   key space, distributions (uniform, zipf, seq), values
 *   mcload_send.c   requests built and written, depth and pace, UDP frames
 *   mcload_recv.c   replies parsed and checked
 *   mcload.c        a connection's events; one thread: phases (preload,
 *                   run), deadlines, drain; the report (text or JSON)
 *
 * Nothing is shared between threads while they run: counters and
 * histograms are per worker and summed after the join.
 */

#include "config.h"

#include "bench/mcload_conn.h"
#include "bench/mcload_hist.h"
#include "bench/mcload_keys.h"
#include "bench/mcload_opts.h"
#include "bench/mcload_recv.h"
#include "bench/mcload_send.h"

#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

static pthread_barrier_t phase_barrier;
/* SIGINT/SIGTERM: stop sending, drain, and report what was measured. */
static atomic_bool interrupted;

/* --rate, every millisecond: each connection sends what the rate has let
 * out by now, up to its depth. */
static void
on_pace(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;

    (void)fd;
    (void)what;
    for (int i = 0; i < w->nconns; i++) {
        struct conn *c = &w->conns[i];

        if (c->active && c->inflight < o.depth) {
            conn_advance(c);
        }
    }
}

static void
on_read(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    ssize_t n;

    (void)what;
    if (o.udp) {
        if (udp_receive(c) < 0) {
            conn_close(c, true);
            return;
        }
    } else {
        do {
            if (buf_reserve(&c->in, READ_CHUNK) < 0) {
                conn_close(c, true);
                return;
            }
            n = c->tls ? tls_client_read(c->tls, c->in.data + c->in.len,
                                         c->in.cap - c->in.len)
                       : read(fd, c->in.data + c->in.len,
                              c->in.cap - c->in.len);
            if (n <= 0) {
                if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
                    break;
                }
                conn_close(c, true);
                return;
            }
            c->in.len += (size_t)n;
        } while (c->tls && tls_client_pending(c->tls));
    }
    if (conn_parse(c, now_ns()) < 0) {
        conn_close(c, true);
        return;
    }
    conn_advance(c);
}

static void
on_write(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    conn_flush(arg);
}

static int
conn_connect(struct conn *c)
{
    int fd = socket(AF_INET, o.udp ? SOCK_DGRAM : SOCK_STREAM, 0);
    int one = 1;

    if (fd < 0) {
        return -1;
    }
    if (connect(fd, (struct sockaddr *)&o.addr, sizeof(o.addr)) < 0) {
        close(fd);
        return -1;
    }
    if (!o.udp) {
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    if (o.tls && (c->tls = tls_client_connect(fd)) == NULL) {
        close(fd);
        errno = EPROTO;
        return -1;
    }
    if (evutil_make_socket_nonblocking(fd) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int
conn_init(struct conn *c, struct worker *w)
{
    c->w = w;
    c->fd = conn_connect(c);
    if (c->fd < 0) {
        fprintf(stderr, "mcload: connect to %s: %s\n", o.server,
                strerror(errno));
        return -1;
    }
    c->ring = calloc((size_t)o.depth, sizeof(*c->ring));
    c->keypool = calloc((size_t)o.depth * (size_t)o.multiget,
                        sizeof(*c->keypool));
    c->ev_read = event_new(w->base, c->fd, EV_READ | EV_PERSIST, on_read, c);
    c->ev_write = event_new(w->base, c->fd, EV_WRITE | EV_PERSIST,
                            on_write, c);
    if (c->ring == NULL || c->keypool == NULL || c->ev_read == NULL ||
        c->ev_write == NULL) {
        return -1;
    }
    for (int i = 0; i < o.depth; i++) {
        c->ring[i].keys = c->keypool + (size_t)i * (size_t)o.multiget;
    }
    return 0;
}

static void
conn_free(struct conn *c)
{
    tls_client_free(c->tls);
    c->tls = NULL;
    if (c->fd >= 0) {
        close(c->fd);
    }
    if (c->ev_read != NULL) {
        event_free(c->ev_read);
    }
    if (c->ev_write != NULL) {
        event_free(c->ev_write);
    }
    free(c->ring);
    free(c->keypool);
    free(c->in.data);
    free(c->out.data);
}

/* --------------------------------------------------------------- worker */

static void
on_grace(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;

    (void)fd;
    (void)what;
    for (int i = 0; i < w->nconns; i++) {
        struct conn *c = &w->conns[i];

        if (c->active) {
            conn_counters(c)->timeouts += (uint64_t)c->inflight;
            conn_close(c, false);
        }
    }
}

/* Time is up: send nothing more, give the replies in flight a grace. */
static void
on_deadline(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;
    struct timeval grace = { DRAIN_GRACE_SEC, 0 };

    (void)fd;
    (void)what;
    w->stopping = true;
    evtimer_add(w->ev_grace, &grace);
    for (int i = 0; i < w->nconns; i++) {
        if (w->conns[i].active && w->conns[i].inflight == 0) {
            conn_idle(&w->conns[i]);
        }
    }
}

static void
on_stop(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;
    uint64_t n;

    (void)what;
    if (read(fd, &n, sizeof(n)) < 0 && errno != EAGAIN) {
        return;
    }
    if (!w->stopping) {
        on_deadline(-1, 0, w);
    }
}

static void
share(uint64_t total, int parts, int i, uint64_t *lo, uint64_t *hi)
{
    uint64_t each = total / (uint64_t)parts;
    uint64_t extra = total % (uint64_t)parts;
    uint64_t ui = (uint64_t)i;

    *lo = ui * each + (ui < extra ? ui : extra);
    *hi = *lo + each + (ui < extra ? 1 : 0);
}

static void
phase_setup(struct worker *w, enum phase ph)
{
    uint64_t lo;
    uint64_t hi;

    w->phase = ph;
    w->stopping = false;
    share(o.keys, o.threads, w->id, &w->seq_lo, &w->seq_hi);
    w->seq_next = w->seq_lo;
    if (ph == PHASE_PRELOAD) {
        w->budget = w->seq_hi - w->seq_lo;
    } else if (atomic_load(&interrupted)) {
        w->budget = 0;
    } else if (o.requests > 0) {
        share(o.requests, o.threads, w->id, &lo, &hi);
        w->budget = hi - lo;
    } else {
        w->budget = UINT64_MAX;
    }
}

/* Runs one phase to its end: budget spent, or deadline plus drain. */
static void
phase_run(struct worker *w, enum phase ph)
{
    phase_setup(w, ph);
    w->active = 0;
    w->t_start = now_ns();
    w->t_last = w->t_start;
    for (int i = 0; i < w->nconns; i++) {
        struct conn *c = &w->conns[i];

        if (c->fd < 0) {
            continue;
        }
        c->active = true;
        w->active++;
        event_add(c->ev_read, NULL);
    }
    if (ph == PHASE_RUN && o.duration > 0) {
        struct timeval tv;

        tv.tv_sec = (time_t)o.duration;
        tv.tv_usec = (suseconds_t)((o.duration - (double)tv.tv_sec) * 1e6);
        evtimer_add(w->ev_deadline, &tv);
    }
    event_add(w->ev_stop, NULL);
    w->paced = 0;
    if (paced(w)) {
        struct timeval ms = { 0, 1000 };

        event_add(w->ev_pace, &ms);
    }
    for (int i = 0; i < w->nconns; i++) {
        if (w->conns[i].active) {
            conn_advance(&w->conns[i]);
        }
    }
    if (w->active > 0) {
        event_base_dispatch(w->base);
    }
    evtimer_del(w->ev_deadline);
    evtimer_del(w->ev_grace);
    event_del(w->ev_stop);
    event_del(w->ev_pace);
}

static void
worker_pin(struct worker *w)
{
    cpu_set_t set;

    if (o.ncpus == 0) {
        return;
    }
    CPU_ZERO(&set);
    CPU_SET(o.cpus[w->id % o.ncpus], &set);
    if (sched_setaffinity(0, sizeof(set), &set) < 0) {
        fprintf(stderr, "mcload: pin to cpu %d: %s\n",
                o.cpus[w->id % o.ncpus], strerror(errno));
    }
}

static void *
worker_main(void *arg)
{
    struct worker *w = arg;

    worker_pin(w);
    if (o.preload) {
        phase_run(w, PHASE_PRELOAD);
        w->pre_ns = w->t_last - w->t_start;
    }
    pthread_barrier_wait(&phase_barrier);
    phase_run(w, PHASE_RUN);
    return NULL;
}

static int
worker_init(struct worker *w, int id)
{
    uint64_t lo;
    uint64_t hi;

    w->id = id;
    w->stop_fd = -1;
    w->rng = mix64(o.seed + (uint64_t)id * 0x9e3779b97f4a7c15ull);
    if (o.dist == DIST_ZIPF) {
        zipf_init(&w->zipf, o.zipf_s, o.keys);
    }
    share((uint64_t)o.conns, o.threads, id, &lo, &hi);
    w->nconns = (int)(hi - lo);
    w->base = event_base_new();
    w->conns = calloc((size_t)w->nconns, sizeof(*w->conns));
    if (w->base == NULL || w->conns == NULL) {
        return -1;
    }
    w->ev_deadline = evtimer_new(w->base, on_deadline, w);
    w->ev_grace = evtimer_new(w->base, on_grace, w);
    w->ev_pace = event_new(w->base, -1, EV_PERSIST, on_pace, w);
    w->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w->ev_deadline == NULL || w->ev_grace == NULL ||
        w->ev_pace == NULL || w->stop_fd < 0) {
        return -1;
    }
    w->ev_stop = event_new(w->base, w->stop_fd, EV_READ | EV_PERSIST,
                           on_stop, w);
    if (w->ev_stop == NULL) {
        return -1;
    }
    for (int i = 0; i < w->nconns; i++) {
        w->conns[i].fd = -1;
    }
    for (int i = 0; i < w->nconns; i++) {
        if (conn_init(&w->conns[i], w) < 0) {
            return -1;
        }
    }
    return 0;
}

static void
worker_free(struct worker *w)
{
    if (w->conns != NULL) {
        for (int i = 0; i < w->nconns; i++) {
            conn_free(&w->conns[i]);
        }
        free(w->conns);
    }
    if (w->ev_deadline != NULL) {
        event_free(w->ev_deadline);
    }
    if (w->ev_grace != NULL) {
        event_free(w->ev_grace);
    }
    if (w->ev_pace != NULL) {
        event_free(w->ev_pace);
    }
    if (w->ev_stop != NULL) {
        event_free(w->ev_stop);
    }
    if (w->stop_fd >= 0) {
        close(w->stop_fd);
    }
    if (w->base != NULL) {
        event_base_free(w->base);
    }
}

/* --------------------------------------------------------------- report */

/* The workers' figures summed after the join. */
struct report {
    struct counters run;
    struct counters pre;
    struct hist *hist;
    double seconds;
    double pre_seconds;
};

static void
counters_add(struct counters *d, const struct counters *s)
{
    d->requests += s->requests;
    d->get_reqs += s->get_reqs;
    d->get_keys += s->get_keys;
    d->hits += s->hits;
    d->misses += s->misses;
    d->sets += s->sets;
    d->errors += s->errors;
    d->timeouts += s->timeouts;
    d->conn_errors += s->conn_errors;
}

static void
report_gather(struct report *rep, struct worker *ws)
{
    uint64_t t0 = UINT64_MAX;
    uint64_t t1 = 0;
    uint64_t pre_ns = 0;

    for (int i = 0; i < o.threads; i++) {
        struct worker *w = &ws[i];

        counters_add(&rep->run, &w->run);
        pre_ns = w->pre_ns > pre_ns ? w->pre_ns : pre_ns;
        counters_add(&rep->pre, &w->pre);
        hist_merge(rep->hist, &w->hist);
        t0 = w->t_start < t0 ? w->t_start : t0;
        t1 = w->t_last > t1 ? w->t_last : t1;
    }
    rep->seconds = t1 > t0 ? (double)(t1 - t0) / 1e9 : 0.0;
    rep->pre_seconds = (double)pre_ns / 1e9;
}

static double
us(uint64_t ns)
{
    return (double)ns / 1000.0;
}

static double
rate(uint64_t n, double secs)
{
    return secs > 0 ? (double)n / secs : 0.0;
}

static void
report_text(const struct report *r)
{
    const struct counters *k = &r->run;
    const struct hist *h = r->hist;

    if (o.preload) {
        printf("preload:  %" PRIu64 " sets in %.2f s, %" PRIu64
               " errors\n", r->pre.sets, r->pre_seconds, r->pre.errors);
    }
    printf("server:   %s  proto %s  conns %d  depth %d  threads %d",
           o.server, proto_names[o.proto], o.conns, o.depth, o.threads);
    if (o.rate > 0) {
        printf("  rate %.0f/s", o.rate);
    }
    printf("\n");
    printf("run:      %.2f s, %" PRIu64 " requests, %.0f ops/s, "
           "%.0f keys/s\n", r->seconds, k->requests,
           rate(k->requests, r->seconds),
           rate(k->get_keys + k->sets, r->seconds));
    printf("gets:     %" PRIu64 " requests, %" PRIu64 " keys, %" PRIu64
           " hits, %" PRIu64 " misses\n", k->get_reqs, k->get_keys,
           k->hits, k->misses);
    printf("sets:     %" PRIu64 "\n", k->sets);
    printf("errors:   %" PRIu64 " (timeouts %" PRIu64 ", connection "
           "errors %" PRIu64 ")\n", k->errors + k->timeouts, k->timeouts,
           k->conn_errors);
    printf("latency:  p50 %.1f us  p90 %.1f us  p99 %.1f us  "
           "p99.9 %.1f us  max %.1f us\n", us(hist_pct(h, 0.50)),
           us(hist_pct(h, 0.90)), us(hist_pct(h, 0.99)),
           us(hist_pct(h, 0.999)), us(h->max));
    printf("stall:    longest %.3f ms\n", (double)h->max / 1e6);
}

static void
report_json(const struct report *r)
{
    const struct counters *k = &r->run;
    const struct hist *h = r->hist;

    printf("{\"server\": \"%s\", \"proto\": \"%s\", \"conns\": %d, "
           "\"depth\": %d, \"threads\": %d, \"multiget\": %d, "
           "\"keys\": %" PRIu64 ", \"rate\": %.0f,\n", o.server,
           proto_names[o.proto], o.conns, o.depth, o.threads, o.multiget,
           o.keys, o.rate);
    printf(" \"preload_sets\": %" PRIu64 ", \"preload_errors\": %" PRIu64
           ", \"preload_seconds\": %.3f,\n", r->pre.sets, r->pre.errors,
           r->pre_seconds);
    printf(" \"seconds\": %.3f, \"requests\": %" PRIu64 ", \"ops_per_sec\": "
           "%.1f, \"get_requests\": %" PRIu64 ", \"gets\": %" PRIu64
           ", \"hits\": %" PRIu64 ", \"misses\": %" PRIu64 ", \"sets\": %"
           PRIu64 ",\n", r->seconds, k->requests,
           rate(k->requests, r->seconds), k->get_reqs, k->get_keys,
           k->hits, k->misses, k->sets);
    printf(" \"errors\": %" PRIu64 ", \"timeouts\": %" PRIu64
           ", \"conn_errors\": %" PRIu64 ",\n", k->errors + k->timeouts,
           k->timeouts, k->conn_errors);
    printf(" \"latency_us\": {\"p50\": %.1f, \"p90\": %.1f, \"p99\": %.1f, "
           "\"p999\": %.1f, \"max\": %.1f},\n", us(hist_pct(h, 0.50)),
           us(hist_pct(h, 0.90)), us(hist_pct(h, 0.99)),
           us(hist_pct(h, 0.999)), us(h->max));
    printf(" \"max_stall_ms\": %.3f}\n", (double)h->max / 1e6);
}

/* --------------------------------------------------------------- main */

struct sigctx {
    sigset_t set;
    struct worker *ws;
    atomic_bool finished;   /* set before the last, self-sent signal */
};

/* Turns SIGINT/SIGTERM into a stop request on every worker's eventfd. */
static void *
signal_main(void *arg)
{
    struct sigctx *sc = arg;
    uint64_t one = 1;
    int sig;

    while (sigwait(&sc->set, &sig) == 0) {
        if (atomic_load(&sc->finished)) {
            break;
        }
        atomic_store(&interrupted, true);
        for (int i = 0; i < o.threads; i++) {
            if (write(sc->ws[i].stop_fd, &one, sizeof(one)) < 0) {
                perror("mcload: eventfd");
            }
        }
    }
    return NULL;
}

static int
run(struct worker *ws, struct report *rep)
{
    struct sigctx sc = { .ws = ws };
    pthread_t sigtid;
    int started = 0;
    int rc = -1;

    if (pthread_barrier_init(&phase_barrier, NULL, (unsigned)o.threads)) {
        return -1;
    }
    for (int i = 0; i < o.threads; i++) {
        if (worker_init(&ws[i], i) < 0) {
            goto out;
        }
    }
    /* block the signals everywhere; only signal_main takes them */
    sigemptyset(&sc.set);
    sigaddset(&sc.set, SIGINT);
    sigaddset(&sc.set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sc.set, NULL);
    if (pthread_create(&sigtid, NULL, signal_main, &sc) != 0) {
        goto out;
    }
    for (; started < o.threads; started++) {
        if (pthread_create(&ws[started].tid, NULL, worker_main,
                           &ws[started]) != 0) {
            /* the barrier would never open: nothing sane to do */
            fprintf(stderr, "mcload: cannot start thread\n");
            exit(1);
        }
    }
    for (int i = 0; i < started; i++) {
        pthread_join(ws[i].tid, NULL);
    }
    /* cancellation would do, but ASan cannot unwind out of sigwait */
    atomic_store(&sc.finished, true);
    pthread_kill(sigtid, SIGTERM);
    pthread_join(sigtid, NULL);
    report_gather(rep, ws);
    rc = 0;
out:
    pthread_barrier_destroy(&phase_barrier);
    return rc;
}

int
main(int argc, char **argv)
{
    struct worker *ws = NULL;
    struct report rep;
    int rc = 1;

    memset(&rep, 0, sizeof(rep));
    if (opts_parse(argc, argv) < 0) {
        fprintf(stderr, "mcload: see mcload --help\n");
        return 1;
    }
    ws = calloc((size_t)o.threads, sizeof(*ws));
    rep.hist = calloc(1, sizeof(*rep.hist));
    if (ws == NULL || rep.hist == NULL || pattern_init() < 0) {
        fprintf(stderr, "mcload: out of memory\n");
        goto out;
    }
    if (o.tls && tls_client_init() < 0) {
        goto out;
    }
    if (run(ws, &rep) < 0) {
        goto out;
    }
    if (o.json) {
        report_json(&rep);
    } else {
        report_text(&rep);
    }
    rc = rep.run.errors + rep.run.timeouts + rep.pre.errors > 0 ? 2 : 0;
out:
    if (ws != NULL) {
        for (int i = 0; i < o.threads; i++) {
            worker_free(&ws[i]);
        }
    }
    free(ws);
    free(rep.hist);
    free(vpattern);
    if (o.tls) {
        tls_client_done();
    }
    return rc;
}
