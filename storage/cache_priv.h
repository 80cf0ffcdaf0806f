/*
 * cache_priv.h: the facade's own state, shared by its three files and
 * nothing else: cache_open.c (life cycle) fills it, cache.c (requests)
 * and cache_stats.c (figures) read it.
 */
#ifndef MCPM_STORAGE_CACHE_PRIV_H
#define MCPM_STORAGE_CACHE_PRIV_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "storage/base/metrics.h"
#include "storage/base/options.h"
#include "storage/tier/sblock.h"
#include "storage/base/tslot.h"

struct cache_priv {
    struct cache_options *opts;     /* the daemon's; runtime fields move */
    struct {
        uint64_t n;
        char     pad[64 - sizeof(uint64_t)];
    } stored[TSLOT_MAX];            /* items stored since start, per
                                       thread slot: summed for stats */
    struct sblock         sb;       /* the memory file's (sb.tier NULL:
                                       no file) */
    struct cache_recovery recovery; /* what start-up read back */
    uint64_t              downtime; /* seconds since the file's last
                                       write, as start-up measured it */
    bool                  stale;    /* over memory_file_max_downtime */
    bool                  stopped;  /* cache_stop(): only the memory is
                                       left to free */
};

extern struct cache_priv cache_priv;

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

/* One more item stored (total_items), counted in the thread's slot. */
static inline void
cache_count_stored(void)
{
    __atomic_add_fetch(&cache_priv.stored[tslot_mine()].n, 1,
                       __ATOMIC_RELAXED);
}

#endif
