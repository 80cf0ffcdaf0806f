/*
 * cas.c: the CAS counter (cas.h).
 */
#include "storage/cas.h"
#include "storage/sblock.h"

static struct sblock_counter cas;

void
cas_init(void)
{
    /* 1.6.45 starts the counter at 1: the first item gets cas 2. */
    cas.last = 1;
    cas.sb = NULL;
}

void
cas_use_sblock(struct sblock *sb)
{
    sblock_counter_attach(&cas, sb);
}

uint64_t
cas_next(void)
{
    return sblock_counter_next(&cas);
}

uint64_t
cas_take(uint64_t wanted)
{
    if (wanted == 0) {
        return cas_next();
    }
    sblock_counter_cover(&cas, wanted);
    return wanted;
}
