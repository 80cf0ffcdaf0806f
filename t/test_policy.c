/*
 * test_policy.c: the tier policy's answers (storage/lru/policy.h), one
 * policy at a time, on items made by hand (the policy reads only their
 * tier and copy mark).
 */
#include "storage/slab/item.h"
#include "storage/lru/policy.h"
#include "storage/slab/slabs.h"
#include "t/tap.h"

#include <string.h>

/* A header with a tier; copy: marked as a DRAM copy whose original is
 * `orig` (the pointer sits right after the item, as item.h lays it). */
struct fake {
    struct item  it;
    char         data[16];
};

static void
make(struct fake *f, unsigned tier, struct item *orig)
{
    memset(f, 0, sizeof(*f));
    f->it.tier = (uint8_t)tier;
    f->it.nkey = 1;
    f->it.nbytes = 2;
    if (orig != NULL) {
        item_flags_store(&f->it, ITEM_COPY);
        item_set_original(&f->it, orig);
    }
}

static void
test_tiers(void)
{
    bool dram, file;

    policy_tiers(CACHE_TIER_DRAM, &dram, &file);
    ok(dram && !file, "dram: DRAM only");
    policy_tiers(CACHE_TIER_PMEM, &dram, &file);
    ok(!dram && file, "pmem: the file only");
    policy_tiers(CACHE_TIER_CACHE, &dram, &file);
    ok(dram && file, "cache: both");
    policy_tiers(CACHE_TIER_CAPACITY, &dram, &file);
    ok(dram && file, "capacity: both");
}

static void
test_dram(void)
{
    struct fake d;

    policy_init(CACHE_TIER_DRAM);
    make(&d, TIER_DRAM, NULL);
    is_int(policy_home(), TIER_DRAM, "dram: new items in DRAM");
    is_int(policy_overflow(TIER_DRAM), -1, "dram: nowhere else");
    is_int(policy_on_hit(&d.it, true), POLICY_STAY, "dram: hits stay");
    is_int(policy_room(SLABS_TC(TIER_DRAM, 3)), POLICY_EVICT,
           "dram: a full class evicts");
    is_int(policy_leave(&d.it), POLICY_DROP, "dram: the mover drops");
    ok(policy_durable(&d.it) == NULL, "dram: nothing to persist");
}

static void
test_pmem(void)
{
    struct fake p;

    policy_init(CACHE_TIER_PMEM);
    make(&p, TIER_PMEM, NULL);
    is_int(policy_home(), TIER_PMEM, "pmem: new items in the file");
    is_int(policy_overflow(TIER_PMEM), -1, "pmem: nowhere else");
    is_int(policy_on_hit(&p.it, true), POLICY_STAY, "pmem: hits stay");
    is_int(policy_room(SLABS_TC(TIER_PMEM, 3)), POLICY_EVICT,
           "pmem: a full class evicts");
    is_int(policy_leave(&p.it), POLICY_DROP, "pmem: the mover drops");
    ok(policy_durable(&p.it) == &p.it, "pmem: the item persists");
}

static void
test_cache(void)
{
    struct fake p, c, d;

    policy_init(CACHE_TIER_CACHE);
    make(&p, TIER_PMEM, NULL);
    make(&c, TIER_DRAM, &p.it);
    is_int(policy_home(), TIER_PMEM, "cache: new items in the file");
    is_int(policy_overflow(TIER_PMEM), -1, "cache: nowhere else");
    is_int(policy_on_hit(&p.it, false), POLICY_STAY,
           "cache: a first hit stays");
    is_int(policy_on_hit(&p.it, true), POLICY_COPY,
           "cache: a second hit copies into DRAM");
    is_int(policy_on_hit(&c.it, true), POLICY_STAY,
           "cache: a hit on a copy stays");
    is_int(policy_room(SLABS_TC(TIER_DRAM, 3)), POLICY_DEMOTE,
           "cache: a full DRAM class gives up its tail");
    is_int(policy_room(SLABS_TC(TIER_PMEM, 3)), POLICY_EVICT,
           "cache: a full file class evicts");
    is_int(policy_leave(&c.it), POLICY_UNCACHE,
           "cache: the mover gives a copy's place back");
    ok(policy_durable(&c.it) == &p.it,
       "cache: a copy's change persists in its original");
    make(&d, TIER_DRAM, NULL);
    ok(policy_durable(&d.it) == NULL, "cache: a DRAM item persists nothing");
}

static void
test_capacity(void)
{
    struct fake p, d;

    policy_init(CACHE_TIER_CAPACITY);
    make(&p, TIER_PMEM, NULL);
    make(&d, TIER_DRAM, NULL);
    is_int(policy_home(), TIER_DRAM, "capacity: new items in DRAM");
    is_int(policy_overflow(TIER_DRAM), TIER_PMEM,
           "capacity: then in the file");
    is_int(policy_overflow(TIER_PMEM), -1, "capacity: not past the file");
    is_int(policy_on_hit(&p.it, true), POLICY_PROMOTE,
           "capacity: a second hit in the file moves it to DRAM");
    is_int(policy_on_hit(&d.it, true), POLICY_STAY,
           "capacity: hits in DRAM stay");
    is_int(policy_room(SLABS_TC(TIER_DRAM, 3)), POLICY_DEMOTE,
           "capacity: a full DRAM class demotes its tail");
    is_int(policy_leave(&d.it), POLICY_DEMOTE_ITEM,
           "capacity: the mover demotes a DRAM item");
    is_int(policy_leave(&p.it), POLICY_DROP,
           "capacity: the mover drops an item of the file");
    ok(policy_durable(&p.it) == &p.it, "capacity: the file's persist");
}

int
main(void)
{
    test_tiers();
    test_dram();
    test_pmem();
    test_cache();
    test_capacity();
    return done_testing();
}
