/*
 * admin.c: stats and the operator's commands, with memcached's names,
 * order and replies (shared/reference/memcached.md §1.4, §4).
 */
#include "config.h"

#include "memcached-pm/admin.h"

#include <event2/event.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "memcached-pm/settings.h"
#include "memcached-pm/stats.h"
#include "memcached-pm/worker.h"
#include "proto/compose.h"
#include "proto/response.h"
#include "proto/token.h"

#define STAT_LINE_MAX 1200
#define MB (1024 * 1024)

static enum process_result
reply(struct conn *c, enum rsp_type r)
{
    conn_out_rsp(c, r);
    return PROCESS_OK;
}

/* ---- STAT line writers ------------------------------------------------ */

static void
stat_str(struct conn *c, const char *name, const char *val)
{
    char *p = conn_out_reserve(c, STAT_LINE_MAX);

    if (p != NULL) {
        conn_out_commit(c, compose_stat_str(p, STAT_LINE_MAX, name, val));
    }
}

static void
stat_u64(struct conn *c, const char *name, uint64_t v)
{
    char *p = conn_out_reserve(c, STAT_LINE_MAX);

    if (p != NULL) {
        conn_out_commit(c, compose_stat_u64(p, STAT_LINE_MAX, name, v));
    }
}

static void
stat_f2(struct conn *c, const char *name, double v)
{
    char *p = conn_out_reserve(c, STAT_LINE_MAX);

    if (p != NULL) {
        conn_out_commit(c, compose_stat_f2(p, STAT_LINE_MAX, name, v));
    }
}

static void
stat_pfx(struct conn *c, const char *prefix, const char *name, uint64_t v)
{
    char *p = conn_out_reserve(c, STAT_LINE_MAX);

    if (p != NULL) {
        conn_out_commit(c, compose_stat_pfx_u64(p, STAT_LINE_MAX, prefix,
                                                name, v));
    }
}

static void
stat_fmt(struct conn *c, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
stat_fmt(struct conn *c, const char *name, const char *fmt, ...)
{
    char val[STAT_LINE_MAX / 2];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(val, sizeof(val), fmt, ap);
    va_end(ap);
    stat_str(c, name, val);
}

static const char *
yesno(bool b)
{
    return b ? "yes" : "no";
}

/* ---- stats (general) -------------------------------------------------- */

static rel_time_t oldest_live;

void
admin_set_oldest(rel_time_t when)
{
    __atomic_store_n(&oldest_live, when, __ATOMIC_RELAXED);
}

static void
stats_process(struct conn *c)
{
    struct rusage ru;
    rel_time_t now = clock_now();

    getrusage(RUSAGE_SELF, &ru);
    stat_u64(c, "pid", (uint64_t)getpid());
    stat_u64(c, "uptime", clock_uptime());
    stat_u64(c, "time", (uint64_t)(clock_process_started() + now));
    stat_str(c, "version", MCPM_VERSION);
    stat_str(c, "libevent", event_get_version());
    stat_u64(c, "pointer_size", 8 * sizeof(void *));
    stat_fmt(c, "rusage_user", "%ld.%06ld", (long)ru.ru_utime.tv_sec,
             (long)ru.ru_utime.tv_usec);
    stat_fmt(c, "rusage_system", "%ld.%06ld", (long)ru.ru_stime.tv_sec,
             (long)ru.ru_stime.tv_usec);
}

#define SLOAD(f) __atomic_load_n(&stats.server.f, __ATOMIC_RELAXED)

static void
stats_buffers(struct conn *c)
{
    struct buffer_gauges g;

    worker_gauges(&g);
    stat_u64(c, "response_obj_oom", 0);
    stat_u64(c, "response_obj_count", g.resp_obj_count);
    stat_u64(c, "response_obj_bytes", g.resp_obj_bytes);
    stat_u64(c, "read_buf_count", g.read_buf_count);
    stat_u64(c, "read_buf_bytes", g.read_buf_bytes);
    stat_u64(c, "read_buf_bytes_free", 0);
    stat_u64(c, "read_buf_oom", 0);
}

static void
stats_conns_general(struct conn *c)
{
    stat_u64(c, "max_connections", (uint64_t)settings.maxconns);
    stat_u64(c, "curr_connections", SLOAD(curr_conns));
    stat_u64(c, "total_connections", SLOAD(total_conns));
    if (settings.maxconns_fast) {
        stat_u64(c, "rejected_connections", SLOAD(rejected_conns));
    }
    stat_u64(c, "connection_structures", SLOAD(conn_structures));
    stats_buffers(c);
    stat_u64(c, "reserved_fds", RESERVED_FDS);
}

static void
stats_commands(struct conn *c, const struct thread_stats *t,
               const struct slab_stats *tot)
{
    stat_u64(c, "cmd_get", t->cmd_get);
    stat_u64(c, "cmd_set", tot->cmd_set);
    stat_u64(c, "cmd_flush", t->cmd_flush);
    stat_u64(c, "cmd_touch", t->cmd_touch);
    stat_u64(c, "cmd_meta", t->cmd_meta);
    stat_u64(c, "get_hits", tot->get_hits);
    stat_u64(c, "get_misses", t->get_misses);
    stat_u64(c, "get_expired", t->get_expired);
    stat_u64(c, "get_flushed", t->get_flushed);
    stat_u64(c, "delete_misses", t->delete_misses);
    stat_u64(c, "delete_hits", tot->delete_hits);
    stat_u64(c, "incr_misses", t->incr_misses);
    stat_u64(c, "incr_hits", tot->incr_hits);
    stat_u64(c, "decr_misses", t->decr_misses);
    stat_u64(c, "decr_hits", tot->decr_hits);
    stat_u64(c, "cas_misses", t->cas_misses);
    stat_u64(c, "cas_hits", tot->cas_hits);
    stat_u64(c, "cas_badval", tot->cas_badval);
    stat_u64(c, "touch_hits", tot->touch_hits);
    stat_u64(c, "touch_misses", t->touch_misses);
    stat_u64(c, "store_too_large", t->store_too_large);
    stat_u64(c, "store_no_memory", t->store_no_memory);
    stat_u64(c, "auth_cmds", t->auth_cmds);
    stat_u64(c, "auth_errors", t->auth_errors);
    if (settings.idle_timeout > 0) {
        stat_u64(c, "idle_kicks", t->idle_kicks);
    }
    stat_u64(c, "bytes_read", t->bytes_read);
    stat_u64(c, "bytes_written", t->bytes_written);
}

/* With a memory file: what start-up read back from it. */
static void
stats_recovery(struct conn *c)
{
    struct cache_recovery r;

    if (!cache_recovery_stats(&r)) {
        return;
    }
#define RECOVERY_COUNT(name, v) stat_u64(c, "recovery_" #name, v);
#define RECOVERY_US(name, v) \
    stat_fmt(c, "recovery_" #name, "%.6f", (double)(v) / 1e6);
#define RECOVERY_ROW(name, kind, unit) RECOVERY_##unit(name, r.name)
    CACHE_RECOVERY_STATS(RECOVERY_ROW)
#undef RECOVERY_ROW
}

/* Whether memcached prints a storage line (metrics.h `shown`). */
static bool
shown(int group)
{
    switch (group) {
    case 1: return settings.cache.slab_reassign;
    case 2: return settings.cache.lru_crawler;
    case 3: return settings.lru_maintainer;
    default: return true;
    }
}

#define SHOWN_ALWAYS 0
#define SHOWN_REASSIGN 1
#define SHOWN_CRAWLER 2
#define SHOWN_MAINTAINER 3
#define STORAGE_ROW(name, kind, when) \
    if (shown(SHOWN_##when)) { stat_u64(c, #name, s->name); }

static void
stats_storage(struct conn *c, const struct cache_stats *s)
{
    CACHE_STATS_SERVER(STORAGE_ROW)
    /* No watch/log subsystem and no NAPI dispatch: these stay zero, but
     * are printed so that parsers expecting them find them. */
    stat_u64(c, "log_worker_dropped", 0);
    stat_u64(c, "log_worker_written", 0);
    stat_u64(c, "log_watcher_skipped", 0);
    stat_u64(c, "log_watcher_sent", 0);
    stat_u64(c, "log_watchers", 0);
    stat_u64(c, "unexpected_napi_ids", 0);
    stat_u64(c, "round_robin_fallback", 0);
}

static void
stats_items_totals(struct conn *c, const struct cache_stats *s)
{
    CACHE_STATS_ITEMS(STORAGE_ROW)
}

#define ADD_SLAB(name) tot->name += t->slab[i].name;

static void
slab_totals(const struct thread_stats *t, struct slab_stats *tot)
{
    memset(tot, 0, sizeof(*tot));
    for (unsigned i = 0; i < CACHE_MAX_CLASSES; i++) {
        SLAB_STATS(ADD_SLAB)
    }
}

static void
stats_general(struct conn *c)
{
    struct thread_stats *t = malloc(sizeof(*t));
    struct slab_stats tot;
    struct cache_stats s;

    if (t == NULL) {
        conn_out_rsp(c, RSP_SERVER_ERROR_OOM_STATS);
        return;
    }
    stats_sum(t);
    slab_totals(t, &tot);
    cache_stats(&s);
    stats_process(c);
    stats_conns_general(c);
    stats_commands(c, t, &tot);
    stat_u64(c, "limit_maxbytes", s.limit_maxbytes);
    stat_u64(c, "accepting_conns", 1);
    stat_u64(c, "listen_disabled_num", SLOAD(listen_disabled_num));
    stat_u64(c, "time_in_listen_disabled_us", 0);
    stat_u64(c, "threads", (uint64_t)settings.num_threads);
    stat_u64(c, "conn_yields", t->conn_yields);
    stat_u64(c, "prefetch_batches", t->prefetch_batches);
    stat_u64(c, "prefetch_keys", t->prefetch_keys);
    stats_storage(c, &s);
    stats_items_totals(c, &s);
    stats_recovery(c);
    conn_out_rsp(c, RSP_END);
    free(t);
}

/* ---- stats settings --------------------------------------------------- */

static void
stats_settings_net(struct conn *c)
{
    stat_u64(c, "maxbytes", settings.cache.mem_limit);
    stat_u64(c, "maxconns", (uint64_t)settings.maxconns);
    stat_u64(c, "tcpport", (uint64_t)settings.port);
    stat_u64(c, "udpport", (uint64_t)settings.udpport);
    stat_str(c, "inter", settings.inter ? settings.inter : "NULL");
    stat_u64(c, "verbosity", (uint64_t)settings.verbose);
    stat_u64(c, "oldest", __atomic_load_n(&oldest_live, __ATOMIC_RELAXED));
    stat_str(c, "evictions", settings.cache.evict ? "on" : "off");
    stat_str(c, "domain_socket",
             settings.socketpath ? settings.socketpath : "NULL");
    stat_fmt(c, "umask", "%o", settings.access);
    stat_str(c, "shutdown_command", yesno(settings.shutdown_command));
    stat_f2(c, "growth_factor", settings.cache.factor);
    stat_u64(c, "chunk_size", settings.cache.chunk_min);
    stat_u64(c, "num_threads", (uint64_t)settings.num_threads);
    stat_u64(c, "num_threads_per_udp", (uint64_t)settings.num_threads);
    stat_fmt(c, "stat_key_prefix", "%c", settings.prefix_delimiter);
    stat_str(c, "detail_enabled", yesno(settings.detail_enabled));
    stat_u64(c, "reqs_per_event", (uint64_t)settings.reqs_per_event);
    stat_str(c, "cas_enabled", yesno(settings.cache.use_cas));
    stat_u64(c, "tcp_backlog", (uint64_t)settings.backlog);
    stat_str(c, "binding_protocol", settings.binding_protocol);
    stat_str(c, "auth_enabled_sasl", "no");
    stat_str(c, "auth_enabled_ascii", "no");
    stat_u64(c, "item_size_max", settings.cache.item_size_max);
    stat_str(c, "maxconns_fast", yesno(settings.maxconns_fast));
    stat_u64(c, "hashpower_init", settings.hashpower_init);
}

static void
stats_settings_cache(struct conn *c)
{
    const struct cache_options *o = &settings.cache;

    stat_str(c, "slab_reassign", yesno(o->slab_reassign));
    stat_u64(c, "slab_automove", (uint64_t)o->slab_automove);
    stat_f2(c, "slab_automove_ratio", o->automove_ratio);
    stat_u64(c, "slab_automove_window", o->automove_window);
    stat_u64(c, "slab_chunk_max", o->slab_chunk_max);
    stat_str(c, "lru_crawler", yesno(o->lru_crawler));
    stat_u64(c, "lru_crawler_sleep", o->crawler_sleep_us);
    stat_u64(c, "lru_crawler_tocrawl", o->crawler_tocrawl);
    stat_u64(c, "tail_repair_time", o->tail_repair_time);
    stat_str(c, "flush_enabled", yesno(settings.flush_enabled));
    stat_str(c, "dump_enabled", yesno(settings.dump_enabled));
    stat_str(c, "hash_algorithm", settings.hash_algorithm);
    stat_str(c, "lru_maintainer_thread", yesno(settings.lru_maintainer));
    stat_str(c, "lru_segmented", yesno(o->lru_segmented));
    stat_u64(c, "hot_lru_pct", o->hot_lru_pct);
    stat_u64(c, "warm_lru_pct", o->warm_lru_pct);
    stat_f2(c, "hot_max_factor", o->hot_max_factor);
    stat_f2(c, "warm_max_factor", o->warm_max_factor);
    stat_str(c, "temp_lru", yesno(o->temp_lru));
    stat_u64(c, "temporary_ttl", o->temporary_ttl);
    stat_u64(c, "idle_timeout", settings.idle_timeout);
    stat_u64(c, "watcher_logbuf_size", settings.watcher_logbuf_size);
    stat_u64(c, "worker_logbuf_size", settings.worker_logbuf_size);
    stat_u64(c, "read_buf_mem_limit", settings.read_buf_mem_limit);
    stat_u64(c, "prefetch_batch", settings.prefetch_batch);
    stat_str(c, "track_sizes", yesno(o->track_sizes));
    stat_str(c, "inline_ascii_response", "no");
    stat_fmt(c, "slab_automove_freeratio", "%.3f", o->automove_freeratio);
    stat_str(c, "num_napi_ids", "(null)");
    stat_str(c, "memory_file",
             settings.memory_file ? settings.memory_file : "(null)");
    stat_str(c, "memory_kind", settings.cache.memory_kind ?
             settings.cache.memory_kind : "(null)");
    stat_u64(c, "client_flags_size", 4);
    stat_str(c, "tier_policy", settings.tier_policy);
    stat_u64(c, "memory_file_size", settings.cache.memory_file_size);
}

/* ---- stats slabs / items / sizes / conns ------------------------------ */

static void
stats_slabs(struct conn *c)
{
    struct thread_stats *t = malloc(sizeof(*t));
    unsigned active = 0;
    struct cache_stats s;
    char id[16];

    if (t == NULL) {
        conn_out_rsp(c, RSP_SERVER_ERROR_OOM_STATS);
        return;
    }
    stats_sum(t);
    for (unsigned i = 1; i <= cache_nclasses(); i++) {
        struct cache_slab_stats ss;
        const struct slab_stats *ts = &t->slab[i];

        if (!cache_slab_stats(i, &ss)) {
            continue;
        }
        active++;
        snprintf(id, sizeof(id), "%u", i);
#define SLAB_ROW(name, kind, x) stat_pfx(c, id, #name, ss.name);
        CACHE_SLAB_STATS(SLAB_ROW)
#undef SLAB_ROW
#define THREAD_ROW(name) stat_pfx(c, id, #name, ts->name);
        THREAD_ROW(get_hits) THREAD_ROW(cmd_set) THREAD_ROW(delete_hits)
        THREAD_ROW(incr_hits) THREAD_ROW(decr_hits) THREAD_ROW(cas_hits)
        THREAD_ROW(cas_badval) THREAD_ROW(touch_hits)
#undef THREAD_ROW
    }
    cache_stats(&s);
    stat_u64(c, "active_slabs", active);
    stat_u64(c, "total_malloced", s.total_malloced);
    conn_out_rsp(c, RSP_END);
    free(t);
}

static void
stats_items(struct conn *c)
{
    struct thread_stats *t = malloc(sizeof(*t));
    char id[32];

    if (t == NULL) {
        conn_out_rsp(c, RSP_SERVER_ERROR_OOM_STATS);
        return;
    }
    stats_sum(t);
    for (unsigned i = 1; i <= cache_nclasses(); i++) {
        struct cache_item_stats is;
        const struct slab_stats *ts = &t->slab[i];

        if (!cache_item_stats(i, &is)) {
            continue;
        }
        snprintf(id, sizeof(id), "items:%u", i);
#define ITEM_ROW(name, kind, total) \
        if (strcmp(#name, "number_temp") != 0 || settings.cache.temp_lru) { \
            stat_pfx(c, id, #name, is.name); \
        }
        CACHE_ITEM_STATS(ITEM_ROW)
#undef ITEM_ROW
        stat_pfx(c, id, "hits_to_hot", ts->hits_to_hot);
        stat_pfx(c, id, "hits_to_warm", ts->hits_to_warm);
        stat_pfx(c, id, "hits_to_cold", ts->hits_to_cold);
        stat_pfx(c, id, "hits_to_temp", ts->hits_to_temp);
    }
    conn_out_rsp(c, RSP_END);
    free(t);
}

static void
size_row(uint64_t size, uint64_t count, void *ctx)
{
    char name[32];

    snprintf(name, sizeof(name), "%llu", (unsigned long long)size);
    stat_u64(ctx, name, count);
}

static void
stats_sizes(struct conn *c)
{
    if (!cache_sizes(size_row, c)) {
        stat_str(c, "sizes_status", "disabled");
    }
    conn_out_rsp(c, RSP_END);
}

/* Listening sockets, fixed after start-up. */
struct listener {
    struct listener *next;
    int              fd;
    char             addr[64];
};
static struct listener *listeners;

void
admin_add_listener(int fd, const char *addr)
{
    struct listener *l = calloc(1, sizeof(*l));

    if (l == NULL) {
        return;
    }
    l->fd = fd;
    snprintf(l->addr, sizeof(l->addr), "%s", addr);
    l->next = listeners;
    listeners = l;
}

static void
conn_rows(struct conn *other, void *ctx)
{
    struct conn *c = ctx;
    rel_time_t last = __atomic_load_n(&other->last_cmd, __ATOMIC_RELAXED);
    char name[48];

    snprintf(name, sizeof(name), "%d:addr", other->fd);
    stat_str(c, name, other->addr);
    snprintf(name, sizeof(name), "%d:listen_addr", other->fd);
    stat_str(c, name, other->listen_addr);
    snprintf(name, sizeof(name), "%d:state", other->fd);
    stat_str(c, name, conn_state_name(other));
    snprintf(name, sizeof(name), "%d:secs_since_last_cmd", other->fd);
    stat_u64(c, name, clock_now() - last);
}

static void
stats_conns(struct conn *c)
{
    char name[48];

    for (struct listener *l = listeners; l != NULL; l = l->next) {
        snprintf(name, sizeof(name), "%d:addr", l->fd);
        stat_str(c, name, l->addr);
        snprintf(name, sizeof(name), "%d:state", l->fd);
        stat_str(c, name, "conn_listening");
        snprintf(name, sizeof(name), "%d:secs_since_last_cmd", l->fd);
        stat_u64(c, name, 0);
    }
    worker_each_conn(conn_rows, c);
    conn_out_rsp(c, RSP_END);
}

/* ---- stats detail ----------------------------------------------------- */

#define DETAIL_BUCKETS 256
#define DETAIL_MAX     4096     /* prefixes tracked at most */

struct prefix {
    struct prefix *next;
    uint64_t       gets, hits, sets, dels;
    size_t         len;
    char           name[];
};

static struct prefix *detail[DETAIL_BUCKETS];
static unsigned detail_count;
static pthread_mutex_t detail_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned
detail_bucket(const char *p, size_t n)
{
    unsigned h = 5381;

    while (n-- > 0) {
        h = h * 33 + (unsigned char)*p++;
    }
    return h % DETAIL_BUCKETS;
}

/* The prefix's record, created on first sight; detail_lock held. */
static struct prefix *
detail_find(const char *p, size_t n)
{
    unsigned b = detail_bucket(p, n);
    struct prefix *x;

    for (x = detail[b]; x != NULL; x = x->next) {
        if (x->len == n && memcmp(x->name, p, n) == 0) {
            return x;
        }
    }
    if (detail_count >= DETAIL_MAX || (x = calloc(1, sizeof(*x) + n + 1))
        == NULL) {
        return NULL;
    }
    memcpy(x->name, p, n);
    x->len = n;
    x->next = detail[b];
    detail[b] = x;
    detail_count++;
    return x;
}

void
admin_detail_record(const char *key, size_t nkey, enum detail_op op,
                    bool hit)
{
    const char *d = memchr(key, settings.prefix_delimiter, nkey);
    struct prefix *x;

    if (d == NULL) {
        return;     /* no prefix, not counted (as memcached) */
    }
    pthread_mutex_lock(&detail_lock);
    if ((x = detail_find(key, (size_t)(d - key))) != NULL) {
        switch (op) {
        case DETAIL_GET: x->gets++; x->hits += hit; break;
        case DETAIL_SET: x->sets++; break;
        case DETAIL_DELETE: x->dels++; break;
        }
    }
    pthread_mutex_unlock(&detail_lock);
}

static void
detail_clear(void)
{
    pthread_mutex_lock(&detail_lock);
    for (unsigned b = 0; b < DETAIL_BUCKETS; b++) {
        while (detail[b] != NULL) {
            struct prefix *x = detail[b];
            detail[b] = x->next;
            free(x);
        }
    }
    detail_count = 0;
    pthread_mutex_unlock(&detail_lock);
}

static void
detail_dump(struct conn *c)
{
    char line[STAT_LINE_MAX];

    pthread_mutex_lock(&detail_lock);
    for (unsigned b = 0; b < DETAIL_BUCKETS; b++) {
        for (struct prefix *x = detail[b]; x != NULL; x = x->next) {
            int n = snprintf(line, sizeof(line),
                             "PREFIX %.*s get %llu hit %llu set %llu "
                             "del %llu\r\n", (int)x->len, x->name,
                             (unsigned long long)x->gets,
                             (unsigned long long)x->hits,
                             (unsigned long long)x->sets,
                             (unsigned long long)x->dels);
            conn_out(c, line, (size_t)n);
        }
    }
    pthread_mutex_unlock(&detail_lock);
    conn_out_rsp(c, RSP_END);
}

static enum process_result
stats_detail(struct conn *c, struct request *req)
{
    static const char usage[] = "CLIENT_ERROR usage: stats detail on|off|dump"
                                "\r\n";
    const struct token *arg = &req->tokens[2];

    if (req->ntokens != 3) {
        conn_out(c, usage, sizeof(usage) - 1);
    } else if (token_eq(arg, "on")) {
        settings.detail_enabled = true;
        conn_out_rsp(c, RSP_OK);
    } else if (token_eq(arg, "off")) {
        settings.detail_enabled = false;
        conn_out_rsp(c, RSP_OK);
    } else if (token_eq(arg, "dump")) {
        if (!settings.dump_enabled) {
            conn_out_rsp(c, RSP_ERROR);
        } else {
            detail_dump(c);
        }
    } else {
        conn_out(c, usage, sizeof(usage) - 1);
    }
    return PROCESS_OK;
}

/* ---- stats tiers ------------------------------------------------------ */

static void
stat_tier(struct conn *c, const char *tier, const char *name, uint64_t v)
{
    char key[64];

    snprintf(key, sizeof(key), "%s:%s", tier, name);
    stat_u64(c, key, v);
}

/* Per tier: its memory, items, hits (reads that found the item there:
 * get, gets, gat, mg), evictions, the items it received from the other
 * tier (promotions into DRAM, demotions into the file) and flushes to the
 * medium. */
static void
stats_tiers(struct conn *c)
{
    struct cache_tier_stats ts[4];
    struct thread_stats *t = calloc(1, sizeof(*t));
    unsigned n = cache_tier_stats(ts, 4);

    if (t == NULL) {
        conn_out_rsp(c, RSP_SERVER_ERROR_OOM);
        return;
    }
    stats_sum(t);
    for (unsigned i = 0; i < n; i++) {
        ts[i].hits = ts[i].durable ? t->hits_pmem : t->hits_dram;
#define TIER_ROW(f, kind, x) stat_tier(c, ts[i].name, #f, ts[i].f);
        CACHE_TIER_STATS(TIER_ROW)
#undef TIER_ROW
    }
    free(t);
    conn_out_rsp(c, RSP_END);
}

/* ---- stats dispatcher ------------------------------------------------- */

enum process_result
admin_stats(struct conn *c, struct request *req)
{
    const struct token *sub = &req->tokens[1];

    if (req->ntokens == 1) {
        stats_general(c);
    } else if (token_eq(sub, "settings")) {
        stats_settings_net(c);
        stats_settings_cache(c);
        conn_out_rsp(c, RSP_END);
    } else if (token_eq(sub, "items")) {
        stats_items(c);
    } else if (token_eq(sub, "slabs")) {
        stats_slabs(c);
    } else if (token_eq(sub, "sizes")) {
        stats_sizes(c);
    } else if (token_eq(sub, "tiers")) {
        stats_tiers(c);
    } else if (token_eq(sub, "conns")) {
        stats_conns(c);
    } else if (token_eq(sub, "reset")) {
        stats_reset();
        cache_stats_reset();
        conn_out_rsp(c, RSP_RESET);
    } else if (token_eq(sub, "detail")) {
        return stats_detail(c, req);
    } else {
        conn_out_rsp(c, RSP_ERROR);
    }
    return PROCESS_OK;
}

/* ---- cache_memlimit, slabs, lru --------------------------------------- */

enum process_result
admin_memlimit(struct conn *c, struct request *req)
{
    if (req->num < 8) {
        return reply(c, RSP_MEMLIMIT_TOO_SMALL);
    }
    if (req->num > 1000000000) {
        return reply(c, RSP_MEMLIMIT_NOT_MB);
    }
    if (cache_set_memlimit((size_t)req->num * MB) != 0) {
        return reply(c, RSP_MEMLIMIT_FAILED);
    }
    settings.cache.mem_limit = (size_t)req->num * MB;
    return reply(c, RSP_OK);
}

static enum rsp_type
reassign_reply(enum cache_status st)
{
    switch (st) {
    case CACHE_OK: return RSP_OK;
    case CACHE_BUSY: return RSP_REASSIGN_BUSY;
    case CACHE_BADCLASS: return RSP_REASSIGN_BADCLASS;
    case CACHE_NOSPARE: return RSP_REASSIGN_NOSPARE;
    case CACHE_SAME: return RSP_REASSIGN_SAME;
    default: return RSP_CLIENT_ERROR_REASSIGN_DISABLED;
    }
}

static enum process_result
slabs_automove(struct conn *c, struct request *req)
{
    struct cache_options *o = &settings.cache;
    const struct token *a = &req->tokens[2];
    int32_t level;
    double f;
    char tmp[32];

    if (req->ntokens == 3) {
        if (!token_i32(a, &level) || level < 0 || level > 2) {
            return reply(c, RSP_ERROR);
        }
        o->slab_automove = level;
        return reply(c, RSP_OK);
    }
    if (req->ntokens != 4 || req->tokens[3].len >= sizeof(tmp)) {
        return reply(c, RSP_ERROR);
    }
    memcpy(tmp, req->tokens[3].p, req->tokens[3].len);
    tmp[req->tokens[3].len] = '\0';
    f = strtod(tmp, NULL);
    if (token_eq(a, "ratio") && f > 0 && f <= 1) {
        o->automove_ratio = f;
    } else if (token_eq(a, "freeratio") && f >= 0 && f <= 1) {
        o->automove_freeratio = f;
    } else if (token_eq(a, "window") && f >= 3 && f <= 1800) {
        o->automove_window = (unsigned)f;
    } else {
        return reply(c, RSP_ERROR);
    }
    return reply(c, RSP_OK);
}

enum process_result
admin_slabs(struct conn *c, struct request *req)
{
    int32_t src, dst;

    if (req->ntokens == 4 && token_eq(&req->tokens[1], "reassign")) {
        if (!settings.cache.slab_reassign) {
            return reply(c, RSP_CLIENT_ERROR_REASSIGN_DISABLED);
        }
        if (!token_i32(&req->tokens[2], &src) ||
            !token_i32(&req->tokens[3], &dst)) {
            return reply(c, RSP_CLIENT_ERROR_FORMAT);
        }
        return reply(c, reassign_reply(cache_slabs_reassign(src, dst)));
    }
    if (req->ntokens >= 3 && token_eq(&req->tokens[1], "automove")) {
        return slabs_automove(c, req);
    }
    return reply(c, RSP_ERROR);
}

/* Copy a token into a C string for strtod; false when it does not fit. */
static bool
token_double(const struct token *t, double *out)
{
    char tmp[32], *end;

    if (t->len == 0 || t->len >= sizeof(tmp)) {
        return false;
    }
    memcpy(tmp, t->p, t->len);
    tmp[t->len] = '\0';
    *out = strtod(tmp, &end);
    return *end == '\0';
}

static enum process_result
lru_tune(struct conn *c, struct request *req)
{
    struct cache_options *o = &settings.cache;
    uint32_t hot, warm;
    double hot_factor, warm_factor;

    if (!token_u32(&req->tokens[2], &hot) ||
        !token_u32(&req->tokens[3], &warm) ||
        !token_double(&req->tokens[4], &hot_factor) ||
        !token_double(&req->tokens[5], &warm_factor)) {
        return reply(c, RSP_ERROR);
    }
    if (hot + (uint64_t)warm > 80) {
        return reply(c, RSP_LRU_PCTS);
    }
    if (hot_factor <= 0 || warm_factor <= 0) {
        return reply(c, RSP_LRU_FACTORS);
    }
    o->hot_lru_pct = hot;
    o->warm_lru_pct = warm;
    o->hot_max_factor = hot_factor;
    o->warm_max_factor = warm_factor;
    return reply(c, RSP_OK);
}

enum process_result
admin_lru(struct conn *c, struct request *req)
{
    const struct token *sub = &req->tokens[1];
    struct cache_options *o = &settings.cache;
    bool maint = settings.lru_maintainer;
    int64_t ttl;

    if (req->ntokens >= 6 && token_eq(sub, "tune")) {
        return lru_tune(c, req);
    }
    if (req->ntokens >= 3 && token_eq(sub, "mode") && maint) {
        if (token_eq(&req->tokens[2], "flat")) {
            o->lru_segmented = false;
        } else if (token_eq(&req->tokens[2], "segmented")) {
            o->lru_segmented = true;
        } else {
            return reply(c, RSP_ERROR);
        }
        return reply(c, RSP_OK);
    }
    if (req->ntokens >= 3 && token_eq(sub, "temp_ttl") && maint) {
        if (!token_i64(&req->tokens[2], &ttl)) {
            return reply(c, RSP_ERROR);
        }
        o->temp_lru = ttl >= 0;
        if (ttl >= 0) {
            o->temporary_ttl = (rel_time_t)ttl;
        }
        return reply(c, RSP_OK);
    }
    return reply(c, RSP_ERROR);
}

/* ---- lru_crawler ------------------------------------------------------ */

/* "all" or "1,2,3" into classes[]; false for a bad list. */
static bool
crawl_classes(const struct token *t, bool classes[CACHE_MAX_CLASSES])
{
    const char *p = t->p, *end = t->p + t->len;

    memset(classes, 0, CACHE_MAX_CLASSES * sizeof(bool));
    if (token_eq(t, "all")) {
        for (unsigned i = 1; i <= cache_nclasses(); i++) {
            classes[i] = true;
        }
        return true;
    }
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        struct token id = { p, (size_t)((comma ? comma : end) - p) };
        uint32_t n;

        if (!token_u32(&id, &n) || n == 0 || n >= CACHE_MAX_CLASSES) {
            return false;
        }
        classes[n] = true;
        p = comma ? comma + 1 : end;
    }
    return true;
}

static enum rsp_type
crawl_reply(enum cache_status st)
{
    switch (st) {
    case CACHE_OK: return RSP_OK;
    case CACHE_BUSY: return RSP_CRAWLER_BUSY;
    case CACHE_BADCLASS: return RSP_CRAWLER_BADCLASS;
    case CACHE_NOTSTARTED: return RSP_CRAWLER_NOTSTARTED;
    case CACHE_DISABLED: return RSP_CLIENT_ERROR_CRAWLER_DISABLED;
    default: return RSP_CRAWLER_ERROR;
    }
}

static int
metadump_line(const char *line, size_t len, void *ctx)
{
    return conn_out(ctx, line, len);
}

static enum process_result
crawler_dump(struct conn *c, struct request *req)
{
    bool classes[CACHE_MAX_CLASSES];
    bool all = token_eq(&req->tokens[2], "all") ||
               token_eq(&req->tokens[2], "hash");

    if (!settings.cache.lru_crawler) {
        return reply(c, RSP_CLIENT_ERROR_CRAWLER_DISABLED);
    }
    if (!settings.dump_enabled) {
        return reply(c, RSP_DUMP_DISABLED);
    }
    if (c->out_bytes > 0) {
        /* The dump must be the only reply in flight, as in memcached. */
        return reply(c, RSP_DUMP_PIPELINED);
    }
    if (!all && !crawl_classes(&req->tokens[2], classes)) {
        return reply(c, RSP_CRAWLER_BADCLASS);
    }
    cache_metadump(all ? NULL : classes, metadump_line, c);
    return reply(c, RSP_END);
}

static enum process_result
crawler_number(struct conn *c, struct request *req, bool sleep)
{
    uint32_t v;

    if (!token_u32(&req->tokens[2], &v)) {
        return reply(c, RSP_CLIENT_ERROR_FORMAT);
    }
    if (sleep) {
        if (v > 1000000) {
            return reply(c, RSP_CLIENT_ERROR_CRAWLER_SLEEP);
        }
        settings.cache.crawler_sleep_us = v;
    } else {
        settings.cache.crawler_tocrawl = v;
    }
    return reply(c, RSP_OK);
}

enum process_result
admin_lru_crawler(struct conn *c, struct request *req)
{
    const struct token *sub = &req->tokens[1];
    bool classes[CACHE_MAX_CLASSES];

    if (req->ntokens == 3 && token_eq(sub, "crawl")) {
        if (!settings.cache.lru_crawler) {
            return reply(c, RSP_CLIENT_ERROR_CRAWLER_DISABLED);
        }
        if (!crawl_classes(&req->tokens[2], classes)) {
            return reply(c, RSP_CRAWLER_BADCLASS);
        }
        return reply(c, crawl_reply(cache_crawl(classes)));
    }
    if (req->ntokens == 3 && token_eq(sub, "metadump")) {
        return crawler_dump(c, req);
    }
    if (req->ntokens == 3 && token_eq(sub, "sleep")) {
        return crawler_number(c, req, true);
    }
    if (req->ntokens == 3 && token_eq(sub, "tocrawl")) {
        return crawler_number(c, req, false);
    }
    if (req->ntokens == 2 && (token_eq(sub, "enable") ||
                              token_eq(sub, "disable"))) {
        bool on = token_eq(sub, "enable");

        if (cache_crawler_enable(on) != 0) {
            static const char e[] = "ERROR failed to start lru crawler "
                                    "thread\r\n";
            static const char d[] = "ERROR failed to stop lru crawler "
                                    "thread\r\n";
            conn_out(c, on ? e : d, on ? sizeof(e) - 1 : sizeof(d) - 1);
            return PROCESS_OK;
        }
        settings.cache.lru_crawler = on;
        return reply(c, RSP_OK);
    }
    return reply(c, RSP_ERROR);
}

void
admin_shutdown(void)
{
    detail_clear();
    while (listeners != NULL) {
        struct listener *l = listeners;
        listeners = l->next;
        free(l);
    }
}
