/*
 * logger.c: watch's records, rings and the mc-log thread (logger.h).
 *
 * A producer fills a record (struct rec: the event's fields and its key
 * or text) straight into its ring.  A ring is a byte ring of 8-aligned
 * records with one writer and one reader (the mc-log thread): head is
 * written by the producer, tail by the reader, each published with
 * release and read with acquire.  A record that does not fit before the
 * ring's end leaves a skip mark (size 0) and starts over at 0.
 *
 * Locking: watchers[] under wlock (added by workers, read and closed by
 * the mc-log thread); the shared ring (threads without one of their own)
 * under its lock; a worker's ring needs none.
 */
#include "config.h"

#include "memcached-pm/watch/logger.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "memcached-pm/base/log.h"
#include "memcached-pm/base/settings.h"
#include "memcached-pm/base/stats.h"
#include "memcached-pm/security/tls.h"
#include "proto/compose.h"
#include "storage/base/affinity.h"
#include "storage/base/observe.h"

#define WATCHER_MAX    20              /* memcached's WATCHER_LIMIT */
#define TEXT_MAX       512             /* key, or a raw command line */
#define LINE_MAX_LEN   (3 * TEXT_MAX + 256)
#define SLEEP_MIN_US   1000
#define SLEEP_MAX_US   1000000
#define SLEEP_WAIT_US  20000
#define RING_MIN       4096
#define MAX_RINGS      64

enum rec_type {
    REC_GET, REC_STORE, REC_EVICT, REC_DELETE, REC_CONN_NEW,
    REC_CONN_CLOSE
};

/* One event.  The fields used depend on the type. */
struct rec {
    uint16_t size;          /* record bytes, 8-aligned; 0: skip mark */
    uint8_t  type;
    uint8_t  a;             /* get: found; store: enum cache_status;
                               conn: transport; evict: fetched; delete: md */
    uint8_t  b;             /* store: enum cache_op; close: reason */
    uint8_t  clsid;
    uint16_t ntext;         /* key or line bytes after the record */
    int32_t  fd;
    uint32_t vlen;
    int64_t  ttl;
    uint32_t la;
    uint64_t gid;
    int64_t  sec;
    int32_t  usec;
    struct sockaddr_in6 addr;
    char     text[];
};

struct ring {
    char           *buf;
    size_t          size;
    uint64_t        head;           /* producer */
    size_t          skip;           /* producer: bytes to the ring's end
                                       the reserved record skips */
    uint64_t        tail;           /* the mc-log thread */
    uint64_t        written;        /* producer's counts */
    uint64_t        dropped;
    pthread_mutex_t lock;           /* the shared ring only */
};

struct watcher {
    int      fd;
    struct tls *tls;                /* its TLS session, or NULL */
    unsigned streams;
    char     addr[64], listen_addr[64];     /* for stats conns */
    rel_time_t since;                       /* when it began watching */
    uint64_t min_gid;               /* lines of events after the watch */
    char    *buf;                   /* [start, end) waits to be sent */
    size_t   start, end, cap;
    uint64_t skipped;
    bool     failed_flush;
};

unsigned logger_flags;

static struct {
    pthread_t        thread;
    bool             running;
    bool             stop;
    pthread_mutex_t  wlock;
    pthread_cond_t   wcond;
    struct watcher  *watchers[WATCHER_MAX];
    unsigned         nwatchers;
    struct ring     *rings[MAX_RINGS];
    unsigned         nrings;        /* under wlock */
    struct ring      shared;
    uint64_t         gid;
    uint64_t         skipped, sent; /* the mc-log thread's counts */
} lg = {
    .wlock = PTHREAD_MUTEX_INITIALIZER,
    .wcond = PTHREAD_COND_INITIALIZER,
};

static _Thread_local struct ring *tl_ring;
static _Thread_local int tl_fd;

/* ---- rings ------------------------------------------------------------ */

static int
ring_init(struct ring *r)
{
    size_t size = settings.worker_logbuf_size & ~(size_t)7;

    r->size = size < RING_MIN ? RING_MIN : size;
    r->buf = malloc(r->size);
    pthread_mutex_init(&r->lock, NULL);
    return r->buf != NULL ? 0 : -1;
}

/* Room for a record of n bytes (8-aligned) at the head, or NULL (the ring
 * is full: the record is dropped).  Only the producer writes head; the
 * reader sees the record (and a skip mark before it) once ring_commit()
 * publishes both. */
static struct rec *
ring_reserve(struct ring *r, size_t n)
{
    uint64_t tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
    size_t used = (size_t)(r->head - tail);
    size_t off = (size_t)(r->head % r->size);
    size_t edge = r->size - off;

    r->skip = 0;
    if (n > edge) {
        /* Skip to the start: the skip mark and the record must fit. */
        if (r->size - used < edge + n) {
            return NULL;
        }
        ((struct rec *)(void *)(r->buf + off))->size = 0;
        r->skip = edge;
        off = 0;
    } else if (r->size - used < n) {
        return NULL;
    }
    return (struct rec *)(void *)(r->buf + off);
}

static void
ring_commit(struct ring *r, size_t n)
{
    __atomic_store_n(&r->head, r->head + r->skip + n, __ATOMIC_RELEASE);
    __atomic_add_fetch(&r->written, 1, __ATOMIC_RELAXED);
}

/* The calling thread's ring, locked if it is the shared one. */
static struct ring *
ring_enter(void)
{
    if (tl_ring != NULL) {
        return tl_ring;
    }
    pthread_mutex_lock(&lg.shared.lock);
    return &lg.shared;
}

static void
ring_leave(struct ring *r)
{
    if (r == &lg.shared) {
        pthread_mutex_unlock(&r->lock);
    }
}

/* A record of `type` with ntext bytes of text, its gid and time set; NULL
 * when it was dropped.  The caller fills it and calls emit_done(). */
static struct rec *
emit(struct ring *r, enum rec_type type, const char *text, size_t ntext)
{
    size_t n = (sizeof(struct rec) + ntext + 7) & ~(size_t)7;
    struct rec *e = ring_reserve(r, n);
    struct timeval tv;

    if (e == NULL) {
        __atomic_add_fetch(&r->dropped, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    memset(e, 0, sizeof(*e));
    e->size = (uint16_t)n;
    e->type = (uint8_t)type;
    e->ntext = (uint16_t)ntext;
    e->fd = tl_fd;
    e->gid = __atomic_add_fetch(&lg.gid, 1, __ATOMIC_RELAXED);
    gettimeofday(&tv, NULL);
    e->sec = tv.tv_sec;
    e->usec = (int32_t)tv.tv_usec;
    if (ntext > 0) {
        memcpy(e->text, text, ntext);
    }
    return e;
}

static void
emit_done(struct ring *r, struct rec *e)
{
    if (e != NULL) {
        ring_commit(r, e->size);
    }
    ring_leave(r);
}

/* ---- the events ------------------------------------------------------- */

static size_t
cut(size_t n)
{
    return n < TEXT_MAX ? n : TEXT_MAX;
}

static void
on_fetch(const char *key, size_t nkey, enum observe_found found,
         const struct item *it)
{
    struct ring *r;
    struct rec *e;

    if (!logger_wants(LOG_FETCHERS)) {
        return;
    }
    r = ring_enter();
    e = emit(r, REC_GET, key, cut(nkey));
    if (e != NULL) {
        e->a = (uint8_t)found;
        e->vlen = it != NULL ? item_vlen(it) : 0;
        e->clsid = it != NULL ? (uint8_t)item_clsid(it) : 0;
    }
    emit_done(r, e);
}

static void
on_evict(const struct item *it)
{
    rel_time_t now = clock_now();
    struct ring *r;
    struct rec *e;

    if (!logger_wants(LOG_EVICTIONS)) {
        return;
    }
    r = ring_enter();
    e = emit(r, REC_EVICT, item_key(it), item_nkey(it));
    if (e != NULL) {
        e->a = (item_flags(it) & ITEM_FETCHED) != 0;
        e->ttl = it->exptime > 0 ? (int64_t)it->exptime - now : -1;
        e->la = now - item_time(it);
        e->clsid = (uint8_t)item_clsid(it);
        e->vlen = item_vlen(it);
    }
    emit_done(r, e);
}

static const struct cache_observer hooks = {
    .fetch = on_fetch,
    .evict = on_evict,
};

void
logger_store(enum cache_status st, enum cache_op op, const char *key,
             size_t nkey, uint32_t vlen, rel_time_t exptime, unsigned clsid)
{
    struct ring *r = ring_enter();
    struct rec *e = emit(r, REC_STORE, key, cut(nkey));

    if (e != NULL) {
        e->a = (uint8_t)st;
        e->b = (uint8_t)op;
        e->vlen = vlen;
        e->ttl = exptime != 0 ? (uint32_t)(exptime - clock_now()) : 0;
        e->clsid = (uint8_t)clsid;
    }
    emit_done(r, e);
}

void
logger_delete(bool meta, const char *key, size_t nkey, unsigned clsid,
              uint32_t vlen)
{
    struct ring *r = ring_enter();
    struct rec *e = emit(r, REC_DELETE, key, cut(nkey));

    if (e != NULL) {
        e->a = meta;
        e->clsid = (uint8_t)clsid;
        e->vlen = vlen;
    }
    emit_done(r, e);
}

void
logger_conn(bool open, int fd, const struct sockaddr *peer, socklen_t len,
            int transport, int reason)
{
    struct ring *r = ring_enter();
    struct rec *e = emit(r, open ? REC_CONN_NEW : REC_CONN_CLOSE, NULL, 0);

    if (e != NULL) {
        e->fd = fd;
        e->a = (uint8_t)transport;
        e->b = (uint8_t)reason;
        if (peer != NULL && len <= sizeof(e->addr)) {
            memcpy(&e->addr, peer, len);
        }
    }
    emit_done(r, e);
}

void
logger_set_fd(int fd)
{
    tl_fd = fd;
}

int
logger_thread_init(void)
{
    struct ring *r = calloc(1, sizeof(*r));

    if (r == NULL || ring_init(r) != 0) {
        free(r);
        return -1;
    }
    pthread_mutex_lock(&lg.wlock);
    if (lg.nrings == MAX_RINGS) {
        pthread_mutex_unlock(&lg.wlock);
        free(r->buf);
        free(r);
        return 0;       /* this thread shares the common ring */
    }
    lg.rings[lg.nrings++] = r;
    pthread_mutex_unlock(&lg.wlock);
    tl_ring = r;
    return 0;
}

/* ---- lines ------------------------------------------------------------ */

static const char *const found_names[] = {
    "not_found", "found", "flushed", "expired"
};
/* memcached's name of a store's outcome. */
static const char *
status_name(enum cache_status st)
{
    switch (st) {
    case CACHE_STORED: return "stored";
    case CACHE_EXISTS: return "exists";
    case CACHE_NOT_FOUND: return "not_found";
    case CACHE_TOO_LARGE: return "too_large";
    case CACHE_NO_MEMORY: return "no_memory";
    default: return "not_stored";
    }
}

/* memcached's name of a store command, by enum cache_op. */
static const char *const cmd_names[] = {
    "set", "add", "replace", "append", "prepend", "cas"
};
static const char *const transport_names[] = { "local", "tcp", "udp" };
static const char *const reason_names[] = {
    "error", "normal", "idle_timeout", "shutdown"
};

static void
peer_of(const struct rec *e, char *ip, size_t len, unsigned short *port)
{
    const struct sockaddr_in *s4 = (const void *)&e->addr;

    *port = 0;
    switch (e->addr.sin6_family) {
    case AF_INET:
        inet_ntop(AF_INET, &s4->sin_addr, ip, (socklen_t)len);
        *port = ntohs(s4->sin_port);
        break;
    case AF_INET6:
        inet_ntop(AF_INET6, &e->addr.sin6_addr, ip, (socklen_t)len);
        *port = ntohs(e->addr.sin6_port);
        break;
    default:
        snprintf(ip, len, "unix");
        break;
    }
}

/* A record as memcached writes its line; the length. */
static int
render(const struct rec *e, char *line)
{
    char key[3 * TEXT_MAX + 1], ip[64] = "";
    unsigned short port;
    int n = snprintf(line, 64, "ts=%lld.%d gid=%llu ", (long long)e->sec,
                     (int)e->usec, (unsigned long long)e->gid);
    char *p = line + n;
    size_t room = LINE_MAX_LEN - (size_t)n;

    compose_uri(key, e->text, e->ntext);
    switch (e->type) {
    case REC_GET:
        n += snprintf(p, room, "type=item_get key=%s status=%s clsid=%u "
                      "cfd=%d size=%u\n", key, found_names[e->a & 3],
                      e->clsid, e->fd, e->vlen);
        break;
    case REC_STORE:
        n += snprintf(p, room, "type=item_store key=%s status=%s cmd=%s "
                      "ttl=%u clsid=%u cfd=%d size=%u\n", key,
                      status_name((enum cache_status)e->a),
                      e->b <= CACHE_CAS ? cmd_names[e->b] : "null",
                      (unsigned)e->ttl, e->clsid, e->fd, e->vlen);
        break;
    case REC_EVICT:
        n += snprintf(p, room, "type=eviction key=%s fetch=%s ttl=%lld "
                      "la=%u clsid=%u size=%u\n", key, e->a ? "yes" : "no",
                      (long long)e->ttl, e->la, e->clsid, e->vlen);
        break;
    case REC_DELETE:
        n += snprintf(p, room, "type=deleted key=%s cmd=%s clsid=%u "
                      "size=%u\n", key, e->a ? "md" : "delete", e->clsid,
                      e->vlen);
        break;
    case REC_CONN_NEW:
    case REC_CONN_CLOSE:
    default:
        peer_of(e, ip, sizeof(ip), &port);
        if (e->type == REC_CONN_NEW) {
            n += snprintf(p, room, "type=conn_new rip=%s rport=%hu "
                          "transport=%s cfd=%d\n", ip, port,
                          transport_names[e->a % 3], e->fd);
        } else {
            n += snprintf(p, room, "type=conn_close rip=%s rport=%hu "
                          "transport=%s reason=%s cfd=%d\n", ip, port,
                          transport_names[e->a % 3], reason_names[e->b % 4],
                          e->fd);
        }
        break;
    }
    return n < LINE_MAX_LEN ? n : LINE_MAX_LEN - 1;
}

static unsigned
stream_of(const struct rec *e)
{
    switch (e->type) {
    case REC_GET: return LOG_FETCHERS;
    case REC_STORE: return LOG_MUTATIONS;
    case REC_EVICT: return LOG_EVICTIONS;
    case REC_DELETE: return LOG_DELETIONS;
    default: return LOG_CONNEVENTS;
    }
}

/* ---- watchers (the mc-log thread, under wlock) ------------------------ */

static void set_flags(void);

static void
watcher_close(unsigned i)
{
    struct watcher *w = lg.watchers[i];

#ifdef ENABLE_TLS
    tls_free(w->tls);
#endif
    close(w->fd);
    free(w->buf);
    free(w);
    lg.watchers[i] = NULL;
    lg.nwatchers--;
    SERVER_STAT_DECR(curr_connections);
    set_flags();
}

/* write(), or its TLS counterpart. */
static ssize_t
watcher_write(struct watcher *w, char *buf, size_t n)
{
#ifdef ENABLE_TLS
    if (w->tls != NULL) {
        struct iovec iov = { .iov_base = buf, .iov_len = n };

        return tls_writev(w->tls, &iov, 1);
    }
#endif
    return write(w->fd, buf, n);
}

/* read(), or its TLS counterpart. */
static ssize_t
watcher_read(struct watcher *w, char *buf, size_t n)
{
#ifdef ENABLE_TLS
    if (w->tls != NULL) {
        return tls_read(w->tls, buf, n);
    }
#endif
    return read(w->fd, buf, n);
}

/* Send what w holds: the bytes sent, or -1 when the watcher is gone
 * (closed). */
static ssize_t
watcher_send(unsigned i)
{
    struct watcher *w = lg.watchers[i];
    ssize_t sent = 0;

    while (w->end > w->start) {
        ssize_t n = watcher_write(w, w->buf + w->start, w->end - w->start);

        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                return sent;
            }
            watcher_close(i);
            return -1;
        }
        w->start += (size_t)n;
        sent += n;
    }
    w->start = w->end = 0;
    return sent;
}

/* A watcher whose client hung up: its socket reads 0 (anything it sends
 * is read and dropped, as memcached does). */
static bool
watcher_alive(unsigned i)
{
    struct pollfd pfd = { .fd = lg.watchers[i]->fd, .events = POLLIN };
    char c;

    if (poll(&pfd, 1, 0) <= 0) {
        return true;
    }
    if (pfd.revents & (POLLHUP | POLLERR)) {
        watcher_close(i);
        return false;
    }
    if (pfd.revents & POLLIN) {
        ssize_t n = watcher_read(lg.watchers[i], &c, 1);

        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
            watcher_close(i);
            return false;
        }
    }
    return true;
}

/* Room for n bytes at w's end (moving what waits to the front first). */
static bool
watcher_room(struct watcher *w, size_t n)
{
    if (w->cap - w->end >= n) {
        return true;
    }
    if (w->start > 0) {
        memmove(w->buf, w->buf + w->start, w->end - w->start);
        w->end -= w->start;
        w->start = 0;
    }
    return w->cap - w->end >= n;
}

/* Give one line to every watcher that wants it. */
static void
deliver(const struct rec *e, const char *line, size_t n)
{
    unsigned stream = stream_of(e);

    for (unsigned i = 0; i < WATCHER_MAX; i++) {
        struct watcher *w = lg.watchers[i];

        if (w == NULL || !(w->streams & stream) || e->gid < w->min_gid) {
            continue;
        }
        /* Full: try to send once, then skip until the next round. */
        if (!w->failed_flush && !watcher_room(w, n + 128)) {
            if (watcher_send(i) < 0) {     /* closed */
                continue;
            }
            w->failed_flush = !watcher_room(w, n + 128);
        }
        if (w->failed_flush) {
            w->skipped++;
            lg.skipped++;
            continue;
        }
        if (w->skipped > 0) {
            w->end += (size_t)snprintf(w->buf + w->end, 128, "skipped=%llu\n",
                                       (unsigned long long)w->skipped);
            w->skipped = 0;
        }
        memcpy(w->buf + w->end, line, n);
        w->end += n;
        lg.sent++;
    }
}

/* Drain one ring; the records read. */
static unsigned
drain(struct ring *r)
{
    uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
    uint64_t tail = r->tail;
    char line[LINE_MAX_LEN];
    unsigned n = 0;

    while (tail < head) {
        size_t off = (size_t)(tail % r->size);
        const struct rec *e = (const void *)(r->buf + off);

        if (e->size == 0) {
            tail += r->size - off;
            continue;
        }
        if (lg.nwatchers > 0) {
            deliver(e, line, (size_t)render(e, line));
        }
        tail += e->size;
        n++;
    }
    __atomic_store_n(&r->tail, tail, __ATOMIC_RELEASE);
    return n;
}

/* The streams some watcher wants, for producers and for storage. */
static void
set_flags(void)
{
    unsigned f = 0;

    for (unsigned i = 0; i < WATCHER_MAX; i++) {
        if (lg.watchers[i] != NULL) {
            f |= lg.watchers[i]->streams;
        }
    }
    __atomic_store_n(&logger_flags, f, __ATOMIC_RELAXED);
    observe_set(NULL, ((f & LOG_FETCHERS) ? OBSERVE_FETCH : 0) |
                      ((f & LOG_EVICTIONS) ? OBSERVE_EVICT : 0));
}

/* ---- the thread ------------------------------------------------------- */

static void *
logger_main(void *arg)
{
    uint64_t sleep_us = SLEEP_MIN_US;

    (void)arg;
    pthread_mutex_lock(&lg.wlock);
    while (!lg.stop) {
        unsigned found = 0;
        bool waiting = false;   /* a watcher has lines its socket refused */
        uint64_t cap = SLEEP_MAX_US;
        struct timespec ts;

        if (lg.nwatchers == 0) {
            pthread_cond_wait(&lg.wcond, &lg.wlock);
            continue;
        }
        found += drain(&lg.shared);
        for (unsigned i = 0; i < lg.nrings; i++) {
            found += drain(lg.rings[i]);
        }
        for (unsigned i = 0; i < WATCHER_MAX; i++) {
            ssize_t sent;

            if (lg.watchers[i] == NULL || !watcher_alive(i) ||
                (sent = watcher_send(i)) < 0) {
                continue;
            }
            lg.watchers[i]->failed_flush = false;
            found += sent > 0;
            waiting |= lg.watchers[i]->end > lg.watchers[i]->start;
        }
        /* Busy: come back soon.  Idle: back off, up to a second, or up to
         * SLEEP_WAIT_US while a watcher's socket has no room for what it
         * is owed. */
        if (waiting) {
            cap = SLEEP_WAIT_US;
        }
        sleep_us = found > 0 ? SLEEP_MIN_US : sleep_us + sleep_us / 8;
        if (sleep_us > cap) {
            sleep_us = cap;
        }
        clock_deadline(&ts, sleep_us);
        pthread_cond_timedwait(&lg.wcond, &lg.wlock, &ts);
    }
    for (unsigned i = 0; i < WATCHER_MAX; i++) {
        if (lg.watchers[i] != NULL) {
            watcher_close(i);
        }
    }
    pthread_mutex_unlock(&lg.wlock);
    return NULL;
}

int
logger_start(void)
{
    if (ring_init(&lg.shared) != 0) {
        return -1;
    }
    observe_set(&hooks, 0);
    if (pthread_create(&lg.thread, NULL, logger_main, NULL) != 0) {
        return -1;
    }
    pthread_setname_np(lg.thread, "mc-log");
    affinity_apply(lg.thread, AFFINITY_BG, 0);
    lg.running = true;
    return 0;
}

void
logger_stop(void)
{
    if (!lg.running) {
        return;
    }
    pthread_mutex_lock(&lg.wlock);
    lg.stop = true;
    pthread_cond_signal(&lg.wcond);
    pthread_mutex_unlock(&lg.wlock);
    pthread_join(lg.thread, NULL);
    lg.running = false;
    for (unsigned i = 0; i < lg.nrings; i++) {
        free(lg.rings[i]->buf);
        free(lg.rings[i]);
    }
    lg.nrings = 0;
    free(lg.shared.buf);
    lg.shared.buf = NULL;
}

/* ---- watch ------------------------------------------------------------ */

static const struct {
    const char *name;
    unsigned    stream;
} stream_names[] = {
    { "rawcmds", LOG_RAWCMDS }, { "evictions", LOG_EVICTIONS },
    { "fetchers", LOG_FETCHERS }, { "mutations", LOG_MUTATIONS },
    { "sysevents", LOG_SYSEVENTS }, { "connevents", LOG_CONNEVENTS },
    { "proxyreqs", LOG_PROXYREQS }, { "proxyevents", LOG_PROXYEVENTS },
    { "proxyuser", LOG_PROXYUSER }, { "deletions", LOG_DELETIONS },
};

bool
logger_parse_streams(const char *const *names, const size_t *lens,
                     unsigned n, unsigned *streams)
{
    *streams = n == 0 ? LOG_FETCHERS : 0;
    for (unsigned i = 0; i < n; i++) {
        size_t k, count = sizeof(stream_names) / sizeof(stream_names[0]);

        /* memcached compares the name's first len bytes (strncmp). */
        for (k = 0; k < count; k++) {
            if (lens[i] <= strlen(stream_names[k].name) &&
                strncmp(names[i], stream_names[k].name, lens[i]) == 0) {
                break;
            }
        }
        if (k == count) {
            return false;
        }
        *streams |= stream_names[k].stream;
    }
    return true;
}

enum logger_add
logger_add_watcher(int fd, struct tls *tls, unsigned streams,
                   const char *addr, const char *listen_addr)
{
    struct watcher *w;
    unsigned i;

    pthread_mutex_lock(&lg.wlock);
    if (lg.nwatchers >= WATCHER_MAX) {
        pthread_mutex_unlock(&lg.wlock);
        return LOGGER_TOO_MANY;
    }
    for (i = 0; i < WATCHER_MAX && lg.watchers[i] != NULL; i++) {
    }
    w = calloc(1, sizeof(*w));
    if (w != NULL) {
        w->cap = settings.watcher_logbuf_size > 4096
                 ? settings.watcher_logbuf_size : 4096;
        w->buf = malloc(w->cap);
    }
    if (w == NULL || w->buf == NULL) {
        free(w);
        pthread_mutex_unlock(&lg.wlock);
        return LOGGER_FAILED;
    }
    w->fd = fd;
    w->tls = tls;
    w->streams = streams;
    snprintf(w->addr, sizeof(w->addr), "%s", addr);
    snprintf(w->listen_addr, sizeof(w->listen_addr), "%s", listen_addr);
    w->since = clock_now();
    w->min_gid = __atomic_load_n(&lg.gid, __ATOMIC_RELAXED) + 1;
    memcpy(w->buf, "OK\r\n", 4);
    w->end = 4;
    lg.watchers[i] = w;
    lg.nwatchers++;
    set_flags();
    pthread_cond_signal(&lg.wcond);
    pthread_mutex_unlock(&lg.wlock);
    return LOGGER_ADDED;
}

void
logger_each_watcher(logger_watcher_fn fn, void *ctx)
{
    pthread_mutex_lock(&lg.wlock);
    for (unsigned i = 0; i < WATCHER_MAX; i++) {
        const struct watcher *w = lg.watchers[i];

        if (w != NULL) {
            fn(w->fd, w->addr, w->listen_addr, w->since, ctx);
        }
    }
    pthread_mutex_unlock(&lg.wlock);
}

void
logger_stats(struct logger_stats *out)
{
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&lg.wlock);
    out->log_worker_written = __atomic_load_n(&lg.shared.written,
                                              __ATOMIC_RELAXED);
    out->log_worker_dropped = __atomic_load_n(&lg.shared.dropped,
                                              __ATOMIC_RELAXED);
    for (unsigned i = 0; i < lg.nrings; i++) {
        out->log_worker_written += __atomic_load_n(&lg.rings[i]->written,
                                                   __ATOMIC_RELAXED);
        out->log_worker_dropped += __atomic_load_n(&lg.rings[i]->dropped,
                                                   __ATOMIC_RELAXED);
    }
    out->log_watcher_skipped = lg.skipped;
    out->log_watcher_sent = lg.sent;
    out->log_watchers = lg.nwatchers;
    pthread_mutex_unlock(&lg.wlock);
}
