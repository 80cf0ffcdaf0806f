/*
 * conn.h: one client connection and its state machine.
 *
 * A connection belongs to one worker for its whole life and is touched only
 * by that worker's thread.  Its loop:
 *
 *      +--------+  line   +---------+  storage cmd   +-------+
 *   -->|  READ  |-------->|  PARSE  |--------------->| NREAD |--+
 *      +--------+         +---------+                +-------+  |
 *          ^                |  ^   |  error with data             |
 *          | no full line,  |  |   +--------------->+---------+  |
 *          | nothing queued |  |                    | SWALLOW |  |
 *          |                v  +--------------------+---------+  |
 *      +--------+  replies queued, or the -R budget spent         |
 *      | WRITE  |<-------------------------------------------------+
 *      +--------+
 *
 * PARSE handles every complete request in the read buffer, queueing each
 * reply as iovecs: small lines are copied into an output arena, values are
 * pointed at in item memory while the connection holds a reference.  WRITE
 * sends the queue with sendmsg() and only then gives the references back.
 */
#ifndef MCPM_CONN_H
#define MCPM_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <event2/event.h>
#include <event2/event_struct.h>

#include "proto/request.h"
#include "storage/cache.h"

struct worker;
struct obuf;

enum conn_state {
    CONN_READ,
    CONN_PARSE,
    CONN_NREAD,
    CONN_SWALLOW,
    CONN_WRITE,
    CONN_CLOSING
};

struct conn {
    int              fd;
    enum conn_state  state;
    struct worker   *worker;
    struct event     ev;
    short            ev_flags;       /* what ev is registered for */
    bool             is_unix;
    bool             close_after_write;
    bool             yielded;        /* -R budget ran out in this event */
    bool             read_short;     /* last read left the socket empty */
    rel_time_t       last_cmd;
    char             addr[64];       /* "tcp:ip:port" for stats conns */
    char             listen_addr[64];

    /* read buffer: [rstart, rend) holds unparsed bytes */
    char            *rbuf;
    size_t           rsize;
    size_t           rstart;
    size_t           rend;
    size_t           pf_end;         /* requests before it were prefetched */

    /* a value being read into a fresh item (CONN_NREAD) */
    struct item     *nitem;
    size_t           nread_off;      /* value bytes read so far */
    enum req_type    ncmd;
    uint64_t         ncas;
    bool             nnoreply;
    void            *nmeta;          /* an ms's saved request (process_meta) */

    uint64_t         swallow;        /* CONN_SWALLOW: bytes left to drop */

    /* output queue */
    struct iovec    *iov;
    size_t           iov_len;        /* entries in use */
    size_t           iov_cap;
    size_t           iov_sent;       /* entries fully sent */
    size_t           out_bytes;      /* bytes queued, not yet sent */
    struct obuf     *obuf_head;      /* arena blocks, reused */
    struct obuf     *obuf_cur;
    struct item    **refs;           /* items the queue points into */
    size_t           nrefs;
    size_t           refs_cap;
    bool             noreply;        /* drop replies of the current request */

    struct conn     *next;           /* worker's list */
    struct conn     *prev;
};

/* Create a connection for an accepted fd on worker w's event base and start
 * reading.  NULL on allocation failure (the fd is then closed). */
struct conn *conn_new(struct worker *w, int fd, bool is_unix,
                      const char *listen_addr);

/* Close the socket, release every held item and free the connection. */
void conn_free(struct conn **c);

/* Queue reply bytes (copied) or a fixed reply.  They return 0, or -1 when
 * the arena cannot grow (the connection is then closed after writing what
 * it has). */
int conn_out(struct conn *c, const char *s, size_t n);
int conn_out_rsp(struct conn *c, int rsp);      /* enum rsp_type */

/* Reserve room for one line of at most n bytes in the arena; the caller
 * writes it and commits the length it used. */
char *conn_out_reserve(struct conn *c, size_t n);
void conn_out_commit(struct conn *c, size_t used);

/* Queue an item's value bytes ("<data>\r\n"); takes over the caller's
 * reference.  Values up to 1 KB are copied and the reference released at
 * once; longer ones are sent by reference, released once written. */
int conn_out_value(struct conn *c, struct item *it);

/* A line followed by an item's value, with one reservation: reserve room
 * for a line of at most line_max bytes (and the value, when it is short
 * enough to be copied), write the line, then queue both; the value goes
 * as conn_out_value() sends it. */
char *conn_out_reserve_value(struct conn *c, size_t line_max,
                             struct item *it);
int conn_out_line_value(struct conn *c, size_t used, struct item *it);

/* Name of a state for "stats conns" (memcached's conn_* names). */
const char *conn_state_name(const struct conn *c);

#endif
