/*
 * hash.h: the 32-bit key hash used by the hash table, the item lock stripes
 * and prefetch.  MurmurHash3 (x86_32), as memcached's default; written here
 * from the public algorithm description.
 */
#ifndef MCPM_STORAGE_HASH_H
#define MCPM_STORAGE_HASH_H

#include <stddef.h>
#include <stdint.h>

uint32_t hash_murmur3(const void *key, size_t len);

#endif
