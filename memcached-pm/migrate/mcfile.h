/*
 * mcfile.h: memcached 1.6's restartable cache, read: the memory file that
 * `memcached -e <file>` leaves at a graceful stop, and its <file>.meta.
 *
 * The file is memcached's slab memory as it was: pages of slab_page_size
 * bytes, each cut into the chunks of one slab class (their sizes follow
 * from the .meta's slab_config, chunk_size and slab_chunk_size_max, as
 * memcached computes them), each chunk an item header holding pointers of
 * the process that wrote it (mmap_oldbase says where its mapping was).
 * A value larger than half a page is a header item whose chunk chain
 * holds the bytes.  The .meta does not name memcached's version: the
 * layouts 1.6.18 and 1.6.45 write are the same on a 64-bit machine with
 * 32-bit client flags, and the one difference that matters here (1.6.18
 * also flushes by CAS, and says so in an oldest_cas line) is told by
 * that line.
 *
 * Nothing in the file is trusted: every header, length, pointer and chain
 * is checked against the file and the page it must lie in before an item
 * is handed out, and a walk with no callback checks the whole file, so
 * that a file with one bad item is refused whole, never half read.
 */
#ifndef MCPM_MCFILE_H
#define MCPM_MCFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MCFILE_CLASSES 64               /* memcached's slab class ids */

struct mcfile_meta {
    char     slab_config[256];          /* -f's factor or -o slab_sizes */
    uint64_t maxbytes;                  /* the file's size */
    uint32_t chunk_size;
    uint32_t item_size_max;
    uint32_t slab_chunk_size_max;
    uint32_t slab_page_size;
    bool     use_cas;
    uint32_t current_time;              /* memcached's clock at the stop */
    int64_t  stop_time;                 /* the stop, wall-clock seconds */
    uint64_t current_cas;               /* the next CAS it would give */
    uint32_t oldest_live;               /* flush_all's mark, or 0 */
    bool     has_oldest_cas;            /* 1.6.18 and its kin */
    uint64_t oldest_cas;
    uint64_t mmap_oldbase;
};

/*
 * Read <file>.meta at meta_path.  1: it is memcached's (it names
 * mmap_oldbase, which memcached-pm never writes) and *m holds it; 0: no
 * such file, or not memcached's; -1: memcached's but not whole or not a
 * layout this reads (why says what, for stderr).
 */
int mcfile_meta_read(const char *meta_path, struct mcfile_meta *m,
                     char *why, size_t whylen);

/* A file, mapped (read only will do) at base, len bytes. */
struct mcfile {
    const struct mcfile_meta *meta;
    const unsigned char *base;
    size_t   len;
    uint32_t sizes[MCFILE_CLASSES];     /* chunk size per class; 0 none */
    unsigned largest;                   /* the class of half-page chunks */
    uint8_t *page_class;                /* per page, 0: not cut */
};

/* 0, or -1 with why (the size is not the .meta's, the classes cannot be
 * computed from it). */
int  mcfile_open(struct mcfile *f, const struct mcfile_meta *m,
                 const void *base, size_t len, char *why, size_t whylen);
void mcfile_close(struct mcfile *f);

/* One live item, as the walk hands it out. */
struct mcfile_item {
    const char *key;
    uint8_t  nkey;
    bool     binary_key;
    uint32_t client_flags;
    int64_t  expires;                   /* wall-clock second; 0: never */
    uint64_t cas;                       /* 0 when the file has none */
    uint32_t vlen;                      /* value bytes, without "\r\n" */
    size_t   off;                       /* of its header, in the file */
};

struct mcfile_counts {
    uint64_t items;                     /* handed out (or would be) */
    uint64_t expired;                   /* linked, but past their time */
    uint64_t flushed;                   /* linked, but flush_all'd */
    uint64_t chunked;                   /* of items: in chunk chains */
    uint64_t value_bytes;               /* of items */
};

/*
 * Every item memcached would restore, in file order, that is neither
 * expired nor flushed at wall-clock `now`: fn(item, ctx) for each (a
 * non-zero return stops the walk and is returned).  fn NULL: check
 * only.  -1 with why at the first item or chain that is not sound.
 * *counts (may be NULL) is filled as it goes.
 */
int mcfile_walk(const struct mcfile *f, int64_t now,
                int (*fn)(const struct mcfile_item *it, void *ctx),
                void *ctx, struct mcfile_counts *counts,
                char *why, size_t whylen);

/* The value's vlen bytes into dst, from the item or its chunks (which
 * the walk checked). */
void mcfile_value(const struct mcfile *f, const struct mcfile_item *it,
                  char *dst);

/* A pending flush_all with a delay, as a wall-clock second: 0 if none
 * (none given, or already past at `now`). */
int64_t mcfile_pending_flush(const struct mcfile_meta *m, int64_t now);

#endif
