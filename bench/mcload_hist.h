/*
 * mcload_hist.h: the clock and the latency histogram (mcload_hist.c).
 */
#ifndef MCPM_BENCH_MCLOAD_HIST_H
#define MCPM_BENCH_MCLOAD_HIST_H

#include <stdint.h>

/* Latencies in log-linear buckets of nanoseconds, 64 to a power of two
 * (mcload_hist.c draws the index). */
#define HIST_SUB 64
#define HIST_BUCKETS (HIST_SUB * 60)

struct hist {
    uint64_t count[HIST_BUCKETS];
    uint64_t total;
    uint64_t max;
};

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t now_ns(void);
/* One value in, one histogram into another, the value at percentile p
 * (0-100) as the middle of its bucket. */
void hist_add(struct hist *h, uint64_t v);
void hist_merge(struct hist *dst, const struct hist *src);
uint64_t hist_pct(const struct hist *h, double p);

#endif
