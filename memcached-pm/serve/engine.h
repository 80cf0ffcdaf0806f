/*
 * engine.h: the workers' event engine: io_uring where the kernel has
 * what it needs (net/ring.h), else epoll (net/evloop.h); and their rings,
 * which a successor makes before the pause of a takeover.
 */
#ifndef MCPM_ENGINE_H
#define MCPM_ENGINE_H

struct ring;
struct thread_stats;

/* Bytes of each provided receive buffer of a worker's ring: memcached's
 * read size. */
#define RING_BUFFER_SIZE 16384

/* settings.event_engine decided, once: auto and io_uring become epoll
 * where the probe fails (said on stderr). */
void engine_choose(void);

/* Before the workers start (a successor, while the node it takes over
 * still serves): the engine chosen and the rings of n workers made,
 * each counting into stats.threads[i], so that their set-up (a few
 * milliseconds, at times ten) is no part of a takeover's pause.  After
 * stats_init(). */
void engine_prepare(unsigned n);

/* Worker id's ring: the one engine_prepare() made, or a new one; NULL
 * (said on stderr) when none can be made: the worker then runs on
 * epoll.  Only under io_uring. */
struct ring *engine_ring(unsigned id, struct thread_stats *counters);

/* What engine_prepare() made and no worker took. */
void engine_prepared_free(void);

#endif
