/*
 * cache_opts.h: storage options for unit tests.
 *
 * memcached's defaults (cache_options_defaults) with every background
 * thread off, so that a test sees only what it does itself; a test turns on
 * the thread it exercises.
 */
#ifndef MCPM_T_CACHE_OPTS_H
#define MCPM_T_CACHE_OPTS_H

#include "storage/cache.h"

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

#endif
