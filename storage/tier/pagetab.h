/*
 * pagetab.h: the PMEM file's page table.
 *
 * One byte per page of the file, in the reserve right after the two
 * superblock copies (sblock.h): 0 for a free page, else the slab class the
 * page is cut for.  Recovery reads it to know how to cut each page; slabs
 * writes it whenever a page of the file changes hands, after the page's
 * chunk prefixes are zero and durable, so the table never names a class
 * for a page that holds another class's items.
 *
 * Locking: none of its own.  pagetab_set() runs under the slabs lock; the
 * rest before serving.
 */
#ifndef MCPM_STORAGE_PAGETAB_H
#define MCPM_STORAGE_PAGETAB_H

#include <stddef.h>

#include "storage/tier/tier.h"

#define PAGETAB_OFF 8192        /* after both superblock copies */

/*
 * Find the table of the PMEM tier `t` (not owned); nothing is written.
 * -1 with a message in err if the reserve cannot hold a byte per page.
 */
int  pagetab_init(struct tier *t, char *err, size_t errlen);
void pagetab_destroy(void);

/* Every page free, persisted (a new or discarded file). */
void pagetab_clear(void);

/* The table, a byte per page, and its length (recovery). */
const unsigned char *pagetab_get(size_t *npages);

/* Page `page` is now cut for clsid (0: free): store it and persist it. */
void pagetab_set(const void *page, unsigned clsid);

#endif
