/*
 * observe.c: the storage event hooks (observe.h).
 */
#include "storage/base/observe.h"

const struct cache_observer *observe_hooks;
unsigned observe_mask;

void
observe_set(const struct cache_observer *o, unsigned mask)
{
    if (o != NULL) {
        __atomic_store_n(&observe_hooks, o, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&observe_mask, observe_hooks != NULL ? mask : 0,
                     __ATOMIC_RELEASE);
}
