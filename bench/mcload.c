/*
 * mcload: a closed-loop load generator for memcached-protocol servers.
 *
 * Each thread owns one event_base and a share of the connections.  Every
 * connection keeps up to `depth` requests in flight (with --rate, no
 * more than the rate has let out so far: a cap, so that the server has
 * time between batches, as with a client slower than it); each request carries
 * its own send time, so a pipelined request's latency runs from the moment
 * it went into the socket to the moment its reply was parsed.  Every reply
 * is validated (framing, key, size and value bytes), and anything the
 * server says that a correct server would not say counts as an error.
 *
 * Layout of this file, top to bottom:
 *   options     argv -> struct opts (one global, read-only after main)
 *   keys        key space, distributions (uniform, zipf, seq), values
 *   histogram   log-linear latency buckets, ~0.8% relative precision
 *   conn        request building, reply parsing, socket I/O
 *   worker      one thread: phases (preload, run), deadlines, drain
 *   report      merge the workers' counters, print text or JSON
 *
 * Nothing is shared between threads while they run: counters and
 * histograms are per worker and summed after the join.
 */

#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench/tls_client.h"

#define MAX_KEY_LEN 250
#define MAX_DEPTH 4096
#define MAX_MULTIGET 1024
#define MAX_CPUS 256
/* A reply line longer than this without a newline means a lost frame. */
#define MAX_LINE 4096
#define READ_CHUNK 65536
/* Requests still unanswered this long after the deadline are timeouts. */
#define DRAIN_GRACE_SEC 5
/* Binary protocol: header size and the opcodes mcload sends. */
#define BIN_HDR 24
#define BIN_SET 0x01
#define BIN_NOOP 0x0a
#define BIN_GETK 0x0c
#define BIN_GETKQ 0x0d
/* UDP: the frame before each datagram's request or reply bytes. */
#define UDP_FRAME 8
#define UDP_READ_MAX 65536

enum proto { PROTO_TEXT, PROTO_META, PROTO_BINARY };

static const char *const proto_names[] = { "text", "meta", "binary" };
enum dist { DIST_UNIFORM, DIST_ZIPF, DIST_SEQ };
enum op { OP_GET, OP_SET };
enum phase { PHASE_PRELOAD, PHASE_RUN };

struct opts {
    struct sockaddr_in addr;
    const char *server;
    int conns;
    int depth;
    int threads;
    double get_ratio;
    int multiget;
    uint64_t keys;
    enum dist dist;
    double zipf_s;
    const char *prefix;
    uint32_t vmin;
    uint32_t vmax;
    double duration;
    double rate;        /* requests a second in the run, all threads (0: any) */
    uint64_t requests;
    enum proto proto;
    bool preload;
    bool verify;
    bool json;
    bool udp;           /* requests over UDP, one datagram each */
    bool tls;           /* TLS (tls_client.h) on every connection */
    int cpus[MAX_CPUS];
    int ncpus;
    uint64_t seed;
};

static struct opts o;
/* Value bytes: the value of key i is vpattern + (i % 64), length vsize(i). */
static char *vpattern;

/* ---------------------------------------------------------------- clock */

static uint64_t
now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------ histogram */

/*
 * HDR-style log-linear buckets over nanoseconds.  Values below 128 get one
 * bucket each; above that every power of two is cut into 64 equal
 * sub-buckets, so a bucket is never wider than 1/64 of its lower bound
 * (~1.6% worst case, ~0.8% at the midpoint we report).
 *
 *   v < 128:   index = v
 *   v >= 128:  m = floor(log2 v), shift = m - 6, top = v >> shift (64..127)
 *              index = (shift + 1) * 64 + (top - 64)
 */
#define HIST_SUB 64
#define HIST_BUCKETS (HIST_SUB * 60)

struct hist {
    uint64_t count[HIST_BUCKETS];
    uint64_t total;
    uint64_t max;
};

static unsigned
hist_index(uint64_t v)
{
    unsigned m;
    unsigned shift;
    unsigned idx;

    if (v < 2 * HIST_SUB) {
        return (unsigned)v;
    }
    m = 63 - (unsigned)__builtin_clzll(v);
    shift = m - 6;
    idx = (shift + 1) * HIST_SUB + (unsigned)((v >> shift) - HIST_SUB);
    return idx < HIST_BUCKETS ? idx : HIST_BUCKETS - 1;
}

/* Midpoint of a bucket: the value reported for every sample in it. */
static uint64_t
hist_value(unsigned idx)
{
    unsigned shift;
    uint64_t top;

    if (idx < 2 * HIST_SUB) {
        return idx;
    }
    shift = idx / HIST_SUB - 1;
    top = idx % HIST_SUB + HIST_SUB;
    return (top << shift) + ((1ull << shift) >> 1);
}

static void
hist_add(struct hist *h, uint64_t v)
{
    h->count[hist_index(v)]++;
    h->total++;
    if (v > h->max) {
        h->max = v;
    }
}

static void
hist_merge(struct hist *dst, const struct hist *src)
{
    for (unsigned i = 0; i < HIST_BUCKETS; i++) {
        dst->count[i] += src->count[i];
    }
    dst->total += src->total;
    if (src->max > dst->max) {
        dst->max = src->max;
    }
}

/* p in [0, 1]; never reports more than the exact maximum seen. */
static uint64_t
hist_pct(const struct hist *h, double p)
{
    uint64_t want;
    uint64_t seen = 0;

    if (h->total == 0) {
        return 0;
    }
    want = (uint64_t)ceil(p * (double)h->total);
    if (want == 0) {
        want = 1;
    }
    for (unsigned i = 0; i < HIST_BUCKETS; i++) {
        seen += h->count[i];
        if (seen >= want) {
            uint64_t v = hist_value(i);
            return v < h->max ? v : h->max;
        }
    }
    return h->max;
}

/* ----------------------------------------------------------------- keys */

static uint64_t
mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

/* splitmix64: small, fast, and good enough for picking keys. */
static uint64_t
rng_next(uint64_t *state)
{
    *state += 0x9e3779b97f4a7c15ull;
    return mix64(*state);
}

static double
rng_unit(uint64_t *state)
{
    return (double)(rng_next(state) >> 11) * (1.0 / 9007199254740992.0);
}

static uint32_t
vsize(uint64_t idx)
{
    uint32_t span = o.vmax - o.vmin + 1;

    if (span == 1) {
        return o.vmin;
    }
    return o.vmin + (uint32_t)(mix64(idx ^ 0x5bd1e995ull) % span);
}

static const char *
vbytes(uint64_t idx)
{
    return vpattern + idx % 64;
}

/* Writes prefix + decimal idx; returns the length.  No NUL. */
static size_t
key_format(char *dst, uint64_t idx)
{
    char digits[24];
    size_t plen = strlen(o.prefix);
    size_t n = 0;

    memcpy(dst, o.prefix, plen);
    do {
        digits[n++] = (char)('0' + idx % 10);
        idx /= 10;
    } while (idx != 0);
    for (size_t i = 0; i < n; i++) {
        dst[plen + i] = digits[n - 1 - i];
    }
    return plen + n;
}

/*
 * Zipf sampling by rejection-inversion (Hoermann and Derflinger, 1996):
 * O(1) memory, so a 20M-key space needs no CDF table.  H is an integral of
 * the density x^-s, Hinv its inverse; both are written with log1p/expm1 so
 * that s near 1 stays accurate.
 */
struct zipf {
    double s;
    double n;
    double hx1;
    double hn;
    double sv;
};

static double
zipf_expm1_over(double t)
{
    return fabs(t) > 1e-8 ? expm1(t) / t : 1.0 + t / 2.0;
}

static double
zipf_log1p_over(double t)
{
    return fabs(t) > 1e-8 ? log1p(t) / t : 1.0 - t / 2.0;
}

static double
zipf_h_int(const struct zipf *z, double x)
{
    double lx = log(x);

    return zipf_expm1_over((1.0 - z->s) * lx) * lx;
}

static double
zipf_h_inv(const struct zipf *z, double x)
{
    double t = x * (1.0 - z->s);

    if (t < -1.0) {
        t = -1.0;
    }
    return exp(zipf_log1p_over(t) * x);
}

static double
zipf_h(const struct zipf *z, double x)
{
    return exp(-z->s * log(x));
}

static void
zipf_init(struct zipf *z, double s, uint64_t n)
{
    z->s = s;
    z->n = (double)n;
    z->hx1 = zipf_h_int(z, 1.5) - 1.0;
    z->hn = zipf_h_int(z, z->n + 0.5);
    z->sv = 2.0 - zipf_h_inv(z, zipf_h_int(z, 2.5) - zipf_h(z, 2.0));
}

/* Returns a rank in [0, n); rank 0 is the most popular key. */
static uint64_t
zipf_next(const struct zipf *z, uint64_t *rng)
{
    for (;;) {
        double u = z->hn + rng_unit(rng) * (z->hx1 - z->hn);
        double x = zipf_h_inv(z, u);
        double k = floor(x + 0.5);

        if (k < 1.0) {
            k = 1.0;
        } else if (k > z->n) {
            k = z->n;
        }
        if (k - x <= z->sv || u >= zipf_h_int(z, k + 0.5) - zipf_h(z, k)) {
            return (uint64_t)k - 1;
        }
    }
}

/* ----------------------------------------------------------------- conn */

struct counters {
    uint64_t requests;
    uint64_t get_reqs;
    uint64_t get_keys;
    uint64_t hits;
    uint64_t misses;
    uint64_t sets;
    uint64_t errors;
    uint64_t timeouts;
    uint64_t conn_errors;
};

/* One request in flight.  keys points into the connection's key pool. */
struct req {
    uint64_t sent;
    uint64_t *keys;
    enum op op;
    int nkeys;
    int cur;            /* text get: next candidate; meta: next reply */
    int nhits;
    int nerrs;          /* meta: keys answered with an error line */
};

struct buf {
    char *data;
    size_t off;
    size_t len;
    size_t cap;
};

struct worker;

struct conn {
    struct worker *w;
    int fd;
    struct tls_client *tls;
    bool active;
    bool want_write;
    struct event *ev_read;
    struct event *ev_write;
    struct buf in;
    struct buf out;
    struct req *ring;
    uint64_t *keypool;
    int head;
    int inflight;
    uint16_t udp_id;    /* the next request's UDP request id */
};

struct worker {
    int id;
    pthread_t tid;
    struct event_base *base;
    struct conn *conns;
    int nconns;
    int active;
    enum phase phase;
    bool stopping;
    uint64_t budget;
    uint64_t seq_lo;
    uint64_t seq_hi;
    uint64_t seq_next;
    uint64_t rng;
    struct zipf zipf;
    struct event *ev_deadline;
    struct event *ev_grace;
    struct event *ev_stop;
    struct event *ev_pace;  /* --rate: lets the next requests out */
    uint64_t paced;         /* requests sent in the run under --rate */
    int stop_fd;        /* eventfd: the signal thread asks us to stop */
    uint64_t t_start;
    uint64_t t_last;    /* when the last reply of the phase was parsed */
    uint64_t pre_ns;
    struct counters run;
    struct counters pre;
    struct hist hist;
};

static pthread_barrier_t phase_barrier;
/* SIGINT/SIGTERM: stop sending, drain, and report what was measured. */
static atomic_bool interrupted;

static int
buf_reserve(struct buf *b, size_t need)
{
    size_t cap;
    char *p;

    if (b->off > 0 && (b->off == b->len || b->cap - b->len < need)) {
        memmove(b->data, b->data + b->off, b->len - b->off);
        b->len -= b->off;
        b->off = 0;
    }
    if (b->cap - b->len >= need) {
        return 0;
    }
    cap = b->cap ? b->cap : READ_CHUNK;
    while (cap - b->len < need) {
        cap *= 2;
    }
    p = realloc(b->data, cap);
    if (p == NULL) {
        return -1;
    }
    b->data = p;
    b->cap = cap;
    return 0;
}

static struct counters *
conn_counters(struct conn *c)
{
    return c->w->phase == PHASE_RUN ? &c->w->run : &c->w->pre;
}

static uint64_t
pick_key(struct worker *w)
{
    switch (w->phase == PHASE_PRELOAD ? DIST_SEQ : o.dist) {
    case DIST_ZIPF:
        return zipf_next(&w->zipf, &w->rng);
    case DIST_SEQ:
        if (w->seq_next >= w->seq_hi) {
            w->seq_next = w->seq_lo;
        }
        return w->seq_next++;
    case DIST_UNIFORM:
    default:
        return rng_next(&w->rng) % o.keys;
    }
}

/* A binary request header; the extras, key and value follow it. */
static char *
bin_header(char *p, uint8_t op, size_t keylen, uint8_t extlen,
           size_t bodylen)
{
    memset(p, 0, BIN_HDR);
    p[0] = (char)0x80;
    p[1] = (char)op;
    p[2] = (char)(keylen >> 8);
    p[3] = (char)keylen;
    p[4] = (char)extlen;
    p[8] = (char)(bodylen >> 24);
    p[9] = (char)(bodylen >> 16);
    p[10] = (char)(bodylen >> 8);
    p[11] = (char)bodylen;
    return p + BIN_HDR;
}

static int
put_set(struct buf *b, uint64_t idx)
{
    uint32_t n = vsize(idx);
    char *p;

    if (buf_reserve(b, MAX_KEY_LEN + 64 + n) < 0) {
        return -1;
    }
    p = b->data + b->len;
    if (o.proto == PROTO_BINARY) {
        char key[MAX_KEY_LEN + 24];
        size_t kl = key_format(key, idx);

        p = bin_header(p, BIN_SET, kl, 8, 8 + kl + n);
        memset(p, 0, 8);                /* flags and exptime */
        memcpy(p + 8, key, kl);
        memcpy(p + 8 + kl, vbytes(idx), n);
        b->len = (size_t)(p + 8 + kl + n - b->data);
        return 0;
    }
    if (o.proto == PROTO_TEXT) {
        memcpy(p, "set ", 4);
        p += 4;
        p += key_format(p, idx);
        p += sprintf(p, " 0 0 %" PRIu32 "\r\n", n);
    } else {
        memcpy(p, "ms ", 3);
        p += 3;
        p += key_format(p, idx);
        p += sprintf(p, " %" PRIu32 "\r\n", n);
    }
    memcpy(p, vbytes(idx), n);
    p += n;
    memcpy(p, "\r\n", 2);
    b->len = (size_t)(p + 2 - b->data);
    return 0;
}

static int
put_get(struct buf *b, const uint64_t *keys, int nkeys)
{
    char *p;

    if (buf_reserve(b, (size_t)(nkeys + 1) * (MAX_KEY_LEN + BIN_HDR + 24))
        < 0) {
        return -1;
    }
    p = b->data + b->len;
    if (o.proto == PROTO_BINARY) {
        /* One key: GETK.  More: GETKQ for each (misses are silent), then
         * NOOP, the binary multiget as libmemcached sends it. */
        for (int i = 0; i < nkeys; i++) {
            char key[MAX_KEY_LEN + 24];
            size_t kl = key_format(key, keys[i]);

            p = bin_header(p, nkeys == 1 ? BIN_GETK : BIN_GETKQ, kl, 0, kl);
            memcpy(p, key, kl);
            p += kl;
        }
        if (nkeys > 1) {
            p = bin_header(p, BIN_NOOP, 0, 0, 0);
        }
    } else if (o.proto == PROTO_TEXT) {
        memcpy(p, "get", 3);
        p += 3;
        for (int i = 0; i < nkeys; i++) {
            *p++ = ' ';
            p += key_format(p, keys[i]);
        }
        memcpy(p, "\r\n", 2);
        p += 2;
    } else {
        for (int i = 0; i < nkeys; i++) {
            memcpy(p, "mg ", 3);
            p += 3;
            p += key_format(p, keys[i]);
            memcpy(p, " v\r\n", 4);
            p += 4;
        }
    }
    b->len = (size_t)(p - b->data);
    return 0;
}

/* UDP: one request, framed, sent as a datagram of its own at once (the
 * out buffer is only where it is built). */
static int
udp_request(struct conn *c, bool get, const struct req *r)
{
    struct buf *b = &c->out;
    size_t start = b->len;
    char *f;
    int rc;

    if (buf_reserve(b, UDP_FRAME) < 0) {
        return -1;
    }
    b->len += UDP_FRAME;
    rc = get ? put_get(b, r->keys, r->nkeys) : put_set(b, r->keys[0]);
    if (rc < 0) {
        return -1;
    }
    f = b->data + start;
    memset(f, 0, UDP_FRAME);
    f[0] = (char)(c->udp_id >> 8);
    f[1] = (char)c->udp_id;
    f[5] = 1;                       /* one datagram */
    c->udp_id++;
    rc = send(c->fd, f, b->len - start, 0) < 0 ? -1 : 0;
    b->len = start;
    return rc;
}

/* UDP: take every datagram waiting, frames off, into the input.  0, or
 * -1 on a socket error. */
static int
udp_receive(struct conn *c)
{
    char d[UDP_READ_MAX];

    for (;;) {
        ssize_t n = recv(c->fd, d, sizeof(d), 0);

        if (n < 0) {
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
        }
        if (n <= UDP_FRAME || buf_reserve(&c->in, (size_t)n) < 0) {
            continue;
        }
        memcpy(c->in.data + c->in.len, d + UDP_FRAME, (size_t)n - UDP_FRAME);
        c->in.len += (size_t)n - UDP_FRAME;
    }
}

/* --rate: the run may have sent (now - start) * rate / threads by now. */
static bool
paced(const struct worker *w)
{
    return o.rate > 0 && w->phase == PHASE_RUN;
}

static bool
pace_allows(const struct worker *w)
{
    double due;

    if (!paced(w)) {
        return true;
    }
    due = (double)(now_ns() - w->t_start) * 1e-9 * o.rate / o.threads;
    return (double)w->paced < due;
}

static bool
may_send(struct conn *c)
{
    struct worker *w = c->w;

    return c->active && !w->stopping && w->budget > 0 &&
           c->inflight < o.depth && pace_allows(w);
}

/* Queue requests up to the pipeline depth; all share the send stamp. */
static int
conn_fill(struct conn *c, uint64_t stamp)
{
    struct worker *w = c->w;

    while (may_send(c)) {
        int slot = (c->head + c->inflight) % o.depth;
        struct req *r = &c->ring[slot];
        bool get = w->phase == PHASE_RUN && rng_unit(&w->rng) < o.get_ratio;
        int rc;

        r->sent = stamp;
        r->cur = 0;
        r->nhits = 0;
        r->nerrs = 0;
        r->op = get ? OP_GET : OP_SET;
        r->nkeys = get ? o.multiget : 1;
        for (int i = 0; i < r->nkeys; i++) {
            r->keys[i] = pick_key(w);
        }
        if (o.udp) {
            rc = udp_request(c, get, r);
        } else {
            rc = get ? put_get(&c->out, r->keys, r->nkeys)
                     : put_set(&c->out, r->keys[0]);
        }
        if (rc < 0) {
            return -1;
        }
        c->inflight++;
        w->budget--;
        w->paced += paced(w);
    }
    return 0;
}

static void conn_close(struct conn *c, bool failed);

static void
conn_flush(struct conn *c)
{
    struct buf *b = &c->out;

    while (b->off < b->len) {
        ssize_t n = c->tls ? tls_client_write(c->tls, b->data + b->off,
                                              b->len - b->off)
                           : write(c->fd, b->data + b->off, b->len - b->off);

        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                break;
            }
            conn_close(c, true);
            return;
        }
        b->off += (size_t)n;
    }
    if (b->off == b->len) {
        b->off = b->len = 0;
    }
    if ((b->off < b->len) != c->want_write) {
        c->want_write = b->off < b->len;
        if (c->want_write) {
            event_add(c->ev_write, NULL);
        } else {
            event_del(c->ev_write);
        }
    }
}

/* The worker's loop ends when its last connection goes idle or dies. */
static void
worker_conn_done(struct worker *w)
{
    w->active--;
    if (w->active == 0) {
        event_base_loopbreak(w->base);
    }
}

/* Retire an idle connection (keep the socket for the next phase). */
static void
conn_idle(struct conn *c)
{
    event_del(c->ev_read);
    event_del(c->ev_write);
    c->want_write = false;
    c->active = false;
    worker_conn_done(c->w);
}

static void
conn_close(struct conn *c, bool failed)
{
    struct counters *k = conn_counters(c);

    if (failed) {
        k->conn_errors++;
        k->errors += (uint64_t)c->inflight;
    }
    c->inflight = 0;
    event_del(c->ev_read);
    event_del(c->ev_write);
    close(c->fd);
    c->fd = -1;
    if (c->active) {
        c->active = false;
        worker_conn_done(c->w);
    }
}

/* ------------------------------------------------------- reply parsing */

enum parse { PARSE_DONE, PARSE_MORE, PARSE_BAD };

static bool
is_error_line(const char *line, size_t len)
{
    return (len == 5 && memcmp(line, "ERROR", 5) == 0) ||
           (len >= 6 && memcmp(line, "ERROR ", 6) == 0) ||
           (len >= 13 && memcmp(line, "CLIENT_ERROR ", 13) == 0) ||
           (len >= 12 && memcmp(line, "SERVER_ERROR", 12) == 0);
}

/* Key, size and bytes of a value block must be what we stored (a text
 * block with its "\r\n", a binary value alone). */
static bool
value_ok(uint64_t idx, const char *data, size_t n)
{
    if (n != vsize(idx)) {
        return false;
    }
    if (!o.verify) {
        return true;
    }
    return memcmp(data, vbytes(idx), n) == 0 &&
           (o.proto == PROTO_BINARY ||
            (data[n] == '\r' && data[n + 1] == '\n'));
}

static bool
key_is(uint64_t idx, const char *key, size_t klen)
{
    char want[MAX_KEY_LEN + 24];
    size_t n = key_format(want, idx);

    return n == klen && memcmp(want, key, n) == 0;
}

/*
 * Parses "<key> <flags> <bytes>" after "VALUE ".  Returns the byte count,
 * or -1 on a malformed line.
 */
static long
parse_value_line(const char *p, const char *end, const char **key,
                 size_t *klen)
{
    const char *sp = memchr(p, ' ', (size_t)(end - p));
    char *num_end;
    long n;

    if (sp == NULL) {
        return -1;
    }
    *key = p;
    *klen = (size_t)(sp - p);
    p = memchr(sp + 1, ' ', (size_t)(end - sp - 1));
    if (p == NULL) {
        return -1;
    }
    n = strtol(p + 1, &num_end, 10);
    if (num_end == p + 1 || n < 0 || (num_end != end && *num_end != ' ')) {
        return -1;
    }
    return n;
}

/* Finds which requested key (at or after r->cur) a VALUE line is for. */
static int
match_key(struct req *r, const char *key, size_t klen)
{
    for (int i = r->cur; i < r->nkeys; i++) {
        if (key_is(r->keys[i], key, klen)) {
            return i;
        }
    }
    return -1;
}

struct line {
    const char *p;      /* start of the line */
    size_t len;         /* without \r\n */
    size_t total;       /* with the line end */
    const char *rest;   /* bytes after the line */
    size_t avail;       /* how many of them are buffered */
};

static enum parse
parse_text_value(struct conn *c, struct req *r, const struct line *l,
                 size_t *used)
{
    struct counters *k = conn_counters(c);
    const char *key;
    size_t klen;
    long n = parse_value_line(l->p + 6, l->p + l->len, &key, &klen);
    int at;

    if (n < 0) {
        return PARSE_BAD;
    }
    if (l->avail < (size_t)n + 2) {
        return PARSE_MORE;
    }
    *used = l->total + (size_t)n + 2;
    at = match_key(r, key, klen);
    if (at < 0) {
        return PARSE_BAD;   /* a key we did not ask for: stream is lost */
    }
    r->cur = at + 1;
    /* a wrong value is still a hit to the server, and an error to us */
    r->nhits++;
    if (!value_ok(r->keys[at], l->rest, (size_t)n)) {
        k->errors++;
    }
    return PARSE_MORE;
}

/* One line of a text reply; PARSE_DONE when the request is answered. */
static enum parse
parse_text(struct conn *c, struct req *r, const struct line *l, size_t *used)
{
    struct counters *k = conn_counters(c);

    *used = l->total;
    if (r->op == OP_SET) {
        if (l->len == 6 && memcmp(l->p, "STORED", 6) == 0) {
            k->sets++;
        } else {
            k->errors++;
        }
        return PARSE_DONE;
    }
    if (l->len > 6 && memcmp(l->p, "VALUE ", 6) == 0) {
        *used = 0;
        return parse_text_value(c, r, l, used);
    }
    if (l->len == 3 && memcmp(l->p, "END", 3) == 0) {
        k->get_reqs++;
        k->get_keys += (uint64_t)r->nkeys;
        k->hits += (uint64_t)r->nhits;
        k->misses += (uint64_t)(r->nkeys - r->nhits);
        return PARSE_DONE;
    }
    if (is_error_line(l->p, l->len)) {
        k->errors++;
        return PARSE_DONE;
    }
    return PARSE_BAD;
}

static enum parse
parse_meta_value(struct conn *c, struct req *r, const struct line *l,
                 size_t *used)
{
    struct counters *k = conn_counters(c);
    char *end;
    long n = strtol(l->p + 3, &end, 10);

    if (end == l->p + 3 || n < 0 ||
        (end != l->p + l->len && *end != ' ')) {
        return PARSE_BAD;
    }
    if (l->avail < (size_t)n + 2) {
        *used = 0;
        return PARSE_MORE;
    }
    *used = l->total + (size_t)n + 2;
    r->nhits++;
    if (!value_ok(r->keys[r->cur], l->rest, (size_t)n)) {
        k->errors++;
    }
    return PARSE_DONE;
}

/* Called after each mg reply; counts the request once all are in. */
static enum parse
meta_get_step(struct counters *k, struct req *r)
{
    int answered;

    if (++r->cur < r->nkeys) {
        return PARSE_MORE;
    }
    /* a key answered with an error line is neither a hit nor a miss */
    answered = r->nkeys - r->nerrs;
    k->get_reqs++;
    k->get_keys += (uint64_t)answered;
    k->hits += (uint64_t)r->nhits;
    k->misses += (uint64_t)(answered - r->nhits);
    return PARSE_DONE;
}

/* One meta reply (to one mg or ms); a request of N mg needs N of them. */
static enum parse
parse_meta(struct conn *c, struct req *r, const struct line *l, size_t *used)
{
    struct counters *k = conn_counters(c);
    enum parse rc;

    *used = l->total;
    if (r->op == OP_SET) {
        if (l->len == 2 && memcmp(l->p, "HD", 2) == 0) {
            k->sets++;
        } else {
            k->errors++;
        }
        return PARSE_DONE;
    }
    if (l->len > 3 && memcmp(l->p, "VA ", 3) == 0) {
        rc = parse_meta_value(c, r, l, used);
        if (rc != PARSE_DONE) {
            return rc;
        }
    } else if (l->len == 2 && memcmp(l->p, "EN", 2) == 0) {
        /* a miss: counted below from nhits */
    } else if (is_error_line(l->p, l->len)) {
        k->errors++;
        r->nerrs++;
    } else {
        return PARSE_BAD;
    }
    return meta_get_step(k, r);
}

/* Splits the next line off the input; false if it is not complete yet. */
static bool
next_line(struct buf *b, struct line *l)
{
    size_t have = b->len - b->off;
    const char *p, *nl;

    /* Nothing buffered yet (a wake-up with no datagram): no buffer at
     * all, perhaps, and memchr() must not see its NULL. */
    if (have == 0) {
        return false;
    }
    p = b->data + b->off;
    nl = memchr(p, '\n', have);
    if (nl == NULL) {
        return false;
    }
    l->p = p;
    l->total = (size_t)(nl - p) + 1;
    l->len = l->total - 1;
    if (l->len > 0 && p[l->len - 1] == '\r') {
        l->len--;
    }
    l->rest = nl + 1;
    l->avail = have - l->total;
    return true;
}

static void
req_complete(struct conn *c, struct req *r, uint64_t now)
{
    struct counters *k = conn_counters(c);

    k->requests++;
    c->w->t_last = now;
    if (c->w->phase == PHASE_RUN) {
        hist_add(&c->w->hist, now > r->sent ? now - r->sent : 0);
    }
    c->head = (c->head + 1) % o.depth;
    c->inflight--;
}

static uint32_t
be32(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;

    return (uint32_t)u[0] << 24 | (uint32_t)u[1] << 16 |
           (uint32_t)u[2] << 8 | u[3];
}

/* One binary reply packet (header and body all buffered). */
static enum parse
parse_binary(struct conn *c, struct req *r, const char *p)
{
    struct counters *k = conn_counters(c);
    uint8_t op = (uint8_t)p[1], ext = (uint8_t)p[4];
    uint16_t kl = (uint16_t)((uint8_t)p[2] << 8 | (uint8_t)p[3]);
    uint16_t status = (uint16_t)((uint8_t)p[6] << 8 | (uint8_t)p[7]);
    uint32_t body = be32(p + 8);
    int at;

    if ((uint8_t)p[0] != 0x81 || (uint32_t)ext + kl > body) {
        return PARSE_BAD;
    }
    if (r->op == OP_SET) {
        if (op != BIN_SET) {
            return PARSE_BAD;
        }
        if (status == 0) {
            k->sets++;
        } else {
            k->errors++;
        }
        return PARSE_DONE;
    }
    if (op == BIN_NOOP || (op == BIN_GETK && r->nkeys == 1 && status != 0)) {
        if (status != 0 && status != 1) {
            k->errors++;
            return PARSE_DONE;
        }
        k->get_reqs++;
        k->get_keys += (uint64_t)r->nkeys;
        k->hits += (uint64_t)r->nhits;
        k->misses += (uint64_t)(r->nkeys - r->nhits);
        return PARSE_DONE;
    }
    if ((op != BIN_GETK && op != BIN_GETKQ) || status != 0 || ext != 4) {
        return PARSE_BAD;
    }
    at = match_key(r, p + BIN_HDR + ext, kl);
    if (at < 0) {
        return PARSE_BAD;
    }
    r->cur = at + 1;
    r->nhits++;
    if (!value_ok(r->keys[at], p + BIN_HDR + ext + kl, body - ext - kl)) {
        k->errors++;
    }
    if (r->nkeys == 1) {
        k->get_reqs++;
        k->get_keys++;
        k->hits++;
        return PARSE_DONE;
    }
    return PARSE_MORE;
}

/* The binary form of conn_parse(): whole packets off the input. */
static int
conn_parse_binary(struct conn *c, uint64_t now)
{
    struct buf *b = &c->in;

    while (c->inflight > 0 && b->len - b->off >= BIN_HDR) {
        const char *p = b->data + b->off;
        size_t need = BIN_HDR + (size_t)be32(p + 8);
        struct req *r = &c->ring[c->head];
        enum parse rc;

        if (need > (size_t)o.vmax + MAX_KEY_LEN + 4 + BIN_HDR + MAX_LINE) {
            conn_counters(c)->errors++;
            return -1;      /* no reply of ours is that long */
        }
        if (b->len - b->off < need) {
            break;
        }
        rc = parse_binary(c, r, p);
        if (rc == PARSE_BAD) {
            conn_counters(c)->errors++;
            return -1;
        }
        b->off += need;
        if (rc == PARSE_DONE) {
            req_complete(c, r, now);
        }
    }
    if (c->inflight == 0 && b->off < b->len) {
        conn_counters(c)->errors++;     /* bytes nobody asked for */
        return -1;
    }
    return 0;
}

/* Consumes every complete reply; -1 when the stream cannot be trusted. */
static int
conn_parse(struct conn *c, uint64_t now)
{
    struct line l;

    if (o.proto == PROTO_BINARY) {
        return conn_parse_binary(c, now);
    }

    while (c->inflight > 0 && next_line(&c->in, &l)) {
        struct req *r = &c->ring[c->head];
        size_t used = 0;
        enum parse rc = o.proto == PROTO_TEXT ? parse_text(c, r, &l, &used)
                                              : parse_meta(c, r, &l, &used);

        if (rc == PARSE_BAD) {
            conn_counters(c)->errors++;
            return -1;
        }
        if (used == 0) {
            break;      /* a value block is still on its way */
        }
        c->in.off += used;
        if (rc == PARSE_DONE) {
            req_complete(c, r, now);
        }
    }
    if (c->inflight == 0 && c->in.off < c->in.len) {
        conn_counters(c)->errors++;     /* bytes nobody asked for */
        return -1;
    }
    if (c->in.len - c->in.off > MAX_LINE &&
        memchr(c->in.data + c->in.off, '\n', MAX_LINE) == NULL) {
        return -1;
    }
    return 0;
}

/* After replies: top the pipeline up, or retire the connection. */
static void
conn_advance(struct conn *c)
{
    if (c->fd < 0) {
        return;
    }
    if (conn_fill(c, now_ns()) < 0) {
        conn_close(c, true);
        return;
    }
    if (c->inflight == 0) {
        struct worker *w = c->w;

        if (paced(w) && !w->stopping && w->budget > 0) {
            return;             /* the pace timer lets the next out */
        }
        conn_idle(c);
        return;
    }
    conn_flush(c);
}

/* --rate, every millisecond: each connection sends what the rate has let
 * out by now, up to its depth. */
static void
on_pace(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;

    (void)fd;
    (void)what;
    for (int i = 0; i < w->nconns; i++) {
        struct conn *c = &w->conns[i];

        if (c->active && c->inflight < o.depth) {
            conn_advance(c);
        }
    }
}

static void
on_read(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    ssize_t n;

    (void)what;
    if (o.udp) {
        if (udp_receive(c) < 0) {
            conn_close(c, true);
            return;
        }
    } else {
        do {
            if (buf_reserve(&c->in, READ_CHUNK) < 0) {
                conn_close(c, true);
                return;
            }
            n = c->tls ? tls_client_read(c->tls, c->in.data + c->in.len,
                                         c->in.cap - c->in.len)
                       : read(fd, c->in.data + c->in.len,
                              c->in.cap - c->in.len);
            if (n <= 0) {
                if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
                    break;
                }
                conn_close(c, true);
                return;
            }
            c->in.len += (size_t)n;
        } while (c->tls && tls_client_pending(c->tls));
    }
    if (conn_parse(c, now_ns()) < 0) {
        conn_close(c, true);
        return;
    }
    conn_advance(c);
}

static void
on_write(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    conn_flush(arg);
}

static int
conn_connect(struct conn *c)
{
    int fd = socket(AF_INET, o.udp ? SOCK_DGRAM : SOCK_STREAM, 0);
    int one = 1;

    if (fd < 0) {
        return -1;
    }
    if (connect(fd, (struct sockaddr *)&o.addr, sizeof(o.addr)) < 0) {
        close(fd);
        return -1;
    }
    if (!o.udp) {
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    if (o.tls && (c->tls = tls_client_connect(fd)) == NULL) {
        close(fd);
        errno = EPROTO;
        return -1;
    }
    if (evutil_make_socket_nonblocking(fd) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int
conn_init(struct conn *c, struct worker *w)
{
    c->w = w;
    c->fd = conn_connect(c);
    if (c->fd < 0) {
        fprintf(stderr, "mcload: connect to %s: %s\n", o.server,
                strerror(errno));
        return -1;
    }
    c->ring = calloc((size_t)o.depth, sizeof(*c->ring));
    c->keypool = calloc((size_t)o.depth * (size_t)o.multiget,
                        sizeof(*c->keypool));
    c->ev_read = event_new(w->base, c->fd, EV_READ | EV_PERSIST, on_read, c);
    c->ev_write = event_new(w->base, c->fd, EV_WRITE | EV_PERSIST,
                            on_write, c);
    if (c->ring == NULL || c->keypool == NULL || c->ev_read == NULL ||
        c->ev_write == NULL) {
        return -1;
    }
    for (int i = 0; i < o.depth; i++) {
        c->ring[i].keys = c->keypool + (size_t)i * (size_t)o.multiget;
    }
    return 0;
}

static void
conn_free(struct conn *c)
{
    tls_client_free(c->tls);
    c->tls = NULL;
    if (c->fd >= 0) {
        close(c->fd);
    }
    if (c->ev_read != NULL) {
        event_free(c->ev_read);
    }
    if (c->ev_write != NULL) {
        event_free(c->ev_write);
    }
    free(c->ring);
    free(c->keypool);
    free(c->in.data);
    free(c->out.data);
}

/* --------------------------------------------------------------- worker */

static void
on_grace(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;

    (void)fd;
    (void)what;
    for (int i = 0; i < w->nconns; i++) {
        struct conn *c = &w->conns[i];

        if (c->active) {
            conn_counters(c)->timeouts += (uint64_t)c->inflight;
            conn_close(c, false);
        }
    }
}

/* Time is up: send nothing more, give the replies in flight a grace. */
static void
on_deadline(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;
    struct timeval grace = { DRAIN_GRACE_SEC, 0 };

    (void)fd;
    (void)what;
    w->stopping = true;
    evtimer_add(w->ev_grace, &grace);
    for (int i = 0; i < w->nconns; i++) {
        if (w->conns[i].active && w->conns[i].inflight == 0) {
            conn_idle(&w->conns[i]);
        }
    }
}

static void
on_stop(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;
    uint64_t n;

    (void)what;
    if (read(fd, &n, sizeof(n)) < 0 && errno != EAGAIN) {
        return;
    }
    if (!w->stopping) {
        on_deadline(-1, 0, w);
    }
}

static void
share(uint64_t total, int parts, int i, uint64_t *lo, uint64_t *hi)
{
    uint64_t each = total / (uint64_t)parts;
    uint64_t extra = total % (uint64_t)parts;
    uint64_t ui = (uint64_t)i;

    *lo = ui * each + (ui < extra ? ui : extra);
    *hi = *lo + each + (ui < extra ? 1 : 0);
}

static void
phase_setup(struct worker *w, enum phase ph)
{
    uint64_t lo;
    uint64_t hi;

    w->phase = ph;
    w->stopping = false;
    share(o.keys, o.threads, w->id, &w->seq_lo, &w->seq_hi);
    w->seq_next = w->seq_lo;
    if (ph == PHASE_PRELOAD) {
        w->budget = w->seq_hi - w->seq_lo;
    } else if (atomic_load(&interrupted)) {
        w->budget = 0;
    } else if (o.requests > 0) {
        share(o.requests, o.threads, w->id, &lo, &hi);
        w->budget = hi - lo;
    } else {
        w->budget = UINT64_MAX;
    }
}

/* Runs one phase to its end: budget spent, or deadline plus drain. */
static void
phase_run(struct worker *w, enum phase ph)
{
    phase_setup(w, ph);
    w->active = 0;
    w->t_start = now_ns();
    w->t_last = w->t_start;
    for (int i = 0; i < w->nconns; i++) {
        struct conn *c = &w->conns[i];

        if (c->fd < 0) {
            continue;
        }
        c->active = true;
        w->active++;
        event_add(c->ev_read, NULL);
    }
    if (ph == PHASE_RUN && o.duration > 0) {
        struct timeval tv;

        tv.tv_sec = (time_t)o.duration;
        tv.tv_usec = (suseconds_t)((o.duration - (double)tv.tv_sec) * 1e6);
        evtimer_add(w->ev_deadline, &tv);
    }
    event_add(w->ev_stop, NULL);
    w->paced = 0;
    if (paced(w)) {
        struct timeval ms = { 0, 1000 };

        event_add(w->ev_pace, &ms);
    }
    for (int i = 0; i < w->nconns; i++) {
        if (w->conns[i].active) {
            conn_advance(&w->conns[i]);
        }
    }
    if (w->active > 0) {
        event_base_dispatch(w->base);
    }
    evtimer_del(w->ev_deadline);
    evtimer_del(w->ev_grace);
    event_del(w->ev_stop);
    event_del(w->ev_pace);
}

static void
worker_pin(struct worker *w)
{
    cpu_set_t set;

    if (o.ncpus == 0) {
        return;
    }
    CPU_ZERO(&set);
    CPU_SET(o.cpus[w->id % o.ncpus], &set);
    if (sched_setaffinity(0, sizeof(set), &set) < 0) {
        fprintf(stderr, "mcload: pin to cpu %d: %s\n",
                o.cpus[w->id % o.ncpus], strerror(errno));
    }
}

static void *
worker_main(void *arg)
{
    struct worker *w = arg;

    worker_pin(w);
    if (o.preload) {
        phase_run(w, PHASE_PRELOAD);
        w->pre_ns = w->t_last - w->t_start;
    }
    pthread_barrier_wait(&phase_barrier);
    phase_run(w, PHASE_RUN);
    return NULL;
}

static int
worker_init(struct worker *w, int id)
{
    uint64_t lo;
    uint64_t hi;

    w->id = id;
    w->stop_fd = -1;
    w->rng = mix64(o.seed + (uint64_t)id * 0x9e3779b97f4a7c15ull);
    if (o.dist == DIST_ZIPF) {
        zipf_init(&w->zipf, o.zipf_s, o.keys);
    }
    share((uint64_t)o.conns, o.threads, id, &lo, &hi);
    w->nconns = (int)(hi - lo);
    w->base = event_base_new();
    w->conns = calloc((size_t)w->nconns, sizeof(*w->conns));
    if (w->base == NULL || w->conns == NULL) {
        return -1;
    }
    w->ev_deadline = evtimer_new(w->base, on_deadline, w);
    w->ev_grace = evtimer_new(w->base, on_grace, w);
    w->ev_pace = event_new(w->base, -1, EV_PERSIST, on_pace, w);
    w->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w->ev_deadline == NULL || w->ev_grace == NULL ||
        w->ev_pace == NULL || w->stop_fd < 0) {
        return -1;
    }
    w->ev_stop = event_new(w->base, w->stop_fd, EV_READ | EV_PERSIST,
                           on_stop, w);
    if (w->ev_stop == NULL) {
        return -1;
    }
    for (int i = 0; i < w->nconns; i++) {
        w->conns[i].fd = -1;
    }
    for (int i = 0; i < w->nconns; i++) {
        if (conn_init(&w->conns[i], w) < 0) {
            return -1;
        }
    }
    return 0;
}

static void
worker_free(struct worker *w)
{
    if (w->conns != NULL) {
        for (int i = 0; i < w->nconns; i++) {
            conn_free(&w->conns[i]);
        }
        free(w->conns);
    }
    if (w->ev_deadline != NULL) {
        event_free(w->ev_deadline);
    }
    if (w->ev_grace != NULL) {
        event_free(w->ev_grace);
    }
    if (w->ev_pace != NULL) {
        event_free(w->ev_pace);
    }
    if (w->ev_stop != NULL) {
        event_free(w->ev_stop);
    }
    if (w->stop_fd >= 0) {
        close(w->stop_fd);
    }
    if (w->base != NULL) {
        event_base_free(w->base);
    }
}

/* --------------------------------------------------------------- report */

struct report {
    struct counters run;
    struct counters pre;
    struct hist *hist;
    double seconds;
    double pre_seconds;
};

static void
counters_add(struct counters *d, const struct counters *s)
{
    d->requests += s->requests;
    d->get_reqs += s->get_reqs;
    d->get_keys += s->get_keys;
    d->hits += s->hits;
    d->misses += s->misses;
    d->sets += s->sets;
    d->errors += s->errors;
    d->timeouts += s->timeouts;
    d->conn_errors += s->conn_errors;
}

static void
report_gather(struct report *rep, struct worker *ws)
{
    uint64_t t0 = UINT64_MAX;
    uint64_t t1 = 0;
    uint64_t pre_ns = 0;

    for (int i = 0; i < o.threads; i++) {
        struct worker *w = &ws[i];

        counters_add(&rep->run, &w->run);
        pre_ns = w->pre_ns > pre_ns ? w->pre_ns : pre_ns;
        counters_add(&rep->pre, &w->pre);
        hist_merge(rep->hist, &w->hist);
        t0 = w->t_start < t0 ? w->t_start : t0;
        t1 = w->t_last > t1 ? w->t_last : t1;
    }
    rep->seconds = t1 > t0 ? (double)(t1 - t0) / 1e9 : 0.0;
    rep->pre_seconds = (double)pre_ns / 1e9;
}

static double
us(uint64_t ns)
{
    return (double)ns / 1000.0;
}

static double
rate(uint64_t n, double secs)
{
    return secs > 0 ? (double)n / secs : 0.0;
}

static void
report_text(const struct report *r)
{
    const struct counters *k = &r->run;
    const struct hist *h = r->hist;

    if (o.preload) {
        printf("preload:  %" PRIu64 " sets in %.2f s, %" PRIu64
               " errors\n", r->pre.sets, r->pre_seconds, r->pre.errors);
    }
    printf("server:   %s  proto %s  conns %d  depth %d  threads %d",
           o.server, proto_names[o.proto], o.conns, o.depth, o.threads);
    if (o.rate > 0) {
        printf("  rate %.0f/s", o.rate);
    }
    printf("\n");
    printf("run:      %.2f s, %" PRIu64 " requests, %.0f ops/s, "
           "%.0f keys/s\n", r->seconds, k->requests,
           rate(k->requests, r->seconds),
           rate(k->get_keys + k->sets, r->seconds));
    printf("gets:     %" PRIu64 " requests, %" PRIu64 " keys, %" PRIu64
           " hits, %" PRIu64 " misses\n", k->get_reqs, k->get_keys,
           k->hits, k->misses);
    printf("sets:     %" PRIu64 "\n", k->sets);
    printf("errors:   %" PRIu64 " (timeouts %" PRIu64 ", connection "
           "errors %" PRIu64 ")\n", k->errors + k->timeouts, k->timeouts,
           k->conn_errors);
    printf("latency:  p50 %.1f us  p90 %.1f us  p99 %.1f us  "
           "p99.9 %.1f us  max %.1f us\n", us(hist_pct(h, 0.50)),
           us(hist_pct(h, 0.90)), us(hist_pct(h, 0.99)),
           us(hist_pct(h, 0.999)), us(h->max));
    printf("stall:    longest %.3f ms\n", (double)h->max / 1e6);
}

static void
report_json(const struct report *r)
{
    const struct counters *k = &r->run;
    const struct hist *h = r->hist;

    printf("{\"server\": \"%s\", \"proto\": \"%s\", \"conns\": %d, "
           "\"depth\": %d, \"threads\": %d, \"multiget\": %d, "
           "\"keys\": %" PRIu64 ", \"rate\": %.0f,\n", o.server,
           proto_names[o.proto], o.conns, o.depth, o.threads, o.multiget,
           o.keys, o.rate);
    printf(" \"preload_sets\": %" PRIu64 ", \"preload_errors\": %" PRIu64
           ", \"preload_seconds\": %.3f,\n", r->pre.sets, r->pre.errors,
           r->pre_seconds);
    printf(" \"seconds\": %.3f, \"requests\": %" PRIu64 ", \"ops_per_sec\": "
           "%.1f, \"get_requests\": %" PRIu64 ", \"gets\": %" PRIu64
           ", \"hits\": %" PRIu64 ", \"misses\": %" PRIu64 ", \"sets\": %"
           PRIu64 ",\n", r->seconds, k->requests,
           rate(k->requests, r->seconds), k->get_reqs, k->get_keys,
           k->hits, k->misses, k->sets);
    printf(" \"errors\": %" PRIu64 ", \"timeouts\": %" PRIu64
           ", \"conn_errors\": %" PRIu64 ",\n", k->errors + k->timeouts,
           k->timeouts, k->conn_errors);
    printf(" \"latency_us\": {\"p50\": %.1f, \"p90\": %.1f, \"p99\": %.1f, "
           "\"p999\": %.1f, \"max\": %.1f},\n", us(hist_pct(h, 0.50)),
           us(hist_pct(h, 0.90)), us(hist_pct(h, 0.99)),
           us(hist_pct(h, 0.999)), us(h->max));
    printf(" \"max_stall_ms\": %.3f}\n", (double)h->max / 1e6);
}

/* -------------------------------------------------------------- options */

static void
usage(FILE *f)
{
    fprintf(f,
        "usage: mcload [options]\n"
        "  --server HOST:PORT   loopback only (default 127.0.0.1:11211)\n"
        "  -c, --conns N        connections (default 50)\n"
        "  -d, --depth N        requests in flight per connection (1)\n"
        "  -t, --threads N      threads, each with its own event base (1)\n"
        "  --get-ratio F        share of requests that are gets (0.9)\n"
        "  --multiget N         keys per get request (1)\n"
        "  --keys N             key-space size (100000)\n"
        "  --dist D             uniform | zipf | seq (uniform)\n"
        "  --zipf-s F           zipf exponent (0.99)\n"
        "  --key-prefix S       key prefix (\"key:\")\n"
        "  --value-size N|A-B   value bytes, fixed or per-key range (32)\n"
        "  --duration SEC       stop after this long (10; 0 = no limit)\n"
        "  --rate N             requests a second in the run, at most (0: as\n"
        "                       fast as replies come back)\n"
        "  --requests N         stop after N requests (10000000; 0 = none)\n"
        "  --proto P            text | meta | binary (text)\n"
        "  --preload            set every key once first, pipelined\n"
        "  --udp                requests over UDP to the server's -U port,\n"
        "                       each in a datagram (text or binary)\n"
        "  --tls                TLS on every connection (any certificate)\n"
        "  --no-verify          check value sizes only, not value bytes\n"
        "  --cpu LIST           pin threads, round robin (e.g. 0 or 0,2-3)\n"
        "  --seed N             random seed (1)\n"
        "  --json               print one JSON object\n"
        "SIGINT/SIGTERM end the run early; the report is still printed.\n"
        "Exit status: 0 ok, 1 bad usage or setup, 2 the run saw errors.\n");
}

static int
parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    char *end;
    unsigned long long v;

    if (*s == '-' || *s == '\0') {
        return -1;
    }
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max) {
        return -1;
    }
    *out = v;
    return 0;
}

static int
parse_int(const char *s, int min, int max, int *out)
{
    uint64_t v;

    if (parse_u64(s, (uint64_t)min, (uint64_t)max, &v) < 0) {
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int
parse_double(const char *s, double min, double max, double *out)
{
    char *end;
    double v;

    errno = 0;
    v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !(v >= min && v <= max)) {
        return -1;
    }
    *out = v;
    return 0;
}

static int
parse_vsize(const char *s)
{
    char tmp[64];
    char *dash;
    uint64_t lo;
    uint64_t hi;

    if (strlen(s) >= sizeof(tmp)) {
        return -1;
    }
    strcpy(tmp, s);
    dash = strchr(tmp, '-');
    if (dash != NULL) {
        *dash = '\0';
    }
    if (parse_u64(tmp, 1, 64u << 20, &lo) < 0) {
        return -1;
    }
    hi = lo;
    if (dash != NULL && parse_u64(dash + 1, lo, 64u << 20, &hi) < 0) {
        return -1;
    }
    o.vmin = (uint32_t)lo;
    o.vmax = (uint32_t)hi;
    return 0;
}

static int
parse_cpus(const char *s)
{
    char *copy = strdup(s);
    char *save = NULL;
    int rc = -1;

    if (copy == NULL) {
        return -1;
    }
    o.ncpus = 0;
    for (char *t = strtok_r(copy, ",", &save); t != NULL;
         t = strtok_r(NULL, ",", &save)) {
        int a;
        int b;
        char *dash = strchr(t, '-');

        if (dash != NULL) {
            *dash = '\0';
        }
        if (parse_int(t, 0, CPU_SETSIZE - 1, &a) < 0 ||
            parse_int(dash ? dash + 1 : t, a, CPU_SETSIZE - 1, &b) < 0) {
            goto out;
        }
        for (int cpu = a; cpu <= b && o.ncpus < MAX_CPUS; cpu++) {
            o.cpus[o.ncpus++] = cpu;
        }
    }
    rc = o.ncpus > 0 ? 0 : -1;
out:
    free(copy);
    return rc;
}

/* Only loopback: this tool must never be pointed at someone else. */
static int
parse_server(const char *s)
{
    char host[64];
    const char *colon = strrchr(s, ':');
    int port;

    if (colon == NULL || (size_t)(colon - s) >= sizeof(host) ||
        parse_int(colon + 1, 1, 65535, &port) < 0) {
        return -1;
    }
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    if (strcmp(host, "localhost") == 0) {
        strcpy(host, "127.0.0.1");
    }
    memset(&o.addr, 0, sizeof(o.addr));
    o.addr.sin_family = AF_INET;
    o.addr.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &o.addr.sin_addr) != 1) {
        return -1;
    }
    if ((ntohl(o.addr.sin_addr.s_addr) >> 24) != 127) {
        fprintf(stderr, "mcload: %s is not a loopback address\n", host);
        return -1;
    }
    o.server = s;
    return 0;
}

enum {
    OPT_SERVER = 256, OPT_GET_RATIO, OPT_MULTIGET, OPT_KEYS, OPT_DIST,
    OPT_ZIPF_S, OPT_PREFIX, OPT_VSIZE, OPT_DURATION, OPT_RATE, OPT_REQUESTS,
    OPT_PROTO, OPT_PRELOAD, OPT_NO_VERIFY, OPT_CPU, OPT_SEED, OPT_JSON,
    OPT_UDP, OPT_TLS, OPT_HELP
};

static const struct option long_opts[] = {
    { "server", required_argument, NULL, OPT_SERVER },
    { "conns", required_argument, NULL, 'c' },
    { "depth", required_argument, NULL, 'd' },
    { "threads", required_argument, NULL, 't' },
    { "get-ratio", required_argument, NULL, OPT_GET_RATIO },
    { "multiget", required_argument, NULL, OPT_MULTIGET },
    { "keys", required_argument, NULL, OPT_KEYS },
    { "dist", required_argument, NULL, OPT_DIST },
    { "zipf-s", required_argument, NULL, OPT_ZIPF_S },
    { "key-prefix", required_argument, NULL, OPT_PREFIX },
    { "value-size", required_argument, NULL, OPT_VSIZE },
    { "duration", required_argument, NULL, OPT_DURATION },
    { "rate", required_argument, NULL, OPT_RATE },
    { "requests", required_argument, NULL, OPT_REQUESTS },
    { "proto", required_argument, NULL, OPT_PROTO },
    { "preload", no_argument, NULL, OPT_PRELOAD },
    { "no-verify", no_argument, NULL, OPT_NO_VERIFY },
    { "cpu", required_argument, NULL, OPT_CPU },
    { "seed", required_argument, NULL, OPT_SEED },
    { "json", no_argument, NULL, OPT_JSON },
    { "udp", no_argument, NULL, OPT_UDP },
    { "tls", no_argument, NULL, OPT_TLS },
    { "help", no_argument, NULL, OPT_HELP },
    { NULL, 0, NULL, 0 }
};

static int
parse_enum(const char *s, const char *a, const char *b, const char *c)
{
    if (strcmp(s, a) == 0) {
        return 0;
    }
    if (strcmp(s, b) == 0) {
        return 1;
    }
    if (c != NULL && strcmp(s, c) == 0) {
        return 2;
    }
    return -1;
}

/* One option; returns -1 on a bad value, 1 for --help. */
static int
parse_one(int ch, const char *arg)
{
    int v;

    switch (ch) {
    case OPT_SERVER: return parse_server(arg);
    case 'c': return parse_int(arg, 1, 100000, &o.conns);
    case 'd': return parse_int(arg, 1, MAX_DEPTH, &o.depth);
    case 't': return parse_int(arg, 1, 1024, &o.threads);
    case OPT_GET_RATIO: return parse_double(arg, 0, 1, &o.get_ratio);
    case OPT_MULTIGET: return parse_int(arg, 1, MAX_MULTIGET, &o.multiget);
    case OPT_KEYS: return parse_u64(arg, 1, UINT64_MAX / 2, &o.keys);
    case OPT_ZIPF_S: return parse_double(arg, 0.01, 10, &o.zipf_s);
    case OPT_VSIZE: return parse_vsize(arg);
    case OPT_DURATION: return parse_double(arg, 0, 1e6, &o.duration);
    case OPT_RATE: return parse_double(arg, 0, 1e9, &o.rate);
    case OPT_REQUESTS: return parse_u64(arg, 0, UINT64_MAX, &o.requests);
    case OPT_CPU: return parse_cpus(arg);
    case OPT_SEED: return parse_u64(arg, 0, UINT64_MAX, &o.seed);
    case OPT_PRELOAD: o.preload = true; return 0;
    case OPT_NO_VERIFY: o.verify = false; return 0;
    case OPT_JSON: o.json = true; return 0;
    case OPT_UDP: o.udp = true; return 0;
    case OPT_TLS: o.tls = true; return 0;
    case OPT_HELP: return 1;
    case OPT_PREFIX:
        o.prefix = arg;
        return strlen(arg) <= 200 && strpbrk(arg, " \r\n") == NULL ? 0 : -1;
    case OPT_DIST:
        v = parse_enum(arg, "uniform", "zipf", "seq");
        o.dist = (enum dist)v;
        return v < 0 ? -1 : 0;
    case OPT_PROTO:
        v = parse_enum(arg, "text", "meta", "binary");
        o.proto = (enum proto)v;
        return v < 0 ? -1 : 0;
    default: return -1;
    }
}

static void
opts_defaults(void)
{
    o.conns = 50;
    o.depth = 1;
    o.threads = 1;
    o.get_ratio = 0.9;
    o.multiget = 1;
    o.keys = 100000;
    o.dist = DIST_UNIFORM;
    o.zipf_s = 0.99;
    o.prefix = "key:";
    o.vmin = o.vmax = 32;
    o.duration = 10;
    o.requests = 10000000;
    o.proto = PROTO_TEXT;
    o.verify = true;
    o.seed = 1;
}

static int
opts_parse(int argc, char **argv)
{
    int ch;

    opts_defaults();
    if (parse_server("127.0.0.1:11211") < 0) {
        return -1;
    }
    while ((ch = getopt_long(argc, argv, "c:d:t:h", long_opts, NULL)) != -1) {
        int rc = ch == 'h' ? 1 : parse_one(ch, optarg);

        if (rc == 1) {
            usage(stdout);
            exit(0);
        }
        if (rc < 0) {
            if (ch != '?') {
                fprintf(stderr, "mcload: bad value '%s'\n",
                        optarg ? optarg : "");
            }
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "mcload: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    if (o.duration <= 0 && o.requests == 0) {
        fprintf(stderr, "mcload: --duration 0 needs --requests N > 0\n");
        return -1;
    }
    if (o.threads > o.conns) {
        o.threads = o.conns;
    }
    if (o.tls && o.udp) {
        fprintf(stderr, "mcload: --tls is for TCP, not --udp\n");
        return -1;
    }
    return 0;
}

/* --------------------------------------------------------------- main */

static int
pattern_init(void)
{
    static const char alphabet[] =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_";

    vpattern = malloc((size_t)o.vmax + 64);
    if (vpattern == NULL) {
        return -1;
    }
    for (size_t i = 0; i < (size_t)o.vmax + 64; i++) {
        vpattern[i] = alphabet[(i * 7 + i / 64) % 64];
    }
    return 0;
}

struct sigctx {
    sigset_t set;
    struct worker *ws;
    atomic_bool finished;   /* set before the last, self-sent signal */
};

/* Turns SIGINT/SIGTERM into a stop request on every worker's eventfd. */
static void *
signal_main(void *arg)
{
    struct sigctx *sc = arg;
    uint64_t one = 1;
    int sig;

    while (sigwait(&sc->set, &sig) == 0) {
        if (atomic_load(&sc->finished)) {
            break;
        }
        atomic_store(&interrupted, true);
        for (int i = 0; i < o.threads; i++) {
            if (write(sc->ws[i].stop_fd, &one, sizeof(one)) < 0) {
                perror("mcload: eventfd");
            }
        }
    }
    return NULL;
}

static int
run(struct worker *ws, struct report *rep)
{
    struct sigctx sc = { .ws = ws };
    pthread_t sigtid;
    int started = 0;
    int rc = -1;

    if (pthread_barrier_init(&phase_barrier, NULL, (unsigned)o.threads)) {
        return -1;
    }
    for (int i = 0; i < o.threads; i++) {
        if (worker_init(&ws[i], i) < 0) {
            goto out;
        }
    }
    /* block the signals everywhere; only signal_main takes them */
    sigemptyset(&sc.set);
    sigaddset(&sc.set, SIGINT);
    sigaddset(&sc.set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sc.set, NULL);
    if (pthread_create(&sigtid, NULL, signal_main, &sc) != 0) {
        goto out;
    }
    for (; started < o.threads; started++) {
        if (pthread_create(&ws[started].tid, NULL, worker_main,
                           &ws[started]) != 0) {
            /* the barrier would never open: nothing sane to do */
            fprintf(stderr, "mcload: cannot start thread\n");
            exit(1);
        }
    }
    for (int i = 0; i < started; i++) {
        pthread_join(ws[i].tid, NULL);
    }
    /* cancellation would do, but ASan cannot unwind out of sigwait */
    atomic_store(&sc.finished, true);
    pthread_kill(sigtid, SIGTERM);
    pthread_join(sigtid, NULL);
    report_gather(rep, ws);
    rc = 0;
out:
    pthread_barrier_destroy(&phase_barrier);
    return rc;
}

int
main(int argc, char **argv)
{
    struct worker *ws = NULL;
    struct report rep;
    int rc = 1;

    memset(&rep, 0, sizeof(rep));
    if (opts_parse(argc, argv) < 0) {
        fprintf(stderr, "mcload: see mcload --help\n");
        return 1;
    }
    ws = calloc((size_t)o.threads, sizeof(*ws));
    rep.hist = calloc(1, sizeof(*rep.hist));
    if (ws == NULL || rep.hist == NULL || pattern_init() < 0) {
        fprintf(stderr, "mcload: out of memory\n");
        goto out;
    }
    if (o.tls && tls_client_init() < 0) {
        goto out;
    }
    if (run(ws, &rep) < 0) {
        goto out;
    }
    if (o.json) {
        report_json(&rep);
    } else {
        report_text(&rep);
    }
    rc = rep.run.errors + rep.run.timeouts + rep.pre.errors > 0 ? 2 : 0;
out:
    if (ws != NULL) {
        for (int i = 0; i < o.threads; i++) {
            worker_free(&ws[i]);
        }
    }
    free(ws);
    free(rep.hist);
    free(vpattern);
    if (o.tls) {
        tls_client_done();
    }
    return rc;
}
