/*
 * tier.h: where item memory comes from.
 *
 * A tier hands out fixed-size, page-aligned pages up to a byte limit.  The
 * slab allocator asks a tier for pages and never looks inside it, so a tier
 * backed by persistent memory (tier_pmem.c) or by libmemkind is one more
 * file implementing these ops; item->tier records which tier a page (and so
 * an item) came from.
 *
 *   struct tier ------ ops ------> page_alloc / page_free / persist / destroy
 *     limit, used (bytes)
 *
 * Locking: a tier is not thread-safe; the slab allocator calls it under its
 * own lock.  persist() may be called without locks on memory the caller
 * owns.
 */
#ifndef MCPM_STORAGE_TIER_H
#define MCPM_STORAGE_TIER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tier;

struct tier_ops {
    const char *name;
    /* One page of t->page_size bytes, aligned to it; NULL when the limit
     * is reached or the memory cannot be had. */
    void *(*page_alloc)(struct tier *t);
    /* A page past the limit, for a class that has none (memcached grants
     * a class its first page past -m); NULL (or no op) where the tier
     * cannot grow past it: a file, a preallocated block. */
    void *(*page_alloc_past)(struct tier *t);
    /* Give a page back (shutdown, or a lowered memory limit). */
    void  (*page_free)(struct tier *t, void *page);
    /* Make [addr, addr + len) durable; a no-op for volatile tiers. */
    void  (*persist)(struct tier *t, const void *addr, size_t len);
    /* Change the limit; false if this tier cannot (a preallocated block
     * cannot grow). */
    bool  (*set_limit)(struct tier *t, size_t limit);
    /* Free the tier's own state and any memory it still holds. */
    void  (*destroy)(struct tier *t);
};

struct tier {
    const struct tier_ops *ops;
    uint8_t     id;             /* stored in item->tier */
    size_t      page_size;
    size_t      limit;          /* bytes; pages beyond it are refused */
    size_t      used;           /* bytes handed out as pages */
    void       *priv;           /* the implementation's state */
};

#define TIER_DRAM 0

/*
 * The DRAM tier: pages up to `limit` bytes, taken from 2 MB aligned
 * extents of the heap asked to be backed by transparent huge pages, or
 * carved from one block allocated now when `prealloc` (-L) is set.
 * Returns NULL (and says why on stderr) when the memory cannot be had.
 */
struct tier *tier_dram_create(size_t limit, size_t page_size, bool prealloc);

/*
 * The memkind tier (-o memory_kind=): volatile pages from libmemkind, up
 * to `limit` bytes, allocated as needed (never preallocated).  spec is
 * "dax:<dir>" (a heap over a file memkind creates in <dir> and unlinks at
 * once; any directory works for testing) or "kmem" (MEMKIND_DAX_KMEM,
 * PMEM exposed as a NUMA node).  Its id is TIER_DRAM: item->tier tells
 * PMEM items, which carry commit words, and a memkind page is as
 * volatile as a malloc'd one.  persist() is a no-op.
 *
 * Returns NULL with a message in err (errlen bytes) for an unknown spec,
 * a missing or unusable directory, a machine without KMEM-DAX memory, or
 * a limit under memkind's 16 MiB minimum.  The caller owns the tier;
 * tier_destroy() frees the heap with every page still in it.
 */
struct tier *tier_memkind_create(const char *spec, size_t limit,
                                 size_t page_size, char *err, size_t errlen);

#define TIER_PMEM 1

/*
 * The PMEM tier: pages from a file mapped with libpmem, laid out as
 *
 *   offset 0         reserve                reserve + i * page_size
 *   | superblock ... | page 0 | page 1 | ... | page i | ... | (tail unused)
 *
 * Pages are named by index, never by address, in anything written to the
 * file, so the file does not care where it is mapped next time.
 */
/*
 * What a persisted store must survive, and so what persist() costs:
 *
 *   PROCESS  a crash of the process.  Every store is in the page cache
 *            (or the PMEM's cache lines) the moment it is made, so
 *            persist() only keeps the compiler from moving stores across
 *            it: no flush, no system call.  After a power cut or a kernel
 *            crash the file holds whatever pages the kernel had written
 *            back, old beside new: the cache layer notes this
 *            (sblock.h unsynced_boot) and does not serve such a file.
 *   POWER    a power cut too.  On real PMEM (DAX) persist() flushes the
 *            cache lines and drains; on any other file it is an msync,
 *            grouped (see tier_pmem_group_join()).
 *   AUTO     POWER on real PMEM, where it costs a cache-line flush;
 *            PROCESS on any other file (a disk's msync is a device
 *            flush: milliseconds a write).
 */
enum tier_durability {
    TIER_DURABLE_AUTO, TIER_DURABLE_PROCESS, TIER_DURABLE_POWER
};

/* How persist() reaches the medium, once the durability is settled. */
enum tier_flush {
    TIER_FLUSH_NONE,            /* ordering only */
    TIER_FLUSH_LINES,           /* pmem_persist: cache lines and a drain */
    TIER_FLUSH_MSYNC            /* msync, grouped per event-loop pass */
};

struct tier_pmem_options {
    const char *path;
    size_t      size;       /* bytes; 0 = the existing file's size */
    size_t      page_size;  /* a power of two, 64 or more */
    size_t      reserve;    /* bytes before page 0; rounded up to pages */
    bool        create;     /* create the file (of `size`) if missing */
    bool        strict;     /* power-loss simulator, see tier_pmem_crash */
    enum tier_durability durability;
    void       *want_base;  /* an existing file mapped here if that range
                               is free (a successor that takes over the
                               predecessor's pointers), or NULL: anywhere */
    size_t      want_held;  /* bytes at want_base this process holds for
                               the file (PROT_NONE): it moves over them;
                               what it does not take is unmapped */
};

/*
 * Map o->path and return a tier whose limit is all of its pages, all free.
 * An existing file is mapped as it is: if o->size is not 0 and differs from
 * the file's size the open fails (the file is never resized).  A missing
 * file is created (fully allocated) only when o->create and o->size are
 * set.  persist() does what o->durability asks of the medium (above).
 *
 * Strict mode simulates power loss: addresses handed out point into a
 * private copy-on-write view of the file, and only persist() copies the
 * 64-byte cache lines it covers into the file (at the group's sync, for a
 * thread in a group).  Whatever was stored but never persisted is lost
 * when the process dies, exactly as PMEM contents short of a flush are
 * lost on a power cut.  It implies POWER, flushed as the medium would be:
 * cache lines on real PMEM, grouped msync anywhere else.
 *
 * Returns NULL with a message in err (errlen bytes) on any failure.  The
 * caller owns the tier; tier_destroy() unmaps it.
 */
struct tier *tier_pmem_open(const struct tier_pmem_options *o, char *err,
                            size_t errlen);

/* Does another process hold the memory file at path open as its tier (a
 * server running on it)?  tier_pmem_open() refuses such a file. */
bool tier_pmem_file_busy(const char *path);

/* Start of the mapping (the superblock lives here), its length, whether
 * libpmem found real PMEM, whether this open created the file.  The
 * address changes with every open and with tier_pmem_crash(). */
void *tier_pmem_base(const struct tier *t);

/* Let go of the file's lock while it stays mapped: nothing may write it
 * any more; another server may open it (a successor, while this one
 * still unmaps its gigabytes). */
void tier_pmem_unlock(struct tier *t);
size_t tier_pmem_mapped_len(const struct tier *t);
bool tier_pmem_is_pmem(const struct tier *t);
bool tier_pmem_created(const struct tier *t);

/* The durability settled at open (never AUTO) and how it flushes. */
enum tier_durability tier_pmem_durability(const struct tier *t);
enum tier_flush tier_pmem_flush_kind(const struct tier *t);

/* Make [addr, addr + len), or the whole file, durable now, whatever the
 * durability (a stop, and the superblock's note of a PROCESS file).
 * sync_all: 0, or -1 with errno from fdatasync. */
void tier_pmem_sync(struct tier *t, const void *addr, size_t len);
int tier_pmem_sync_all(struct tier *t);

/* persist() calls so far, the bytes they covered and the system calls
 * made for them (a racy sum of per-thread counts, good for stats). */
void tier_pmem_flush_stats(const struct tier *t, uint64_t *flushes,
                           uint64_t *bytes, uint64_t *syncs);

/*
 * Group commit (TIER_FLUSH_MSYNC; tier_group.c).  An msync costs a
 * system call and a device flush however little it covers, so an event
 * loop's thread joins a group: its persist() calls then only note the
 * range.  tier_pmem_group_sync() makes everything the thread noted
 * durable with one msync over the span they cover (in strict mode:
 * copies exactly the noted lines, each copy a flush point), after what
 * it submitted.  Ranges noted between two syncs reach the medium in any
 * order, as one msync writes pages; whoever needs one store durable
 * before another is made syncs in between.  Stores may always become
 * durable early (the kernel writes dirty pages back when it likes).
 * Threads that never join sync at every persist().
 *
 * join returns false, and the thread keeps syncing at every persist(),
 * unless the tier flushes by msync.  With a waker it joins
 * asynchronously too: tier_pmem_group_submit() then hands what it noted
 * to the tier's flusher thread and returns a ticket at once, with the
 * commit words `zero` to store 0 into (and make durable) only once the
 * noted ranges are; urgent asks for those zeros to be made durable
 * without waiting for more submits.  wake(arg) is called from the
 * flusher after a round that made one of its tickets firm (its ranges
 * durable) or done (its zeros too).  submit returns 0 when there was
 * nothing to hand over, or when it had to sync by itself (the thread
 * joined without a waker, or no memory): then all of it is durable.
 *
 * pending: the thread has noted ranges not yet synced or submitted.
 * noted: how many ranges the thread has noted, ever (a clock of its
 * stores); durable: how many of those are durable now (by tickets firm
 * or syncs), and in *settled how many are durable with the zeros their
 * tickets asked for (by tickets done or syncs).  done: the last ticket done, of
 * any thread.  wait: until every ticket of the thread is done.  leave:
 * sync what is pending and leave (before the thread exits).
 */
bool tier_pmem_group_join(struct tier *t, void (*wake)(void *), void *arg);
bool tier_pmem_group_pending(const struct tier *t);
void tier_pmem_group_sync(struct tier *t);
uint64_t tier_pmem_group_submit(struct tier *t, uint64_t *const *zero,
                                size_t nzero, bool urgent);
uint64_t tier_pmem_group_noted(void);
uint64_t tier_pmem_group_durable(const struct tier *t, uint64_t *settled);
uint64_t tier_pmem_group_done(const struct tier *t);
void tier_pmem_group_wait(struct tier *t);
void tier_pmem_group_leave(struct tier *t);

/* Number of pages, the address of page `index` (NULL when out of range),
 * and the index of the page holding `addr` (SIZE_MAX when addr is not in
 * a page: in the reserve or outside the mapping). */
size_t tier_pmem_npages(const struct tier *t);
void *tier_pmem_page(const struct tier *t, size_t index);
size_t tier_pmem_index(const struct tier *t, const void *addr);

/*
 * Recovery: mark page `index` used (as page_alloc would, counting it in
 * t->used) because the file says it holds items.  False if the index is
 * out of range or the page is already used.  Not thread-safe.
 */
bool tier_pmem_claim(struct tier *t, size_t index);

/*
 * Test hook for strict mode: from now on, the n-th persist() call (n > 0)
 * kills the process with SIGKILL before it copies anything, as a power
 * cut at that point would.  False (nothing armed) if the tier is not
 * strict.
 */
bool tier_pmem_crash_after(struct tier *t, uint64_t n);

/*
 * Test hook for strict mode: simulate a power cut and restart in-process.
 * Every store not persisted is dropped (the private view is re-read from
 * the file, at the same base address) and all pages become free, as after
 * a fresh open; recovery then claims them again.  Returns false (and does
 * nothing) if the tier is not strict or the remap fails.
 */
bool tier_pmem_crash(struct tier *t);

static inline void *
tier_page_alloc(struct tier *t)
{
    return t->ops->page_alloc(t);
}

static inline void *
tier_page_alloc_past(struct tier *t)
{
    return t->ops->page_alloc_past != NULL ? t->ops->page_alloc_past(t)
                                           : NULL;
}

static inline void
tier_page_free(struct tier *t, void *page)
{
    t->ops->page_free(t, page);
}

static inline void
tier_persist(struct tier *t, const void *addr, size_t len)
{
    t->ops->persist(t, addr, len);
}

static inline bool
tier_set_limit(struct tier *t, size_t limit)
{
    return t->ops->set_limit(t, limit);
}

/* Destroy a tier through its ops and set *tp to NULL. */
static inline void
tier_destroy(struct tier **tp)
{
    if (*tp != NULL) {
        (*tp)->ops->destroy(*tp);
        *tp = NULL;
    }
}

#endif
