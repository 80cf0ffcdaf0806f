/*
 * conn.c: the connection object: buffers, the reply queue, socket I/O
 * (conn.h); the workers' lists of them are conn_list.c's.
 */
#include "config.h"

#include "memcached-pm/conn/conn.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "memcached-pm/base/log.h"
#include "memcached-pm/watch/logger.h"
#include "memcached-pm/security/sasl_cyrus.h"
#include "memcached-pm/base/settings.h"
#include "memcached-pm/net/transport.h"
#include "proto/binary.h"
#include "proto/response.h"
#include "storage/cache/cache_peek.h"
#include "memcached-pm/net/given.h"

#define RBUF_SIZE      16384          /* memcached's READ_BUFFER_SIZE */
#define RBUF_MAX       (2 * 1024 * 1024)  /* longest multiget line */
#define OBUF_KEEP      4              /* arena blocks kept when idle */
#define RESP_PER_RBUF  13             /* memcached's responses per buffer */
#define IOV_KEEP       1024           /* iovec entries kept when idle */
#define IOV_BATCH      (IOV_MAX < 1024 ? IOV_MAX : 1024)

/* Buffer gauges of the owning worker: single writer, so a relaxed load
 * and store (STAT_ADD) is enough; a negative delta wraps as intended.  A
 * UDP socket's buffer is its own, outside -o read_buf_mem_limit (as
 * memcached's UDP connections read into theirs): not counted. */
static void
gauge_rbuf(struct conn *c, int64_t count, int64_t bytes)
{
    struct buffer_gauges *g = &c->list->gauges;

    if (c->is_udp) {
        return;
    }
    STAT_ADD(g->read_buf_count, (uint64_t)count);
    STAT_ADD(g->read_buf_bytes, (uint64_t)bytes);
}

/* -o read_buf_mem_limit: the worker's share of the limit, and what its
 * reply slots (conn_resp_start()) hold of it, in bytes. */
static uint64_t
worker_share(void)
{
    uint64_t share = settings.read_buf_mem_limit /
                     (unsigned)settings.num_threads;

    return share < RBUF_SIZE ? RBUF_SIZE : share;   /* memcached's least */
}

static uint64_t
slot_bytes(const struct buffer_gauges *g, uint64_t slots)
{
    uint64_t n = (slots + RESP_PER_RBUF - 1) / RESP_PER_RBUF;

    if (n == 0 && g->resp_buffer_kept) {
        n = 1;
    }
    return n * RBUF_SIZE;
}

/* Does the worker's share hold its read buffers grown by `add` bytes
 * and its reply slots grown by `more`? */
static bool
share_holds(const struct buffer_gauges *g, size_t add, uint64_t more)
{
    return STAT_LOAD(g->read_buf_bytes) + add +
           slot_bytes(g, STAT_LOAD(g->resp_slots) + more) <= worker_share();
}

/* May this worker's read buffers grow by add bytes?  A refusal counts as
 * read_buf_oom, and the connection closes, as memcached's does. */
static bool
rbuf_may_grow(struct conn *c, size_t add)
{
    if (settings.read_buf_mem_limit == 0 || c->is_udp ||
        share_holds(&c->list->gauges, add, 0)) {
        return true;
    }
    STAT_INCR(c->stats->read_buf_oom);
    return false;
}

bool
conn_resp_take(struct conn *c)
{
    struct buffer_gauges *g = &c->list->gauges;

    if (c->is_udp) {
        return true;
    }
    if (!share_holds(g, 0, 1)) {
        STAT_INCR(c->stats->response_obj_oom);
        return false;
    }
    STAT_ADD(g->resp_slots, 1);
    g->resp_buffer_kept = true;
    c->resp_slots++;
    return true;
}

static void
resp_give_back(struct conn *c)
{
    if (c->resp_slots > 0) {
        STAT_ADD(c->list->gauges.resp_slots, -(uint64_t)c->resp_slots);
        c->resp_slots = 0;
    }
}

static void
gauge_obuf(struct conn *c, int64_t count)
{
    struct buffer_gauges *g = &c->list->gauges;

    STAT_ADD(g->response_obj_count, (uint64_t)count);
    STAT_ADD(g->response_obj_bytes, (uint64_t)(count * (int64_t)OBUF_SIZE));
}

/* ---- life ------------------------------------------------------------- */

static void
peer_name(struct conn *c)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);

    if (c->is_unix) {
        snprintf(c->addr, sizeof(c->addr), "unix:%s",
                 settings.socketpath ? settings.socketpath : "");
        return;
    }
    if (getpeername(c->fd, (struct sockaddr *)&ss, &len) != 0) {
        snprintf(c->addr, sizeof(c->addr), "tcp:unknown");
        return;
    }
    if (len <= sizeof(c->peer)) {
        memcpy(&c->peer, &ss, len);
        c->peer_len = len;
    }
    if (ss.ss_family == AF_INET || ss.ss_family == AF_INET6) {
        sock_addr_name((struct sockaddr *)&ss, "tcp", c->addr,
                       sizeof(c->addr));
    }
}

static void conn_release(struct conn *c);

/* -B: what a new connection speaks, or whether its first byte says. */
static enum conn_proto
bound_proto(void)
{
    if (settings.auth_file != NULL) {
        return CONN_TEXT_AUTH;
    }
    if (strcmp(settings.binding_protocol, "ascii") == 0) {
        return CONN_TEXT;
    }
    if (strcmp(settings.binding_protocol, "binary") == 0) {
        return CONN_BINARY;
    }
    return CONN_NEGOTIATE;
}

/* A connection on fd (a UDP socket if udp) with a read buffer of
 * rbuf_size (0: none until its first read), on o's list; no name yet.
 * NULL on allocation failure (fd closed). */
static struct conn *
conn_make(const struct conn_owner *o, int fd, size_t rbuf_size, bool udp)
{
    struct conn *c = calloc(1, sizeof(*c));

    if (c == NULL ||
        (rbuf_size > 0 && (c->rbuf = malloc(rbuf_size)) == NULL) ||
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
    c->is_udp = udp;
    c->proto = bound_proto();
    c->loop = o->loop;
    c->ring = o->ring;
    c->list = o->list;
    c->stats = o->stats;
    c->la = o->la;
    c->rsize = rbuf_size;
    c->obuf_head->next = NULL;
    c->obuf_head->used = 0;
    c->obuf_cur = c->obuf_head;
    c->last_cmd = clock_now();
    conn_set_state(c, CONN_READ);
    if (rbuf_size > 0) {
        gauge_rbuf(c, 1, (int64_t)rbuf_size);
    }
    gauge_obuf(c, 1);
    conn_list_add(c->list, c);
    return c;
}

struct conn *
conn_new(const struct conn_owner *o, int fd, bool is_unix, enum tls_mode tls,
         const char *listen_addr)
{
    /* Under read_buf_mem_limit a buffer is held only while reading: the
     * first read takes one (rbuf_room()). */
    struct conn *c = conn_make(o, fd, settings.read_buf_mem_limit > 0
                                      ? 0 : RBUF_SIZE, false);

    if (c == NULL) {
        return NULL;
    }
#ifdef ENABLE_TLS
    if (tls != TLS_OFF && (c->tls = tls_new(fd, tls)) == NULL) {
        log_info("<%d no TLS session for it", fd);
        close(fd);
        conn_release(c);
        return NULL;
    }
#else
    (void)tls;
#endif
    c->is_unix = is_unix;
    snprintf(c->listen_addr, sizeof(c->listen_addr), "%s", listen_addr);
    peer_name(c);
    /* -vv, memcached's words for each -B mode */
    log_debug(c->proto == CONN_NEGOTIATE
              ? "<%d new auto-negotiating client connection"
              : c->proto == CONN_BINARY ? "<%d new binary client connection."
              : "<%d new ascii client connection.", fd);
    if (logger_wants(LOG_CONNEVENTS)) {
        logger_conn(true, fd, (struct sockaddr *)&c->peer, c->peer_len,
                    is_unix ? 0 : 1, 0);
    }
    return c;
}

struct conn *
conn_new_udp(const struct conn_owner *o, int fd, const char *name,
             size_t rbuf_size, struct udp_port *u)
{
    struct conn_msg *msgs = malloc(16 * sizeof(*msgs));
    struct conn *c;

    if (msgs == NULL) {
        free(u);
        close(fd);
        return NULL;
    }
    c = conn_make(o, fd, rbuf_size, true);
    if (c == NULL) {
        free(msgs);
        free(u);
        return NULL;
    }
    c->udp = u;
    c->msgs = msgs;
    c->msgs_cap = 16;
    snprintf(c->addr, sizeof(c->addr), "%s", name);
    log_debug("<%d server listening (udp)", fd);
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

/* Free c and what it holds, its socket aside. */
static void
conn_release(struct conn *c)
{
    struct obuf *b, *next;

    if (c->loop != NULL) {
        evloop_forget(c->loop, &c->ev);
    }
    conn_list_del(c->list, c);
    release_refs(c);
    resp_give_back(c);
    if (c->nitem != NULL) {
        cache_release(c->nitem);
    }
    for (b = c->obuf_head; b != NULL; b = next) {
        next = b->next;
        free(b);
        gauge_obuf(c, -1);
    }
    if (c->rbuf != NULL) {      /* none while idle under the limit */
        gauge_rbuf(c, -1, -(int64_t)c->rsize);
    }
    cyrus_session_free(&c->sasl);
    free(c->nmeta);
    free(c->msgs);
    free(c->udp);
    free(c->refs);
    free(c->iov);
    free(c->rbuf);
    free(c);
}

void
conn_free(struct conn **cp)
{
    struct conn *c = *cp;

    if (c == NULL) {
        return;
    }
    log_debug("<%d connection closed.", c->fd);
    if (!c->is_udp && logger_wants(LOG_CONNEVENTS)) {
        logger_conn(false, c->fd, (struct sockaddr *)&c->peer, c->peer_len,
                    c->is_unix ? 0 : 1, c->close_reason);
    }
    io_close(&c->tls);
    /* Out of the epoll set first: a socket whose file lives on (a copy
     * handed to a successor or kept in the fd store) would stay in it. */
    if (c->loop != NULL) {
        evloop_forget(c->loop, &c->ev);
    }
    close(c->fd);
    conn_release(c);
    SERVER_STAT_DECR(curr_connections);
    *cp = NULL;
}

void
conn_detach(struct conn **cp)
{
    (*cp)->tls = NULL;      /* the session went with the socket */
    conn_release(*cp);
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
conn_out_commit_push(struct conn *c, size_t used)
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
conn_out_any(struct conn *c, const char *s, size_t n)
{
    if (c->noreply) {
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

void
conn_log_reply_line(const struct conn *c, const char *line, size_t n)
{
    if (n >= 2 && line[n - 2] == '\r') {
        n -= 2;
    }
    log_write(">%d %.*s", c->fd, (int)n, line);
}

int
conn_out_bin(struct conn *c, uint16_t status, uint64_t cas,
             const char *ext, uint8_t extlen, const char *key,
             uint16_t nkey, const char *val, uint32_t nval)
{
    char h[BIN_HEADER_LEN];

    bin_compose_header(h, c->bin_opcode, status, c->bin_opaque, cas, extlen,
                       nkey, (uint32_t)extlen + nkey + nval);
    if (settings.verbose > 1) {
        if (status != BIN_SUCCESS && status != BIN_AUTH_CONTINUE) {
            log_write(">%d Writing an error: %s", c->fd,
                      bin_status_text(status));
        }
        log_bin_header(c->fd, '>', "Writing bin response:",
                       (const unsigned char *)h);
    }
    return conn_out(c, h, sizeof(h)) || conn_out(c, ext, extlen) ||
           conn_out(c, key, nkey) || conn_out(c, val, nval) ? -1 : 0;
}

enum process_result
conn_swallow(struct conn *c, int rsp, uint64_t bytes)
{
    conn_out_rsp(c, rsp);
    c->swallow = bytes;
    return PROCESS_SWALLOW;
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
    return conn_value_len(c, it) <= CONN_VALUE_COPY_MAX && !c->noreply &&
           !(item_flags(it) & ITEM_CHUNKED);
}

/* item_value_iov() cut to the value's bytes on c's wire: up to max
 * pieces of it from `off`, and how many. */
static size_t
value_iov(const struct conn *c, const struct item *it, size_t off,
          struct iovec *iov, size_t max)
{
    size_t end = conn_value_len(c, it), n, i;

    if (off >= end) {
        return 0;
    }
    n = item_value_iov(it, off, iov, max);
    for (i = 0; i < n && off < end; i++) {
        if (iov[i].iov_len > end - off) {
            iov[i].iov_len = end - off;
        }
        off += iov[i].iov_len;
    }
    return i;
}

/* Commit `used` bytes written at the reserved position with the value
 * copied after them, and let the item go. */
static int
commit_with_value(struct conn *c, size_t used, struct item *it)
{
    struct obuf *b = c->obuf_cur;
    size_t n = conn_value_len(c, it);

    memcpy(b->data + b->used + used, item_value(it), n);
    conn_out_commit(c, used + n);
    cache_release(it);
    return 0;
}

int
conn_out_view(struct conn *c, const struct cache_view *v, size_t line_max,
              bool with_value,
              size_t (*line)(char *p, const struct cache_view *v, void *arg),
              void *arg)
{
    size_t vlen = !with_value ? 0
                  : v->vlen + (c->proto == CONN_BINARY ? 0 : 2);
    char *p = conn_out_reserve(c, line_max + vlen);
    size_t n = 0;

    if (p != NULL && (n = line(p, v, arg)) != 0) {
        memcpy(p + n, v->value, vlen);
    }
    if (!cache_peek_end(v) || n == 0) {
        return -1;
    }
    conn_out_commit(c, n + vlen);
    return 0;
}

char *
conn_out_reserve_value(struct conn *c, size_t line_max, struct item *it)
{
    return conn_out_reserve(c, line_max + (value_copied(c, it)
                                           ? conn_value_len(c, it) : 0));
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

    if (value_copied(c, it) && conn_out_reserve(c, conn_value_len(c, it))) {
        return commit_with_value(c, 0, it);
    }
    if (refs_push(c, it) != 0) {
        cache_release(it);
        c->close_after_write = true;
        return -1;
    }
    while ((n = value_iov(c, it, off, iov, 16)) > 0) {
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
    resp_give_back(c);
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

void
conn_out_discard(struct conn *c)
{
    out_reset(c);
}

int
conn_flush(struct conn *c)
{
    while (c->iov_sent < c->iov_len) {
        size_t left = c->iov_len - c->iov_sent;
        ssize_t n = io_writev(c->fd, c->tls, c->rio, &c->iov[c->iov_sent],
                              left < IOV_BATCH ? left : IOV_BATCH);

        if (n < 0) {
            return (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -1;
        }
        STAT_ADD(c->stats->bytes_written, (uint64_t)n);
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

    if (c->rbuf == NULL) {      /* given back while idle (conn_idle()) */
        if (!rbuf_may_grow(c, RBUF_SIZE) ||
            (c->rbuf = malloc(RBUF_SIZE)) == NULL) {
            return -1;
        }
        c->rsize = RBUF_SIZE;
        gauge_rbuf(c, 1, RBUF_SIZE);
    }
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

        if (c->rsize >= RBUF_MAX || !rbuf_may_grow(c, c->rsize)) {
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

/* A read's result as the callers take it: the bytes (counted), 0 when
 * the socket had none, -1 when it is closed or failed. */
static inline ssize_t
got_bytes(struct conn *c, ssize_t n)
{
    if (n > 0) {
        STAT_ADD(c->stats->bytes_read, (uint64_t)n);
        return n;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return 0;
    }
    if (n == 0) {
        c->close_reason = LOG_CLOSE_NORMAL;     /* the client hung up */
    }
    return -1;
}

ssize_t
conn_read(struct conn *c)
{
    ssize_t n;

    if (rbuf_room(c) != 0) {
        return -1;
    }
    n = io_read(c->fd, c->tls, c->rio, c->rbuf + c->rend, c->rsize - c->rend);
#ifdef ENABLE_TLS
    if (n > 0 && c->tls != NULL && !c->tls_named) {
        /* The handshake is done: keep the client's name where stats
         * conns can read it without the session. */
        tls_peer_cn(c->tls, c->peer_cn, sizeof(c->peer_cn));
        __atomic_store_n(&c->tls_named, true, __ATOMIC_RELEASE);
    }
#endif
    if (n > 0) {
        c->read_short = (size_t)n < c->rsize - c->rend && !io_pending(c->tls, c->rio);
        c->rend += (size_t)n;
    }
    return got_bytes(c, n);
}

int
conn_fill_input(struct conn *c, const char *p, size_t n)
{
    size_t size = c->rsize > RBUF_SIZE ? c->rsize : RBUF_SIZE;

    while (size < n) {
        size *= 2;
    }
    if (size != c->rsize) {
        char *b = realloc(c->rbuf, size);

        if (b == NULL) {
            return -1;
        }
        gauge_rbuf(c, c->rbuf == NULL ? 1 : 0,
                   (int64_t)size - (int64_t)c->rsize);
        c->rbuf = b;
        c->rsize = size;
    }
    memcpy(c->rbuf, p, n);
    c->rstart = c->pf_end = 0;
    c->rend = n;
    return 0;
}

void
conn_give_back_rbuf(struct conn *c)
{
    if (c->rbuf == NULL || c->rstart != c->rend || c->is_udp) {
        return;
    }
    gauge_rbuf(c, -1, -(int64_t)c->rsize);
    free(c->rbuf);
    c->rbuf = NULL;
    c->rsize = 0;
    c->rstart = c->rend = c->pf_end = 0;
}

void
conn_nread_buffered(struct conn *c)
{
    size_t want = conn_value_len(c, c->nitem) - c->nread_off;
    size_t have = c->rend - c->rstart;
    size_t take = want < have ? want : have;
    struct iovec iov[16];
    size_t n, done = 0;

    while (done < take &&
           (n = value_iov(c, c->nitem, c->nread_off, iov, 16)) > 0) {
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

ssize_t
conn_nread_direct(struct conn *c)
{
    struct iovec iov[64];
    size_t n = value_iov(c, c->nitem, c->nread_off, iov, 64);
    ssize_t got = io_readv(c->fd, c->tls, c->rio, iov, (int)n);

    if (got > 0) {
        c->nread_off += (size_t)got;
        if (io_pending(c->tls, c->rio)) {
            c->read_short = false;  /* what follows the value is in TLS */
        }
    }
    return got_bytes(c, got);
}
