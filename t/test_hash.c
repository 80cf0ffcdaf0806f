/*
 * test_hash.c: MurmurHash3 x86_32 against vectors computed independently
 * (the published values for "hello", "test" and the pangram, and a Python
 * transcription of the algorithm for the rest), every tail length, high
 * bytes and unaligned keys; lookup3 (jenkins) against its published
 * values ("" and "Four score...") and a Python transcription; xxh3 against
 * its published empty-key value; hash_key() following hash_use().
 */
#include "storage/base/hash.h"

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

static const struct vector jenkins_vectors[] = {
    { "", 0xdeadbeefu },            /* the seed alone */
    { "a", 0x58d68708u },
    { "Four score and seven years ago", 0x17770551u },
    { "abcdefghijkl", 0x4012f87bu },    /* one block: the final mix */
    { "abcdefghijklm", 0x928128f9u },   /* a mixed block and a tail */
    { "foo:12345", 0x7c912c00u },
};

static void
test_jenkins(void)
{
    char name[128];

    for (size_t i = 0; i < sizeof(jenkins_vectors) /
         sizeof(jenkins_vectors[0]); i++) {
        const struct vector *v = &jenkins_vectors[i];

        snprintf(name, sizeof(name), "jenkins(\"%s\")", v->key);
        is_int(hash_jenkins(v->key, strlen(v->key)), v->hash, name);
    }
}

static void
test_choice(void)
{
    const char *k = "foo:12345";

    /* XXH3_64bits("") is 0x2d06800538d394c2; the low half is kept. */
    is_int(hash_xxh3("", 0), 0x38d394c2u, "xxh3(\"\") low 32 bits");
    is_int(hash_by_name("xxh3"), HASH_XXH3, "xxh3 by name");
    is_int(hash_by_name("jenkins"), HASH_JENKINS, "jenkins by name");
    is_int(hash_by_name("murmur3"), HASH_MURMUR3, "murmur3 by name");
    is_int(hash_by_name("crc32"), -1, "unknown name");
    is_str(hash_name(HASH_MURMUR3), "murmur3", "name of murmur3");
    is_int(hash_key(k, 9), hash_xxh3(k, 9), "xxh3 is the default");
    hash_use(HASH_JENKINS);
    is_int(hash_key(k, 9), 0x7c912c00u, "hash_key after hash_use(jenkins)");
    hash_use(HASH_MURMUR3);
    is_int(hash_key(k, 9), 0x80fb854du, "hash_key after hash_use(murmur3)");
    hash_use(HASH_XXH3);
}

int
main(void)
{
    test_jenkins();
    test_choice();
    test_vectors();
    test_high_bytes();
    test_unaligned();
    test_length_matters();
    return done_testing();
}
