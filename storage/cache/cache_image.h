/*
 * cache_image.h: the DRAM index as an image (cache_image.c): handed to a
 * takeover's successor, or saved beside the memory file at a clean stop,
 * so that the next start takes it in place of the scan.
 */
#ifndef MCPM_STORAGE_CACHE_IMAGE_H
#define MCPM_STORAGE_CACHE_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "storage/base/metrics.h"
#include "storage/base/options.h"

struct sblock;

/*
 * A takeover's successor can skip the scan of the memory file that
 * rebuilds the DRAM index: it maps the file at the address this node has
 * it at, so that the pointers in the items stay good, and takes the DRAM
 * state that describes them (the hash table, the chunk ids, the slab
 * classes' pages and free lists, the LRU lists and counts).  After
 * cache_stop(), cache_image_write() writes that state into fd (a memfd)
 * for the successor, which gives it to cache_init() as opts->image_fd.
 * It is taken only where it fits exactly (the same file and superblock
 * generation, layout, classes and hash, the file mapped at the address,
 * every item in the file: tier_policy pmem, without the simulator);
 * else, as without one, the file is scanned.  0, or -1 (nothing written:
 * a cache with items in DRAM, or the write failed).  With delta, where
 * cache_image_precopy() copied the table into fd, only its pages
 * written since are copied again, and *delta is a memfd naming them for
 * the successor (opts->image_delta_fd), else -1.
 */
int cache_image_write(int fd, int *delta);

/* After cache_stop() of a clean stop: the same image, kept beside the
 * memory file (<file>.index) for its next start, which takes it in place
 * of the scan when the file is as this stop left it (cache_image.c).  0,
 * or -1 (none written: the next start scans). */
int cache_image_save(void);

/* While serving: about the bytes cache_image_write() would write now (0:
 * it would write none), to tell the successor. */
size_t cache_image_size(void);

/* While serving: where the memory file is mapped (*len 0: no image
 * would be written), for the successor to hold that range before it maps
 * anything else (opts->image_hold_base). */
void cache_image_file(uint64_t *base, uint64_t *len);

/* While serving: a memfd for the image, of about the size it will take,
 * its pages allocated, cleared and mapped now, so that writing the image
 * into it (cache_image_write() with this fd), in the clients' pause,
 * only copies.  -1 when there will be no image. */
int cache_image_room(void);

/* While serving, in the room cache_image_room() made: the hash table
 * copied ahead of the pause (storage/index/assoc_image.h), the
 * successor told where (*at, *len bytes) to copy it from in turn.  0, or
 * -1 (none: the pause copies it whole). */
int cache_image_precopy(uint64_t *at, uint64_t *len);

/* A successor, told the size of the index to come, makes room for it
 * before its predecessor stops, so that taking the index (in the
 * clients' pause) copies into memory that is there.  Before
 * cache_init().  0 or -1. */
int cache_image_stage(size_t bytes);

/* The successor's half of the precopy: the table at [at, at + len) of
 * fd (the room) into the room cache_image_stage() made, while its
 * predecessor still serves.  0 or -1. */
int cache_image_prefill(int fd, uint64_t at, uint64_t len);

/* ---- cache_open.c's -------------------------------------------------- */

/* The head of a saved index (<memory file>.index): the superblock as
 * the clean stop left it. */
struct cache_image_saved {
    char     magic[8];
    uint32_t version;
    uint32_t image_crc;     /* crc_32c of the image after the header page */
    uint64_t generation;
    uint64_t cas_hwm;
    int64_t  alive_time;
    int64_t  epoch;
};

/* A predecessor's DRAM index (cache_image.c). */
struct cache_image {
    int     fd;             /* -1: none */
    int     delta_fd;       /* the pages written since a precopy, or -1 */
    off_t   off;            /* where in fd the image starts */
    size_t  len;
    void   *base;           /* where the predecessor had the file */
    bool    owned;          /* fd is the saved index's, closed here */
    struct cache_image_saved saved;
};

/* Take opts->image_fd if its header fits these options: 0, or -1 (no
 * image, or one of other settings: scan the file). */
int  cache_image_map(struct cache_image *img,
                     const struct cache_options *opts);
void cache_image_unmap(struct cache_image *img);

/* Without one handed over: the index saved at the last clean stop
 * (<memory file>.index, cache_image_save()), if its header fits: 0 or
 * -1.  It is taken only if cache_image_saved_fits() the superblock
 * loaded (a handed-over image always does), and removed by
 * cache_image_forget_saved() once the start has committed its own. */
int  cache_image_map_saved(struct cache_image *img,
                           const struct cache_options *opts);
bool cache_image_saved_fits(const struct cache_image *img,
                            const struct sblock *sb);
void cache_image_forget_saved(const struct cache_options *opts);

/* The room cache_image_room() made and no image took, unmapped. */
void cache_image_drop_room(void);

/* With the file open (its superblock loaded) and the lists set up, take
 * the image in place of recovery: 0; -1 when it is not this file's or
 * not where it was (nothing changed: scan it), *why saying which; -2
 * when a section does not load (the start fails). */
int  cache_image_adopt(const struct cache_image *img,
                       struct cache_recovery *out, const char **why);

#endif
