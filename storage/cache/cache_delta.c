/*
 * cache_delta.c: incr, decr and ma (cache_delta.h), with memcached's
 * rules: incr wraps at 2^64, decr stops at 0, the value must be a
 * decimal number of at most 20 digits.  Under the key's item lock, as
 * every request of cache.c, and through its steps (cache_priv.h).
 */
#include "storage/cache/cache_delta.h"
#include "storage/base/locks.h"
#include "storage/cache/cache_priv.h"
#include "storage/lru/place.h"
#include "storage/lru/policy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INCR_MAX_LEN    24

static struct cache_priv *const ca = &cache_priv;

/* memcached's safe_strtoull on the value (which ends in "\r\n"). */
static bool
parse_u64(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno == ERANGE) {
        return false;
    }
    if (*end == ' ' || *end == '\r' || *end == '\n' || *end == '\t' ||
        (*end == '\0' && end != s)) {
        /* strtoull takes "-1" as a huge number; memcached refuses it. */
        if ((long long)v < 0 && strchr(s, '-') != NULL) {
            return false;
        }
        *out = v;
        return true;
    }
    return false;
}

static bool
read_number(struct item *it, uint64_t *v)
{
    char buf[INCR_MAX_LEN + 3];
    size_t n;

    if (it->nbytes <= 2 || (item_flags(it) & ITEM_CHUNKED)) {
        return false;
    }
    if (it->nbytes <= INCR_MAX_LEN + 2) {
        n = item_value_copy(it, buf, sizeof(buf) - 1);
        buf[n] = '\0';
        return parse_u64(buf, v);
    }
    /* Longer values: parse in place; the "\r\n" stops strtoull. */
    return parse_u64(item_value(it), v);
}

/* The meta knobs on the item now holding the number, and what ma
 * reports of it. */
static void
delta_finish(struct item *it, struct cache_mdelta *a)
{
    /* As memcached, E overrides the unique already taken for the value. */
    if (a->new_cas != 0 && ca->opts->use_cas) {
        item_set_cas(it, a->new_cas);
    }
    /* T updates the TTL of a counter that existed; one that N created
     * keeps N's TTL, as memcached. */
    if (a->touch && !a->created) {
        cache_set_exptime(it, a->exptime);
    }
    a->cas = item_cas(it);
    a->exptime_after = it->exptime;
    a->clsid = item_clsid(it);
}

/* A new item holding `num` padded with spaces to `vlen` bytes. */
static struct item *
number_item(const struct item *it, const char *num, size_t len, size_t vlen)
{
    struct item *n = place_new(item_key(it), item_nkey(it),
                               item_client_flags(it), item_exptime(it),
                               (uint32_t)vlen, ca->opts->use_cas);

    if (n != NULL) {
        memset(item_value(n), ' ', vlen);
        memcpy(item_value(n), num, len);
        memcpy(item_value(n) + vlen, "\r\n", 2);
    }
    return n;
}

/* Write the new number: in place (padded with spaces) when it fits and
 * nobody else holds the item, else as a new item.  In the memory file it
 * is never changed in place (a torn number would be live), nor in a DRAM
 * copy of an item there: a new item padded as the in-place write would
 * be replaces it, so replies stay the same. */
static enum cache_status
write_number(struct item *it, uint64_t v, uint32_t hv, struct cache_mdelta *a)
{
    char num[INCR_MAX_LEN];
    int len = snprintf(num, sizeof(num), "%llu", (unsigned long long)v);
    bool fits = (uint32_t)len + 2 <= it->nbytes &&
                __atomic_load_n(&it->refcount, __ATOMIC_ACQUIRE) == 2;
    struct item *n;

    if (fits && policy_durable(it) == NULL) {
        memset(item_value(it) + len, ' ', it->nbytes - 2 - (size_t)len);
        memcpy(item_value(it), num, (size_t)len);
        item_set_cas(it, cache_cas_for(0, it));
        delta_finish(it, a);
        return CACHE_OK;
    }
    n = number_item(it, num, (size_t)len,
                    fits ? it->nbytes - 2 : (size_t)len);
    if (n == NULL) {
        return CACHE_NO_MEMORY;
    }
    /* E is the new item's cas from the start, so the commit covers it. */
    cache_link_new(it, n, hv, a->new_cas);
    delta_finish(n, a);
    item_release(n);
    return CACHE_OK;
}

/* The key exists and passed the cas test; lock(hv) held. */
static enum cache_status
delta_apply(struct item *it, uint32_t hv, struct cache_mdelta *a)
{
    enum cache_status st;
    uint64_t v;

    item_ref_incr(it);
    a->clsid = item_clsid(it);
    if (!read_number(it, &v)) {
        st = CACHE_NON_NUMERIC;
    } else {
        v = a->incr ? v + a->delta : (a->delta > v ? 0 : v - a->delta);
        a->value = v;
        st = write_number(it, v, hv, a);
    }
    item_release(it);
    return st;
}

/* ma N on a miss: the key holding the decimal text of `initial`. */
static enum cache_status
delta_vivify(const char *key, size_t nkey, uint32_t hv,
             struct cache_mdelta *a)
{
    char num[INCR_MAX_LEN];
    int len = snprintf(num, sizeof(num), "%llu",
                       (unsigned long long)a->initial);
    struct item *n = cache_small_item(key, nkey, 0, a->vivify_exptime, num,
                                      (size_t)len);

    if (n == NULL) {
        return CACHE_NO_MEMORY;
    }
    cache_link_new(NULL, n, hv, a->new_cas);
    a->value = a->initial;
    a->created = true;
    delta_finish(n, a);
    item_release(n);
    return CACHE_OK;
}

enum cache_status
cache_mdelta(const char *key, size_t nkey, uint32_t hv,
             struct cache_mdelta *a)
{
    enum cache_status st;
    struct item *it;

    a->value = a->cas = 0;
    a->exptime_after = 0;
    a->clsid = 0;
    a->created = false;
    locks_lock(hv);
    it = cache_find_live(key, nkey, hv, &st);
    if (it == NULL) {
        st = a->vivify ? delta_vivify(key, nkey, hv, a) : CACHE_NOT_FOUND;
    } else if (a->compare && a->compare_cas != 0 &&
               item_cas(it) != a->compare_cas) {
        a->clsid = item_clsid(it);
        st = CACHE_EXISTS;
    } else {
        st = delta_apply(it, hv, a);
    }
    locks_unlock(hv);
    return st;
}

enum cache_status
cache_delta(const char *key, size_t nkey, uint32_t hv, bool incr,
            uint64_t delta, uint64_t *value, unsigned *clsid)
{
    struct cache_mdelta a = { .incr = incr, .delta = delta };
    enum cache_status st = cache_mdelta(key, nkey, hv, &a);

    if (st != CACHE_NOT_FOUND) {
        *clsid = a.clsid;
    }
    if (st == CACHE_OK) {
        *value = a.value;
    }
    return st;
}
