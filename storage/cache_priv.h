/*
 * cache_priv.h: the facade's own state, shared by its three files and
 * nothing else: cache_open.c (life cycle) fills it, cache.c (requests)
 * and cache_stats.c (figures) read it.
 */
#ifndef MCPM_STORAGE_CACHE_PRIV_H
#define MCPM_STORAGE_CACHE_PRIV_H

#include <stdint.h>

#include "storage/metrics.h"
#include "storage/options.h"
#include "storage/sblock.h"
#include "storage/tslot.h"

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

/* A predecessor's DRAM index (cache_image.c). */
struct cache_image {
    int     fd;             /* -1: none */
    size_t  len;
    void   *base;           /* where the predecessor had the file */
};

/* Take opts->image_fd if its header fits these options: 0, or -1 (no
 * image, or one of other settings: scan the file). */
int  cache_image_map(struct cache_image *img,
                     const struct cache_options *opts);
void cache_image_unmap(struct cache_image *img);

/* The room cache_image_room() made and no image took, unmapped. */
void cache_image_drop_room(void);

/* With the file open (its superblock loaded) and the lists set up, take
 * the image in place of recovery: 0; -1 when it is not this file's or
 * not where it was (nothing changed: scan it); -2 when a section does
 * not load (the start fails). */
int  cache_image_adopt(const struct cache_image *img,
                       struct cache_recovery *out);

/* One more item stored (total_items), counted in the thread's slot. */
static inline void
cache_count_stored(void)
{
    __atomic_add_fetch(&cache_priv.stored[tslot_mine()].n, 1,
                       __ATOMIC_RELAXED);
}

#endif
