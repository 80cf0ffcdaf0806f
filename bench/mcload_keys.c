/*
 * mcload_keys.c: the key space, its distributions (uniform, zipf, seq)
 * and the values' bytes.
 */
#include "config.h"

#include "bench/mcload_keys.h"
#include "bench/mcload_opts.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *vpattern;

uint64_t
mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

/* splitmix64: small, fast, and good enough for picking keys. */
uint64_t
rng_next(uint64_t *state)
{
    *state += 0x9e3779b97f4a7c15ull;
    return mix64(*state);
}

double
rng_unit(uint64_t *state)
{
    return (double)(rng_next(state) >> 11) * (1.0 / 9007199254740992.0);
}

uint32_t
vsize(uint64_t idx)
{
    uint32_t span = o.vmax - o.vmin + 1;

    if (span == 1) {
        return o.vmin;
    }
    return o.vmin + (uint32_t)(mix64(idx ^ 0x5bd1e995ull) % span);
}

const char *
vbytes(uint64_t idx)
{
    return vpattern + idx % 64;
}

/* Writes prefix + decimal idx; returns the length.  No NUL. */
size_t
key_format(char *dst, uint64_t idx)
{
    char digits[24];
    size_t plen = strlen(o.prefix);
    size_t n = 0;

    memcpy(dst, o.prefix, plen);
    do {
        digits[n++] = (char)('0' + idx % 10);
        idx /= 10;
    } while (idx != 0);
    for (size_t i = 0; i < n; i++) {
        dst[plen + i] = digits[n - 1 - i];
    }
    return plen + n;
}

/*
 * Zipf sampling by rejection-inversion (Hoermann and Derflinger, 1996):
 * O(1) memory, so a 20M-key space needs no CDF table.  H is an integral of
 * the density x^-s, Hinv its inverse; both are written with log1p/expm1 so
 * that s near 1 stays accurate.
 */

static double
zipf_expm1_over(double t)
{
    return fabs(t) > 1e-8 ? expm1(t) / t : 1.0 + t / 2.0;
}

static double
zipf_log1p_over(double t)
{
    return fabs(t) > 1e-8 ? log1p(t) / t : 1.0 - t / 2.0;
}

static double
zipf_h_int(const struct zipf *z, double x)
{
    double lx = log(x);

    return zipf_expm1_over((1.0 - z->s) * lx) * lx;
}

static double
zipf_h_inv(const struct zipf *z, double x)
{
    double t = x * (1.0 - z->s);

    if (t < -1.0) {
        t = -1.0;
    }
    return exp(zipf_log1p_over(t) * x);
}

static double
zipf_h(const struct zipf *z, double x)
{
    return exp(-z->s * log(x));
}

void
zipf_init(struct zipf *z, double s, uint64_t n)
{
    z->s = s;
    z->n = (double)n;
    z->hx1 = zipf_h_int(z, 1.5) - 1.0;
    z->hn = zipf_h_int(z, z->n + 0.5);
    z->sv = 2.0 - zipf_h_inv(z, zipf_h_int(z, 2.5) - zipf_h(z, 2.0));
}

/* Returns a rank in [0, n); rank 0 is the most popular key. */
uint64_t
zipf_next(const struct zipf *z, uint64_t *rng)
{
    for (;;) {
        double u = z->hn + rng_unit(rng) * (z->hx1 - z->hn);
        double x = zipf_h_inv(z, u);
        double k = floor(x + 0.5);

        if (k < 1.0) {
            k = 1.0;
        } else if (k > z->n) {
            k = z->n;
        }
        if (k - x <= z->sv || u >= zipf_h_int(z, k + 0.5) - zipf_h(z, k)) {
            return (uint64_t)k - 1;
        }
    }
}

int
pattern_init(void)
{
    static const char alphabet[] =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_";

    vpattern = malloc((size_t)o.vmax + 64);
    if (vpattern == NULL) {
        return -1;
    }
    for (size_t i = 0; i < (size_t)o.vmax + 64; i++) {
        vpattern[i] = alphabet[(i * 7 + i / 64) % 64];
    }
    return 0;
}
