/*
 * hash.h: the 32-bit key hash used by the hash table, the item lock
 * stripes and prefetch, one of three (-o hash_algorithm, as memcached):
 *
 *   xxh3     XXH3's 64-bit hash, low 32 bits (libxxhash's header, inlined):
 *            the default, the fastest at every key length (doc/BENCHMARKS.md)
 *   murmur3  MurmurHash3 x86_32, seed 0: memcached's default
 *   jenkins  Bob Jenkins' lookup3 hashlittle, initval 0: memcached's
 *            pre-1.5 default
 *
 * The hash never leaves the process: a memory file's items are linked
 * again from their keys at start, so a restart may change it.
 */
#ifndef MCPM_STORAGE_HASH_H
#define MCPM_STORAGE_HASH_H

#include <stddef.h>
#include <stdint.h>

#include "storage/base/options.h"        /* enum hash_algorithm */

uint32_t hash_xxh3(const void *key, size_t len);
uint32_t hash_murmur3(const void *key, size_t len);
uint32_t hash_jenkins(const void *key, size_t len);

/* The algorithm hash_key() uses from now on: called before any thread
 * hashes (cache_init). */
void hash_use(enum hash_algorithm alg);

/* The algorithm called `name` ("xxh3", ...), or -1. */
int hash_by_name(const char *name);
const char *hash_name(enum hash_algorithm alg);

/* key's hash under the algorithm in use. */
uint32_t hash_key(const void *key, size_t len);

#endif
