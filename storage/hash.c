/*
 * hash.c: MurmurHash3, the x86 32-bit variant, seed 0.
 *
 * Written from the published description of the algorithm: the key is read
 * as little-endian 32-bit blocks, each block is scrambled and mixed into the
 * state, the 1..3 trailing bytes are scrambled into it, and a final
 * avalanche spreads every input bit over the whole result.
 *
 * Blocks are assembled byte by byte, so keys at any alignment are read
 * safely and the result is the same on big- and little-endian hosts (the
 * compiler turns the assembly into one load on x86).
 */
#include "storage/hash.h"

#define C1 0xcc9e2d51u
#define C2 0x1b873593u

static inline uint32_t
rotl32(uint32_t x, unsigned r)
{
    return (x << r) | (x >> (32 - r));
}

static inline uint32_t
load_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) |
           ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* The per-block scramble, shared by the body and the tail. */
static inline uint32_t
scramble(uint32_t k)
{
    k *= C1;
    k = rotl32(k, 15);
    return k * C2;
}

/* Final avalanche: every input bit affects every output bit. */
static inline uint32_t
fmix32(uint32_t h)
{
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

static inline uint32_t
tail_block(const unsigned char *tail, size_t n)
{
    uint32_t k = 0;

    switch (n) {
    case 3:
        k |= (uint32_t)tail[2] << 16;
        /* fall through */
    case 2:
        k |= (uint32_t)tail[1] << 8;
        /* fall through */
    case 1:
        k |= tail[0];
        break;
    default:
        break;
    }
    return k;
}

uint32_t
hash_murmur3(const void *key, size_t len)
{
    const unsigned char *p = key;
    size_t nblocks = len / 4;
    uint32_t h = 0;
    size_t i;

    for (i = 0; i < nblocks; i++) {
        h ^= scramble(load_le32(p + i * 4));
        h = rotl32(h, 13);
        h = h * 5 + 0xe6546b64u;
    }
    if (len & 3) {
        h ^= scramble(tail_block(p + nblocks * 4, len & 3));
    }
    /* The reference mixes in the length modulo 2^32. */
    h ^= (uint32_t)len;
    return fmix32(h);
}
