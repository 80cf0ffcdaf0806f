/*
 * cache_stats.c: the facade's figures (cache.h; the tables are in
 * metrics.h) and the metadump of live items.
 *
 * Every figure is read racily, as memcached reads its own: counters with
 * relaxed atomic loads, list and slab figures under their own locks one
 * at a time, so a "stats" reply never stops the cache.
 */
#include "storage/cache/cache_stats.h"
#include "storage/cache/cache_priv.h"
#include "storage/index/assoc.h"
#include "storage/lru/crawler.h"
#include "storage/lru/link.h"
#include "storage/lru/lru.h"
#include "storage/lru/maint.h"
#include "storage/lru/mover.h"
#include "storage/lru/place.h"
#include "storage/slab/slabs.h"
#include "storage/slab/slabs_stats.h"

#include <stdio.h>
#include <string.h>

static struct cache_priv *const ca = &cache_priv;

void
cache_stats(struct cache_stats *out)
{
    memset(out, 0, sizeof(*out));
    lru_totals(SLABS_NTIERS, out);
    slabs_totals(out);
    mover_stats(out);
    crawler_stats(out);
    maint_stats(out);
    assoc_stats(&out->hash_power_level, &out->hash_bytes,
                &out->hash_is_expanding);
    for (unsigned i = 0; i < TSLOT_MAX; i++) {
        out->total_items += __atomic_load_n(&ca->stored[i].n,
                                            __ATOMIC_RELAXED);
    }
}

void
cache_stats_reset(void)
{
    lru_stats_reset();
    slabs_stats_reset();
    mover_stats_reset();
    crawler_stats_reset();
    maint_stats_reset();
    for (unsigned i = 0; i < TSLOT_MAX; i++) {
        __atomic_store_n(&ca->stored[i].n, 0, __ATOMIC_RELAXED);
    }
}

unsigned
cache_nclasses(void)
{
    return slabs_largest();
}

/* With two tiers, "stats slabs" and "stats items" show each class as the
 * sum of its two tier classes (ages: the older tail). */
bool
cache_slab_stats(unsigned id, struct cache_slab_stats *out)
{
    struct cache_slab_stats p;
    bool any = slabs_class_stats(SLABS_TC(TIER_DRAM, id), out);

    if (slabs_class_stats(SLABS_TC(TIER_PMEM, id), &p)) {
        out->chunk_size = p.chunk_size;
        out->chunks_per_page = p.chunks_per_page;
        out->total_pages += p.total_pages;
        out->total_chunks += p.total_chunks;
        out->used_chunks += p.used_chunks;
        out->free_chunks += p.free_chunks;
        out->free_chunks_end += p.free_chunks_end;
        any = true;
    }
    return any;
}

static uint64_t
max_u64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

bool
cache_item_stats(unsigned id, struct cache_item_stats *out)
{
    struct cache_item_stats d, p;
    bool in_dram = lru_item_stats(SLABS_TC(TIER_DRAM, id), &d);
    bool in_pmem = lru_item_stats(SLABS_TC(TIER_PMEM, id), &p);

    if (!in_dram || !in_pmem) {
        *out = in_dram ? d : p;
        return in_dram || in_pmem;
    }
#define SUM(name, kind, total) out->name = d.name + p.name;
    CACHE_ITEM_STATS(SUM)
#undef SUM
    out->age_hot = max_u64(d.age_hot, p.age_hot);
    out->age_warm = max_u64(d.age_warm, p.age_warm);
    out->age = max_u64(d.age, p.age);
    out->evicted_time = max_u64(d.evicted_time, p.evicted_time);
    return true;
}

bool
cache_sizes(void (*emit)(uint64_t size, uint64_t count, void *ctx),
            void *ctx)
{
    return link_sizes(emit, ctx);
}

/* One tier's figures; its hits are the daemon's. */
static void
tier_stats(unsigned id, struct tier *t, struct cache_tier_stats *o)
{
    struct cache_stats s;

    memset(&s, 0, sizeof(s));
    lru_totals(id, &s);
    memset(o, 0, sizeof(*o));
    o->name = t->ops->name;
    o->durable = id == TIER_PMEM;
    o->persistent_memory = id == TIER_PMEM && tier_pmem_is_pmem(t);
    slabs_tier_usage(id, &o->limit_maxbytes, &o->total_malloced);
    o->curr_items = s.curr_items;
    o->bytes = s.bytes;
    o->evictions = s.evictions;
    place_tier_moves(id, &o->promotions, &o->demotions);
    if (id == TIER_PMEM) {
        tier_pmem_flush_stats(t, &o->flushes, &o->flush_bytes, &o->syncs);
    }
}

unsigned
cache_tier_stats(struct cache_tier_stats *out, unsigned max)
{
    unsigned n = 0;

    for (unsigned id = TIER_DRAM; id <= TIER_PMEM && n < max; id++) {
        struct tier *t = slabs_tier(id);

        if (t != NULL) {
            tier_stats(id, t, &out[n++]);
        }
    }
    return n;
}

bool
cache_recovery_stats(struct cache_recovery *out)
{
    *out = ca->recovery;
    if (ca->recovering != NULL) {
        recover_progress(ca->recovering, out);
        out->downtime = ca->recovery.downtime;
        out->discarded_stale = ca->recovery.discarded_stale;
        out->discarded_unproven = ca->recovery.discarded_unproven;
    }
    return ca->sb.tier != NULL;
}

/* ---- metadump --------------------------------------------------------- */

struct dump_ctx {
    const bool *classes;
    int       (*emit)(const struct cache_meta *m, void *ctx);
    void       *ctx;
};

static int
dump_one(struct item *it, void *arg)
{
    struct dump_ctx *d = arg;
    time_t base = clock_process_started();
    struct cache_meta m;
    bool flushed;

    if ((d->classes != NULL && !d->classes[item_clsid(it)]) ||
        link_is_dead(it, clock_now(), &flushed)) {
        return 0;
    }
    m.key = item_key(it);
    m.nkey = item_nkey(it);
    m.exptime = it->exptime == 0 ? -1 : (int64_t)it->exptime + base;
    m.atime = (int64_t)item_time(it) + base;
    m.cas = item_cas(it);
    m.fetched = (item_flags(it) & ITEM_FETCHED) != 0;
    m.clsid = item_clsid(it);
    m.size = item_ntotal(it);
    m.client_flags = item_client_flags(it);
    m.key_binary = item_key_binary(it);
    return d->emit(&m, d->ctx);
}

void
cache_metadump(const bool classes[CACHE_MAX_CLASSES],
               int (*emit)(const struct cache_meta *m, void *ctx),
               void *ctx)
{
    struct dump_ctx d = { classes, emit, ctx };

    assoc_walk(dump_one, &d);
}

/* ---- cachedump -------------------------------------------------------- */

void
cache_cachedump(unsigned id,
                int (*emit)(const struct cache_dumped *d, void *ctx),
                void *ctx)
{
    time_t base = clock_process_started();
    int stop = 0;

    for (unsigned t = 0; t < SLABS_NTIERS && stop == 0; t++) {
        unsigned tc = SLABS_TC(t, id);

        lru_lock(tc, ITEM_LRU_COLD);
        for (struct item *it = do_lru_head(tc, ITEM_LRU_COLD);
             it != NULL && stop == 0; it = it->next) {
            struct cache_dumped d;

            if (lru_is_cursor(it) || item_key_binary(it)) {
                continue;
            }
            d.key = item_key(it);
            d.nkey = item_nkey(it);
            d.vlen = item_vlen(it);
            d.exptime = it->exptime == 0 ? 0 : (int64_t)it->exptime + base;
            stop = emit(&d, ctx);
        }
        lru_unlock(tc, ITEM_LRU_COLD);
    }
}
