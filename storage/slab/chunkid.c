/*
 * chunkid.c: page numbers for 32-bit chunk ids (chunkid.h).
 *
 * Both tables are reserved once, at their largest, and cost only the
 * memory of the entries in use: the page table with mmap (numbers are
 * handed out lowest first, so it stays dense), the reverse map as leaves
 * of 2^16 numbers allocated the first time a page in their range is
 * named (a leaf covers 64 GiB of 1 MiB pages).
 */
#include "storage/slab/chunkid.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define ADDR_BITS   47              /* user space on x86-64 and arm64 */
#define LEAF_BITS   16
#define LEAF_SIZE   ((size_t)1 << LEAF_BITS)
#define NUMBERS_MAX ((uint32_t)1 << 24)     /* 16M pages at most */

struct chunkid_table chunkid_tab;

static struct {
    size_t      page_size;
    unsigned    page_shift;
    uint32_t    cap;            /* numbers 1..cap */
    uint32_t    top;            /* numbers ever handed out */
    uint32_t    free_head;      /* a freed number, 0 if none */
    _Atomic uint32_t named;     /* numbers in use */
    size_t      table_bytes;
    uint32_t  **leaves;         /* reverse map */
    size_t      nleaves;
} ci;

static unsigned
bits_for(uint64_t n)        /* bits to write 0..n-1 */
{
    unsigned b = 0;

    while (((uint64_t)1 << b) < n) {
        b++;
    }
    return b;
}

int
chunkid_init(size_t page_size, unsigned max_perslab)
{
    unsigned ib = bits_for(max_perslab > 1 ? max_perslab : 2);
    uint64_t cap;
    void *t;

    if (ci.leaves != NULL || page_size == 0 ||
        (page_size & (page_size - 1)) != 0 || ib >= 31) {
        return -1;
    }
    cap = ((uint64_t)1 << (32 - ib)) - 1;
    if (cap > NUMBERS_MAX) {
        cap = NUMBERS_MAX;
    }
    ci.page_size = page_size;
    ci.page_shift = bits_for(page_size);
    if (ci.page_shift >= ADDR_BITS) {
        return -1;
    }
    ci.nleaves = (((size_t)1 << (ADDR_BITS - ci.page_shift)) + LEAF_SIZE - 1)
                 >> LEAF_BITS;
    ci.leaves = calloc(ci.nleaves, sizeof(*ci.leaves));
    ci.table_bytes = (size_t)(cap + 1) * sizeof(struct chunkid_page);
    t = mmap(NULL, ci.table_bytes, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (ci.leaves == NULL || t == MAP_FAILED) {
        free(ci.leaves);
        ci.leaves = NULL;
        if (t != MAP_FAILED) {
            munmap(t, ci.table_bytes);
        }
        return -1;
    }
    ci.cap = (uint32_t)cap;
    ci.top = 0;
    ci.free_head = 0;
    atomic_store(&ci.named, 0);
    chunkid_tab.pages = t;
    chunkid_tab.index_bits = ib;
    chunkid_tab.index_mask = ((uint32_t)1 << ib) - 1;
    return 0;
}

void
chunkid_destroy(void)
{
    if (ci.leaves == NULL) {
        return;
    }
    for (size_t i = 0; i < ci.nleaves; i++) {
        free(ci.leaves[i]);
    }
    free(ci.leaves);
    munmap(chunkid_tab.pages, ci.table_bytes);
    ci.leaves = NULL;
    chunkid_tab.pages = NULL;
}

uint32_t
chunkid_capacity(void)
{
    return ci.cap;
}

uint32_t
chunkid_pages_named(void)
{
    return atomic_load_explicit(&ci.named, memory_order_relaxed);
}

/* The reverse map's entry for page (a page-aligned address), or NULL if
 * it lies outside what the map covers or its leaf cannot be had. */
static uint32_t *
rev_slot(const void *page, bool make)
{
    uintptr_t key = (uintptr_t)page >> ci.page_shift;
    size_t leaf = key >> LEAF_BITS;
    uint32_t *l;

    if (leaf >= ci.nleaves) {
        return NULL;
    }
    l = __atomic_load_n(&ci.leaves[leaf], __ATOMIC_ACQUIRE);
    if (l == NULL && make) {
        l = calloc(LEAF_SIZE, sizeof(*l));
        __atomic_store_n(&ci.leaves[leaf], l, __ATOMIC_RELEASE);
    }
    return l != NULL ? &l[key & (LEAF_SIZE - 1)] : NULL;
}

struct image_head {
    uint32_t top, free_head, named, index_bits;
};

size_t
chunkid_image(void *dst)
{
    struct image_head h = { ci.top, ci.free_head, atomic_load(&ci.named),
                            chunkid_tab.index_bits };
    size_t n = sizeof(h) + (size_t)(ci.top + 1) * sizeof(struct chunkid_page);

    if (dst != NULL) {
        memcpy(dst, &h, sizeof(h));
        memcpy((char *)dst + sizeof(h), chunkid_tab.pages,
               n - sizeof(h));
    }
    return n;
}

/* The image's head, if the bytes fit this table: its pages after it. */
static const struct chunkid_page *
image_pages(const void *src, size_t len, struct image_head *h)
{
    if (len < sizeof(*h)) {
        return NULL;
    }
    memcpy(h, src, sizeof(*h));
    if (h->index_bits != chunkid_tab.index_bits || h->top > ci.cap ||
        ci.top != 0 ||
        len != sizeof(*h) + (size_t)(h->top + 1) *
                            sizeof(struct chunkid_page)) {
        return NULL;
    }
    return (const void *)((const char *)src + sizeof(*h));
}

int
chunkid_image_check(const void *src, size_t len,
                    bool (*in_file)(const void *p))
{
    const struct chunkid_page *pages;
    struct image_head h;

    if ((pages = image_pages(src, len, &h)) == NULL) {
        return -1;
    }
    for (uint32_t num = 1; num <= h.top; num++) {
        if (pages[num].first != NULL && !in_file(pages[num].first)) {
            return -1;
        }
    }
    return 0;
}

int
chunkid_image_load(const void *src, size_t len)
{
    const struct chunkid_page *pages;
    struct image_head h;

    if ((pages = image_pages(src, len, &h)) == NULL) {
        return -1;
    }
    memcpy(chunkid_tab.pages, pages, (size_t)(h.top + 1) * sizeof(*pages));
    for (uint32_t num = 1; num <= h.top; num++) {
        char *first = pages[num].first;
        uint32_t *rev;

        if (first == NULL) {
            continue;
        }
        rev = rev_slot((void *)((uintptr_t)first &
                                ~(uintptr_t)(ci.page_size - 1)), true);
        if (rev == NULL) {
            return -1;
        }
        *rev = num;
    }
    ci.top = h.top;
    ci.free_head = h.free_head;
    atomic_store(&ci.named, h.named);
    return 0;
}

static uint64_t
geo_of(uint32_t size, uint32_t n)
{
    return (uint64_t)size << 32 | n;
}

int
chunkid_page_set(void *page, char *first, uint32_t size, uint32_t n)
{
    uint32_t *rev = rev_slot(page, true);
    struct chunkid_page *pg;
    uint32_t num;

    if (rev == NULL || n == 0 || n - 1 > chunkid_tab.index_mask) {
        return -1;
    }
    num = *rev;
    if (num == 0) {
        if (ci.free_head != 0) {
            num = ci.free_head;
            ci.free_head = (uint32_t)(chunkid_tab.pages[num].geo >> 32);
        } else if (ci.top < ci.cap) {
            num = ++ci.top;
        } else {
            return -1;
        }
        *rev = num;
        atomic_fetch_add_explicit(&ci.named, 1, memory_order_relaxed);
    }
    pg = &chunkid_tab.pages[num];
    /* geo before first: a reader that sees this page's first sees its
     * geometry (chunkid_peek). */
    __atomic_store_n(&pg->geo, geo_of(size, n), __ATOMIC_RELEASE);
    __atomic_store_n(&pg->first, first, __ATOMIC_RELEASE);
    return 0;
}

void
chunkid_page_drop(void *page)
{
    uint32_t *rev = rev_slot(page, false);
    struct chunkid_page *pg;

    if (rev == NULL || *rev == 0) {
        return;
    }
    pg = &chunkid_tab.pages[*rev];
    __atomic_store_n(&pg->first, NULL, __ATOMIC_RELEASE);
    __atomic_store_n(&pg->geo, geo_of(ci.free_head, 0), __ATOMIC_RELEASE);
    ci.free_head = *rev;
    *rev = 0;
    atomic_fetch_sub_explicit(&ci.named, 1, memory_order_relaxed);
}

uint32_t
chunkid_of(const void *p)
{
    uintptr_t page = (uintptr_t)p & ~(uintptr_t)(ci.page_size - 1);
    uint32_t num, size;
    const struct chunkid_page *pg;

    if (p == NULL) {
        return 0;
    }
    num = *rev_slot((const void *)page, false);
    pg = &chunkid_tab.pages[num];
    size = (uint32_t)(pg->geo >> 32);
    return num << chunkid_tab.index_bits |
           (uint32_t)(((const char *)p - pg->first) / size);
}
