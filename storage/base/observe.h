/*
 * observe.h: what the daemon's log streams (watch) hear from storage.
 *
 * Two events, as memcached logs them: every key lookup (a get, and the
 * lookup a store, delete, incr or touch makes first) with what it found,
 * and every eviction.  A hook is called while its bit is set, in the
 * thread doing the work and under the item's lock: it copies what it
 * needs and returns, and must not call into storage.  With no watcher
 * (the usual case) an event costs one relaxed load.
 */
#ifndef MCPM_STORAGE_OBSERVE_H
#define MCPM_STORAGE_OBSERVE_H

#include <stdbool.h>
#include <stddef.h>

struct item;

#define OBSERVE_FETCH 1u
#define OBSERVE_EVICT 2u

/* memcached's item_get statuses. */
enum observe_found {
    OBSERVE_NOT_FOUND, OBSERVE_FOUND, OBSERVE_FLUSHED, OBSERVE_EXPIRED
};

struct cache_observer {
    /* it: the item when found, else NULL */
    void (*fetch)(const char *key, size_t nkey, enum observe_found found,
                  const struct item *it);
    void (*evict)(const struct item *it);
};

/* Set the hooks (once, before any event) and which of them run. */
void observe_set(const struct cache_observer *o, unsigned mask);

extern const struct cache_observer *observe_hooks;
extern unsigned observe_mask;

static inline bool
observing(unsigned bit)
{
    return (__atomic_load_n(&observe_mask, __ATOMIC_RELAXED) & bit) != 0;
}

#endif
