/*
 * worker.h: the worker threads and the hand-off of accepted connections.
 *
 * Each worker owns an event base and the connections given to it.  The
 * listener (main thread) hands a new fd over by pushing it on the worker's
 * small queue and writing to the worker's eventfd; that queue's mutex is
 * touched once per connection, never per request.
 */
#ifndef MCPM_WORKER_H
#define MCPM_WORKER_H

#include <pthread.h>
#include <stdbool.h>

#include <event2/event.h>

#include "memcached-pm/stats.h"
#include "proto/request.h"
#include "storage/prefetch.h"

struct conn;
struct pending;

/* A request of a pipeline that the look-ahead (process_prefetch_pipeline)
 * has parsed; it runs from here instead of being parsed a second time. */
struct ahead_req {
    size_t              off;     /* where its line starts in the rbuf */
    size_t              len;     /* the line's length */
    struct prefetch_key key;     /* its first key, hashed (key NULL: none) */
    struct request      req;
};

/* Connection buffer memory, for "stats" (read_buf_*, response_obj_*). */
struct buffer_gauges {
    uint64_t read_buf_count;
    uint64_t read_buf_bytes;
    uint64_t resp_obj_count;
    uint64_t resp_obj_bytes;
};

struct worker {
    unsigned             id;
    pthread_t            thread;
    struct event_base   *base;
    int                  notify_fd;      /* eventfd */
    struct event        *notify_ev;
    struct event        *tick_ev;        /* idle timeout, once a second */
    pthread_mutex_t      lock;           /* guards pending and stopping */
    struct pending      *pending;
    bool                 stopping;
    struct thread_stats *stats;          /* this worker's block */
    struct conn         *conns;          /* every connection it owns */
    unsigned             nconns;
    struct buffer_gauges gauges;         /* written by this thread only */
    struct prefetch_key  pf[PREFETCH_BATCH_MAX];  /* a batch being walked */
    /* The look-ahead's requests, ahead[ahead_next..ahead_n), parsed from
     * ahead_conn's read buffer (NULL: none); prefetch_batch entries. */
    struct ahead_req    *ahead;
    struct conn         *ahead_conn;
    unsigned             ahead_n, ahead_next;
    /* The running request's key as the look-ahead hashed it (key NULL:
     * none), so that it is not hashed again. */
    struct prefetch_key  memo;
};

/* Start n workers; 0, or -1 with a message. */
int worker_start_all(unsigned n);

/* Hand an accepted fd to the next worker, round robin.  0, or -1 (the fd
 * is closed). */
int worker_dispatch(int fd, bool is_unix, const char *listen_addr);

/* Ask every worker to close its connections and exit, and join them. */
void worker_stop_all(void);

/* Sum every worker's buffer gauges (relaxed reads). */
void worker_gauges(struct buffer_gauges *out);

/* Link/unlink a connection on its worker's list (worker thread only). */
void worker_conn_add(struct worker *w, struct conn *c);
void worker_conn_del(struct worker *w, struct conn *c);

/*
 * "stats conns": call fn for every connection of every worker, holding that
 * worker's lock (which guards its list; connect and close take it, requests
 * do not).  fn may read only the fields a connection never changes after
 * creation, and its state and last_cmd through relaxed atomic loads.
 */
void worker_each_conn(void (*fn)(struct conn *c, void *ctx), void *ctx);

#endif
