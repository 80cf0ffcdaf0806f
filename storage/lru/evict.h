/*
 * evict.h: the tails of the lists, where room is made.
 *
 * A tail pull looks at the last few items of one list: a busy one (its
 * item lock taken, or held by a reader) is skipped, a dead one (expired or
 * flushed) is reclaimed, and the first live one is handed to the puller's
 * function, which evicts it, moves it to another list, or keeps it for a
 * move into another tier (place.c).  The maintainer (maint.c) and
 * allocation share it.
 *
 * evict_mem() is the allocation side: memory for a chunk, made by
 * eviction in the class's own COLD tail when the slabs have none free.
 *
 * Locking: no lock may be held on entry but an item lock (the caller's
 * key).  A pull takes the list lock, then only trylocks item locks.
 */
#ifndef MCPM_STORAGE_EVICT_H
#define MCPM_STORAGE_EVICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/base/options.h"
#include "storage/slab/item.h"

/* Keep opts (evict, lru_segmented, slab_reassign, slab_automove are read
 * at every use). */
void evict_init(const struct cache_options *opts);

/* Whether items may be evicted to make room (not -M). */
bool evict_allowed(void);

/* What a puller did with the live tail item it was handed. */
enum evict_act {
    EVICT_STOP,             /* left it: the pull ends */
    EVICT_DONE,             /* evicted or moved it: counted as done */
    EVICT_HOLD              /* keep its item lock and reference for the
                               caller, past the pull (struct evict_pull) */
};

/* Handed a live tail item of list `which` of tier class tc, with the
 * list's lock, the item's lock and a reference held. */
typedef enum evict_act evict_fn(struct item *it, uint32_t hv, unsigned tc,
                                enum item_lru which, void *ctx);

struct evict_pull {
    evict_fn    *fn;        /* NULL: reclaim the dead, stop at the live */
    void        *ctx;
    int          done;      /* items reclaimed, evicted or moved */
    struct item *held;      /* EVICT_HOLD: the item, locked, referenced */
    uint32_t     held_hv;
};

/* Pull at the tail of list (tc, which) as above, up to 5 items; returns
 * p->done. */
int evict_pull(unsigned tc, enum item_lru which, struct evict_pull *p);

/* Evict a live tail item (its item lock held): counted, unlinked.
 * do_: the caller holds its list lock. */
void evict_item(struct item *it, uint32_t hv, unsigned tc);
void do_evict_item(struct item *it, uint32_t hv, unsigned tc);

/* Move HOT's tail item to COLD (a class whose COLD list is empty has
 * nothing to evict yet); returns the number moved. */
int  evict_force_cold(unsigned tc);

/*
 * Where memory comes from before anything is evicted, besides free chunks
 * and new pages: room(tc) finds some for tier class tc (recovery reads a
 * page of the class back, recover_help()) and returns true, or false when
 * it has none to give.  Set while a recovery runs, NULL otherwise; called
 * with at most an item lock held.
 */
void evict_set_room(bool (*room)(unsigned tc));

/*
 * Memory for `size` bytes of tier class tc: slabs first, then what
 * evict_set_room()'s callback finds, then room made in the tails of tier
 * class lru_tc by cold(lru_tc) (it returns how many items it freed), with
 * HOT pushed to COLD when that found nothing, up to 10 tries.  NULL when nothing more can be freed.  lru_tc is tc except for
 * the pieces of chunked items, whose heads live in the largest class.
 */
void *evict_retry(size_t size, unsigned tc, unsigned lru_tc,
                  int (*cold)(unsigned lru_tc));

/*
 * evict_retry() that evicts from COLD; when that cannot help (no page, or
 * no item, in the class) it has the page mover bring a page from another
 * class (unless -M).  Counts outofmemory on failure.  An item_mem_fn.
 */
void *evict_mem(size_t size, unsigned tc, unsigned lru_tc);

#endif
