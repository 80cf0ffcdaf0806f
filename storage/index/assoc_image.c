/*
 * assoc_image.c: the hash table handed to a successor (assoc_image.h):
 * its image, the precopy ahead of the pause and the pages written since,
 * and the successor's room for it.
 */
#include "storage/index/assoc_image.h"

#include "storage/base/locks.h"
#include "storage/index/assoc_priv.h"

#include <linux/membarrier.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PAGE ((size_t)1 << ASSOC_PAGE_SHIFT)

static char *stage;             /* assoc_stage()'s room */
static size_t stage_len;
static size_t stage_filled;     /* bytes of buckets assoc_stage_fill() put
                                   there */

static size_t
pages_of(size_t bytes)
{
    return (bytes + PAGE - 1) >> ASSOC_PAGE_SHIFT;
}

static size_t
min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* ---- the running node ------------------------------------------------- */

size_t
assoc_image(void *dst)
{
    uint64_t s = atomic_load(&assoc_shape);
    size_t n = sizeof(s) + buckets_of(s) * sizeof(uint32_t);

    if (dst != NULL) {
        memcpy(dst, &s, sizeof(s));
        memcpy((char *)dst + sizeof(s), assoc_table, n - sizeof(s));
    }
    return n;
}

size_t
assoc_image_pre(void *dst, size_t max)
{
    uint64_t s = atomic_load(&assoc_shape);
    size_t bytes = buckets_of(s) * sizeof(uint32_t);

    if (assoc_written == NULL || !assoc_barrier_ok ||
        sizeof(s) + bytes > max) {
        return 0;
    }
    for (size_t i = 0; i < pages_of(bytes); i++) {
        __atomic_store_n(&assoc_written[i], 0, __ATOMIC_RELAXED);
    }
    /*
     * A thread that stored to a bucket and then read its page's mark
     * before the clear reached it would not mark it again.  The barrier
     * runs on every thread of the process: each store made before it is
     * seen by the copy below, and each mark read after it sees the clear.
     */
    if (syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0)
        != 0) {
        return 0;
    }
    memcpy(dst, &s, sizeof(s));
    memcpy((char *)dst + sizeof(s), assoc_table, bytes);
    return sizeof(s) + bytes;
}

size_t
assoc_delta_len(size_t pre)
{
    return pre > sizeof(uint64_t) ? pages_of(pre - sizeof(uint64_t)) : 0;
}

size_t
assoc_image_delta(void *dst, size_t pre, unsigned char *map,
                  size_t map_len)
{
    uint64_t s = atomic_load(&assoc_shape);
    size_t bytes = buckets_of(s) * sizeof(uint32_t);
    size_t old = pre > sizeof(s) ? pre - sizeof(s) : 0;
    size_t n = min_size(old, bytes);
    char *to = (char *)dst + sizeof(s);
    const char *from = (const char *)assoc_table;

    memcpy(dst, &s, sizeof(s));
    for (size_t i = 0; i < pages_of(n); i++) {
        unsigned char w = assoc_written[i];
        size_t off = i << ASSOC_PAGE_SHIFT;

        if (i < map_len) {
            map[i] = w;
        }
        if (w != 0 || i >= map_len) {
            memcpy(to + off, from + off, min_size(PAGE, n - off));
        }
    }
    if (bytes > n) {
        memcpy(to + n, from + n, bytes - n);   /* grown since */
    }
    return sizeof(s) + bytes;
}

/* ---- the successor ---------------------------------------------------- */

int
assoc_image_check(const void *src, size_t len)
{
    uint64_t s;

    if (len < sizeof(s)) {
        return -1;
    }
    memcpy(&s, src, sizeof(s));
    if (level_of(s) > ASSOC_POWER_MAX || split_of(s) >> level_of(s) != 0 ||
        buckets_of(s) > assoc_reserved ||
        len != sizeof(s) + buckets_of(s) * sizeof(uint32_t) ||
        level_of(s) <= locks_power()) {
        return -1;
    }
    return 0;
}

#define STAGE_ALIGN ((size_t)2 << 20)   /* a transparent huge page */

int
assoc_stage(size_t bytes)
{
    size_t len = (bytes + STAGE_ALIGN - 1) & ~(STAGE_ALIGN - 1);
    char *p;

    if (stage != NULL || len == 0) {
        return -1;
    }
    /* Aligned to a huge page, so that huge pages move as they are. */
    p = mmap(NULL, len + STAGE_ALIGN, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        return -1;
    }
    stage = (char *)(((uintptr_t)p + STAGE_ALIGN - 1) & ~(STAGE_ALIGN - 1));
    if (stage > p) {
        munmap(p, (size_t)(stage - p));
    }
    munmap(stage + len, (size_t)(p + STAGE_ALIGN - stage));
    stage_len = len;
    madvise(stage, len, MADV_HUGEPAGE);
    if (madvise(stage, len, MADV_POPULATE_WRITE) != 0) {
        memset(stage, 0, len);          /* a kernel before 5.14 */
    }
    return 0;
}

int
assoc_stage_fill(const void *src, size_t len)
{
    if (stage == NULL || len < sizeof(uint64_t) ||
        len - sizeof(uint64_t) > stage_len) {
        return -1;
    }
    stage_filled = len - sizeof(uint64_t);
    memcpy(stage, (const char *)src + sizeof(uint64_t), stage_filled);
    return 0;
}

void
assoc_stage_drop(void)
{
    if (stage != NULL) {
        munmap(stage, stage_len);
    }
    stage = NULL;
    stage_len = 0;
    stage_filled = 0;
}

/* The n bytes of buckets at src into the room: only the pages delta
 * names and those past the precopy when the room holds it, else all.
 * Past n the room is cleared, as a table's buckets not in use are. */
static void
bring_up_to_date(const char *src, size_t n, const struct assoc_delta *d)
{
    size_t m = min_size(stage_filled, n);

    if (d == NULL || stage_filled == 0 || d->copied != stage_filled ||
        d->len < pages_of(m)) {
        memcpy(stage, src, n);
    } else {
        for (size_t i = 0; i < pages_of(m); i++) {
            size_t off = i << ASSOC_PAGE_SHIFT;

            if (d->map[i] != 0) {
                memcpy(stage + off, src + off, min_size(PAGE, m - off));
            }
        }
        memcpy(stage + m, src + m, n - m);
    }
    if (stage_filled > n) {
        memset(stage + n, 0, stage_filled - n);
    }
}

/* n bytes of buckets into the table: through the staged room when it
 * holds them (brought up to date there, then moved over the table's
 * first pages), else straight in. */
static void
load_buckets(const char *src, size_t n, const struct assoc_delta *d)
{
    if (stage == NULL || stage_len < n ||
        stage_len > assoc_reserved * sizeof(uint32_t) ||
        ((uintptr_t)assoc_table & (STAGE_ALIGN - 1)) != 0) {
        memcpy(assoc_table, src, n);
        return;
    }
    bring_up_to_date(src, n, d);
    if (mremap(stage, stage_len, stage_len, MREMAP_MAYMOVE | MREMAP_FIXED,
               assoc_table) == MAP_FAILED) {
        memcpy(assoc_table, src, n);
        munmap(stage, stage_len);
    }
    stage = NULL;
    stage_len = 0;
    stage_filled = 0;
}

int
assoc_image_load(const void *src, size_t len, const struct assoc_delta *d)
{
    uint64_t s;

    if (assoc_image_check(src, len) != 0) {
        return -1;
    }
    memcpy(&s, src, sizeof(s));
    load_buckets((const char *)src + sizeof(s), len - sizeof(s), d);
    atomic_store(&assoc_shape, s);
    return 0;
}
