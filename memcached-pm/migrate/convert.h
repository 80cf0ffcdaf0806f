/*
 * convert.h: -e on a file memcached 1.6 wrote (its restartable cache, see
 * mcfile.h): its items become memcached-pm's, so that a node switched
 * from memcached to memcached-pm keeps its cache.
 *
 * The items are written into a new memory file beside it,
 * <file>.convert, through the cache as any store would be; that file is
 * closed clean and synced, and renamed over <file>, which is the commit:
 * until then memcached's file and its .meta are untouched, and a kill
 * at any moment leaves either them (the next start converts again) or
 * memcached-pm's file (the next start opens it).  Last, memcached-pm's
 * own .meta replaces memcached's.  A file it cannot read whole is
 * refused whole, said why on stderr, and the cache starts clean, as
 * memcached's own start does on a mismatch.
 *
 * Main thread only, before cache_init(), under -e.
 */
#ifndef MCPM_CONVERT_H
#define MCPM_CONVERT_H

enum convert_result {
    CONVERT_NONE,       /* not memcached's: open the file as always */
    CONVERT_DONE,       /* <file> is memcached-pm's now, with the items */
    CONVERT_REFUSED,    /* memcached's, but unreadable: start clean */
};

enum convert_result convert_memcached_file(void);

#endif
