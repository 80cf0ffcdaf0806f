/*
 * tier.h: where item memory comes from.
 *
 * A tier hands out fixed-size, page-aligned pages up to a byte limit.  The
 * slab allocator asks a tier for pages and never looks inside it, so a tier
 * backed by persistent memory (tier_pmem.c) or by libmemkind is one more
 * file implementing these ops; item->tier records which tier a page (and so
 * an item) came from.
 *
 *   struct tier ------ ops ------> page_alloc / page_free / persist / destroy
 *     limit, used (bytes)
 *
 * Locking: a tier is not thread-safe; the slab allocator calls it under its
 * own lock.  persist() may be called without locks on memory the caller
 * owns.
 */
#ifndef MCPM_STORAGE_TIER_H
#define MCPM_STORAGE_TIER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tier;

struct tier_ops {
    const char *name;
    /* One page of t->page_size bytes, aligned to it; NULL when the limit
     * is reached or the memory cannot be had. */
    void *(*page_alloc)(struct tier *t);
    /* Give a page back (shutdown, or a lowered memory limit). */
    void  (*page_free)(struct tier *t, void *page);
    /* Make [addr, addr + len) durable; a no-op for volatile tiers. */
    void  (*persist)(struct tier *t, const void *addr, size_t len);
    /* Change the limit; false if this tier cannot (a preallocated block
     * cannot grow). */
    bool  (*set_limit)(struct tier *t, size_t limit);
    /* Free the tier's own state and any memory it still holds. */
    void  (*destroy)(struct tier *t);
};

struct tier {
    const struct tier_ops *ops;
    uint8_t     id;             /* stored in item->tier */
    size_t      page_size;
    size_t      limit;          /* bytes; pages beyond it are refused */
    size_t      used;           /* bytes handed out as pages */
    void       *priv;           /* the implementation's state */
};

#define TIER_DRAM 0

/*
 * The DRAM tier: pages from aligned malloc up to `limit` bytes, or carved
 * from one block allocated now when `prealloc` (-L) is set.  Returns NULL
 * (and says why on stderr) when the memory cannot be had.
 */
struct tier *tier_dram_create(size_t limit, size_t page_size, bool prealloc);

static inline void *
tier_page_alloc(struct tier *t)
{
    return t->ops->page_alloc(t);
}

static inline void
tier_page_free(struct tier *t, void *page)
{
    t->ops->page_free(t, page);
}

static inline void
tier_persist(struct tier *t, const void *addr, size_t len)
{
    t->ops->persist(t, addr, len);
}

static inline bool
tier_set_limit(struct tier *t, size_t limit)
{
    return t->ops->set_limit(t, limit);
}

/* Destroy a tier through its ops and set *tp to NULL. */
static inline void
tier_destroy(struct tier **tp)
{
    if (*tp != NULL) {
        (*tp)->ops->destroy(*tp);
        *tp = NULL;
    }
}

#endif
