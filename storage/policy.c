/*
 * policy.c: the tier policy's answers (policy.h).
 *
 * Locking: none; set by policy_init() before serving, read-only after.
 */
#include "storage/policy.h"
#include "storage/slabs.h"

enum cache_tier_policy policy_mode;

static struct {
    bool dram;                  /* a DRAM tier is in use */
    bool file;                  /* the memory file is in use */
} pol;

void
policy_tiers(enum cache_tier_policy p, bool *dram, bool *file)
{
    *dram = p != CACHE_TIER_PMEM;
    *file = p != CACHE_TIER_DRAM;
}

void
policy_init(enum cache_tier_policy p)
{
    policy_mode = p;
    policy_tiers(p, &pol.dram, &pol.file);
}

unsigned
policy_home(void)
{
    return pol.dram && (!pol.file || policy_mode == CACHE_TIER_CAPACITY)
           ? TIER_DRAM : TIER_PMEM;
}

int
policy_overflow(unsigned t)
{
    return t == TIER_DRAM && pol.file && policy_home() == TIER_DRAM
           ? TIER_PMEM : -1;
}

enum policy_room
policy_room(unsigned tc)
{
    return SLABS_TC_TIER(tc) == TIER_DRAM && pol.file ? POLICY_DEMOTE
                                                       : POLICY_EVICT;
}

enum policy_leave
policy_leave(const struct item *it)
{
    if (item_original(it) != NULL) {
        return POLICY_UNCACHE;
    }
    if (it->tier == TIER_DRAM && pol.file) {
        return POLICY_DEMOTE_ITEM;
    }
    return POLICY_DROP;
}

struct item *
policy_durable(struct item *it)
{
    return it->tier == TIER_PMEM ? it : item_original(it);
}
