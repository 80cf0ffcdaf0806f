/*
 * tier_pmem.c: the PMEM tier, pages from a file mapped with libpmem.
 *
 * The only file that includes libpmem.h.  Pages are tracked in a bitmap
 * (bit set = used) so that page_alloc always gives the lowest free page:
 * a file filled from the front keeps its pages dense, and recovery can
 * claim exactly the pages the file says are in use.
 *
 * Strict mode (the power-loss simulator):
 *
 *   file  <--MAP_SHARED--  shared   (what survives a crash)
 *    |                       ^
 *    +---MAP_PRIVATE-->    base     (what callers store into)
 *                           persist(addr, len): copy the 64-byte lines
 *                           covering the range from base to shared
 *
 * Two threads persisting the same line at once both copy it whole; as on
 * real PMEM the line holds whatever was last stored, so callers that
 * share a line must order their stores themselves.
 *
 * The private view is copy-on-write over the file, so it costs memory only
 * for the pages written and reads the file's contents where untouched.
 */
#include "storage/tier/tier.h"
#include "storage/tier/tier_group_priv.h"
#include "storage/tier/tier_medium.h"

#include <errno.h>
#include <fcntl.h>
#include <libpmem.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>


static void
bitmap_reset(struct pmem_state *s)
{
    memset(s->bitmap, 0, s->nwords * sizeof(*s->bitmap));
    /* Bits past the last page read as used so no search ever finds them. */
    for (size_t i = s->npages; i < s->nwords * 64; i++) {
        s->bitmap[i / 64] |= (uint64_t)1 << (i % 64);
    }
    s->hint = 0;
}

static bool
bit_test(const struct pmem_state *s, size_t i)
{
    return (s->bitmap[i / 64] >> (i % 64)) & 1;
}

static void
bit_set(struct pmem_state *s, size_t i)
{
    s->bitmap[i / 64] |= (uint64_t)1 << (i % 64);
}

static void
bit_clear(struct pmem_state *s, size_t i)
{
    s->bitmap[i / 64] &= ~((uint64_t)1 << (i % 64));
    if (i / 64 < s->hint) {
        s->hint = i / 64;
    }
}

/* Lowest free page index, or SIZE_MAX when all are used. */
static size_t
bitmap_first_free(struct pmem_state *s)
{
    for (size_t w = s->hint; w < s->nwords; w++) {
        if (s->bitmap[w] != UINT64_MAX) {
            s->hint = w;
            return w * 64 + (size_t)__builtin_ctzll(~s->bitmap[w]);
        }
    }
    s->hint = s->nwords;
    return SIZE_MAX;
}

static void *
pmem_page_alloc(struct tier *t)
{
    struct pmem_state *s = state(t);
    size_t i;

    if (t->used + t->page_size > t->limit) {
        return NULL;
    }
    i = bitmap_first_free(s);
    if (i == SIZE_MAX) {
        return NULL;
    }
    bit_set(s, i);
    t->used += t->page_size;
    return s->base + s->reserve + i * t->page_size;
}

static void
pmem_page_free(struct tier *t, void *page)
{
    struct pmem_state *s = state(t);
    size_t i = tier_pmem_index(t, page);

    if (i == SIZE_MAX || !bit_test(s, i)) {
        /* A foreign or doubly freed page: ignore it rather than corrupt
         * the count. */
        return;
    }
    bit_clear(s, i);
    t->used -= t->page_size;
}

/* ---- reaching the medium (tier_medium.c) --------------------------- */

/* Make [addr, addr + len) durable now, as the medium requires. */
static void
reach(struct pmem_state *s, const char *addr, size_t len)
{
    pmem_flush_point(s);
    if (s->strict) {
        pmem_strict_copy(s, addr, len);
    } else if (s->flush == TIER_FLUSH_LINES) {
        pmem_persist(addr, len);
    } else {
        pmem_msync_range(s, addr, len);
    }
}

void
tier_pmem_sync(struct tier *t, const void *addr, size_t len)
{
    struct pmem_state *s = state(t);

    if (s->strict) {
        pmem_strict_copy(s, addr, len);
    } else if (s->is_pmem) {
        pmem_persist(addr, len);
    } else {
        pmem_msync_range(s, addr, len);
    }
}

int
tier_pmem_sync_all(struct tier *t)
{
    struct pmem_state *s = state(t);

    if (s->strict || s->is_pmem) {
        tier_pmem_sync(t, s->base, s->len);
        return 0;
    }
    pmem_count_sync(s);
    return fdatasync(s->fd);
}

static void
count_flush(struct pmem_state *s, size_t len)
{
    struct flush_slot *f = pmem_slot(s);

    __atomic_add_fetch(&f->flushes, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&f->bytes, len, __ATOMIC_RELAXED);
}

void
tier_pmem_flush_stats(const struct tier *t, uint64_t *flushes,
                      uint64_t *bytes, uint64_t *syncs)
{
    const struct pmem_state *s = state(t);

    *flushes = *bytes = *syncs = 0;
    for (unsigned i = 0; i < FLUSH_SLOTS; i++) {
        *flushes += __atomic_load_n(&s->slot[i].flushes, __ATOMIC_RELAXED);
        *bytes += __atomic_load_n(&s->slot[i].bytes, __ATOMIC_RELAXED);
        *syncs += __atomic_load_n(&s->slot[i].syncs, __ATOMIC_RELAXED);
    }
}

static void
pmem_tier_persist(struct tier *t, const void *addr, size_t len)
{
    struct pmem_state *s = state(t);

    if (len == 0) {
        return;
    }
    count_flush(s, len);
    if (s->flush == TIER_FLUSH_NONE) {
        /* Stores reach the page cache in program order; keep the
         * compiler from reordering them across this commit point. */
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        return;
    }
    if (s->flush == TIER_FLUSH_MSYNC && pmem_group_note(s, addr, len)) {
        return;
    }
    reach(s, addr, len);
}

static bool
pmem_set_limit(struct tier *t, size_t limit)
{
    if (limit > state(t)->npages * t->page_size) {
        /* The file is never resized behind the operator's back. */
        return false;
    }
    t->limit = limit;
    return true;
}

static void
state_free(struct pmem_state *s)
{
    pmem_group_stop(s);
    if (s->resv != NULL) {
        munmap(s->resv, s->resv_len);
    }
    if (s->fd >= 0) {
        close(s->fd);
    }
    if (s->shared != NULL) {
        pmem_unmap(s->shared, s->len);
    }
    free(s->bitmap);
    pthread_mutex_destroy(&s->copy_lock);
    free(s);
}

void
tier_pmem_unlock(struct tier *t)
{
    struct pmem_state *s = state(t);

    if (s->fd >= 0) {
        flock(s->fd, LOCK_UN);
    }
}

static void
pmem_destroy(struct tier *t)
{
    state_free(state(t));
    free(t);
}

static const struct tier_ops pmem_ops = {
    .name = "pmem",
    .page_alloc = pmem_page_alloc,
    .page_free = pmem_page_free,
    .persist = pmem_tier_persist,
    .set_limit = pmem_set_limit,
    .destroy = pmem_destroy,
};

static bool
options_valid(const struct tier_pmem_options *o, char *err, size_t errlen)
{
    size_t reserve;

    if (o->path == NULL || o->path[0] == '\0') {
        snprintf(err, errlen, "memory file: no path given");
        return false;
    }
    if (o->page_size < PMEM_LINE || (o->page_size & (o->page_size - 1))) {
        snprintf(err, errlen, "memory file %s: page size %zu is not a "
                 "power of two of at least %d", o->path, o->page_size,
                 PMEM_LINE);
        return false;
    }
    reserve = (o->reserve + o->page_size - 1) & ~(o->page_size - 1);
    if (o->size != 0 && o->size < reserve + o->page_size) {
        snprintf(err, errlen, "memory file %s: %zu bytes hold no page of "
                 "%zu bytes after the %zu reserved", o->path, o->size,
                 o->page_size, reserve);
        return false;
    }
    return true;
}

/* One process at a time: a second server started on a file in use (two
 * instances given one path) would tear the first one's items.  The lock
 * lives as long as the descriptor, and the kernel drops it when the
 * process dies, so a crashed server's file opens again at once. */
static bool
lock_file(struct pmem_state *s, const char *path, char *err, size_t errlen)
{
    s->fd = open(path, O_RDWR | O_CLOEXEC);
    if (s->fd < 0) {
        snprintf(err, errlen, "memory file %s: %s", path, strerror(errno));
        return false;
    }
    if (flock(s->fd, LOCK_EX | LOCK_NB) != 0) {
        snprintf(err, errlen, "memory file %s: %s", path,
                 errno == EWOULDBLOCK ? "in use by another process"
                                      : strerror(errno));
        return false;
    }
    return true;
}

static bool
map_existing(struct pmem_state *s, const struct tier_pmem_options *o,
             const struct stat *st, char *err, size_t errlen)
{
    size_t mapped = 0;

    if (o->size != 0 && (size_t)st->st_size != o->size) {
        snprintf(err, errlen, "memory file %s is %lld bytes but %zu were "
                 "asked for; it is not resized: give its size or remove it",
                 o->path, (long long)st->st_size, o->size);
        return false;
    }
    /* flags 0 and len 0: map the whole file as it is. */
    s->shared = pmem_map_file(o->path, 0, 0, 0, &mapped, &s->is_pmem);
    if (s->shared == NULL) {
        snprintf(err, errlen, "memory file %s: %s", o->path,
                 pmem_errormsg());
        return false;
    }
    s->len = mapped;
    return true;
}

static bool
map_new(struct pmem_state *s, const struct tier_pmem_options *o, char *err,
        size_t errlen)
{
    size_t mapped = 0;

    if (!o->create || o->size == 0) {
        snprintf(err, errlen, "memory file %s does not exist%s", o->path,
                 o->create ? " and no size was given to create it" : "");
        return false;
    }
    /* EXCL: a file that appeared meanwhile is not truncated, and a failed
     * allocation (ENOSPC) leaves no half-made file behind. */
    s->shared = pmem_map_file(o->path, o->size,
                              PMEM_FILE_CREATE | PMEM_FILE_EXCL, 0600,
                              &mapped, &s->is_pmem);
    if (s->shared == NULL) {
        snprintf(err, errlen, "memory file %s: cannot create %zu bytes: %s",
                 o->path, o->size, pmem_errormsg());
        return false;
    }
    s->len = mapped;
    s->created = true;
    return true;
}

static bool
map_file(struct pmem_state *s, const struct tier_pmem_options *o, char *err,
         size_t errlen)
{
    struct stat st;

    if (stat(o->path, &st) == 0) {
        /* locked before it is mapped: another server may be using it */
        return lock_file(s, o->path, err, errlen) &&
               map_existing(s, o, &st, err, errlen);
    }
    if (errno != ENOENT) {
        snprintf(err, errlen, "memory file %s: %s", o->path,
                 strerror(errno));
        return false;
    }
    return map_new(s, o, err, errlen) && lock_file(s, o->path, err, errlen);
}

bool
tier_pmem_file_busy(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    bool busy;

    if (fd < 0) {
        return false;
    }
    busy = flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd);
    return busy;
}

/* Move the file's mapping to `want` when nothing is mapped there (a
 * reservation claims the range first, or the caller holds it already,
 * `held` bytes, so that MREMAP_FIXED replaces nothing but that).  The kernel moves the page tables, copies nothing.
 * false: it stays where it is. */
static bool
move_mapping(struct pmem_state *s, void *want, size_t held)
{
    void *r = held >= s->len ? want :
              mmap(want, s->len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS |
                   MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);

    if (r == MAP_FAILED) {
        return false;
    }
    if (r != want) {            /* a kernel without MAP_FIXED_NOREPLACE */
        munmap(r, s->len);
        return false;
    }
    r = mremap(s->shared, s->len, s->len, MREMAP_MAYMOVE | MREMAP_FIXED,
               want);
    if (r == MAP_FAILED) {
        munmap(want, s->len);
        return false;
    }
    s->shared = r;
    return true;
}

/* (Re)map the private view over the file at s->base. */
static bool
strict_map_view(struct pmem_state *s)
{
    void *p = mmap(s->base, s->len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_FIXED, s->fd, 0);

    return p == s->base;
}

/* Reserve an address range aligned to the page size and map the private
 * view into it, so that pages are aligned as in the shared mapping. */
static bool
strict_setup(struct pmem_state *s, const char *path, size_t page_size,
             char *err, size_t errlen)
{
    size_t align = page_size < 4096 ? 4096 : page_size;
    uintptr_t a;

    s->resv_len = s->len + align;
    s->resv = mmap(NULL, s->resv_len, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (s->resv == MAP_FAILED) {
        s->resv = NULL;
        goto fail;
    }
    a = ((uintptr_t)s->resv + align - 1) & ~(uintptr_t)(align - 1);
    s->base = (char *)a;
    if (!strict_map_view(s)) {
        goto fail;
    }
    return true;
fail:
    snprintf(err, errlen, "memory file %s: strict mode: %s", path,
             strerror(errno));
    return false;
}

static bool
layout(struct pmem_state *s, const struct tier_pmem_options *o, char *err,
       size_t errlen)
{
    size_t ps = o->page_size;

    s->reserve = (o->reserve + ps - 1) & ~(ps - 1);
    if (s->len < s->reserve + ps) {
        snprintf(err, errlen, "memory file %s: %zu bytes hold no page of "
                 "%zu bytes after the %zu reserved", o->path, s->len, ps,
                 s->reserve);
        return false;
    }
    if (((uintptr_t)s->base + s->reserve) % ps != 0) {
        snprintf(err, errlen, "memory file %s: mapped at %p, not aligned "
                 "to the page size %zu", o->path, (void *)s->base, ps);
        return false;
    }
    s->npages = (s->len - s->reserve) / ps;
    s->nwords = (s->npages + 63) / 64;
    s->bitmap = calloc(s->nwords, sizeof(*s->bitmap));
    if (s->bitmap == NULL) {
        snprintf(err, errlen, "memory file %s: out of memory", o->path);
        return false;
    }
    bitmap_reset(s);
    return true;
}

/* AUTO: POWER where it is cheap, on PMEM (a cache-line flush); on any
 * other file an msync costs a device flush, so PROCESS (tier.h).  The
 * simulator models a power cut whatever the file sits on. */
static void
settle_durability(struct pmem_state *s, const struct tier_pmem_options *o)
{
    s->durability = o->durability;
    if (s->strict) {
        s->durability = TIER_DURABLE_POWER;
    } else if (s->durability == TIER_DURABLE_AUTO) {
        s->durability = s->is_pmem ? TIER_DURABLE_POWER
                                   : TIER_DURABLE_PROCESS;
    }
    if (s->durability == TIER_DURABLE_PROCESS) {
        s->flush = TIER_FLUSH_NONE;
    } else {
        s->flush = s->is_pmem ? TIER_FLUSH_LINES : TIER_FLUSH_MSYNC;
    }
}

static struct pmem_state *
state_open(const struct tier_pmem_options *o, char *err, size_t errlen)
{
    /* Aligned so that each thread's flush counters have a line. */
    struct pmem_state *s = aligned_alloc(_Alignof(struct pmem_state),
                                         sizeof(struct pmem_state));

    if (s == NULL) {
        snprintf(err, errlen, "memory file %s: out of memory", o->path);
        return NULL;
    }
    memset(s, 0, sizeof(*s));
    s->fd = -1;
    pthread_mutex_init(&s->copy_lock, NULL);
    s->strict = o->strict;
    if (!map_file(s, o, err, errlen)) {
        goto fail;
    }
    if (o->want_base != NULL && !s->strict && !s->created &&
        (void *)s->shared != o->want_base) {
        move_mapping(s, o->want_base, o->want_held);
    }
    if (o->want_held > 0) {
        /* the hold, or what the file left of it, goes */
        if ((void *)s->shared != o->want_base) {
            munmap(o->want_base, o->want_held);
        } else if (o->want_held > s->len) {
            munmap((char *)o->want_base + s->len, o->want_held - s->len);
        }
    }
    s->base = s->shared;
    if (s->strict && !strict_setup(s, o->path, o->page_size, err, errlen)) {
        goto fail;
    }
    settle_durability(s, o);
    if (!layout(s, o, err, errlen)) {
        goto fail;
    }
    return s;
fail:
    state_free(s);
    return NULL;
}

struct tier *
tier_pmem_open(const struct tier_pmem_options *o, char *err, size_t errlen)
{
    struct tier *t;

    if (!options_valid(o, err, errlen)) {
        return NULL;
    }
    t = calloc(1, sizeof(*t));
    if (t == NULL) {
        snprintf(err, errlen, "memory file %s: out of memory", o->path);
        return NULL;
    }
    t->priv = state_open(o, err, errlen);
    if (t->priv == NULL) {
        free(t);
        return NULL;
    }
    t->ops = &pmem_ops;
    t->id = TIER_PMEM;
    t->page_size = o->page_size;
    t->limit = state(t)->npages * o->page_size;
    return t;
}

void *
tier_pmem_base(const struct tier *t)
{
    return state(t)->base;
}

size_t
tier_pmem_mapped_len(const struct tier *t)
{
    return state(t)->len;
}

enum tier_durability
tier_pmem_durability(const struct tier *t)
{
    return state(t)->durability;
}

enum tier_flush
tier_pmem_flush_kind(const struct tier *t)
{
    return state(t)->flush;
}

bool
tier_pmem_is_pmem(const struct tier *t)
{
    return state(t)->is_pmem != 0;
}

bool
tier_pmem_created(const struct tier *t)
{
    return state(t)->created;
}

size_t
tier_pmem_npages(const struct tier *t)
{
    return state(t)->npages;
}

void *
tier_pmem_page(const struct tier *t, size_t index)
{
    struct pmem_state *s = state(t);

    if (index >= s->npages) {
        return NULL;
    }
    return s->base + s->reserve + index * t->page_size;
}

size_t
tier_pmem_index(const struct tier *t, const void *addr)
{
    struct pmem_state *s = state(t);
    const char *p = addr;
    const char *first = s->base + s->reserve;
    size_t i;

    if (p < first) {
        return SIZE_MAX;
    }
    i = (size_t)(p - first) / t->page_size;
    return i < s->npages ? i : SIZE_MAX;
}

bool
tier_pmem_claim(struct tier *t, size_t index)
{
    struct pmem_state *s = state(t);

    if (index >= s->npages || bit_test(s, index)) {
        return false;
    }
    bit_set(s, index);
    t->used += t->page_size;
    return true;
}

bool
tier_pmem_crash_after(struct tier *t, uint64_t n)
{
    struct pmem_state *s = state(t);

    if (!s->strict || n == 0) {
        return false;
    }
    __atomic_store_n(&s->crash_count, 0, __ATOMIC_RELAXED);
    s->crash_at = n;
    return true;
}

bool
tier_pmem_crash(struct tier *t)
{
    struct pmem_state *s = state(t);

    if (!s->strict || !strict_map_view(s)) {
        return false;
    }
    bitmap_reset(s);
    t->used = 0;
    return true;
}
