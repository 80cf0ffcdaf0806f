/*
 * assoc_image.h: the hash table handed to a successor (cache_image.c).
 *
 * The running node writes its table's shape and buckets into an image;
 * the successor takes them into its empty table.  So that the pause does
 * not grow with the table, both copy it ahead of the pause, while the
 * running node still serves, and copy again in the pause only the pages
 * written since:
 *
 *   running node                       successor
 *                                      assoc_stage(): room, faulted in
 *   assoc_image_pre(): every bucket
 *   into the image, the marks cleared
 *                                      assoc_stage_fill(): the image into
 *                                      the room
 *   (serving: every store to a bucket marks its page)
 *   stopped: assoc_image_delta(): the
 *   shape, the marked pages, the
 *   buckets grown since, and the marks
 *                                      assoc_image_load() with the marks:
 *                                      those pages again, then the room
 *                                      moved into place
 *
 * Without the precopy, assoc_image() and assoc_image_load() copy it all.
 */
#ifndef MCPM_STORAGE_ASSOC_IMAGE_H
#define MCPM_STORAGE_ASSOC_IMAGE_H

#include <stddef.h>
#include <stdint.h>

/* The table's shape and buckets: written to dst (NULL: the bytes needed
 * only), the bytes.  Before serving or once stopped. */
size_t assoc_image(void *dst);

/* Before any section of an image is loaded: 0 when assoc_image_load()
 * would take these bytes, else -1. */
int    assoc_image_check(const void *src, size_t len);

/* The pages written since a precopy, as assoc_image_delta() left them:
 * map[i] for the i-th 4 KB of buckets, of the first `copied` bytes. */
struct assoc_delta {
    const unsigned char *map;
    size_t               len;
    uint64_t             copied;
};

/* The image src into the empty table: 0, or -1 when it cannot be (more
 * buckets than it can hold).  With delta, the room assoc_stage_fill()
 * filled from the same image is brought up to date instead of copied
 * anew.  Before serving, no thread running. */
int    assoc_image_load(const void *src, size_t len,
                        const struct assoc_delta *delta);

/*
 * While serving: every bucket into dst (the shape is written again at
 * the stop), and the marks cleared, with a barrier on every thread so
 * that each store to a bucket is either in the copy or marked.  The
 * bytes written (as assoc_image()), or 0 when no precopy can be made
 * (more than max bytes, or no barrier).
 */
size_t assoc_image_pre(void *dst, size_t max);

/*
 * Once stopped, after assoc_image_pre(dst) wrote `pre` bytes: the shape,
 * the pages marked since and the buckets beyond `pre` into dst; the marks
 * of the first pre bytes of buckets into map (map_len bytes, at least
 * assoc_delta_len(pre)).  The bytes of the image, as assoc_image().
 */
size_t assoc_image_delta(void *dst, size_t pre, unsigned char *map,
                         size_t map_len);
size_t assoc_delta_len(size_t pre);

/* Before assoc_init(): room for a table of about `bytes` to come from an
 * image, its pages faulted in now (a successor does it while its
 * predecessor still serves), so that assoc_image_load() copies into
 * memory that is there and moves it into place.  0 or -1. */
int    assoc_stage(size_t bytes);
/* A precopy's image (len bytes, as assoc_image_pre() wrote it) into the
 * room: 0, or -1 (no room, or too small). */
int    assoc_stage_fill(const void *src, size_t len);
/* The room assoc_stage() made and no image took, given back. */
void   assoc_stage_drop(void);

#endif
