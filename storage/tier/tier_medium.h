/*
 * tier_medium.h: the PMEM tier's state, which tier_pmem.c (the file and
 * its pages), tier_group.c (group commit) and tier_medium.c (reaching the
 * medium) share.  Nothing outside storage/tier/ includes it.
 */
#ifndef MCPM_STORAGE_TIER_MEDIUM_H
#define MCPM_STORAGE_TIER_MEDIUM_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/tier/tier.h"

struct flusher;

#define PMEM_LINE 64    /* the unit a cache-line flush makes durable */
#define FLUSH_SLOTS 64  /* per-thread flush counters, see pmem_slot() */

/* A flush is on every store's path: a counter shared by all workers
 * would bounce one cache line between them per request.  Each thread
 * counts in a slot of its own (threads beyond FLUSH_SLOTS share). */
struct flush_slot {
    uint64_t    flushes;
    uint64_t    bytes;
    uint64_t    syncs;
} __attribute__((aligned(64)));

struct pmem_state {
    struct flush_slot slot[FLUSH_SLOTS];
    char       *shared;     /* the pmem_map_file mapping */
    char       *base;       /* == shared, or the private view (strict) */
    size_t      len;        /* mapped bytes (the file size) */
    size_t      reserve;    /* bytes before page 0 */
    size_t      npages;
    uint64_t   *bitmap;     /* bit set = page used; tail bits set */
    size_t      nwords;
    size_t      hint;       /* no free page below word `hint` */
    int         is_pmem;
    bool        created;
    bool        strict;
    enum tier_durability durability;
    enum tier_flush flush;
    uint64_t    crash_at;   /* strict: the flush count that kills us */
    uint64_t    crash_count; /* flushes since crash_at was armed */
    int         fd;         /* the file, locked (lock_file()); strict:
                               re-read on a crash */
    pthread_mutex_t copy_lock;  /* strict: one line copy at a time */
    void       *resv;       /* strict: the whole reserved address range */
    size_t      resv_len;
    struct flusher *flusher;    /* asynchronous group commit, or NULL
                                   (tier_group.c) */
};

static inline struct pmem_state *
state(const struct tier *t)
{
    return t->priv;
}


/* Reaching the medium (tier_medium.c): the calling thread's counters;
 * count a system call made for a flush; msync the pages [addr, addr +
 * len) touches; in strict mode copy the cache lines it covers to the
 * file's view; a power cut armed by tier_pmem_crash_after() lands at a
 * flush point. */
struct flush_slot *pmem_slot(struct pmem_state *s);
void pmem_count_sync(struct pmem_state *s);
void pmem_msync_range(struct pmem_state *s, const char *addr, size_t len);
void pmem_strict_copy(struct pmem_state *s, const char *addr, size_t len);
void pmem_flush_point(struct pmem_state *s);

#endif
