/*
 * admin.c: the operator's commands besides "stats": cache_memlimit, slabs
 * reassign and automove, lru tune/mode/temp_ttl, lru_crawler, with
 * memcached's replies (shared/reference/memcached.md §1.4).
 *
 * Locking: runs on the connection's worker thread.  The runtime fields it
 * changes (settings.cache: lru tune, automove, crawler sleep) are read
 * racily by storage's threads at their next step, as settings.h says.
 */
#include "config.h"

#include "memcached-pm/admin/admin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memcached-pm/base/settings.h"
#include "memcached-pm/conn/conn_out.h"
#include "memcached-pm/security/tls.h"
#include "memcached-pm/watch/logger.h"
#include "proto/compose.h"
#include "proto/meta.h"
#include "proto/response.h"
#include "proto/token.h"
#include "storage/cache/cache_open.h"
#include "storage/cache/cache_stats.h"

#define MB (1024 * 1024)

static enum process_result
reply(struct conn *c, enum rsp_type r)
{
    conn_out_rsp(c, r);
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

/* slabs automove <0|1|2>, or ratio, freeratio or window and a value, as
 * memcached 1.6.45 answers them: a level that is not a number is a
 * CLIENT_ERROR, one out of range an ERROR, and tokens after the level
 * are ignored; a window outside 3..1800 is memcached's CLIENT_ERROR.
 * Ratios out of the range the page mover can use are refused (ERROR)
 * where memcached would take them. */
static enum process_result
slabs_automove(struct conn *c, struct request *req)
{
    struct cache_options *o = &settings.cache;
    const struct token *a = &req->tokens[2];
    uint32_t level;
    double f;

    if (token_eq(a, "ratio") || token_eq(a, "freeratio")) {
        bool ratio = token_eq(a, "ratio");

        if (req->ntokens < 4 || !token_double(&req->tokens[3], &f) ||
            f < (ratio ? 0.01 : 0) || f > 1) {
            return reply(c, RSP_ERROR);
        }
        *(ratio ? &o->automove_ratio : &o->automove_freeratio) = f;
        return reply(c, RSP_OK);
    }
    if (token_eq(a, "window")) {
        if (req->ntokens < 4 || !token_u32(&req->tokens[3], &level)) {
            return reply(c, RSP_CLIENT_ERROR_FORMAT);
        }
        if (level < 3 || level > 1800) {
            return reply(c, RSP_AUTOMOVE_WINDOW);
        }
        o->automove_window = level;
        return reply(c, RSP_OK);
    }
    if (!token_u32(a, &level)) {
        return reply(c, RSP_CLIENT_ERROR_FORMAT);
    }
    if (level > 2) {
        return reply(c, RSP_ERROR);
    }
    o->slab_automove = (int)level;
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

/* "key=<uri-encoded> exp= la= cas= fetch= cls= size= flags= ",
 * memcached 1.6.45's metadump line (its trailing space too). */
static int
metadump_line(const struct cache_meta *m, void *ctx)
{
    char key[3 * PROTO_KEY_MAX + 1], line[sizeof(key) + 200];
    int n;

    compose_uri(key, m->key, m->nkey);
    n = snprintf(line, sizeof(line),
                 "key=%s exp=%lld la=%lld cas=%llu fetch=%s cls=%u "
                 "size=%zu flags=%u \n", key, (long long)m->exptime,
                 (long long)m->atime, (unsigned long long)m->cas,
                 m->fetched ? "yes" : "no", m->clsid, m->size,
                 m->client_flags);
    return conn_out(ctx, line, (size_t)n);
}

/* "mg <key>", or "mg <base64> b" for a binary key: mgdump's line, a
 * request a client can send back as it is. */
static int
mgdump_line(const struct cache_meta *m, void *ctx)
{
    char line[PROTO_KEY_MAX * 2 + 16];
    size_t n = 3;

    memcpy(line, "mg ", 3);
    if (m->key_binary) {
        n += meta_base64_encode(m->key, m->nkey, line + n,
                                sizeof(line) - n - 4);
        memcpy(line + n, " b\r\n", 4);
        n += 4;
    } else {
        memcpy(line + n, m->key, m->nkey);
        n += m->nkey;
        memcpy(line + n, "\r\n", 2);
        n += 2;
    }
    return conn_out(ctx, line, n);
}

/* lru_crawler metadump: "OK" (memcached 1.6.28 on), a line per item,
 * "END"; or mgdump (`mg`): "OK", the keys, "EN". */
static enum process_result
crawler_dump(struct conn *c, struct request *req, bool mg)
{
    bool classes[CACHE_MAX_CLASSES];
    bool all = token_eq(&req->tokens[2], "all") ||
               token_eq(&req->tokens[2], "hash");

    if (!settings.cache.lru_crawler) {
        return reply(c, RSP_CLIENT_ERROR_CRAWLER_DISABLED);
    }
    if (!settings.dump_enabled) {
        return reply(c, mg ? RSP_KEYDUMP_DISABLED : RSP_DUMP_DISABLED);
    }
    if (c->answered) {
        /* The dump must be the only reply in flight, as in memcached. */
        return reply(c, mg ? RSP_MGDUMP_PIPELINED : RSP_DUMP_PIPELINED);
    }
    if (!all && !crawl_classes(&req->tokens[2], classes)) {
        return reply(c, RSP_CRAWLER_BADCLASS);
    }
    reply(c, RSP_OK);
    cache_metadump(all ? NULL : classes, mg ? mgdump_line : metadump_line,
                   c);
    return reply(c, mg ? RSP_EN : RSP_END);
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
    if (req->ntokens == 3 && (token_eq(sub, "metadump") ||
                              token_eq(sub, "mgdump"))) {
        return crawler_dump(c, req, token_eq(sub, "mgdump"));
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

/* ---- refresh_certs ---------------------------------------------------- */

enum process_result
admin_refresh_certs(struct conn *c)
{
#ifdef ENABLE_TLS
    char err[1024];
    size_t n;

    if (tls_refresh(err, sizeof(err)) == 0) {
        return reply(c, RSP_OK);
    }
    /* memcached's answer is the message itself, on a line of its own */
    n = strlen(err);
    if (conn_out(c, err, n) != 0 || conn_out(c, "\r\n", 2) != 0) {
        return PROCESS_CLOSE;
    }
    return PROCESS_OK;
#else
    return reply(c, RSP_ERROR);
#endif
}

/* ---- watch ------------------------------------------------------------ */

enum process_result
admin_watch(struct conn *c, struct request *req)
{
    const char *names[PROTO_MAX_TOKENS];
    size_t lens[PROTO_MAX_TOKENS];
    unsigned streams, n = 0;
    char addr[64];

    if (!settings.watch_enabled) {
        return reply(c, RSP_CLIENT_ERROR_WATCH_DISABLED);
    }
    if (c->answered) {
        return reply(c, RSP_WATCH_PIPELINED);
    }
    for (size_t i = 1; i < req->ntokens; i++, n++) {
        names[n] = req->tokens[i].p;
        lens[n] = req->tokens[i].len;
    }
    if (c->is_udp || !logger_parse_streams(names, lens, n, &streams)) {
        return reply(c, RSP_ERROR);
    }
    /* From here stats conns lists it as the watcher it becomes. */
    __atomic_store_n(&c->watching, true, __ATOMIC_RELAXED);
    conn_addr_name(c, addr, sizeof(addr));
    switch (logger_add_watcher(c->fd, c->tls, streams, addr,
                               c->listen_addr)) {
    case LOGGER_ADDED:
        c->tls = NULL;      /* the session went with the socket */
        return PROCESS_HANDOFF;
    case LOGGER_TOO_MANY:
        __atomic_store_n(&c->watching, false, __ATOMIC_RELAXED);
        return reply(c, RSP_WATCHER_TOO_MANY);
    default:
        __atomic_store_n(&c->watching, false, __ATOMIC_RELAXED);
        return reply(c, RSP_WATCHER_FAILED);
    }
}
