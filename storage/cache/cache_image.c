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
#include "storage/cache/cache_image.h"
#include "storage/base/crc.h"
#include "storage/cache/cache_priv.h"
#include "storage/index/assoc_image.h"
#include "storage/lru/lru.h"
#include "storage/slab/chunkid.h"
#include "storage/slab/slabs.h"
#include "storage/slab/slabs_image.h"
#include "storage/slab/slabs_stats.h"
#include "storage/tier/sblock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
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

/* Is every item of the file in the index?  Not while a recovery reads
 * them back, nor once it stopped before the end: a successor, or the
 * next start, must scan. */
static bool
items_back(void)
{
    return !recover_running(cache_priv.recovering) && !cache_priv.unrecovered;
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

    if (slabs_tier(TIER_PMEM) == NULL || !fits_policy(cache_priv.opts) ||
        !items_back()) {
        return 0;
    }
    for (unsigned s = 0; s < NSECTIONS; s++) {
        n += placed(section(s, NULL, largest));
    }
    return n;
}

void
cache_image_file(uint64_t *base, uint64_t *len)
{
    struct tier *t = slabs_tier(TIER_PMEM);

    *base = *len = 0;
    if (cache_image_size() > 0) {
        *base = (uint64_t)(uintptr_t)tier_pmem_base(t);
        *len = tier_pmem_mapped_len(t);
    }
}

/* The room made for the image (cache_image_room()), mapped. */
static struct {
    int    fd;
    char  *map;
    size_t len;
} room = { -1, NULL, 0 };

/* The table copied into the room ahead of the pause
 * (cache_image_precopy()): its section's place and bytes, and the
 * length of the section before it then. */
static struct {
    int    fd;
    size_t at;
    size_t len;
    size_t chunkid_len;
} pre = { -1, 0, 0, 0 };

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
    pre.fd = -1;
}

int
cache_image_room(void)
{
    size_t n = cache_image_size();
    int fd;
    char *p;

    room_unmap();
    pre.fd = -1;
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

/* The image's bytes for fd from offset off: the room's mapping when it
 * is fd's and big enough, else a new mapping (MAP_FAILED when none can
 * be had). */
static char *
image_map(int fd, off_t off, size_t total)
{
    if (fd == room.fd && off == 0 && total <= room.len) {
        return room.map;
    }
    room_unmap();
    if (ftruncate(fd, off + (off_t)total) != 0) {
        return MAP_FAILED;
    }
    return mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off);
}

int
cache_image_precopy(uint64_t *at, uint64_t *len)
{
    size_t chunkid = chunkid_image(NULL);
    size_t off = sizeof(struct header) + placed(chunkid), n;

    pre.fd = -1;
    if (room.map == NULL || off >= room.len ||
        (n = assoc_image_pre(room.map + off, room.len - off)) == 0) {
        return -1;
    }
    pre.fd = room.fd;
    pre.at = off;
    pre.len = n;
    pre.chunkid_len = chunkid;
    *at = off;
    *len = n;
    return 0;
}

/* The marks of a precopy's pages, as a memfd for the successor: the
 * bytes of buckets the precopy held, the marks' count, the marks.  -1
 * when none can be made (the successor then copies it all). */
static int
delta_file(const unsigned char *map, size_t n)
{
    uint64_t head[2] = { pre.len - sizeof(uint64_t), n };
    int fd = memfd_create("mcpm-index-delta", MFD_CLOEXEC);

    if (fd >= 0 &&
        (write(fd, head, sizeof(head)) != (ssize_t)sizeof(head) ||
         write(fd, map, n) != (ssize_t)n)) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* The image into fd from offset off (page aligned): its length, or 0.
 * With delta, where a precopy went into fd (the room) and still fits,
 * the table's section is brought up to date rather than written anew,
 * and *delta is a delta_file() (else -1). */
static size_t
write_at(int fd, off_t off, int *delta)
{
    struct tier *t = slabs_tier(TIER_PMEM);
    struct header h = { MAGIC, VERSION, SBLOCK_VERSION, 0, 0, 0, 0, 0, 0,
                        0, 0, { 0 } };
    size_t total = sizeof(h), marks = 0;
    unsigned char *map = NULL;
    char *p;

    if (delta != NULL) {
        *delta = -1;
    }
    if (!cache_priv.stopped || t == NULL || !fits_policy(cache_priv.opts)) {
        return 0;
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
    if (delta != NULL && fd == pre.fd && off == 0 &&
        h.len[SEC_CHUNKID] == pre.chunkid_len &&
        h.len[SEC_ASSOC] >= pre.len &&
        (marks = assoc_delta_len(pre.len)) > 0) {
        map = malloc(marks);
    }
    if ((p = image_map(fd, off, total)) == MAP_FAILED) {
        free(map);
        return 0;
    }
    memcpy(p, &h, sizeof(h));
    total = sizeof(h);
    for (unsigned s = 0; s < NSECTIONS; s++) {
        if (s == SEC_ASSOC && map != NULL) {
            assoc_image_delta(p + total, pre.len, map, marks);
        } else {
            section(s, p + total, h.largest);
        }
        total += placed(h.len[s]);
    }
    if (map != NULL) {
        *delta = delta_file(map, marks);
        free(map);
    }
    if (p == room.map) {
        room_unmap();
    } else {
        munmap(p, total);
    }
    pre.fd = -1;
    /* the room's spare pages go: the image is what the file holds */
    return ftruncate(fd, off + (off_t)total) == 0 ? total : 0;
}

int
cache_image_write(int fd, int *delta)
{
    if (!items_back()) {
        return -1;
    }
    return write_at(fd, 0, delta) != 0 ? 0 : -1;
}

/* ---- the successor ---------------------------------------------------- */

int
cache_image_stage(size_t bytes)
{
    return assoc_stage(bytes);
}

int
cache_image_prefill(int fd, uint64_t at, uint64_t len)
{
    struct stat st;
    char *p;
    int rc;

    if (fstat(fd, &st) != 0 || at > (uint64_t)st.st_size ||
        len > (uint64_t)st.st_size - at || len == 0) {
        return -1;
    }
    /* Mapped for the copy only: the memory file is not mapped yet, and
     * this must not stay where it will go. */
    p = mmap(NULL, at + len, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        return -1;
    }
    rc = assoc_stage_fill(p + at, len);
    munmap(p, at + len);
    return rc;
}

/* The marks a delta_file() holds, into d (its map malloc()ed): 0, or -1
 * (none: the table is copied whole). */
static int
read_delta(int fd, struct assoc_delta *d)
{
    uint64_t head[2];
    unsigned char *map;
    struct stat st;

    memset(d, 0, sizeof(*d));
    if (fd < 0 || fstat(fd, &st) != 0 ||
        pread(fd, head, sizeof(head), 0) != (ssize_t)sizeof(head) ||
        (uint64_t)st.st_size != sizeof(head) + head[1] || head[1] == 0 ||
        (map = malloc(head[1])) == NULL) {
        return -1;
    }
    if (pread(fd, map, head[1], sizeof(head)) != (ssize_t)head[1]) {
        free(map);
        return -1;
    }
    d->map = map;
    d->len = head[1];
    d->copied = head[0];
    return 0;
}

static int map_at(struct cache_image *img, const struct cache_options *o,
                  int fd, off_t off);

int
cache_image_map(struct cache_image *img, const struct cache_options *o)
{
    memset(img, 0, sizeof(*img));
    img->fd = img->delta_fd = -1;
    if (o->image_fd < 0) {
        return -1;
    }
    img->delta_fd = o->image_delta_fd;
    return map_at(img, o, o->image_fd, 0);
}

/* The image in fd from offset off, if its header fits the options. */
static int
map_at(struct cache_image *img, const struct cache_options *o, int fd,
       off_t off)
{
    struct header h;
    struct stat st;
    uint64_t total = sizeof(h);

    if (!fits_policy(o) || fstat(fd, &st) != 0 ||
        st.st_size < off + (off_t)sizeof(h) ||
        pread(fd, &h, sizeof(h), off) != (ssize_t)sizeof(h)) {
        return -1;
    }
    for (unsigned s = 0; s < NSECTIONS; s++) {
        total += placed(h.len[s]);
    }
    if (memcmp(h.magic, MAGIC, sizeof(h.magic)) != 0 ||
        h.version != VERSION || h.sblock_version != SBLOCK_VERSION ||
        total != (uint64_t)(st.st_size - off) || h.page_size != o->page_size ||
        h.hash_algorithm != (uint32_t)o->hash_algorithm ||
        h.flags != flags_of(o) || h.base == 0) {
        return -1;
    }
    /* Mapped only once the memory file is (cache_image_adopt()): a
     * mapping made now could land where the file must go. */
    img->fd = fd;
    img->off = off;
    img->len = total;
    img->base = (void *)(uintptr_t)h.base;
    return 0;
}

void
cache_image_unmap(struct cache_image *img)
{
    if (img->owned && img->fd >= 0) {
        close(img->fd);
    }
    memset(img, 0, sizeof(*img));
    img->fd = img->delta_fd = -1;
}

/* Is the file the one the image describes, where it was?  NULL, or
 * why not. */
static const char *
not_same_file(const struct header *h)
{
    struct tier *t = slabs_tier(TIER_PMEM);

    if (t == NULL || slabs_tier(TIER_DRAM) != NULL) {
        return "the tiers differ";
    }
    if ((uint64_t)(uintptr_t)tier_pmem_base(t) != h->base) {
        return "the file's old address was taken";
    }
    if (tier_pmem_mapped_len(t) != h->file_len ||
        h->largest != slabs_largest()) {
        return "the file's size or classes differ";
    }
    if (cache_priv.sb.generation != h->generation || !cache_priv.sb.clean) {
        return "the file changed since";
    }
    return NULL;
}

/* Is p in the memory file?  Everything an image points at must be. */
static bool
in_file(const void *p)
{
    return tier_pmem_index(slabs_tier(TIER_PMEM), p) != SIZE_MAX;
}

/* The mapped image's sections, checked before any is taken: NULL, or
 * why not. */
static const char *
not_sound(const struct header *h, const char *p)
{
    size_t at[NSECTIONS], off = sizeof(*h);

    for (unsigned s = 0; s < NSECTIONS; s++) {
        at[s] = off;
        off += placed(h->len[s]);
    }
    if (chunkid_image_check(p + at[SEC_CHUNKID], h->len[SEC_CHUNKID],
                            in_file) != 0 ||
        assoc_image_check(p + at[SEC_ASSOC], h->len[SEC_ASSOC]) != 0 ||
        slabs_image_check(p + at[SEC_SLABS], h->len[SEC_SLABS]) != 0 ||
        lru_image_check(p + at[SEC_LRU], h->len[SEC_LRU], h->largest,
                        in_file) != 0) {
        return "its sections do not fit this file";
    }
    return NULL;
}

int
cache_image_adopt(const struct cache_image *img, struct cache_recovery *out,
                  const char **why)
{
    struct header h;
    struct assoc_delta d;
    size_t off = sizeof(h);
    const char *p;
    int rc = 0;

    *why = "it cannot be read";
    if (pread(img->fd, &h, sizeof(h), img->off) != (ssize_t)sizeof(h) ||
        (*why = not_same_file(&h)) != NULL) {
        return -1;
    }
    p = mmap(NULL, img->len, PROT_READ, MAP_PRIVATE, img->fd, img->off);
    if (p == MAP_FAILED) {
        return -1;
    }
    if ((*why = not_sound(&h, p)) != NULL) {
        munmap((void *)p, img->len);
        return -1;
    }
    /* The file's superblock vouched for its classes and layout: from here
     * on a section that does not load is a fault, not a mismatch. */
    rc |= chunkid_image_load(p + off, h.len[SEC_CHUNKID]);
    off += placed(h.len[SEC_CHUNKID]);
    rc |= assoc_image_load(p + off, h.len[SEC_ASSOC],
                           read_delta(img->delta_fd, &d) == 0 ? &d : NULL);
    free((void *)d.map);
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

/* ---- kept beside the file across a clean stop ------------------------- */

/*
 * <memory file>.index: the image a successor would be handed, written at
 * a clean stop for the next start of the same file, which then maps the
 * file where it was and skips the scan.  A page of its own header comes
 * first: the superblock as the stop left it (generation, CAS mark, stop
 * time, epoch), which the start's superblock must match, so that an image
 * is never taken for a file that has changed since, or for another file
 * put in its place, and a checksum of the image, so that a damaged one
 * is never loaded (a section that fails to load fails the start).
 * Written as .index.tmp, synced when the file is to
 * survive a power cut, then renamed over; any start (which commits the
 * superblock anew, outdating the image) removes it.  A missing, short or
 * mismatched one only costs the scan.
 */
#define SAVED_MAGIC   "MCPM-XS"
#define SAVED_VERSION 1
#define SAVED_AT      4096

static char *
saved_path(const char *file, const char *suffix)
{
    size_t n = strlen(file) + strlen(suffix) + 1;
    char *path = malloc(n);

    if (path != NULL) {
        snprintf(path, n, "%s%s", file, suffix);
    }
    return path;
}

static void
saved_of(const struct sblock *sb, struct cache_image_saved *out)
{
    memset(out, 0, sizeof(*out));
    memcpy(out->magic, SAVED_MAGIC, sizeof(out->magic));
    out->version = SAVED_VERSION;
    out->generation = sb->generation;
    out->cas_hwm = sb->cas_hwm;
    out->alive_time = sb->alive_time;
    out->epoch = sb->epoch;
}

/* The checksum of the image of len bytes at SAVED_AT in fd. */
static int
image_crc(int fd, size_t len, uint32_t *out)
{
    void *p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, SAVED_AT);

    if (p == MAP_FAILED) {
        return -1;
    }
    *out = crc_32c(0, p, len);
    munmap(p, len);
    return 0;
}

int
cache_image_save(void)
{
    const struct cache_options *o = cache_priv.opts;
    struct tier *t = slabs_tier(TIER_PMEM);
    char *tmp, *path;
    struct cache_image_saved sv;
    size_t len;
    int fd, rc = -1;

    if (!cache_priv.stopped || !cache_priv.sb.clean || t == NULL ||
        o->memory_file == NULL || !fits_policy(o)) {
        return -1;
    }
    tmp = saved_path(o->memory_file, ".index.tmp");
    path = saved_path(o->memory_file, ".index");
    if (tmp == NULL || path == NULL) {
        goto out;
    }
    saved_of(&cache_priv.sb, &sv);
    fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        goto out;
    }
    if ((len = write_at(fd, SAVED_AT, NULL)) != 0 &&
        image_crc(fd, len, &sv.image_crc) == 0 &&
        pwrite(fd, &sv, sizeof(sv), 0) == (ssize_t)sizeof(sv) &&
        (tier_pmem_durability(t) != TIER_DURABLE_POWER || fsync(fd) == 0) &&
        rename(tmp, path) == 0) {
        rc = 0;
    }
    close(fd);
    if (rc != 0) {
        unlink(tmp);
    }
out:
    free(tmp);
    free(path);
    return rc;
}

int
cache_image_map_saved(struct cache_image *img, const struct cache_options *o)
{
    uint32_t crc;
    char *path;
    int fd;

    memset(img, 0, sizeof(*img));
    img->fd = img->delta_fd = -1;
    if (o->memory_file == NULL || !fits_policy(o) ||
        (path = saved_path(o->memory_file, ".index")) == NULL) {
        return -1;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC);
    free(path);
    if (fd < 0) {
        return -1;
    }
    if (pread(fd, &img->saved, sizeof(img->saved), 0) !=
        (ssize_t)sizeof(img->saved) ||
        memcmp(img->saved.magic, SAVED_MAGIC, sizeof(img->saved.magic)) != 0 ||
        img->saved.version != SAVED_VERSION ||
        map_at(img, o, fd, SAVED_AT) != 0 ||
        image_crc(fd, img->len, &crc) != 0 || crc != img->saved.image_crc) {
        close(fd);
        memset(img, 0, sizeof(*img));
        img->fd = img->delta_fd = -1;
        return -1;
    }
    img->owned = true;
    return 0;
}

bool
cache_image_saved_fits(const struct cache_image *img, const struct sblock *sb)
{
    const struct cache_image_saved *was = &img->saved;

    if (!img->owned) {
        return true;            /* handed over: same_file() is the check */
    }
    return was->generation == sb->generation && was->cas_hwm == sb->cas_hwm &&
           was->alive_time == sb->alive_time && was->epoch == sb->epoch;
}

void
cache_image_forget_saved(const struct cache_options *o)
{
    char *path;

    if (o->memory_file == NULL) {
        return;
    }
    if ((path = saved_path(o->memory_file, ".index")) != NULL) {
        if (unlink(path) != 0 && errno != ENOENT) {
            fprintf(stderr, "memory file %s: cannot remove %s: %s\n",
                    o->memory_file, path, strerror(errno));
        }
        free(path);
    }
}
