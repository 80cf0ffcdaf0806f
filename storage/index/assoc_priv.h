/*
 * assoc_priv.h: what assoc.c (the table) and assoc_image.c (its image
 * for a successor) share; no one else includes it.
 */
#ifndef MCPM_STORAGE_ASSOC_PRIV_H
#define MCPM_STORAGE_ASSOC_PRIV_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ASSOC_POWER_MAX 32

/* The table: the reserved mapping, its size in buckets, its shape
 * (level << 32 | split). */
extern uint32_t *assoc_table;
extern uint64_t assoc_reserved;
extern _Atomic uint64_t assoc_shape;

static inline unsigned
level_of(uint64_t s)
{
    return (unsigned)(s >> 32);
}

static inline uint64_t
split_of(uint64_t s)
{
    return (uint32_t)s;
}

static inline uint64_t
buckets_of(uint64_t s)
{
    return ((uint64_t)1 << level_of(s)) + split_of(s);
}

/*
 * The pages of the table written since a precopy (assoc_image_pre()):
 * a byte for each ASSOC_PAGE bytes of buckets, set by every store to a
 * bucket.  Set only when clear, so that the stores that follow read a
 * line shared by every core instead of bouncing it.
 */
#define ASSOC_PAGE_SHIFT 12

extern unsigned char *assoc_written;
extern bool assoc_barrier_ok;       /* membarrier() is ours to use */

static inline void
assoc_mark(const uint32_t *slot)
{
    size_t i = (size_t)(slot - assoc_table) >>
               (ASSOC_PAGE_SHIFT - 2);

    if (assoc_written != NULL &&
        !__atomic_load_n(&assoc_written[i], __ATOMIC_RELAXED)) {
        __atomic_store_n(&assoc_written[i], 1, __ATOMIC_RELAXED);
    }
}

/* The marks' map for a table reserved at n buckets, or its end. */
int  assoc_written_init(uint64_t n);
void assoc_written_free(void);

#endif
