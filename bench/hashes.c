/*
 * hashes: the three key hashes (-o hash_algorithm) side by side, in
 * nanoseconds per key at the key lengths memcached clients use, and each
 * one's speed over murmur3 (memcached's default) in the same run.
 *
 *   bench/hashes [-n rounds]
 *
 * Keys are 4096 distinct strings per length, read in turn, so the loop
 * measures the hash and not one cached key; each length runs every hash
 * in turn, three times, and keeps each hash's best.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "storage/base/hash.h"

#define NKEYS   4096
#define KEYMAX  250
#define TRIES   3

static char keys[NKEYS][KEYMAX];

static const struct {
    const char *name;
    uint32_t  (*fn)(const void *, size_t);
} hashes[] = {
    { "murmur3", hash_murmur3 },
    { "jenkins", hash_jenkins },
    { "xxh3", hash_xxh3 },
};
#define NHASH (sizeof(hashes) / sizeof(hashes[0]))

static double
now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Nanoseconds per key of hash h over every key cut to len bytes. */
static double
run(unsigned h, size_t len, unsigned rounds)
{
    volatile uint32_t sink = 0;
    double t = now();

    for (unsigned r = 0; r < rounds; r++) {
        for (unsigned i = 0; i < NKEYS; i++) {
            sink += hashes[h].fn(keys[i], len);
        }
    }
    (void)sink;
    return (now() - t) * 1e9 / ((double)rounds * NKEYS);
}

int
main(int argc, char **argv)
{
    static const size_t lens[] = { 8, 16, 32, 64, 128, 250 };
    unsigned rounds = 2000;
    int ch;

    while ((ch = getopt(argc, argv, "n:")) != -1) {
        if (ch != 'n' || (rounds = (unsigned)atoi(optarg)) == 0) {
            fprintf(stderr, "usage: %s [-n rounds]\n", argv[0]);
            return 64;
        }
    }
    for (unsigned i = 0; i < NKEYS; i++) {
        for (unsigned j = 0; j < KEYMAX; j++) {
            keys[i][j] = (char)('a' + (i * 7 + j * 13 + i / 26) % 26);
        }
    }
    printf("%-8s", "key len");
    for (unsigned h = 0; h < NHASH; h++) {
        printf(" %9s", hashes[h].name);
    }
    printf("   ns per key; then each over murmur3\n");
    for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
        double best[NHASH];

        for (unsigned h = 0; h < NHASH; h++) {
            best[h] = 1e9;
        }
        for (int t = 0; t < TRIES; t++) {
            for (unsigned h = 0; h < NHASH; h++) {
                double ns = run(h, lens[l], rounds);

                best[h] = ns < best[h] ? ns : best[h];
            }
        }
        printf("%-8zu", lens[l]);
        for (unsigned h = 0; h < NHASH; h++) {
            printf(" %9.2f", best[h]);
        }
        printf("  ");
        for (unsigned h = 1; h < NHASH; h++) {
            printf(" %s %.2fx", hashes[h].name, best[0] / best[h]);
        }
        printf("\n");
    }
    return 0;
}
