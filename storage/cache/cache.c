/*
 * cache.c: the request rules of the storage facade (cache.h).
 *
 * Every request takes the key's item lock for its whole decision, so that
 * the store rules (memcached's do_store_item), incr/decr and delete see one
 * consistent item.  The list and slabs locks are only taken below, in that
 * order.  The GET hit path touches only the item lock and the item.
 *
 * The meta operations (cache_mstore, cache_mdelete, and cache_mdelta in
 * cache_delta.c) are the general forms; the classic store, delete and
 * incr/decr fill in their knobs and call them, so both protocols share
 * one set of rules.  The steps they are made of (a live item found, a
 * new one linked) are declared in cache_priv.h for cache_delta.c.
 *
 * What a change to an item in the memory file must reach before the reply
 * is the policy's answer (policy_durable()); linking commits new items
 * (link.h); new items' memory and hits go through place.h.
 */
#include "storage/cache/cache.h"
#include "storage/base/hash.h"
#include "storage/base/locks.h"
#include "storage/base/observe.h"
#include "storage/cache/cache_priv.h"
#include "storage/index/assoc.h"
#include "storage/index/tomb.h"
#include "storage/lru/link.h"
#include "storage/lru/place.h"
#include "storage/lru/policy.h"
#include "storage/slab/cas.h"
#include "storage/slab/persist.h"
#include "storage/slab/slabs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UPDATE_INTERVAL 60
#define REFCOUNT_LIMIT  60000   /* refuse a fetch before the 16 bits wrap */

struct cache_priv cache_priv;

static struct cache_priv *const ca = &cache_priv;

/* ---- lookups ---------------------------------------------------------- */

/* watch's fetchers: what a lookup found, as memcached names it.  Out of
 * line: nobody is watching on the hot path. */
static void __attribute__((noinline, cold))
observe_fetch(const char *key, size_t nkey, enum cache_status st,
              const struct item *it)
{
    enum observe_found found = st == CACHE_HIT ? OBSERVE_FOUND
                             : st == CACHE_FLUSHED ? OBSERVE_FLUSHED
                             : st == CACHE_EXPIRED ? OBSERVE_EXPIRED
                             : OBSERVE_NOT_FOUND;

    observe_hooks->fetch(key, nkey, found, it);
}

/* Find a live item under lock(hv); a dead one is unlinked on the way and
 * *st says why. */
struct item *
cache_find_live(const char *key, size_t nkey, uint32_t hv,
                enum cache_status *st)
{
    struct item *it = assoc_find(key, nkey, hv);
    bool flushed;

    *st = CACHE_MISS;
    if (it != NULL && link_is_dead(it, clock_now(), &flushed)) {
        link_unlink(it, hv);
        *st = flushed ? CACHE_FLUSHED : CACHE_EXPIRED;
        it = NULL;
    } else if (it != NULL) {
        *st = CACHE_HIT;
    }
    if (observing(OBSERVE_FETCH)) {
        observe_fetch(key, nkey, *st, it);
    }
    return it;
}

/* A new TTL for a live item: one aligned 4-byte store, durable before the
 * reply when the item is in the memory file (exptime is outside the CRC). */
void
cache_set_exptime(struct item *it, rel_time_t exptime)
{
    struct item *f = policy_durable(it);

    __atomic_store_n(&it->exptime, exptime, __ATOMIC_RELAXED);
    if (f != NULL) {
        __atomic_store_n(&f->exptime, exptime, __ATOMIC_RELAXED);
        persist_exptime(f);
    }
}

/* Take a reader's reference, or refuse (a miss, as memcached) before the
 * 16-bit count could wrap. */
static bool
ref_for_reader(struct item *it, enum cache_status *st)
{
    if (__atomic_load_n(&it->refcount, __ATOMIC_RELAXED) >= REFCOUNT_LIMIT) {
        *st = CACHE_MISS;
        return false;
    }
    item_ref_incr(it);
    return true;
}

/* cache_find_live() plus the reader's reference; lock(hv) held. */
static struct item *
fetch_live(const char *key, size_t nkey, uint32_t hv, enum cache_status *st)
{
    struct item *it = cache_find_live(key, nkey, hv, st);

    if (it != NULL && !ref_for_reader(it, st)) {
        return NULL;
    }
    return it;
}

struct item *
cache_get(const char *key, size_t nkey, uint32_t hv, enum cache_status *st)
{
    struct item *it;

    locks_lock(hv);
    it = fetch_live(key, nkey, hv, st);
    if (it != NULL) {
        it = place_hit(it, hv);
    }
    locks_unlock(hv);
    return it;
}

struct item *
cache_touch(const char *key, size_t nkey, uint32_t hv, rel_time_t exptime,
            enum cache_status *st)
{
    struct item *it;

    locks_lock(hv);
    it = fetch_live(key, nkey, hv, st);
    if (it != NULL) {
        cache_set_exptime(it, exptime);
        it = place_hit(it, hv);
    }
    locks_unlock(hv);
    return it;
}

struct item *
cache_alloc(const char *key, size_t nkey, uint32_t hv,
            uint32_t client_flags, rel_time_t exptime, uint32_t vlen,
            enum cache_status *st)
{
    struct item *it;

    (void)hv;
    if (item_size(nkey, client_flags, vlen, ca->opts->use_cas) >
        ca->opts->item_size_max) {
        *st = CACHE_TOO_LARGE;
        return NULL;
    }
    it = place_new(key, nkey, client_flags, exptime, vlen,
                   ca->opts->use_cas);
    /* No page of the class left to read, and nothing it could evict (the
     * tail of COLD locked by the recovery's run that is linking it, or a
     * class with no page in a full file): read the next page of any class
     * and try again, while there is one. */
    while (it == NULL && recover_help(ca->recovering, 0)) {
        it = place_new(key, nkey, client_flags, exptime, vlen,
                       ca->opts->use_cas);
    }
    *st = it != NULL ? CACHE_OK : CACHE_NO_MEMORY;
    return it;
}

void
cache_release(struct item *it)
{
    item_release(it);
}

/* ---- linking ---------------------------------------------------------- */

/* The cas unique a new value of a key gets: the client's (meta E) or the
 * next above the one of the value it replaces (`old`, or NULL); 0 with
 * CAS off. */
uint64_t
cache_cas_for(uint64_t wanted, const struct item *old)
{
    return ca->opts->use_cas
           ? cas_take(wanted, old != NULL ? item_cas(old) : 0) : 0;
}

/* Link `it` in place of `old` (may be NULL) with cache_cas_for(wanted), stored
 * now, at the head of the list a new item enters (link_replace(): in the
 * memory file the new item is committed before the old one dies). */
void
cache_link_new(struct item *old, struct item *it, uint32_t hv, uint64_t wanted)
{
    item_set_cas(it, cache_cas_for(wanted, old));
    item_time_store(it, clock_now());
    link_replace(old, it, hv, link_first_list(it));
    cache_count_stored();
}

/* A new unlinked item holding `len` bytes of `val` (no "\r\n" in val). */
struct item *
cache_small_item(const char *key, size_t nkey, uint32_t client_flags,
                 rel_time_t exptime, const char *val, size_t len)
{
    struct item *n = place_new(key, nkey, client_flags, exptime,
                               (uint32_t)len, ca->opts->use_cas);

    if (n != NULL) {
        memcpy(item_value(n), val, len);
        memcpy(item_value(n) + len, "\r\n", 2);
    }
    return n;
}

/* ---- meta get --------------------------------------------------------- */

/* What mg reports about the item as it was before this command. */
static void
mget_record(const struct item *it, struct cache_mget *a)
{
    uint16_t f = item_flags(it);

    a->fetched = (f & ITEM_FETCHED) != 0;
    a->atime = item_time(it);
    a->exptime_before = it->exptime;
    a->token_sent = (f & ITEM_TOKEN_SENT) != 0;
    a->stale = (f & ITEM_STALE) != 0;
}

/* Touch, hand out the win token, bump: in memcached's order, after the
 * "before" state was recorded.  Returns the item to serve (place_hit()). */
static struct item *
mget_apply(struct item *it, uint32_t hv, struct cache_mget *a)
{
    if (a->touch) {
        cache_set_exptime(it, a->exptime);
    }
    if (a->created) {
        a->win = true;
    } else if (a->recache && !a->token_sent && it->exptime != 0 &&
               it->exptime < a->recache_before) {
        a->win = true;
    }
    /* A stale item goes to the first client that asks after it. */
    if (a->stale && !a->token_sent) {
        a->win = true;
    }
    if (a->win) {
        /* Durable, so a restart does not hand out a second token. */
        struct item *f = policy_durable(it);

        item_flags_set(it, ITEM_TOKEN_SENT);
        if (f != NULL) {
            item_flags_set(f, ITEM_TOKEN_SENT);
            persist_flags(f);
        }
    }
    return a->no_bump ? it : place_hit(it, hv);
}

/* N on a miss: an empty item, linked; the allocation's reference becomes
 * the caller's.  lock(hv) held, the key known to be absent. */
static struct item *
mget_vivify(const char *key, size_t nkey, uint32_t hv, struct cache_mget *a)
{
    struct item *it = cache_small_item(key, nkey, 0, a->vivify_exptime, "", 0);

    if (it == NULL) {
        return NULL;
    }
    cache_link_new(NULL, it, hv, a->vivify_cas);
    a->created = true;
    return it;
}

struct item *
cache_mget(const char *key, size_t nkey, uint32_t hv, struct cache_mget *a,
           enum cache_status *st)
{
    struct item *it;

    a->fetched = a->created = a->win = a->stale = a->token_sent = false;
    a->atime = a->exptime_before = 0;
    locks_lock(hv);
    it = cache_find_live(key, nkey, hv, st);
    if (it == NULL && a->vivify) {
        it = mget_vivify(key, nkey, hv, a);
        if (it == NULL) {
            *st = CACHE_MISS;
        }
    } else if (it != NULL && !ref_for_reader(it, st)) {
        /* Refcount overflow: a miss, and never a second vivified copy. */
        it = NULL;
    }
    if (it != NULL) {
        mget_record(it, a);
        if (!a->peek) {
            it = mget_apply(it, hv, a);
        }
    }
    locks_unlock(hv);
    return it;
}

/* ---- stores ----------------------------------------------------------- */

/* memcached's cas test: none asked (or no cas kept), match, lower than the
 * item's with invalidate (stale), or mismatch. */
enum store_cas { CAS_NONE, CAS_MATCH, CAS_STALE, CAS_BAD };

static enum store_cas
store_cas_test(const struct item *old, const struct cache_mstore *a)
{
    uint64_t have = item_cas(old);

    if (!a->compare || a->compare_cas == 0 || !ca->opts->use_cas) {
        return CAS_NONE;
    }
    if (a->compare_cas == have) {
        return CAS_MATCH;
    }
    if (a->invalidate && a->compare_cas < have) {
        return CAS_STALE;
    }
    return CAS_BAD;
}

static enum cache_status
store_done(struct item *it, struct cache_mstore *a)
{
    a->cas = item_cas(it);
    a->vlen = item_vlen(it);
    a->exptime = item_exptime(it);
    return CACHE_STORED;
}

/* append/prepend: a new item holding old and new data, keeping the old
 * item's flags and exptime. */
static enum cache_status
store_concat(struct item *old, struct item *it, struct cache_mstore *a,
             uint32_t hv)
{
    uint32_t ov = item_vlen(old), nv = item_vlen(it);
    struct item *n;

    if (item_size(item_nkey(it), item_client_flags(old), ov + nv,
                  ca->opts->use_cas) > ca->opts->item_size_max) {
        return CACHE_TOO_LARGE;
    }
    n = place_new(item_key(it), item_nkey(it), item_client_flags(old),
                  item_exptime(old), ov + nv, ca->opts->use_cas);
    if (n == NULL) {
        return CACHE_NO_MEMORY;
    }
    if (a->op == CACHE_APPEND) {
        item_value_move(n, 0, old, 0, ov);
        item_value_move(n, ov, it, 0, (size_t)nv + 2);
    } else {
        item_value_move(n, 0, it, 0, nv);
        item_value_move(n, nv, old, 0, (size_t)ov + 2);
    }
    cache_link_new(old, n, hv, a->new_cas);
    item_set_cas(it, item_cas(n));
    store_done(n, a);
    item_release(n);
    return CACHE_STORED;
}

/* The key exists (old): memcached's rules per op.  cas_mode: a set or
 * replace that must pass the cas test (cas, or ms with C). */
static enum cache_status
store_over(struct item *old, struct item *it, struct cache_mstore *a,
           bool cas_mode, uint32_t hv)
{
    enum store_cas r = store_cas_test(old, a);

    switch (a->op) {
    case CACHE_ADD:
        /* add fails but keeps the existing item fresh; C plays no part. */
        if (item_time(old) + UPDATE_INTERVAL < clock_now()) {
            item_time_store(old, clock_now());
        }
        return CACHE_NOT_STORED;
    case CACHE_APPEND:
    case CACHE_PREPEND:
        if (r != CAS_NONE && r != CAS_MATCH) {
            return CACHE_EXISTS;
        }
        return store_concat(old, it, a, hv);
    default:
        break;
    }
    if (cas_mode && r == CAS_STALE) {
        /* An older writer's value, accepted but marked stale: it keeps
         * the TTL and any token already handed out. */
        it->exptime = old->exptime;
        item_flags_set(it, (uint16_t)(ITEM_STALE |
                       (item_flags(old) & ITEM_TOKEN_SENT)));
    } else if (cas_mode && r != CAS_MATCH) {
        return CACHE_EXISTS;
    }
    cache_link_new(old, it, hv, a->new_cas);
    return store_done(it, a);
}

/* The key is missing. */
static enum cache_status
store_miss(struct item *it, struct cache_mstore *a, bool cas_mode,
           uint32_t hv)
{
    if (cas_mode) {
        return CACHE_NOT_FOUND;
    }
    switch (a->op) {
    case CACHE_APPEND:
    case CACHE_PREPEND:
        if (!a->vivify) {
            return CACHE_NOT_STORED;
        }
        it->exptime = a->vivify_exptime;
        break;
    case CACHE_REPLACE:
        return CACHE_NOT_STORED;
    default:
        break;
    }
    cache_link_new(NULL, it, hv, a->new_cas);
    return store_done(it, a);
}

enum cache_status
cache_mstore(struct item *it, struct cache_mstore *a)
{
    uint32_t hv = hash_key(item_key(it), item_nkey(it));
    bool cas_mode = a->op == CACHE_CAS ||
                    (a->compare && (a->op == CACHE_SET ||
                                    a->op == CACHE_REPLACE));
    enum cache_status st, dummy;
    struct item *old;

    a->cas = 0;
    a->vlen = 0;
    a->exptime = 0;
    locks_lock(hv);
    old = cache_find_live(item_key(it), item_nkey(it), hv, &dummy);
    if (old != NULL) {
        st = store_over(old, it, a, cas_mode, hv);
    } else {
        st = store_miss(it, a, cas_mode, hv);
    }
    locks_unlock(hv);
    return st;
}

enum cache_status
cache_store(struct item *it, enum cache_op op, uint64_t req_cas)
{
    struct cache_mstore a = {
        .op = op,
        .compare = op == CACHE_CAS || req_cas != 0,
        .compare_cas = req_cas,
    };

    return cache_mstore(it, &a);
}

/* ---- deletes ---------------------------------------------------------- */

/* md I in the memory file (the cas the commit covers changes): a stale
 * copy of the value, with its access time. */
static struct item *
stale_copy(struct item *it, const struct cache_mdelete *a)
{
    struct item *n = place_new(item_key(it), item_nkey(it),
                               item_client_flags(it),
                               a->touch ? a->exptime : it->exptime,
                               item_vlen(it), ca->opts->use_cas);

    if (n != NULL) {
        item_value_move(n, 0, it, 0, it->nbytes);
        item_flags_set(n, (uint16_t)(ITEM_STALE | (item_flags(it) &
                       (ITEM_FETCHED | ITEM_KEY_BINARY))));
        item_time_store(n, item_time(it));
    }
    return n;
}

/* md x: an empty value with the request's client flags and exptime (as
 * memcached 1.6.45 makes it), stale already for md x I. */
static struct item *
tombstone(struct item *it, const struct cache_mdelete *a)
{
    struct item *n = cache_small_item(item_key(it), item_nkey(it),
                                      a->client_flags, a->exptime, "", 0);

    if (n != NULL && a->invalidate) {
        item_flags_set(n, ITEM_STALE);
    }
    return n;
}

/* A new item made from `it` takes its place with cas unique `cas` (0:
 * the next), keeping the access time make() gave it; our reference keeps
 * `it` whole while the allocation may evict.  CACHE_DELETED, or
 * CACHE_NO_MEMORY. */
static enum cache_status
mdelete_replace(struct item *it, const struct cache_mdelete *a, uint32_t hv,
                struct item *(*make)(struct item *it,
                                     const struct cache_mdelete *a),
                uint64_t cas)
{
    struct item *n;

    item_ref_incr(it);
    n = make(it, a);
    if (n != NULL) {
        rel_time_t t = item_time(n);

        cache_link_new(it, n, hv, cas);
        item_time_store(n, t);
        item_release(n);
    }
    item_release(it);
    return n != NULL ? CACHE_DELETED : CACHE_NO_MEMORY;
}

/* md I: keep the item, stale, with a new cas and no token handed out. */
static void
mdelete_stale(struct item *it, const struct cache_mdelete *a)
{
    if (a->touch) {
        it->exptime = a->exptime;
    }
    item_flags_set(it, ITEM_STALE);
    item_flags_clear(it, ITEM_TOKEN_SENT);
    item_set_cas(it, cache_cas_for(a->new_cas, it));
}

enum cache_status
cache_mdelete(const char *key, size_t nkey, uint32_t hv,
              struct cache_mdelete *a)
{
    enum cache_status st;
    struct item *it;

    a->clsid = 0;
    a->vlen = 0;
    locks_lock(hv);
    it = cache_find_live(key, nkey, hv, &st);
    if (it == NULL) {
        st = CACHE_NOT_FOUND;
        if (tomb_active()) {
            /* not read back yet, maybe: it must not come back */
            tomb_note(key, nkey, hv);
        }
    } else if (a->compare && item_cas(it) != a->compare_cas) {
        st = CACHE_EXISTS;
    } else {
        a->clsid = item_clsid(it);
        a->vlen = item_vlen(it);
        st = CACHE_DELETED;
        if (a->tombstone) {
            /* x keeps the old unique unless E says otherwise; x I gives
             * the stale tombstone a new one, as I alone does */
            st = mdelete_replace(it, a, hv, tombstone,
                                 a->new_cas != 0 || a->invalidate
                                 ? a->new_cas : item_cas(it));
        } else if (a->invalidate && policy_durable(it) != NULL) {
            st = mdelete_replace(it, a, hv, stale_copy, a->new_cas);
        } else if (a->invalidate) {
            mdelete_stale(it, a);
        } else {
            link_unlink(it, hv);
        }
    }
    locks_unlock(hv);
    return st;
}

enum cache_status
cache_delete(const char *key, size_t nkey, uint32_t hv, uint64_t cas,
             unsigned *clsid)
{
    struct cache_mdelete a = { .compare = cas != 0, .compare_cas = cas };
    enum cache_status st = cache_mdelete(key, nkey, hv, &a);

    if (st == CACHE_DELETED && clsid != NULL) {
        *clsid = a.clsid;
    }
    return st;
}

/* ---- flush_all ---------------------------------------------------------- */

void
cache_flush(rel_time_t when)
{
    bool at_once = when != 0 && when <= clock_now();
    /* An immediate flush fences the CAS uniques too (link.h); a delayed
     * one leaves the last fence where it was. */
    uint64_t fence = when == 0 ? 0 : at_once && ca->opts->use_cas
                     ? cas_fence() : link_flush_cas();

    /* Durable before the reply, as wall-clock seconds: rel_time_t does
     * not survive a restart. */
    if (ca->sb.tier != NULL) {
        sblock_set_flush(&ca->sb, when == 0 ? 0 : (int64_t)when +
                         (int64_t)clock_process_started(), fence);
    }
    link_set_flush(when, fence);
    if (at_once) {
        if (tomb_active()) {
            /* what recovery has not read back yet is older still */
            tomb_flush();
        }
        link_flush_recent(when);
    }
}

