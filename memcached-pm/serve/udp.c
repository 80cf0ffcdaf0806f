/*
 * udp.c: the UDP transport (udp.h).
 *
 * Locking: a socket's connection and its udp_port are touched by their
 * worker's thread only; the sockets are opened by the main thread before
 * the workers run.
 */
#include "config.h"

#include "memcached-pm/serve/udp.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "memcached-pm/base/log.h"
#include "memcached-pm/base/settings.h"
#include "memcached-pm/base/stats.h"
#include "memcached-pm/cmd/lookahead.h"
#include "memcached-pm/conn/conn.h"
#include "memcached-pm/conn/conn_out.h"
#include "memcached-pm/net/evloop.h"
#include "memcached-pm/net/given.h"
#include "memcached-pm/net/portfile.h"
#include "memcached-pm/net/ring.h"
#include "memcached-pm/serve/machine.h"
#include "memcached-pm/watch/logger.h"
#include "proto/binary.h"
#include "proto/udp.h"
#include "storage/cache/cache.h"
#include "storage/cache/cache_durable.h"

#define UDP_READ_MAX   65536    /* a request datagram, frame included */
#define UDP_RECV_BATCH 8        /* datagrams a recvmmsg takes */
#define UDP_SEND_BATCH 64       /* reply datagrams a sendmmsg gives */
#define UDP_ROUNDS     4        /* recvmmsg rounds an event, then yield */
#define UDP_SNDBUF     (64 * 1024 * 1024)  /* asked; the kernel caps it */
#define MAX_UDP_FDS    64       /* sockets a worker serves at most */

/* Where a received datagram came from, and its request id. */
struct udp_peer {
    struct sockaddr_storage addr;
    uint16_t                id;
};

struct udp_port {
    struct conn     *c;
    bool             writing;           /* waiting for room to send */

    struct mmsghdr   rmsg[UDP_RECV_BATCH];
    struct iovec     riov[UDP_RECV_BATCH];
    struct udp_peer  peer[UDP_RECV_BATCH];
    char             rbuf[UDP_RECV_BATCH][UDP_READ_MAX];

    /* sending: the next message, its bytes so far, its next datagram */
    size_t           msg;
    size_t           msg_start;
    size_t           done;
    uint16_t         seq;
    struct conn_out_pos pos;
    unsigned         nsend, sent;       /* datagrams prepared, sent */
    struct mmsghdr   smsg[UDP_SEND_BATCH];
    struct iovec     siov[UDP_SEND_BATCH];
    char             sbuf[UDP_SEND_BATCH][UDP_DATAGRAM_MAX];
};

/* The sockets udp_open() opened or was given; worker w serves
 * fds[w], fds[w + nworkers], ... */
static int *fds;
static int *all;                  /* every one, served or not */
static char (*names)[64];
static unsigned nworkers;
static unsigned n_fds;

/* ---- sending ---------------------------------------------------------- */

/* Does message i answer its datagram first?  Only then is an empty one
 * sent, as a lone frame: memcached finishes an empty reply that follows
 * another along with it. */
static bool
first_of_dgram(const struct conn *c, size_t i)
{
    return i == 0 || c->msgs[i - 1].dgram != c->msgs[i].dgram;
}

static void
next_message(struct udp_port *u, const struct conn_msg *m)
{
    u->msg_start = m->end;
    u->msg++;
    u->done = 0;
    u->seq = 0;
}

/* Cut the queued messages into datagrams, up to a batch of them. */
static void
prepare(struct udp_port *u)
{
    struct conn *c = u->c;

    while (u->nsend < UDP_SEND_BATCH && u->msg < c->nmsgs) {
        const struct conn_msg *m = &c->msgs[u->msg];
        const struct udp_peer *p = &u->peer[m->dgram];
        size_t len = m->end - u->msg_start;
        size_t part = len - u->done;
        char *d = u->sbuf[u->nsend];
        struct mmsghdr *h = &u->smsg[u->nsend];

        if (m->drop || (len == 0 && !first_of_dgram(c, u->msg))) {
            conn_out_copy(c, &u->pos, NULL, len);
            next_message(u, m);
            continue;
        }
        if (part > UDP_PAYLOAD_MAX) {
            part = UDP_PAYLOAD_MAX;
        }
        udp_frame_compose(d, p->id, u->seq, udp_datagrams(len));
        conn_out_copy(c, &u->pos, d + UDP_HEADER_LEN, part);
        u->siov[u->nsend].iov_base = d;
        u->siov[u->nsend].iov_len = UDP_HEADER_LEN + part;
        memset(h, 0, sizeof(*h));
        h->msg_hdr.msg_name = (void *)&p->addr;
        h->msg_hdr.msg_namelen = p->addr.ss_family == AF_INET6
                                 ? sizeof(struct sockaddr_in6)
                                 : sizeof(struct sockaddr_in);
        h->msg_hdr.msg_iov = &u->siov[u->nsend];
        h->msg_hdr.msg_iovlen = 1;
        u->nsend++;
        u->done += part;
        u->seq++;
        if (u->done == len) {
            next_message(u, m);
        }
    }
}

/* Send every queued message.  true: all out (the queue is rewound);
 * false: the socket is full, the rest waits for room. */
static bool
send_all(struct udp_port *u)
{
    struct conn *c = u->c;

    for (;;) {
        int n;

        if (u->sent == u->nsend) {
            u->sent = u->nsend = 0;
            prepare(u);
            if (u->nsend == 0) {
                break;
            }
        }
        n = sendmmsg(c->fd, u->smsg + u->sent, u->nsend - u->sent,
                     MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                return false;
            }
            if (errno != EINTR) {
                /* A datagram the kernel refuses (the sender's address
                 * gone): dropped, as UDP drops. */
                u->sent++;
            }
            continue;
        }
        for (int i = 0; i < n; i++) {
            STAT_ADD(c->stats->bytes_written, u->smsg[u->sent + i].msg_len);
        }
        u->sent += (unsigned)n;
    }
    conn_out_sent(c);
    u->msg = u->msg_start = u->done = 0;
    u->seq = 0;
    u->pos = (struct conn_out_pos){ 0, 0 };
    return true;
}

/* ---- receiving -------------------------------------------------------- */

/* A request cut short by the end of its datagram: its item goes, and its
 * reply, if it queued one, becomes a message never sent. */
static void
drop_unfinished(struct conn *c)
{
    size_t last = c->nmsgs > 0 ? c->msgs[c->nmsgs - 1].end : 0;

    if (c->nitem != NULL) {
        cache_release(c->nitem);
        c->nitem = NULL;
    }
    c->swallow = 0;
    c->noreply = false;
    c->close_after_write = false;
    if (c->out_bytes > last) {
        conn_msg_end(c, false);
        if (c->nmsgs > 0 && c->msgs[c->nmsgs - 1].end == c->out_bytes) {
            c->msgs[c->nmsgs - 1].drop = true;
        }
    }
}

/* Run datagram i of the batch, len bytes. */
static void
run_datagram(struct udp_port *u, unsigned i, size_t len)
{
    struct conn *c = u->c;
    const char *d = u->rbuf[i];
    struct udp_frame f;

    if (udp_frame_parse(&f, d, len) < 0) {
        return;
    }
    STAT_ADD(c->stats->bytes_read, len);
    u->peer[i].id = f.id;
    lookahead_drop(c);
    len -= UDP_HEADER_LEN;
    memcpy(c->rbuf, d + UDP_HEADER_LEN, len);
    c->rstart = c->pf_end = 0;
    c->rend = len;
    /* Each datagram says what it speaks, whatever -B says. */
    c->proto = (unsigned char)c->rbuf[0] == BIN_MAGIC_REQ ? CONN_BINARY
                                                          : CONN_TEXT;
    c->dgram = i;
    c->last_cmd = clock_now();
    logger_set_fd(c->fd);
    machine_run_datagram(c);
    drop_unfinished(c);
}

static void on_udp(int fd, short what, void *arg);

static void
wait_for(struct udp_port *u, short what)
{
    struct conn *c = u->c;

    u->writing = what == EV_WRITE;
    if (c->rio != NULL) {
        ring_wait(c->rio, what);
        return;
    }
    if (evloop_want(c->loop, &c->ev, what) != 0) {
        log_error("udp %d: epoll_ctl: %s", c->fd, strerror(errno));
    }
}

static void
on_udp(int fd, short what, void *arg)
{
    struct udp_port *u = arg;

    (void)what;
    if (u->writing) {
        if (!send_all(u)) {
            return;
        }
        wait_for(u, EV_READ);
    }
    for (int round = 0; round < UDP_ROUNDS; round++) {
        int n;

        for (unsigned i = 0; i < UDP_RECV_BATCH; i++) {
            u->rmsg[i].msg_hdr.msg_namelen = sizeof(u->peer[i].addr);
        }
        n = recvmmsg(fd, u->rmsg, UDP_RECV_BATCH, MSG_DONTWAIT, NULL);
        if (n <= 0) {
            return;
        }
        for (int i = 0; i < n; i++) {
            run_datagram(u, (unsigned)i, u->rmsg[i].msg_len);
        }
        if (cache_group_pending()) {
            /* group commit: the batch's changes are durable before any
             * of its replies goes out */
            cache_group_sync();
        }
        if (!send_all(u)) {
            wait_for(u, EV_WRITE);
            return;
        }
        if (n < UDP_RECV_BATCH) {
            return;
        }
    }
    /* More may be waiting: the event is level-triggered, so the worker's
     * other connections get their turn first. */
}

/* ---- sockets ---------------------------------------------------------- */

/* One socket on ai, sharing the port with the other workers'. */
static int
open_one(const struct addrinfo *ai, bool shared)
{
    int one = 1, buf = UDP_SNDBUF;
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK |
                    SOCK_CLOEXEC, ai->ai_protocol);

    if (fd < 0) {
        return -1;
    }
    sock_cookie(fd);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (shared) {
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    }
    if (ai->ai_family == AF_INET6) {
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    }
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* Datagrams go to the workers' sockets at random, each on its own,
 * instead of by the sender's address: a few busy clients then do not
 * pile onto one worker while the others idle.  Best effort: without it
 * the kernel hashes senders. */
static void
spread(int fd, unsigned n)
{
    struct sock_filter code[] = {
        { BPF_LD | BPF_W | BPF_ABS, 0, 0,
          (uint32_t)(SKF_AD_OFF + SKF_AD_RANDOM) },
        { BPF_ALU | BPF_MOD | BPF_K, 0, 0, n },
        { BPF_RET | BPF_A, 0, 0, 0 },
    };
    struct sock_fprog prog = { 3, code };

    setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog,
               sizeof(prog));
}

/* The addresses of one -l entry ("host", "host:port", "[v6]", ...), at
 * the UDP port. */
static struct addrinfo *
resolve(char *spec)
{
    struct addrinfo hints = { 0 }, *res = NULL;
    enum tls_mode tls;
    const char *prefix;
    /* a TLS prefix is the TCP listener's business (and checked there) */
    char port[16], *host = (char *)tls_listen_prefix(spec, &tls, &prefix);
    char *p;

    snprintf(port, sizeof(port), "%d", portfile_bind_port(settings.udpport));
    if (*host == '[' && (p = strchr(host, ']')) != NULL) {
        *p = '\0';
        host++;
    } else if ((p = strchr(host, ':')) != NULL && strchr(p + 1, ':') == NULL) {
        *p = '\0';
    }
    hints.ai_flags = AI_PASSIVE;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_DGRAM;
    if (getaddrinfo(host, port, &hints, &res) != 0) {
        log_error("getaddrinfo(): cannot resolve %s", host);
        return NULL;
    }
    return res;
}

/* The sockets of one address: those given at start that are bound to
 * it, then new ones up to one per worker (where the given ones share
 * their port, or there are none; the first binds the address as given,
 * the others the port it got: at -U -1, the one the kernel picked).
 * Appended to tmp; 0, or -1 with errno. */
static int
open_address(const struct addrinfo *ai, unsigned n_workers,
             struct given *g, size_t ng, int *tmp, size_t *ntmp,
             size_t cap)
{
    struct addrinfo at = *ai;
    struct sockaddr_storage bound;
    size_t first = *ntmp;
    char what[64];
    bool shared = n_workers > 1;
    int fd, one = 0;
    socklen_t len;

    sock_addr_name(ai->ai_addr, "udp", what, sizeof(what));
    while (*ntmp < cap &&
           (fd = given_take(g, ng, SOCK_DGRAM, ai->ai_addr,
                            settings.udpport == -1, what)) >= 0) {
        evutil_make_socket_nonblocking(fd);
        evutil_make_socket_closeonexec(fd);
        len = sizeof(one);
        if (getsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, &len) != 0) {
            one = 0;
        }
        shared = one != 0;      /* without it, no socket can join */
        tmp[(*ntmp)++] = fd;
    }
    for (size_t k = *ntmp - first; k < n_workers && (k == 0 || shared);
         k++) {
        if (*ntmp == cap) {
            log_error("too many UDP addresses");
            return -1;
        }
        if (*ntmp > first) {
            len = sizeof(bound);
            if (getsockname(tmp[first], (struct sockaddr *)&bound,
                            &len) == 0) {
                at.ai_addr = (struct sockaddr *)&bound;
                at.ai_addrlen = len;
            }
        }
        if ((fd = open_one(&at, shared)) < 0) {
            return -1;      /* errno says why, for main's message */
        }
        tmp[(*ntmp)++] = fd;
    }
    portfile_note(tmp[first], true);
    if (*ntmp - first > 1) {
        spread(tmp[first], (unsigned)(*ntmp - first));
    }
    return 0;
}

/* Keep the sockets in tmp, each with its name: worker w serves those
 * whose index is w modulo the worker count. */
static int
keep(int *tmp, size_t ntmp)
{
    fds = tmp;
    n_fds = (unsigned)ntmp;
    names = calloc(ntmp ? ntmp : 1, sizeof(*names));
    all = calloc(ntmp ? ntmp : 1, sizeof(*all));
    if (names == NULL || all == NULL) {
        return -1;
    }
    memcpy(all, fds, ntmp * sizeof(*all));
    for (size_t i = 0; i < ntmp; i++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);

        getsockname(fds[i], (struct sockaddr *)&ss, &sl);
        sock_addr_name((struct sockaddr *)&ss, "udp", names[i],
                       sizeof(names[i]));
    }
    return 0;
}

int
udp_open(unsigned n_workers, struct given *g, size_t ng)
{
    char *list = strdup(settings.inter ? settings.inter : "127.0.0.1");
    size_t cap = (size_t)MAX_UDP_FDS * n_workers + ng;
    int *tmp = calloc(cap, sizeof(*tmp));
    char *save = NULL;
    size_t ntmp = 0;
    int rc = 0;

    if (list == NULL || tmp == NULL) {
        free(list);
        free(tmp);
        return -1;
    }
    nworkers = n_workers;
    for (char *s = strtok_r(list, ",", &save); s != NULL && rc == 0;
         s = strtok_r(NULL, ",", &save)) {
        struct addrinfo *res = resolve(s);

        rc = res != NULL ? 0 : -1;
        for (struct addrinfo *ai = res; ai != NULL && rc == 0;
             ai = ai->ai_next) {
            rc = open_address(ai, n_workers, g, ng, tmp, &ntmp, cap);
        }
        freeaddrinfo(res);
    }
    free(list);
    if (rc != 0) {
        int e = errno;

        for (size_t i = 0; i < ntmp; i++) {
            close(tmp[i]);
        }
        free(tmp);
        errno = e;
        return -1;
    }
    return keep(tmp, ntmp);
}

static struct udp_port *
port_new(void)
{
    struct udp_port *u = calloc(1, sizeof(*u));

    if (u == NULL) {
        return NULL;
    }
    for (unsigned i = 0; i < UDP_RECV_BATCH; i++) {
        u->riov[i].iov_base = u->rbuf[i];
        u->riov[i].iov_len = UDP_READ_MAX;
        u->rmsg[i].msg_hdr.msg_name = &u->peer[i].addr;
        u->rmsg[i].msg_hdr.msg_iov = &u->riov[i];
        u->rmsg[i].msg_hdr.msg_iovlen = 1;
    }
    return u;
}

int
udp_attach(unsigned id, const struct conn_owner *o)
{
    for (unsigned at = id; at < n_fds; at += nworkers) {
        struct udp_port *u = port_new();
        struct conn *c;

        if (u == NULL) {
            return -1;
        }
        c = conn_new_udp(o, fds[at], names[at], UDP_READ_MAX, u);
        fds[at] = -1;
        if (c == NULL) {
            return -1;
        }
        u->c = c;
        /* A UDP socket counts as a connection, as in memcached. */
        SERVER_STAT_INCR(curr_connections);
        SERVER_STAT_INCR(total_connections);
        if (o->ring != NULL) {
            /* the ring says when it is ready; recvmmsg does the rest */
            if ((c->rio = ring_add(o->ring, c->fd, true, on_udp, u)) == NULL) {
                return -1;
            }
            ring_wait(c->rio, EV_READ);
            continue;
        }
        evsrc_init(&c->ev, c->fd, on_udp, u);
        if (evloop_want(c->loop, &c->ev, EV_READ) != 0) {
            return -1;
        }
    }
    return 0;
}

size_t
udp_fds(int *out, size_t max)
{
    size_t n = 0;

    for (unsigned i = 0; i < n_fds && n < max; i++) {
        out[n++] = all[i];
    }
    return n;
}

void
udp_close(void)
{
    for (unsigned i = 0; i < n_fds; i++) {
        if (fds[i] >= 0) {
            close(fds[i]);
        }
    }
    free(fds);
    free(all);
    free(names);
    fds = NULL;
    all = NULL;
    names = NULL;
    n_fds = nworkers = 0;
}
