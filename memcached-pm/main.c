/*
 * main.c: the daemon's table of contents.  Every room starts here, in
 * order, and stops here, in reverse:
 *
 *   argv           base/cmdline.c through base/settings.h's table
 *   inheritance    life/succession.c: systemd's sockets, a memcached on
 *                  the memory file (migrate/foreign.c)
 *   process        set_up(): security/ (TLS keys, credentials) before
 *                  -u drops root; limits, -d, -k; base/placement.c
 *   counters       base/stats.c, a block per worker
 *   takeover       life/succession.c: the node taken over from
 *                  (life/takeover.c), the workers' rings made while it
 *                  still serves (serve/worker.c)
 *   storage        life/restart.c's check of -e's .meta (migrate/
 *                  convert.c for a file of memcached's), cache_init()
 *   watch          watch/logger.c's mc-log thread
 *   listeners      serve/listen.c (and serve/udp.c): given or opened
 *   workers        base/log.c's writer, serve/worker.c's threads,
 *                  migrate/warm.c for -o warm_from
 *   serving        life/succession.c takes the connections handed over
 *                  and says READY; base/placement.c moves this thread
 *                  to the background CPUs; -P's pid file
 *
 * Then the main thread owns the listening sockets and the one-second
 * clock: it accepts connections and hands each to a worker.  SIGTERM,
 * SIGINT and SIGUSR1 end its loop; stop_all() hands on or stores what a
 * successor takes (life/succession.c), stops the workers, watch and
 * storage, and everything is freed, so a sanitizer build reports no
 * leak at exit.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sysexits.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "memcached-pm/admin/admin_stats.h"
#include "memcached-pm/base/cmdline.h"
#include "memcached-pm/base/log.h"
#include "memcached-pm/base/placement.h"
#include "memcached-pm/base/settings.h"
#include "memcached-pm/base/stats.h"
#include "memcached-pm/life/restart.h"
#include "memcached-pm/life/respawn.h"
#include "memcached-pm/life/sdaemon.h"
#include "memcached-pm/life/succession.h"
#include "memcached-pm/migrate/warm.h"
#include "memcached-pm/security/auth.h"
#include "memcached-pm/security/sasl_cyrus.h"
#include "memcached-pm/security/tls.h"
#include "memcached-pm/serve/listen.h"
#include "memcached-pm/serve/udp.h"
#include "memcached-pm/serve/worker.h"
#include "memcached-pm/watch/logger.h"
#include "storage/base/clock.h"
#include "storage/cache/cache.h"
#include "storage/cache/cache_image.h"
#include "storage/cache/cache_open.h"

static struct event_base *main_base;

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

static struct event *tick_ev;

/* The next tick right after the clock's next second, or at once for one
 * that turned since the last tick (clock.h). */
static int
arm_tick(void)
{
    uint64_t us = clock_until_tick_us();
    struct timeval tv = { (time_t)(us / 1000000),
                          (suseconds_t)(us % 1000000) };

    return event_add(tick_ev, &tv);
}

static void
on_clock(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    clock_tick();
    cache_tick();
    arm_tick();
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

/* SIGUSR2: a successor takes this node over; SIGCHLD: one has exited
 * (respawn.h). */
static void
on_respawn(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    (void)arg;
    if (sig == SIGUSR2) {
        respawn_start();
    } else {
        respawn_reap();
    }
}

#define NSIGNALS 6
static struct event *signal_evs[NSIGNALS];

static int
setup_events(void)
{
    static const int sigs[NSIGNALS] = { SIGTERM, SIGINT, SIGUSR1, SIGHUP,
                                 SIGUSR2, SIGCHLD };
    sigset_t handled;

    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&handled);
    for (unsigned i = 0; i < NSIGNALS; i++) {
        sigaddset(&handled, sigs[i]);
    }
    for (unsigned i = 0; i < NSIGNALS; i++) {
        event_callback_fn fn = sigs[i] == SIGHUP ? on_hangup
                               : sigs[i] == SIGUSR2 || sigs[i] == SIGCHLD
                               ? on_respawn : on_signal;

        signal_evs[i] = evsignal_new(main_base, sigs[i], fn, NULL);
        if (signal_evs[i] == NULL ||
            event_priority_set(signal_evs[i], 0) != 0 ||
            event_add(signal_evs[i], NULL) != 0) {
            return -1;
        }
    }
    /* handled now: what a reload's exec blocked (respawn.h) comes in */
    sigprocmask(SIG_UNBLOCK, &handled, NULL);
    tick_ev = event_new(main_base, -1, 0, on_clock, NULL);
    if (tick_ev == NULL || arm_tick() != 0) {
        return -1;
    }
    return 0;
}

static void
free_events(void)
{
    for (unsigned i = 0; i < NSIGNALS; i++) {
        if (signal_evs[i] != NULL) {
            event_free(signal_evs[i]);
        }
    }
    if (tick_ev != NULL) {
        event_free(tick_ev);
    }
}

/* The process as memcached sets it up, before the cache: 0, or the exit
 * status. */
static int
set_up(void)
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
    return 0;
}

/* The listening sockets: those given (systemd, a takeover) where they
 * match the options, the rest opened.  0, or the exit status. */
static int
open_listeners(void)
{
    size_t ng;
    struct given *g = succession_given(&ng);
    int rc;

    if ((rc = listen_open(main_base, g, ng)) != 0 ||
        (rc = succession_listen(main_base)) != 0) {
        return rc;
    }
    return succession_given_checked();
}

/* Everything up to serving: 0, or the exit status.  systemd's sockets
 * are taken before a fork (-d) changes the pid they were passed to, a
 * predecessor's (-o takeover) before the memory file opens. */
static int
start(void)
{
    int rc;

    if ((rc = succession_from_systemd()) != 0 ||
        (rc = succession_find_foreign()) != 0 || (rc = set_up()) != 0) {
        return rc;
    }
    if (stats_init((unsigned)settings.num_threads) != 0) {
        return EXIT_FAILURE;
    }
    if ((rc = succession_take_over()) != 0) {
        return rc;
    }
    restart_meta_check();       /* converts a file of memcached's */
    if (cache_init(&settings.cache, (unsigned)settings.num_threads) != 0 ||
        restart_meta_write(false) != 0) {
        return EXIT_FAILURE;
    }
    stats.server.accepting_conns = 1;
    /* two priorities: a signal is taken before anything else ready in
     * the same pass (a stop before a takeover that would hand back) */
    main_base = event_base_new();
    if (main_base == NULL || event_base_priority_init(main_base, 2) != 0 ||
        setup_events() != 0 || logger_start() != 0) {
        return EXIT_FAILURE;
    }
    if ((rc = open_listeners()) != 0) {
        return rc;
    }
    if (log_start() != 0) {
        log_error("no log thread: messages go straight to stderr");
    }
    if (worker_start_all((unsigned)settings.num_threads) != 0 ||
        warm_start() != 0) {
        return EXIT_FAILURE;
    }
    succession_serving();
    placement_serving();
    write_pidfile();
    return 0;
}

/* Stop every thread and free what storage holds.  A graceful stop
 * (SIGUSR1, "shutdown graceful") says so, and with -v names each step
 * with memcached's lines, which log scrapers wait for.  Under systemd
 * with an fd store the connections wait there for the next start; after
 * a takeover the successor has them, and the memory file, already. */
static void
stop_all(bool graceful)
{
    bool handed = succession_handed_over();
    bool stored = !handed && succession_store();

#define STEP(msg) do { if (graceful) { log_info(msg); } } while (0)
    if (handed) {
        log_info("Handed over to a successor");
    } else if (graceful) {
        log_error("Gracefully stopping");
    } else {
        log_info("Exiting normally");
    }
    /* A successor serves -s's socket file from now on. */
    listen_close(graceful, !handed && !stored);
    warm_stop();
    STEP("asking workers to stop");
    STEP("closing connections");
    STEP("reaping worker threads");
    worker_stop_all();
    STEP("stopped idle timeout thread");
    logger_stop();
    STEP("stopped logger thread");
    udp_close();
    STEP("asking background threads to stop");
    cache_stop(!handed);
    if (stored) {
        succession_store_index();
    }
    if (!handed) {
        cache_image_save();     /* the next start skips the scan */
    }
    cache_shutdown();
    if (!handed) {
        restart_meta_write(true);
    }
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
    succession_free();
    if (stored) {
        sdaemon_barrier(5000);
    }
}

int
main(int argc, char **argv)
{
    int rc;

    respawn_remember(argc, argv);       /* before getopt reorders argv */
    rc = cmdline_parse(argc, argv);

    if (rc != 0) {
        return rc > 0 ? EXIT_SUCCESS : rc == -1 ? EXIT_FAILURE : -rc;
    }
    if ((rc = start()) != 0) {
        log_stop();
        return rc == SUCCESSION_STOPPED ? EXIT_SUCCESS : rc;
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
    if (settings.pidfile != NULL && !succession_handed_over()) {
        unlink(settings.pidfile);   /* the successor's, after a handover */
    }
    free(settings.inter);
    free_events();
    event_base_free(main_base);
    log_stop();
    if (succession_returns()) {
        respawn_exec();         /* takes the node back: the unit's pid */
        respawn_free();
        return EXIT_FAILURE;
    }
    respawn_free();
    return EXIT_SUCCESS;
}
