/*
 * tier_dram.c: the DRAM tier, pages from the C heap.
 *
 * Items are reached at random, so on a large cache nearly every lookup
 * misses the TLB as well as the caches, and a prefetched line whose page
 * walk misses too arrives late.  Pages are therefore taken from 2 MB
 * aligned extents that the kernel is asked (MADV_HUGEPAGE) to back with
 * transparent huge pages: a 1 MB slab page is half an extent.  The hint
 * is refused when THP is off, and nothing else changes.
 */
#include "storage/tier/tier.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#define HUGE_PAGE ((size_t)2 << 20)

/* A page not handed out, linked through its own first bytes. */
struct spare {
    struct spare *next;
};

struct dram {
    /* Preallocated mode (-L): one block, pages carved off its front;
     * pages given back wait on `spares` for a raised limit. */
    char         *base;
    size_t        npages;
    size_t        next;         /* first never-used page */
    /* Heap mode: extents of `per_extent` pages; the pages of partly used
     * extents that are not handed out wait on `spares`, and an extent
     * whose pages are all back there goes back to the heap. */
    size_t        extent;       /* bytes (0: preallocated mode) */
    size_t        per_extent;
    struct spare *spares;
};

static void *
pop_spare(struct dram *d)
{
    struct spare *s = d->spares;

    if (s != NULL) {
        d->spares = s->next;
    }
    return s;
}

static void
push_spare(struct dram *d, void *page)
{
    struct spare *s = page;

    s->next = d->spares;
    d->spares = s;
}

/* A new extent: its first page, the others onto the spares. */
static void *
extent_alloc(struct dram *d, size_t page_size)
{
    size_t align = d->extent % HUGE_PAGE == 0 ? HUGE_PAGE : page_size;
    void *e;

    if (posix_memalign(&e, align, d->extent) != 0) {
        return NULL;
    }
    if (align == HUGE_PAGE) {
        madvise(e, d->extent, MADV_HUGEPAGE);
    }
    for (size_t i = d->per_extent; i-- > 1;) {
        push_spare(d, (char *)e + i * page_size);
    }
    return e;
}

static uintptr_t
extent_of(const struct dram *d, const void *page)
{
    return (uintptr_t)page & ~(uintptr_t)(d->extent - 1);
}

/* Take the spare pages of the extent at `base` off the list; how many. */
static size_t
take_extent(struct dram *d, uintptr_t base)
{
    struct spare **pp = &d->spares;
    size_t n = 0;

    while (*pp != NULL) {
        if (extent_of(d, *pp) == base) {
            *pp = (*pp)->next;
            n++;
        } else {
            pp = &(*pp)->next;
        }
    }
    return n;
}

/* Page returned: when every page of its extent is back, free the extent.
 * (Pages are given back only when the limit is lowered: the walk over
 * the spares is rare.) */
static void
extent_page_free(struct dram *d, void *page)
{
    uintptr_t base = extent_of(d, page);
    size_t n = 1;

    if (d->per_extent == 1) {
        free(page);
        return;
    }
    for (struct spare *s = d->spares; s != NULL; s = s->next) {
        n += extent_of(d, s) == base;
    }
    if (n < d->per_extent) {
        push_spare(d, page);
        return;
    }
    take_extent(d, base);
    free((void *)base);
}

/* A page whatever the limit. */
static void *
take_page(struct tier *t)
{
    struct dram *d = t->priv;
    void *page;

    if ((page = pop_spare(d)) == NULL) {
        if (d->extent != 0) {
            page = extent_alloc(d, t->page_size);
        } else if (d->next < d->npages) {
            page = d->base + d->next++ * t->page_size;
        }
    }
    if (page != NULL) {
        t->used += t->page_size;
    }
    return page;
}

static void *
dram_page_alloc(struct tier *t)
{
    return t->used + t->page_size > t->limit ? NULL : take_page(t);
}

/* Past the limit: only from the heap (a preallocated block is all of
 * the limit). */
static void *
dram_page_alloc_past(struct tier *t)
{
    struct dram *d = t->priv;

    return d->extent != 0 ? take_page(t) : NULL;
}

static void
dram_page_free(struct tier *t, void *page)
{
    struct dram *d = t->priv;

    t->used -= t->page_size;
    if (d->extent != 0) {
        extent_page_free(d, page);
    } else {
        push_spare(d, page);
    }
}

static void
dram_persist(struct tier *t, const void *addr, size_t len)
{
    /* DRAM does not survive a restart: nothing to make durable. */
    (void)t;
    (void)addr;
    (void)len;
}

static void
dram_destroy(struct tier *t)
{
    struct dram *d = t->priv;

    void *page;

    if (d->extent == 0) {
        free(d->base);
    }
    /* Every page is back by now (slabs_destroy()): each extent's pages
     * are all spares. */
    while (d->extent != 0 && (page = pop_spare(d)) != NULL) {
        take_extent(d, extent_of(d, page));
        free((void *)extent_of(d, page));
    }
    free(d);
    free(t);
}

static bool
dram_set_limit(struct tier *t, size_t limit)
{
    struct dram *d = t->priv;

    if (d->extent == 0 && limit > t->limit) {
        /* A preallocated block cannot grow. */
        return false;
    }
    t->limit = limit;
    return true;
}

static const struct tier_ops dram_ops = {
    .name = "dram",
    .page_alloc = dram_page_alloc,
    .page_alloc_past = dram_page_alloc_past,
    .page_free = dram_page_free,
    .persist = dram_persist,
    .set_limit = dram_set_limit,
    .destroy = dram_destroy,
};

struct tier *
tier_dram_create(size_t limit, size_t page_size, bool prealloc)
{
    struct tier *t = calloc(1, sizeof(*t));
    struct dram *d = calloc(1, sizeof(*d));
    void *base = NULL;

    if (t == NULL || d == NULL) {
        goto fail;
    }
    t->ops = &dram_ops;
    t->id = TIER_DRAM;
    t->page_size = page_size;
    t->limit = limit;
    t->priv = d;
    if (prealloc) {
        d->npages = limit / page_size;
        if (posix_memalign(&base, page_size, d->npages * page_size + 1) !=
            0) {
            goto fail;
        }
        madvise(base, d->npages * page_size, MADV_HUGEPAGE);
        d->base = base;
    } else if (page_size < HUGE_PAGE && HUGE_PAGE % page_size == 0) {
        d->extent = HUGE_PAGE;
        d->per_extent = HUGE_PAGE / page_size;
    } else {
        /* A page of 2 MB or more is its own extent (aligned to 2 MB
         * when it is a multiple of it). */
        d->extent = page_size;
        d->per_extent = 1;
    }
    return t;
fail:
    fprintf(stderr, "tier_dram: cannot allocate %zu bytes\n", limit);
    free(d);
    free(t);
    return NULL;
}
