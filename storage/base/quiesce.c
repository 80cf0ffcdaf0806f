/*
 * quiesce.c: read sections counted per thread slot (quiesce.h).
 */
#include "storage/base/quiesce.h"

#include <sched.h>
#include <stdatomic.h>

#include "storage/base/tslot.h"

#define SLOTS TSLOT_MAX

static struct {
    _Atomic unsigned n;
    char pad[64 - sizeof(unsigned)];
} active[SLOTS];

static unsigned
my_slot(void)
{
    return tslot_mine();
}

void
quiesce_enter(void)
{
    atomic_fetch_add(&active[my_slot()].n, 1);
}

void
quiesce_exit(void)
{
    atomic_fetch_sub_explicit(&active[my_slot()].n, 1, memory_order_release);
}

void
quiesce_wait(void)
{
    atomic_thread_fence(memory_order_seq_cst);
    for (unsigned i = 0; i < SLOTS; i++) {
        while (atomic_load(&active[i].n) != 0) {
            sched_yield();
        }
    }
}
