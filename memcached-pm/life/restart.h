/*
 * restart.h: -e's metadata file, <file>.meta, as memcached's tools know
 * it: while it is there and names the settings the server runs under,
 * the memory file's items are reused; without it (removed, never
 * written), empty or garbled, or naming other settings, the server says
 * why as memcached does and starts with a clean cache.
 *
 * memcached writes it at a graceful stop only and consumes it at start,
 * so a crash loses its cache; memcached-pm writes it as soon as the
 * memory file is in use and keeps it, so a crash loses nothing (the file's
 * own checksummed superblock is what decides the items are sound).
 *
 * Main thread only: before cache_init() and after it, and at the stop.
 */
#ifndef MCPM_RESTART_H
#define MCPM_RESTART_H

#include <stdbool.h>

/* Under -e: read <file>.meta and set settings.cache.memory_file_fresh when
 * the items must not be reused.  Nothing without -e. */
void restart_meta_check(void);

/* Under -e: write <file>.meta for the settings in use (`stopping`: with
 * the stop's time too).  0, or -1 with a message. */
int restart_meta_write(bool stopping);

#endif
