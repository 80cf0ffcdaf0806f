/*
 * slabs_move.h: page moves between slab classes, requested by the cache
 * and carried out by the page mover thread (slabs_move.c).
 */
#ifndef MCPM_STORAGE_SLABS_MOVE_H
#define MCPM_STORAGE_SLABS_MOVE_H

#include <stdbool.h>

#include "storage/base/status.h"
#include "storage/slab/slabs.h"

/* ---- page moves: requests -------------------------------------------- */

/*
 * Move one page of tier `tier` from class src (-1: any class with pages
 * to spare) to dst (0: the pool).  Returns at once: CACHE_OK when the move
 * was queued (behind the one under way, if any: one may wait), else
 * CACHE_BUSY (one waits already), CACHE_BADCLASS, CACHE_NOSPARE,
 * CACHE_SAME or CACHE_DISABLED (no mover is attached).
 */
enum cache_status slabs_reassign(unsigned tier, int src, int dst);

/*
 * Tier class tc is out of memory and has nothing to evict (typically it
 * has no page while others hold the whole tier): have the mover bring it
 * a page from any class of its tier with one to spare, waiting up to ms
 * milliseconds.  True if a page arrived.  No slabs lock held; item locks
 * may be (the mover only trylocks them).
 */
bool  slabs_steal_page(unsigned tc, unsigned ms);

/* Wait until no move is queued or running (tests). */
void  slabs_mover_wait(void);

/* While a recovery reads the memory file's pages back, none of them
 * moves: a reassign in the file's tier answers CACHE_BUSY. */
void  slabs_hold_moves(bool held);

/* ---- page moves: the mover's side (mover.c) --------------------------- */

/* A mover thread takes requests from now on (on), or no longer: queued
 * requests are dropped and slabs_move_next() returns false. */
void  slabs_mover_attach(bool on);

/* Wait for a request: its source and destination tier classes, or false
 * when the mover is detached. */
bool  slabs_move_next(unsigned *src, unsigned *dst);

/*
 * Start the move: take the source's first page out of service (its free
 * chunks leave the free list, and chunks freed while it drains are not
 * listed again) and return it.  NULL when there is nothing to drain: the
 * class has no page, or the source is a pool, whose page moved at once.
 */
char *slabs_move_begin(unsigned src, unsigned dst);

/*
 * Chunk i of the page being moved: -1 if it is free; else fn(chunk, room,
 * ctx) runs under the slabs lock (so the chunk cannot be freed meanwhile;
 * fn may take a reference but no lock) and its result is returned.  room:
 * the bytes of the chunk past the prefix.
 */
int   slabs_move_visit(char *page, unsigned i,
                       int (*fn)(void *chunk, size_t room, void *ctx),
                       void *ctx);

/* The tier class the move under way empties a page of (for the mover's
 * own thread, between slabs_move_begin() and slabs_move_end()). */
unsigned slabs_move_src(void);

/* The page is empty: give it to the destination (cut for its class, or
 * into the pool, or back to the tier when the tier is over its limit). */
void  slabs_move_end(char *page);

/* The request is done (moved or not): the next may be queued. */
void  slabs_move_done(void);

#endif
