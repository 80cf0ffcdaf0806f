/*
 * policy.h: the tier policy (-o tier_policy), decided here and nowhere
 * else.
 *
 *   policy     tiers        new items   a 2nd hit in    a full DRAM class
 *                                       the file
 *   dram       DRAM         DRAM        -               evicts its tail
 *   pmem       file         file        stays           -
 *   cache      DRAM, file   file        copied to DRAM  drops its tail's
 *                                                       copies
 *   capacity   DRAM, file   DRAM, file  moved to DRAM   demotes its tail
 *                           when full                   into the file
 *
 * Every item in the file is committed there before the reply that
 * acknowledges it, whatever the policy (policy_durable()).  A full class of
 * the file evicts its tail.
 *
 * The modules that act (place.c, evict.c, cache.c) ask; none tests the
 * policy itself.  Set once by policy_init() before serving, then read-only,
 * so every call is thread-safe and takes no lock.
 */
#ifndef MCPM_STORAGE_POLICY_H
#define MCPM_STORAGE_POLICY_H

#include <stdbool.h>

#include "storage/base/options.h"
#include "storage/slab/item.h"

/* The tiers a policy needs: a DRAM tier, the memory file. */
void policy_tiers(enum cache_tier_policy p, bool *dram, bool *file);

/* Start deciding under p, with the tiers it has.  Before serving. */
void policy_init(enum cache_tier_policy p);

/* What policy_init() settled, read by the inline answers below (every
 * store and every hit asks). */
struct policy_state {
    enum cache_tier_policy mode;
    bool        dram;           /* a DRAM tier is in use */
    bool        file;           /* the memory file is in use */
    unsigned    home;           /* where new items go */
};
extern struct policy_state policy_state;

/* The tier new items go to, and the tier to try next when tier t has no
 * room for a new item (-1: none, the store fails). */
static inline unsigned
policy_home(void)
{
    return policy_state.home;
}

static inline int
policy_overflow(unsigned t)
{
    return t == TIER_DRAM && policy_state.file &&
           policy_state.home == TIER_DRAM ? TIER_PMEM : -1;
}

/* What a hit on an item already fetched once does. */
enum policy_hit {
    POLICY_STAY,            /* nothing */
    POLICY_PROMOTE,         /* move it into DRAM */
    POLICY_COPY             /* copy it into DRAM, the original stays */
};

/* A hit on an item in `tier` (policy_on_hit: on `it`); `again`: it had
 * been fetched before.  Inline: a GET asks it on every hit. */
static inline enum policy_hit
policy_on_hit_in(unsigned tier, bool again)
{
    if (!again || tier != TIER_PMEM) {
        return POLICY_STAY;
    }
    switch (policy_state.mode) {
    case CACHE_TIER_CAPACITY: return POLICY_PROMOTE;
    case CACHE_TIER_CACHE: return POLICY_COPY;
    default: return POLICY_STAY;
    }
}

static inline enum policy_hit
policy_on_hit(const struct item *it, bool again)
{
    return policy_on_hit_in(it->tier, again);
}

/* How tier class tc makes room for a new chunk: evict its COLD tail, or
 * demote it (DRAM over a memory file: the tail moves into the file, or,
 * being a copy, gives its place back to its original there). */
enum policy_room { POLICY_EVICT, POLICY_DEMOTE };

static inline enum policy_room
policy_room(unsigned tc)
{
    /* tier classes are tier << 6 | id (slabs.h SLABS_TC) */
    return tc >> 6 == TIER_DRAM && policy_state.file ? POLICY_DEMOTE
                                                      : POLICY_EVICT;
}

/* What the page mover does with an item it cannot keep in its class. */
enum policy_leave {
    POLICY_UNCACHE,         /* a DRAM copy: its original takes its place */
    POLICY_DEMOTE_ITEM,     /* a DRAM item over a memory file: into it */
    POLICY_DROP             /* out of the cache */
};
enum policy_leave policy_leave(const struct item *it);

/*
 * The item in the memory file that a change to `it` must reach, durably,
 * before the reply: `it` itself, the original a DRAM copy stands for, or
 * NULL for an item that lives in DRAM only.
 */
struct item *policy_durable(struct item *it);

#endif
