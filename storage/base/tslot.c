/*
 * tslot.c: thread slots (tslot.h).
 */
#include "storage/base/tslot.h"

#include <stdatomic.h>

static _Atomic unsigned next;
static _Thread_local int mine = -1;

unsigned
tslot_mine(void)
{
    if (mine < 0) {
        mine = (int)(atomic_fetch_add(&next, 1) % TSLOT_MAX);
    }
    return (unsigned)mine;
}
