/*
 * image.h: the DRAM index across a takeover (storage/cache/cache_image.h):
 * copied ahead of the pause, the rest in it, and let go of once the
 * successor serves.
 */
#ifndef MCPM_LIFE_IMAGE_H
#define MCPM_LIFE_IMAGE_H

#include "memcached-pm/life/takeover.h"

/* ---- the running node ------------------------------------------------- */

/* Version 5, while serving: the hash table copied into room (a
 * cache_image_room(), or -1) and PREIMAGE, then waiting (at most ms)
 * for the successor's copy.  0, or -1: the successor is gone or hangs
 * (nothing has stopped). */
int image_precopy(const struct takeover_peer *p, int room, int ms);

/* After cache_stop(): the index written into fd (a cache_image_room()),
 * or -1 (fd closed) when none was; with delta, the pages of a precopy
 * written since (cache_image_write()). */
int image_written(int fd, int *delta);

/* The index to the successor (IMAGE), so that it need not scan the
 * file.  0, or -1: it is gone (no index to send is no fault). */
int image_send(int sock, int room);

/* ---- the successor ---------------------------------------------------- */

/* Version 5: the table copied out of the room the node sent (PREIMAGE),
 * and PRECOPIED.  Whatever fails here only costs the whole copy. */
void image_precopy_take(int sock);

/* Once serving: the image and its marks (settings.cache) closed by a
 * thread of their own: the last reference frees the image's pages, a
 * few milliseconds for every hundred megabytes. */
void image_let_go(void);

#endif
