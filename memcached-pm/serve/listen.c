/*
 * listen.c: the listening sockets and accepting (listen.h).
 *
 * The listeners accept on the main thread's libevent loop (epoll) on
 * either engine.  An io_uring accept would hold the listening socket in
 * the ring, and a ring is torn down by the kernel after its process has
 * gone: after a SIGKILL the port went on completing handshakes, and then
 * resetting them, for 1-18 ms, where a dead server must refuse at once.
 *
 * Main thread only.
 */
#include "config.h"

#include "memcached-pm/serve/listen.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sysexits.h>
#include <time.h>
#include <unistd.h>

#include "memcached-pm/admin/admin_stats.h"
#include "memcached-pm/base/log.h"
#include "memcached-pm/base/settings.h"
#include "memcached-pm/base/stats.h"
#include "memcached-pm/conn/conn.h"
#include "memcached-pm/migrate/foreign.h"
#include "memcached-pm/migrate/warm.h"
#include "memcached-pm/net/given.h"
#include "memcached-pm/net/portfile.h"
#include "memcached-pm/security/tls.h"
#include "memcached-pm/serve/udp.h"
#include "memcached-pm/serve/worker.h"
#include "proto/response.h"

#define MAX_LISTENERS 32

struct listener {
    int           fd;
    bool          is_unix;
    enum tls_mode tls;              /* -Z, or a listener's prefix */
    char          addr[64];
    struct event *ev;
};

/* Under warm_from, a TCP address still held by another process (the
 * memcached node being copied, which has the port this node is to take
 * over): bound the moment it frees, tried every DEFER_US. */
#define MAX_DEFERRED 8
#define DEFER_US     1000

struct deferred {
    struct sockaddr_storage addr;
    socklen_t     len;
    int           family, socktype, protocol;
    enum tls_mode tls;
};

/* Better: the process that holds such an address (the node itself, on
 * this host) shares its listening socket, which this node accepts on
 * once that process has exited, so that the port never refuses.  Needs
 * ptrace rights over it (foreign.h). */
struct holder {
    int           fd;               /* the shared listening socket */
    int           pidfd;            /* readable once its holder exits */
    enum tls_mode tls;
    char          name[64];
    struct event *ev;
};

static struct event_base *main_base;
static struct listener listeners[MAX_LISTENERS];
static unsigned nlisteners;
static struct event *resume_ev;     /* re-enables accept after EMFILE */
static struct deferred deferred[MAX_DEFERRED];
static unsigned ndeferred;
static struct event *defer_ev;
static struct holder holders[MAX_DEFERRED];
static unsigned nholders;
static bool accepting;              /* between listen_start() and _stop() */

void
listen_stop(void)
{
    accepting = false;
    for (unsigned i = 0; i < nlisteners; i++) {
        event_del(listeners[i].ev);
    }
}

void
listen_start(void)
{
    accepting = true;
    for (unsigned i = 0; i < nlisteners; i++) {
        event_add(listeners[i].ev, NULL);
    }
}

/* ---- accepting -------------------------------------------------------- */

/* Out of descriptors (-c sets the limit): stop accepting (stats'
 * accepting_conns 0); every 10 ms, start again once a connection has
 * closed since, as memcached does. */
static struct timespec paused_at;
static uint64_t paused_conns;       /* curr_connections when it paused */

static bool
at_limit(void)
{
    return SERVER_STAT_LOAD(curr_connections) >= paused_conns;
}

static void
accept_pause(void)
{
    struct timeval ten_ms = { 0, 10000 };

    if (SERVER_STAT_LOAD(accepting_conns) == 0) {
        return;
    }
    __atomic_store_n(&stats.server.accepting_conns, 0, __ATOMIC_RELAXED);
    paused_conns = SERVER_STAT_LOAD(curr_connections);
    clock_gettime(CLOCK_MONOTONIC, &paused_at);
    SERVER_STAT_INCR(listen_disabled_num);
    listen_stop();
    event_add(resume_ev, &ten_ms);
}

static void
on_resume(evutil_socket_t fd, short what, void *arg)
{
    struct timeval ten_ms = { 0, 10000 };
    struct timespec now;

    (void)fd;
    (void)what;
    (void)arg;
    if (at_limit()) {
        event_add(resume_ev, &ten_ms);
        return;
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    __atomic_fetch_add(&stats.server.time_in_listen_disabled_us,
                       (uint64_t)((now.tv_sec - paused_at.tv_sec) * 1000000 +
                                  (now.tv_nsec - paused_at.tv_nsec) / 1000),
                       __ATOMIC_RELAXED);
    listen_start();
    __atomic_store_n(&stats.server.accepting_conns, 1, __ATOMIC_RELAXED);
}

/* connection_structures: the most connections (listeners included) that
 * were ever open at once, as memcached's never-freed conn array shows. */
static void
note_structures(void)
{
    uint64_t now = __atomic_load_n(&stats.server.curr_connections,
                                   __ATOMIC_RELAXED) + nlisteners;

    if (now > stats.server.connection_structures) {
        __atomic_store_n(&stats.server.connection_structures, now,
                         __ATOMIC_RELAXED);
    }
}

/* Over -c: say so and hang up, as memcached's maxconns_fast does when
 * the new descriptor is the last the file limit (-c) leaves.  Without
 * maxconns_fast, accept() itself fails one further on and pauses. */
static bool
over_limit(int fd)
{
    const char *msg = rsp_str[RSP_ERROR_TOO_MANY_CONNS];

    if (!settings.maxconns_fast || fd < settings.maxconns - 1) {
        return false;
    }
    if (write(fd, msg, rsp_len[RSP_ERROR_TOO_MANY_CONNS]) < 0) {
        /* the client is gone already; nothing to tell */
    }
    close(fd);
    SERVER_STAT_INCR(rejected_connections);
    return true;
}

/* accept() failed with err: out of descriptors pauses accepting. */
static void
accept_failed(int err)
{
    if (err == EMFILE || err == ENFILE) {
        log_error("Too many open connections");
        accept_pause();
    }
}

/* A connection accepted on l: the -c checks, then a worker. */
static void
take_connection(struct listener *l, int fd)
{
    int one = 1;

    if (over_limit(fd)) {
        return;
    }
    if (!l->is_unix) {
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    SERVER_STAT_INCR(curr_connections);
    SERVER_STAT_INCR(total_connections);
    note_structures();
    if (worker_dispatch(fd, l->is_unix, l->tls, l->addr) != 0) {
        SERVER_STAT_DECR(curr_connections);
    }
}

static void
on_accept(evutil_socket_t lfd, short what, void *arg)
{
    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

    (void)what;
    if (fd < 0) {
        accept_failed(errno);
    } else {
        take_connection(arg, fd);
    }
}

/* ---- listening sockets ------------------------------------------------ */

static int
add_listener(int fd, bool is_unix, enum tls_mode tls, const char *addr)
{
    struct listener *l;

    if (nlisteners == MAX_LISTENERS) {
        log_error("too many listening addresses");
        return -1;
    }
    l = &listeners[nlisteners];
    l->fd = fd;
    l->is_unix = is_unix;
    l->tls = tls;
    snprintf(l->addr, sizeof(l->addr), "%s", addr);
    l->ev = event_new(main_base, fd, EV_READ | EV_PERSIST, on_accept, l);
    if (l->ev == NULL) {
        return -1;
    }
    nlisteners++;
    log_debug("<%d server listening (%s)", fd, settings.binding_protocol);
    SERVER_STAT_INCR(total_connections);
    note_structures();
    admin_add_listener(fd, addr);
    return 0;
}

/* The listener's name, with the port it got (-p -1: the kernel's). */
static void
bound_name(int fd, const struct addrinfo *ai, char *name, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);

    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
        sock_addr_name((struct sockaddr *)&ss, "tcp", name, len);
    } else {
        sock_addr_name(ai->ai_addr, "tcp", name, len);
    }
}

/* A new listening socket on ai: its fd, or -1 with errno. */
static int
bind_one(const struct addrinfo *ai)
{
    int one = 1;
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK |
                    SOCK_CLOEXEC, ai->ai_protocol);

    if (fd < 0) {
        return -1;
    }
    sock_cookie(fd);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (settings.num_napi_ids > 0) {
        int id;
        socklen_t len = sizeof(id);

        if (getsockopt(fd, SOL_SOCKET, SO_INCOMING_NAPI_ID, &id, &len) != 0) {
            fprintf(stderr, "-N <num_napi_ids> option not supported\n");
            exit(EXIT_FAILURE);
        }
    }
    if (ai->ai_family == AF_INET6) {
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    }
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 ||
        listen(fd, settings.backlog) != 0) {
        int e = errno;

        close(fd);
        errno = e;      /* for open_listeners()' message */
        return -1;
    }
    return fd;
}

/* A given socket bound to ai's address is set to non-blocking, as a new
 * one is (a .socket unit's may not be). */
static int
given_one(struct given *g, size_t n, const struct addrinfo *ai)
{
    char want[64];
    int fd;

    sock_addr_name(ai->ai_addr, "tcp", want, sizeof(want));
    fd = given_take(g, n, SOCK_STREAM, ai->ai_addr, settings.port == -1,
                    want);
    if (fd >= 0) {
        evutil_make_socket_nonblocking(fd);
        evutil_make_socket_closeonexec(fd);
    }
    return fd;
}

/* The holder of a shared address has exited: accept on its socket. */
static void
on_holder_gone(evutil_socket_t fd_, short what, void *arg)
{
    struct holder *h = arg;

    (void)fd_;
    (void)what;
    event_free(h->ev);
    h->ev = NULL;
    close(h->pidfd);
    h->pidfd = -1;
    if (add_listener(h->fd, false, h->tls, h->name) != 0) {
        close(h->fd);
        h->fd = -1;
        return;
    }
    h->fd = -1;                 /* the listener's now */
    log_info("listening on %s", h->name);
    warm_cut_over();
    if (accepting) {
        event_add(listeners[nlisteners - 1].ev, NULL);
    }
}

/* Share the listening socket on ai of the process that holds it, to
 * accept on once it exits: true, or false where it cannot be had. */
static bool
share_one(const struct addrinfo *ai, enum tls_mode tls, const char *name)
{
    struct holder *h = &holders[nholders];
    struct sock_info si;
    int fdnum;
    pid_t pid = foreign_listener(ai->ai_addr, &fdnum);

    if (pid == 0 || nholders == MAX_DEFERRED ||
        (h->pidfd = foreign_pidfd(pid)) < 0) {
        return false;
    }
    h->fd = foreign_getfd(h->pidfd, fdnum);
    if (h->fd < 0 || sock_info(h->fd, &si) != 0 ||
        !sock_info_is(&si, SOCK_STREAM, ai->ai_addr, false) ||
        (h->ev = event_new(main_base, h->pidfd, EV_READ, on_holder_gone,
                           h)) == NULL) {
        log_info("%s: cannot share the socket of pid %d: %s", name,
                 (int)pid, h->fd < 0 ? strerror(errno) : "not its own");
        if (h->fd >= 0) {
            close(h->fd);
        }
        close(h->pidfd);
        return false;
    }
    h->tls = tls;
    snprintf(h->name, sizeof(h->name), "%s", name);
    event_add(h->ev, NULL);
    nholders++;
    log_info("%s: sharing the listening socket of pid %d until it exits",
             name, (int)pid);
    return true;
}

/* An address in use while warm_from copies a node: kept to be bound
 * later (true), with a line that says so. */
static bool
defer_one(const struct addrinfo *ai, enum tls_mode tls)
{
    struct deferred *d;
    char name[64];

    if (errno != EADDRINUSE || settings.warm_from == NULL ||
        ndeferred == MAX_DEFERRED || ai->ai_addrlen > sizeof(d->addr)) {
        return false;
    }
    sock_addr_name(ai->ai_addr, "tcp", name, sizeof(name));
    log_error("%s is in use: listening there as soon as it is free "
              "(warm_from)", name);
    if (share_one(ai, tls, name)) {
        return true;
    }
    d = &deferred[ndeferred++];
    memcpy(&d->addr, ai->ai_addr, ai->ai_addrlen);
    d->len = ai->ai_addrlen;
    d->family = ai->ai_family;
    d->socktype = ai->ai_socktype;
    d->protocol = ai->ai_protocol;
    d->tls = tls;
    return true;
}

static int
listen_one(const struct addrinfo *ai, enum tls_mode tls,
           struct given *g, size_t n)
{
    char name[64];
    int fd = given_one(g, n, ai);

    if (fd < 0 && (fd = bind_one(ai)) < 0) {
        return defer_one(ai, tls) ? 0 : -1;
    }
    portfile_note(fd, false);
    bound_name(fd, ai, name, sizeof(name));
    if (add_listener(fd, false, tls, name) != 0) {
        close(fd);
        return -1;
    }
    return 0;
}

/* "host", "host:port", "[v6]" or "[v6]:port", each after an optional TLS
 * prefix (tls_listen_prefix()), refused without -Z. */
static int
listen_spec(char *spec, struct given *g, size_t n)
{
    struct addrinfo hints = { 0 }, *res, *ai;
    enum tls_mode tls = settings.ssl_enabled ? TLS_ON : TLS_OFF;
    const char *prefix = NULL;
    char port[16], *colon;
    char *host = (char *)tls_listen_prefix(spec, &tls, &prefix);
    int rc = -1;

    if (prefix != NULL && !settings.ssl_enabled) {
        log_error("'%s' option is valid only when SSL is enabled", prefix);
        return -1;
    }
    snprintf(port, sizeof(port), "%d", portfile_bind_port(settings.port));
    if (*host == '[') {
        char *close_br = strchr(host, ']');
        if (close_br == NULL) {
            return -1;
        }
        *close_br = '\0';
        host++;
        if (close_br[1] == ':') {
            snprintf(port, sizeof(port), "%s", close_br + 2);
        }
    } else if ((colon = strchr(host, ':')) != NULL &&
               strchr(colon + 1, ':') == NULL) {
        *colon = '\0';
        snprintf(port, sizeof(port), "%s", colon + 1);
    }
    hints.ai_flags = AI_PASSIVE;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, port, &hints, &res) != 0) {
        log_error("getaddrinfo(): cannot resolve %s", host);
        return -1;
    }
    for (ai = res; ai != NULL; ai = ai->ai_next) {
        if (listen_one(ai, tls, g, n) == 0) {
            rc = 0;
        }
    }
    freeaddrinfo(res);
    return rc;
}

static int
listen_tcp(struct given *g, size_t n)
{
    char *list = strdup(settings.inter ? settings.inter : "127.0.0.1");
    char *save = NULL;
    int rc = 0;

    if (list == NULL) {
        return -1;
    }
    for (char *s = strtok_r(list, ",", &save); s != NULL && rc == 0;
         s = strtok_r(NULL, ",", &save)) {
        rc = listen_spec(s, g, n);
    }
    free(list);
    return rc;
}

static int
listen_unix(struct given *g, size_t n)
{
    struct sockaddr_un sun = { .sun_family = AF_UNIX };
    char name[sizeof(sun.sun_path) + 8];    /* a whole path, logged */
    mode_t old;
    int fd;

    if (strlen(settings.socketpath) >= sizeof(sun.sun_path)) {
        log_error("unix socket path too long: %s", settings.socketpath);
        return -1;
    }
    strcpy(sun.sun_path, settings.socketpath);
    snprintf(name, sizeof(name), "unix:%s", sun.sun_path);
    fd = given_take(g, n, SOCK_STREAM, (struct sockaddr *)&sun, false, name);
    if (fd >= 0) {
        evutil_make_socket_nonblocking(fd);
        evutil_make_socket_closeonexec(fd);
        return add_listener(fd, true, TLS_OFF, name);
    }
    unlink(settings.socketpath);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    old = umask((mode_t)(~settings.access & 0777));
    if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0 ||
        listen(fd, settings.backlog) != 0) {
        umask(old);
        log_error("failed to listen on %s: %s", settings.socketpath,
                  strerror(errno));
        close(fd);
        return -1;
    }
    umask(old);
    return add_listener(fd, true, TLS_OFF, name);
}

/* Try the deferred addresses again; those bound start accepting. */
static void
on_defer(evutil_socket_t fd_, short what, void *arg)
{
    struct timeval again = { 0, DEFER_US };
    unsigned kept = 0;

    (void)fd_;
    (void)what;
    (void)arg;
    for (unsigned i = 0; i < ndeferred; i++) {
        struct deferred *d = &deferred[i];
        struct addrinfo ai = {
            .ai_family = d->family, .ai_socktype = d->socktype,
            .ai_protocol = d->protocol, .ai_addrlen = d->len,
            .ai_addr = (struct sockaddr *)&d->addr,
        };
        char name[64];
        int fd = bind_one(&ai);

        if (fd < 0) {
            deferred[kept++] = *d;
            continue;
        }
        bound_name(fd, &ai, name, sizeof(name));
        if (add_listener(fd, false, d->tls, name) != 0) {
            close(fd);
            continue;
        }
        log_info("listening on %s", name);
        warm_cut_over();
        if (accepting) {
            event_add(listeners[nlisteners - 1].ev, NULL);
        }
    }
    ndeferred = kept;
    if (ndeferred > 0) {
        event_add(defer_ev, &again);
    }
}

/* A port that cannot be had: memcached's message. */
static void
listen_failed(const char *transport, int port)
{
    int e = errno;

    if (settings.inter == NULL) {
        log_error("failed to listen on %s port %d: %s", transport, port,
                  strerror(e));
    } else {
        log_error("failed to listen on one of interface(s) %s: %s",
                  settings.inter, strerror(e));
    }
}

int
listen_open(struct event_base *base, struct given *g, size_t n)
{
    main_base = base;
    resume_ev = evtimer_new(main_base, on_resume, NULL);
    if (resume_ev == NULL) {
        return EXIT_FAILURE;
    }
    if (settings.socketpath != NULL) {
        /* and neither TCP nor UDP, as memcached */
        return listen_unix(g, n) == 0 ? 0 : EXIT_FAILURE;
    }
    portfile_open();
    errno = 0;
    if (settings.port != 0 && listen_tcp(g, n) != 0) {
        listen_failed("TCP", settings.port);
        return EX_OSERR;
    }
    errno = 0;
    if (settings.udpport != 0 &&
        udp_open((unsigned)settings.num_threads, g, n) != 0) {
        listen_failed("UDP", settings.udpport);
        return EX_OSERR;
    }
    portfile_close();
    if (ndeferred > 0) {
        struct timeval soon = { 0, DEFER_US };

        if ((defer_ev = evtimer_new(main_base, on_defer, NULL)) == NULL) {
            return EXIT_FAILURE;
        }
        event_add(defer_ev, &soon);
    }
    return 0;
}

size_t
listen_fds(int *out, size_t max)
{
    size_t n = 0;

    for (unsigned i = 0; i < nlisteners && n < max; i++) {
        out[n++] = listeners[i].fd;
    }
    return n;
}

void
listen_close(bool graceful, bool unlink_path)
{
    for (unsigned i = 0; i < nlisteners; i++) {
        event_free(listeners[i].ev);
        if (graceful) {
            log_debug("<%d connection closed.", listeners[i].fd);
        }
        close(listeners[i].fd);
    }
    nlisteners = 0;
    if (resume_ev != NULL) {
        event_free(resume_ev);
        resume_ev = NULL;
    }
    if (defer_ev != NULL) {
        event_free(defer_ev);
        defer_ev = NULL;
    }
    ndeferred = 0;
    for (unsigned i = 0; i < nholders; i++) {
        struct holder *h = &holders[i];

        if (h->ev != NULL) {        /* its holder still runs */
            event_free(h->ev);
            close(h->pidfd);
            close(h->fd);
        }
    }
    nholders = 0;
    if (unlink_path && settings.socketpath != NULL) {
        unlink(settings.socketpath);
    }
}
