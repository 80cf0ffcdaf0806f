/*
 * engine.c: the workers' event engine and their rings (engine.h).
 */
#include "config.h"

#include "memcached-pm/serve/engine.h"

#include <stdbool.h>
#include <stdlib.h>

#include "memcached-pm/base/log.h"
#include "memcached-pm/base/settings.h"
#include "memcached-pm/base/stats.h"
#include "memcached-pm/net/ring.h"

/* Rings made ahead by engine_prepare(), each taken by its worker. */
static struct ring **made;
static unsigned nmade;

static struct ring_config
config(void)
{
    return (struct ring_config){
        .entries = settings.ring_entries,
        .buffers = settings.ring_buffers,
        .buffer_size = RING_BUFFER_SIZE,
        .sqpoll = settings.ring_sqpoll,
        .files = settings.ring_files ? (unsigned)settings.maxconns : 0,
    };
}

void
engine_choose(void)
{
    static bool chosen;
    char why[128];

    if (chosen || settings.event_engine == ENGINE_EPOLL) {
        chosen = true;
        return;
    }
    chosen = true;
    if (ring_probe(why, sizeof(why))) {
        settings.event_engine = ENGINE_IO_URING;
    } else if (settings.event_engine == ENGINE_AUTO) {
        log_info("io_uring cannot be used (%s): the workers use epoll", why);
        settings.event_engine = ENGINE_EPOLL;
    } else {
        log_error("io_uring cannot be used (%s): the workers use epoll",
                  why);
        settings.event_engine = ENGINE_EPOLL;
    }
}

void
engine_prepare(unsigned n)
{
    struct ring_config cfg = config();
    char why[128];

    engine_choose();
    if (settings.event_engine != ENGINE_IO_URING || made != NULL ||
        (made = calloc(n, sizeof(*made))) == NULL) {
        return;
    }
    nmade = n;
    for (unsigned i = 0; i < n; i++) {
        made[i] = ring_new(&cfg, &stats.threads[i], why, sizeof(why));
    }
}

struct ring *
engine_ring(unsigned id, struct thread_stats *counters)
{
    struct ring_config cfg = config();
    struct ring *r;
    char why[128];

    if (id < nmade && made[id] != NULL) {
        r = made[id];
        made[id] = NULL;
        return r;
    }
    if ((r = ring_new(&cfg, counters, why, sizeof(why))) == NULL) {
        log_error("worker %u: no io_uring (%s): it uses epoll", id, why);
    }
    return r;
}

void
engine_prepared_free(void)
{
    for (unsigned i = 0; i < nmade; i++) {
        if (made[i] != NULL) {
            ring_free(made[i]);
        }
    }
    free(made);
    made = NULL;
    nmade = 0;
}
