/*
 * cache_priv.h: the facade's own state and the steps its requests are
 * made of, shared by its files and nothing else.  cache.c defines them;
 * cache_open.c (life cycle) fills the state, cache_delta.c (incr, decr)
 * takes the steps, cache_stats.c (figures) and cache_image.c (the index
 * as an image) read the state.
 */
#ifndef MCPM_STORAGE_CACHE_PRIV_H
#define MCPM_STORAGE_CACHE_PRIV_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "storage/base/clock.h"
#include "storage/base/metrics.h"
#include "storage/base/options.h"
#include "storage/base/status.h"
#include "storage/base/tslot.h"
#include "storage/recover/recover.h"
#include "storage/tier/sblock.h"

struct item;

struct cache_priv {
    struct cache_options *opts;     /* the daemon's; runtime fields move */
    struct {
        uint64_t n;
        char     pad[64 - sizeof(uint64_t)];
    } stored[TSLOT_MAX];            /* items stored since start, per
                                       thread slot: summed for stats */
    struct sblock         sb;       /* the memory file's (sb.tier NULL:
                                       no file) */
    struct cache_recovery recovery; /* what start-up read back */
    struct recovery      *recovering;   /* reading the file back while
                                           serving (recover.h), or NULL */
    struct recover_params rparams;      /* its parameters */
    char                 *tomb_log;     /* <file>.removed (tomb.h) */
    bool                  unrecovered;  /* stopped before every item was
                                           back: the file stays unclean */
    bool                  boot_pending; /* record boot once the checksum
                                           pass is over (sblock.h) */
    uint8_t               boot[16];     /* the running kernel's boot id,
                                           if it was read */
    uint64_t              downtime; /* seconds since the file's last
                                       write, as start-up measured it */
    bool                  stale;    /* over memory_file_max_downtime */
    bool                  unproven; /* written without flushes under
                                       another boot: discarded */
    bool                  stopped;  /* cache_stop(): only the memory is
                                       left to free */
};

extern struct cache_priv cache_priv;

/*
 * A memory file written without flushes and a machine restart
 * (cache_durable.c).  unproven: at the start, is the file noted as
 * written so under another boot (then it serves none of it: logged,
 * counted)?  note: before anything is stored under process durability,
 * note this boot in the superblock, on the disk.  sync: at a stop, write
 * the file (and its .removed log) to the disk whole and take the note
 * back, before the superblock's last commit; a failure is logged and
 * leaves the note.
 */
bool cache_reboot_unproven(const struct cache_options *opts);
void cache_reboot_note(void);
void cache_reboot_sync(struct tier *t);

/* How the tier flushes, as stats names it ("none", "cache_lines",
 * "msync"). */
const char *cache_flush_name(const struct tier *t);

/* One more item stored (total_items), counted in the thread's slot. */
static inline void
cache_count_stored(void)
{
    __atomic_add_fetch(&cache_priv.stored[tslot_mine()].n, 1,
                       __ATOMIC_RELAXED);
}

/* ---- the steps of a request, under lock(hv) (cache.c) ----------------- */

/* The live item of a key, or NULL: a dead one is unlinked on the way
 * and *st says why (CACHE_MISS, CACHE_EXPIRED, CACHE_FLUSHED). */
struct item *cache_find_live(const char *key, size_t nkey, uint32_t hv,
                             enum cache_status *st);

/* A live item's new TTL, durable before the reply in the memory file. */
void cache_set_exptime(struct item *it, rel_time_t exptime);

/* The cas unique a new value of a key gets: the client's (meta E) or the
 * next above the one of old (or NULL); 0 with CAS off. */
uint64_t cache_cas_for(uint64_t wanted, const struct item *old);

/* Link it in place of old (may be NULL) with cache_cas_for(wanted). */
void cache_link_new(struct item *old, struct item *it, uint32_t hv,
                    uint64_t wanted);

/* A new unlinked item holding len bytes of val (no "\r\n" in val). */
struct item *cache_small_item(const char *key, size_t nkey,
                              uint32_t client_flags, rel_time_t exptime,
                              const char *val, size_t len);

#endif
