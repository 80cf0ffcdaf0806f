/*
 * slabs_image.h: the memory file's slab classes taken back as they are:
 * from the file's pages by recovery, or from a predecessor's image
 * (slabs_image.c).
 */
#ifndef MCPM_STORAGE_SLABS_IMAGE_H
#define MCPM_STORAGE_SLABS_IMAGE_H

#include <stddef.h>

#include "storage/slab/slabs.h"

/* ---- recovery ----------------------------------------------------------
 *
 * While recovery runs, before or while the node serves.  slabs_perslab()
 * and slabs_chunk() name chunk i of a page of class id (the item
 * address, past the prefix).
 * slabs_recover_page() gives a page the PMEM tier holds (tier_pmem_claim)
 * to class id as it is, without cutting it again: each chunk is offered
 * to keep(), whose answer is the bytes its item asks for (counted as
 * requested; the chunk stays in use) or 0 (the chunk goes on the free
 * list).  keep() runs under the slabs lock and takes no lock.  -1 if id is
 * not a class or memory for the page list runs out.
 */
unsigned slabs_perslab(unsigned id);
void    *slabs_chunk(unsigned id, void *page, unsigned i);

/*
 * The memory file's classes as they stand (their pages, free lists and
 * bytes in use, the page pool's), for a successor that maps the file at
 * the same address (cache_image.c): written to dst (NULL: the bytes
 * needed only), the bytes.  slabs_image_load() takes them into classes
 * that hold nothing yet, claiming each page in the tier: 0, or -1 when
 * they do not fit (other classes, a page outside the file or claimed
 * twice, memory).  Without a DRAM tier; before serving.
 */
size_t   slabs_image(void *dst);
int      slabs_image_load(const void *src, size_t len);

/* Before any section of an image is loaded: 0 when every class fits
 * and every page and free list it names is in the memory file, else
 * -1 (slabs_image_load() still refuses a page named twice). */
int      slabs_image_check(const void *src, size_t len);
/* Name the chunks of a page cut for class id (chunkid.h) before its items
 * are linked; -1 when every page number is taken. */
int      slabs_recover_name(unsigned id, void *page);
int      slabs_recover_page(unsigned id, void *page,
                            size_t (*keep)(void *chunk, void *ctx),
                            void *ctx);

#endif
