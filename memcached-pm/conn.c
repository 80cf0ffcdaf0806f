/*
 * conn.c: reading requests, queueing replies, writing them.
 */
#include "config.h"

#include "memcached-pm/conn.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include "memcached-pm/log.h"
#include "memcached-pm/process.h"
#include "memcached-pm/settings.h"
#include "memcached-pm/stats.h"
#include "memcached-pm/worker.h"
#include "proto/response.h"
#include "proto/text.h"

#define RBUF_SIZE      16384          /* memcached's READ_BUFFER_SIZE */
#define RBUF_MAX       (2 * 1024 * 1024)  /* longest multiget line */
#define OBUF_SIZE      (16384 - 2 * sizeof(size_t))
#define VALUE_COPY_MAX 1024           /* longest value copied, not referenced */
#define OBUF_KEEP      4              /* arena blocks kept when idle */
#define IOV_KEEP       1024           /* iovec entries kept when idle */
#define OUT_HIGH_WATER (1024 * 1024)  /* queued bytes before a forced write */
#define IOV_BATCH      (IOV_MAX < 1024 ? IOV_MAX : 1024)

struct obuf {
    struct obuf *next;
    size_t       used;
    char         data[OBUF_SIZE];
};

static void conn_drive(struct conn *c);

/* Buffer gauges of the owning worker: single writer, so a relaxed load
 * and store (STAT_ADD) is enough; a negative delta wraps as intended. */
static void
gauge_rbuf(struct conn *c, int64_t count, int64_t bytes)
{
    struct buffer_gauges *g = &c->worker->gauges;

    STAT_ADD(g->read_buf_count, (uint64_t)count);
    STAT_ADD(g->read_buf_bytes, (uint64_t)bytes);
}

static void
gauge_obuf(struct conn *c, int64_t count)
{
    struct buffer_gauges *g = &c->worker->gauges;

    STAT_ADD(g->resp_obj_count, (uint64_t)count);
    STAT_ADD(g->resp_obj_bytes, (uint64_t)(count * (int64_t)OBUF_SIZE));
}

/* ---- events ----------------------------------------------------------- */

static void
on_event(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;

    (void)fd;
    (void)what;
    c->yielded = false;
    conn_drive(c);
}

/* Register for readability or writability, when that changes. */
static void
conn_wait(struct conn *c, short flags)
{
    if (c->ev_flags == flags) {
        return;
    }
    if (c->ev_flags != 0) {
        event_del(&c->ev);
    }
    event_assign(&c->ev, c->worker->base, c->fd, flags | EV_PERSIST,
                 on_event, c);
    if (event_add(&c->ev, NULL) != 0) {
        log_error("conn %d: event_add failed", c->fd);
    }
    c->ev_flags = flags;
}

static void
set_state(struct conn *c, enum conn_state s)
{
    __atomic_store_n(&c->state, s, __ATOMIC_RELAXED);
}

/* ---- life ------------------------------------------------------------- */

static void
peer_name(struct conn *c)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    char host[48] = "";
    int port = 0;

    if (c->is_unix) {
        snprintf(c->addr, sizeof(c->addr), "unix:%s",
                 settings.socketpath ? settings.socketpath : "");
        return;
    }
    if (getpeername(c->fd, (struct sockaddr *)&ss, &len) != 0) {
        snprintf(c->addr, sizeof(c->addr), "tcp:unknown");
        return;
    }
    if (ss.ss_family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
        port = ntohs(in->sin_port);
        snprintf(c->addr, sizeof(c->addr), "tcp:%s:%d", host, port);
    } else if (ss.ss_family == AF_INET6) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
        port = ntohs(in6->sin6_port);
        snprintf(c->addr, sizeof(c->addr), "tcp6:[%s]:%d", host, port);
    }
}

struct conn *
conn_new(struct worker *w, int fd, bool is_unix, const char *listen_addr)
{
    struct conn *c = calloc(1, sizeof(*c));

    if (c == NULL || (c->rbuf = malloc(RBUF_SIZE)) == NULL ||
        (c->obuf_head = malloc(sizeof(struct obuf))) == NULL) {
        log_error("out of memory for a new connection");
        if (c != NULL) {
            free(c->rbuf);
        }
        free(c);
        close(fd);
        return NULL;
    }
    c->fd = fd;
    c->worker = w;
    c->is_unix = is_unix;
    c->rsize = RBUF_SIZE;
    c->obuf_head->next = NULL;
    c->obuf_head->used = 0;
    c->obuf_cur = c->obuf_head;
    c->last_cmd = clock_now();
    snprintf(c->listen_addr, sizeof(c->listen_addr), "%s", listen_addr);
    peer_name(c);
    set_state(c, CONN_READ);
    gauge_rbuf(c, 1, RBUF_SIZE);
    gauge_obuf(c, 1);
    worker_conn_add(w, c);
    conn_wait(c, EV_READ);
    log_info("<%d new client connection", fd);
    return c;
}

static void
release_refs(struct conn *c)
{
    for (size_t i = 0; i < c->nrefs; i++) {
        cache_release(c->refs[i]);
    }
    c->nrefs = 0;
}

void
conn_free(struct conn **cp)
{
    struct conn *c = *cp;
    struct obuf *b, *next;

    if (c == NULL) {
        return;
    }
    log_info("<%d connection closed.", c->fd);
    if (c->ev_flags != 0) {
        event_del(&c->ev);
    }
    worker_conn_del(c->worker, c);
    process_ahead_drop(c);
    close(c->fd);
    release_refs(c);
    if (c->nitem != NULL) {
        cache_release(c->nitem);
    }
    for (b = c->obuf_head; b != NULL; b = next) {
        next = b->next;
        free(b);
        gauge_obuf(c, -1);
    }
    gauge_rbuf(c, -1, -(int64_t)c->rsize);
    free(c->nmeta);
    free(c->refs);
    free(c->iov);
    free(c->rbuf);
    free(c);
    SERVER_STAT_DECR(curr_conns);
    *cp = NULL;
}

/* ---- output queue ----------------------------------------------------- */

static int
iov_push(struct conn *c, void *base, size_t len)
{
    if (c->iov_len == c->iov_cap) {
        size_t cap = c->iov_cap ? c->iov_cap * 2 : 64;
        struct iovec *iov = realloc(c->iov, cap * sizeof(*iov));

        if (iov == NULL) {
            return -1;
        }
        c->iov = iov;
        c->iov_cap = cap;
    }
    c->iov[c->iov_len].iov_base = base;
    c->iov[c->iov_len].iov_len = len;
    c->iov_len++;
    c->out_bytes += len;
    return 0;
}

/* Point the queue at bytes just written into the current arena block,
 * growing the last iovec when it ends exactly there. */
static int
iov_push_arena(struct conn *c, char *p, size_t n)
{
    if (c->iov_len > c->iov_sent) {
        struct iovec *last = &c->iov[c->iov_len - 1];

        if ((char *)last->iov_base + last->iov_len == p) {
            last->iov_len += n;
            c->out_bytes += n;
            return 0;
        }
    }
    return iov_push(c, p, n);
}

/* A block with room for n bytes (n <= OBUF_SIZE), or NULL. */
static struct obuf *
arena_room(struct conn *c, size_t n)
{
    struct obuf *b = c->obuf_cur;

    if (OBUF_SIZE - b->used >= n) {
        return b;
    }
    if (b->next == NULL) {
        b->next = malloc(sizeof(*b));
        if (b->next == NULL) {
            return NULL;
        }
        b->next->next = NULL;
        gauge_obuf(c, 1);
    }
    b = b->next;
    b->used = 0;
    c->obuf_cur = b;
    return b;
}

char *
conn_out_reserve(struct conn *c, size_t n)
{
    struct obuf *b;

    if (n > OBUF_SIZE || (b = arena_room(c, n)) == NULL) {
        return NULL;
    }
    return b->data + b->used;
}

void
conn_out_commit(struct conn *c, size_t used)
{
    struct obuf *b = c->obuf_cur;
    char *p = b->data + b->used;

    if (c->noreply || used == 0) {
        return;
    }
    b->used += used;
    if (iov_push_arena(c, p, used) != 0) {
        b->used -= used;
        c->close_after_write = true;
    }
}

int
conn_out(struct conn *c, const char *s, size_t n)
{
    struct obuf *b = c->obuf_cur;

    if (c->noreply) {
        return 0;
    }
    /* The common case, a short line that fits the current block. */
    if (n <= OBUF_SIZE - b->used && n > 0) {
        memcpy(b->data + b->used, s, n);
        conn_out_commit(c, n);
        return 0;
    }
    while (n > 0) {
        size_t part = n < OBUF_SIZE ? n : OBUF_SIZE;
        char *p = conn_out_reserve(c, part);

        if (p == NULL) {
            c->close_after_write = true;
            return -1;
        }
        memcpy(p, s, part);
        conn_out_commit(c, part);
        s += part;
        n -= part;
    }
    return 0;
}

int
conn_out_rsp(struct conn *c, int rsp)
{
    return conn_out(c, rsp_str[rsp], rsp_len[rsp]);
}

static int
refs_push(struct conn *c, struct item *it)
{
    if (c->nrefs == c->refs_cap) {
        size_t cap = c->refs_cap ? c->refs_cap * 2 : 32;
        struct item **refs = realloc(c->refs, cap * sizeof(*refs));

        if (refs == NULL) {
            return -1;
        }
        c->refs = refs;
        c->refs_cap = cap;
    }
    c->refs[c->nrefs++] = it;
    return 0;
}

/* A short value is copied after the bytes queued before it, and its item
 * let go at once: the reply stays one run of bytes (one iovec for the
 * kernel to walk, not three) and no reference waits for the write. */
static bool
value_copied(const struct conn *c, struct item *it)
{
    return item_vlen(it) + 2 <= VALUE_COPY_MAX && !c->noreply &&
           !(item_flags(it) & ITEM_CHUNKED);
}

/* Commit `used` bytes written at the reserved position with the value
 * copied after them, and let the item go. */
static int
commit_with_value(struct conn *c, size_t used, struct item *it)
{
    struct obuf *b = c->obuf_cur;
    size_t n = item_vlen(it) + 2;

    memcpy(b->data + b->used + used, item_value(it), n);
    conn_out_commit(c, used + n);
    cache_release(it);
    return 0;
}

char *
conn_out_reserve_value(struct conn *c, size_t line_max, struct item *it)
{
    return conn_out_reserve(c, line_max + (value_copied(c, it)
                                           ? item_vlen(it) + 2 : 0));
}

int
conn_out_line_value(struct conn *c, size_t used, struct item *it)
{
    if (value_copied(c, it)) {
        return commit_with_value(c, used, it);
    }
    conn_out_commit(c, used);
    return conn_out_value(c, it);
}

int
conn_out_value(struct conn *c, struct item *it)
{
    struct iovec iov[16];
    size_t off = 0, n;

    if (value_copied(c, it) && conn_out_reserve(c, item_vlen(it) + 2)) {
        return commit_with_value(c, 0, it);
    }
    if (refs_push(c, it) != 0) {
        cache_release(it);
        c->close_after_write = true;
        return -1;
    }
    while ((n = item_value_iov(it, off, iov, 16)) > 0) {
        for (size_t i = 0; i < n; i++) {
            if (iov_push(c, iov[i].iov_base, iov[i].iov_len) != 0) {
                c->close_after_write = true;
                return -1;
            }
            off += iov[i].iov_len;
        }
    }
    return 0;
}

/* Everything sent: give references back and rewind the arena. */
static void
out_reset(struct conn *c)
{
    struct obuf *b = c->obuf_head;
    unsigned kept = 1;

    release_refs(c);
    c->iov_len = c->iov_sent = 0;
    c->out_bytes = 0;
    while (b->next != NULL && kept < OBUF_KEEP) {
        b = b->next;
        kept++;
    }
    while (b->next != NULL) {
        struct obuf *extra = b->next;
        b->next = extra->next;
        free(extra);
        gauge_obuf(c, -1);
    }
    c->obuf_head->used = 0;
    c->obuf_cur = c->obuf_head;
    if (c->iov_cap > IOV_KEEP) {
        free(c->iov);
        c->iov = NULL;
        c->iov_cap = 0;
    }
    if (c->refs_cap > IOV_KEEP) {
        free(c->refs);
        c->refs = NULL;
        c->refs_cap = 0;
    }
}

/* Send what is queued.  1: all sent; 0: the socket is full; -1: error. */
static int
out_flush(struct conn *c)
{
    while (c->iov_sent < c->iov_len) {
        struct msghdr msg = { 0 };
        size_t left = c->iov_len - c->iov_sent;
        ssize_t n;

        msg.msg_iov = &c->iov[c->iov_sent];
        msg.msg_iovlen = left < IOV_BATCH ? left : IOV_BATCH;
        n = sendmsg(c->fd, &msg, MSG_NOSIGNAL);
        if (n < 0) {
            return (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -1;
        }
        STAT_ADD(c->worker->stats->bytes_written, (uint64_t)n);
        c->out_bytes -= (size_t)n;
        while (n > 0) {
            struct iovec *v = &c->iov[c->iov_sent];

            if ((size_t)n >= v->iov_len) {
                n -= (ssize_t)v->iov_len;
                c->iov_sent++;
            } else {
                v->iov_base = (char *)v->iov_base + n;
                v->iov_len -= (size_t)n;
                n = 0;
            }
        }
    }
    out_reset(c);
    return 1;
}

/* ---- input ------------------------------------------------------------ */

/* Make room at the end of the read buffer: slide unparsed bytes to the
 * front, grow for a long multiget line, shrink an idle big buffer. */
static int
rbuf_room(struct conn *c)
{
    size_t have = c->rend - c->rstart;

    if (have == 0 && c->rsize > RBUF_SIZE) {
        char *small = malloc(RBUF_SIZE);
        if (small != NULL) {
            gauge_rbuf(c, 0, RBUF_SIZE - (int64_t)c->rsize);
            free(c->rbuf);
            c->rbuf = small;
            c->rsize = RBUF_SIZE;
        }
    }
    if (c->rstart > 0) {
        memmove(c->rbuf, c->rbuf + c->rstart, have);
        c->pf_end = c->pf_end > c->rstart ? c->pf_end - c->rstart : 0;
        c->rstart = 0;
        c->rend = have;
    }
    if (c->rend == c->rsize) {
        char *big;

        if (c->rsize >= RBUF_MAX) {
            return -1;
        }
        big = realloc(c->rbuf, c->rsize * 2);
        if (big == NULL) {
            return -1;
        }
        gauge_rbuf(c, 0, (int64_t)c->rsize);
        c->rbuf = big;
        c->rsize *= 2;
    }
    return 0;
}

/* Read what the socket has.  >0 bytes, 0: would block, -1: closed/error. */
static ssize_t
read_more(struct conn *c)
{
    ssize_t n;

    /* The buffer may move: what the look-ahead parsed from it goes. */
    process_ahead_drop(c);
    if (rbuf_room(c) != 0) {
        return -1;
    }
    n = read(c->fd, c->rbuf + c->rend, c->rsize - c->rend);
    if (n > 0) {
        c->read_short = (size_t)n < c->rsize - c->rend;
        c->rend += (size_t)n;
        STAT_ADD(c->worker->stats->bytes_read, (uint64_t)n);
        return n;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return 0;
    }
    return -1;
}

/* Copy buffered bytes into the item being read. */
static void
nread_from_buffer(struct conn *c)
{
    size_t want = item_vlen(c->nitem) + 2 - c->nread_off;
    size_t have = c->rend - c->rstart;
    size_t take = want < have ? want : have;
    struct iovec iov[16];
    size_t n, done = 0;

    while (done < take &&
           (n = item_value_iov(c->nitem, c->nread_off, iov, 16)) > 0) {
        for (size_t i = 0; i < n && done < take; i++) {
            size_t part = iov[i].iov_len < take - done ? iov[i].iov_len
                          : take - done;

            memcpy(iov[i].iov_base, c->rbuf + c->rstart + done, part);
            done += part;
            c->nread_off += part;
        }
    }
    c->rstart += done;
}

/* Read the rest of a large value straight into item memory. */
static ssize_t
nread_direct(struct conn *c)
{
    struct iovec iov[64];
    size_t n = item_value_iov(c->nitem, c->nread_off, iov, 64);
    ssize_t got = readv(c->fd, iov, (int)n);

    if (got > 0) {
        c->nread_off += (size_t)got;
        STAT_ADD(c->worker->stats->bytes_read, (uint64_t)got);
        return got;
    }
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return 0;
    }
    return -1;
}

/* ---- the state machine ------------------------------------------------ */

static enum conn_state
after_process(struct conn *c, enum process_result r)
{
    switch (r) {
    case PROCESS_NREAD:
        return CONN_NREAD;
    case PROCESS_SWALLOW:
        return CONN_SWALLOW;
    case PROCESS_CLOSE:
        c->close_after_write = true;
        return CONN_WRITE;
    case PROCESS_OK:
    default:
        return CONN_PARSE;
    }
}

/* Parse and execute one request from the buffer. */
static enum conn_state
parse_one(struct conn *c)
{
    struct ahead_req *a = process_ahead_take(c);
    struct request local, *req = &local;
    ssize_t n;

    if (a != NULL) {
        req = &a->req;
        n = (ssize_t)a->len;
    } else {
        c->worker->memo.key = NULL;
        n = text_parse(&local, c->rbuf + c->rstart, c->rend - c->rstart);
        if (n == PROTO_EUNFIN) {
            return c->out_bytes > 0 ? CONN_WRITE : CONN_READ;
        }
        if (n == PROTO_ECLOSE) {
            c->close_after_write = true;
            return CONN_WRITE;
        }
        /* More bytes after this request's line, none looked at yet: a
         * pipeline.  Parse the requests after this one and walk their
         * keys side by side (process_prefetch_pipeline); they then run
         * one by one from what was parsed. */
        if ((size_t)n < c->rend - c->rstart && c->rstart >= c->pf_end) {
            c->pf_end = c->rstart +
                        process_prefetch_pipeline(c, &local, (size_t)n);
        }
    }
    if (settings.verbose > 1) {
        log_write("<%d %.*s", c->fd, (int)(n > 1 ? n - 1 : 0),
                  c->rbuf + c->rstart);
    }
    c->rstart += (size_t)n;
    c->last_cmd = clock_now();
    c->noreply = req->noreply;
    n = after_process(c, process_request(c, req));
    c->worker->memo.key = NULL;
    c->noreply = false;
    return (enum conn_state)n;
}

static enum conn_state
state_parse(struct conn *c, int *budget)
{
    if (c->rstart == c->rend) {
        c->rstart = c->rend = c->pf_end = 0;
        return c->out_bytes > 0 ? CONN_WRITE : CONN_READ;
    }
    if (c->out_bytes > OUT_HIGH_WATER) {
        return CONN_WRITE;
    }
    if ((*budget)-- <= 0) {
        /* Let the worker's other connections in; come back next turn. */
        STAT_INCR(c->worker->stats->conn_yields);
        c->yielded = true;
        return CONN_WRITE;
    }
    return parse_one(c);
}

static enum conn_state
state_nread(struct conn *c, bool *stop)
{
    size_t total = item_vlen(c->nitem) + 2;

    nread_from_buffer(c);
    if (c->nread_off == total) {
        process_store(c);
        return CONN_PARSE;
    }
    switch (nread_direct(c)) {
    case -1: return CONN_CLOSING;
    case 0: *stop = true; conn_wait(c, EV_READ); return CONN_NREAD;
    default: return CONN_NREAD;
    }
}

static enum conn_state
state_swallow(struct conn *c, bool *stop)
{
    size_t have = c->rend - c->rstart;
    size_t take = c->swallow < have ? (size_t)c->swallow : have;

    c->rstart += take;
    c->swallow -= take;
    if (c->swallow == 0) {
        return CONN_PARSE;
    }
    switch (read_more(c)) {
    case -1: return CONN_CLOSING;
    case 0: *stop = true; conn_wait(c, EV_READ); return CONN_SWALLOW;
    default: return CONN_SWALLOW;
    }
}

static enum conn_state
state_read(struct conn *c, bool *stop)
{
    if (c->read_short) {
        /* The last read drained the socket; poll before reading again
         * (the event is level-triggered, so nothing is missed). */
        c->read_short = false;
        *stop = true;
        conn_wait(c, EV_READ);
        return CONN_READ;
    }
    switch (read_more(c)) {
    case -1:
        return CONN_CLOSING;
    case 0:
        *stop = true;
        conn_wait(c, EV_READ);
        return CONN_READ;
    default:
        return CONN_PARSE;
    }
}

static enum conn_state
state_write(struct conn *c, bool *stop)
{
    switch (out_flush(c)) {
    case -1:
        return CONN_CLOSING;
    case 0:
        *stop = true;
        conn_wait(c, EV_WRITE);
        return CONN_WRITE;
    default:
        break;
    }
    if (c->close_after_write) {
        return CONN_CLOSING;
    }
    if (c->yielded) {
        *stop = true;
        conn_wait(c, EV_READ);
        event_active(&c->ev, EV_READ, 0);
        return CONN_PARSE;
    }
    conn_wait(c, EV_READ);
    return CONN_PARSE;
}

static void
conn_drive(struct conn *c)
{
    int budget = settings.reqs_per_event;
    bool stop = false;

    while (!stop) {
        enum conn_state next;

        switch (c->state) {
        case CONN_PARSE: next = state_parse(c, &budget); break;
        case CONN_READ: next = state_read(c, &stop); break;
        case CONN_NREAD: next = state_nread(c, &stop); break;
        case CONN_SWALLOW: next = state_swallow(c, &stop); break;
        case CONN_WRITE: next = state_write(c, &stop); break;
        case CONN_CLOSING:
        default:
            conn_free(&c);
            return;
        }
        set_state(c, next);
    }
}

const char *
conn_state_name(const struct conn *c)
{
    switch (__atomic_load_n(&c->state, __ATOMIC_RELAXED)) {
    case CONN_READ: return "conn_waiting";
    case CONN_PARSE: return "conn_parse_cmd";
    case CONN_NREAD: return "conn_nread";
    case CONN_SWALLOW: return "conn_swallow";
    case CONN_WRITE: return "conn_mwrite";
    case CONN_CLOSING: default: return "conn_closing";
    }
}
