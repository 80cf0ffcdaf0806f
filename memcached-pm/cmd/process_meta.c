/*
 * process_meta.c: the meta commands (mg ms md ma mn me) executed against
 * storage/ and answered on the connection.
 *
 * proto/meta.c checks and decodes the flags; exec.h runs each command
 * (storage/ applies it in one step under the item lock, cache_mget and
 * friends) and counts it as memcached counts meta commands; this file maps
 * flags to those calls and results to return codes.  The q flag hides
 * only the nominal reply: EN for mg, HD for ms, md and ma.
 */
#include "config.h"

#include "memcached-pm/cmd/process_meta.h"

#include <stdlib.h>
#include <string.h>

#include "memcached-pm/base/stats.h"
#include "memcached-pm/cmd/exec.h"
#include "memcached-pm/cmd/lookahead.h"
#include "memcached-pm/conn/conn_out.h"
#include "proto/compose.h"
#include "proto/meta.h"
#include "proto/response.h"
#include "storage/cache/cache_delta.h"
#include "storage/cache/cache_peek.h"

#define META_LINE_MAX 1024      /* memcached's reply line limit */

/* An ms waiting for its data block: the decoded request, with its tokens
 * pointing into a private copy of the command line. */
struct pending_ms {
    struct meta m;
    size_t      cap;
    char        line[];
};

static rel_time_t
reltime(int64_t ttl)
{
    return clock_realtime(ttl);
}

/* Seconds left of an exptime, -1 for none. */
static int64_t
ttl_left(rel_time_t exptime)
{
    rel_time_t now = clock_now();

    if (exptime == 0) {
        return -1;
    }
    return exptime > now ? (int64_t)(exptime - now) : 0;
}

/* True if flag a comes before flag b in the request. */
static bool
flag_before(const struct meta *m, char a, char b)
{
    for (unsigned i = 0; i < m->nflags; i++) {
        if (m->flags[i].c == a) {
            return true;
        }
        if (m->flags[i].c == b) {
            return false;
        }
    }
    return false;
}

/* Queue the reply line; `quiet` drops it (the q flag's nominal reply). */
static void
out_line(struct conn *c, enum req_type type, const char *rc,
         const struct meta *m, const struct meta_result *r, bool quiet)
{
    char *p;
    size_t n;

    if (quiet) {
        return;
    }
    p = conn_out_reserve(c, META_LINE_MAX);
    if (p == NULL) {
        return;
    }
    n = meta_compose(p, META_LINE_MAX, type, rc, m, r);
    if (n == 0) {
        conn_out_commit(c, 0);
        conn_out(c, "SERVER_ERROR output line too long\r\n", 35);
        return;
    }
    conn_out_commit(c, n);
}

/* ---- mg --------------------------------------------------------------- */

static void
mget_args(const struct meta *m, struct cache_mget *a)
{
    memset(a, 0, sizeof(*a));
    a->no_bump = meta_has(m, 'u');
    a->touch = meta_has(m, 'T');
    a->exptime = a->touch ? reltime(m->ttl) : 0;
    a->vivify = meta_has(m, 'N');
    a->vivify_exptime = a->vivify ? reltime(m->vivify_ttl) : 0;
    a->vivify_cas = meta_has(m, 'E') ? m->cas_new : 0;
    a->recache = meta_has(m, 'R');
    a->recache_before = a->recache ? reltime(m->recache_ttl) : 0;
}

static void
mget_result(const struct meta *m, const struct cache_mget *a,
            const struct item *it, struct meta_result *r)
{
    rel_time_t exptime = a->exptime_before;

    if (a->touch && flag_before(m, 'T', 't')) {
        exptime = a->exptime;
    }
    if (a->created) {
        /* A new item has no TTL until its N (or T) is reached: memcached
         * sets them as it walks the flags, so t shows the last one set
         * before it. */
        exptime = 0;
        for (unsigned i = 0; i < m->nflags && m->flags[i].c != 't'; i++) {
            if (m->flags[i].c == 'N') {
                exptime = a->vivify_exptime;
            } else if (m->flags[i].c == 'T') {
                exptime = a->exptime;
            }
        }
    }
    r->hit = true;
    r->key_binary = item_key_binary(it);
    r->cas = item_cas(it);
    r->client_flags = item_client_flags(it);
    r->ttl = ttl_left(exptime);
    r->vlen = item_vlen(it);
    r->fetched = a->fetched;
    r->last_access = clock_now() - a->atime;
    r->win = a->win;
    r->stale = a->stale;
    r->token_sent = a->token_sent;
}

/* An mg read without the lock (exec_get_peek()): what it asks of the
 * item is read-only.  T touches, N vivifies, R may hand out a win token:
 * those take the lock, and so does a stale item (its first reader wins). */
struct mg_view {
    const struct meta *m;
    bool value;
    struct conn *c;
};

static bool
mg_peekable(const struct meta *m)
{
    return !meta_has(m, 'T') && !meta_has(m, 'N') && !meta_has(m, 'R');
}

static size_t
mg_line(char *p, const struct cache_view *v, void *arg)
{
    const struct mg_view *o = arg;
    struct meta_result r = {
        .hit = true, .key_binary = cache_view_has(v, ITEM_KEY_BINARY),
        .cas = v->cas,
        .client_flags = v->client_flags, .ttl = ttl_left(v->exptime),
        .vlen = v->vlen, .fetched = cache_view_has(v, ITEM_FETCHED),
        .last_access = clock_now() - v->atime,
        .token_sent = cache_view_has(v, ITEM_TOKEN_SENT),
    };

    return meta_compose(p, META_LINE_MAX, REQ_MG, o->value ? "VA" : "HD",
                        o->m, &r);
}

static int
mg_out(const struct cache_view *v, void *arg)
{
    struct mg_view *o = arg;

    if (cache_view_has(v, ITEM_STALE)) {
        cache_peek_end(v);
        return -1;
    }
    o->value = meta_has(o->m, 'v') &&
               !(meta_has(o->m, 'C') && v->cas == o->m->cas_compare);
    return conn_out_view(o->c, v, META_LINE_MAX, o->value, mg_line, o);
}

static enum process_result
meta_get(struct conn *c, const struct meta *m)
{
    struct prefetch_key own;
    const struct prefetch_key *k = lookahead_key(c, m->key.p, m->key.len,
                                                 &own);
    uint32_t hv = k->hv;
    struct meta_result r = { 0 };
    struct mg_view o = { m, false, c };
    struct cache_mget a;
    enum cache_status st;
    struct item *it;
    int peeked = -1;
    bool value;

    if (mg_peekable(m)) {
        peeked = exec_get_peek(c->stats, k, CONN_VALUE_COPY_MAX - 2,
                               !meta_has(m, 'u'), mg_out, &o);
    }
    if (peeked == 1) {
        return PROCESS_OK;
    }
    if (peeked == 0) {
        out_line(c, REQ_MG, "EN", m, &r, meta_has(m, 'q'));
        return PROCESS_OK;
    }
    mget_args(m, &a);
    it = exec_mget(c->stats, m->key.p, m->key.len, hv, &a, &st);
    if (it == NULL) {
        out_line(c, REQ_MG, "EN", m, &r, meta_has(m, 'q'));
        return PROCESS_OK;
    }
    mget_result(m, &a, it, &r);
    value = meta_has(m, 'v') &&
            !(meta_has(m, 'C') && item_cas(it) == m->cas_compare);
    out_line(c, REQ_MG, value ? "VA" : "HD", m, &r, false);
    if (value) {
        conn_out_value(c, it);
    } else {
        cache_release(it);
    }
    return PROCESS_OK;
}

/* ---- me --------------------------------------------------------------- */

static enum process_result
meta_debug(struct conn *c, const struct meta *m)
{
    uint32_t hv = lookahead_hash(c, m->key.p, m->key.len);
    struct cache_mget a = { .no_bump = true, .peek = true };
    enum cache_status st;
    struct item *it;
    char *p;

    STAT_INCR(c->stats->cmd_meta);
    it = cache_mget(m->key.p, m->key.len, hv, &a, &st);
    if (it == NULL) {
        conn_out(c, "EN\r\n", 4);
        return PROCESS_OK;
    }
    p = conn_out_reserve(c, META_LINE_MAX);
    if (p != NULL) {
        /* The key as stored, encoded again if it came in base64. */
        struct token key = { item_key(it), item_nkey(it) };

        conn_out_commit(c, meta_compose_debug(p, META_LINE_MAX, &key,
            item_key_binary(it), ttl_left(a.exptime_before),
            clock_now() - a.atime, item_cas(it), a.fetched,
            item_clsid(it), item_ntotal(it)));
    }
    cache_release(it);
    return PROCESS_OK;
}

/* ---- ms --------------------------------------------------------------- */

/* Keep the decoded request across the data block: copy the command line
 * and move every token that pointed into it. */
static int
ms_save(struct conn *c, const struct request *req, const struct meta *m)
{
    const char *base = req->tokens[0].p;
    const struct token *last = &req->tokens[req->ntokens - 1];
    size_t len = (size_t)(last->p + last->len - base);
    struct pending_ms *pm = c->nmeta;

    if (pm == NULL || pm->cap < len) {
        free(pm);
        pm = malloc(sizeof(*pm) + len);
        c->nmeta = pm;
        if (pm == NULL) {
            return -1;
        }
        pm->cap = len;
    }
    memcpy(pm->line, base, len);
    pm->m = *m;
#define MOVE(t) do {                                                        \
    if ((t).p >= base && (t).p <= base + len) {                             \
        (t).p = pm->line + ((t).p - base);                                  \
    }                                                                       \
} while (0)
    for (unsigned i = 0; i < pm->m.nflags; i++) {
        MOVE(pm->m.flags[i].arg);
    }
    MOVE(pm->m.opaque);
    if (m->key.p == m->keybuf) {
        pm->m.key.p = pm->m.keybuf;
    } else {
        MOVE(pm->m.key);
    }
#undef MOVE
    return 0;
}

static enum process_result
meta_set(struct conn *c, const struct request *req, const struct meta *m)
{
    uint32_t hv = lookahead_hash(c, m->key.p, m->key.len);
    rel_time_t exptime = meta_has(m, 'T') ? reltime(m->ttl) : 0;
    enum cache_status st;
    struct item *it;

    it = exec_alloc(c->stats, m->key.p, m->key.len, hv, m->client_flags,
                    exptime, m->vlen, m->mode == 'S', &st);
    if (it == NULL) {
        return conn_swallow(c, st == CACHE_TOO_LARGE
                               ? RSP_SERVER_ERROR_TOO_LARGE
                               : RSP_SERVER_ERROR_NO_MEMORY,
                            (uint64_t)m->vlen + 2);
    }
    if (meta_has(m, 'b')) {
        item_set_key_binary(it);
    }
    if (ms_save(c, req, m) != 0) {
        cache_release(it);
        return conn_swallow(c, RSP_SERVER_ERROR_OOM, (uint64_t)m->vlen + 2);
    }
    c->nitem = it;
    c->nread_off = 0;
    c->ncmd = REQ_MS;
    c->nnoreply = false;
    return PROCESS_NREAD;
}

static enum cache_op
ms_op(char mode)
{
    switch (mode) {
    case 'E': return CACHE_ADD;
    case 'A': return CACHE_APPEND;
    case 'P': return CACHE_PREPEND;
    case 'R': return CACHE_REPLACE;
    case 'S':
    default: return CACHE_SET;
    }
}

static const char *
ms_code(enum cache_status st)
{
    switch (st) {
    case CACHE_STORED: return "HD";
    case CACHE_EXISTS: return "EX";
    case CACHE_NOT_FOUND: return "NF";
    default: return "NS";
    }
}

void
process_meta_store(struct conn *c)
{
    struct item *it = c->nitem;
    const struct meta *m = &((struct pending_ms *)c->nmeta)->m;
    struct cache_mstore a = { 0 };
    struct meta_result r = { 0 };
    enum cache_status st;

    c->nitem = NULL;
    if (!exec_data_ok(c->stats, it)) {
        cache_release(it);
        conn_out_rsp(c, RSP_CLIENT_ERROR_CHUNK);
        return;
    }
    a.op = ms_op(m->mode);
    a.compare = meta_has(m, 'C');
    a.compare_cas = m->cas_compare;
    a.invalidate = meta_has(m, 'I');
    a.new_cas = meta_has(m, 'E') ? m->cas_new : 0;
    a.vivify = meta_has(m, 'N');
    a.vivify_exptime = a.vivify ? reltime(m->vivify_ttl) : 0;
    st = exec_store(c->stats, it, &a);
    cache_release(it);
    if (st == CACHE_NO_MEMORY || st == CACHE_TOO_LARGE) {
        conn_out_rsp(c, st == CACHE_NO_MEMORY ? RSP_SERVER_ERROR_NO_MEMORY
                                              : RSP_SERVER_ERROR_TOO_LARGE);
        return;
    }
    r.hit = st == CACHE_STORED;
    r.cas = a.cas;
    r.vlen = a.vlen;
    out_line(c, REQ_MS, ms_code(st), m, &r,
             st == CACHE_STORED && meta_has(m, 'q'));
}

/* ---- md --------------------------------------------------------------- */

static enum process_result
meta_delete(struct conn *c, const struct meta *m)
{
    uint32_t hv = lookahead_hash(c, m->key.p, m->key.len);
    struct cache_mdelete a = { 0 };
    struct meta_result r = { 0 };
    enum cache_status st;
    const char *rc;

    a.compare = meta_has(m, 'C');
    a.compare_cas = m->cas_compare;
    a.new_cas = meta_has(m, 'E') ? m->cas_new : 0;
    a.invalidate = meta_has(m, 'I');
    a.touch = a.invalidate && meta_has(m, 'T');
    a.exptime = meta_has(m, 'T') ? reltime(m->ttl) : 0;
    a.tombstone = meta_has(m, 'x');
    a.client_flags = m->client_flags;
    st = exec_delete(c->stats, m->key.p, m->key.len, hv, &a,
                     EXEC_DEL_META);
    switch (st) {
    case CACHE_DELETED: rc = "HD"; break;
    case CACHE_EXISTS: rc = "EX"; break;
    case CACHE_NO_MEMORY: rc = "NS"; break;
    default: rc = "NF"; break;
    }
    r.hit = st == CACHE_DELETED;
    out_line(c, REQ_MD, rc, m, &r, st == CACHE_DELETED && meta_has(m, 'q'));
    return PROCESS_OK;
}

/* ---- ma --------------------------------------------------------------- */

static void
mdelta_args(const struct meta *m, struct cache_mdelta *a)
{
    memset(a, 0, sizeof(*a));
    a->incr = m->mode != 'D';
    a->delta = m->delta;
    a->compare = meta_has(m, 'C');
    a->compare_cas = m->cas_compare;
    a->new_cas = meta_has(m, 'E') ? m->cas_new : 0;
    a->vivify = meta_has(m, 'N');
    a->vivify_exptime = a->vivify ? reltime(m->vivify_ttl) : 0;
    a->initial = m->initial;
    a->touch = meta_has(m, 'T');
    a->exptime = a->touch ? reltime(m->ttl) : 0;
}

static enum process_result
meta_arith(struct conn *c, const struct meta *m)
{
    uint32_t hv = lookahead_hash(c, m->key.p, m->key.len);
    struct meta_result r = { 0 };
    struct cache_mdelta a;
    enum cache_status st;
    char num[24];
    size_t n;

    mdelta_args(m, &a);
    st = exec_delta(c->stats, m->key.p, m->key.len, hv, &a);
    switch (st) {
    case CACHE_OK:
        break;
    case CACHE_NON_NUMERIC:
        conn_out_rsp(c, RSP_CLIENT_ERROR_NONNUMERIC);
        return PROCESS_OK;
    default:
        out_line(c, REQ_MA, st == CACHE_EXISTS ? "EX"
                 : st == CACHE_NOT_FOUND ? "NF" : "NS", m, &r, false);
        return PROCESS_OK;
    }
    if (meta_has(m, 'q') && !a.created) {
        return PROCESS_OK;      /* q hides a success, value and all */
    }
    n = compose_u64(num, sizeof(num), a.value);
    r.hit = true;
    r.cas = a.cas;
    r.ttl = ttl_left(a.exptime_after);
    r.vlen = (uint32_t)(n - 2);
    if (meta_has(m, 'v')) {
        out_line(c, REQ_MA, "VA", m, &r, false);
        conn_out(c, num, n);
    } else {
        out_line(c, REQ_MA, "HD", m, &r, meta_has(m, 'q'));
    }
    return PROCESS_OK;
}

/* ---- dispatch --------------------------------------------------------- */

enum process_result
process_meta(struct conn *c, struct request *req)
{
    uint32_t swallow = 0;
    struct meta m;
    enum rsp_type err;

    if (req->type == REQ_MN) {
        conn_out(c, "MN\r\n", 4);
        return PROCESS_FLUSH;
    }
    err = meta_parse(req, &m, &swallow);
    if (err != RSP_NONE) {
        conn_out_rsp(c, err);
        c->swallow = swallow;
        return swallow > 0 ? PROCESS_SWALLOW : PROCESS_OK;
    }
    switch (req->type) {
    case REQ_MG: return meta_get(c, &m);
    case REQ_MS: return meta_set(c, req, &m);
    case REQ_MD: return meta_delete(c, &m);
    case REQ_MA: return meta_arith(c, &m);
    case REQ_ME: return meta_debug(c, &m);
    default:
        conn_out_rsp(c, RSP_ERROR);
        return PROCESS_OK;
    }
}
