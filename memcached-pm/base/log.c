/*
 * log.c: the one place that writes diagnostics.
 *
 * Before log_start() and after log_stop() a message goes straight to
 * stderr.  In between (while workers run) it goes into a ring that the
 * mc-stderr thread writes out, so a worker never waits on a slow
 * terminal or a full pipe: when the ring is full the message is dropped,
 * and the next write says how many were.
 *
 * Locking: the ring's mutex, held to copy a line in or a chunk out; the
 * write itself happens outside it.
 */
#include "config.h"

#include "memcached-pm/base/log.h"
#include "storage/base/affinity.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RING_SIZE  (1024 * 1024)
#define CHUNK      (64 * 1024)

static struct {
    pthread_mutex_t lock;
    pthread_cond_t  more;
    pthread_t       thread;
    char           *ring;
    size_t          head;           /* first byte to write out */
    size_t          used;
    uint64_t        dropped;        /* lines lost since the last write */
    bool            running;
    bool            stopping;
} lg = { .lock = PTHREAD_MUTEX_INITIALIZER,
         .more = PTHREAD_COND_INITIALIZER };

static void
put(const char *s, size_t n)
{
    size_t tail = (lg.head + lg.used) % RING_SIZE;
    size_t first = n < RING_SIZE - tail ? n : RING_SIZE - tail;

    memcpy(lg.ring + tail, s, first);
    memcpy(lg.ring, s + first, n - first);
    lg.used += n;
}

void
log_write(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
    va_end(ap);
    if (n < 0) {
        return;
    }
    if ((size_t)n > sizeof(line) - 2) {
        n = sizeof(line) - 2;
    }
    line[n++] = '\n';
    pthread_mutex_lock(&lg.lock);
    if (!lg.running) {
        pthread_mutex_unlock(&lg.lock);
        fwrite(line, 1, (size_t)n, stderr);
        return;
    }
    if (RING_SIZE - lg.used >= (size_t)n) {
        put(line, (size_t)n);
        pthread_cond_signal(&lg.more);
    } else {
        lg.dropped++;
    }
    pthread_mutex_unlock(&lg.lock);
}

static void *
writer(void *arg)
{
    static char chunk[CHUNK];

    (void)arg;
    pthread_mutex_lock(&lg.lock);
    for (;;) {
        size_t n, first;
        uint64_t dropped;

        while (lg.used == 0 && lg.dropped == 0 && !lg.stopping) {
            pthread_cond_wait(&lg.more, &lg.lock);
        }
        if (lg.used == 0 && lg.dropped == 0) {
            break;              /* stopping, and all is written */
        }
        n = lg.used < CHUNK ? lg.used : CHUNK;
        first = n < RING_SIZE - lg.head ? n : RING_SIZE - lg.head;
        memcpy(chunk, lg.ring + lg.head, first);
        memcpy(chunk + first, lg.ring, n - first);
        lg.head = (lg.head + n) % RING_SIZE;
        lg.used -= n;
        dropped = lg.dropped;
        lg.dropped = 0;
        pthread_mutex_unlock(&lg.lock);
        fwrite(chunk, 1, n, stderr);
        if (dropped > 0) {
            fprintf(stderr, "(%llu log lines dropped: stderr too slow)\n",
                    (unsigned long long)dropped);
        }
        fflush(stderr);
        pthread_mutex_lock(&lg.lock);
    }
    pthread_mutex_unlock(&lg.lock);
    return NULL;
}

int
log_start(void)
{
    char *ring = malloc(RING_SIZE);

    if (ring == NULL) {
        return -1;
    }
    fflush(stderr);
    pthread_mutex_lock(&lg.lock);
    lg.ring = ring;
    lg.head = lg.used = 0;
    lg.stopping = false;
    if (pthread_create(&lg.thread, NULL, writer, NULL) != 0) {
        pthread_mutex_unlock(&lg.lock);
        free(ring);
        lg.ring = NULL;
        return -1;
    }
    lg.running = true;
    pthread_mutex_unlock(&lg.lock);
    pthread_setname_np(lg.thread, "mc-stderr");
    affinity_apply(lg.thread, AFFINITY_BG, 0);
    return 0;
}

void
log_stop(void)
{
    pthread_mutex_lock(&lg.lock);
    if (!lg.running) {
        pthread_mutex_unlock(&lg.lock);
        return;
    }
    lg.stopping = true;
    pthread_cond_signal(&lg.more);
    pthread_mutex_unlock(&lg.lock);
    pthread_join(lg.thread, NULL);
    pthread_mutex_lock(&lg.lock);
    lg.running = false;
    free(lg.ring);
    lg.ring = NULL;
    pthread_mutex_unlock(&lg.lock);
}

void
log_bin_header(int fd, char dir, const char *title, const unsigned char *h)
{
    char out[512];
    size_t n = (size_t)snprintf(out, sizeof(out), "%c%d %s", dir, fd, title);

    for (unsigned i = 0; i < 24 && n < sizeof(out) - 32; i++) {
        if (i % 4 == 0) {
            /* memcached's layout: a request's bytes indented one more */
            n += (size_t)snprintf(out + n, sizeof(out) - n, "\n%c%d %s", dir,
                                  fd, dir == '<' ? "  " : " ");
        }
        n += (size_t)snprintf(out + n, sizeof(out) - n, " 0x%02x", h[i]);
    }
    log_write("%s", out);
}
