/*
 * convert.c: memcached's restart file into memcached-pm's (convert.h).
 */
#include "config.h"

#include "memcached-pm/migrate/convert.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "memcached-pm/base/settings.h"
#include "memcached-pm/migrate/mcfile.h"
#include "storage/base/clock.h"
#include "storage/base/hash.h"
#include "storage/cache/cache.h"
#include "storage/cache/cache_open.h"
#include "storage/slab/item.h"

/* What the import did, for its line on stderr. */
struct import {
    const struct mcfile *f;
    char    *buf;                       /* one value at a time */
    size_t   buflen;
    uint64_t stored;
    uint64_t too_large;                 /* over this server's -I */
    uint64_t no_memory;                 /* -m too small for them all */
};

static char *
path_plus(const char *path, const char *ext)
{
    char *p;

    return asprintf(&p, "%s%s", path, ext) < 0 ? NULL : p;
}

static int
import_one(const struct mcfile_item *mi, void *ctx)
{
    struct import *im = ctx;
    uint32_t hv = hash_key(mi->key, mi->nkey);
    rel_time_t exptime = mi->expires == 0 ? 0 : clock_realtime(mi->expires);
    struct cache_mstore a = { .op = CACHE_SET, .new_cas = mi->cas };
    enum cache_status st;
    struct item *it;

    if ((size_t)mi->vlen + 2 > im->buflen) {
        char *b = realloc(im->buf, (size_t)mi->vlen + 2);

        if (b == NULL) {
            return -1;
        }
        im->buf = b;
        im->buflen = (size_t)mi->vlen + 2;
    }
    it = cache_alloc(mi->key, mi->nkey, hv, mi->client_flags, exptime,
                     mi->vlen, &st);
    if (it == NULL) {
        if (st == CACHE_TOO_LARGE) {
            im->too_large++;
        } else {
            im->no_memory++;
        }
        return 0;
    }
    mcfile_value(im->f, mi, im->buf);
    memcpy(im->buf + mi->vlen, "\r\n", 2);
    item_value_fill(it, im->buf, (size_t)mi->vlen + 2);
    if (mi->binary_key) {
        item_set_key_binary(it);
    }
    if (cache_mstore(it, &a) == CACHE_STORED) {
        im->stored++;
    }
    cache_release(it);
    return 0;
}

/* Sync a file, and the directory that names it (after a rename). */
static int
sync_path(const char *path, bool dir)
{
    char *copy = strdup(path);
    int fd, rc = -1;

    if (copy == NULL) {
        return -1;
    }
    fd = open(dir ? dirname(copy) : path, O_RDONLY | O_CLOEXEC |
              (dir ? O_DIRECTORY : 0));
    if (fd >= 0) {
        rc = fsync(fd);
        close(fd);
    }
    free(copy);
    return rc;
}

/* Write the items of f into a memcached-pm file at tmp, closed clean and
 * synced: 0, or -1 said. */
static int
write_converted(const struct mcfile *f, const char *tmp, uint64_t items,
                struct mcfile_counts *counts, struct import *im)
{
    static struct cache_options opts;   /* cache_init() keeps the pointer */
    char why[256] = "";
    int64_t flush_at;
    int rc;

    opts = settings.cache;
    opts.memory_file = tmp;
    opts.memory_file_fresh = true;
    opts.memory_file_restart = true;
    opts.image_fd = -1;
    opts.image_delta_fd = -1;
    unlink(tmp);
    if (cache_init(&opts, (unsigned)settings.num_threads) != 0) {
        return -1;
    }
    cache_presize(items);
    rc = mcfile_walk(f, (int64_t)time(NULL), import_one, im, counts, why,
                     sizeof(why));
    flush_at = mcfile_pending_flush(f->meta, (int64_t)time(NULL));
    if (rc == 0 && flush_at != 0) {
        cache_flush(clock_realtime(flush_at));  /* a delayed flush_all */
    }
    cache_stop(true);
    cache_shutdown();
    if (rc != 0) {
        fprintf(stderr, "[restart] converting memcached's cache: %s\n",
                why[0] ? why : strerror(errno));
        return -1;
    }
    if (sync_path(tmp, false) != 0) {
        fprintf(stderr, "[restart] cannot sync %s: %s\n", tmp,
                strerror(errno));
        return -1;
    }
    return 0;
}

/* Map memcached's file and check it whole.  0 with *f open, or -1 said. */
static int
open_checked(const char *path, const struct mcfile_meta *m, struct mcfile *f,
             void **map, size_t *len, struct mcfile_counts *live)
{
    char why[256] = "";
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    *map = MAP_FAILED;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(why, sizeof(why), "cannot open %s: %s", path,
                 strerror(errno));
    } else if ((uint64_t)st.st_size != m->maxbytes) {
        snprintf(why, sizeof(why), "the file holds %lld bytes, its "
                 "metadata %" PRIu64, (long long)st.st_size, m->maxbytes);
    } else {
        *len = (size_t)st.st_size;
        *map = mmap(NULL, *len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (*map == MAP_FAILED) {
            snprintf(why, sizeof(why), "cannot map %s: %s", path,
                     strerror(errno));
        }
    }
    if (fd >= 0) {
        close(fd);
    }
    if (*map != MAP_FAILED &&
        (mcfile_open(f, m, *map, *len, why, sizeof(why)) != 0 ||
         mcfile_walk(f, (int64_t)time(NULL), NULL, NULL, live, why,
                     sizeof(why)) != 0)) {
        mcfile_close(f);
        munmap(*map, *len);
        *map = MAP_FAILED;
    }
    if (*map == MAP_FAILED) {
        fprintf(stderr, "[restart] memcached's cache in %s cannot be "
                "read: %s\n", path, why);
        return -1;
    }
    return 0;
}

/* What the conversion did, on stderr: memcached's file replaced, or not. */
static void
report(enum convert_result res, const char *path, uint64_t t0_us,
       const struct mcfile_counts *c, const struct import *im)
{
    if (res != CONVERT_DONE) {
        fprintf(stderr, "[restart] failed to validate metadata, starting "
                "with a clean cache\n");
        return;
    }
    fprintf(stderr, "[restart] memcached's cache in %s converted in %.2f s: "
            "%" PRIu64 " items (%" PRIu64 " chunked, %" PRIu64 " value "
            "bytes); left out: %" PRIu64 " expired, %" PRIu64 " flushed, %"
            PRIu64 " over -I, %" PRIu64 " past -m\n", path,
            (double)(clock_mono_us() - t0_us) / 1e6, im->stored, c->chunked,
            c->value_bytes, c->expired, c->flushed, im->too_large,
            im->no_memory);
}

enum convert_result
convert_memcached_file(void)
{
    const char *path = settings.memory_file;
    struct mcfile_counts c = { 0, 0, 0, 0, 0 }, live = c;
    struct import im = { 0 };
    struct mcfile_meta m;
    struct mcfile f;
    uint64_t t0;
    char why[256] = "";
    char *meta = path_plus(path, ".meta"), *tmp = path_plus(path,
                                                           ".convert");
    enum convert_result res = CONVERT_REFUSED;
    void *map;
    size_t len = 0;
    int r;

    if (meta == NULL || tmp == NULL) {
        free(meta);
        free(tmp);
        return CONVERT_NONE;
    }
    r = mcfile_meta_read(meta, &m, why, sizeof(why));
    /* Ours already, beside memcached's .meta: a conversion that stopped
     * after its commit.  The .meta is written anew after the start. */
    if (r == 0 || cache_file_is_ours(path)) {
        res = CONVERT_NONE;
        goto out;
    }
    t0 = clock_mono_us();
    if (r < 0) {
        fprintf(stderr, "[restart] memcached's metadata in %s: %s\n", meta,
                why);
    } else if (open_checked(path, &m, &f, &map, &len, &live) == 0) {
        im.f = &f;
        r = write_converted(&f, tmp, live.items, &c, &im);
        mcfile_close(&f);
        munmap(map, len);
        /* the commit: memcached's file is replaced whole, or not at all */
        if (r == 0 && rename(tmp, path) == 0 && sync_path(path, true) == 0) {
            res = CONVERT_DONE;
        } else if (r == 0) {
            fprintf(stderr, "[restart] cannot rename %s: %s\n", tmp,
                    strerror(errno));
        }
    }
    if (res != CONVERT_DONE) {
        unlink(tmp);
    }
    report(res, path, t0, &c, &im);
out:
    free(im.buf);
    free(meta);
    free(tmp);
    return res;
}
