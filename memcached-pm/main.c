/*
 * main.c: options, storage, listeners, workers, signals, shutdown.
 *
 * The main thread owns the listening sockets and the one-second clock; it
 * accepts connections and hands each to a worker.  SIGTERM, SIGINT and
 * SIGUSR1 end its loop; everything is then stopped and freed in reverse
 * order, so a sanitizer build reports no leak at exit.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sysexits.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "memcached-pm/admin_stats.h"
#include "memcached-pm/auth.h"
#include "memcached-pm/cmdline.h"
#include "memcached-pm/conn.h"
#include "memcached-pm/log.h"
#include "memcached-pm/logger.h"
#include "memcached-pm/portfile.h"
#include "memcached-pm/settings.h"
#include "memcached-pm/sasl_cyrus.h"
#include "memcached-pm/stats.h"
#include "memcached-pm/tls.h"
#include "memcached-pm/udp.h"
#include "memcached-pm/worker.h"
#include "memcached-pm/placement.h"
#include "memcached-pm/restart.h"
#include "memcached-pm/ring.h"
#include "proto/response.h"
#include "storage/cache.h"
#include "storage/clock.h"

#define MAX_LISTENERS 32

struct listener {
    int           fd;
    bool          is_unix;
    enum tls_mode tls;              /* -Z, or a listener's prefix */
    char          addr[64];
    struct event *ev;
};

static struct event_base *main_base;
static struct listener listeners[MAX_LISTENERS];
static unsigned nlisteners;
static struct event *resume_ev;     /* re-enables accept after EMFILE */

/*
 * The listeners accept on the main thread's libevent loop (epoll) on
 * either engine.  An io_uring accept would hold the listening socket in
 * the ring, and a ring is torn down by the kernel after its process has
 * gone: after a SIGKILL the port went on completing handshakes, and then
 * resetting them, for 1-18 ms, where a dead server must refuse at once.
 */

/* Stop or start taking connections on every listener. */
static void
listeners_stop(void)
{
    for (unsigned i = 0; i < nlisteners; i++) {
        event_del(listeners[i].ev);
    }
}

static void
listeners_start(void)
{
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
    listeners_stop();
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
    listeners_start();
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
    if (l->ev == NULL || event_add(l->ev, NULL) != 0) {
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
        conn_sockaddr_name((struct sockaddr *)&ss, "tcp", name, len);
    } else {
        conn_sockaddr_name(ai->ai_addr, "tcp", name, len);
    }
}

static int
listen_one(const struct addrinfo *ai, enum tls_mode tls)
{
    int one = 1;
    char name[64];
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK |
                    SOCK_CLOEXEC, ai->ai_protocol);

    if (fd < 0) {
        return -1;
    }
    conn_sock_cookie(fd);
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
listen_spec(char *spec)
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
        if (listen_one(ai, tls) == 0) {
            rc = 0;
        }
    }
    freeaddrinfo(res);
    return rc;
}

static int
listen_tcp(void)
{
    char *list = strdup(settings.inter ? settings.inter : "127.0.0.1");
    char *save = NULL;
    int rc = 0;

    if (list == NULL) {
        return -1;
    }
    for (char *s = strtok_r(list, ",", &save); s != NULL && rc == 0;
         s = strtok_r(NULL, ",", &save)) {
        rc = listen_spec(s);
    }
    free(list);
    return rc;
}

static int
listen_unix(void)
{
    struct sockaddr_un sun = { .sun_family = AF_UNIX };
    char name[64];
    mode_t old;
    int fd;

    if (strlen(settings.socketpath) >= sizeof(sun.sun_path)) {
        log_error("unix socket path too long: %s", settings.socketpath);
        return -1;
    }
    strcpy(sun.sun_path, settings.socketpath);
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
    snprintf(name, sizeof(name), "unix:%s", settings.socketpath);
    return add_listener(fd, true, TLS_OFF, name);
}

/* Close the listening sockets; a graceful stop says so for each at -vv,
 * as memcached's does. */
static void
close_listeners(bool graceful)
{
    for (unsigned i = 0; i < nlisteners; i++) {
        event_free(listeners[i].ev);
        if (graceful) {
            log_debug("<%d connection closed.", listeners[i].fd);
        }
        close(listeners[i].fd);
    }
    nlisteners = 0;
    if (settings.socketpath != NULL) {
        unlink(settings.socketpath);
    }
}

/* ---- process set-up --------------------------------------------------- */

/* -r, and the file limit at -c, as memcached sets them: 0, or the exit
 * status after its message. */
static int
set_limits(void)
{
    struct rlimit rl, old;

    if (settings.coredumps) {
        if (getrlimit(RLIMIT_CORE, &old) == 0) {
            rl.rlim_cur = rl.rlim_max = RLIM_INFINITY;
            if (setrlimit(RLIMIT_CORE, &rl) != 0) {
                rl.rlim_cur = rl.rlim_max = old.rlim_max;
                (void)setrlimit(RLIMIT_CORE, &rl);
            }
        }
        if (getrlimit(RLIMIT_CORE, &rl) != 0 || rl.rlim_cur == 0) {
            fprintf(stderr, "failed to ensure corefile creation\n");
            return EX_OSERR;
        }
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        fprintf(stderr, "failed to getrlimit number of files\n");
        return EX_OSERR;
    }
    /* exactly -c, as memcached: past it accept() fails and pauses */
    rl.rlim_cur = rl.rlim_max = (rlim_t)settings.maxconns;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
        fprintf(stderr, "failed to set rlimit for open files. Try "
                "starting as root or requesting smaller maxconns "
                "value.\n");
        return EX_OSERR;
    }
    return 0;
}

/* -u: 0, or memcached's exit status after its message. */
static int
drop_privileges(void)
{
    const char *user = settings.username;
    struct passwd *pw;

    if (getuid() != 0 && geteuid() != 0) {
        return 0;
    }
    if (user == NULL || *user == '\0') {
        fprintf(stderr, "must add '-u root' to start as root\n");
        return EX_USAGE;
    }
    if ((pw = getpwnam(user)) == NULL) {
        fprintf(stderr, "can't find the user %s to switch to\n", user);
        return EX_NOUSER;
    }
    if (pw->pw_uid == 0) {
        return 0;                   /* -u root: stays root */
    }
    if (setgroups(0, NULL) != 0) {
        int e = errno;

        /* EPERM: already without supplementary groups */
        fprintf(stderr, "failed to drop supplementary groups: %s\n",
                strerror(e));
        if (e != EPERM) {
            return EX_OSERR;
        }
    }
    if (setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0) {
        fprintf(stderr, "failed to assume identity of user %s\n", user);
        return EX_OSERR;
    }
    return 0;
}

/* -d: into the background, its own session, in "/" (not with -r, which
 * wants a core file where it started), standard streams on /dev/null
 * (not with -v, whose messages would be lost), as memcached does. */
static int
daemonize(void)
{
    int fd;

    switch (fork()) {
    case -1: return -1;
    case 0: break;
    default: _exit(EXIT_SUCCESS);
    }
    if (setsid() == -1) {
        return -1;
    }
    if (!settings.coredumps && chdir("/") != 0) {
        perror("chdir");
        return -1;
    }
    if (settings.verbose == 0 && (fd = open("/dev/null", O_RDWR)) >= 0) {
        dup2(fd, STDIN_FILENO);
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        if (fd > STDERR_FILENO) {
            close(fd);
        }
    }
    return 0;
}

static void
write_pidfile(void)
{
    FILE *f;

    if (settings.pidfile == NULL) {
        return;
    }
    if ((f = fopen(settings.pidfile, "w")) == NULL) {
        log_error("Could not open the pid file %s for writing: %s",
                  settings.pidfile, strerror(errno));
        return;
    }
    fprintf(f, "%ld\n", (long)getpid());
    fclose(f);
}

/* -Y's file must be good to start; -S's is read when a client needs it
 * (and again when it changes), as memcached reads it, unless -S goes
 * through Cyrus SASL (sasl_cyrus.h). */
static int
load_credentials(void)
{
    char err[4400];

    if (settings.auth_file != NULL &&
        auth_load(AUTH_ASCII, settings.auth_file, err, sizeof(err)) != 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
#ifdef ENABLE_CYRUS_SASL
    if (cyrus_init() != 0) {
        return -1;
    }
#endif
    if (settings.sasl && !cyrus_in_use() &&
        auth_load(AUTH_SASL, NULL, err, sizeof(err)) != 0) {
        log_error("WARNING: %s", err);
    }
    return 0;
}

/* ---- the main loop ---------------------------------------------------- */

static void
on_clock(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    clock_tick();
    cache_tick();
}

/* SIGHUP: read -Y's file and the TLS certificates again. */
static void
on_hangup(evutil_socket_t sig, short what, void *arg)
{
    (void)sig;
    (void)what;
    (void)arg;
    auth_reload();
#ifdef ENABLE_TLS
    if (settings.ssl_enabled) {
        char err[1024];

        if (tls_refresh(err, sizeof(err)) != 0) {
            log_error("Could not reload TLS certificates on SIGHUP: %s",
                      err);
        }
    }
#endif
}

static int stop_signal;         /* what ended the main loop */

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    (void)arg;
    stop_signal = (int)sig;
    event_base_loopbreak(main_base);
}

static struct event *signal_evs[4];
static struct event *tick_ev;

static int
setup_events(void)
{
    static const int sigs[4] = { SIGTERM, SIGINT, SIGUSR1, SIGHUP };
    struct timeval sec = { 1, 0 };

    signal(SIGPIPE, SIG_IGN);
    for (unsigned i = 0; i < 4; i++) {
        signal_evs[i] = evsignal_new(main_base, sigs[i], sigs[i] == SIGHUP
                                     ? on_hangup : on_signal, NULL);
        if (signal_evs[i] == NULL || event_add(signal_evs[i], NULL) != 0) {
            return -1;
        }
    }
    tick_ev = event_new(main_base, -1, EV_PERSIST, on_clock, NULL);
    resume_ev = evtimer_new(main_base, on_resume, NULL);
    if (tick_ev == NULL || resume_ev == NULL ||
        event_add(tick_ev, &sec) != 0) {
        return -1;
    }
    return 0;
}

static void
free_events(void)
{
    for (unsigned i = 0; i < 4; i++) {
        if (signal_evs[i] != NULL) {
            event_free(signal_evs[i]);
        }
    }
    if (tick_ev != NULL) {
        event_free(tick_ev);
    }
    if (resume_ev != NULL) {
        event_free(resume_ev);
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

/* 0, or memcached's exit status when a socket cannot be had. */
static int
open_listeners(void)
{
    if (settings.socketpath != NULL) {
        /* and neither TCP nor UDP, as memcached */
        return listen_unix() == 0 ? 0 : EXIT_FAILURE;
    }
    portfile_open();
    errno = 0;
    if (settings.port != 0 && listen_tcp() != 0) {
        listen_failed("TCP", settings.port);
        return EX_OSERR;
    }
    errno = 0;
    if (settings.udpport != 0 &&
        udp_open((unsigned)settings.num_threads) != 0) {
        listen_failed("UDP", settings.udpport);
        return EX_OSERR;
    }
    portfile_close();
    return 0;
}

/* Everything up to serving: 0, or the exit status. */
static int
start(void)
{
    int rc;

#ifdef ENABLE_TLS
    /* Keys readable by root alone are read before -u drops it. */
    if (settings.ssl_enabled && (rc = tls_init()) != 0) {
        return rc;
    }
#endif
    if (load_credentials() != 0) {
        return EXIT_FAILURE;
    }
    if ((rc = set_limits()) != 0 || (rc = drop_privileges()) != 0) {
        return rc;
    }
    if (settings.daemonize && daemonize() != 0) {
        fprintf(stderr, "failed to daemon() in order to daemonize\n");
        return EXIT_FAILURE;
    }
    if (settings.lock_memory && mlockall(MCL_CURRENT | MCL_FUTURE) != 0) {
        fprintf(stderr, "warning: -k invalid, mlockall() failed: %s\n",
                strerror(errno));
    }
    if (placement_start(settings.memory_file) != 0) {
        return EXIT_FAILURE;
    }
    clock_init();
    restart_meta_check();
    if (stats_init((unsigned)settings.num_threads) != 0 ||
        cache_init(&settings.cache, (unsigned)settings.num_threads) != 0 ||
        restart_meta_write(false) != 0) {
        return EXIT_FAILURE;
    }
    stats.server.accepting_conns = 1;
    main_base = event_base_new();
    if (main_base == NULL || setup_events() != 0 || logger_start() != 0) {
        return EXIT_FAILURE;
    }
    if ((rc = open_listeners()) != 0) {
        return rc;
    }
    if (log_start() != 0) {
        log_error("no log thread: messages go straight to stderr");
    }
    if (worker_start_all((unsigned)settings.num_threads) != 0) {
        return EXIT_FAILURE;
    }
    placement_serving();
    write_pidfile();
    return 0;
}

/* Stop every thread and free what storage holds.  A graceful stop
 * (SIGUSR1, "shutdown graceful") says so, and with -v names each step
 * with memcached's lines, which log scrapers wait for. */
static void
stop_all(bool graceful)
{
#define STEP(msg) do { if (graceful) { log_info(msg); } } while (0)
    if (graceful) {
        log_error("Gracefully stopping");
    } else {
        log_info("Exiting normally");
    }
    close_listeners(graceful);
    STEP("asking workers to stop");
    STEP("closing connections");
    STEP("reaping worker threads");
    worker_stop_all();
    STEP("stopped idle timeout thread");
    logger_stop();
    STEP("stopped logger thread");
    udp_close();
    STEP("asking background threads to stop");
    cache_shutdown();
    restart_meta_write(true);
    STEP("stopped assoc");
    STEP("stopped lru crawler");
    if (settings.lru_maintainer) {
        STEP("stopped maintainer");
    }
    if (settings.cache.slab_reassign) {
        STEP("stopped slab mover");
    }
    STEP("all background threads stopped");
#undef STEP
}

int
main(int argc, char **argv)
{
    int rc = cmdline_parse(argc, argv);

    if (rc != 0) {
        return rc > 0 ? EXIT_SUCCESS : rc == -1 ? EXIT_FAILURE : -rc;
    }
    if ((rc = start()) != 0) {
        log_stop();
        return rc;
    }
    event_base_dispatch(main_base);
    stop_all(stop_signal == SIGUSR1);
    admin_stats_shutdown();
#ifdef ENABLE_TLS
    if (settings.ssl_enabled) {
        tls_shutdown();
    }
#endif
    auth_free();
#ifdef ENABLE_CYRUS_SASL
    cyrus_done();
#endif
    stats_destroy();
    if (settings.pidfile != NULL) {
        unlink(settings.pidfile);
    }
    free(settings.inter);
    free_events();
    event_base_free(main_base);
    log_stop();
    return EXIT_SUCCESS;
}
