/*
 * process.c: the classic text commands, and the dispatch of every request
 * (process.h).
 *
 * One small function per command: it maps the request onto exec.h's
 * calls and their results onto memcached's replies.  Text commands also
 * feed "stats detail" (meta commands do not, as in memcached).
 *
 * Locking: runs on the connection's worker thread; storage takes the key's
 * item lock inside each call (storage/cache/cache.h).
 */
#include "config.h"

#include "memcached-pm/cmd/process.h"

#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "memcached-pm/admin/admin.h"
#include "memcached-pm/admin/admin_stats.h"
#include "memcached-pm/admin/detail.h"
#include "memcached-pm/base/log.h"
#include "memcached-pm/base/settings.h"
#include "memcached-pm/cmd/exec.h"
#include "memcached-pm/cmd/lookahead.h"
#include "memcached-pm/cmd/process_meta.h"
#include "memcached-pm/conn/conn_out.h"
#include "memcached-pm/watch/logger.h"
#include "proto/compose.h"
#include "proto/response.h"
#include "proto/text.h"
#include "proto/token.h"

#define VALUE_LINE_MAX (PROTO_KEY_MAX + 64)

static enum process_result
reply(struct conn *c, enum rsp_type r)
{
    conn_out_rsp(c, r);
    return PROCESS_OK;
}

/* "END\r\n", the last line of every GET: from a constant, which the
 * compiler copies inline (rsp_str's lines are known only at run time). */
static enum process_result
reply_end(struct conn *c)
{
    static const char end[] = "END\r\n";

    conn_log_reply(c, end, sizeof(end) - 1);
    conn_out(c, end, sizeof(end) - 1);
    return PROCESS_OK;
}

/* ---- retrieval -------------------------------------------------------- */

/* Queue "VALUE <key> <flags> <bytes>[ <cas>]\r\n<data>\r\n". */
static int
out_value(struct conn *c, struct item *it, bool with_cas)
{
    char *p = conn_out_reserve_value(c, VALUE_LINE_MAX, it);
    size_t n;

    if (p == NULL) {
        cache_release(it);
        return -1;
    }
    n = compose_value(p, VALUE_LINE_MAX, item_key(it), item_nkey(it),
                      item_client_flags(it), item_vlen(it), with_cas,
                      item_cas(it));
    if (settings.verbose > 1) {
        log_write(">%d sending key %.*s", c->fd, (int)item_nkey(it),
                  item_key(it));
    }
    return conn_out_line_value(c, n, it);
}

struct view_out {
    struct conn *c;
    bool with_cas;
};

static size_t
value_line(char *p, const struct cache_view *v, void *arg)
{
    const struct view_out *o = arg;

    return compose_value(p, VALUE_LINE_MAX, v->key, v->nkey,
                         v->client_flags, v->vlen, o->with_cas, v->cas);
}

/* out_value() for a hit read without the lock (exec_get_peek()). */
static int
out_view(const struct cache_view *v, void *arg)
{
    struct view_out *o = arg;

    return conn_out_view(o->c, v, VALUE_LINE_MAX, true, value_line, o);
}

static int
get_one(struct conn *c, const struct prefetch_key *key, bool touch,
        rel_time_t exptime, bool with_cas)
{
    struct view_out o = { c, with_cas };
    struct item *it;
    int peeked;

    /* -vv logs each value sent, from the item: that path keeps the lock. */
    if (!touch && settings.verbose <= 1 &&
        (peeked = exec_get_peek(c->stats, key, CONN_VALUE_COPY_MAX - 2,
                                true, out_view, &o)) >= 0) {
        if (settings.detail_enabled) {
            detail_record(key->key, key->nkey, DETAIL_GET, peeked == 1);
        }
        return 0;
    }
    it = exec_get(c->stats, key->key, key->nkey, key->hv, touch, exptime);
    if (settings.detail_enabled) {
        detail_record(key->key, key->nkey, DETAIL_GET, it != NULL);
    }
    return it != NULL ? out_value(c, it, with_cas) : 0;
}

/* A key over 250 bytes anywhere in a multiget fails the whole request
 * before any value is sent, as memcached answers it. */
static bool
keys_ok(const struct token *keys)
{
    struct token cursor = *keys, key;
    int more;

    while ((more = text_next_key(&cursor, &key)) > 0) {
    }
    return more == 0;
}

/* No memory for the next key's reply (conn_resp_start()): what is queued
 * goes, and the error is the answer, or with no room even for that, the
 * connection closes; memcached's answers. */
static enum process_result
out_of_reply_memory(struct conn *c)
{
    conn_out_discard(c);
    if (!conn_resp_start(c)) {
        return PROCESS_CLOSE;
    }
    return reply(c, RSP_SERVER_ERROR_OOM_GET);
}

/*
 * The keys go in windows of prefetch_batch: hashed, walked side by side
 * (lookahead.h), then fetched in order.  A window of one key (the last of
 * a multiget, or prefetch_batch 0 or 1) is fetched alone.
 */
static enum process_result
process_get(struct conn *c, struct request *req)
{
    bool touch = req->type == REQ_GAT || req->type == REQ_GATS;
    bool with_cas = req->type == REQ_GETS || req->type == REQ_GATS;
    rel_time_t exptime = touch ? clock_realtime(req->exptime) : 0;
    unsigned max = settings.prefetch_batch > 1 ? settings.prefetch_batch : 1;
    struct token cursor = req->keys;
    struct prefetch_key *pf, k;
    bool first = true;
    unsigned n;

    /* One key, split by the parser: hashed now, or by the look-ahead. */
    if (req->key.len > 0 && req->key.len <= PROTO_KEY_MAX) {
        return get_one(c, lookahead_key(c, req->key.p, req->key.len, &k),
                       touch, exptime, with_cas) != 0
               ? reply(c, RSP_SERVER_ERROR_OOM_GET) : reply_end(c);
    }
    /* A key list no longer than one key cannot hold a key too long. */
    if (req->keys.len > PROTO_KEY_MAX && !keys_ok(&req->keys)) {
        return reply(c, RSP_CLIENT_ERROR_FORMAT);
    }
    do {
        n = lookahead_window(c, &cursor, &pf, max);
        lookahead_walk(c, pf, n);
        for (unsigned i = 0; i < n; i++) {
            /* Over UDP each key's reply is a message, END with the
             * last key's, as memcached sends them. */
            if (!first) {
                if (!conn_resp_start(c)) {
                    return out_of_reply_memory(c);
                }
                conn_out_next_key(c);
            }
            first = false;
            if (get_one(c, &pf[i], touch, exptime, with_cas) != 0) {
                return reply(c, RSP_SERVER_ERROR_OOM_GET);
            }
        }
    } while (cursor.len > 0);
    return reply_end(c);
}

/* ---- storage ---------------------------------------------------------- */

static enum cache_op
store_op(enum req_type t)
{
    switch (t) {
    case REQ_ADD: return CACHE_ADD;
    case REQ_REPLACE: return CACHE_REPLACE;
    case REQ_APPEND: return CACHE_APPEND;
    case REQ_PREPEND: return CACHE_PREPEND;
    case REQ_CAS: return CACHE_CAS;
    case REQ_SET:
    default: return CACHE_SET;
    }
}

static enum process_result
process_update(struct conn *c, struct request *req)
{
    uint32_t hv = lookahead_hash(c, req->key.p, req->key.len);
    enum cache_status st;
    struct item *it;

    it = exec_alloc(c->stats, req->key.p, req->key.len, hv, req->flags,
                    clock_realtime(req->exptime), req->vlen,
                    req->type == REQ_SET, &st);
    if (it == NULL) {
        return conn_swallow(c, st == CACHE_TOO_LARGE
                               ? RSP_SERVER_ERROR_TOO_LARGE
                               : RSP_SERVER_ERROR_NO_MEMORY,
                            (uint64_t)req->vlen + 2);
    }
    c->nitem = it;
    c->nread_off = 0;
    c->ncmd = req->type;
    c->ncas = req->cas;
    c->nnoreply = req->noreply;
    return PROCESS_NREAD;
}

static enum rsp_type
store_reply(enum cache_status st)
{
    switch (st) {
    case CACHE_STORED: return RSP_STORED;
    case CACHE_EXISTS: return RSP_EXISTS;
    case CACHE_NOT_FOUND: return RSP_NOT_FOUND;
    case CACHE_TOO_LARGE: return RSP_SERVER_ERROR_TOO_LARGE;
    case CACHE_NO_MEMORY: return RSP_SERVER_ERROR_NO_MEMORY;
    case CACHE_NOT_STORED:
    default: return RSP_NOT_STORED;
    }
}

void
process_store(struct conn *c)
{
    struct item *it = c->nitem;
    struct cache_mstore a = {
        .op = store_op(c->ncmd),
        .compare = c->ncmd == REQ_CAS || c->ncas != 0,
        .compare_cas = c->ncas,
    };
    enum rsp_type r = RSP_CLIENT_ERROR_CHUNK;

    if (c->ncmd == REQ_MS) {
        process_meta_store(c);
        return;
    }
    c->nitem = NULL;
    c->noreply = c->nnoreply;
    if (exec_data_ok(c->stats, it)) {
        r = store_reply(exec_store(c->stats, it, &a));
        if (settings.detail_enabled) {
            detail_record(item_key(it), item_nkey(it), DETAIL_SET,
                                true);
        }
    }
    cache_release(it);
    conn_out_rsp(c, r);
    c->noreply = false;
}

/* ---- single-key commands ---------------------------------------------- */

static enum process_result
process_delete(struct conn *c, struct request *req)
{
    uint32_t hv = lookahead_hash(c, req->key.p, req->key.len);
    struct cache_mdelete a = { 0 };
    enum cache_status st;

    st = exec_delete(c->stats, req->key.p, req->key.len, hv, &a,
                     EXEC_DEL_TEXT);
    if (settings.detail_enabled) {
        detail_record(req->key.p, req->key.len, DETAIL_DELETE,
                            st == CACHE_DELETED);
    }
    return reply(c, st == CACHE_DELETED ? RSP_DELETED : RSP_NOT_FOUND);
}

static enum process_result
process_delta(struct conn *c, struct request *req)
{
    uint32_t hv = lookahead_hash(c, req->key.p, req->key.len);
    struct cache_mdelta a = {
        .incr = req->type == REQ_INCR,
        .delta = req->delta,
    };
    char buf[32];
    size_t n;

    switch (exec_delta(c->stats, req->key.p, req->key.len, hv, &a)) {
    case CACHE_OK:
        n = compose_u64(buf, sizeof(buf), a.value);
        conn_log_reply(c, buf, n);
        conn_out(c, buf, n);
        return PROCESS_OK;
    case CACHE_NOT_FOUND:
        return reply(c, RSP_NOT_FOUND);
    case CACHE_NON_NUMERIC:
        return reply(c, RSP_CLIENT_ERROR_NONNUMERIC);
    default:
        return reply(c, RSP_SERVER_ERROR_OOM);
    }
}

static enum process_result
process_touch(struct conn *c, struct request *req)
{
    uint32_t hv = lookahead_hash(c, req->key.p, req->key.len);
    struct item *it = exec_touch(c->stats, req->key.p, req->key.len, hv,
                                 clock_realtime(req->exptime));

    if (it == NULL) {
        return reply(c, RSP_NOT_FOUND);
    }
    cache_release(it);
    return reply(c, RSP_TOUCHED);
}

/* ---- the rest --------------------------------------------------------- */

static enum process_result
process_flush_all(struct conn *c, struct request *req)
{
    if (!settings.flush_enabled) {
        return reply(c, RSP_CLIENT_ERROR_FLUSH_DISABLED);
    }
    exec_flush(c->stats, req->num);
    return reply(c, RSP_OK);
}

static enum process_result
process_version(struct conn *c)
{
    char buf[64];
    size_t n = compose_version(buf, sizeof(buf), MCPM_VERSION);

    conn_log_reply(c, buf, n);
    conn_out(c, buf, n);
    return PROCESS_OK;
}

static enum process_result
process_verbosity(struct conn *c, struct request *req)
{
    int64_t level = req->num;

    settings.verbose = level < 0 ? 0 : level > 2 ? 2 : (int)level;
    settings.cache.verbose = settings.verbose;
    return reply(c, RSP_OK);
}

static enum process_result
process_shutdown_cmd(struct conn *c, struct request *req)
{
    int sig = SIGINT;

    if (!settings.shutdown_command) {
        return reply(c, RSP_SERVER_ERROR_SHUTDOWN);
    }
    if (req->ntokens == 2 && token_eq(&req->tokens[1], "graceful")) {
        sig = SIGUSR1;
    } else if (req->ntokens != 1) {
        return reply(c, RSP_CLIENT_ERROR_SHUTDOWN_MODE);
    }
    /* kill(), not raise(): only the main thread takes signals. */
    kill(getpid(), sig);
    c->close_reason = LOG_CLOSE_SHUTDOWN;
    return PROCESS_CLOSE;
}

enum process_result
process_request(struct conn *c, struct request *req)
{
    switch (req->type) {
    case REQ_GET: case REQ_GETS: case REQ_GAT: case REQ_GATS:
        return process_get(c, req);
    case REQ_SET: case REQ_ADD: case REQ_REPLACE: case REQ_APPEND:
    case REQ_PREPEND: case REQ_CAS:
        return process_update(c, req);
    case REQ_DELETE: return process_delete(c, req);
    case REQ_INCR: case REQ_DECR: return process_delta(c, req);
    case REQ_TOUCH: return process_touch(c, req);
    case REQ_FLUSH_ALL: return process_flush_all(c, req);
    case REQ_VERSION: return process_version(c);
    case REQ_VERBOSITY: return process_verbosity(c, req);
    case REQ_QUIT:
        c->close_reason = LOG_CLOSE_NORMAL;
        return PROCESS_CLOSE;
    case REQ_SHUTDOWN: return process_shutdown_cmd(c, req);
    case REQ_STATS: return admin_stats(c, req);
    case REQ_CACHE_MEMLIMIT: return admin_memlimit(c, req);
    case REQ_SLABS: return admin_slabs(c, req);
    case REQ_LRU: return admin_lru(c, req);
    case REQ_LRU_CRAWLER: return admin_lru_crawler(c, req);
    case REQ_WATCH: return admin_watch(c, req);
    case REQ_REFRESH_CERTS: return admin_refresh_certs(c);
    case REQ_MN: case REQ_MG: case REQ_MS: case REQ_MD: case REQ_MA:
    case REQ_ME:
        return process_meta(c, req);
    case REQ_ERROR:
        if (req->swallow > 0) {
            return conn_swallow(c, req->err, req->swallow);
        }
        return reply(c, req->err);
    default:
        return reply(c, RSP_ERROR);
    }
}
