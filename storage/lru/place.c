/*
 * place.c: placement, room by demotion, and moves between tiers and
 * chunks (place.h).
 */
#include "storage/lru/place.h"
#include "storage/base/hash.h"
#include "storage/base/locks.h"
#include "storage/index/assoc.h"
#include "storage/lru/evict.h"
#include "storage/lru/link.h"
#include "storage/lru/lru.h"
#include "storage/lru/policy.h"
#include "storage/slab/slabs.h"
#include "storage/slab/slabs_move.h"

#include <string.h>

static uint64_t promotions;     /* items moved or copied up into DRAM */
static uint64_t demotions;      /* items moved down out of DRAM */

static void
count(uint64_t *ctr)
{
    __atomic_add_fetch(ctr, 1, __ATOMIC_RELAXED);
}

void
place_tier_moves(unsigned tier, uint64_t *p, uint64_t *d)
{
    *p = tier == TIER_DRAM ? __atomic_load_n(&promotions, __ATOMIC_RELAXED)
                           : 0;
    *d = tier == TIER_PMEM ? __atomic_load_n(&demotions, __ATOMIC_RELAXED)
                           : 0;
}

/* ---- moves ------------------------------------------------------------ */

/*
 * Copy linked item `it` into tier t, at the head of list `which`: a new
 * item there (from `mem`) carrying its value, cas, access time, exptime
 * and the marks in `keep`, swapped into its place.  Returns the new item
 * with its allocation reference for the caller, or NULL when `mem` has
 * no room.  lock(hv) and a reference held.  A move to another tier
 * (allocated as a new item there, which may make room) keeps the meta
 * marks but not the hit marks.
 */
static struct item *
copy_into(struct item *it, uint32_t hv, item_mem_fn *mem, unsigned t,
          enum item_lru which, uint16_t keep)
{
    struct item *n = item_new(mem, t, item_key(it), item_nkey(it),
                              item_client_flags(it), it->exptime,
                              item_vlen(it), (item_flags(it) & ITEM_CAS) != 0);

    if (n == NULL) {
        return NULL;
    }
    item_value_move(n, 0, it, 0, it->nbytes);
    item_set_cas(n, item_cas(it));
    item_time_store(n, item_time(it));
    item_flags_set(n, item_flags(it) & keep);
    link_replace(it, n, hv, which);
    return n;
}

static struct item *
move_to_tier(struct item *it, uint32_t hv, unsigned t, enum item_lru which)
{
    return copy_into(it, hv, place_mem, t, which,
                     ITEM_TOKEN_SENT | ITEM_STALE | ITEM_KEY_BINARY);
}

/* tier_policy capacity: an item in the file hit a second time goes back
 * to DRAM (into the list a new item would), unless DRAM cannot make
 * room.  The caller's reference moves to the new item. */
static struct item *
promote(struct item *it, uint32_t hv)
{
    struct item *n;

    if (!(item_flags(it) & ITEM_LINKED) ||
        (n = move_to_tier(it, hv, TIER_DRAM, link_first_list(it))) == NULL) {
        return it;
    }
    item_flags_set(n, ITEM_FETCHED);
    item_time_store(n, clock_now());
    item_release(it);
    count(&promotions);
    return n;
}

/*
 * tier_policy cache: a DRAM copy of `it`, an unchunked item in the file
 * hit a second time, takes its place in the hash table and DRAM's lists
 * (where a new item would go); `it` leaves its list but stays committed
 * in the file, its link's reference held by the copy's trailer.  Returns
 * the copy with the caller's reference moved to it, or `it` when DRAM has
 * no room.  lock(hv) held.
 */
static struct item *
copy_up(struct item *it, uint32_t hv)
{
    size_t ntotal = item_ntotal(it);
    unsigned id = slabs_clsid(ntotal + sizeof(it));
    unsigned tc = SLABS_TC(TIER_DRAM, id);
    uint16_t drop = ITEM_LINKED | ITEM_ACTIVE;
    struct item *n;

    if (id == 0 || (item_flags(it) & ITEM_CHUNKED) ||
        !(item_flags(it) & ITEM_LINKED) ||
        (n = place_mem(ntotal + sizeof(it), tc, tc)) == NULL) {
        return it;
    }
    memcpy(n->data, it->data, ntotal - sizeof(struct item));
    n->exptime = it->exptime;
    n->nbytes = it->nbytes;
    n->nkey = it->nkey;
    item_flags_store(n, (uint16_t)((item_flags(it) & ~drop) | ITEM_COPY |
                                   ITEM_FETCHED));
    item_time_store(n, clock_now());
    item_set_original(n, it);
    link_swap(it, n, hv, link_first_list(n));
    item_release(it);
    count(&promotions);
    return n;
}

/* Drop copy c: its original takes its place again at the head of the
 * file's COLD list, needing two more hits to be copied again; the copy's
 * reference becomes the link's.  lock(hv) held. */
static void
uncache(struct item *c, uint32_t hv)
{
    struct item *orig = item_original(c);

    item_set_original(c, NULL);
    item_flags_clear(orig, ITEM_FETCHED | ITEM_ACTIVE);
    item_time_store(orig, item_time(c));
    link_swap(c, orig, hv, ITEM_LRU_COLD);
    item_release(c);
    item_release(orig);
}

/* An item leaves DRAM as the policy says: a copy gives its place back to
 * its original, an item over a memory file moves into it.  Returns what
 * happened: POLICY_DROP when it is still there (nothing to do, or the
 * file had no room).  lock(hv) and a reference held. */
static enum policy_leave
leave_dram(struct item *it, uint32_t hv)
{
    struct item *n;

    switch (policy_leave(it)) {
    case POLICY_UNCACHE:
        uncache(it, hv);
        return POLICY_UNCACHE;
    case POLICY_DEMOTE_ITEM:
        n = move_to_tier(it, hv, TIER_PMEM, ITEM_LRU_COLD);
        if (n == NULL) {
            return POLICY_DROP;
        }
        item_release(n);
        return POLICY_DEMOTE_ITEM;
    default:
        return POLICY_DROP;
    }
}

/* ---- room by demotion ------------------------------------------------- */

static enum evict_act
hold_tail(struct item *it, uint32_t hv, unsigned tc, enum item_lru which,
          void *ctx)
{
    (void)it;
    (void)hv;
    (void)tc;
    (void)which;
    (void)ctx;
    return EVICT_HOLD;
}

/*
 * Make room in DRAM tier class tc over a memory file: the COLD tail item
 * leaves DRAM (leave_dram()) rather than the cache, and counts as a
 * demotion (a copy dropped, or an item moved into the file); if the file
 * has no room for it either it is evicted (unless -M), and counts as an
 * eviction.  Returns the number of items that left.
 */
static int
demote_cold(unsigned tc)
{
    struct evict_pull p = { .fn = hold_tail };
    struct item *it;

    evict_pull(tc, ITEM_LRU_COLD, &p);
    if ((it = p.held) == NULL) {
        return p.done;
    }
    /* Item lock and reference held, no list lock: the move may make room
     * in the file, whose list locks rank after DRAM's anyway. */
    if (leave_dram(it, p.held_hv) != POLICY_DROP) {
        count(&demotions);
        p.done++;
    } else if (evict_allowed() && (item_flags(it) & ITEM_LINKED)) {
        evict_item(it, p.held_hv, tc);
        p.done++;
    }
    locks_unlock(p.held_hv);
    item_release(it);
    return p.done;
}

void *
place_mem(size_t size, unsigned tc, unsigned lru_tc)
{
    if (policy_room(lru_tc) == POLICY_DEMOTE) {
        /* No outofmemory here, and no page taken from another class:
         * the caller goes to the file instead (capacity) or does without
         * a copy (cache). */
        return evict_retry(size, tc, lru_tc, demote_cold);
    }
    return evict_mem(size, tc, lru_tc);
}

struct item *
place_new(const char *key, size_t nkey, uint32_t client_flags,
          rel_time_t exptime, uint32_t vlen, bool use_cas)
{
    unsigned home = policy_home();
    struct item *it = place_new_in(home, key, nkey, client_flags, exptime,
                                   vlen, use_cas);
    int next;

    if (it == NULL && (next = policy_overflow(home)) >= 0) {
        it = place_new_in((unsigned)next, key, nkey, client_flags, exptime,
                          vlen, use_cas);
    }
    return it;
}

/* ---- hits ------------------------------------------------------------- */

struct item *
place_hit(struct item *it, uint32_t hv)
{
    bool again = (item_flags(it) & ITEM_FETCHED) != 0;

    lru_hit(it);
    switch (policy_on_hit(it, again)) {
    case POLICY_PROMOTE:
        return promote(it, hv);
    case POLICY_COPY:
        return copy_up(it, hv);
    default:
        return it;
    }
}

/* ---- the page mover's hand-off ---------------------------------------- */

static bool
same_key(const struct item *it, const char *key, size_t nkey)
{
    return item_nkey(it) == nkey && memcmp(item_key(it), key, nkey) == 0;
}

/* Copy a linked item into another chunk of its class and swap it in (a
 * copy's trailer, and with it the reference to its original, moves
 * too). */
static bool
rescue(struct item *it, uint32_t hv)
{
    size_t size = item_alloc_size(it);
    struct item *n = slabs_alloc_free(size, lru_tc(it));

    if (n == NULL) {
        return false;
    }
    memcpy(n->data, it->data, size - sizeof(struct item));
    if (item_flags(it) & ITEM_COPY) {
        item_set_original(it, NULL);
    }
    item_time_store(n, item_time(it));
    n->exptime = it->exptime;
    n->nbytes = it->nbytes;
    item_flags_store(n, (uint16_t)(item_flags(it) & ~ITEM_LINKED));
    n->nkey = it->nkey;
    n->clsid = it->clsid;
    link_replace(it, n, hv, item_lru(it));
    item_release(n);
    return true;
}

/* A free chunk; in a class other than the one a page leaves (a chunked
 * item's header and last piece live in smaller classes, which may have
 * no free chunk at all), else a new page's.  Never by eviction, and the
 * class being emptied never grows, as in a rescue. */
static void *
rescue_mem(size_t size, unsigned tc, unsigned lru_tc)
{
    void *mem = slabs_alloc_free(size, tc);

    (void)lru_tc;
    return mem != NULL || tc == slabs_move_src() ? mem
                                                 : slabs_alloc(size, tc);
}

/* A chunked item copied whole, header and chunks (rescue_mem()), and
 * swapped in as a store is: in the memory file the copy is committed
 * before the item leaves it, so a crash finds one or the other. */
static bool
rescue_whole(struct item *it, uint32_t hv)
{
    uint16_t keep = ITEM_FETCHED | ITEM_ACTIVE | ITEM_TOKEN_SENT |
                    ITEM_STALE | ITEM_KEY_BINARY;
    struct item *n = copy_into(it, hv, rescue_mem, it->tier, item_lru(it),
                               keep);

    if (n == NULL) {
        return false;
    }
    item_release(n);
    return true;
}

/* Copy a piece of a chunked item's value into another chunk of its class
 * and link the copy in its place: the item stays whole, its other chunks
 * where they are.  DRAM only: a chain in the memory file changes only as
 * recovery expects.  No reader holds the item (its walk of the chain
 * would race). */
static bool
rescue_piece(struct item *it, struct item_chunk *old)
{
    unsigned tc = SLABS_TC(old->tier, old->clsid);
    size_t bytes = sizeof(*old) + old->used;
    struct item_chunk *n;

    if (old->tier != TIER_DRAM || (n = slabs_alloc_free(bytes, tc)) == NULL) {
        return false;
    }
    memcpy(n->data, old->data, old->used);
    n->size = old->size;
    n->used = old->used;
    n->prev = old->prev;
    n->next = old->next;
    __atomic_store_n(&n->head, it, __ATOMIC_RELEASE);
    __atomic_store_n(&n->flags, ITEM_CHUNK, __ATOMIC_RELAXED);
    if (n->prev != NULL) {
        n->prev->next = n;
    } else {
        item_set_first_chunk(it, n);
    }
    if (n->next != NULL) {
        n->next->prev = n;
    }
    slabs_free(old, bytes, tc);
    return true;
}

/* The mover cannot keep an item in its class: it leaves DRAM as the
 * policy says, or the cache. */
static void
leave_chunk(struct item *it, uint32_t hv)
{
    switch (leave_dram(it, hv)) {
    case POLICY_DEMOTE_ITEM:
        count(&demotions);
        break;
    case POLICY_DROP:
        link_unlink(it, hv);
        break;
    default:
        break;
    }
}

/* Move a linked item out of its chunk; item lock held.  Returns 1 if
 * readers hold it and the mover should come back later. */
static int
evacuate_linked(struct item *it, uint32_t hv, bool rescue_it,
                struct item_chunk *piece, bool force, struct cache_stats *mst)
{
    if (__atomic_load_n(&it->refcount, __ATOMIC_ACQUIRE) > 2) {
        if (!force) {
            return 1;
        }
        /* Held for long: unlink it, the chunk frees when they let go. */
        mst->slab_reassign_busy_deletes++;
        leave_chunk(it, hv);
    } else if (rescue_it && !(item_flags(it) & ITEM_CHUNKED) &&
               rescue(it, hv)) {
        mst->slab_reassign_rescues++;
    } else if (piece != NULL && rescue_piece(it, piece)) {
        mst->slab_reassign_chunk_rescues++;
    } else if ((item_flags(it) & ITEM_CHUNKED) && rescue_whole(it, hv)) {
        mst->slab_reassign_rescues++;
    } else {
        mst->slab_reassign_inline_reclaim++;
        leave_chunk(it, hv);
    }
    return 0;
}

int
place_evacuate(struct item *it, const char *key, size_t nkey,
               bool rescue_it, struct item_chunk *piece, bool force,
               struct cache_stats *mst)
{
    uint32_t hv = hash_key(key, nkey);
    int busy = 1;

    if (!locks_trylock(hv)) {
        item_release(it);
        return 1;
    }
    /* An original behind a DRAM copy is on no list: give it its place
     * back (found through the table, by the copied key) so it can move. */
    if (!(item_flags(it) & ITEM_LINKED)) {
        struct item *c = assoc_find(key, nkey, hv);

        if (c != NULL && item_original(c) == it) {
            uncache(c, hv);
        }
    }
    /* The key was copied without the item lock: only trust it if it is
     * still the item's key now that the lock is held. */
    if ((item_flags(it) & ITEM_LINKED) && same_key(it, key, nkey)) {
        busy = evacuate_linked(it, hv, rescue_it, piece, force, mst);
    }
    locks_unlock(hv);
    item_release(it);
    return busy;
}
