/*
 * mcload_send.h: requests out (mcload_send.c).
 */
#ifndef MCPM_BENCH_MCLOAD_SEND_H
#define MCPM_BENCH_MCLOAD_SEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench/mcload_conn.h"

/* Room for need more bytes at the end of b: 0, or -1 out of memory. */
int buf_reserve(struct buf *b, size_t need);
/* The counters of the phase c's worker is in. */
struct counters *conn_counters(struct conn *c);
/* UDP: every datagram waiting, frames off, into c->in: 0, or -1. */
int udp_receive(struct conn *c);
/* Is the run held to --rate? */
bool paced(const struct worker *w);
/* Requests into c->out up to the depth (and the pace), each stamped;
 * write what is queued; retire c, idle, keeping its socket for the
 * next phase; close it (failed: a connection error). */
int conn_fill(struct conn *c, uint64_t stamp);
void conn_flush(struct conn *c);
void conn_idle(struct conn *c);
void conn_close(struct conn *c, bool failed);

#endif
