/*
 * worker.h: the worker threads and the hand-off of accepted connections.
 *
 * Each worker owns an event loop (evloop.h, or its io_uring ring: ring.h)
 * and the connections given to it.  The
 * listener (main thread) hands a new fd over by pushing it on the worker's
 * small queue and writing to the worker's eventfd; that queue's mutex is
 * touched once per connection, never per request.
 */
#ifndef MCPM_WORKER_H
#define MCPM_WORKER_H

#include <pthread.h>
#include <stdbool.h>

#include <event2/event.h>

#include "memcached-pm/base/stats.h"
#include "memcached-pm/cmd/lookahead.h"
#include "memcached-pm/conn/conn.h"
#include "memcached-pm/conn/handover.h"
#include "memcached-pm/net/evloop.h"

struct pending;
struct ring;
struct ring_io;

struct worker {
    unsigned             id;
    pthread_t            thread;
    struct evloop       *loop;           /* epoll engine (evloop.h) */
    int                  notify_fd;      /* eventfd */
    struct evsrc         notify_ev;      /* ... on the loop */
    struct ring         *ring;           /* io_uring engine (ring.h), or
                                            NULL: the loop above */
    struct ring_io      *notify_io;      /* ... notify_fd on it */
    pthread_mutex_t      lock;           /* guards pending and the flags
                                            below it */
    struct pending      *pending;        /* first in, first taken */
    struct pending     **pending_tail;
    bool                 present_asked;  /* worker_present_all() */
    bool                 present_done;
    bool                 present_end;    /* worker_present_end() */
    int                 *present_fds;
    size_t               npresent;
    pthread_cond_t       present_cond;
    bool                 stopping;
    bool                 leaving;        /* the node hands over */
    bool                 leave_force;    /* ... and its time is up */
    bool                 finished;       /* its loop was told to end */
    unsigned             closed_in_request; /* by the drain's deadline */
    bool                 joined;
    struct thread_stats *stats;          /* this worker's block */
    struct conn_list    *list;           /* its connections (conn.h) */
    struct lookahead     la;             /* its batched lookups */
};

/* Start n workers; 0, or -1 with a message. */
int worker_start_all(unsigned n);


/* Hand an accepted fd to the next worker, round robin (with tls, the
 * worker starts its TLS session).  0, or -1 (the fd is closed). */
int worker_dispatch(int fd, bool is_unix, enum tls_mode tls,
                    const char *listen_addr);

/* Ask every worker to close its connections and exit, and join them. */
void worker_stop_all(void);

/*
 * The node hands over: ask every worker to bring each connection to a
 * request boundary and let go of it (conn_leave()), then exit; join them.
 * A connection still in a request after timeout_ms is closed.  The
 * connections and UDP sockets they let go of are appended to *h.
 */
void worker_leave_all(struct handover *h, int timeout_ms);

/* Close what the workers that left still hold (their rings, their epoll
 * sets): once the successor serves, or this node serves on. */
void worker_left_free(void);

/* Hand the connections taken over to the workers, round robin, with
 * their state (their input buffers taken): the busy ones first, so that
 * the clients that are waiting are served before the idle ones are
 * settled in.  A connection that cannot be (out of memory) is closed;
 * h is left empty. */
void worker_adopt_all(struct handover *h);

/*
 * Before a takeover's pause (handover version 4): every worker lists the
 * sockets of the connections that may move (conn_can_move()) and marks
 * them with their place, their first at the worker's list's
 * present_base.  The fds, in that order, are appended to *fds (n in
 * *n), for the successor to hold before the pause; they stay open until
 * the node has handed over, or worker_present_end() (a connection that
 * closes meanwhile is shut down).  At most max (the successor's room):
 * the rest go in the pause, as far as there is room.  0, or -1 when out
 * of memory (then call worker_present_end()).
 */
int worker_present_all(int **fds, size_t *n, uint64_t max);

/* The takeover stopped before its pause: the marks go, and the sockets
 * of connections closed since close. */
void worker_present_end(void);

#endif
