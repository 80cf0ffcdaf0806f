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

/* Bytes of each provided receive buffer of a worker's ring: memcached's
 * read size. */
#define RING_BUFFER_SIZE 16384

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
    struct pending      *pending;
    bool                 stopping;
    bool                 leaving;        /* the node hands over */
    bool                 leave_force;    /* ... and its time is up */
    bool                 finished;       /* its loop was told to end */
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

/* Hand a connection taken over to the next worker, with its state (its
 * input buffer is taken from hc).  0, or -1 when out of memory (the
 * caller still owns hc). */
int worker_adopt(struct handover_conn *hc);

#endif
