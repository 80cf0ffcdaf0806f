/*
 * tslot.h: a small number per thread, for what storage keeps per thread
 * (read sections, counters) without knowing the daemon's workers.
 *
 * A thread gets its slot on its first call, round robin; beyond
 * TSLOT_MAX threads, slots are shared, so what is kept in one is
 * updated with atomics all the same (uncontended, on a line of its own).
 */
#ifndef MCPM_STORAGE_TSLOT_H
#define MCPM_STORAGE_TSLOT_H

#define TSLOT_MAX 64

unsigned tslot_mine(void);

#endif
