/*
 * conn_buf.h: the buffers of a worker's connections (conn_buf.c).
 *
 * A connection borrows them from its worker: a read buffer while it
 * reads a request, reply blocks and an iovec array while it answers,
 * and gives them back when it waits for its next request (conn_idle(),
 * conn.h), so that an idle connection holds none.  Up to CONN_SPARE_MAX
 * of each kind wait in the worker's spares for the next borrower.  The
 * worker's gauges count what its connections hold and what is spare, for
 * "stats" (read_buf_*, response_obj_*), and -o read_buf_mem_limit gives
 * each worker a share of read buffers and reply slots (memcached's
 * response objects) that they may not pass; under it the worker keeps
 * no spare buffer, so that the share counts what connections hold.
 *
 * Locking: none; a worker's buffers are touched by its thread alone
 * (the gauges are read racily by "stats").
 */
#ifndef MCPM_CONN_BUF_H
#define MCPM_CONN_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "memcached-pm/base/stats.h"

/* A read buffer's size, as memcached's READ_BUFFER_SIZE; the entries of
 * an iovec array as first borrowed; the spares of each kind a worker
 * keeps. */
#define CONN_RBUF_SIZE 16384
#define CONN_IOV_MIN   64
#define CONN_SPARE_MAX 4

/* A reply block: the arena replies are copied into, filled in turn. */
#define OBUF_SIZE (16384 - 2 * sizeof(size_t))

struct obuf {
    struct obuf *next;
    size_t       used;
    char         data[OBUF_SIZE];
};

/* Connection buffer memory, for "stats": the buffers a worker has, lent
 * to its connections or spare. */
struct buffer_gauges {
    uint64_t read_buf_count;
    uint64_t read_buf_bytes;
    uint64_t read_buf_bytes_free;   /* of them, spare */
    uint64_t response_obj_count;
    uint64_t response_obj_bytes;
    uint64_t resp_slots;        /* under the limit: conn_buf_resp_take() */
    bool     resp_buffer_kept;  /* once a slot was taken (the worker's) */
};

/* A worker's gauges and spares. */
struct conn_buf {
    struct buffer_gauges gauges;
    void                *rbufs;     /* chained through their first word */
    unsigned             nrbufs;
    struct obuf         *obufs;
    unsigned             nobufs;
    void                *iovs;
    unsigned             niovs;
    unsigned             resting;   /* connections keeping theirs while
                                       they wait (conn_rest()) */
};

/* Read buffers held (count, bytes; negative: given up), outside the
 * spares. */
void conn_buf_gauge_rbuf(struct conn_buf *b, int64_t count, int64_t bytes);

/* May the worker's read buffers grow by add bytes under -o
 * read_buf_mem_limit?  A refusal counts as read_buf_oom in ts; the
 * connection then closes, as memcached's does. */
bool conn_buf_may_grow(struct conn_buf *b, struct thread_stats *ts,
                       size_t add);

/* Under -o read_buf_mem_limit: a reply slot for one request (false: no
 * room in the share, counted as response_obj_oom in ts), and n slots
 * given back once their replies were sent. */
bool conn_buf_resp_take(struct conn_buf *b, struct thread_stats *ts);
void conn_buf_resp_back(struct conn_buf *b, unsigned n);

/* Borrow a read buffer of CONN_RBUF_SIZE (NULL: out of memory, or past
 * the share), a reply block (NULL: out of memory), an iovec array of
 * CONN_IOV_MIN entries (NULL: out of memory); and give one back, freed
 * when the spares are full. */
char         *conn_buf_rbuf(struct conn_buf *b, struct thread_stats *ts);
void          conn_buf_rbuf_back(struct conn_buf *b, char *p);
struct obuf  *conn_buf_obuf(struct conn_buf *b);
void          conn_buf_obuf_back(struct conn_buf *b, struct obuf *o);
struct iovec *conn_buf_iov(struct conn_buf *b);
void          conn_buf_iov_back(struct conn_buf *b, struct iovec *v);

/* A connection that waits for its next request keeps its read buffer and
 * reply block, if the worker has room (rest: false, it has none): at
 * most as many as the spares the worker keeps, and each counts as one of
 * them; unrest when it gives them back. */
bool conn_buf_rest(struct conn_buf *b);
void conn_buf_unrest(struct conn_buf *b);

/* Free the spares of a worker that is gone. */
void conn_buf_free(struct conn_buf *b);

#endif
