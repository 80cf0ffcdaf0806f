/*
 * tier_group_priv.h: what tier_group.c (group commit) gives tier_pmem.c.
 * Nothing outside storage/tier/ includes it.
 */
#ifndef MCPM_STORAGE_TIER_GROUP_PRIV_H
#define MCPM_STORAGE_TIER_GROUP_PRIV_H

#include <stdbool.h>
#include <stddef.h>

#include "storage/tier/tier_medium.h"

/* Group commit (tier_group.c): note the range in the calling thread's
 * group instead of reaching the medium now (false: the thread is in no
 * group of s's, or out of memory: reach it now); stop the flusher
 * thread, if one runs (no thread may be in a group any more). */
bool pmem_group_note(struct pmem_state *s, const char *addr, size_t len);
void pmem_group_stop(struct pmem_state *s);

#endif
