/*
 * conn.h: one client connection: its socket, its read buffer, its reply
 * queue, and the list of connections of its worker (conn.c); reading is
 * conn_in.h's, the reply queue conn_out.h's, leaving for a successor
 * conn_handover.h's.
 *
 * This is the object the request layer works on (process.h, exec.h,
 * admin.h write replies into its queue); the state machine that drives
 * it from socket events is machine.h, the thread that owns it worker.h.
 * A connection belongs to one worker for its whole life and is touched
 * only by that worker's thread, but for the few fields "stats conns"
 * reads (see conn_each()).
 */
#ifndef MCPM_CONN_H
#define MCPM_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <netinet/in.h>
#include <pthread.h>

#include <event2/event.h>

#include "memcached-pm/base/stats.h"
#include "memcached-pm/conn/conn_buf.h"
#include "memcached-pm/conn/handover.h"
#include "memcached-pm/net/evloop.h"
#include "memcached-pm/security/tls.h"
#include "proto/request.h"
#include "storage/slab/item.h"

struct lookahead;
struct ring;
struct ring_io;
struct tls;
struct udp_port;

/* What executing a request asks of its connection next. */
enum process_result {
    PROCESS_OK,          /* reply queued (or suppressed), parse on */
    PROCESS_FLUSH,       /* reply queued: write out what is queued before
                            the next request (mn, as memcached) */
    PROCESS_NREAD,       /* c->nitem allocated: read its value next */
    PROCESS_SWALLOW,     /* c->swallow data bytes to discard next */
    PROCESS_CLOSE,       /* close after writing what is queued */
    PROCESS_HANDOFF      /* its socket now belongs to another thread
                            (watch): let go of it, do not close it */
};

/* The connections of one worker.  Its thread links and unlinks them
 * under the lock; "stats conns" walks them under it.  Its buffers are
 * that thread's alone.  While the node hands over (leaving),
 * each connection that reaches a request boundary lets go of its socket
 * into `left`, and the last one gone calls on_empty. */
struct conn_list {
    pthread_mutex_t      lock;
    struct conn         *head;
    unsigned             n;
    struct conn_buf      buf;        /* its buffers (conn_buf.h) */
    bool                 leaving;
    unsigned             staying;    /* while leaving: connections not
                                        yet gone or going */
    uint32_t             presented;  /* sockets sent ahead of a takeover */
    int32_t              present_base; /* the first one's place among all
                                        the node sent */
    struct handover      left;
    void               (*on_empty)(void *arg);
    void                *empty_arg;
    /* waiting for a request, buffers kept (conn_rest()), and the pass
     * each last rested in; the worker's thread alone touches these */
    struct conn         *resting[CONN_SPARE_MAX];
    uint64_t             rested[CONN_SPARE_MAX];
    uint64_t             pass;       /* the worker's loop passes */
};

/* The protocol a connection speaks: with -B auto its first byte decides
 * (0x80: binary), for its whole life. */
enum conn_proto {
    CONN_NEGOTIATE,
    CONN_TEXT,
    CONN_BINARY,
    CONN_TEXT_AUTH      /* -Y: text that must authenticate first */
};

enum conn_state {
    CONN_READ,
    CONN_PARSE,
    CONN_NREAD,
    CONN_SWALLOW,
    CONN_WRITE,
    CONN_CLOSING,
    CONN_HANDOFF,
    CONN_LEAVE           /* at a request boundary, handed over */
};

struct conn {
    int              fd;
    enum conn_state  state;
    enum conn_proto  proto;
    rel_time_t       last_cmd;
    struct tls      *tls;            /* its TLS session (transport.h), or
                                        NULL: plain */
    struct evsrc     ev;             /* on its worker's epoll loop */
    struct conn     *park_next;
    uint64_t         last_note;      /* group commit: the worker's clock
                                        of changes (cache_group_noted())
                                        at its last change, its last
                                        removal, and when it was last
                                        driven */
    uint64_t         last_kill;
    uint64_t         drive_note;
    void            *sasl;           /* -S through Cyrus: its session
                                        (sasl_cyrus.h) */
    char            *peer_cn;        /* TLS: the client certificate's
                                        common name (malloc'd), or NULL */
    const char      *listen_addr;    /* the socket it came from, as
                                        stats conns names it (conn_name());
                                        a UDP socket's own name */
    struct sockaddr_in6 peer;        /* stats conns, watch's connevents */
    socklen_t        peer_len;
    uint32_t         presented;      /* 1 + its place among the sockets
                                        its worker sent ahead of a
                                        takeover, or 0 */

    bool             is_unix;
    bool             is_udp;         /* a worker's UDP socket (udp.h) */
    bool             close_after_write;
    bool             yielded;        /* -R budget ran out in this event */
    uint8_t          rest_slot;      /* 1 + its place in its list's
                                        resting, or 0 */
    bool             parked;         /* replies wait for changes to be
                                        durable (machine_end_pass()) */
    bool             watching;       /* handed to the mc-log thread (or
                                        being): stats conns lists the
                                        watcher instead */
    bool             answered;       /* a request ran since the replies
                                        were last all written (memcached's
                                        response stack is not empty) */
    bool             read_short;     /* last read left the socket empty */
    bool             tls_named;      /* peer_cn is final (release) */
    bool             authenticated;  /* -S: a SASL AUTH succeeded */
    bool             sasl_started;   /* -S: PLAIN waits for its STEP */
    bool             noreply;        /* drop replies of the current request */
    bool             nnoreply;       /* ... of the value being read */
    bool             active;         /* read since it was presented */
    bool             staying;        /* counted in its list's staying */
    uint8_t          close_reason;   /* LOG_CLOSE_*, error unless set */
    uint8_t          bin_opcode;     /* the binary request being answered */

    /* what it shares with the other connections of its worker */
    struct evloop       *loop;       /* epoll engine: the worker's loop
                                        (evloop.h), else NULL */
    struct ring         *ring;       /* io_uring engine: the worker's ring
                                        (ring.h), else NULL */
    struct ring_io      *rio;        /* ... and its source on it */
    struct conn_list    *list;
    struct thread_stats *stats;      /* the worker's counters */
    struct lookahead    *la;         /* the worker's look-ahead */

    /* read buffer: [rstart, rend) holds unparsed bytes; none while the
     * connection is idle (conn_idle()) */
    char            *rbuf;
    uint32_t         rsize;
    uint32_t         rstart;
    uint32_t         rend;
    uint32_t         pf_end;         /* requests before it were prefetched */

    /* a value being read into a fresh item (CONN_NREAD) */
    struct item     *nitem;
    size_t           nread_off;      /* value bytes read so far */
    uint64_t         ncas;
    void            *nmeta;          /* an ms's saved request (process_meta) */
    enum req_type    ncmd;

    uint32_t         bin_opaque;     /* the binary request being answered
                                        (process_bin.h) */
    uint64_t         swallow;        /* CONN_SWALLOW: bytes left to drop */

    /* UDP: the reply queue cut into messages, each the reply to one
     * request (or one key of a multiget) of one datagram; udp.c's state */
    struct conn_msg *msgs;
    uint32_t         nmsgs;
    uint32_t         msgs_cap;
    unsigned         dgram;          /* the datagram being answered */
    unsigned         resp_slots;     /* held until the queue is sent */
    struct udp_port *udp;

    /* output queue; no block nor iovecs while idle (conn_idle()) */
    struct iovec    *iov;
    uint32_t         iov_len;        /* entries in use */
    uint32_t         iov_cap;
    uint32_t         iov_sent;       /* entries fully sent */
    uint32_t         nrefs;
    size_t           out_bytes;      /* bytes queued, not yet sent */
    struct obuf     *obuf_head;      /* arena blocks */
    struct obuf     *obuf_cur;
    struct item    **refs;           /* items the queue points into */
    uint32_t         refs_cap;

    struct conn     *next;           /* worker's list */
    struct conn     *prev;
};

/* A reply message on a UDP socket: where it ends in the reply queue
 * (bytes from its start), the datagram it answers, and whether it is the
 * reply of a request cut short, never sent. */
struct conn_msg {
    size_t   end;
    unsigned dgram;
    bool     drop;
};

/* The worker that will own a new connection. */
struct conn_owner {
    struct evloop       *loop;          /* NULL: io_uring */
    struct ring         *ring;          /* NULL: epoll */
    struct conn_list    *list;
    struct thread_stats *stats;
    struct lookahead    *la;
};

/* ---- lists ----------------------------------------------------------- */

/* The lists of n workers, zeroed, owned here; NULL on allocation
 * failure.  conn_lists_free() when every connection is gone. */
struct conn_list *conn_lists_new(unsigned n);
void conn_lists_free(void);

/*
 * "stats conns": call fn for every connection of every worker, holding
 * that worker's list lock.  fn may read only the fields a connection never
 * changes after creation (fd, addr, listen_addr), and its state and
 * last_cmd through relaxed atomic loads.
 */
void conn_each(void (*fn)(struct conn *c, void *ctx), void *ctx);

/* Every worker's buffer gauges summed (relaxed reads). */
void conn_gauges(struct buffer_gauges *out);


/* ---- life ------------------------------------------------------------ */

/* A connection for an accepted fd, on its owner's list, in CONN_READ with
 * no event registered yet (machine_start()); with tls, a TLS session
 * whose handshake its first reads do.  peer: its client's address, known
 * already (a connection taken over), or NULL: asked of the socket.  NULL
 * on allocation failure (the fd is then closed). */
struct conn *conn_new(const struct conn_owner *o, int fd, bool is_unix,
                      enum tls_mode tls, const char *listen_addr,
                      const struct sockaddr *peer, socklen_t peer_len);

/* A worker's UDP socket as a connection, named `name` ("udp:host:port")
 * for stats conns, its read buffer room for a whole datagram, its reply
 * queue cut into messages, u its transport's state (freed with it);
 * NULL on allocation failure (fd closed, u freed). */
struct conn *conn_new_udp(const struct conn_owner *o, int fd,
                          const char *name, size_t rbuf_size,
                          struct udp_port *u);

/* Close the socket, release every held item and free the connection.
 * Its look-ahead must be dropped first (machine_close() does both). */
void conn_free(struct conn **c);

/* The connection waits for its next request: its read buffer (when
 * nothing in it is unparsed), and its reply blocks and iovec array (when
 * nothing is queued), go back to its worker's spares.  Not a UDP
 * socket's. */
void conn_idle(struct conn *c);

/* The connection waits for its next request, but a busy one comes soon:
 * it keeps its buffers until a pass of its worker's loop has gone by
 * without it (conn_rest_end_pass(), at each pass's end, gives them back
 * then, conn_idle()).  So a connection with a request in flight borrows
 * nothing per request, and an idle one holds nothing.  At most as many
 * connections as the spares a worker keeps keep theirs so, each in the
 * place of a spare (conn_buf_rest()), the others give them back at once:
 * what a worker's connections hold stays what it was. */
void conn_rest(struct conn *c);
void conn_rest_end_pass(struct conn_list *l);

/* Let go of a connection whose socket another thread took over (watch):
 * freed like conn_free() but the socket stays open, and it stays counted
 * in curr_connections for its new owner to uncount. */
void conn_detach(struct conn **c);

/* Set the state, for stats conns' racy readers. */
static inline void
conn_set_state(struct conn *c, enum conn_state s)
{
    __atomic_store_n(&c->state, s, __ATOMIC_RELAXED);
}

/* The bytes of an item's value on this connection's wire: a text value
 * ends in "\r\n" (kept in the item), a binary one is the data alone. */
static inline size_t
conn_value_len(const struct conn *c, const struct item *it)
{
    return item_vlen(it) + (c->proto == CONN_BINARY ? 0 : 2);
}

/* A connection's address as "stats conns" names it: "tcp:ip:port",
 * "tcp6:[ip]:port", "unix:<path>", a UDP socket's name. */
void conn_addr_name(const struct conn *c, char *out, size_t len);

/* A name kept until conn_lists_free() (the same pointer for the same
 * string): the listeners' names connections point to.  Thread-safe. */
const char *conn_name(const char *s);

/* Name of a connection's state for "stats conns", and of a state
 * (memcached's conn_* names). */
const char *conn_state_name(const struct conn *c);
const char *conn_state_label(enum conn_state s);

/* ---- what conn_in.c and conn_out.c share of the object ---------------- */

/* The reply slots c holds (-o read_buf_mem_limit) given back: its queue
 * was sent or dropped. */
static inline void
conn_resp_give_back(struct conn *c)
{
    if (c->resp_slots > 0) {
        conn_buf_resp_back(&c->list->buf, c->resp_slots);
        c->resp_slots = 0;
    }
}

/* The items c's queue points into, given back. */
void conn_release_refs(struct conn *c);

/* item_value_iov() cut to the value's bytes on c's wire (conn_value_len()
 * of them): up to max pieces of it from `off`, and how many. */
size_t conn_value_iov(const struct conn *c, const struct item *it,
                      size_t off, struct iovec *iov, size_t max);

#endif
