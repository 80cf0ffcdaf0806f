/*
 * worker.c: worker threads, each running its own event loop (worker.h).
 */
#include "config.h"

#include "memcached-pm/serve/worker.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "memcached-pm/base/log.h"
#include "memcached-pm/base/settings.h"
#include "memcached-pm/base/stats.h"
#include "memcached-pm/conn/conn_handover.h"
#include "memcached-pm/net/evloop.h"
#include "memcached-pm/net/ring.h"
#include "memcached-pm/security/tls.h"
#include "memcached-pm/serve/engine.h"
#include "memcached-pm/serve/machine.h"
#include "memcached-pm/serve/udp.h"
#include "memcached-pm/watch/logger.h"
#include "storage/base/affinity.h"
#include "storage/base/clock.h"
#include "storage/cache/cache.h"
#include "storage/cache/cache_durable.h"
#include "storage/cache/cache_open.h"

/* An accepted fd waiting for its worker, or one taken over with its
 * state (hc, owned). */
struct pending {
    struct pending       *next;
    int                   fd;
    bool                  is_unix;
    enum tls_mode         tls;
    char                  listen_addr[64];
    struct handover_conn *hc;
};

static struct worker *workers;
static unsigned nworkers;
static unsigned next_worker;      /* listener thread only */
static int *napi_of;              /* -N: worker i's NAPI id (listener) */
static int napi_last = -1;        /* the last worker given an id */

static void
owner_of(struct worker *w, struct conn_owner *o)
{
    o->loop = w->loop;
    o->ring = w->ring;
    o->list = w->list;
    o->stats = w->stats;
    o->la = &w->la;
}

static void
pending_free(struct pending *p)
{
    if (p->hc != NULL) {
        free(p->hc->left);
        free(p->hc);
    }
    free(p);
}

/* Start a connection: a new one, or one taken over with its state. */
static void
start_conn(struct conn *c, const struct pending *p)
{
    if (p->hc == NULL) {
        machine_start(c);
    } else if (conn_adopt(c, p->hc) != 0) {
        log_error("<%d no memory to take it over: closed", c->fd);
        conn_free(&c);
    } else {
        machine_adopt(c);
    }
}

/* Pending connections a worker takes in one go: thousands taken over
 * at once are started a batch a pass, between the requests of those
 * already started. */
#define TAKE_MAX 256

/* A worker lists its connections for a takeover within this, or sends
 * them in the pause. */
#define PRESENT_S 1

static void notify(struct worker *w);

static void
take_pending(struct worker *w, unsigned max)
{
    struct pending *list, *p;
    struct conn_owner o;
    struct conn *c;
    bool more;

    owner_of(w, &o);
    pthread_mutex_lock(&w->lock);
    list = w->pending;
    for (unsigned i = 0; w->pending != NULL && i < max; i++) {
        p = w->pending;
        w->pending = p->next;
    }
    if (w->pending == NULL) {
        w->pending_tail = &w->pending;
    }
    more = w->pending != NULL;
    pthread_mutex_unlock(&w->lock);
    for (unsigned i = 0; list != NULL && i < max; i++) {
        const struct handover_conn *hc;

        p = list;
        list = p->next;
        hc = p->hc;
        c = conn_new(&o, p->fd, p->is_unix, p->tls, p->listen_addr,
                     hc != NULL && hc->peer_len > 0
                     ? (const struct sockaddr *)&hc->peer : NULL,
                     hc != NULL ? hc->peer_len : 0);
        if (c == NULL) {
            SERVER_STAT_DECR(curr_connections);
        } else {
            start_conn(c, p);
        }
        pending_free(p);
    }
    if (more) {
        notify(w);          /* the rest in the next pass */
    }
}

/* What the workers may still present between them (worker_present_all()'s
 * max). */
static int64_t present_budget;

/* Mark and list the connections that may move (worker_present_all()),
 * or clear the marks (worker_present_end()). */
static void
present(struct worker *w)
{
    struct conn *c;

    pthread_mutex_lock(&w->lock);
    if (w->present_end) {
        w->present_end = false;
        for (c = w->list->head; c != NULL; c = c->next) {
            c->presented = 0;
        }
        w->list->presented = 0;
        for (size_t i = 0; i < w->list->left.ndead; i++) {
            close(w->list->left.dead[i]);
        }
        w->list->left.ndead = 0;
    }
    if (w->present_asked && !w->present_done) {
        size_t cap = w->list->n;

        /* and room for their records, so that the pause allocates
         * nothing */
        (void)handover_reserve(&w->list->left, cap);
        w->present_fds = cap > 0 ? malloc(cap * sizeof(int)) : NULL;
        w->npresent = 0;
        for (c = w->list->head; c != NULL && w->present_fds != NULL;
             c = c->next) {
            if (c->is_udp || !conn_can_move(c) || c->presented > 0 ||
                c->state == CONN_CLOSING || c->state == CONN_LEAVE) {
                continue;
            }
            if (__atomic_fetch_sub(&present_budget, 1, __ATOMIC_RELAXED) <=
                0) {
                break;          /* the successor has room for no more */
            }
            w->present_fds[w->npresent++] = c->fd;
            c->presented = ++w->list->presented;
            c->active = false;
        }
        w->present_done = true;
        pthread_cond_broadcast(&w->present_cond);
    }
    pthread_mutex_unlock(&w->lock);
}

/* Close every connection (but those that left already: they finish);
 * on the ring, those with operations in it stay listed, closing, until
 * the ring is through with them.  How many it closed. */
static unsigned
close_all(struct worker *w)
{
    struct conn *c, *next;
    unsigned n = 0;

    for (c = w->list->head; c != NULL; c = next) {
        next = c->next;
        if (c->state != CONN_LEAVE && c->state != CONN_CLOSING) {
            n += !c->is_udp;
            machine_close(&c);
        }
    }
    return n;
}

/* The loop ends: once, whether it stops or its connections left. */
static void
finish(struct worker *w)
{
    if (w->finished) {
        return;
    }
    w->finished = true;
    if (w->ring != NULL) {
        ring_remove(w->notify_io, NULL, NULL);
        w->notify_io = NULL;
        ring_break(w->ring);
    } else {
        evloop_break(w->loop);
    }
}

static void
on_empty(void *arg)
{
    finish(arg);
}

/* The node hands over: every connection leaves at its next request
 * boundary; the last one gone ends the loop. */
static void
leave_all(struct worker *w)
{
    struct conn *c, *next;

    w->list->leaving = true;
    w->list->on_empty = on_empty;
    w->list->empty_arg = w;
    /* Every connection goes at once: no cancel, no epoll_ctl of its
     * own, in the clients' pause. */
    if (w->ring != NULL) {
        ring_leave(w->ring);
    } else {
        evloop_close_soon(w->loop);
    }
    w->list->staying = 0;
    for (c = w->list->head; c != NULL; c = c->next) {
        c->staying = c->state != CONN_CLOSING && c->state != CONN_LEAVE;
        w->list->staying += c->staying;
    }
    if (w->list->staying == 0 && w->ring != NULL) {
        ring_let_go(w->ring);
    }
    for (c = w->list->head; c != NULL; c = next) {
        next = c->next;
        if (c->state != CONN_CLOSING && c->state != CONN_LEAVE) {
            machine_leave(c);
        }
    }
    if (w->list->n == 0) {
        finish(w);
    }
}

static void
on_notify(int fd, short what, void *arg)
{
    struct worker *w = arg;
    uint64_t n;
    bool stopping, leaving, force;

    (void)what;
    if (read(fd, &n, sizeof(n)) < 0 && errno != EAGAIN) {
        log_error("worker %u: eventfd read: %s", w->id, strerror(errno));
    }
    pthread_mutex_lock(&w->lock);
    stopping = w->stopping;
    leaving = w->leaving;
    force = w->leave_force;
    pthread_mutex_unlock(&w->lock);
    /* all of them before the connections leave or close */
    take_pending(w, leaving || stopping ? UINT_MAX : TAKE_MAX);
    present(w);
    if (leaving && !stopping && !w->list->leaving) {
        leave_all(w);
    }
    if (stopping || force) {
        /* a stop, or the connections still in a request when the
         * handover's time is up (the last one gone ends the loop) */
        unsigned closed = close_all(w);

        if (!stopping) {
            w->closed_in_request += closed;
            w->list->left.closed += closed;
        }
        if (stopping || w->list->n == 0) {
            finish(w);
        }
    }
}

/* Once a second: close connections idle for longer than idle_timeout,
 * and TLS clients that have not finished their handshake in time. */
static void
on_tick(int fd, short what, void *arg)
{
    struct worker *w = arg;
    rel_time_t now = clock_now();
    struct conn *c, *next;

    (void)fd;
    (void)what;
    /* This thread alone links and unlinks its connections: the walk
     * needs no lock. */
    for (c = w->list->head; c != NULL; c = next) {
        next = c->next;
#ifdef ENABLE_TLS
        if (c->tls != NULL && tls_expired(c->tls, c->last_cmd, now)) {
            machine_close(&c);
            continue;
        }
#endif
        if (settings.idle_timeout > 0 && c->state == CONN_READ &&
            !c->is_udp && now - c->last_cmd > settings.idle_timeout) {
            STAT_INCR(w->stats->idle_kicks);
            c->close_reason = LOG_CLOSE_IDLE;
            machine_close(&c);
        }
    }
}

/* The flusher made some of this worker's changes durable: its loop
 * wakes, and the pass's end sends the replies that waited. */
static void
wake(void *arg)
{
    notify(arg);
}

static void *
worker_main(void *arg)
{
    struct worker *w = arg;
    sigset_t all;

    /* Signals belong to the main thread's event loop. */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    if (logger_thread_init() != 0) {
        log_error("worker %u: no ring for watch; it shares one", w->id);
    }
    cache_thread_cache(true);
    /* group commit: the pass's changes go to the flusher after every
     * pass, whose wake-up comes through the eventfd */
    machine_join(w->list, wake, w);
    if (w->ring != NULL) {
        ring_run(w->ring, machine_end_pass);
    } else {
        for (;;) {
            int rc = evloop_run(w->loop, true);

            machine_end_pass();
            if (rc != 0 || evloop_broken(w->loop)) {
                if (rc != 0) {
                    log_error("worker %u: epoll_wait: %s", w->id,
                              strerror(errno));
                }
                break;
            }
        }
    }
    close_all(w);
    machine_end_pass();
    cache_group_leave();
    cache_thread_cache(false);
    return NULL;
}

static int
worker_setup(struct worker *w, unsigned id, struct conn_list *list)
{
    struct conn_owner o;

    w->id = id;
    w->stats = &stats.threads[id];
    w->list = list;
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->present_cond, NULL);
    w->pending_tail = &w->pending;
    if (lookahead_init(&w->la) != 0) {
        return -1;
    }
    w->notify_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w->notify_fd < 0) {
        return -1;
    }
    if (settings.event_engine == ENGINE_IO_URING) {
        w->ring = engine_ring(id, w->stats);
    }
    if (w->ring != NULL) {
        w->notify_io = ring_add(w->ring, w->notify_fd, true, on_notify, w);
        if (w->notify_io == NULL) {
            return -1;
        }
        ring_wait(w->notify_io, EV_READ);
    } else {
        if ((w->loop = evloop_new()) == NULL) {
            return -1;
        }
        evsrc_init(&w->notify_ev, w->notify_fd, on_notify, w);
        if (evloop_want(w->loop, &w->notify_ev, EV_READ) != 0) {
            return -1;
        }
    }
    owner_of(w, &o);
    if (udp_attach(id, &o) != 0) {
        return -1;
    }
    /* The sweep only exists with -o idle_timeout or TLS (handshakes that
     * stall): a pending timer makes every epoll_wait arm a kernel hrtimer,
     * which costs the request path about a microsecond for nothing. */
    if (w->ring != NULL && (settings.idle_timeout > 0 ||
                            settings.ssl_enabled)) {
        ring_set_tick(w->ring, on_tick, w);
    } else if (settings.idle_timeout > 0 || settings.ssl_enabled) {
        evloop_tick(w->loop, on_tick, w);
    }
    return 0;
}

int
worker_start_all(unsigned n)
{
    struct conn_list *lists = conn_lists_new(n);

    engine_choose();
    workers = calloc(n, sizeof(*workers));
    if (workers == NULL || lists == NULL) {
        return -1;
    }
    if (settings.num_napi_ids > 0 &&
        (napi_of = calloc(n, sizeof(*napi_of))) == NULL) {
        return -1;
    }
    nworkers = n;
    for (unsigned i = 0; i < n; i++) {
        if (worker_setup(&workers[i], i, &lists[i]) != 0) {
            log_error("cannot set up worker %u", i);
            return -1;
        }
    }
    for (unsigned i = 0; i < n; i++) {
        if (pthread_create(&workers[i].thread, NULL, worker_main,
                           &workers[i]) != 0) {
            log_error("cannot start worker %u", i);
            return -1;
        }
        pthread_setname_np(workers[i].thread, "mc-worker");
        affinity_apply(workers[i].thread, AFFINITY_WORKER, i);
    }
    engine_prepared_free();
    return 0;
}

static void
notify(struct worker *w)
{
    uint64_t one = 1;

    if (write(w->notify_fd, &one, sizeof(one)) < 0 && errno != EAGAIN) {
        log_error("worker %u: eventfd write: %s", w->id, strerror(errno));
    }
}

/* -N: the worker for the NAPI id (receive queue) fd arrived on, each new
 * id taking the next worker, as memcached; round robin for a socket
 * without one (loopback, a unix socket).  More ids than workers start
 * the assignment over. */
static struct worker *
pick_worker(int fd)
{
    socklen_t len = sizeof(int);
    int id = 0;

    if (napi_of != NULL && fd >= 0 &&
        (getsockopt(fd, SOL_SOCKET, SO_INCOMING_NAPI_ID, &id, &len) != 0 ||
         id == 0)) {
        SERVER_STAT_INCR(round_robin_fallback);
    }
    if (napi_of == NULL || id == 0) {
        return &workers[next_worker++ % nworkers];
    }
    for (;;) {
        for (unsigned i = 0; i < nworkers; i++) {
            if (napi_last < (int)i) {
                napi_of[i] = id;
                napi_last = (int)i;
                return &workers[i];
            }
            if (napi_of[i] == id) {
                return &workers[i];
            }
        }
        SERVER_STAT_INCR(unexpected_napi_ids);
        memset(napi_of, 0, nworkers * sizeof(*napi_of));
        napi_last = -1;
    }
}

static void
push(struct worker *w, struct pending *p)
{
    p->next = NULL;
    pthread_mutex_lock(&w->lock);
    *w->pending_tail = p;
    w->pending_tail = &p->next;
    pthread_mutex_unlock(&w->lock);
    notify(w);
}

int
worker_dispatch(int fd, bool is_unix, enum tls_mode tls,
                const char *listen_addr)
{
    struct worker *w = pick_worker(fd);
    struct pending *p = calloc(1, sizeof(*p));

    if (p == NULL) {
        close(fd);
        return -1;
    }
    p->fd = fd;
    p->is_unix = is_unix;
    p->tls = tls;
    snprintf(p->listen_addr, sizeof(p->listen_addr), "%s", listen_addr);
    push(w, p);
    return 0;
}

/* The rings and loops of workers that left (worker_leave_all()): each
 * holds every socket its worker had, and closing it costs the kernel a
 * step per socket: after the pause (worker_left_free()). */
struct left_engine {
    struct ring   *ring;
    struct evloop *loop;
};
static struct left_engine *left_engines;
static unsigned nleft;

static void
worker_teardown(struct worker *w, bool left)
{
    struct left_engine *e = NULL;
    struct pending *p;

    while ((p = w->pending) != NULL) {
        w->pending = p->next;
        close(p->fd);
        pending_free(p);
    }
    if (left && (e = realloc(left_engines, (nleft + 1) * sizeof(*e)))) {
        left_engines = e;
        left_engines[nleft++] = (struct left_engine){ w->ring, w->loop };
    } else {
        ring_free(w->ring);
        evloop_free(w->loop);
    }
    lookahead_destroy(&w->la);
    close(w->notify_fd);
    pthread_cond_destroy(&w->present_cond);
    pthread_mutex_destroy(&w->lock);
}

/* Join every worker (each asked to end), tear them down, and move what
 * their lists left into h (NULL: nothing left). */
static void
join_all(struct handover *h, int timeout_ms)
{
    struct timespec deadline;

    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
    if (deadline.tv_nsec >= 1000000000) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000;
    }
    for (unsigned i = 0; i < nworkers; i++) {
        struct worker *w = &workers[i];

        if (timeout_ms >= 0 &&
            pthread_timedjoin_np(w->thread, NULL, &deadline) == 0) {
            w->joined = true;
        } else if (timeout_ms >= 0) {
            pthread_mutex_lock(&w->lock);
            w->leave_force = true;
            pthread_mutex_unlock(&w->lock);
            notify(w);
        }
        if (!w->joined) {
            pthread_join(w->thread, NULL);
        }
        if (w->closed_in_request > 0) {
            /* the idle ones all left: only these could not */
            log_error("worker %u: %u connection%s still in a request after "
                      "%d ms: closed", w->id, w->closed_in_request,
                      w->closed_in_request == 1 ? "" : "s", timeout_ms);
        }
        if (h != NULL && handover_move(h, &w->list->left) != 0) {
            log_error("worker %u: no memory to hand over its connections",
                      w->id);
        }
        handover_free(&w->list->left, true);
        worker_teardown(w, h != NULL);
    }
    free(workers);
    free(napi_of);
    workers = NULL;
    napi_of = NULL;
    nworkers = 0;
    conn_lists_free();
}

void
worker_left_free(void)
{
    for (unsigned i = 0; i < nleft; i++) {
        ring_free(left_engines[i].ring);
        evloop_free(left_engines[i].loop);
    }
    free(left_engines);
    left_engines = NULL;
    nleft = 0;
}

void
worker_stop_all(void)
{
    for (unsigned i = 0; i < nworkers; i++) {
        pthread_mutex_lock(&workers[i].lock);
        workers[i].stopping = true;
        pthread_mutex_unlock(&workers[i].lock);
        notify(&workers[i]);
    }
    join_all(NULL, -1);
}

void
worker_leave_all(struct handover *h, int timeout_ms)
{
    for (unsigned i = 0; i < nworkers; i++) {
        pthread_mutex_lock(&workers[i].lock);
        workers[i].leaving = true;
        pthread_mutex_unlock(&workers[i].lock);
        notify(&workers[i]);
    }
    join_all(h, timeout_ms);
}

/* A pending entry for a connection taken over: NULL when out of
 * memory (then hc is as it was). */
static struct pending *
pending_adopted(struct handover_conn *hc)
{
    struct pending *p = calloc(1, sizeof(*p));
    struct handover_conn *copy = malloc(sizeof(*copy));

    if (p == NULL || copy == NULL) {
        free(p);
        free(copy);
        return NULL;
    }
    *copy = *hc;
    hc->left = NULL;                /* the pending entry owns it now */
    p->fd = hc->fd;
    p->is_unix = hc->is_unix;
    p->tls = TLS_OFF;
    p->hc = copy;
    snprintf(p->listen_addr, sizeof(p->listen_addr), "%s", hc->listen_addr);
    return p;
}

/* Hand each worker its queue (head to *tail), with one lock and one
 * wake-up each. */
static void
push_queues(struct pending **head, struct pending ***tail)
{
    for (unsigned k = 0; k < nworkers; k++) {
        struct worker *w = &workers[k];

        if (head[k] == NULL) {
            continue;
        }
        pthread_mutex_lock(&w->lock);
        *w->pending_tail = head[k];
        w->pending_tail = tail[k];
        pthread_mutex_unlock(&w->lock);
        notify(w);
        head[k] = NULL;
        tail[k] = &head[k];
    }
}

void
worker_adopt_all(struct handover *h)
{
    struct pending **head = calloc(nworkers, sizeof(*head));
    struct pending ***tail = calloc(nworkers, sizeof(*tail));

    for (unsigned i = 0; i < nworkers && tail != NULL; i++) {
        tail[i] = &head[i];
    }
    /* The busy ones go first, on their own: their clients wait while
     * the others are queued; then those that made a request in the last
     * second (the clients that are talking: their next request is on
     * its way); then the thousands that say nothing. */
    for (unsigned turn = 0; turn < 3; turn++) {
        for (size_t i = 0; i < h->nconns; i++) {
            struct handover_conn *hc = &h->conns[i];
            struct pending *p;
            unsigned k;

            if (hc->fd < 0 ||
                (hc->busy ? 0u : hc->idle == 0 ? 1u : 2u) != turn) {
                continue;
            }
            if (head == NULL || tail == NULL ||
                (p = pending_adopted(hc)) == NULL) {
                close(hc->fd);
                hc->fd = -1;
                continue;
            }
            hc->fd = -1;
            k = next_worker++ % nworkers;
            *tail[k] = p;
            tail[k] = &p->next;
            SERVER_STAT_INCR(curr_connections);
            SERVER_STAT_INCR(total_connections);
        }
        if (head != NULL && tail != NULL) {
            push_queues(head, tail);
        }
    }
    free(head);
    free(tail);
    handover_free(h, false);
}

int
worker_present_all(int **fds, size_t *n, uint64_t max)
{
    struct timespec deadline;
    int rc = 0;

    present_budget = max > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)max;
    for (unsigned i = 0; i < nworkers; i++) {
        struct worker *w = &workers[i];

        pthread_mutex_lock(&w->lock);
        w->present_asked = true;
        w->present_done = false;
        pthread_mutex_unlock(&w->lock);
        notify(w);
    }
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += PRESENT_S;
    for (unsigned i = 0; i < nworkers; i++) {
        struct worker *w = &workers[i];
        int *all = NULL;

        pthread_mutex_lock(&w->lock);
        while (!w->present_done &&
               pthread_cond_timedwait(&w->present_cond, &w->lock,
                                      &deadline) == 0) {
        }
        w->present_asked = false;   /* a worker that did not: not now */
        w->list->present_base = (int32_t)*n;
        if (w->npresent > 0 &&
            (all = realloc(*fds, (*n + w->npresent) * sizeof(int))) == NULL) {
            rc = -1;
        } else if (w->npresent > 0) {
            memcpy(all + *n, w->present_fds, w->npresent * sizeof(int));
            *fds = all;
            *n += w->npresent;
        }
        free(w->present_fds);
        w->present_fds = NULL;
        w->npresent = 0;
        pthread_mutex_unlock(&w->lock);
    }
    return rc;
}

void
worker_present_end(void)
{
    for (unsigned i = 0; i < nworkers; i++) {
        struct worker *w = &workers[i];

        pthread_mutex_lock(&w->lock);
        w->present_asked = false;
        w->present_end = true;
        pthread_mutex_unlock(&w->lock);
        notify(w);
    }
}
