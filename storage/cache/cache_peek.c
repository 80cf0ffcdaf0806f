/*
 * cache_peek.c: the lookup without a lock (cache.h cache_peek).
 *
 * A GET on a key every worker reads took the key's stripe mutex and
 * wrote the item's reference count: two cache lines that then bounced
 * between the cores on every request.  Here the reader writes neither.
 * It reads the stripe's sequence count (locks.h), walks the chain
 * (assoc_peek), reads the item's header, checks the count again, and
 * only then trusts the header; after copying the value it checks once
 * more.  Every holder of the stripe's lock makes the count odd while it
 * works, so any change to the chain or to an item on it between the
 * first read and the last check is seen, and the copy thrown away.  A
 * key of a batch the look-ahead walked (prefetch.h) may come with the
 * walk's answer and the count it was read under: with the count still
 * the same, the chain is not walked again.
 *
 * Why the reads are safe even when they race a change: the reader is in
 * a read section (quiesce.h), so no page it may be reading is given back
 * or cut up for another class until it leaves (slabs.c waits), and each
 * read is bounded by a header that the count vouched for: an item freed
 * and reused meanwhile is reused by its own class, in the same chunk.
 *
 * A hit's LRU mark (FETCHED on the first, ACTIVE and the time on the
 * second) is the one write: a compare-and-swap on the item's flags word
 * against the flags the copy was made under, so that an item changed,
 * unlinked or freed meanwhile is not marked; a hot item is active
 * already and needs none.  What the lock path does and this does not: a
 * move between lists (flat LRU), unlinking an expired or flushed item,
 * moving an item between tiers, chunked values, watch's fetch log.
 */
#include "storage/cache/cache_peek.h"
#include "storage/base/clock.h"
#include "storage/base/locks.h"
#include "storage/base/observe.h"
#include "storage/base/quiesce.h"
#include "storage/index/assoc.h"
#include "storage/lru/link.h"
#include "storage/lru/lru.h"
#include "storage/lru/policy.h"
#include "storage/slab/item.h"

#include <string.h>

/* The header fields a hit needs, read before the count vouches for them. */
struct header {
    uint64_t   cas;
    rel_time_t time;
    rel_time_t exptime;
    uint32_t   nbytes;
    uint16_t   flags;
    uint8_t    clsid;
    uint8_t    nkey;
    uint8_t    tier;
};

static void
read_header(const struct item *it, struct header *h)
{
    h->flags = item_flags(it);
    h->time = item_time(it);
    h->exptime = __atomic_load_n(&it->exptime, __ATOMIC_RELAXED);
    h->nbytes = __atomic_load_n(&it->nbytes, __ATOMIC_RELAXED);
    h->clsid = __atomic_load_n(&it->clsid, __ATOMIC_RELAXED);
    h->nkey = __atomic_load_n(&it->nkey, __ATOMIC_RELAXED);
    h->tier = __atomic_load_n(&it->tier, __ATOMIC_RELAXED);
    h->cas = 0;
    if (h->flags & ITEM_CAS) {
        memcpy(&h->cas, it->data, sizeof(h->cas));
    }
}

/* Whether a hit on an item with this header can be served without the
 * lock; *mark: the LRU mark it sets. */
static bool
servable(const struct header *h, uint32_t vmax, rel_time_t now,
         uint16_t *mark)
{
    bool flushed;

    return (h->flags & ITEM_LINKED) && !(h->flags & ITEM_CHUNKED) &&
           h->nbytes >= 2 && h->nbytes - 2 <= vmax &&
           !link_dead_at(h->exptime, h->time, h->cas, now, &flushed) &&
           lru_hit_lockfree(h->flags, h->time, now, mark) &&
           policy_on_hit_in(h->tier, (h->flags & ITEM_FETCHED) != 0) ==
           POLICY_STAY;
}

static void
fill_view(const struct item *it, const struct header *h,
          struct cache_view *v)
{
    size_t cas_len = (h->flags & ITEM_CAS) ? sizeof(uint64_t) : 0;
    const char *flags_at = it->data + cas_len + h->nkey + 1;

    v->cas = 0;
    if (cas_len != 0) {
        memcpy(&v->cas, it->data, sizeof(v->cas));
    }
    v->key = it->data + cas_len;
    v->nkey = h->nkey;
    v->client_flags = 0;
    if (h->flags & ITEM_CFLAGS) {
        memcpy(&v->client_flags, flags_at, sizeof(v->client_flags));
        flags_at += sizeof(uint32_t);
    }
    v->value = flags_at;
    v->vlen = h->nbytes - 2;
    v->clsid = h->clsid & ITEM_CLSID_MASK;
    v->lru = (uint8_t)(h->clsid >> ITEM_LRU_SHIFT);
    v->in_pmem = h->tier == TIER_PMEM;
    v->atime = h->time;
    v->exptime = h->exptime;
    v->flags = h->flags;
}

/* The key's item, or NULL (*ok: that is the answer), in a read section:
 * a walk's answer while the count still vouches for it, else the chain
 * read again. */
static struct item *
lookup(const struct prefetch_key *k, struct cache_view *v, bool *ok)
{
    if (k->sure && locks_seq_same(k->hv, k->seq)) {
        v->seq = k->seq;
        *ok = true;
        return (struct item *)k->found;
    }
    v->seq = locks_seq_begin(k->hv);
    if (v->seq & 1) {
        *ok = false;
        return NULL;
    }
    return assoc_peek(k->key, k->nkey, k->hv, v->seq, ok);
}

enum cache_peek
cache_peek(const struct prefetch_key *k, uint32_t vmax, struct cache_view *v)
{
    uint32_t hv = k->hv;
    struct header h;
    struct item *it;
    bool ok;

    if (observing(OBSERVE_FETCH)) {
        return CACHE_PEEK_LOCK;
    }
    v->hv = hv;
    quiesce_enter();
    it = lookup(k, v, &ok);
    if (ok && it == NULL) {
        quiesce_exit();
        return CACHE_PEEK_MISS;
    }
    if (ok) {
        read_header(it, &h);
        if (locks_seq_same(hv, v->seq) &&
            servable(&h, vmax, clock_now(), &v->mark)) {
            fill_view(it, &h, v);
            v->item = it;
            return CACHE_PEEK_HIT;          /* cache_peek_end() leaves */
        }
    }
    quiesce_exit();
    return CACHE_PEEK_LOCK;
}

bool
cache_peek_end(const struct cache_view *v)
{
    bool same = locks_seq_same(v->hv, v->seq);

    /* Still in the read section: the chunk is an item's of this class,
     * and the flags word names the one the copy came from, or the mark
     * is not set. */
    if (same && v->mark != 0) {
        lru_hit_mark(v->item, v->flags, v->mark);
    }
    quiesce_exit();
    return same;
}
