/*
 * recover_link.h: recovery's links (recover_link.c): each head that passed
 * its checks into the hash table and COLD, unless a newer copy of its key
 * is known, while the node serves; and what does not come back, freed.
 */
#ifndef MCPM_STORAGE_RECOVER_LINK_H
#define MCPM_STORAGE_RECOVER_LINK_H

#include <stdbool.h>
#include <stdint.h>

#include "storage/recover/recover_check.h"

/* The hash table presized for n heads; its log2 of buckets. */
unsigned recover_link_presize(uint64_t n);
/* The heads of the page a thread gave to its class (w->page).  A
 * `helper` never waits for an item lock: a head whose lock stays busy
 * waits for the end (w->later). */
void     recover_link_pages(struct worker *w, bool helper);
/* Once every page is done, one thread: the chunked heads' chains put
 * together and checked, the pieces no head claimed freed, then the heads
 * linked, and those a helper put off.  -1 when out of memory (nothing
 * linked then). */
int      recover_link_chunked(struct recovery *rc);

#endif
