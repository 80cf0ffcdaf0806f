/*
 * fdstore.c: systemd's file descriptor store across a restart
 * (fdstore.h).
 */
#include "config.h"

#include "memcached-pm/life/fdstore.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memcached-pm/base/log.h"
#include "memcached-pm/base/settings.h"
#include "memcached-pm/life/sdaemon.h"

/* What this node put in the store while serving: its listeners. */
static size_t listeners_stored;

/* ---- at start --------------------------------------------------------- */

/* Connections' fds by their index in the state file: in the store
 * under names that end with it. */
struct stored {
    int    *fds;
    size_t  n;
};

static int
stored_fd(const struct handover_conn *c, unsigned i, void *arg)
{
    struct stored *st = arg;
    int fd;

    (void)c;
    if (i >= st->n || st->fds[i] < 0) {
        return -1;
    }
    fd = st->fds[i];
    st->fds[i] = -1;        /* taken */
    return fd;
}

/* A connection's name in the fd store: its index, or -1. */
static long
conn_index(const char *name)
{
    size_t n = strlen(HANDOVER_CONN_PREFIX);
    char *end;
    long i;

    if (strncmp(name, HANDOVER_CONN_PREFIX, n) != 0 || name[n] == '\0') {
        return -1;
    }
    i = strtol(name + n, &end, 10);
    return *end == '\0' && i >= 0 && i < (1L << 24) ? i : -1;
}

static int
keep_stored(struct stored *st, long i, int fd)
{
    if ((size_t)i >= st->n) {
        int *a = realloc(st->fds, (size_t)(i + 1) * sizeof(*a));

        if (a == NULL) {
            close(fd);
            return -1;
        }
        for (size_t k = st->n; k <= (size_t)i; k++) {
            a[k] = -1;
        }
        st->fds = a;
        st->n = (size_t)i + 1;
    }
    if (st->fds[i] >= 0) {
        close(st->fds[i]);  /* one name, one socket */
    }
    st->fds[i] = fd;
    return 0;
}

/* The state file of the last stop: its connections into *conns. */
static void
load_stored(int state, struct stored *st, struct handover *conns)
{
    char err[256];

    if (handover_load(state, conns, stored_fd, st, err,
                      sizeof(err)) != 0) {
        log_error("systemd: the connections of the last stop are "
                  "dropped: %s", err);
    }
    for (size_t i = 0; i < st->n; i++) {
        if (st->fds[i] >= 0) {
            close(st->fds[i]);      /* not in the state: stale */
        }
    }
}

void
fdstore_take(struct handover *conns,
             int (*keep)(int fd, enum given_origin origin))
{
    struct sdaemon_fd *fds;
    struct stored st = { NULL, 0 };
    size_t n = sdaemon_listen_fds(&fds);
    int state = -1;

    for (size_t i = 0; i < n; i++) {
        const char *name = fds[i].name;
        long ci = conn_index(name);

        if (strcmp(name, HANDOVER_STATE_NAME) == 0 && state < 0) {
            state = fds[i].fd;
        } else if (strcmp(name, HANDOVER_INDEX_NAME) == 0 &&
                   settings.cache.image_fd < 0) {
            settings.cache.image_fd = fds[i].fd;    /* cache_init() */
        } else if (strcmp(name, HANDOVER_STATE_NAME) == 0 ||
                   strcmp(name, HANDOVER_INDEX_NAME) == 0) {
            close(fds[i].fd);
        } else if (ci >= 0) {
            keep_stored(&st, ci, fds[i].fd);
        } else {
            keep(fds[i].fd, strcmp(name, HANDOVER_LISTEN_NAME) == 0
                            ? GIVEN_STORE : GIVEN_UNIT);
        }
    }
    if (state >= 0) {
        load_stored(state, &st, conns);
        close(state);
    } else {
        for (size_t i = 0; i < st.n; i++) {
            if (st.fds[i] >= 0) {
                close(st.fds[i]);
            }
        }
    }
    /* The store lets go of what this start took: a connection must close
     * when this node closes it, and a crash must not bring back a state
     * older than what this node serves. */
    if (settings.cache.image_fd >= 0) {
        sdaemon_store_remove(HANDOVER_INDEX_NAME);
    }
    if (state >= 0 || st.n > 0) {
        char name[64];

        sdaemon_store_remove(HANDOVER_STATE_NAME);
        for (size_t i = 0; i < st.n; i++) {
            snprintf(name, sizeof(name), "%s%zu", HANDOVER_CONN_PREFIX, i);
            sdaemon_store_remove(name);
        }
    }
    if (n > 0) {
        log_info("systemd: %zu sockets passed, %zu connections to serve",
                 n, conns->nconns);
    }
    free(st.fds);
    free(fds);
}

/* ---- while serving ---------------------------------------------------- */

void
fdstore_keep_listeners(const int *fds, size_t n, bool (*unit)(int fd))
{
    sdaemon_store_remove(HANDOVER_LISTEN_NAME);
    listeners_stored = 0;
    for (size_t i = 0; i < n; i++) {
        if (!unit(fds[i]) &&
            sdaemon_store(fds[i], HANDOVER_LISTEN_NAME) == 0) {
            listeners_stored++;
        }
    }
}

/* ---- at a stop -------------------------------------------------------- */

/* How many of n connections the store has room for, beside what else it
 * will hold (the listeners, the UDP sockets, the state and the index). */
static size_t
room_for(size_t n, size_t besides)
{
    long max = sdaemon_fdstore_max();

    if (max < 0) {
        return n;           /* not said: as many as there are */
    }
    return (size_t)max > besides ? (size_t)max - besides : 0;
}

void
fdstore_put(struct handover *h)
{
    size_t room = room_for(h->nconns, listeners_stored + h->nudp + 2);
    char name[64];
    int state;

    if (h->nconns > room) {
        size_t over = h->nconns - room;

        for (size_t i = room; i < h->nconns; i++) {
            close(h->conns[i].fd);
            free(h->conns[i].left);
        }
        log_error("systemd: the fd store has room for %ld descriptors: "
                  "%zu of the %zu connections closed at a request boundary "
                  "(FileDescriptorStoreMax=; systemctl reload carries them "
                  "all)", sdaemon_fdstore_max(), over, h->nconns);
        h->nconns = room;
        h->closed += (uint32_t)over;
    }
    for (size_t i = 0; i < h->nconns; i++) {
        snprintf(name, sizeof(name), "%s%zu", HANDOVER_CONN_PREFIX, i);
        sdaemon_store(h->conns[i].fd, name);
    }
    for (size_t i = 0; i < h->nudp; i++) {
        sdaemon_store(h->udp[i], HANDOVER_LISTEN_NAME);
    }
    /* the state last: a start that finds it finds every connection */
    if ((state = handover_save(h, HANDOVER_VERSION)) >= 0) {
        sdaemon_store(state, HANDOVER_STATE_NAME);
        close(state);
    }
    log_info("systemd: %zu connections left in the fd store", h->nconns);
}

void
fdstore_put_index(int fd)
{
    if (fd >= 0) {
        sdaemon_store(fd, HANDOVER_INDEX_NAME);
        close(fd);
    }
}
