/*
 * sblock.h: the superblock at offset 0 of the PMEM file.
 *
 * It makes the file self-describing: what layout and settings wrote the
 * pages, the CAS high-water mark, the last flush_all, and whether the last
 * shutdown was clean.  Two copies, one per 4 KiB page:
 *
 *   offset 0      copy for even generations   (128 bytes used)
 *   offset 4096   copy for odd generations
 *   offset 8192   end of SBLOCK_SIZE; the tier's pages follow the reserve
 *
 * A commit writes generation + 1 into the copy not holding the current
 * one and persists it; that persist is the atomic switch.  A torn commit
 * fails its checksum and the load falls back to the previous generation.
 */
#ifndef MCPM_STORAGE_SBLOCK_H
#define MCPM_STORAGE_SBLOCK_H

#include "storage/tier/tier.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Layout versions.  A build reads its own and the one before it, and
 * writes its own from the first commit on (the double-buffered commit
 * makes that switch crash-safe: either copy is readable).
 *   2  the item, chunk and page table layout of today
 *   3  as 2, and the superblock keeps the time the server was last known
 *      running (alive_time); under -e, <file>.meta is kept beside it
 */
#define SBLOCK_VERSION       3
#define SBLOCK_VERSION_PREV  2
#define SBLOCK_SIZE     8192    /* the reserve must be at least this */
#define SBLOCK_REINIT   "-o memory_file_reinit"

enum sblock_status {
    SBLOCK_OK = 0,
    SBLOCK_EMPTY = -1,          /* no superblock: a new (or wiped) file */
    SBLOCK_INCOMPATIBLE = -2,   /* another layout version or settings */
    SBLOCK_CORRUPT = -3,        /* a superblock, but no valid copy */
    SBLOCK_EINVAL = -4,         /* the caller's parameters cannot work */
};

/* The settings that decide where items sit in the file: a file written
 * under other values cannot be read under these. */
struct sblock_params {
    uint64_t        file_size;
    uint64_t        reserve;        /* bytes before the first page */
    uint32_t        page_size;
    uint32_t        chunk_max;      /* -o slab_chunk_max */
    uint32_t        item_max;       /* -I: no larger item may come back */
    uint32_t        nclasses;
    const uint32_t *class_sizes;    /* nclasses chunk sizes */
    bool            use_cas;        /* -C off changes the item header */
};

struct sblock {
    /* Layout: from the params, checked against them at load. */
    uint32_t        version;
    uint32_t        page_size;
    uint64_t        file_size;
    uint64_t        reserve;
    uint32_t        chunk_max;
    uint32_t        item_max;
    uint32_t        nclasses;
    uint32_t        classes_crc;    /* crc_32c of the class sizes */
    bool            use_cas;
    /* State: the caller changes these, then sblock_commit()s them. */
    uint64_t        cas_hwm;        /* no CAS at or below it may be reused */
    int64_t         flush_time;     /* wall-clock seconds; 0 = none */
    uint64_t        flush_cas;      /* and every CAS unique up to it (in
                                       layout 3's pad: 0 in files of
                                       earlier builds, which ignore it) */
    int64_t         epoch;          /* wall-clock seconds of rel_time_t 0:
                                       the items' times count from it */
    bool            clean;          /* the last shutdown was clean */
    int64_t         alive_time;     /* wall-clock seconds the server was
                                       last known running: its stop, or
                                       its last tick (0: not known, a
                                       layout 2 file) */
    uint8_t         boot_id[16];    /* the kernel's boot under which every
                                       committed item of the file was
                                       last known whole (zero: not known,
                                       or a file of an earlier build) */
    uint32_t        unsynced_boot;  /* sblock_boot_tag() of the boot under
                                       which the file was written without
                                       flushes (process durability) since
                                       it last reached the disk whole; 0:
                                       none (in layout 3's pad: 0 in files
                                       of earlier builds) */
    /* Bookkeeping. */
    uint64_t        generation;     /* of the copy last loaded/committed */
    struct tier    *tier;           /* persist() goes through it */
    char           *base;           /* offset 0 of the file's mapping */
};

/*
 * Write a fresh superblock for `p` at base (generation 1, state zeroed,
 * not clean), after wiping both copies so that no older superblock can win
 * if this is interrupted.  Fills *sb.  The pages are not touched: the
 * caller decides what a reinitialised file's old pages mean.
 * SBLOCK_EINVAL (with a message) if p->reserve < SBLOCK_SIZE or the class
 * table is missing.  Not thread-safe: call before serving.
 */
int sblock_init_new(struct sblock *sb, struct tier *t, void *base,
                    const struct sblock_params *p, char *err, size_t errlen);

/*
 * Read the superblock at base into *out (the newest valid copy) and check
 * it against `p`.  Returns SBLOCK_OK, SBLOCK_EMPTY (no magic in either
 * copy), SBLOCK_CORRUPT (no copy passes its checksum) or
 * SBLOCK_INCOMPATIBLE (the message names the first field that differs,
 * the file's value and the current one, and says to start with
 * SBLOCK_REINIT to discard the file).  On INCOMPATIBLE *out still holds
 * what the file says.  Writes nothing.
 */
int sblock_load(struct tier *t, void *base, const struct sblock_params *p,
                struct sblock *out, char *err, size_t errlen);

/* After SBLOCK_INCOMPATIBLE: the first field of `file` that differs from
 * `p` under memcached's restart name (maxbytes, item_size_max, ...), its
 * value in the file written into old (maxbytes: the item bytes); NULL if
 * none differs. */
const char *sblock_mismatch(const struct sblock *file,
                            const struct sblock_params *p, char *old,
                            size_t oldlen);

/*
 * Make the state fields of *sb durable: write them as generation + 1 into
 * the inactive copy and persist it through sb->tier.  When this returns
 * the new state is what the next load sees.  The caller serialises
 * commits (one superblock, one writer).
 */
void sblock_commit(struct sblock *sb);

/* How far a raise of cas_hwm reaches past the value that needed it. */
#define SBLOCK_SEQ_BLOCK 65536

/*
 * Make sure no restart can hand out `seq` again: if it is above cas_hwm,
 * raise cas_hwm to seq + SBLOCK_SEQ_BLOCK and commit before returning.
 * Thread-safe (a lock serialises the raise and its commit); a seq at or
 * below the mark costs one atomic load.  Used for CAS values and for the
 * -C sequence counter alike.
 */
void sblock_reserve_seq(struct sblock *sb, uint64_t seq);

/* Record that the server runs at `wall` (seconds) and commit it.
 * Thread-safe against sblock_reserve_seq. */
void sblock_set_alive(struct sblock *sb, int64_t wall);

/* The layout version of the newest good superblock copy of the file at
 * path (read, not mapped), or 0 when it has none this build reads. */
uint32_t sblock_file_version(const char *path);

/*
 * Record a flush_all cut-off (wall-clock seconds, and the CAS unique at
 * or below which every value is gone: 0 for none) and commit it before
 * returning.  Thread-safe against sblock_reserve_seq.
 */
void sblock_set_flush(struct sblock *sb, int64_t wall, uint64_t cas);

/*
 * The boot id of the running kernel (/proc/sys/kernel/random/boot_id);
 * false when it cannot be read.  A process crash cannot tear an item
 * whose commit word is live (the kernel keeps every store the process
 * made, and the commit word is stored last), so the items a file held
 * under one boot are whole under that boot still: only another boot (a
 * kernel crash, a power cut) can have torn them.
 */
bool sblock_boot_now(uint8_t out[16]);

/* A boot id as unsynced_boot notes it: never 0. */
uint32_t sblock_boot_tag(const uint8_t boot_id[16]);

/* Record the boot id and commit it before returning.  Thread-safe
 * against the other setters. */
void sblock_set_boot(struct sblock *sb, const uint8_t boot_id[16]);

/*
 * A counter no restart hands out a value of again: each value it gives is
 * covered by the superblock's high-water mark first.  CAS uniques (cas.c)
 * and commit sequence numbers (persist.c) are two such counters over the
 * one mark.  Without a superblock it only counts.  Thread-safe.
 */
struct sblock_counter {
    uint64_t        last;       /* the last value handed out */
    struct sblock  *sb;         /* reserve against it, or NULL */
};

/* Reserve against sb from now on (NULL: stop), and continue above the
 * mark it holds now.  Before serving. */
void sblock_counter_attach(struct sblock_counter *c, struct sblock *sb);

/* A value chosen elsewhere (meta E's CAS): covered by the mark too. */
static inline void
sblock_counter_cover(struct sblock_counter *c, uint64_t v)
{
    if (c->sb != NULL) {
        sblock_reserve_seq(c->sb, v);
    }
}

/* The next n values, covered: returns the last of them. */
static inline uint64_t
sblock_counter_take(struct sblock_counter *c, uint64_t n)
{
    uint64_t v = __atomic_add_fetch(&c->last, n, __ATOMIC_RELAXED);

    sblock_counter_cover(c, v);
    return v;
}

/* The next value. */
static inline uint64_t
sblock_counter_next(struct sblock_counter *c)
{
    return sblock_counter_take(c, 1);
}

#endif
