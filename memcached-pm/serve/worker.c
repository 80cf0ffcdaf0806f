/*
 * worker.c: worker threads, each running its own event loop (worker.h).
 */
#include "config.h"

#include "memcached-pm/serve/worker.h"

#include <errno.h>
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
#include "memcached-pm/serve/machine.h"
#include "memcached-pm/serve/udp.h"
#include "memcached-pm/watch/logger.h"
#include "storage/base/affinity.h"
#include "storage/base/clock.h"
#include "storage/cache/cache.h"
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

static void
take_pending(struct worker *w)
{
    struct pending *list, *p;
    struct conn_owner o;
    struct conn *c;

    owner_of(w, &o);
    pthread_mutex_lock(&w->lock);
    list = w->pending;
    w->pending = NULL;
    pthread_mutex_unlock(&w->lock);
    /* The queue is LIFO; order between connections does not matter. */
    while ((p = list) != NULL) {
        list = p->next;
        c = conn_new(&o, p->fd, p->is_unix, p->tls, p->listen_addr);
        if (c == NULL) {
            SERVER_STAT_DECR(curr_connections);
        } else {
            start_conn(c, p);
        }
        pending_free(p);
    }
}

/* Close every connection; on the ring, those with operations in it stay
 * listed, closing, until the ring is through with them. */
static void
close_all(struct worker *w)
{
    struct conn *c, *next;

    for (c = w->list->head; c != NULL; c = next) {
        next = c->next;
        machine_close(&c);
    }
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
    take_pending(w);
    pthread_mutex_lock(&w->lock);
    stopping = w->stopping;
    leaving = w->leaving;
    force = w->leave_force;
    pthread_mutex_unlock(&w->lock);
    if (leaving && !stopping && !w->list->leaving) {
        leave_all(w);
    }
    if (stopping || force) {
        /* a stop, or the connections still in a request when the
         * handover's time is up (the last one gone ends the loop) */
        close_all(w);
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
    if (w->ring != NULL) {
        /* with group commit, a sync after every pass, before its replies */
        ring_run(w->ring, cache_group_join() ? machine_end_pass : NULL);
    } else if (!cache_group_join()) {
        if (evloop_run(w->loop, false) != 0) {
            log_error("worker %u: epoll_wait: %s", w->id, strerror(errno));
        }
    } else {
        /* Group commit: a sync after every pass, before its replies. */
        for (;;) {
            int rc = evloop_run(w->loop, true);

            machine_end_pass();
            if (rc != 0 || evloop_broken(w->loop)) {
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

/* Under -o event_engine=io_uring, the worker's ring; a worker whose ring
 * cannot be made says why and runs on epoll.  0, or -1 when out of
 * memory. */
static int
ring_setup(struct worker *w)
{
    struct ring_config cfg = {
        .entries = settings.ring_entries,
        .buffers = settings.ring_buffers,
        .buffer_size = RING_BUFFER_SIZE,
        .sqpoll = settings.ring_sqpoll,
        .files = settings.ring_files ? (unsigned)settings.maxconns : 0,
    };
    char why[128];

    if (settings.event_engine != ENGINE_IO_URING) {
        return 0;
    }
    w->ring = ring_new(&cfg, w->stats, why, sizeof(why));
    if (w->ring == NULL) {
        log_error("worker %u: no io_uring (%s): it uses epoll", w->id, why);
    }
    return 0;
}

static int
worker_setup(struct worker *w, unsigned id, struct conn_list *list)
{
    struct conn_owner o;

    w->id = id;
    w->stats = &stats.threads[id];
    w->list = list;
    pthread_mutex_init(&w->lock, NULL);
    if (lookahead_init(&w->la) != 0) {
        return -1;
    }
    w->notify_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w->notify_fd < 0 || ring_setup(w) != 0) {
        return -1;
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
    char why[128];

    if (settings.event_engine != ENGINE_EPOLL) {
        if (ring_probe(why, sizeof(why))) {
            settings.event_engine = ENGINE_IO_URING;
        } else if (settings.event_engine == ENGINE_AUTO) {
            log_info("io_uring cannot be used (%s): the workers use epoll",
                     why);
            settings.event_engine = ENGINE_EPOLL;
        } else {
            log_error("io_uring cannot be used (%s): the workers use epoll",
                      why);
            settings.event_engine = ENGINE_EPOLL;
        }
    }
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
    pthread_mutex_lock(&w->lock);
    p->next = w->pending;
    w->pending = p;
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

static void
worker_teardown(struct worker *w)
{
    struct pending *p;

    while ((p = w->pending) != NULL) {
        w->pending = p->next;
        close(p->fd);
        pending_free(p);
    }
    ring_free(w->ring);
    evloop_free(w->loop);
    lookahead_destroy(&w->la);
    close(w->notify_fd);
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
            log_error("worker %u: connections still in a request after "
                      "%d ms: closed", w->id, timeout_ms);
            pthread_mutex_lock(&w->lock);
            w->leave_force = true;
            pthread_mutex_unlock(&w->lock);
            notify(w);
        }
        if (!w->joined) {
            pthread_join(w->thread, NULL);
        }
        if (h != NULL && handover_move(h, &w->list->left) != 0) {
            log_error("worker %u: no memory to hand over its connections",
                      w->id);
        }
        handover_free(&w->list->left, true);
        worker_teardown(w);
    }
    free(workers);
    free(napi_of);
    workers = NULL;
    napi_of = NULL;
    nworkers = 0;
    conn_lists_free();
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

int
worker_adopt(struct handover_conn *hc)
{
    struct pending *p = calloc(1, sizeof(*p));
    struct handover_conn *copy = malloc(sizeof(*copy));

    if (p == NULL || copy == NULL) {
        free(p);
        free(copy);
        return -1;
    }
    *copy = *hc;
    hc->left = NULL;                /* the pending entry owns it now */
    p->fd = hc->fd;
    p->is_unix = hc->is_unix;
    p->tls = TLS_OFF;
    p->hc = copy;
    snprintf(p->listen_addr, sizeof(p->listen_addr), "%s", hc->listen_addr);
    SERVER_STAT_INCR(curr_connections);
    SERVER_STAT_INCR(total_connections);
    push(pick_worker(-1), p);
    return 0;
}
