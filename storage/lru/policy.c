/*
 * policy.c: the tier policy's answers (policy.h).
 *
 * Locking: none; set by policy_init() before serving, read-only after.
 */
#include "storage/lru/policy.h"
#include "storage/slab/slabs.h"

struct policy_state policy_state;

_Static_assert(SLABS_TC_TIER(SLABS_TC(TIER_PMEM, 5)) ==
               (SLABS_TC(TIER_PMEM, 5) >> 6), "policy_room() reads the tier");

void
policy_tiers(enum cache_tier_policy p, bool *dram, bool *file)
{
    *dram = p != CACHE_TIER_PMEM;
    *file = p != CACHE_TIER_DRAM;
}

void
policy_init(enum cache_tier_policy p)
{
    struct policy_state *s = &policy_state;

    s->mode = p;
    policy_tiers(p, &s->dram, &s->file);
    s->home = s->dram && (!s->file || p == CACHE_TIER_CAPACITY)
              ? TIER_DRAM : TIER_PMEM;
}

enum policy_leave
policy_leave(const struct item *it)
{
    if (item_original(it) != NULL) {
        return POLICY_UNCACHE;
    }
    if (it->tier == TIER_DRAM && policy_state.file) {
        return POLICY_DEMOTE_ITEM;
    }
    return POLICY_DROP;
}

struct item *
policy_durable(struct item *it)
{
    return it->tier == TIER_PMEM ? it : item_original(it);
}
