/*
 * test_hash.c: MurmurHash3 x86_32 against vectors computed independently
 * (the published values for "hello", "test" and the pangram, and a Python
 * transcription of the algorithm for the rest), every tail length, high
 * bytes and unaligned keys.
 */
#include "storage/hash.h"

#include <stdint.h>
#include <string.h>

#include "t/tap.h"

struct vector {
    const char *key;
    uint32_t hash;
};

static const struct vector vectors[] = {
    { "", 0x00000000u },
    { "a", 0x3c2569b2u },            /* 1-byte tail */
    { "ab", 0x9bbfd75fu },           /* 2-byte tail */
    { "abc", 0xb3dd93fau },          /* 3-byte tail */
    { "abcd", 0x43ed676au },         /* one block, no tail */
    { "hello", 0x248bfa47u },
    { "test", 0xba6bd213u },
    { "Hello, world!", 0xc0363e43u },
    { "The quick brown fox jumps over the lazy dog", 0x2e4ff723u },
    { "foo:12345", 0x80fb854du },
};

static void
test_vectors(void)
{
    size_t i;
    char name[128];

    for (i = 0; i < sizeof(vectors) / sizeof(vectors[0]); i++) {
        const struct vector *v = &vectors[i];

        snprintf(name, sizeof(name), "murmur3(\"%.40s\")", v->key);
        is_int(hash_murmur3(v->key, strlen(v->key)), v->hash, name);
    }
}

/* Bytes >= 0x80 catch a signed-char slip in the block or tail reads. */
static void
test_high_bytes(void)
{
    unsigned char buf[256];
    int i;

    for (i = 0; i < 256; i++) {
        buf[i] = (unsigned char)i;
    }
    is_int(hash_murmur3(buf, sizeof(buf)), 0xe40a0e56u, "bytes 0..255");
}

static void
test_unaligned(void)
{
    static const char key[] = "The quick brown fox jumps over the lazy dog";
    size_t len = strlen(key);
    char buf[128] __attribute__((aligned(8)));
    int off, same = 1;

    for (off = 0; off < 8; off++) {
        memcpy(buf + off, key, len);
        if (hash_murmur3(buf + off, len) != 0x2e4ff723u) {
            same = 0;
        }
    }
    ok(same, "same hash at every alignment 0..7");
}

/* The length is mixed in: a key and the same key plus a NUL differ. */
static void
test_length_matters(void)
{
    ok(hash_murmur3("abc", 3) != hash_murmur3("abc", 4),
       "trailing NUL changes the hash");
    ok(hash_murmur3("key1", 4) != hash_murmur3("key2", 4),
       "last byte changes the hash");
}

int
main(void)
{
    test_vectors();
    test_high_bytes();
    test_unaligned();
    test_length_matters();
    return done_testing();
}
