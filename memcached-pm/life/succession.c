/*
 * succession.c: what a start inherits and what a stop hands on
 * (succession.h).
 *
 * Main thread only.
 */
#include "config.h"

#include "memcached-pm/life/succession.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sysexits.h>
#include <time.h>
#include <unistd.h>

#include "memcached-pm/base/log.h"
#include "memcached-pm/base/settings.h"
#include "memcached-pm/base/stats.h"
#include "memcached-pm/conn/handover.h"
#include "memcached-pm/life/fdstore.h"
#include "memcached-pm/life/image.h"
#include "memcached-pm/life/respawn.h"
#include "memcached-pm/life/restart.h"
#include "memcached-pm/life/sdaemon.h"
#include "memcached-pm/life/takeover.h"
#include "memcached-pm/migrate/foreign.h"
#include "memcached-pm/serve/engine.h"
#include "memcached-pm/serve/udp.h"
#include "memcached-pm/serve/worker.h"
#include "storage/cache/cache.h"
#include "storage/cache/cache_image.h"
#include "storage/cache/cache_open.h"

#define DRAIN_MS     1000       /* a connection in a request when the node
                                   hands over has this long to finish */
#define GONE_MS      60000      /* a node that refused a takeover stops
                                   within this */
#define READY_MS     10000      /* a successor makes room for the index
                                   within this (100M items: 0.3 s) */
#define MAX_SOCKETS  4096       /* listening and UDP sockets handed on */
#define MAX_FOREIGN  64         /* listeners shared with a memcached */

static struct {
    struct given        *given;     /* listeners given at start */
    size_t               ngiven;
    struct handover      conns;     /* connections taken over, to serve */
    struct takeover_peer pred;      /* the node taken over from (fd -1:
                                       none, or done with) */
    int                  tfd;       /* the takeover socket, listening */
    struct event        *tev;
    struct event_base   *base;
    struct handover      left;      /* what this node handed on */
    int                  index_room;    /* the stop's room for the index */
    bool                 handed_over;
    bool                 returns;   /* to this pid's next image (respawn.h) */
    pid_t                foreign;   /* another program's process (a
                                       memcached) that maps the file */
    int                  foreign_pidfd;
    bool                 foreign_open;  /* the file is open elsewhere,
                                           by a process not found */
} sc = { .pred = { .fd = -1 }, .tfd = -1, .index_room = -1,
         .foreign_pidfd = -1 };

static int
add_given(int fd, enum given_origin origin)
{
    struct given *g = realloc(sc.given, (sc.ngiven + 1) * sizeof(*g));

    if (g == NULL) {
        close(fd);
        return -1;
    }
    sc.given = g;
    sc.given[sc.ngiven++] = (struct given){ .fd = fd, .origin = origin };
    return 0;
}

/* ---- systemd ---------------------------------------------------------- */

int
succession_from_systemd(void)
{
    settings.fd_store = sdaemon_fdstore();
    fdstore_take(&sc.conns, add_given);
    return 0;
}

/* ---- taking over ------------------------------------------------------ */

/* Has process pid exited (gone, or a zombie: its files all closed)? */
static bool
exited(pid_t pid)
{
    char path[64], buf[256], *p;
    FILE *f;
    bool gone = true;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if ((f = fopen(path, "r")) == NULL) {
        return true;
    }
    if (fgets(buf, sizeof(buf), f) != NULL &&
        (p = strrchr(buf, ')')) != NULL && p[1] == ' ') {
        gone = p[2] == 'Z' || p[2] == 'X';
    }
    fclose(f);
    return gone;
}

/* Wait up to ms for the node taken over from to be gone: 0 or -1. */
static int
wait_exited(pid_t pid, int ms)
{
    struct timespec tick = { 0, 1000000 };

    for (int i = 0; i < ms; i++) {
        if (exited(pid)) {
            return 0;
        }
        nanosleep(&tick, NULL);
    }
    return -1;
}

/* Wait up to ms for the memory file to be free of the other node: a
 * killed node's files (its listeners with them) close a little after
 * its process ends, once its io_uring workers have gone.  0 or -1. */
static int
wait_file_free(int ms)
{
    struct timespec tick = { 0, 1000000 };

    for (int i = 0; i < ms; i++) {
        if (!cache_file_busy(settings.cache.memory_file)) {
            return 0;
        }
        nanosleep(&tick, NULL);
    }
    log_error("memory file %s: still in use after %d ms",
              settings.cache.memory_file, ms);
    return -1;
}

/* A record's socket as a takeover sent it: among those sent ahead of
 * the pause by its place, else the next of those sent in it. */
static int
sent_fd(const struct handover_conn *c, unsigned i, void *arg)
{
    struct takeover_got *got = arg;
    int fd = -1;

    (void)i;
    if (c->presented < 0 && got->next_conn < got->nconns) {
        fd = got->conns[got->next_conn];
        got->conns[got->next_conn++] = -1;
    } else if (c->presented >= 0 && (size_t)c->presented < got->npre) {
        fd = got->pre[c->presented];
        got->pre[c->presented] = -1;        /* one record, one socket */
    }
    return fd;
}

/* How many connections this node can take over: its descriptors left,
 * less what it will open itself (its workers' loops, the memory file,
 * the listeners, the -c reserve). */
static uint64_t
conn_room(void)
{
    struct rlimit rl;
    uint64_t open = 0, spare;
    DIR *d;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) {
        return UINT64_MAX;
    }
    if ((d = opendir("/proc/self/fd")) != NULL) {
        while (readdir(d) != NULL) {
            open++;
        }
        closedir(d);
    }
    spare = open + RESERVED_FDS + 4 * (uint64_t)settings.num_threads + 16;
    return rl.rlim_cur > spare ? rl.rlim_cur - spare : 0;
}

/* Keep what a takeover brought: its listeners, its connections (a
 * socket sent ahead that no record names closed since). */
static void
keep_got(struct takeover_got *got)
{
    char err[256];

    for (size_t i = 0; i < got->ngiven; i++) {
        if (add_given(got->given[i].fd, got->given[i].origin) == 0) {
            got->given[i].used = true;      /* sc.given has it now */
        }
    }
    if (got->state >= 0 &&
        handover_load(got->state, &sc.conns, sent_fd, got, err,
                      sizeof(err)) != 0) {
        log_error("takeover: its connections are dropped: %s", err);
    }
    if (got->released && got->image >= 0) {
        if (settings.cache.image_fd >= 0) {
            close(settings.cache.image_fd);     /* the fd store's: older */
        }
        settings.cache.image_fd = got->image;   /* cache_init() takes it */
        settings.cache.image_delta_fd = got->image_delta;
        got->image = got->image_delta = -1;
    }
}

/* A node was there but refused: it stops as it would alone; start once
 * it is gone. */
static int
after_refusal(const char *why)
{
    log_error("takeover: %s; starting once it has stopped", why);
    if (takeover_wait_gone(sc.pred.fd, GONE_MS) != 0 ||
        wait_exited(sc.pred.pid, GONE_MS) != 0) {
        log_error("takeover: pid %d did not stop", (int)sc.pred.pid);
        return EX_TEMPFAIL;
    }
    close(sc.pred.fd);
    sc.pred.fd = -1;
    return respawn_not_back();  /* a reload's next image may end here */
}

/* Share the listeners of pid (memcached): they go on queueing
 * connections after it exits, until this node serves them. */
static void
share_listeners(pid_t pid, int pidfd)
{
    int fds[MAX_FOREIGN];
    int n = pidfd < 0 ? -1 : foreign_take_listeners(pid, pidfd, fds,
                                                    MAX_FOREIGN);

    if (n < 0) {
        log_error("takeover: cannot share the sockets of pid %d: %s; its "
                  "addresses refuse from its exit until this node listens",
                  (int)pid, strerror(errno));
        return;
    }
    for (int i = 0; i < n; i++) {
        add_given(fds[i], GIVEN_TAKEOVER);
    }
    log_info("takeover: sharing the %d listening sockets of pid %d", n,
             (int)pid);
}

int
succession_find_foreign(void)
{
    const char *file = settings.memory_file;

    if (file == NULL || cache_file_is_ours(file)) {
        return 0;
    }
    sc.foreign = foreign_mapper(file);
    if (sc.foreign == 0) {
        sc.foreign_open = foreign_file_open(file);
    } else if (settings.takeover != NULL) {
        sc.foreign_pidfd = foreign_pidfd(sc.foreign);
        share_listeners(sc.foreign, sc.foreign_pidfd);
    }
    return 0;
}

/* No memcached-pm node on the takeover socket, but a memcached has the
 * memory file: take its place once it stops (SIGUSR1 saves its cache,
 * which the start then converts).  Its process not found, wait for the
 * file to be closed. */
static void
take_from_foreign(void)
{
    struct timespec tick = { 0, 1000000 };
    const char *file = settings.memory_file;
    char name[32];

    if (sc.foreign == 0 && sc.foreign_open) {
        log_error("takeover: the memory file %s is open in another "
                  "process: serving in its place once it closes it", file);
        while (foreign_file_open(file)) {
            nanosleep(&tick, NULL);
        }
        log_error("takeover: the memory file %s is closed", file);
        return;
    }
    if (sc.foreign == 0) {
        return;
    }
    foreign_name(sc.foreign, name, sizeof(name));
    log_error("takeover: pid %d (%s) has the memory file %s: serving in "
              "its place once it stops", (int)sc.foreign, name, file);
    if (sc.foreign_pidfd >= 0) {
        foreign_wait(sc.foreign_pidfd);
        close(sc.foreign_pidfd);
        sc.foreign_pidfd = -1;
    }
    while (!exited(sc.foreign)) {
        nanosleep(&tick, NULL);
    }
    log_error("takeover: pid %d has stopped", (int)sc.foreign);
}

/* Without -o takeover, a memory file that another program's process
 * has (a running memcached -e) is never opened: the start would tear
 * that node's cache.  0, or the exit status after a message. */
static int
refuse_foreign(void)
{
    const char *file = settings.memory_file;
    char name[32];

    if (sc.foreign == 0 && sc.foreign_open) {
        log_error("memory file %s: open in another process; stop it "
                  "first, or start with -o takeover to serve in its place "
                  "once it closes it", file);
        return EXIT_FAILURE;
    }
    if (sc.foreign == 0) {
        return 0;
    }
    foreign_name(sc.foreign, name, sizeof(name));
    log_error("memory file %s: mapped by pid %d (%s); stop it first, or "
              "start with -o takeover to serve in its place once it stops",
              file, (int)sc.foreign, name);
    return EXIT_FAILURE;
}

/* Where the node taken over maps its memory file, held (PROT_NONE) by
 * this process before it maps anything more (the index's room, the
 * rings, the workers' arenas), so that the file can be mapped there and
 * the index taken: with address space randomised, a 14 GB file would
 * otherwise find its range taken in about one takeover in a hundred, and
 * the file would be scanned.  cache_init() moves the file over it. */
static void
hold_file_range(void)
{
    void *want = (void *)(uintptr_t)sc.pred.file_base, *p;

    if (sc.pred.file_len == 0 || want == NULL) {
        return;
    }
    p = mmap(want, (size_t)sc.pred.file_len, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE |
             MAP_FIXED_NOREPLACE, -1, 0);
    if (p == want) {
        settings.cache.image_hold_base = sc.pred.file_base;
        settings.cache.image_hold_len = sc.pred.file_len;
    } else if (p != MAP_FAILED) {
        munmap(p, (size_t)sc.pred.file_len);    /* no NOREPLACE here */
    }
}

int
succession_take_over(void)
{
    struct takeover_got got = { .state = -1, .image = -1,
                                .image_delta = -1 };
    char why[256];
    int rc;

    if (settings.takeover == NULL) {
        return refuse_foreign();
    }
    rc = takeover_connect(settings.takeover, &sc.pred, why, sizeof(why));
    if (rc > 0) {
        if ((rc = respawn_not_back()) != 0) {
            return rc;
        }
        log_info("takeover: no node serves on %s: starting afresh",
                 settings.takeover);
        take_from_foreign();
        return 0;
    }
    if (rc < 0 && sc.pred.fd >= 0 && sc.pred.pid > 0) {
        return after_refusal(why);
    }
    if (rc < 0) {
        log_error("takeover: %s", why);
        return EX_UNAVAILABLE;
    }
    if (sc.pred.version >= 3) {
        /* room for the index, and the workers' rings, while the node
         * still serves: their faults and set-up are then no part of the
         * pause */
        if (sc.pred.index_bytes > 0) {
            hold_file_range();
            cache_image_stage(sc.pred.index_bytes);
        }
        engine_prepare((unsigned)settings.num_threads);
        takeover_send_go(sc.pred.fd, conn_room());
    }
    if (sc.pred.version >= 5) {
        image_precopy_take(sc.pred.fd);
    }
    takeover_step("new", "offered");
    rc = takeover_receive(&sc.pred, &got);
    takeover_step("new", "received");
    keep_got(&got);
    takeover_got_free(&got);
    if (rc != 0) {
        /* It went away before releasing its memory file: that file
         * recovers as after a crash, once its lock is gone. */
        log_error("takeover: pid %d went away before it released its "
                  "memory file", (int)sc.pred.pid);
        close(sc.pred.fd);
        sc.pred.fd = -1;
        if (wait_exited(sc.pred.pid, GONE_MS) != 0 ||
            wait_file_free(GONE_MS) != 0) {
            return EX_TEMPFAIL;
        }
    }
    return 0;
}

struct given *
succession_given(size_t *n)
{
    *n = sc.ngiven;
    return sc.given;
}

int
succession_given_checked(void)
{
    int rc = 0;

    for (size_t i = 0; i < sc.ngiven; i++) {
        struct given *g = &sc.given[i];
        struct sock_info si;
        char name[128] = "not a socket";

        if (g->used) {
            continue;
        }
        if (sock_info(g->fd, &si) == 0) {
            sock_info_name(&si, name, sizeof(name));
        }
        if (g->origin == GIVEN_UNIT) {
            log_error("systemd socket activation: fd %d is %s, which no "
                      "-l, -p, -U or -s option names", g->fd, name);
            rc = EX_CONFIG;
        } else {
            log_info("fd %d from %s is %s, which no option names now: "
                     "closed", g->fd, given_origin_name(g->origin), name);
        }
        close(g->fd);
        g->fd = -1;
        g->used = true;
    }
    return rc;
}

/* ---- serving ---------------------------------------------------------- */

/* Is fd a .socket unit's listener (which systemd holds itself)? */
static bool
unit_socket(int fd)
{
    for (size_t k = 0; k < sc.ngiven; k++) {
        if (sc.given[k].fd == fd && sc.given[k].origin == GIVEN_UNIT) {
            return true;
        }
    }
    return false;
}

/* The listeners into the fd store: a crash, too, leaves the port taking
 * connections. */
static void
store_listeners(void)
{
    int fds[MAX_SOCKETS];
    size_t n = listen_fds(fds, MAX_SOCKETS);

    n += udp_fds(fds + n, MAX_SOCKETS - n);
    fdstore_keep_listeners(fds, n, unit_socket);
}

void
succession_serving(void)
{
    size_t n = sc.conns.nconns;

    bool returns = sc.pred.version >= 6 &&
                   respawn_hands_back(sc.pred.pid);
    char ready[64];

    if (sc.pred.fd >= 0) {
        /* Until this is said the node taken over from may serve again:
         * not a byte is read from its connections before. */
        takeover_step("new", "serving");
        if (takeover_send(sc.pred.fd, TAKEOVER_TAKEN) != 0) {
            log_error("takeover: pid %d is gone", (int)sc.pred.pid);
        }
        close(sc.pred.fd);
        sc.pred.fd = -1;
        log_info("takeover: serving in place of pid %d, with its %zu "
                 "connections", (int)sc.pred.pid, n);
        if (sdaemon_notifying() && !returns) {
            /* the unit's main process now (the node taken over from says
             * so too); needs NotifyAccess=all until the manager agrees.
             * Not so for the successor a main process started itself,
             * which hands the node back (respawn.h). */
            char msg[32];

            snprintf(msg, sizeof(msg), "MAINPID=%d", (int)getpid());
            sdaemon_notify(msg, NULL, 0);
        }
    }
    stats.server.handover_conns_taken = sc.conns.nconns;
    stats.server.handover_conns_closed = sc.conns.closed;
    worker_adopt_all(&sc.conns);
    if (sc.pred.pid > 0) {
        takeover_step("new", "dispatched");
    }
    listen_start();
    image_let_go();
    if (sdaemon_fdstore()) {
        store_listeners();
    }
    /* the status counts the reloads, said by the unit's main process
     * only (a successor that hands back is not) */
    snprintf(ready, sizeof(ready), "READY=1\nSTATUS=serving, %lu reloads",
             respawn_reloads());
    sdaemon_notify(returns ? "READY=1" : ready, NULL, 0);
}

/* ---- handing on ------------------------------------------------------- */

/* The listening sockets and UDP sockets this node hands on, those a
 * .socket unit holds first (*nunit of them). */
static size_t
sockets(int *fds, size_t max, size_t *nunit)
{
    size_t n = listen_fds(fds, max), u = 0;

    for (size_t i = 0; i < sc.left.nudp && n < max; i++) {
        fds[n++] = sc.left.udp[i];
    }
    if (sc.tfd >= 0 && n < max) {
        fds[n++] = sc.tfd;
    }
    for (size_t i = 0; i < n; i++) {
        if (unit_socket(fds[i])) {
            int fd = fds[i];

            fds[i] = fds[u];
            fds[u++] = fd;
        }
    }
    *nunit = u;
    return n;
}

/* Everything but the memory file to the successor (the connections'
 * sockets it does not hold already), in the records' layout of
 * `version`: 0 or -1. */
static int
send_sockets(int sock, uint32_t version)
{
    int fds[MAX_SOCKETS], *conns, state, rc;
    size_t nunit, n = sockets(fds, MAX_SOCKETS, &nunit), k = 0;

    if ((conns = calloc(sc.left.nconns + 1, sizeof(*conns))) == NULL) {
        return -1;
    }
    for (size_t i = 0; i < sc.left.nconns; i++) {
        if (sc.left.conns[i].presented < 0) {
            conns[k++] = sc.left.conns[i].fd;
        }
    }
    state = handover_save(&sc.left, version);
    if (version < 6) {
        nunit = 0;              /* it keeps them all as its own */
    }
    rc = state < 0 ||
         (nunit > 0 &&
          takeover_send_fds(sock, TAKEOVER_UNIT_LISTENERS, fds, nunit)
          != 0) ||
         takeover_send_fds(sock, TAKEOVER_LISTENERS, fds + nunit,
                           n - nunit) != 0 ||
         takeover_send_fds(sock, TAKEOVER_CONNS, conns, k) != 0 ||
         takeover_send_fds(sock, TAKEOVER_STATE, &state, 1) != 0 ? -1 : 0;
    if (state >= 0) {
        close(state);
    }
    free(conns);
    return rc;
}

void
succession_store_index(void)
{
    fdstore_put_index(image_written(sc.index_room, NULL));
    sc.index_room = -1;
}

/* The successor went away before it served: serve on, the memory file
 * opened again if it was released.  A file that cannot be opened again
 * ends the node. */
static void
resume(const struct takeover_peer *p, bool reopen)
{
    struct given *g = calloc(sc.left.nudp + 1, sizeof(*g));

    log_error("takeover: pid %d went away before it served: serving on",
              (int)p->pid);
    if (reopen) {
        cache_shutdown();           /* what cache_stop() left */
        wait_file_free(GONE_MS);
        restart_meta_check();
        if (cache_init(&settings.cache, (unsigned)settings.num_threads)
            != 0 || restart_meta_write(false) != 0) {
            log_error("takeover: the memory file cannot be opened again");
            exit(EXIT_FAILURE);
        }
    }
    for (size_t i = 0; g != NULL && i < sc.left.nudp; i++) {
        g[i] = (struct given){ .fd = sc.left.udp[i],
                                      .origin = GIVEN_TAKEOVER };
    }
    udp_close();
    if (settings.udpport != 0 && g != NULL) {
        udp_open((unsigned)settings.num_threads, g, sc.left.nudp);
    }
    for (size_t i = 0; g != NULL && i < sc.left.nudp; i++) {
        if (!g[i].used) {
            close(g[i].fd);
        }
        sc.left.udp[i] = -1;
    }
    free(g);
    worker_left_free();
    if (worker_start_all((unsigned)settings.num_threads) != 0) {
        log_error("takeover: the workers cannot start again");
        exit(EXIT_FAILURE);
    }
    worker_adopt_all(&sc.left);
    listen_start();
}

/* Under systemd, pid is the unit's main process from now on: said by
 * the process the manager knows as such, and read by it (BARRIER)
 * before that one exits, which would otherwise look like the service's
 * end. */
static void
name_main_pid(pid_t pid)
{
    char msg[32];

    if (sdaemon_notifying()) {
        snprintf(msg, sizeof(msg), "MAINPID=%d", (int)pid);
        sdaemon_notify(msg, NULL, 0);
        sdaemon_barrier(1000);
    }
}

/* Where the connections left are more than what takes them (`who`) has
 * room for: the last ones close (all are at a request boundary),
 * counted, and said once. */
static void
fit_room(struct handover *h, uint64_t room, const char *who)
{
    size_t keep = h->nconns, n = h->nconns;

    if (room >= n) {
        return;
    }
    /* the ones sent ahead stay: the successor holds those already */
    for (size_t i = n; i-- > 0 && keep > room;) {
        if (h->conns[i].presented < 0) {
            close(h->conns[i].fd);
            free(h->conns[i].left);
            h->conns[i] = h->conns[--h->nconns];
            keep--;
        }
    }
    h->closed += (uint32_t)(n - keep);
    log_error("%s has room for %llu connections: %zu of the %zu closed at "
              "a request boundary", who, (unsigned long long)room, n - keep,
              n);
}

/* Send the successor the sockets of the connections ahead of the pause
 * (a socket is only a reference: this node serves on them until it
 * lets go).  0, or -1 (the successor is gone). */
static int
present(int sock, uint64_t room)
{
    int *fds = NULL;
    size_t n = 0;
    int rc = worker_present_all(&fds, &n, room);

    /* room for their records (touched now, not in the pause) */
    (void)handover_reserve(&sc.left, n);
    if (rc == 0) {
        rc = takeover_send_fds(sock, TAKEOVER_PRECONNS, fds, n);
    }
    free(fds);
    if (rc != 0) {
        worker_present_end();
    }
    return rc;
}

/* What goes before the pause, this node serving on: the successor's
 * GO (it has made room) with the connections it can take (*conns_room),
 * the hash table, the connections' sockets.  0, or -1 when the successor
 * went away or hangs (nothing has stopped). */
static int
ahead_of_pause(const struct takeover_peer *p, int room, uint64_t *conns_room)
{
    /* its main thread (accepts, the clock) waits: for a while only */
    if (p->version >= 3 &&
        takeover_wait_go(p->fd, READY_MS, conns_room) != 0) {
        log_error("takeover: pid %d was not ready: serving on",
                  (int)p->pid);
        return -1;
    }
    takeover_step("old", "offered");
    if ((p->version >= 5 && image_precopy(p, room, READY_MS) != 0) ||
        (p->version >= 4 && present(p->fd, *conns_room) != 0)) {
        log_error("takeover: pid %d went away: serving on", (int)p->pid);
        return -1;
    }
    return 0;
}

/* Hand everything to the successor p: 0 once it serves, -1 when it went
 * away first (this node then serves on). */
static int
hand_over(struct takeover_peer *p)
{
    int room = p->version >= 2 ? cache_image_room() : -1;
    uint64_t conns_room = UINT64_MAX;
    char who[64];

    if (ahead_of_pause(p, room, &conns_room) != 0) {
        if (room >= 0) {
            close(room);
        }
        return -1;
    }
    takeover_step("old", "presented");
    listen_stop();
    worker_leave_all(&sc.left, DRAIN_MS);
    takeover_step("old", "left");
    snprintf(who, sizeof(who), "takeover: pid %d", (int)p->pid);
    fit_room(&sc.left, conns_room, who);
    if (send_sockets(p->fd, p->version) != 0) {
        if (room >= 0) {
            close(room);
        }
        resume(p, false);
        return -1;
    }
    takeover_step("old", "sent");
    cache_stop(false);          /* its memory is freed once it exits */
    restart_meta_write(true);
    if ((room >= 0 && image_send(p->fd, room) != 0) ||
        takeover_send(p->fd, TAKEOVER_RELEASED) != 0) {
        resume(p, true);
        return -1;
    }
    takeover_step("old", "released");
    if (takeover_wait(p->fd, TAKEOVER_TAKEN, -1) != 0) {
        resume(p, true);
        return -1;
    }
    sc.returns = p->version >= 6 && respawn_returns(p->pid);
    if (!sc.returns) {
        name_main_pid(p->pid);
    }
    worker_left_free();
    log_info("takeover: pid %d serves, with %zu connections", (int)p->pid,
             sc.left.nconns);
    return 0;
}

static void
on_successor(evutil_socket_t lfd, short what, void *arg)
{
    struct takeover_peer p;
    char why[256];
    uint64_t file[2];
    int rc;

    (void)what;
    (void)arg;
    cache_image_file(&file[0], &file[1]);
    rc = takeover_accept(lfd, &p, cache_image_size(), file, why,
                         sizeof(why));
    if (rc < 0) {
        log_info("takeover: %s", why);
        return;
    }
    if (rc > 0) {
        /* p.fd stays open until this node has stopped: its successor
         * waits for that */
        log_error("takeover: %s: stopping without a handover", why);
        event_base_loopbreak(sc.base);
        return;
    }
    log_info("takeover: pid %d takes over", (int)p.pid);
    if (hand_over(&p) == 0) {
        sc.handed_over = true;
        event_base_loopbreak(sc.base);
    }
    close(p.fd);
}

int
succession_listen(struct event_base *base)
{
    size_t n;
    struct given *g = succession_given(&n);

    sc.base = base;
    if (settings.takeover == NULL) {
        return 0;
    }
    if ((sc.tfd = takeover_listen(settings.takeover, g, n)) < 0) {
        return EX_OSERR;
    }
    sc.tev = event_new(base, sc.tfd, EV_READ | EV_PERSIST, on_successor,
                       NULL);
    if (sc.tev == NULL || event_add(sc.tev, NULL) != 0) {
        return EXIT_FAILURE;
    }
    return 0;
}

bool
succession_store(void)
{
    if (!sdaemon_fdstore()) {
        return false;
    }
    sdaemon_notify("STOPPING=1", NULL, 0);
    sc.index_room = cache_image_room();     /* while it still serves */
    listen_stop();
    worker_leave_all(&sc.left, DRAIN_MS);
    fdstore_put(&sc.left);
    worker_left_free();
    return true;
}

bool
succession_handed_over(void)
{
    return sc.handed_over;
}

bool
succession_returns(void)
{
    return sc.handed_over && sc.returns;
}

void
succession_free(void)
{
    if (sc.tev != NULL) {
        event_free(sc.tev);
        sc.tev = NULL;
    }
    if (sc.tfd >= 0) {
        close(sc.tfd);
        sc.tfd = -1;
    }
    handover_free(&sc.left, true);
    handover_free(&sc.conns, true);
    for (size_t i = 0; i < sc.ngiven; i++) {
        if (!sc.given[i].used && sc.given[i].fd >= 0) {
            close(sc.given[i].fd);
        }
    }
    free(sc.given);
    sc.given = NULL;
    sc.ngiven = 0;
    if (sc.pred.fd >= 0) {
        close(sc.pred.fd);
        sc.pred.fd = -1;
    }
}
