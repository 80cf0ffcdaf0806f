/*
 * cache_delta.h: incr and decr, classic and meta (cache_delta.c).
 */
#ifndef MCPM_STORAGE_CACHE_DELTA_H
#define MCPM_STORAGE_CACHE_DELTA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/base/clock.h"
#include "storage/base/status.h"

/*
 * incr/decr with memcached's rules: incr wraps at 2^64, decr stops at 0;
 * the value must be a decimal number of at most 20 digits.  CACHE_OK with
 * the new value in *value, CACHE_NOT_FOUND, CACHE_NON_NUMERIC or
 * CACHE_NO_MEMORY.  *clsid gets the item's class for per-class stats.
 */
enum cache_status cache_delta(const char *key, size_t nkey, uint32_t hv,
                              bool incr, uint64_t delta, uint64_t *value,
                              unsigned *clsid);

/* ma: incr/decr with the meta flags. */
struct cache_mdelta {
    /* in */
    bool        incr;
    uint64_t    delta;          /* D */
    bool        compare;        /* C */
    uint64_t    compare_cas;
    uint64_t    new_cas;        /* E; 0: next */
    bool        vivify;         /* N: on a miss create it holding initial */
    rel_time_t  vivify_exptime;
    uint64_t    initial;        /* J */
    bool        touch;          /* T: new exptime on success */
    rel_time_t  exptime;
    /* out */
    uint64_t    value;          /* the new value (initial when created) */
    uint64_t    cas;
    rel_time_t  exptime_after;  /* for t */
    unsigned    clsid;
    bool        created;
};

/* CACHE_OK, CACHE_NOT_FOUND, CACHE_EXISTS, CACHE_NON_NUMERIC, or
 * CACHE_NO_MEMORY (also when vivify could not store: the reply is NS). */
enum cache_status cache_mdelta(const char *key, size_t nkey, uint32_t hv,
                               struct cache_mdelta *a);

#endif
