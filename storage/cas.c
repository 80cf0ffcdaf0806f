/*
 * cas.c: the CAS counter (cas.h).
 */
#include "storage/cas.h"
#include "storage/sblock.h"

static struct {
    uint64_t        last;       /* the last unique handed out */
    struct sblock  *sb;
} cas;

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
    cas.sb = sb;
    if (sb != NULL && sb->cas_hwm > cas.last) {
        cas.last = sb->cas_hwm;
    }
}

uint64_t
cas_next(void)
{
    uint64_t v = __atomic_add_fetch(&cas.last, 1, __ATOMIC_RELAXED);

    if (cas.sb != NULL) {
        sblock_reserve_seq(cas.sb, v);
    }
    return v;
}

uint64_t
cas_take(uint64_t wanted)
{
    if (wanted == 0) {
        return cas_next();
    }
    if (cas.sb != NULL) {
        sblock_reserve_seq(cas.sb, wanted);
    }
    return wanted;
}
