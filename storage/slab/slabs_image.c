/*
 * slabs_image.c: the memory file's slab classes taken back as they are
 * (slabs_image.h): from the pages themselves (recovery), or handed to a
 * successor that maps the file at the same address (slabs_image()).
 *
 * Locking: none; before serving (the successor) or after every thread
 * stopped (the node handing over).
 */
#include "storage/slab/slabs_image.h"
#include "storage/slab/slabs_priv.h"

#include <stdint.h>
#include <string.h>

struct image_class {
    uint64_t size;
    uint32_t perslab;
    uint32_t npages;
    uint64_t sl_curr;
    uint64_t requested;
    uint64_t slots;             /* the free list's first chunk */
};

size_t
slabs_image(void *dst)
{
    char *p = dst;
    size_t n = sizeof(uint64_t);

    if (p != NULL) {
        uint64_t largest = sl.largest;

        memcpy(p, &largest, sizeof(largest));
    }
    for (unsigned id = 0; id <= sl.largest; id++) {
        const struct slab_class *c = &sl.cls[SLABS_TC(TIER_PMEM, id)];
        struct image_class ic = {
            c->size, c->perslab, c->npages, c->sl_curr, c->requested,
            (uint64_t)(uintptr_t)c->slots,
        };

        if (p != NULL) {
            memcpy(p + n, &ic, sizeof(ic));
            if (c->npages > 0) {
                memcpy(p + n + sizeof(ic), c->pages,
                       (size_t)c->npages * sizeof(*c->pages));
            }
        }
        n += sizeof(ic) + (size_t)c->npages * sizeof(*c->pages);
    }
    return n;
}

/* A page of the image: in the file, at a page's start, claimed once. */
static bool
claim_image_page(struct tier *t, char *page)
{
    size_t i = tier_pmem_index(t, page);

    return i != SIZE_MAX && tier_pmem_page(t, i) == page &&
           tier_pmem_claim(t, i);
}

/* Class id's part of the image at *off: its fields and pages taken. */
static int
load_class(unsigned id, const char *src, size_t len, size_t *off)
{
    struct slab_class *c = &sl.cls[SLABS_TC(TIER_PMEM, id)];
    struct tier *t = sl.tiers[TIER_PMEM];
    struct image_class ic;

    if (len - *off < sizeof(ic)) {
        return -1;
    }
    memcpy(&ic, src + *off, sizeof(ic));
    *off += sizeof(ic);
    if ((id != 0 && (ic.size != c->size || ic.perslab != c->perslab)) ||
        (len - *off) / sizeof(*c->pages) < ic.npages) {
        return -1;
    }
    for (uint32_t i = 0; i < ic.npages; i++) {
        char *page;

        memcpy(&page, src + *off, sizeof(page));
        *off += sizeof(page);
        if (!claim_image_page(t, page) || slabs_add_page(c, page) != 0) {
            return -1;
        }
    }
    c->sl_curr = ic.sl_curr;
    c->requested = ic.requested;
    c->slots = (struct slabs_chunk *)(uintptr_t)ic.slots;
    return 0;
}

/* Class id's part of the image at *off, read without taking it: does it
 * fit, and is everything it points at in the file? */
static bool
class_fits(unsigned id, const char *src, size_t len, size_t *off)
{
    const struct slab_class *c = &sl.cls[SLABS_TC(TIER_PMEM, id)];
    struct tier *t = sl.tiers[TIER_PMEM];
    struct image_class ic;

    if (len - *off < sizeof(ic)) {
        return false;
    }
    memcpy(&ic, src + *off, sizeof(ic));
    *off += sizeof(ic);
    if ((id != 0 && (ic.size != c->size || ic.perslab != c->perslab)) ||
        (len - *off) / sizeof(*c->pages) < ic.npages ||
        (ic.slots != 0 &&
         tier_pmem_index(t, (const void *)(uintptr_t)ic.slots) == SIZE_MAX)) {
        return false;
    }
    for (uint32_t i = 0; i < ic.npages; i++) {
        char *page;
        size_t at;

        memcpy(&page, src + *off, sizeof(page));
        *off += sizeof(page);
        at = tier_pmem_index(t, page);
        if (at == SIZE_MAX || tier_pmem_page(t, at) != page) {
            return false;
        }
    }
    return true;
}

/* An image's head: taken by a cache with this one's tiers and classes. */
static bool
head_fits(const void *src, size_t len)
{
    uint64_t largest;

    if (len < sizeof(largest) || sl.tiers[TIER_PMEM] == NULL ||
        sl.tiers[TIER_DRAM] != NULL) {
        return false;
    }
    memcpy(&largest, src, sizeof(largest));
    return largest == sl.largest;
}

int
slabs_image_check(const void *src, size_t len)
{
    size_t off = sizeof(uint64_t);

    if (!head_fits(src, len)) {
        return -1;
    }
    for (unsigned id = 0; id <= sl.largest; id++) {
        if (!class_fits(id, src, len, &off)) {
            return -1;
        }
    }
    return off == len ? 0 : -1;
}

int
slabs_image_load(const void *src, size_t len)
{
    size_t off = sizeof(uint64_t);

    if (!head_fits(src, len)) {
        return -1;
    }
    for (unsigned id = 0; id <= sl.largest; id++) {
        if (load_class(id, src, len, &off) != 0) {
            return -1;
        }
    }
    return off == len ? 0 : -1;
}

/* ---- recovery: a file's pages taken as they are ------------------------ */

unsigned
slabs_perslab(unsigned id)
{
    id = SLABS_TC_ID(id);
    return id >= 1 && id <= sl.largest ? sl.cls[id].perslab : 0;
}

void *
slabs_chunk(unsigned id, void *page, unsigned i)
{
    return slabs_chunk_at(&sl.cls[SLABS_TC_ID(id)], page, i);
}

int
slabs_recover_name(unsigned id, void *page)
{
    int rc;

    pthread_mutex_lock(&sl.lock);
    rc = slabs_name_page(&sl.cls[SLABS_TC_ID(id)], page);
    pthread_mutex_unlock(&sl.lock);
    return rc;
}

int
slabs_recover_page(unsigned id, void *page,
                   size_t (*keep)(void *chunk, void *ctx), void *ctx)
{
    unsigned tc = SLABS_TC(TIER_PMEM, id);
    struct slab_class *c = &sl.cls[tc];
    int rc = -1;

    pthread_mutex_lock(&sl.lock);
    if (id <= sl.largest && slabs_tc_valid(tc) &&
        slabs_name_page(c, page) == 0 && slabs_add_page(c, page) == 0) {
        for (unsigned i = 0; i < c->perslab; i++) {
            struct slabs_chunk *ch = slabs_chunk_at(c, page, i);
            size_t used = keep(ch, ctx);

            if (used != 0) {
                c->requested += used;
            } else {
                ch->clsid = (uint8_t)id;
                ch->tier = TIER_PMEM;
                slabs_push_free(c, ch);
            }
        }
        rc = 0;
    }
    pthread_mutex_unlock(&sl.lock);
    return rc;
}
