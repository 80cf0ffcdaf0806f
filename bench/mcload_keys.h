/*
 * mcload_keys.h: the key space, its distributions and the values' bytes
 * (mcload_keys.c).
 */
#ifndef MCPM_BENCH_MCLOAD_KEYS_H
#define MCPM_BENCH_MCLOAD_KEYS_H

#include <stddef.h>
#include <stdint.h>

/* Value bytes: the value of key i is vpattern + (i % 64), length vsize(i). */
extern char *vpattern;

struct zipf {
    double s;
    double n;
    double hx1;
    double hn;
    double sv;
};

/* A per-thread generator (splitmix64): the next number, one in [0, 1). */
uint64_t mix64(uint64_t x);
uint64_t rng_next(uint64_t *state);
double rng_unit(uint64_t *state);
/* Key idx's value: its length and its bytes (in vpattern); its key
 * written into dst (MAX_KEY_LEN bytes), the length. */
uint32_t vsize(uint64_t idx);
const char *vbytes(uint64_t idx);
size_t key_format(char *dst, uint64_t idx);
/* Zipf's law with exponent s over n keys: set up, and the next index. */
void zipf_init(struct zipf *z, double s, uint64_t n);
uint64_t zipf_next(const struct zipf *z, uint64_t *rng);
/* vpattern, once the options are read: 0, or -1 out of memory. */
int pattern_init(void);

#endif
