/*
 * options.h: every option of storage/, declared once.
 *
 * CACHE_OPTIONS(X) lists X(type, field, default).  From it come struct
 * cache_options and cache_options_defaults() (memcached 1.6's defaults);
 * how an operator spells each option (-m, -o hot_lru_pct=, "stats
 * settings" names) is the daemon's business, in its settings table
 * (memcached-pm/base/settings.h).
 *
 * The fields marked "runtime" may be changed by the daemon while storage
 * runs (lru tune, slabs automove, lru_crawler sleep, ...); storage's
 * threads read them again at their next step.  Every other field is read
 * once, by cache_init().
 *
 * Types only, no calls: every layer may include it.
 */
#ifndef MCPM_STORAGE_OPTIONS_H
#define MCPM_STORAGE_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/base/clock.h"

#define CACHE_MAX_CLASSES 64    /* class ids 1..63; 0 is the page pool */

/* Where items live (-o tier_policy); policy.h decides what each means. */
enum cache_tier_policy {
    CACHE_TIER_DRAM,                /* DRAM only */
    CACHE_TIER_PMEM,                /* every item in the memory file */
    CACHE_TIER_CACHE,               /* every item in the file, items read
                                       often copied into DRAM */
    CACHE_TIER_CAPACITY             /* new items in DRAM, its COLD tail
                                       demoted into the file */
};

/* What a store in the memory file must survive (tier.h explains). */
enum cache_durability {
    CACHE_DURABLE_AUTO,             /* power, but process on tmpfs */
    CACHE_DURABLE_PROCESS,          /* a process crash: no flushes */
    CACHE_DURABLE_POWER             /* a power cut: flush the medium */
};

/* The key hash (-o hash_algorithm); hash.h has them. */
enum hash_algorithm {
    HASH_XXH3,
    HASH_MURMUR3,
    HASH_JENKINS
};

#define CACHE_MB ((size_t)1 << 20)

#define CACHE_OPTIONS(X)                                                    \
    /* memory and tiers */                                                  \
    X(size_t,      mem_limit,          64 * CACHE_MB) /* -m, bytes */       \
    X(enum cache_tier_policy, tier_policy, CACHE_TIER_DRAM)                 \
    X(const char *, memory_file,       NULL)  /* the PMEM tier's file */    \
    X(size_t,      memory_file_size,   0)     /* bytes, superblock too */   \
    X(bool,        pmem_strict,        false) /* power-loss simulator */    \
    X(enum cache_durability, pmem_durability, CACHE_DURABLE_AUTO)           \
    X(unsigned,    pmem_crash_after,   0)     /* strict: die at the n-th  \
                                                 persist once serving */    \
    X(bool,        memory_file_reinit, false) /* discard a file written   \
                                                 under other settings */    \
    X(bool,        memory_file_restart, false) /* -e: as memcached, a file \
                                                 it cannot read is logged  \
                                                 and made anew */           \
    X(bool,        memory_file_fresh,  false) /* -e found no metadata: the \
                                                 file is made anew */       \
    X(unsigned,    memory_file_max_downtime, 0) /* seconds: a file last  \
                                                 written longer ago starts \
                                                 empty (0: no bound) */     \
    X(int,         image_fd,           -1)    /* the DRAM index of the node \
                                                 taken over from          \
                                                 (cache_image_write()), or \
                                                 -1: the file is scanned */ \
    X(int,         image_delta_fd,     -1)    /* with it, the table's     \
                                                 pages written since its  \
                                                 precopy, or -1 */          \
    X(uint64_t,    image_hold_base,    0)     /* the predecessor's file  \
                                                 address, held (PROT_NONE) \
                                                 since before anything was \
                                                 mapped, image_hold_len   \
                                                 bytes; 0: none */          \
    X(uint64_t,    image_hold_len,     0)                                   \
    X(const char *, memory_kind,       NULL)  /* "dax:<dir>" or "kmem":   \
                                                 a memkind heap for DRAM */ \
    X(bool,        prealloc,           false) /* -L */                      \
    /* slabs */                                                             \
    X(size_t,      page_size,          CACHE_MB)                            \
    X(size_t,      item_size_max,      CACHE_MB)       /* -I */             \
    X(size_t,      slab_chunk_max,     CACHE_MB / 2)                        \
    X(double,      factor,             1.25)           /* -f */             \
    X(unsigned,    chunk_min,          48)             /* -n */             \
    X(const char *, slab_sizes,        NULL)           /* "a-b-c" */        \
    X(bool,        use_cas,            true)           /* not -C */         \
    X(bool,        evict,              true)           /* not -M */         \
    /* hash table and locks */                                              \
    X(enum hash_algorithm, hash_algorithm, HASH_XXH3)                       \
    X(unsigned,    hashpower,          16)                                  \
    X(bool,        hash_expand,        true)                                \
    X(unsigned,    hash_bulk_move,     1)                                   \
    X(unsigned,    recovery_progress_ms, 1000) /* -v: between progress  \
                                                 lines of a restart */      \
    X(unsigned,    recovery_threads,   0)     /* 0: one per CPU */          \
    X(unsigned,    recovery_pace_us,   0)     /* rest after each page */    \
    X(unsigned,    lock_power,         0)     /* 0: from the workers */     \
    /* LRU, maintainer, crawler (runtime unless said) */                    \
    X(bool,        lru_segmented,      true)  /* HOT/WARM/COLD */           \
    X(unsigned,    hot_lru_pct,        20)                                  \
    X(unsigned,    warm_lru_pct,       40)                                  \
    X(double,      hot_max_factor,     0.2)                                 \
    X(double,      warm_max_factor,    2.0)                                 \
    X(bool,        temp_lru,           false)                               \
    X(rel_time_t,  temporary_ttl,      61)                                  \
    X(bool,        lru_crawler,        true)  /* the crawler thread */      \
    X(unsigned,    crawler_sleep_us,   100)                                 \
    X(unsigned,    crawler_tocrawl,    0)     /* 0: unlimited */            \
    X(unsigned,    tail_repair_time,   0)     /* seconds, 0: off */         \
    /* page mover (runtime but slab_reassign) */                            \
    X(bool,        slab_reassign,      true)                                \
    X(int,         slab_automove,      1)     /* 0, 1 or 2 */               \
    X(double,      automove_ratio,     0.8)                                 \
    X(unsigned,    automove_window,    10)                                  \
    X(double,      automove_freeratio, 0.01)                                \
    /* reporting */                                                         \
    X(bool,        track_sizes,        false) /* stats sizes */             \
    X(int,         verbose,            0)

#define CACHE_OPTION_FIELD(type, field, dflt) type field;

struct cache_options {
    CACHE_OPTIONS(CACHE_OPTION_FIELD)
};

/* The defaults above. */
static inline void
cache_options_defaults(struct cache_options *o)
{
#define CACHE_OPTION_DEFAULT(type, field, dflt) o->field = (dflt);
    CACHE_OPTIONS(CACHE_OPTION_DEFAULT)
#undef CACHE_OPTION_DEFAULT
}

#endif
