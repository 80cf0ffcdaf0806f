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

/* ---- the worker's share ---------------------------------------------- */

/* ---- listeners' names --------------------------------------------------- */

/* The names connections give for the socket they came from: few (the
 * listeners, and those a predecessor's connections name), kept for the
 * process's life, so that each connection holds a pointer, not a copy. */
struct name {
    struct name *next;
    char         s[];
};

static struct name *names;
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;

const char *
conn_name(const char *s)
{
    struct name *n;

    pthread_mutex_lock(&names_lock);
    for (n = names; n != NULL && strcmp(n->s, s) != 0; n = n->next) {
    }
    if (n == NULL && (n = malloc(sizeof(*n) + strlen(s) + 1)) != NULL) {
        strcpy(n->s, s);
        n->next = names;
        names = n;
    }
    pthread_mutex_unlock(&names_lock);
    return n != NULL ? n->s : "";
}

static void
names_free(void)
{
    struct name *n;

    pthread_mutex_lock(&names_lock);
    while ((n = names) != NULL) {
        names = n->next;
        free(n);
    }
    pthread_mutex_unlock(&names_lock);
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
        conn_buf_free(&lists[i].buf);
        pthread_mutex_destroy(&lists[i].lock);
    }
    free(lists);
    lists = NULL;
    nlists = 0;
    names_free();
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
        const struct buffer_gauges *g = &lists[i].buf.gauges;

        out->read_buf_count += GLOAD(g->read_buf_count);
        out->read_buf_bytes += GLOAD(g->read_buf_bytes);
        out->read_buf_bytes_free += GLOAD(g->read_buf_bytes_free);
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

/* The peer's address, for stats conns and watch (a unix socket has
 * none: its name is the socket's path). */
static void
peer_name(struct conn *c, const struct sockaddr *known, socklen_t len)
{
    struct sockaddr_storage ss;

    if (known != NULL) {
        memcpy(&ss, known, len < sizeof(ss) ? len : sizeof(ss));
    } else if (len = sizeof(ss), c->is_unix ||
               getpeername(c->fd, (struct sockaddr *)&ss, &len) != 0) {
        return;
    }
    if (len <= sizeof(c->peer)) {
        memcpy(&c->peer, &ss, len);
        c->peer_len = len;
    }
}

void
conn_addr_name(const struct conn *c, char *out, size_t len)
{
    const struct sockaddr *sa = (const struct sockaddr *)&c->peer;

    if (c->is_udp) {
        snprintf(out, len, "%s", c->listen_addr);
    } else if (c->is_unix) {
        snprintf(out, len, "unix:%s",
                 settings.socketpath ? settings.socketpath : "");
    } else if (c->peer_len > 0 &&
               (sa->sa_family == AF_INET || sa->sa_family == AF_INET6)) {
        sock_addr_name(sa, "tcp", out, len);
    } else {
        snprintf(out, len, "tcp:unknown");
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

    if (c == NULL) {
        goto oom;
    }
    c->fd = fd;
    c->is_udp = udp;
    c->proto = bound_proto();
    c->loop = o->loop;
    c->ring = o->ring;
    c->list = o->list;
    c->stats = o->stats;
    c->la = o->la;
    /* A stream borrows its buffers while it works (conn_idle()); a UDP
     * socket, never idle, has its own. */
    if (udp && ((c->rbuf = malloc(rbuf_size)) == NULL ||
                (c->obuf_head = conn_buf_obuf(&c->list->buf)) == NULL)) {
        free(c->rbuf);
        goto oom;
    }
    c->rsize = udp ? rbuf_size : 0;
    c->obuf_cur = c->obuf_head;
    c->last_cmd = clock_now();
    conn_set_state(c, CONN_READ);
    list_add(c->list, c);
    return c;
oom:
    log_error("out of memory for a new connection");
    free(c);
    close(fd);
    return NULL;
}

struct conn *
conn_new(const struct conn_owner *o, int fd, bool is_unix, enum tls_mode tls,
         const char *listen_addr, const struct sockaddr *peer,
         socklen_t peer_len)
{
    struct conn *c = conn_make(o, fd, 0, false);

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
    c->listen_addr = conn_name(listen_addr);
    peer_name(c, peer, peer_len);
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
    c->listen_addr = conn_name(name);
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

/* The read buffer back to the worker (a grown one to the heap). */
static void
release_rbuf(struct conn *c)
{
    if (c->rbuf == NULL) {
        return;
    }
    if (c->is_udp) {
        free(c->rbuf);          /* its own, outside the gauges */
    } else if (c->rsize == CONN_RBUF_SIZE) {
        conn_buf_rbuf_back(&c->list->buf, c->rbuf);
    } else {
        conn_buf_gauge_rbuf(&c->list->buf, -1, -(int64_t)c->rsize);
        free(c->rbuf);
    }
    c->rbuf = NULL;
    c->rsize = 0;
}

static void
release_iov(struct conn *c)
{
    if (c->iov_cap == CONN_IOV_MIN) {
        conn_buf_iov_back(&c->list->buf, c->iov);
    } else {
        free(c->iov);
    }
    c->iov = NULL;
    c->iov_cap = 0;
}

static void
rest_del(struct conn *c)
{
    if (c->rest_slot != 0) {
        c->list->resting[c->rest_slot - 1] = NULL;
        c->rest_slot = 0;
        conn_buf_unrest(&c->list->buf);
    }
}

/* Free c and what it holds, its socket aside. */
static void
conn_release(struct conn *c)
{
    struct obuf *b, *next;

    rest_del(c);
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
        conn_buf_obuf_back(&c->list->buf, b);
    }
    release_rbuf(c);
    release_iov(c);
    cyrus_session_free(&c->sasl);
    free(c->peer_cn);
    free(c->nmeta);
    free(c->msgs);
    free(c->udp);
    free(c->refs);
    if (c->loop != NULL) {
        evloop_bury(c->loop, c);    /* its event may still come */
    } else {
        free(c);
    }
}

void
conn_idle(struct conn *c)
{
    struct obuf *b, *next;

    if (c->is_udp) {
        return;
    }
    if (c->rstart == c->rend) {
        release_rbuf(c);
        c->rstart = c->rend = c->pf_end = 0;
    }
    if (c->iov_len == c->iov_sent && c->nrefs == 0) {
        for (b = c->obuf_head; b != NULL; b = next) {
            next = b->next;
            conn_buf_obuf_back(&c->list->buf, b);
        }
        c->obuf_head = c->obuf_cur = NULL;
        c->iov_len = c->iov_sent = 0;
        release_iov(c);
        free(c->refs);
        c->refs = NULL;
        c->refs_cap = 0;
    }
}

void
conn_rest(struct conn *c)
{
    struct conn_list *l = c->list;
    unsigned i = 0;

    if (c->is_udp) {
        return;
    }
    if (c->rest_slot == 0) {
        while (i < CONN_SPARE_MAX && l->resting[i] != NULL) {
            i++;
        }
        if (i == CONN_SPARE_MAX || !conn_buf_rest(&l->buf)) {
            conn_idle(c);
            return;
        }
        l->resting[i] = c;
        c->rest_slot = (uint8_t)(i + 1);
    }
    l->rested[c->rest_slot - 1] = l->pass;
}

void
conn_rest_end_pass(struct conn_list *l)
{
    unsigned left = l->buf.resting;

    for (unsigned i = 0; left > 0 && i < CONN_SPARE_MAX; i++) {
        struct conn *c = l->resting[i];

        if (c == NULL) {
            continue;
        }
        left--;
        if (l->rested[i] != l->pass) {
            /* a whole pass went by without it resting again: idle if it
             * still waits for a request, else in one (it rests again
             * once that is done) */
            rest_del(c);
            if (c->state == CONN_READ) {
                conn_idle(c);
            }
        }
    }
    l->pass++;
}

/* A socket sent ahead of a takeover is shut down, not closed: its
 * number must not come back for another connection before the pause,
 * and its client sees the end now. */
static bool
conn_close_presented(struct conn *c)
{
    if (handover_add_dead(&c->list->left, c->fd) != 0) {
        return false;
    }
    (void)shutdown(c->fd, SHUT_RDWR);
    return true;
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
    if (c->presented == 0 || !conn_close_presented(c)) {
        close(c->fd);
    }
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
