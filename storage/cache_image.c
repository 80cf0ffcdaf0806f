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
 * Each section starts 8-byte aligned.
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

/* A section's place in the image: its start is 8-byte aligned. */
static size_t
placed(uint64_t len)
{
    return (size_t)((len + 7) & ~(uint64_t)7);
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

size_t
cache_image_size(void)
{
    size_t n = sizeof(struct header);
    unsigned largest = slabs_largest();

    if (slabs_tier(TIER_PMEM) == NULL || !fits_policy(cache_priv.opts)) {
        return 0;
    }
    for (unsigned s = 0; s < NSECTIONS; s++) {
        n += placed(section(s, NULL, largest));
    }
    return n;
}

/* The room made for the image (cache_image_room()), mapped. */
static struct {
    int    fd;
    char  *map;
    size_t len;
} room = { -1, NULL, 0 };

static void
room_unmap(void)
{
    if (room.map != NULL) {
        munmap(room.map, room.len);
    }
    room.map = NULL;
    room.len = 0;
    room.fd = -1;
}

void
cache_image_drop_room(void)
{
    room_unmap();
}

int
cache_image_room(void)
{
    size_t n = cache_image_size();
    int fd;
    char *p;

    room_unmap();
    if (n == 0 || (fd = memfd_create("mcpm-index", MFD_CLOEXEC)) < 0) {
        return -1;
    }
    n += n / 16 + (1 << 20);            /* and a little growth */
    if (ftruncate(fd, (off_t)n) != 0 ||
        (p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0))
        == MAP_FAILED) {
        return fd;                      /* its pages come as it is written */
    }
    /* Faulted in writable, so allocated and cleared, now. */
    if (madvise(p, n, MADV_POPULATE_WRITE) != 0) {
        memset(p, 0, n);
    }
    room.fd = fd;
    room.map = p;
    room.len = n;
    return fd;
}

/* The image's bytes for fd: the room's mapping when it is fd's and big
 * enough, else a new mapping (MAP_FAILED when none can be had). */
static char *
image_map(int fd, size_t total)
{
    if (fd == room.fd && total <= room.len) {
        return room.map;
    }
    room_unmap();
    if (ftruncate(fd, (off_t)total) != 0) {
        return MAP_FAILED;
    }
    return mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
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
        total += placed(h.len[s]);
    }
    if ((p = image_map(fd, total)) == MAP_FAILED) {
        return -1;
    }
    memcpy(p, &h, sizeof(h));
    total = sizeof(h);
    for (unsigned s = 0; s < NSECTIONS; s++) {
        section(s, p + total, h.largest);
        total += placed(h.len[s]);
    }
    if (p == room.map) {
        room_unmap();
    } else {
        munmap(p, total);
    }
    /* the room's spare pages go: the image is what the file holds */
    return ftruncate(fd, (off_t)total) == 0 ? 0 : -1;
}

/* ---- the successor ---------------------------------------------------- */

int
cache_image_stage(size_t bytes)
{
    return assoc_stage(bytes);
}

int
cache_image_map(struct cache_image *img, const struct cache_options *o)
{
    struct header h;
    struct stat st;
    uint64_t total = sizeof(h);

    memset(img, 0, sizeof(*img));
    img->fd = -1;
    if (o->image_fd < 0 || !fits_policy(o) || fstat(o->image_fd, &st) != 0 ||
        (size_t)st.st_size < sizeof(h) ||
        pread(o->image_fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h)) {
        return -1;
    }
    for (unsigned s = 0; s < NSECTIONS; s++) {
        total += placed(h.len[s]);
    }
    if (memcmp(h.magic, MAGIC, sizeof(h.magic)) != 0 ||
        h.version != VERSION || h.sblock_version != SBLOCK_VERSION ||
        total != (uint64_t)st.st_size || h.page_size != o->page_size ||
        h.hash_algorithm != (uint32_t)o->hash_algorithm ||
        h.flags != flags_of(o) || h.base == 0) {
        return -1;
    }
    /* Mapped only once the memory file is (cache_image_adopt()): a
     * mapping made now could land where the file must go. */
    img->fd = o->image_fd;
    img->len = total;
    img->base = (void *)(uintptr_t)h.base;
    return 0;
}

void
cache_image_unmap(struct cache_image *img)
{
    memset(img, 0, sizeof(*img));
    img->fd = -1;
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
    struct header h;
    size_t off = sizeof(h);
    const char *p;
    int rc = 0;

    if (pread(img->fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
        !same_file(&h)) {
        return -1;
    }
    p = mmap(NULL, img->len, PROT_READ, MAP_PRIVATE, img->fd, 0);
    if (p == MAP_FAILED) {
        return -1;
    }
    /* The file's superblock vouched for its classes and layout: from here
     * on a section that does not load is a fault, not a mismatch. */
    rc |= chunkid_image_load(p + off, h.len[SEC_CHUNKID]);
    off += placed(h.len[SEC_CHUNKID]);
    rc |= assoc_image_load(p + off, h.len[SEC_ASSOC]);
    off += placed(h.len[SEC_ASSOC]);
    rc |= slabs_image_load(p + off, h.len[SEC_SLABS]);
    off += placed(h.len[SEC_SLABS]);
    rc |= lru_image_load(p + off, h.len[SEC_LRU], h.largest);
    munmap((void *)p, img->len);
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
