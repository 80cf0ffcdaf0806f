/*
 * mcload_hist.c: the clock and the latency histogram.
 */
#include "config.h"

#include "bench/mcload_hist.h"

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

uint64_t
now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------ histogram */

/*
 * HDR-style log-linear buckets over nanoseconds.  Values below 128 get one
 * bucket each; above that every power of two is cut into 64 equal
 * sub-buckets, so a bucket is never wider than 1/64 of its lower bound
 * (~1.6% worst case, ~0.8% at the midpoint we report).
 *
 *   v < 128:   index = v
 *   v >= 128:  m = floor(log2 v), shift = m - 6, top = v >> shift (64..127)
 *              index = (shift + 1) * 64 + (top - 64)
 */

static unsigned
hist_index(uint64_t v)
{
    unsigned m;
    unsigned shift;
    unsigned idx;

    if (v < 2 * HIST_SUB) {
        return (unsigned)v;
    }
    m = 63 - (unsigned)__builtin_clzll(v);
    shift = m - 6;
    idx = (shift + 1) * HIST_SUB + (unsigned)((v >> shift) - HIST_SUB);
    return idx < HIST_BUCKETS ? idx : HIST_BUCKETS - 1;
}

/* Midpoint of a bucket: the value reported for every sample in it. */
static uint64_t
hist_value(unsigned idx)
{
    unsigned shift;
    uint64_t top;

    if (idx < 2 * HIST_SUB) {
        return idx;
    }
    shift = idx / HIST_SUB - 1;
    top = idx % HIST_SUB + HIST_SUB;
    return (top << shift) + ((1ull << shift) >> 1);
}

void
hist_add(struct hist *h, uint64_t v)
{
    h->count[hist_index(v)]++;
    h->total++;
    if (v > h->max) {
        h->max = v;
    }
}

void
hist_merge(struct hist *dst, const struct hist *src)
{
    for (unsigned i = 0; i < HIST_BUCKETS; i++) {
        dst->count[i] += src->count[i];
    }
    dst->total += src->total;
    if (src->max > dst->max) {
        dst->max = src->max;
    }
}

/* p in [0, 1]; never reports more than the exact maximum seen. */
uint64_t
hist_pct(const struct hist *h, double p)
{
    uint64_t want;
    uint64_t seen = 0;

    if (h->total == 0) {
        return 0;
    }
    want = (uint64_t)ceil(p * (double)h->total);
    if (want == 0) {
        want = 1;
    }
    for (unsigned i = 0; i < HIST_BUCKETS; i++) {
        seen += h->count[i];
        if (seen >= want) {
            uint64_t v = hist_value(i);
            return v < h->max ? v : h->max;
        }
    }
    return h->max;
}
