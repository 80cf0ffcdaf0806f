/*
 * slabs_priv.h: the slab allocator's state, shared by slabs.c (classes,
 * pages, chunks), slabs_move.c (page moves), slabs_image.c (a file's
 * classes taken back) and slabs_stats.c (figures and limits) only.
 *
 * Locking: everything under sl.lock (the slabs lock), except the npages
 * counts, stored with relaxed atomics for racy readers.
 */
#ifndef MCPM_STORAGE_SLABS_PRIV_H
#define MCPM_STORAGE_SLABS_PRIV_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "storage/slab/slabs.h"
#include "storage/tier/tier.h"

struct slab_class {
    size_t       size;          /* chunk size */
    unsigned     perslab;       /* chunks per page */
    struct slabs_chunk *slots;  /* free chunks */
    uint64_t     sl_curr;       /* number of free chunks */
    char       **pages;
    unsigned     npages;
    unsigned     cap;
    uint64_t     requested;     /* bytes asked for by live items */
};

/* A thread's cache of free chunks (slabs_thread_cache(), in slabs.c),
 * made once per thread and never freed; sl.caches lists them all. */
struct tcache {
    pthread_mutex_t      lock;      /* the owner's; the mover's to purge */
    struct tcache       *next;
    struct slabs_chunk  *head[SLABS_TC_MAX];    /* through ->next */
    uint16_t             n[SLABS_TC_MAX];
    /* bytes the owner's allocs asked for, less its frees; written by the
     * owner only (relaxed atomics), read racily by slabs_requested() */
    int64_t              requested[SLABS_TC_MAX];
};


/* The page move in progress or queued; tier classes. */
struct move {
    bool         attached;      /* a mover takes requests */
    bool         held;          /* recovery runs: no page of the memory
                                   file moves (slabs_hold_moves()) */
    bool         pending;       /* a request is queued or running */
    unsigned     src, dst;
    bool         taken;         /* the mover took the request */
    bool         queued;        /* another waits behind it: */
    unsigned     next_src, next_dst;
    char        *start, *end;   /* the page being drained, or NULL */
    int          pick_cursor;   /* round robin for "any class" */
};

struct slabs_state {
    pthread_mutex_t    lock;
    pthread_cond_t     cond;            /* a request was queued */
    pthread_cond_t     done;            /* a request finished */
    struct slab_class  cls[SLABS_TC_MAX];       /* by tier class */
    unsigned           largest;
    size_t             page_size;
    size_t             chunk_max;
    size_t             prefix;          /* bytes before each item */
    struct tier       *tiers[SLABS_NTIERS];     /* by id; NULL if unused */
    unsigned           mtier;           /* the tier -m sizes */
    bool               shrinking;       /* a lowered limit not reached */
    struct move        mv;
    struct cache_stats st;              /* malloc_fails, slabs_moved */
    struct tcache *_Atomic caches;      /* every thread cache */
};

extern struct slabs_state sl;

/* The tier a tier class's pages come from (NULL if not in use). */
struct tier *slabs_tier_of(unsigned tc);

/* A class of a tier in use (not a pool). */
static inline bool
slabs_tc_valid(unsigned tc)
{
    unsigned id = SLABS_TC_ID(tc);

    return tc < SLABS_TC_MAX && id >= 1 && id <= sl.largest &&
           slabs_tier_of(tc) != NULL;
}

/* The header of chunk i of a page of class c (past the prefix), and its
 * flags as other threads read them. */
struct slabs_chunk *slabs_chunk_at(const struct slab_class *c, char *page,
                                   unsigned i);
uint16_t slabs_chunk_flags(const struct slabs_chunk *ch);

/* With the slabs lock held: a page onto or off a class's list (add: -1
 * when the list cannot grow), a free chunk off its free list, a page cut
 * into free chunks of tier class tc, a page back to its tier. */
int   slabs_add_page(struct slab_class *c, char *page);
char *slabs_pop_page(struct slab_class *c);
void  slabs_unlink_free(struct slab_class *c, struct slabs_chunk *ch);
void  slabs_cut(unsigned tc, char *page);
void  slabs_give_back(struct tier *t, char *page);

/* With the slabs lock held: name the page's chunks as class c cuts them
 * (chunkid.h), -1 when no page number is left; a chunk onto c's free
 * list. */
int   slabs_name_page(const struct slab_class *c, char *page);
void  slabs_push_free(struct slab_class *c, struct slabs_chunk *ch);

/* The page being moved is [start, end): take its chunks out of every
 * thread's cache (the slabs lock not held).  They stay free. */
void  slabs_tcache_purge(unsigned tc, const char *start, const char *end);

/* Is ptr in the page being moved?  Racy outside the slabs lock; see
 * slabs_free(). */
bool  slabs_in_move(const void *ptr);

#endif
