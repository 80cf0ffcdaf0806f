/*
 * cache_open.c: the cache's life cycle: its tiers and the memory file's
 * superblock, recovery, the background threads, shutdown; and the
 * operator's commands that act on them (cache.h).
 *
 * Start-up order, bottom up as the layers stand: item locks, hash table,
 * tiers (the file's page table and commit words with them), slabs, the
 * superblock, lists and links, recovery (the items of the file), then the
 * threads.  Shutdown stops the threads, marks the file clean, and tears
 * down top down.
 */
#include "storage/cache/cache_open.h"
#include "storage/base/hash.h"
#include "storage/base/locks.h"
#include "storage/cache/cache_image.h"
#include "storage/cache/cache_priv.h"
#include "storage/index/assoc.h"
#include "storage/index/assoc_image.h"
#include "storage/lru/crawler.h"
#include "storage/lru/evict.h"
#include "storage/lru/link.h"
#include "storage/lru/lru.h"
#include "storage/lru/maint.h"
#include "storage/lru/mover.h"
#include "storage/lru/policy.h"
#include "storage/recover/recover.h"
#include "storage/slab/cas.h"
#include "storage/slab/persist.h"
#include "storage/slab/slabs.h"
#include "storage/slab/slabs_move.h"
#include "storage/slab/slabs_stats.h"
#include "storage/tier/pagetab.h"
#include "storage/tier/sblock.h"

#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static struct cache_priv *const ca = &cache_priv;

/* The DRAM index handed over by the node taken over from, while
 * cache_init() runs (cache_image.c). */
static struct cache_image image = { .fd = -1, .delta_fd = -1 };

/* ---- threads ---------------------------------------------------------- */

/* Items in the hash table, from the LRUs' counts (lock-free). */
static uint64_t
linked_items(void)
{
    uint64_t n = 0;

    for (unsigned id = 1; id <= slabs_largest(); id++) {
        n += lru_items_in_class(id);
    }
    return n;
}

static int
start_threads(struct cache_options *o)
{
    if (o->lru_segmented && maint_start() != 0) {
        return -1;
    }
    if (o->slab_reassign && mover_start(o) != 0) {
        return -1;
    }
    if (o->hash_expand && assoc_thread_start(linked_items) != 0) {
        return -1;
    }
    return crawler_init(o);
}

/* Stop every thread (each stop is a no-op if it never started). */
static void
stop_threads(void)
{
    crawler_destroy();
    maint_stop();
    mover_stop();
    assoc_thread_stop();
}

/* ---- tiers and the memory file --------------------------------------- */

static void
restart_file(const struct cache_options *opts)
{
    struct stat st;

    if (!opts->memory_file_restart || stat(opts->memory_file, &st) != 0 ||
        tier_pmem_file_busy(opts->memory_file)) {
        return;     /* a server's file in use is refused, not removed */
    }
    if (!opts->memory_file_fresh &&
        (size_t)st.st_size == opts->memory_file_size) {
        return;
    }
    if (!opts->memory_file_fresh) {
        fprintf(stderr, "[restart] restart incompatible due to setting for "
                "[maxbytes] [old value: %lld]\n", (long long)st.st_size -
                (long long)opts->page_size);
        fprintf(stderr, "[restart] failed to validate metadata, starting "
                "with a clean cache\n");
    }
    if (unlink(opts->memory_file) != 0) {
        fprintf(stderr, "[restart] cannot remove %s: %s\n",
                opts->memory_file, strerror(errno));
    }
}

static struct tier *
pmem_tier_open(struct cache_options *opts)
{
    struct tier_pmem_options po = {
        .path = opts->memory_file,
        .size = opts->memory_file_size,
        .page_size = opts->page_size,
        /* The superblock copies, then the page table (a byte a page). */
        .reserve = SBLOCK_SIZE +
                   opts->memory_file_size / opts->page_size,
        .create = true,
        .strict = opts->pmem_strict,
        .durability = (enum tier_durability)opts->pmem_durability,
        .want_base = image.base,
        .want_held = image.base != NULL &&
                     opts->image_hold_base == (uint64_t)(uintptr_t)image.base
                     ? (size_t)opts->image_hold_len : 0,
    };
    char err[512];
    struct tier *t;

    if (opts->image_hold_len > 0 && po.want_held == 0) {
        /* held for an image that is not here: let go */
        munmap((void *)(uintptr_t)opts->image_hold_base,
               (size_t)opts->image_hold_len);
    }
    opts->image_hold_base = opts->image_hold_len = 0;   /* taken */
    restart_file(opts);
    t = tier_pmem_open(&po, err, sizeof(err));
    if (t == NULL) {
        fprintf(stderr, "%s\n", err);
    } else if (opts->verbose > 0) {
        /* Durability costs differ: nothing against a process crash, a
         * cache-line flush on PMEM, an msync of whole pages on any other
         * file. */
        fprintf(stderr, "memory file %s: %s; stores survive a %s "
                "(flush: %s)\n", opts->memory_file,
                tier_pmem_is_pmem(t) ? "persistent memory"
                                     : "not persistent memory",
                tier_pmem_durability(t) == TIER_DURABLE_PROCESS
                ? "process crash" : "power cut", cache_flush_name(t));
    }
    return t;
}

void
cache_thread_cache(bool on)
{
    slabs_thread_cache(on);
}

/* The page table and commit words of the memory file.  0 or -1. */
static int
pmem_layers(struct tier *t)
{
    char err[256];

    if (pagetab_init(t, err, sizeof(err)) != 0) {
        fprintf(stderr, "slabs: memory file: %s\n", err);
        return -1;
    }
    persist_init(t);
    return 0;
}

static void
pmem_layers_destroy(void)
{
    persist_destroy();
    pagetab_destroy();
}

/* The settings that decide where items sit in the file. */
static void
pmem_params(const struct cache_options *opts, struct tier *t,
            struct sblock_params *p, uint32_t *sizes)
{
    unsigned n = slabs_largest();

    for (unsigned i = 0; i < n; i++) {
        sizes[i] = (uint32_t)slabs_size(i + 1);
    }
    *p = (struct sblock_params) {
        .file_size = tier_pmem_mapped_len(t),
        .reserve = (uint64_t)((char *)tier_pmem_page(t, 0) -
                              (char *)tier_pmem_base(t)),
        .page_size = (uint32_t)opts->page_size,
        .chunk_max = (uint32_t)slabs_chunk_max(),
        .item_max = (uint32_t)opts->item_size_max,
        .nclasses = n,
        .class_sizes = sizes,
        .use_cas = opts->use_cas,
    };
}

/* A new (or discarded) file: every page free, then a fresh superblock
 * whose epoch is this process's rel 0.  The page table is cleared first:
 * a new superblock over an old table would bring the old pages back. */
static int
pmem_new_file(const struct cache_options *opts, struct tier *t,
              const struct sblock_params *p)
{
    char err[512];

    pagetab_clear();
    if (sblock_init_new(&ca->sb, t, tier_pmem_base(t), p, err,
                        sizeof(err)) != SBLOCK_OK) {
        fprintf(stderr, "memory file %s: %s\n", opts->memory_file, err);
        return -1;
    }
    ca->sb.epoch = (int64_t)clock_process_started();
    ca->sb.alive_time = ca->sb.epoch;
    sblock_commit(&ca->sb);
    return 0;
}

/* -e, memcached's restartable cache, on a file it cannot read: say why
 * as memcached does, and start empty. */
static void
restart_clean(int st, const struct sblock_params *p)
{
    const char *key;
    char old[32];

    if (st == SBLOCK_INCOMPATIBLE &&
        (key = sblock_mismatch(&ca->sb, p, old, sizeof(old))) != NULL) {
        fprintf(stderr, "[restart] restart incompatible due to setting for "
                "[%s] [old value: %s]\n", key, old);
        fprintf(stderr, "[restart] failed to validate metadata, starting "
                "with a clean cache\n");
    } else {
        fprintf(stderr, "[restart] corrupt metadata, starting with a clean "
                "cache\n");
    }
}

static int64_t
wall_now(void)
{
    return (int64_t)time(NULL);
}

/* Seconds since the file was last written: the time its superblock says
 * the server last ran, or for a layout 2 file, which does not keep it,
 * the file's modification time. */
static uint64_t
file_downtime(const struct cache_options *opts)
{
    int64_t last = ca->sb.alive_time, now = wall_now();
    struct stat st;

    if (last == 0 && stat(opts->memory_file, &st) == 0) {
        last = (int64_t)st.st_mtime;
    }
    return last <= 0 || now < last ? 0 : (uint64_t)(now - last);
}

/* A node down longer than the operator's bound missed the deletes and
 * updates sent meanwhile (they failed, or went to another node): what it
 * held may be stale, so it serves none of it. */
static bool
too_long_down(const struct cache_options *opts)
{
    ca->downtime = file_downtime(opts);
    if (opts->memory_file_max_downtime == 0 ||
        ca->downtime <= opts->memory_file_max_downtime) {
        return false;
    }
    fprintf(stderr, "memory file %s: last written %llu s ago, more than "
            "memory_file_max_downtime=%u: its items are discarded\n",
            opts->memory_file, (unsigned long long)ca->downtime,
            opts->memory_file_max_downtime);
    ca->stale = true;
    return true;
}

/*
 * Open the file's superblock: 1 when the file holds items to recover
 * (ca->sb loaded), 0 when it starts empty (new, or discarded as
 * memory_file_reinit or -e asks), -1 to refuse it (another layout or settings,
 * or no valid superblock copy, without memory_file_reinit).
 */
static int
pmem_superblock(const struct cache_options *opts, struct tier *t)
{
    uint32_t sizes[CACHE_MAX_CLASSES];
    struct sblock_params p;
    char err[512];
    int st = SBLOCK_EMPTY;

    pmem_params(opts, t, &p, sizes);
    if (!tier_pmem_created(t)) {
        st = sblock_load(t, tier_pmem_base(t), &p, &ca->sb, err, sizeof(err));
    }
    if (st == SBLOCK_OK) {
        return too_long_down(opts) || cache_reboot_unproven(opts)
               ? pmem_new_file(opts, t, &p) : 1;
    }
    if (st == SBLOCK_INCOMPATIBLE || st == SBLOCK_CORRUPT) {
        if (opts->memory_file_restart) {
            restart_clean(st, &p);
            return pmem_new_file(opts, t, &p);
        }
        if (!opts->memory_file_reinit) {
            fprintf(stderr, "memory file %s: %s\n", opts->memory_file, err);
            return -1;
        }
        fprintf(stderr, "memory file %s: %s; discarding its contents as "
                "memory_file_reinit asks\n", opts->memory_file, err);
    }
    return pmem_new_file(opts, t, &p);
}

/* The DRAM policy's tier: malloc, or a memkind heap when memory_kind
 * names one (volatile too, so the rest of storage sees DRAM). */
static struct tier *
dram_tier_open(const struct cache_options *opts)
{
    char err[512];
    struct tier *t;

    if (opts->memory_kind == NULL) {
        return tier_dram_create(opts->mem_limit, opts->page_size,
                                opts->prealloc);
    }
    t = tier_memkind_create(opts->memory_kind, opts->mem_limit,
                            opts->page_size, err, sizeof(err));
    if (t == NULL) {
        fprintf(stderr, "%s\n", err);
    }
    return t;
}

/* Slabs on the tiers the policy names (DRAM, the memory file, or both);
 * the tiers belong to slabs once this succeeds.  1 when the memory file
 * holds items to recover. */
static int
memory_init(struct cache_options *opts)
{
    struct tier *dram = NULL, *pmem = NULL;
    bool want_dram, want_file;
    int old = 0;

    policy_tiers(opts->tier_policy, &want_dram, &want_file);
    if (want_dram && (dram = dram_tier_open(opts)) == NULL) {
        return -1;
    }
    if (want_file && ((pmem = pmem_tier_open(opts)) == NULL ||
                      pmem_layers(pmem) != 0)) {
        tier_destroy(&dram);
        tier_destroy(&pmem);
        return -1;
    }
    if (slabs_init(opts, dram, pmem, pmem != NULL ? PERSIST_PREFIX : 0)
        != 0) {
        tier_destroy(&dram);
        tier_destroy(&pmem);
        pmem_layers_destroy();
        return -1;
    }
    if (pmem != NULL && (old = pmem_superblock(opts, pmem)) < 0) {
        slabs_destroy();
        pmem_layers_destroy();
        return -1;
    }
    return old;
}

/* The index the node taken over from handed over, in place of the scan:
 * as cache_image_adopt(), its time counted. */
static int
adopt_image(void)
{
    uint64_t t0 = clock_mono_us();
    const char *why = NULL;
    int rc;

    memset(&ca->recovery, 0, sizeof(ca->recovery));
    rc = cache_image_adopt(&image, &ca->recovery, &why);
    ca->recovery.seconds = clock_mono_us() - t0;
    if (rc == -1 && ca->opts->verbose > 0) {
        fprintf(stderr, "memory file %s: the index %s is not taken (%s): "
                "scanning the file\n", ca->opts->memory_file,
                image.owned ? "saved at its stop" : "handed over", why);
    }
    return rc;
}

/* The log of keys removed while recovering, beside the file (tomb.h). */
static char *
tomb_log_path(const char *file)
{
    size_t n = strlen(file) + sizeof(".removed");
    char *p = malloc(n);

    if (p != NULL) {
        snprintf(p, n, "%s.removed", file);
    }
    return p;
}

/* evict_set_room()'s callback while the file is read back: a page of
 * the class read back before an item of the file is evicted. */
static bool
recovery_room(unsigned tc)
{
    return SLABS_TC_TIER(tc) == TIER_PMEM &&
           recover_help(ca->recovering, SLABS_TC_ID(tc));
}

/* Start reading the file's items back while the node serves
 * (recover.h).  0, or -1 with a message. */
static int
start_recovery(struct cache_options *opts, const struct recover_params *base)
{
    struct recover_params *p = &ca->rparams;

    ca->tomb_log = tomb_log_path(opts->memory_file);
    if (ca->tomb_log == NULL) {
        fprintf(stderr, "cache: out of memory\n");
        return -1;
    }
    *p = *base;
    p->tomb_log = ca->tomb_log;
    p->file_id = (uint64_t)ca->sb.epoch;
    p->mark = ca->sb.cas_hwm;
    p->sync = tier_pmem_durability(slabs_tier(TIER_PMEM)) ==
              TIER_DURABLE_POWER;
    p->name = opts->memory_file;
    ca->recovering = recover_start(slabs_tier(TIER_PMEM), p);
    if (ca->recovering == NULL) {
        return -1;
    }
    evict_set_room(recovery_room);
    return 0;
}

/*
 * Take the index handed over (cache_image.c), or start reading the
 * file's items back while the node serves (recover.h), in the file's
 * time; then mark the file not clean before anything is served, and
 * note the boot its items are whole under: a crash under another boot
 * must bring the checksum pass back.
 */
static int
pmem_recover(struct cache_options *opts)
{
    bool booted = !opts->pmem_strict && sblock_boot_now(ca->boot);
    /* Whole: a clean stop, or a process crash under the boot the file
     * was last known whole under (sblock.h): no checksum pass.  Another
     * boot (a kernel crash, a power cut), the power-loss simulator, a
     * file of an earlier build: every item is checked. */
    bool whole = ca->sb.clean ||
                 (booted && memcmp(ca->sb.boot_id, ca->boot,
                                   sizeof(ca->boot)) == 0);
    struct recover_params p = {
        .check_crc = !whole,
        .use_cas = opts->use_cas,
        .progress_ms = opts->recovery_progress_ms,
        .verbose = opts->verbose,
        .nthreads = opts->recovery_threads,
        .pace_us = opts->recovery_pace_us,
    };

    if (ca->sb.epoch != 0) {
        clock_adopt_epoch(ca->sb.epoch);
    }
    p.now = clock_now();
    if (ca->sb.flush_time != 0) {
        int64_t rel = ca->sb.flush_time - (int64_t)clock_process_started();

        p.flush_time = rel < 1 ? 1 : (rel_time_t)rel;
        p.flush_cas = ca->sb.flush_cas;
        link_set_flush(p.flush_time, p.flush_cas);
    }
    switch (image.fd >= 0 ? adopt_image() : -1) {
    case 0:
        if (opts->verbose > 0) {
            fprintf(stderr, "memory file %s: recovered %llu items from "
                    "%llu pages in %.3f s\n", opts->memory_file,
                    (unsigned long long)ca->recovery.items,
                    (unsigned long long)ca->recovery.pages,
                    (double)ca->recovery.seconds / 1e6);
        }
        break;
    case -1:
        if (start_recovery(opts, &p) != 0) {
            return -1;
        }
        break;
    default:
        fprintf(stderr, "memory file %s: the index handed over does not "
                "load\n", opts->memory_file);
        return -1;
    }
    /* Known whole under this boot from now on, or once the checksum pass
     * is done (cache_tick()): until then a crash checks every item. */
    memset(ca->sb.boot_id, 0, sizeof(ca->sb.boot_id));
    if (booted && whole) {
        memcpy(ca->sb.boot_id, ca->boot, sizeof(ca->boot));
    }
    ca->boot_pending = booted && !whole && ca->recovering != NULL;
    ca->sb.clean = false;
    ca->sb.alive_time = wall_now();
    sblock_commit(&ca->sb);
    return 0;
}

/* The file's items back (`old`: it holds some), or a new file noted
 * whole under this boot. */
static int
pmem_items(struct cache_options *opts, int old)
{
    if (old > 0) {
        if (pmem_recover(opts) != 0) {
            return -1;
        }
    } else if (ca->sb.tier != NULL && !opts->pmem_strict &&
               sblock_boot_now(ca->boot)) {
        sblock_set_boot(&ca->sb, ca->boot);
    }
    cache_reboot_note();
    return 0;
}

/* Wait for the recovery, if one runs (with stop, stop it at its next
 * page); what it read back is kept in ca->recovery. */
static void
end_recovery(bool stop)
{
    struct cache_recovery r;

    if (ca->recovering == NULL) {
        return;
    }
    evict_set_room(NULL);
    ca->unrecovered = !recover_finish(ca->recovering, stop, &r);
    ca->recovering = NULL;
    r.downtime = ca->recovery.downtime;
    r.discarded_stale = ca->recovery.discarded_stale;
    r.discarded_unproven = ca->recovery.discarded_unproven;
    ca->recovery = r;
    free(ca->tomb_log);
    ca->tomb_log = NULL;
}

void
cache_recovery_wait(void)
{
    end_recovery(false);
}

bool
cache_recovering(void)
{
    return recover_running(ca->recovering);
}

/* The memory file's superblock rules seq and CAS from now on: no value
 * at or below its mark is handed out again. */
static void
pmem_serve(void)
{
    ca->recovery.downtime = ca->downtime;
    ca->recovery.discarded_stale = ca->stale;
    ca->recovery.discarded_unproven = ca->unproven;
    if (ca->opts->pmem_crash_after != 0) {
        tier_pmem_crash_after(slabs_tier(TIER_PMEM),
                              ca->opts->pmem_crash_after);
    }
    persist_set_sblock(&ca->sb);
    cas_use_sblock(&ca->sb);
}

/* ---- life cycle ------------------------------------------------------- */

/* The layers above slabs, before anything is linked.  0 or -1. */
static int
lists_init(struct cache_options *opts)
{
    if (lru_init(opts) != 0) {
        return -1;
    }
    if (link_init(opts) != 0) {
        lru_destroy();
        return -1;
    }
    evict_init(opts);
    maint_init(opts);
    return 0;
}

static void
lists_destroy(void)
{
    link_destroy();
    lru_destroy();
}

/* The index to take in place of the scan: the one handed over, else the
 * one the last clean stop saved beside the file. */
static void
find_image(const struct cache_options *opts)
{
    if (cache_image_map(&image, opts) != 0) {
        cache_image_map_saved(&image, opts);
    }
}

/* After the start's first commit: the saved index is outdated by it, and
 * what was kept for an index, taken or not, goes. */
static void
done_with_image(const struct cache_options *opts)
{
    if (ca->sb.tier != NULL) {
        cache_image_forget_saved(opts);
    }
    cache_image_unmap(&image);
    assoc_stage_drop();             /* room for an index that did not come */
}

/* The leaves every layer above uses: hash, CAS, policy, item locks
 * (2^lp).  0, or -1 with a message. */
static int
base_init(struct cache_options *opts, unsigned lp)
{
    memset(ca, 0, sizeof(*ca));
    ca->opts = opts;
    hash_use(opts->hash_algorithm);
    cas_init();
    policy_init(opts->tier_policy);
    if (locks_init(lp) != 0) {
        fprintf(stderr, "cache: cannot set up %u item locks\n", 1u << lp);
        return -1;
    }
    return 0;
}

int
cache_init(struct cache_options *opts, unsigned nworkers)
{
    unsigned lp = opts->lock_power ? opts->lock_power
                                   : locks_power_for(nworkers);
    int old;

    if (base_init(opts, lp) != 0) {
        return -1;
    }
    /* The file before the table's address space: a file with an index
     * maps where the index says it was, if free. */
    find_image(opts);
    old = memory_init(opts);
    if (old < 0) {
        goto fail_locks;
    }
    if (old > 0 && !cache_image_saved_fits(&image, &ca->sb)) {
        cache_image_unmap(&image);      /* the file changed since */
    }
    if (assoc_init(opts->hashpower, opts->hash_bulk_move) != 0) {
        fprintf(stderr, "cache: cannot set up the hash table (hashpower "
                "%u, item lock power %u)\n", opts->hashpower, lp);
        goto fail_slabs;
    }
    if (lists_init(opts) != 0) {
        goto fail_assoc;
    }
    if (pmem_items(opts, old) != 0) {
        goto fail_lists;
    }
    done_with_image(opts);
    if (ca->sb.tier != NULL) {
        pmem_serve();
    }
    if (start_threads(opts) != 0) {
        fprintf(stderr, "cache: cannot start storage threads\n");
        stop_threads();
        goto fail_lists;
    }
    return 0;
fail_lists:
    cas_use_sblock(NULL);
    persist_set_sblock(NULL);
    lists_destroy();
fail_assoc:
    assoc_destroy();
fail_slabs:
    slabs_destroy();
    pmem_layers_destroy();
fail_locks:
    locks_destroy();
    assoc_stage_drop();
    cache_image_unmap(&image);
    return -1;
}

void
cache_stop(bool last)
{
    struct tier *t = ca->sb.tier;

    if (ca->stopped) {
        return;
    }
    ca->stopped = true;
    end_recovery(true);
    stop_threads();
    /* Nothing writes any more: the file is consistent as it stands, but
     * for the items a stopped recovery did not read back yet. */
    if (t != NULL) {
        persist_set_sblock(NULL);
        cas_use_sblock(NULL);
        if (last) {
            cache_reboot_sync(t);
        }
        ca->sb.clean = !ca->unrecovered;
        ca->sb.alive_time = wall_now();
        sblock_commit(&ca->sb);
        if (last && ca->sb.unsynced_boot == 0 &&
            tier_pmem_durability(t) == TIER_DURABLE_PROCESS) {
            tier_pmem_sync(t, tier_pmem_base(t), SBLOCK_SIZE);
        }
        tier_pmem_unlock(t);
        ca->sb.tier = NULL;
    }
}

void
cache_shutdown(void)
{
    cache_stop(false);
    cache_image_drop_room();
    lists_destroy();
    slabs_destroy();
    pmem_layers_destroy();
    assoc_destroy();
    assoc_stage_drop();         /* room for an image that never came */
    locks_destroy();
}

void
cache_tick(void)
{
    if (ca->opts->hash_expand) {
        assoc_maybe_expand(linked_items());
    }
    mover_tick();
    if (ca->boot_pending && recover_complete(ca->recovering)) {
        /* the checksum pass is over: every item left is whole */
        ca->boot_pending = false;
        sblock_set_boot(&ca->sb, ca->boot);
    }
    if (ca->sb.tier != NULL) {
        /* how long the file was left alone, should the server die now */
        sblock_set_alive(&ca->sb, wall_now());
    }
}

void
cache_presize(uint64_t items)
{
    if (linked_items() == 0) {
        assoc_presize(items);
    }
}

bool
cache_file_may_lack_meta(const char *path)
{
    return sblock_file_version(path) == SBLOCK_VERSION_PREV;
}

bool
cache_file_is_ours(const char *path)
{
    return sblock_file_version(path) != 0;
}

bool
cache_file_busy(const char *path)
{
    return path != NULL && tier_pmem_file_busy(path);
}

/* ---- administration --------------------------------------------------- */

int
cache_set_memlimit(size_t bytes)
{
    if (slabs_set_memlimit(bytes) != 0) {
        return -1;
    }
    ca->opts->mem_limit = bytes;
    return 0;
}

enum cache_status
cache_slabs_reassign(int src, int dst)
{
    if (!ca->opts->slab_reassign) {
        return CACHE_DISABLED;
    }
    return slabs_reassign(policy_home(), src, dst);
}

enum cache_status
cache_crawl(const bool classes[CACHE_MAX_CLASSES])
{
    return crawler_request(classes);
}

int
cache_crawler_enable(bool on)
{
    return crawler_enable(on);
}
