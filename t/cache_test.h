/*
 * cache_test.h: what the storage unit tests share.
 *
 * test_cache_options(): memcached's defaults (cache_options_defaults) with
 * every background thread off, so that a test sees only what it does
 * itself; a test turns on the thread it exercises.  test_hv(), test_get()
 * and test_val(): a key's hash, a plain get, and its value as a string.
 */
#ifndef MCPM_T_CACHE_TEST_H
#define MCPM_T_CACHE_TEST_H

#include <string.h>

#include "storage/base/hash.h"
#include "storage/cache/cache.h"

static inline void
test_cache_options(struct cache_options *o)
{
    cache_options_defaults(o);
    o->hash_expand = false;
    o->lru_crawler = false;
    o->crawler_sleep_us = 0;
    o->slab_reassign = false;
    o->slab_automove = 0;
    o->automove_freeratio = 0;
}

static inline uint32_t
test_hv(const char *k)
{
    return hash_key(k, strlen(k));
}

/* cache_get() of k, with a reference, or NULL. */
static inline struct item *
test_get(const char *k)
{
    enum cache_status st;

    return cache_get(k, strlen(k), test_hv(k), &st);
}

/* The value of k without its "\r\n" ("" when missing); the buffer is
 * static, so one call's result lives until the next. */
static inline const char *
test_val(const char *k)
{
    static char buf[256];
    struct item *it = test_get(k);
    size_t n;

    if (it == NULL) {
        return "";
    }
    n = item_value_copy(it, buf, sizeof(buf) - 1);
    buf[n >= 2 ? n - 2 : 0] = '\0';
    cache_release(it);
    return buf;
}

#endif
