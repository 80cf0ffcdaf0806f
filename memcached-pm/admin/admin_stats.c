/*
 * admin_stats.c: "stats" and its sub-commands, with memcached's names,
 * order and formats (shared/reference/memcached.md §4).
 *
 * Every reply is a walk over a table: STATS_GENERAL and CLASS_STATS
 * (stats.h) for the daemon's lines, storage/base/metrics.h's tables for
 * storage's.  A sum or a snapshot is taken once per reply; no lock is
 * held while lines are queued.
 */
#include "config.h"

#include "memcached-pm/admin/admin_stats.h"

#include <event2/event.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "memcached-pm/admin/detail.h"
#include "memcached-pm/base/settings.h"
#include "memcached-pm/base/stats.h"
#include "memcached-pm/conn/conn_out.h"
#include "memcached-pm/migrate/warm.h"
#include "memcached-pm/security/tls.h"
#include "memcached-pm/watch/logger.h"
#include "proto/binary.h"
#include "proto/compose.h"
#include "proto/response.h"
#include "proto/token.h"
#include "storage/base/hash.h"
#include "storage/cache/cache_stats.h"

#define STAT_LINE_MAX 1200

/* ---- STAT line writers ------------------------------------------------ */

/*
 * Every line goes out through stat_out(): "STAT <name> <value>\r\n" on a
 * text connection, one STAT packet (key the name, value the value) on a
 * binary one; stats_end() closes the reply ("END\r\n", or an empty
 * packet).
 */
static void
stat_out(struct conn *c, const char *name, const char *val)
{
    char *p;

    if (c->proto == CONN_BINARY) {
        conn_out_bin(c, BIN_SUCCESS, 0, NULL, 0, name,
                     (uint16_t)strlen(name), val, (uint32_t)strlen(val));
        return;
    }
    p = conn_out_reserve(c, STAT_LINE_MAX);
    if (p != NULL) {
        conn_out_commit(c, compose_stat_str(p, STAT_LINE_MAX, name, val));
    }
}

static void
stats_end(struct conn *c)
{
    if (c->proto == CONN_BINARY) {
        conn_out_bin(c, BIN_SUCCESS, 0, NULL, 0, NULL, 0, NULL, 0);
    } else {
        /* not logged at -vv: memcached writes stats as a block */
        conn_out(c, rsp_str[RSP_END], rsp_len[RSP_END]);
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
    stat_out(c, name, val);
}

static void
stat_str(struct conn *c, const char *name, const char *val)
{
    stat_out(c, name, val);
}

static void
stat_u64(struct conn *c, const char *name, uint64_t v)
{
    stat_fmt(c, name, "%" PRIu64, v);
}

static void
stat_f2(struct conn *c, const char *name, double v)
{
    stat_fmt(c, name, "%.2f", v);
}

/* "<prefix>:<name>", the per-class and per-tier lines. */
static void
stat_pfx(struct conn *c, const char *prefix, const char *name, uint64_t v)
{
    char key[STAT_LINE_MAX / 2];

    snprintf(key, sizeof(key), "%s:%s", prefix, name);
    stat_u64(c, key, v);
}

/* The workers' counters summed (the caller frees them); NULL when memory
 * runs out, memcached's reply to that already queued. */
static struct thread_stats *
sums(struct conn *c)
{
    struct thread_stats *t = malloc(sizeof(*t));

    if (t == NULL) {
        if (c->proto == CONN_BINARY) {
            conn_out_bin(c, BIN_ENOMEM, 0, NULL, 0, NULL, 0, "Out of memory",
                         13);
        } else {
            conn_out_rsp(c, RSP_SERVER_ERROR_OOM_STATS);
        }
        return NULL;
    }
    stats_sum(t);
    return t;
}

/* ---- stats (general) -------------------------------------------------- */

/* Whether memcached prints a line (stats.h, metrics.h `shown`). */
enum shown {
    SHOWN_ALWAYS, SHOWN_NEVER, SHOWN_IDLE, SHOWN_FAST, SHOWN_SSL,
    SHOWN_SSL_CACHE, SHOWN_RING, SHOWN_REASSIGN, SHOWN_CRAWLER,
    SHOWN_MAINTAINER, SHOWN_HANDOVER
};

static bool
shown(enum shown when)
{
    switch (when) {
    case SHOWN_NEVER: return false;
    case SHOWN_IDLE: return settings.idle_timeout > 0;
    case SHOWN_FAST: return settings.maxconns_fast;
    case SHOWN_SSL: return settings.ssl_enabled;
    case SHOWN_SSL_CACHE:
        return settings.ssl_enabled && settings.ssl_session_cache;
    case SHOWN_RING: return settings.event_engine == ENGINE_IO_URING;
    case SHOWN_REASSIGN: return settings.cache.slab_reassign;
    case SHOWN_CRAWLER: return settings.cache.lru_crawler;
    case SHOWN_MAINTAINER: return settings.lru_maintainer;
    case SHOWN_HANDOVER:
        return settings.takeover != NULL || settings.fd_store;
    default: return true;
    }
}

/* What one "stats" reply reads, gathered before the first line. */
struct general {
    struct thread_stats  *t;        /* the workers' sums */
    struct logger_stats   log;      /* watch's */
    struct slab_stats     tot;      /* their class counters, added up */
    struct cache_stats    s;        /* storage's figures */
    struct buffer_gauges  g;        /* connection buffers */
    struct rusage         ru;
};

/* The PROC lines. */
static void
proc_line(struct conn *c, const char *name, const struct general *gen)
{
    rel_time_t now = clock_now();

    if (strcmp(name, "pid") == 0) {
        stat_u64(c, name, (uint64_t)getpid());
    } else if (strcmp(name, "uptime") == 0) {
        stat_u64(c, name, clock_uptime());
    } else if (strcmp(name, "time") == 0) {
        stat_u64(c, name, (uint64_t)(clock_process_started() + now));
    } else if (strcmp(name, "version") == 0) {
        stat_str(c, name, MCPM_VERSION);
    } else if (strcmp(name, "libevent") == 0) {
        stat_str(c, name, event_get_version());
    } else if (strcmp(name, "pointer_size") == 0) {
        stat_u64(c, name, 8 * sizeof(void *));
    } else if (strcmp(name, "rusage_user") == 0) {
        stat_fmt(c, name, "%ld.%06ld", (long)gen->ru.ru_utime.tv_sec,
                 (long)gen->ru.ru_utime.tv_usec);
    } else if (strcmp(name, "rusage_system") == 0) {
        stat_fmt(c, name, "%ld.%06ld", (long)gen->ru.ru_stime.tv_sec,
                 (long)gen->ru.ru_stime.tv_usec);
    } else if (strcmp(name, "max_connections") == 0) {
        stat_u64(c, name, (uint64_t)settings.maxconns);
    } else if (strcmp(name, "reserved_fds") == 0) {
        stat_u64(c, name, RESERVED_FDS);
    } else if (strcmp(name, "threads") == 0) {
        stat_u64(c, name, (uint64_t)settings.num_threads);
#ifdef ENABLE_TLS
    } else if (strcmp(name, "time_since_server_cert_refresh") == 0) {
        stat_u64(c, name, tls_since_refresh());
#endif
    }
}

#define LINE_THREAD(name) stat_u64(c, #name, gen->t->name);
#define LINE_CLASS(name) stat_u64(c, #name, gen->tot.name);
#define LINE_SERVER(name) stat_u64(c, #name, SERVER_STAT_LOAD(name));
#define LINE_BUFFER(name) stat_u64(c, #name, gen->g.name);
#define LINE_PROC(name) proc_line(c, #name, gen);
#define LINE_ZERO(name) stat_u64(c, #name, 0);
#define LINE_LOG(name) stat_u64(c, #name, gen->log.name);
#define LINE_COUNTER(name) stat_u64(c, #name, gen->s.name);
#define LINE_GAUGE(name) stat_u64(c, #name, gen->s.name);
#define LINE_STATUS(name) stat_fmt(c, #name, "%s", "none");
#define GENERAL_LINE(name, src, when)                                       \
    if (shown(SHOWN_##when)) {                                              \
        LINE_##src(name)                                                    \
    }

static void
general_lines(struct conn *c, const struct general *gen)
{
    STATS_GENERAL(GENERAL_LINE)
}

/* With a memory file: what start-up read back from it. */
static void
recovery_lines(struct conn *c)
{
    struct cache_recovery r;

    if (!cache_recovery_stats(&r)) {
        return;
    }
#define RECOVERY_COUNT(name, v) stat_u64(c, "recovery_" #name, v);
#define RECOVERY_US(name, v) \
    stat_fmt(c, "recovery_" #name, "%.6f", (double)(v) / 1e6);
#define RECOVERY_LINE(name, kind, unit) RECOVERY_##unit(name, r.name)
    CACHE_RECOVERY_STATS(RECOVERY_LINE)
}

/* With warm_from: how the copy of the memcached node goes. */
static void
warm_lines(struct conn *c)
{
    struct warm_stats s;

    if (!warm_stats(&s)) {
        return;
    }
    stat_str(c, "warm_state", s.state);
    stat_u64(c, "warm_source_items", s.source_items);
    stat_u64(c, "warm_copied", s.copied);
    stat_u64(c, "warm_deleted", s.deleted);
    stat_u64(c, "warm_events", s.events);
    stat_u64(c, "warm_skipped", s.skipped);
    stat_u64(c, "warm_passes", s.passes);
    stat_u64(c, "warm_requests", s.requests);
}

static void
stats_general(struct conn *c)
{
    struct general gen;

    if ((gen.t = sums(c)) == NULL) {
        return;
    }
    stats_class_total(gen.t, &gen.tot);
    cache_stats(&gen.s);
    conn_gauges(&gen.g);
    logger_stats(&gen.log);
    getrusage(RUSAGE_SELF, &gen.ru);
    general_lines(c, &gen);
    recovery_lines(c);
    warm_lines(c);
    stats_end(c);
    free(gen.t);
}

/* ---- stats settings ------------------------------------------------- */

/* Walk settings.h's table: each row's value, shown its way. */
#define SHOW_I(name, v) stat_fmt(c, #name, "%lld", (long long)(v));
#define SHOW_U(name, v) stat_u64(c, #name, (uint64_t)(v));
#define SHOW_SZ(name, v) stat_u64(c, #name, (uint64_t)(v));
#define SHOW_YESNO(name, v) stat_str(c, #name, (v) ? "yes" : "no");
#define SHOW_ONOFF(name, v) stat_str(c, #name, (v) ? "on" : "off");
#define SHOW_F2(name, v) stat_f2(c, #name, (v));
#define SHOW_F3(name, v) stat_fmt(c, #name, "%.3f", (v));
#define SHOW_OCT(name, v) stat_fmt(c, #name, "%o", (unsigned)(v));
#define SHOW_CHAR(name, v) stat_fmt(c, #name, "%c", (v));
#define SHOW_STR(name, v) stat_str(c, #name, (v));
#define SHOW_STR_NULL(name, v) stat_str(c, #name, (v) ? (v) : "NULL");
#define SHOW_STR_PNULL(name, v) stat_str(c, #name, (v) ? (v) : "(null)");
#define SHOW_HIDE(name, v)
#define SETTING_LINE(stat, show, target, flag, lname, oname, parse, help)  \
    SHOW_##show(stat, SETTINGS_VAL_##target)

static void
stats_settings(struct conn *c)
{
    SETTINGS_OPTIONS(SETTING_LINE)
    stats_end(c);
}

/* ---- stats slabs / items / sizes / conns ------------------------------ */

/* One class of "stats slabs": false when it has no pages. */
static bool
slab_lines(struct conn *c, unsigned id, const struct slab_stats *ts)
{
    struct cache_slab_stats ss;
    char pfx[16];

    if (!cache_slab_stats(id, &ss)) {
        return false;
    }
    snprintf(pfx, sizeof(pfx), "%u", id);
#define SLAB_LINE(name, kind, x) stat_pfx(c, pfx, #name, ss.name);
    CACHE_SLAB_STATS(SLAB_LINE)
#undef SLAB_LINE
#define SLAB_SLABS(name) stat_pfx(c, pfx, #name, ts->name);
#define SLAB_ITEMS(name)
#define SLAB_CLASS_LINE(name, reply) SLAB_##reply(name)
    CLASS_STATS(SLAB_CLASS_LINE)
#undef SLAB_CLASS_LINE
    return true;
}

/* One class of "stats items": false when it has no items. */
/* memcached prints the segmented LRU's rows of "stats items" only with
 * the LRU maintainer, and number_temp only with temp_lru too. */
static bool
item_row_shown(const char *name)
{
    static const char *const segmented[] = {
        "number_hot", "number_warm", "number_cold", "number_temp",
        "age_hot", "age_warm", "evicted_active", "moves_to_cold",
        "moves_to_warm", "moves_within_lru", "direct_reclaims",
    };

    if (strcmp(name, "number_temp") == 0 && !settings.cache.temp_lru) {
        return false;
    }
    for (size_t i = 0; i < sizeof(segmented) / sizeof(*segmented); i++) {
        if (strcmp(name, segmented[i]) == 0) {
            return settings.lru_maintainer;
        }
    }
    return true;
}

static bool
item_lines(struct conn *c, unsigned id, const struct slab_stats *ts)
{
    struct cache_item_stats is;
    char pfx[32];

    if (!cache_item_stats(id, &is)) {
        return false;
    }
    snprintf(pfx, sizeof(pfx), "items:%u", id);
#define ITEM_LINE(name, kind, total)                                        \
    if (item_row_shown(#name)) {                                            \
        stat_pfx(c, pfx, #name, is.name);                                   \
    }
    CACHE_ITEM_STATS(ITEM_LINE)
#undef ITEM_LINE
#define ITEMS_SLABS(name)
#define ITEMS_ITEMS(name)                                                   \
    if (settings.lru_maintainer) {                                          \
        stat_pfx(c, pfx, #name, ts->name);                                  \
    }
#define ITEMS_CLASS_LINE(name, reply) ITEMS_##reply(name)
    CLASS_STATS(ITEMS_CLASS_LINE)
#undef ITEMS_CLASS_LINE
    return true;
}

/* Every class through fn, with its per-worker counters; how many it
 * showed, or -1 when the sums could not be had (replied). */
static int
per_class(struct conn *c, bool (*fn)(struct conn *c, unsigned id,
                                     const struct slab_stats *ts))
{
    struct thread_stats *t = sums(c);
    int shown_classes = 0;

    if (t == NULL) {
        return -1;
    }
    for (unsigned i = 1; i <= cache_nclasses(); i++) {
        shown_classes += fn(c, i, &t->slab[i]);
    }
    free(t);
    return shown_classes;
}

static void
stats_slabs(struct conn *c)
{
    int active = per_class(c, slab_lines);
    struct cache_stats s;

    if (active < 0) {
        return;
    }
    cache_stats(&s);
    stat_u64(c, "active_slabs", (uint64_t)active);
    stat_u64(c, "total_malloced", s.total_malloced);
    stats_end(c);
}

static void
stats_items(struct conn *c)
{
    if (per_class(c, item_lines) >= 0) {
        stats_end(c);
    }
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
    stats_end(c);
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

/* One row of "stats conns", taken under the lists' locks and printed
 * after, all of them in descriptor order, as memcached prints them. */
struct conn_row {
    int         fd;
    bool        udp;
    bool        listening;
    const char *state;
    uint64_t    idle;
    char        addr[64];
    char        listen_addr[64];
    char        peer_cn[64];        /* a TLS client's certificate name */
};

struct conn_rows {
    struct conn_row *row;
    size_t           n;
    size_t           cap;
};

static struct conn_row *
row_add(struct conn_rows *rows, int fd)
{
    if (rows->n == rows->cap) {
        size_t cap = rows->cap ? 2 * rows->cap : 64;
        struct conn_row *r = realloc(rows->row, cap * sizeof(*r));

        if (r == NULL) {
            return NULL;
        }
        rows->row = r;
        rows->cap = cap;
    }
    memset(&rows->row[rows->n], 0, sizeof(rows->row[0]));
    rows->row[rows->n].fd = fd;
    return &rows->row[rows->n++];
}

static void
conn_row(struct conn *other, void *ctx)
{
    rel_time_t last = __atomic_load_n(&other->last_cmd, __ATOMIC_RELAXED);
    struct conn_row *r;

    if (__atomic_load_n(&other->watching, __ATOMIC_RELAXED) ||
        (r = row_add(ctx, other->fd)) == NULL) {
        return;
    }
    r->udp = other->is_udp;
    r->state = conn_state_name(other);
    r->idle = clock_now() - last;
    conn_addr_name(other, r->addr, sizeof(r->addr));
    snprintf(r->listen_addr, sizeof(r->listen_addr), "%s",
             other->listen_addr != NULL ? other->listen_addr : "");
    if (__atomic_load_n(&other->tls_named, __ATOMIC_ACQUIRE) &&
        other->peer_cn != NULL) {
        snprintf(r->peer_cn, sizeof(r->peer_cn), "%s", other->peer_cn);
    }
}

/* A watcher's row: its socket belongs to the mc-log thread now. */
static void
watcher_row(int fd, const char *addr, const char *listen_addr,
            rel_time_t since, void *ctx)
{
    struct conn_row *r = row_add(ctx, fd);

    if (r == NULL) {
        return;
    }
    r->state = "conn_watch";
    r->idle = clock_now() - since;
    snprintf(r->addr, sizeof(r->addr), "%s", addr);
    snprintf(r->listen_addr, sizeof(r->listen_addr), "%s", listen_addr);
}

static int
by_fd(const void *a, const void *b)
{
    const struct conn_row *x = a, *y = b;

    return (x->fd > y->fd) - (x->fd < y->fd);
}

static void
row_out(struct conn *c, const struct conn_row *r)
{
    char name[48];

    if (r->udp) {
        snprintf(name, sizeof(name), "%d:UDP", r->fd);
        stat_str(c, name, "UDP");
    }
    snprintf(name, sizeof(name), "%d:addr", r->fd);
    stat_str(c, name, r->addr);
    if (!r->udp && !r->listening) {
        snprintf(name, sizeof(name), "%d:listen_addr", r->fd);
        stat_str(c, name, r->listen_addr);
    }
    snprintf(name, sizeof(name), "%d:state", r->fd);
    stat_str(c, name, r->state);
    snprintf(name, sizeof(name), "%d:secs_since_last_cmd", r->fd);
    stat_u64(c, name, r->idle);
    if (r->peer_cn[0] != '\0') {
        /* memcached-pm's own line: a TLS client certificate's name */
        snprintf(name, sizeof(name), "%d:tls_peer_cn", r->fd);
        stat_str(c, name, r->peer_cn);
    }
}

static void
stats_conns(struct conn *c)
{
    struct conn_rows rows = { NULL, 0, 0 };

    for (struct listener *l = listeners; l != NULL; l = l->next) {
        struct conn_row *r = row_add(&rows, l->fd);

        if (r != NULL) {
            r->listening = true;
            r->state = "conn_listening";
            snprintf(r->addr, sizeof(r->addr), "%s", l->addr);
        }
    }
    conn_each(conn_row, &rows);
    logger_each_watcher(watcher_row, &rows);
    qsort(rows.row, rows.n, sizeof(rows.row[0]), by_fd);
    for (size_t i = 0; i < rows.n; i++) {
        row_out(c, &rows.row[i]);
    }
    free(rows.row);
    stats_end(c);
}

/* ---- stats tiers ------------------------------------------------------ */

/* Per tier: its memory, items, hits (reads that found the item there:
 * get, gets, gat, mg), evictions, the items it received from the other
 * tier (promotions into DRAM, demotions into the file) and flushes to the
 * medium. */
static void
stats_tiers(struct conn *c)
{
    struct cache_tier_stats ts[4];
    struct thread_stats *t = sums(c);
    unsigned n = cache_tier_stats(ts, 4);

    if (t == NULL) {
        return;
    }
    for (unsigned i = 0; i < n; i++) {
        ts[i].hits = ts[i].durable ? t->hits_pmem : t->hits_dram;
#define TIER_ROW(f, kind, x) stat_pfx(c, ts[i].name, #f, ts[i].f);
        CACHE_TIER_STATS(TIER_ROW)
#undef TIER_ROW
    }
    free(t);
    stats_end(c);
}

/* ---- stats cachedump --------------------------------------------------- */

#define CACHEDUMP_MAX (2 * 1024 * 1024)   /* memcached's reply limit */

struct cachedump {
    struct conn *c;
    size_t       bytes;
    uint32_t     left;          /* lines still wanted */
};

/* "ITEM <key> [<bytes> b; <exptime> s]"; a key is printed up to a NUL,
 * as memcached copies it. */
static int
cachedump_line(const struct cache_dumped *d, void *arg)
{
    struct cachedump *cd = arg;
    char line[PROTO_KEY_MAX + 64];
    int n = snprintf(line, sizeof(line), "ITEM %.*s [%u b; %lld s]\r\n",
                     (int)strnlen(d->key, d->nkey), d->key, d->vlen,
                     (long long)d->exptime);

    if (cd->bytes + (size_t)n + 6 > CACHEDUMP_MAX) {
        return 1;
    }
    cd->bytes += (size_t)n;
    conn_out(cd->c, line, (size_t)n);
    return --cd->left == 0;
}

static void
stats_cachedump(struct conn *c, const struct request *req)
{
    struct cachedump cd = { c, 0, 0 };
    uint32_t id, limit;

    if (!settings.dump_enabled) {
        conn_out_rsp(c, RSP_CLIENT_ERROR_CACHEDUMP_DISABLED);
    } else if (req->ntokens < 4) {
        conn_out_rsp(c, RSP_CLIENT_ERROR_CMDLINE);
    } else if (!token_u32(&req->tokens[2], &id) ||
               !token_u32(&req->tokens[3], &limit)) {
        conn_out_rsp(c, RSP_CLIENT_ERROR_FORMAT);
    } else if (id >= CACHE_MAX_CLASSES) {
        conn_out_rsp(c, RSP_CLIENT_ERROR_SLAB_ID);
    } else {
        cd.left = limit == 0 ? UINT32_MAX : limit;
        cache_cachedump(id, cachedump_line, &cd);
        conn_out(c, rsp_str[RSP_END], rsp_len[RSP_END]);
    }
}

/* ---- stats dispatcher ------------------------------------------------- */

/* The groups text and binary share, by name; false: not one of them. */
static bool
stats_group(struct conn *c, const struct token *sub)
{
    if (token_eq(sub, "items")) {
        stats_items(c);
    } else if (token_eq(sub, "slabs")) {
        stats_slabs(c);
    } else if (token_eq(sub, "sizes")) {
        stats_sizes(c);
    } else if (token_eq(sub, "tiers")) {
        stats_tiers(c);
    } else {
        return false;
    }
    return true;
}

/* "stats reset": the counters, the storage's, and (as memcached) the
 * prefixes "stats detail dump" shows. */
static void
reset_all(void)
{
    stats_reset();
    cache_stats_reset();
    detail_clear();
}

enum process_result
admin_stats(struct conn *c, struct request *req)
{
    const struct token *sub = &req->tokens[1];

    if (req->ntokens == 1) {
        stats_general(c);
    } else if (token_eq(sub, "settings")) {
        stats_settings(c);
    } else if (token_eq(sub, "conns")) {
        stats_conns(c);
    } else if (token_eq(sub, "cachedump")) {
        stats_cachedump(c, req);
    } else if (token_eq(sub, "reset")) {
        reset_all();
        conn_out_rsp(c, RSP_RESET);
    } else if (token_eq(sub, "detail")) {
        return detail_command(c, req);
    } else if (!stats_group(c, sub)) {
        conn_out_rsp(c, RSP_ERROR);
    }
    return PROCESS_OK;
}

/* Does the group name start with `word`?  memcached matches "reset",
 * "settings" and "detail" by their first letters. */
static bool
starts(const struct token *group, const char *word)
{
    size_t n = strlen(word);

    return group->len >= n && memcmp(group->p, word, n) == 0;
}

enum process_result
admin_stats_bin(struct conn *c, const char *group, size_t len)
{
    struct token sub = { group, len };

    if (len == 0) {
        stats_general(c);
    } else if (starts(&sub, "reset")) {
        reset_all();
        stats_end(c);
    } else if (starts(&sub, "settings")) {
        stats_settings(c);
    } else if (starts(&sub, "detail")) {
        detail_command_bin(c, group + 6, len - 6);
    } else if (!stats_group(c, &sub)) {
        conn_out_bin(c, BIN_KEY_ENOENT, 0, NULL, 0, NULL, 0, "Not found", 9);
    }
    return PROCESS_OK;
}

void
admin_stats_shutdown(void)
{
    detail_clear();
    while (listeners != NULL) {
        struct listener *l = listeners;
        listeners = l->next;
        free(l);
    }
}
