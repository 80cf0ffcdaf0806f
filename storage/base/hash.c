/*
 * hash.c: the three key hashes, and the one in use.
 *
 * MurmurHash3, the x86 32-bit variant, seed 0, and lookup3's hashlittle,
 * initval 0, are written from the published descriptions of the
 * algorithms; XXH3 is libxxhash's, inlined from its header.
 *
 * MurmurHash3: the key is read
 * as little-endian 32-bit blocks, each block is scrambled and mixed into the
 * state, the 1..3 trailing bytes are scrambled into it, and a final
 * avalanche spreads every input bit over the whole result.
 *
 * Blocks are assembled byte by byte, so keys at any alignment are read
 * safely and the result is the same on big- and little-endian hosts (the
 * compiler turns the assembly into one load on x86).
 */
#include "storage/base/hash.h"

#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

static enum hash_algorithm in_use = HASH_XXH3;

static const char *const names[] = {
    [HASH_XXH3] = "xxh3",
    [HASH_MURMUR3] = "murmur3",
    [HASH_JENKINS] = "jenkins",
};

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

/* ---- lookup3 (jenkins) ------------------------------------------------ */

/* The 1..4 bytes of a block at p, little-endian, missing ones zero. */
static inline uint32_t
load_part(const unsigned char *p, size_t n)
{
    uint32_t v = 0;

    for (size_t i = 0; i < n && i < 4; i++) {
        v |= (uint32_t)p[i] << (8 * i);
    }
    return v;
}

#define JMIX(a, b, c) do {                                                  \
        a -= c; a ^= rotl32(c, 4);  c += b;                                 \
        b -= a; b ^= rotl32(a, 6);  a += c;                                 \
        c -= b; c ^= rotl32(b, 8);  b += a;                                 \
        a -= c; a ^= rotl32(c, 16); c += b;                                 \
        b -= a; b ^= rotl32(a, 19); a += c;                                 \
        c -= b; c ^= rotl32(b, 4);  b += a;                                 \
    } while (0)

#define JFINAL(a, b, c) do {                                                \
        c ^= b; c -= rotl32(b, 14);                                         \
        a ^= c; a -= rotl32(c, 11);                                         \
        b ^= a; b -= rotl32(a, 25);                                         \
        c ^= b; c -= rotl32(b, 16);                                         \
        a ^= c; a -= rotl32(c, 4);                                          \
        b ^= a; b -= rotl32(a, 14);                                         \
        c ^= b; c -= rotl32(b, 24);                                         \
    } while (0)

/* Twelve bytes at a time into three words, mixed; the last 1..12 bytes
 * (zero-padded) get the final mix instead.  An empty key is the seed. */
uint32_t
hash_jenkins(const void *key, size_t len)
{
    const unsigned char *p = key;
    uint32_t a, b, c;

    a = b = c = 0xdeadbeefu + (uint32_t)len;
    while (len > 12) {
        a += load_le32(p);
        b += load_le32(p + 4);
        c += load_le32(p + 8);
        JMIX(a, b, c);
        len -= 12;
        p += 12;
    }
    if (len == 0) {
        return c;
    }
    a += load_part(p, len);
    b += len > 4 ? load_part(p + 4, len - 4) : 0;
    c += len > 8 ? load_part(p + 8, len - 8) : 0;
    JFINAL(a, b, c);
    return c;
}

/* ---- xxh3, and the choice --------------------------------------------- */

uint32_t
hash_xxh3(const void *key, size_t len)
{
    return (uint32_t)XXH3_64bits(key, len);
}

void
hash_use(enum hash_algorithm alg)
{
    in_use = alg;
}

int
hash_by_name(const char *name)
{
    for (size_t i = 0; name != NULL && i < sizeof(names) / sizeof(*names);
         i++) {
        if (strcmp(name, names[i]) == 0) {
            return (int)i;
        }
    }
    return -1;
}

const char *
hash_name(enum hash_algorithm alg)
{
    return names[alg];
}

uint32_t
hash_key(const void *key, size_t len)
{
    switch (in_use) {
    case HASH_MURMUR3:
        return hash_murmur3(key, len);
    case HASH_JENKINS:
        return hash_jenkins(key, len);
    default:
        return hash_xxh3(key, len);
    }
}
