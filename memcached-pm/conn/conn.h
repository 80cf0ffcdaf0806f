/*
 * conn.h: one client connection: its socket, its read buffer, its reply
 * queue, and the list of connections of its worker.
 *
 * This is the object the request layer works on (process.h, exec.h,
 * admin.h write replies into its queue); the state machine that drives
 * it from socket events is machine.h, the thread that owns it worker.h.
 * A connection belongs to one worker for its whole life and is touched
 * only by that worker's thread, but for the few fields "stats conns"
 * reads (see conn_each()).
 *
 * Replies are queued as iovecs: small lines are copied into an output
 * arena, values are pointed at in item memory while the connection holds
 * a reference; conn_flush() sends the queue with sendmsg() and only then
 * gives the references back.
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

#include "memcached-pm/net/evloop.h"
#include "memcached-pm/conn/handover.h"
#include "memcached-pm/base/settings.h"
#include "memcached-pm/base/stats.h"
#include "memcached-pm/security/tls.h"
#include "proto/request.h"
#include "proto/response.h"
#include "storage/cache/cache.h"

struct cache_view;
struct obuf;
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

/* Connection buffer memory, for "stats" (read_buf_*, response_obj_*). */
struct buffer_gauges {
    uint64_t read_buf_count;
    uint64_t read_buf_bytes;
    uint64_t response_obj_count;
    uint64_t response_obj_bytes;
    uint64_t resp_slots;        /* under the limit: see conn_resp_start() */
    bool     resp_buffer_kept;  /* once a slot was taken (the worker's) */
};

/* The connections of one worker.  Its thread links and unlinks them
 * under the lock; "stats conns" walks them under it.  The gauges are
 * written by that thread only.  While the node hands over (leaving),
 * each connection that reaches a request boundary lets go of its socket
 * into `left`, and the last one gone calls on_empty. */
struct conn_list {
    pthread_mutex_t      lock;
    struct conn         *head;
    unsigned             n;
    struct buffer_gauges gauges;
    bool                 leaving;
    struct handover      left;
    void               (*on_empty)(void *arg);
    void                *empty_arg;
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
    struct tls      *tls;            /* its TLS session (transport.h), or
                                        NULL: plain */
    enum conn_state  state;
    enum conn_proto  proto;
    struct evsrc     ev;             /* on its worker's epoll loop */
    bool             is_unix;
    bool             is_udp;         /* a worker's UDP socket (udp.h) */
    bool             close_after_write;
    bool             yielded;        /* -R budget ran out in this event */
    bool             parked;         /* replies wait for the pass's sync
                                        (machine_end_pass()) */
    struct conn     *park_next;
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
    void            *sasl;           /* -S through Cyrus: its session
                                        (sasl_cyrus.h) */
    char             peer_cn[64];    /* TLS: the client certificate's
                                        common name, or "" */
    rel_time_t       last_cmd;
    char             addr[64];       /* "tcp:ip:port" for stats conns */
    char             listen_addr[64];
    struct sockaddr_in6 peer;        /* for watch's connevents */
    socklen_t        peer_len;
    uint8_t          close_reason;   /* LOG_CLOSE_*, error unless set */

    /* what it shares with the other connections of its worker */
    struct evloop       *loop;       /* epoll engine: the worker's loop
                                        (evloop.h), else NULL */
    struct ring         *ring;       /* io_uring engine: the worker's ring
                                        (ring.h), else NULL */
    struct ring_io      *rio;        /* ... and its source on it */
    struct conn_list    *list;
    struct thread_stats *stats;      /* the worker's counters */
    struct lookahead    *la;         /* the worker's look-ahead */

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

    /* the binary request being answered (process_bin.h) */
    uint8_t          bin_opcode;
    uint32_t         bin_opaque;

    /* UDP: the reply queue cut into messages, each the reply to one
     * request (or one key of a multiget) of one datagram; udp.c's state */
    struct conn_msg *msgs;
    size_t           nmsgs;
    size_t           msgs_cap;
    unsigned         dgram;          /* the datagram being answered */
    struct udp_port *udp;

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
    unsigned         resp_slots;     /* held until the queue is sent */
    size_t           refs_cap;
    bool             noreply;        /* drop replies of the current request */

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

/* Link c into (unlink it from) its worker's list: conn.c's, as it makes
 * and frees a connection. */
void conn_list_add(struct conn_list *l, struct conn *c);
void conn_list_del(struct conn_list *l, struct conn *c);

/* ---- life ------------------------------------------------------------ */

/* A connection for an accepted fd, on its owner's list, in CONN_READ with
 * no event registered yet (machine_start()); with tls, a TLS session
 * whose handshake its first reads do.  NULL on allocation failure (the fd
 * is then closed). */
struct conn *conn_new(const struct conn_owner *o, int fd, bool is_unix,
                      enum tls_mode tls, const char *listen_addr);

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

/* Let go of a connection whose socket another thread took over (watch):
 * freed like conn_free() but the socket stays open, and it stays counted
 * in curr_connections for its new owner to uncount. */
void conn_detach(struct conn **c);

/* ---- handover (conn_handover.c) --------------------------------------- */

/* May c move to another process?  Not a TLS session (its keys live
 * here), nor one half through a SASL exchange. */
bool conn_can_move(const struct conn *c);

/* c is at a request boundary, its replies all written: let go of its
 * socket into its list's handover records, with what it has read and not
 * parsed, then `more` (bytes its event engine received after), and free
 * it.  A UDP socket goes as it is.  Out of memory, it is closed. */
void conn_leave(struct conn **c, const char *more, size_t nmore);

/* A connection made for a socket taken over (conn_new()) takes on the
 * state it had: its protocol, authentication, idle time, and the input
 * read and not yet parsed, which is in its read buffer after.  0, or -1
 * when out of memory (the caller closes it). */
int conn_adopt(struct conn *c, const struct handover_conn *h);

/* Put n bytes at the start of an empty read buffer, making room.  0 or
 * -1. */
int conn_fill_input(struct conn *c, const char *p, size_t n);

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

/* ---- input ----------------------------------------------------------- */

/* Read what the socket has into the read buffer, making room first (the
 * buffer may move: drop the look-ahead before).  >0 bytes, 0: would
 * block, -1: closed, an error, or a line longer than 2 MB. */
ssize_t conn_read(struct conn *c);

/* The connection waits for bytes with none buffered: under -o
 * read_buf_mem_limit its read buffer goes back (the next read takes one,
 * if the worker's share allows), as memcached's buffers do. */
void conn_give_back_rbuf(struct conn *c);

static inline void
conn_idle(struct conn *c)
{
    if (settings.read_buf_mem_limit > 0) {
        conn_give_back_rbuf(c);
    }
}

/* Copy buffered bytes into c->nitem's value (NREAD), then read the rest
 * of a large value straight into item memory: >0 bytes read, 0: would
 * block, -1: closed or an error.  They read conn_value_len() bytes. */
void    conn_nread_buffered(struct conn *c);
ssize_t conn_nread_direct(struct conn *c);

/* ---- output ---------------------------------------------------------- */

/*
 * Under -o read_buf_mem_limit a reply is built in memory the limit
 * covers, as memcached's response objects are: each request, and each
 * key of a text multiget after the first, takes a slot, held until the
 * queue is sent; a worker's slots come 13 to a 16 KB buffer (memcached's
 * count) out of the same share as its read buffers, and once it has
 * taken one it keeps a buffer for them, as memcached keeps its last.  false: no slot to
 * be had, counted as response_obj_oom; the caller answers as memcached
 * does (a multiget: SERVER_ERROR out of memory writing get response; a
 * request: the connection closes).  Without the limit, always true.
 */
bool conn_resp_take(struct conn *c);

static inline bool
conn_resp_start(struct conn *c)
{
    return settings.read_buf_mem_limit == 0 || conn_resp_take(c);
}

/* Drop the replies queued and not yet sent (none of the queue is, while
 * requests run), their slots with them. */
void conn_out_discard(struct conn *c);

/* The output arena: blocks of OBUF_SIZE bytes, filled in turn. */
#define OBUF_SIZE (16384 - 2 * sizeof(size_t))

struct obuf {
    struct obuf *next;
    size_t       used;
    char         data[OBUF_SIZE];
};

/* The queue's last entry when it ends where the current block's free
 * room begins, so that bytes written there extend it; else NULL. */
static inline struct iovec *
conn_out_tail(const struct conn *c)
{
    const struct obuf *b = c->obuf_cur;
    struct iovec *last;

    if (c->iov_len == c->iov_sent) {
        return NULL;
    }
    last = &c->iov[c->iov_len - 1];
    return (const char *)last->iov_base + last->iov_len == b->data + b->used
           ? last : NULL;
}

/* Reserve room for one line of at most n bytes in the arena; the caller
 * writes it and commits the length it used.  The commit is inline for
 * the two common cases (it extends the queue's last entry, or takes a
 * free one); conn_out_commit_push() does the rest. */
char *conn_out_reserve(struct conn *c, size_t n);
void conn_out_commit_push(struct conn *c, size_t used);

static inline void
conn_out_commit(struct conn *c, size_t used)
{
    struct obuf *b = c->obuf_cur;
    struct iovec *last;

    if (c->noreply || used == 0) {
        return;
    }
    if ((last = conn_out_tail(c)) != NULL) {
        last->iov_len += used;
    } else if (c->iov_len < c->iov_cap) {
        c->iov[c->iov_len].iov_base = b->data + b->used;
        c->iov[c->iov_len].iov_len = used;
        c->iov_len++;
    } else {
        conn_out_commit_push(c, used);
        return;
    }
    b->used += used;
    c->out_bytes += used;
}

/* Queue reply bytes (copied) or a fixed reply.  They return 0, or -1 when
 * the arena cannot grow (the connection is then closed after writing what
 * it has).  A line that fits the current block is copied inline;
 * conn_out_any() takes any length. */
int conn_out_any(struct conn *c, const char *s, size_t n);

static inline int
conn_out(struct conn *c, const char *s, size_t n)
{
    struct obuf *b = c->obuf_cur;

    if (!c->noreply && n > 0 && n <= OBUF_SIZE - b->used) {
        memcpy(b->data + b->used, s, n);
        conn_out_commit(c, n);
        return 0;
    }
    return conn_out_any(c, s, n);
}

/* -vv: a text reply line as memcached logs the ones it sends with
 * out_string(): ">fd STORED" (the line's "\r\n" dropped).  Replies that
 * memcached writes otherwise (stats, meta results, values) are not. */
void conn_log_reply_line(const struct conn *c, const char *line, size_t n);

static inline void
conn_log_reply(const struct conn *c, const char *line, size_t n)
{
    if (settings.verbose > 1 && c->proto != CONN_BINARY) {
        conn_log_reply_line(c, line, n);
    }
}

static inline int
conn_out_rsp(struct conn *c, int rsp)           /* enum rsp_type */
{
    conn_log_reply(c, rsp_str[rsp], rsp_len[rsp]);
    return conn_out(c, rsp_str[rsp], rsp_len[rsp]);
}

/* The longest value (with its "\r\n") copied into the arena rather
 * than sent from the item by reference. */
#define CONN_VALUE_COPY_MAX 1024

/* Queue an item's value bytes (conn_value_len() of them: "<data>\r\n" on
 * text, "<data>" on binary); takes over the caller's reference.  Values
 * up to 1 KB are copied and the reference released at once; longer ones
 * are sent by reference, released once written. */
int conn_out_value(struct conn *c, struct item *it);

/* A line followed by an item's value, with one reservation: reserve room
 * for a line of at most line_max bytes (and the value, when it is short
 * enough to be copied), write the line, then queue both; the value goes
 * as conn_out_value() sends it. */
char *conn_out_reserve_value(struct conn *c, size_t line_max,
                             struct item *it);
int conn_out_line_value(struct conn *c, size_t used, struct item *it);

/*
 * A hit from cache_peek(): reserve line_max bytes and the value, let
 * line() write what goes before the value (its length back; 0: it cannot,
 * nothing is queued), copy the value behind it when with_value
 * ("<data>\r\n" on text, "<data>" on binary), and keep it all only if
 * cache_peek_end() says the item did not change.  0, or -1 with nothing
 * queued (then answer through the lock path).
 */
int conn_out_view(struct conn *c, const struct cache_view *v,
                  size_t line_max, bool with_value,
                  size_t (*line)(char *p, const struct cache_view *v,
                                 void *arg),
                  void *arg);

/* Queue one binary reply packet to the request being answered
 * (c->bin_opcode, c->bin_opaque): its header, then the extras, key and
 * value given, copied.  0, or -1 as conn_out(). */
int conn_out_bin(struct conn *c, uint16_t status, uint64_t cas,
                 const char *ext, uint8_t extlen, const char *key,
                 uint16_t nkey, const char *val, uint32_t nval);

/* Queue reply rsp and drop the next `bytes` bytes of input (the data
 * block of a refused request).  Returns PROCESS_SWALLOW. */
enum process_result conn_swallow(struct conn *c, int rsp, uint64_t bytes);

/* Send what is queued.  1: all sent (references given back, arena
 * rewound); 0: the socket is full; -1: an error. */
int conn_flush(struct conn *c);

/* UDP: the request (or multiget key) being answered is done; its reply
 * is a message of its own.  end_message() leaves no message for a
 * request that queued nothing (noreply); next_key() makes one even when
 * the key queued nothing, as memcached answers a multiget over UDP.
 * No-ops on a stream. */
void conn_msg_end(struct conn *c, bool keep_empty);

static inline void
conn_out_end_message(struct conn *c)
{
    if (c->msgs != NULL) {
        conn_msg_end(c, false);
    }
}

static inline void
conn_out_next_key(struct conn *c)
{
    if (c->msgs != NULL) {
        conn_msg_end(c, true);
    }
}

/* Copy the reply queue's bytes out in order (UDP's datagrams): up to n
 * bytes from where *pos says, which moves on; the bytes copied (dst NULL:
 * skipped). */
struct conn_out_pos {
    size_t iov;
    size_t off;
};
size_t conn_out_copy(struct conn *c, struct conn_out_pos *pos, char *dst,
                     size_t n);

/* The queue was sent by conn_out_copy()'s caller: give the references
 * back, rewind the arena, forget the messages. */
void conn_out_sent(struct conn *c);

/* -o sock_cookie_id: the mark a firewall can match (SO_MARK) on a
 * listening socket; without CAP_NET_ADMIN, memcached's "setsockopt"
 * line and the socket serves unmarked.  Nothing when the id is 0. */
void conn_sock_cookie(int fd);

/* Name of a connection's state for "stats conns", and of a state
 * (memcached's conn_* names). */
const char *conn_state_name(const struct conn *c);
const char *conn_state_label(enum conn_state s);

#endif
