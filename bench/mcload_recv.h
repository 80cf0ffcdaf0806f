/*
 * mcload_recv.h: replies in (mcload_recv.c).
 */
#ifndef MCPM_BENCH_MCLOAD_RECV_H
#define MCPM_BENCH_MCLOAD_RECV_H

#include <stdint.h>

#include "bench/mcload_conn.h"

/* Every whole reply in c->in, checked and timed: 0, or -1 when the
 * server said what a correct one would not (the connection closes). */
int conn_parse(struct conn *c, uint64_t now);
/* After a read: refill, write, or go idle. */
void conn_advance(struct conn *c);

#endif
