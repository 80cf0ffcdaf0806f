/*
 * prefault.h: a memory file's pages faulted in ahead of their first use.
 *
 * A page of the file touched for the first time costs the kernel a page
 * allocation and clearing for each 4 KB on tmpfs (a DAX file's new
 * blocks are allocated and zeroed as well): a few hundred microseconds a
 * megabyte.  Where that first touch comes is the cut of a new slab page,
 * under the lock every allocation takes, on a worker in the middle of
 * its requests.  A thread of the tier's ("mc-prefault") keeps the
 * PREFAULT_AHEAD pages past the furthest handed out faulted in, so that
 * a load of new keys finds its pages ready.  It touches no byte: MADV_POPULATE_WRITE
 * maps the pages writable, as a write would, without writing, so it may
 * run beside the workers and beside a successor on the same file.
 */
#ifndef MCPM_STORAGE_PREFAULT_H
#define MCPM_STORAGE_PREFAULT_H

#include <stddef.h>

struct prefault;

/* Pages [0, npages) of page_size bytes from first; the thread started.
 * NULL when it cannot be (the tier then goes without). */
struct prefault *prefault_start(char *first, size_t page_size, size_t npages);

/* Page `index` was handed out (under the tier's caller's lock). */
void prefault_note(struct prefault *w, size_t index);

/* Stop the thread and free w (NULL: nothing). */
void prefault_stop(struct prefault *w);

#endif
