/*
 * cas.c: the CAS counter (cas.h).
 */
#include "storage/slab/cas.h"
#include "storage/tier/sblock.h"

/* Uniques a thread takes from the shared counter at once. */
#define CAS_BATCH 16

static struct sblock_counter cas;
static uint64_t fence;          /* no unique at or below it any more */

/* The calling thread's block: next to hand out, and one past its end. */
static _Thread_local uint64_t mine_next, mine_end;

void
cas_init(void)
{
    /* 1.6.45 starts the counter at 1: the first item gets cas 2. */
    cas.last = 1;
    cas.sb = NULL;
    fence = 0;
    mine_next = mine_end = 0;
}

void
cas_use_sblock(struct sblock *sb)
{
    sblock_counter_attach(&cas, sb);
    mine_next = mine_end = 0;
}

uint64_t
cas_next_above(uint64_t floor)
{
    uint64_t f = __atomic_load_n(&fence, __ATOMIC_ACQUIRE);

    if (mine_next == mine_end || mine_next <= floor || mine_next <= f) {
        /* A new block starts above every unique handed out so far, so
         * above floor too. */
        mine_end = sblock_counter_take(&cas, CAS_BATCH) + 1;
        mine_next = mine_end - CAS_BATCH;
    }
    return mine_next++;
}

uint64_t
cas_fence(void)
{
    uint64_t top = __atomic_load_n(&cas.last, __ATOMIC_ACQUIRE);

    __atomic_store_n(&fence, top, __ATOMIC_RELEASE);
    return top;
}

uint64_t
cas_take(uint64_t wanted, uint64_t floor)
{
    if (wanted == 0) {
        return cas_next_above(floor);
    }
    sblock_counter_cover(&cas, wanted);
    return wanted;
}
