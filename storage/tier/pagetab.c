/*
 * pagetab.c: the page table of the PMEM file (pagetab.h).
 */
#include "storage/tier/pagetab.h"
#include "storage/tier/sblock.h"

#include <stdio.h>
#include <string.h>

_Static_assert(PAGETAB_OFF == SBLOCK_SIZE, "the table follows the copies");

static struct {
    struct tier    *tier;
    unsigned char  *table;      /* one byte per page, in the reserve */
    size_t          npages;
} pt;

int
pagetab_init(struct tier *t, char *err, size_t errlen)
{
    char *base = tier_pmem_base(t);
    size_t npages = tier_pmem_npages(t);
    size_t room = (size_t)((char *)tier_pmem_page(t, 0) - base);

    if (room < PAGETAB_OFF + npages) {
        snprintf(err, errlen, "the reserve of %zu bytes cannot hold the "
                 "superblock and a page table of %zu pages", room, npages);
        return -1;
    }
    pt.tier = t;
    pt.table = (unsigned char *)base + PAGETAB_OFF;
    pt.npages = npages;
    return 0;
}

void
pagetab_destroy(void)
{
    memset(&pt, 0, sizeof(pt));
}

void
pagetab_clear(void)
{
    memset(pt.table, 0, pt.npages);
    tier_persist(pt.tier, pt.table, pt.npages);
}

const unsigned char *
pagetab_get(size_t *npages)
{
    *npages = pt.npages;
    return pt.table;
}

void
pagetab_set(const void *page, unsigned clsid)
{
    size_t i = tier_pmem_index(pt.tier, page);

    if (i >= pt.npages) {
        return;
    }
    pt.table[i] = (unsigned char)clsid;
    tier_persist(pt.tier, &pt.table[i], 1);
}
