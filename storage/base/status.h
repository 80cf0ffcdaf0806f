/*
 * status.h: what a storage call answers, for every layer.
 *
 * One enum so that an answer passes up through the layers unchanged (a
 * page move refused by slabs.c reaches the operator as memcached's
 * "BUSY currently processing reassign request").  Types only.
 */
#ifndef MCPM_STORAGE_STATUS_H
#define MCPM_STORAGE_STATUS_H

enum cache_status {
    CACHE_OK = 0,
    CACHE_HIT = 0,
    CACHE_MISS,             /* not there */
    CACHE_EXPIRED,          /* was there, expired: counts get_expired */
    CACHE_FLUSHED,          /* was there, flushed: counts get_flushed */
    CACHE_STORED,
    CACHE_NOT_STORED,
    CACHE_EXISTS,           /* cas mismatch */
    CACHE_NOT_FOUND,
    CACHE_DELETED,
    CACHE_TOO_LARGE,        /* over item_size_max: store_too_large */
    CACHE_NO_MEMORY,        /* no memory and nothing evictable, or -M */
    CACHE_NON_NUMERIC,      /* incr/decr on a value that is not a number */
    CACHE_BUSY,             /* a page move or crawl is running already */
    CACHE_BADCLASS,         /* no such slab class */
    CACHE_NOSPARE,          /* the class has no page to give */
    CACHE_SAME,             /* source and destination are one class */
    CACHE_NOTSTARTED,       /* nothing to crawl */
    CACHE_DISABLED          /* the thread it needs is off */
};

#endif
