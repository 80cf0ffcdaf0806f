/*
 * tier_dram.c: the DRAM tier, pages from the C heap.
 */
#include "storage/tier.h"

#include <stdio.h>
#include <stdlib.h>

/* Preallocated mode: one block, pages carved off its front.  Pages given
 * back go on a free stack so that a lowered and then raised limit can reuse
 * them. */
struct dram_block {
    char   *base;
    size_t  npages;
    size_t  next;           /* first never-used page */
    void  **freed;          /* stack of returned pages */
    size_t  nfreed;
};

static void *
dram_page_alloc(struct tier *t)
{
    struct dram_block *b = t->priv;
    void *page;

    if (t->used + t->page_size > t->limit) {
        return NULL;
    }
    if (b == NULL) {
        if (posix_memalign(&page, t->page_size, t->page_size) != 0) {
            return NULL;
        }
    } else if (b->nfreed > 0) {
        page = b->freed[--b->nfreed];
    } else if (b->next < b->npages) {
        page = b->base + b->next++ * t->page_size;
    } else {
        return NULL;
    }
    t->used += t->page_size;
    return page;
}

static void
dram_page_free(struct tier *t, void *page)
{
    struct dram_block *b = t->priv;

    t->used -= t->page_size;
    if (b == NULL) {
        free(page);
    } else {
        b->freed[b->nfreed++] = page;
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
    struct dram_block *b = t->priv;

    if (b != NULL) {
        free(b->base);
        free(b->freed);
        free(b);
    }
    free(t);
}

static bool
dram_set_limit(struct tier *t, size_t limit)
{
    if (t->priv != NULL && limit > t->limit) {
        /* A preallocated block cannot grow. */
        return false;
    }
    t->limit = limit;
    return true;
}

static const struct tier_ops dram_ops = {
    .name = "dram",
    .page_alloc = dram_page_alloc,
    .page_free = dram_page_free,
    .persist = dram_persist,
    .set_limit = dram_set_limit,
    .destroy = dram_destroy,
};

static struct dram_block *
block_create(size_t limit, size_t page_size)
{
    struct dram_block *b = calloc(1, sizeof(*b));
    void *base = NULL;

    if (b == NULL) {
        return NULL;
    }
    b->npages = limit / page_size;
    b->freed = calloc(b->npages + 1, sizeof(*b->freed));
    if (b->freed == NULL ||
        posix_memalign(&base, page_size, b->npages * page_size + 1) != 0) {
        free(b->freed);
        free(b);
        return NULL;
    }
    b->base = base;
    return b;
}

struct tier *
tier_dram_create(size_t limit, size_t page_size, bool prealloc)
{
    struct tier *t = calloc(1, sizeof(*t));

    if (t == NULL) {
        goto fail;
    }
    t->ops = &dram_ops;
    t->id = TIER_DRAM;
    t->page_size = page_size;
    t->limit = limit;
    if (prealloc) {
        t->priv = block_create(limit, page_size);
        if (t->priv == NULL) {
            goto fail;
        }
    }
    return t;
fail:
    fprintf(stderr, "tier_dram: cannot allocate %zu bytes\n", limit);
    free(t);
    return NULL;
}
