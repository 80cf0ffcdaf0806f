/*
 * conn.c: the connection object (conn.h): made, listed on its worker,
 * counted against the worker's share of -o read_buf_mem_limit, and
 * freed; the workers' lists and what "stats conns" and "stats" read of
 * them.  Reading is conn_in.c's, the reply queue conn_out.c's.
 *
 * Locking: a connection is its worker's alone; a list's lock guards its
 * links, which its worker alone changes and "stats conns" walks under
 * the lock.
 */
#include "config.h"

#include "memcached-pm/conn/conn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "memcached-pm/base/log.h"
#include "memcached-pm/net/given.h"
#include "memcached-pm/net/transport.h"
#include "memcached-pm/security/sasl_cyrus.h"
#include "memcached-pm/watch/logger.h"

#define RESP_PER_RBUF  13             /* memcached's responses per buffer */

/* ---- the worker's share ---------------------------------------------- */

/* Buffer gauges of the owning worker: single writer, so a relaxed load
 * and store (STAT_ADD) is enough; a negative delta wraps as intended.  A
 * UDP socket's buffer is its own, outside -o read_buf_mem_limit (as
 * memcached's UDP connections read into theirs): not counted. */
void
conn_gauge_rbuf(struct conn *c, int64_t count, int64_t bytes)
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

    /* memcached's least */
    return share < CONN_RBUF_SIZE ? CONN_RBUF_SIZE : share;
}

static uint64_t
slot_bytes(const struct buffer_gauges *g, uint64_t slots)
{
    uint64_t n = (slots + RESP_PER_RBUF - 1) / RESP_PER_RBUF;

    if (n == 0 && g->resp_buffer_kept) {
        n = 1;
    }
    return n * CONN_RBUF_SIZE;
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
bool
conn_rbuf_may_grow(struct conn *c, size_t add)
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

void
conn_resp_give_back(struct conn *c)
{
    if (c->resp_slots > 0) {
        STAT_ADD(c->list->gauges.resp_slots, -(uint64_t)c->resp_slots);
        c->resp_slots = 0;
    }
}

void
conn_gauge_obuf(struct conn *c, int64_t count)
{
    struct buffer_gauges *g = &c->list->gauges;

    STAT_ADD(g->response_obj_count, (uint64_t)count);
    STAT_ADD(g->response_obj_bytes, (uint64_t)(count * (int64_t)OBUF_SIZE));
}

/* ---- the workers' lists ---------------------------------------------- */

static struct conn_list *lists;
static unsigned nlists;

struct conn_list *
conn_lists_new(unsigned n)
{
    lists = calloc(n, sizeof(*lists));
    if (lists == NULL) {
        return NULL;
    }
    for (unsigned i = 0; i < n; i++) {
        pthread_mutex_init(&lists[i].lock, NULL);
    }
    nlists = n;
    return lists;
}

void
conn_lists_free(void)
{
    for (unsigned i = 0; i < nlists; i++) {
        pthread_mutex_destroy(&lists[i].lock);
    }
    free(lists);
    lists = NULL;
    nlists = 0;
}

static void
list_add(struct conn_list *l, struct conn *c)
{
    pthread_mutex_lock(&l->lock);
    c->prev = NULL;
    c->next = l->head;
    if (l->head != NULL) {
        l->head->prev = c;
    }
    l->head = c;
    l->n++;
    pthread_mutex_unlock(&l->lock);
}

static void
list_del(struct conn_list *l, struct conn *c)
{
    bool empty;

    pthread_mutex_lock(&l->lock);
    if (c->prev != NULL) {
        c->prev->next = c->next;
    } else {
        l->head = c->next;
    }
    if (c->next != NULL) {
        c->next->prev = c->prev;
    }
    l->n--;
    empty = l->n == 0;
    pthread_mutex_unlock(&l->lock);
    if (empty && l->leaving && l->on_empty != NULL) {
        l->on_empty(l->empty_arg);
    }
}

void
conn_each(void (*fn)(struct conn *c, void *ctx), void *ctx)
{
    for (unsigned i = 0; i < nlists; i++) {
        pthread_mutex_lock(&lists[i].lock);
        for (struct conn *c = lists[i].head; c != NULL; c = c->next) {
            fn(c, ctx);
        }
        pthread_mutex_unlock(&lists[i].lock);
    }
}

#define GLOAD(f) __atomic_load_n(&(f), __ATOMIC_RELAXED)

void
conn_gauges(struct buffer_gauges *out)
{
    memset(out, 0, sizeof(*out));
    for (unsigned i = 0; i < nlists; i++) {
        const struct buffer_gauges *g = &lists[i].gauges;

        out->read_buf_count += GLOAD(g->read_buf_count);
        out->read_buf_bytes += GLOAD(g->read_buf_bytes);
        out->response_obj_count += GLOAD(g->response_obj_count);
        out->response_obj_bytes += GLOAD(g->response_obj_bytes);
    }
}

const char *
conn_state_name(const struct conn *c)
{
    enum conn_state s = __atomic_load_n(&c->state, __ATOMIC_RELAXED);

    /* memcached's name for a UDP socket, and for a connection waiting
     * for its next request (it passes conn_waiting on its way there). */
    if (c->is_udp || s == CONN_READ) {
        return "conn_read";
    }
    return conn_state_label(s);
}

const char *
conn_state_label(enum conn_state s)
{
    switch (s) {
    case CONN_READ: return "conn_waiting";
    case CONN_PARSE: return "conn_parse_cmd";
    case CONN_NREAD: return "conn_nread";
    case CONN_SWALLOW: return "conn_swallow";
    case CONN_WRITE: return "conn_mwrite";
    case CONN_HANDOFF: return "conn_watch";
    case CONN_LEAVE: return "conn_closing";
    case CONN_CLOSING: default: return "conn_closing";
    }
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
        conn_gauge_rbuf(c, 1, (int64_t)rbuf_size);
    }
    conn_gauge_obuf(c, 1);
    list_add(c->list, c);
    return c;
}

struct conn *
conn_new(const struct conn_owner *o, int fd, bool is_unix, enum tls_mode tls,
         const char *listen_addr)
{
    /* Under read_buf_mem_limit a buffer is held only while reading: the
     * first read takes one (rbuf_room()). */
    struct conn *c = conn_make(o, fd, settings.read_buf_mem_limit > 0
                                      ? 0 : CONN_RBUF_SIZE, false);

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

void
conn_release_refs(struct conn *c)
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
    list_del(c->list, c);
    conn_release_refs(c);
    conn_resp_give_back(c);
    if (c->nitem != NULL) {
        cache_release(c->nitem);
    }
    for (b = c->obuf_head; b != NULL; b = next) {
        next = b->next;
        free(b);
        conn_gauge_obuf(c, -1);
    }
    if (c->rbuf != NULL) {      /* none while idle under the limit */
        conn_gauge_rbuf(c, -1, -(int64_t)c->rsize);
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


/* item_value_iov() cut to the value's bytes on c's wire: up to max
 * pieces of it from `off`, and how many. */
size_t
conn_value_iov(const struct conn *c, const struct item *it, size_t off,
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
