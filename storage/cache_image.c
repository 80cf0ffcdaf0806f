/*
 * cache_image.c: the DRAM index handed from a node to its successor, so
 * that the successor need not scan the memory file (cache.h
 * cache_image_write()).
 *
 * The items in the file point at each other by address (LRU and hash
 * chains, free lists, chunked values), so the image is good only for a
 * successor that maps the file where this node had it: tier_pmem moves
 * its mapping there when the range is free.  The image is the state in
 * DRAM that describes the file as this node left it at cache_stop():
 *
 *   header   magic "MCPM-IX", version, the superblock's layout and
 *            generation (the file is the one left: the successor loads
 *            the same generation, clean), the mapping's base and length,
 *            page size, hash, the options that shape the lists, the
 *            largest class, and the sections' lengths
 *   chunkid  page numbers (chunkid_image())
 *   assoc    the table's shape and buckets (assoc_image())
 *   slabs    the classes' pages, free lists and bytes (slabs_image())
 *   lru      the lists' ends and counts (lru_image())
 *
 * Written by the node that hands over once its threads have stopped;
 * read by the successor before it serves.  No locks.
 */
#include "storage/cache.h"
#include "storage/assoc.h"
#include "storage/cache_priv.h"
#include "storage/chunkid.h"
#include "storage/lru.h"
#include "storage/sblock.h"
#include "storage/slabs.h"

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC   "MCPM-IX"
#define VERSION 1

enum { SEC_CHUNKID, SEC_ASSOC, SEC_SLABS, SEC_LRU, NSECTIONS };

struct header {
    char     magic[8];
    uint32_t version;
    uint32_t sblock_version;
    uint64_t generation;
    uint64_t base;
    uint64_t file_len;
    uint64_t page_size;
    uint32_t hash_algorithm;
    uint32_t flags;
    uint32_t largest;
    uint32_t zero;
    uint64_t len[NSECTIONS];
};

#define FLAG_CAS       1u
#define FLAG_SEGMENTED 2u
#define FLAG_TEMP      4u

static uint32_t
flags_of(const struct cache_options *o)
{
    return (o->use_cas ? FLAG_CAS : 0) |
           (o->lru_segmented ? FLAG_SEGMENTED : 0) |
           (o->temp_lru ? FLAG_TEMP : 0);
}

/* Does the cache keep every item in the file, at addresses of its own? */
static bool
fits_policy(const struct cache_options *o)
{
    return o->tier_policy == CACHE_TIER_PMEM && o->memory_kind == NULL &&
           !o->pmem_strict;
}

static size_t
section(unsigned s, void *dst, unsigned largest)
{
    switch (s) {
    case SEC_CHUNKID: return chunkid_image(dst);
    case SEC_ASSOC: return assoc_image(dst);
    case SEC_SLABS: return slabs_image(dst);
    default: return lru_image(dst, largest);
    }
}

int
cache_image_write(int fd)
{
    struct tier *t = slabs_tier(TIER_PMEM);
    struct header h = { MAGIC, VERSION, SBLOCK_VERSION, 0, 0, 0, 0, 0, 0,
                        0, 0, { 0 } };
    size_t total = sizeof(h);
    char *p;

    if (!cache_priv.stopped || t == NULL || !fits_policy(cache_priv.opts)) {
        return -1;
    }
    h.generation = cache_priv.sb.generation;
    h.base = (uint64_t)(uintptr_t)tier_pmem_base(t);
    h.file_len = tier_pmem_mapped_len(t);
    h.page_size = t->page_size;
    h.hash_algorithm = (uint32_t)cache_priv.opts->hash_algorithm;
    h.flags = flags_of(cache_priv.opts);
    h.largest = slabs_largest();
    for (unsigned s = 0; s < NSECTIONS; s++) {
        h.len[s] = section(s, NULL, h.largest);
        total += h.len[s];
    }
    if (ftruncate(fd, (off_t)total) != 0 ||
        (p = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0))
        == MAP_FAILED) {
        return -1;
    }
    memcpy(p, &h, sizeof(h));
    total = sizeof(h);
    for (unsigned s = 0; s < NSECTIONS; s++) {
        section(s, p + total, h.largest);
        total += h.len[s];
    }
    munmap(p, total);
    return 0;
}

/* ---- the successor ---------------------------------------------------- */

int
cache_image_map(struct cache_image *img, const struct cache_options *o)
{
    struct header h;
    struct stat st;
    uint64_t total = sizeof(h);

    memset(img, 0, sizeof(*img));
    if (o->image_fd < 0 || !fits_policy(o) || fstat(o->image_fd, &st) != 0 ||
        (size_t)st.st_size < sizeof(h) ||
        pread(o->image_fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h)) {
        return -1;
    }
    for (unsigned s = 0; s < NSECTIONS; s++) {
        total += h.len[s];
    }
    if (memcmp(h.magic, MAGIC, sizeof(h.magic)) != 0 ||
        h.version != VERSION || h.sblock_version != SBLOCK_VERSION ||
        total != (uint64_t)st.st_size || h.page_size != o->page_size ||
        h.hash_algorithm != (uint32_t)o->hash_algorithm ||
        h.flags != flags_of(o) || h.base == 0) {
        return -1;
    }
    img->map = mmap(NULL, total, PROT_READ, MAP_PRIVATE, o->image_fd, 0);
    if (img->map == MAP_FAILED) {
        img->map = NULL;
        return -1;
    }
    img->len = total;
    img->base = (void *)(uintptr_t)h.base;
    return 0;
}

void
cache_image_unmap(struct cache_image *img)
{
    if (img->map != NULL) {
        munmap(img->map, img->len);
    }
    memset(img, 0, sizeof(*img));
}

/* Is the file the one the image describes, where it was? */
static bool
same_file(const struct header *h)
{
    struct tier *t = slabs_tier(TIER_PMEM);

    return t != NULL && slabs_tier(TIER_DRAM) == NULL &&
           (uint64_t)(uintptr_t)tier_pmem_base(t) == h->base &&
           tier_pmem_mapped_len(t) == h->file_len &&
           h->largest == slabs_largest() &&
           cache_priv.sb.generation == h->generation && cache_priv.sb.clean;
}

int
cache_image_adopt(const struct cache_image *img, struct cache_recovery *out)
{
    const char *p = img->map;
    struct header h;
    size_t off = sizeof(h);
    int rc = 0;

    memcpy(&h, p, sizeof(h));
    if (!same_file(&h)) {
        return -1;
    }
    /* The file's superblock vouched for its classes and layout: from here
     * on a section that does not load is a fault, not a mismatch. */
    rc |= chunkid_image_load(p + off, h.len[SEC_CHUNKID]);
    off += h.len[SEC_CHUNKID];
    rc |= assoc_image_load(p + off, h.len[SEC_ASSOC]);
    off += h.len[SEC_ASSOC];
    rc |= slabs_image_load(p + off, h.len[SEC_SLABS]);
    off += h.len[SEC_SLABS];
    rc |= lru_image_load(p + off, h.len[SEC_LRU], h.largest);
    if (rc != 0) {
        return -2;
    }
    out->image = 1;
    for (unsigned id = 1; id <= h.largest; id++) {
        out->items += lru_items_in_class(id);
        out->pages += slabs_npages(SLABS_TC(TIER_PMEM, id));
    }
    return 0;
}
