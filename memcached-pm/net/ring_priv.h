/*
 * ring_priv.h: what ring.c (the ring, its completions and its loop) gives
 * ring_io.c (sources and their transport); no one else includes it.  The
 * two share their state through ring_types.h; ring_io.c calls ring.c,
 * never the other way.
 */
#ifndef MCPM_RING_PRIV_H
#define MCPM_RING_PRIV_H

#include <stdbool.h>
#include <stdint.h>

#include "memcached-pm/net/ring.h"
#include "memcached-pm/net/ring_types.h"

/* Start a ring made disabled, on the thread that will submit to it. */
int ring_enable(struct ring *r);

/* Register the files of the sources ring_add() gave slots since the
 * last call: before any submission. */
void ring_register(struct ring *r);

/* A free submission slot (NULL only before the ring is taken over). */
struct io_uring_sqe *ring_sqe(struct ring *r);

/* Give received buffer bid back to the kernel (published at the next
 * submission). */
void ring_buf_return(struct ring *r, int bid);

/* Queue io for the pass's callbacks, noting `what` became ready. */
void ring_ready(struct ring *r, struct ring_io *io, short what);

/* A stream source that reads: arm its receive once its inbox drained
 * and a buffer is free (else it waits on the starved list). */
void ring_want_recv(struct ring *r, struct ring_io *io);

/* Cancel the operation whose user_data is `what`. */
void ring_cancel(struct ring *r, uint64_t what);

/* Poll a readiness source for what it wants. */
void ring_arm_poll(struct ring *r, struct ring_io *io);

#endif
