/*
 * process.c: the data commands of the text protocol, executed against
 * storage/ and answered on the connection.
 *
 * One small function per command.  Counters go to the worker's own stats
 * block; admin commands and "stats" live in admin.c.
 */
#include "config.h"

#include "memcached-pm/process.h"

#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "memcached-pm/admin.h"
#include "memcached-pm/process_meta.h"
#include "memcached-pm/settings.h"
#include "memcached-pm/stats.h"
#include "memcached-pm/worker.h"
#include "proto/compose.h"
#include "proto/response.h"
#include "proto/text.h"
#include "proto/token.h"
#include "storage/hash.h"

#define VALUE_LINE_MAX (PROTO_KEY_MAX + 64)

static inline struct thread_stats *
tstats(struct conn *c)
{
    return c->worker->stats;
}

static enum process_result
reply(struct conn *c, enum rsp_type r)
{
    conn_out_rsp(c, r);
    return PROCESS_OK;
}

/* ---- retrieval -------------------------------------------------------- */

void
process_count_miss(struct conn *c, bool touch, enum cache_status st)
{
    struct thread_stats *ts = tstats(c);

    if (touch) {
        STAT_INCR(ts->cmd_touch);
        STAT_INCR(ts->touch_misses);
    } else {
        STAT_INCR(ts->cmd_get);
        STAT_INCR(ts->get_misses);
    }
    if (st == CACHE_EXPIRED) {
        STAT_INCR(ts->get_expired);
    } else if (st == CACHE_FLUSHED) {
        STAT_INCR(ts->get_flushed);
    }
}

void
process_count_hit(struct conn *c, bool touch, const struct item *it)
{
    struct thread_stats *ts = tstats(c);
    struct slab_stats *ss = &ts->slab[item_clsid(it)];

    if (touch) {
        STAT_INCR(ts->cmd_touch);
        STAT_INCR(ss->touch_hits);
    } else {
        STAT_INCR(ts->cmd_get);
        STAT_INCR(ss->get_hits);
    }
    if (item_in_pmem(it)) {
        STAT_INCR(ts->hits_pmem);
    } else {
        STAT_INCR(ts->hits_dram);
    }
    switch (item_lru(it)) {
    case ITEM_LRU_HOT: STAT_INCR(ss->hits_to_hot); break;
    case ITEM_LRU_WARM: STAT_INCR(ss->hits_to_warm); break;
    case ITEM_LRU_COLD: STAT_INCR(ss->hits_to_cold); break;
    case ITEM_LRU_TEMP: STAT_INCR(ss->hits_to_temp); break;
    }
}

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
    return conn_out_line_value(c, n, it);
}

static int
get_one(struct conn *c, const struct prefetch_key *key, bool touch,
        rel_time_t exptime, bool with_cas)
{
    enum cache_status st;
    struct item *it;

    it = touch ? cache_touch(key->key, key->nkey, key->hv, exptime, &st)
               : cache_get(key->key, key->nkey, key->hv, &st);
    if (settings.detail_enabled) {
        admin_detail_record(key->key, key->nkey, DETAIL_GET, it != NULL);
    }
    if (it == NULL) {
        process_count_miss(c, touch, st);
        return 0;
    }
    process_count_hit(c, touch, it);
    return out_value(c, it, with_cas);
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

uint32_t
process_key_hash(const struct conn *c, const char *key, size_t nkey)
{
    const struct prefetch_key *m = &c->worker->memo;

    if (m->key == key && m->nkey == nkey) {
        return m->hv;
    }
    return hash_murmur3(key, nkey);
}

/* Hash up to `max` more keys of a multiget into pf; how many.  c: the
 * connection whose request it is, or NULL for the look-ahead. */
static unsigned
next_window(const struct conn *c, struct token *cursor,
            struct prefetch_key *pf, unsigned max)
{
    struct token key;
    unsigned n = 0;

    while (n < max && text_next_key(cursor, &key) > 0) {
        pf[n].key = key.p;
        pf[n].nkey = key.len;
        pf[n].hv = c != NULL ? process_key_hash(c, key.p, key.len)
                             : hash_murmur3(key.p, key.len);
        n++;
    }
    return n;
}

void
process_prefetch(struct conn *c, struct prefetch_key *pf, unsigned n)
{
    if (n > 1) {
        prefetch_walk(pf, n, true);
        STAT_INCR(tstats(c)->prefetch_batches);
        STAT_ADD(tstats(c)->prefetch_keys, n);
    }
}

/* The bytes of a request's data block after its line (with "\r\n"):
 * the stores and ms carry one.  SIZE_MAX when an ms length is bad (the
 * request will be refused; the scan stops there). */
static size_t
data_bytes(const struct request *req)
{
    uint32_t v;

    if (req_has_data(req->type)) {
        return (size_t)req->vlen + 2;
    }
    if (req->type == REQ_MS) {
        return req->ntokens >= 3 && token_u32(&req->tokens[2], &v)
               ? (size_t)v + 2 : SIZE_MAX;
    }
    return 0;
}

/* Add the keys a request will look up to pf[n..max); the new n. */
static unsigned
add_keys(const struct request *req, struct prefetch_key *pf, unsigned n,
         unsigned max)
{
    struct token key = req->key;

    switch (req->type) {
    case REQ_GET: case REQ_GETS: case REQ_GAT: case REQ_GATS: {
        struct token cursor = req->keys;

        return n + next_window(NULL, &cursor, pf + n, max - n);
    }
    case REQ_MG: case REQ_MS: case REQ_MD: case REQ_MA: case REQ_ME:
        if (req->ntokens < 2) {
            return n;
        }
        key = req->tokens[1];
        break;
    case REQ_SET: case REQ_ADD: case REQ_REPLACE: case REQ_APPEND:
    case REQ_PREPEND: case REQ_CAS: case REQ_DELETE: case REQ_INCR:
    case REQ_DECR: case REQ_TOUCH:
        break;
    default:
        return n;
    }
    if (key.len == 0 || key.len > PROTO_KEY_MAX) {
        return n;
    }
    pf[n].key = key.p;
    pf[n].nkey = key.len;
    pf[n].hv = hash_murmur3(key.p, key.len);
    return n + 1;
}

/* The request `first` (parsed, `len` bytes of line) begins c's unread
 * bytes and more follow: parse the requests after it whose bytes are all
 * here, into c->worker->ahead, and walk the keys of all of them side by
 * side, up to prefetch_batch keys.  The requests then run one by one
 * from ahead[] (process_ahead_take()), and the keys' hashes are reused
 * (process_key_hash()).  Returns the bytes covered from c->rstart. */
size_t
process_prefetch_pipeline(struct conn *c, const struct request *first,
                          size_t len)
{
    struct worker *w = c->worker;
    unsigned max = settings.prefetch_batch, n, k = 0;
    struct prefetch_key *pf = w->pf;
    const char *buf = c->rbuf + c->rstart;
    size_t have = c->rend - c->rstart, off = len;
    size_t data = data_bytes(first);

    if (max < 2 || first->type == REQ_ERROR || data > have - off) {
        return 0;
    }
    off += data;
    n = add_keys(first, pf, 0, max);
    w->memo = n > 0 ? pf[0] : (struct prefetch_key){ 0 };
    while (n < max && k < max && off < have) {
        struct ahead_req *a = &w->ahead[k];
        ssize_t line = text_parse(&a->req, buf + off, have - off);
        unsigned m;

        if (line <= 0 || a->req.type == REQ_ERROR) {
            break;
        }
        data = data_bytes(&a->req);
        if (data > have - off - (size_t)line) {
            break;
        }
        m = add_keys(&a->req, pf, n, max);
        a->key = m > n ? pf[n] : (struct prefetch_key){ 0 };
        a->off = c->rstart + off;
        a->len = (size_t)line;
        n = m;
        k++;
        off += (size_t)line + data;
    }
    w->ahead_conn = k > 0 ? c : NULL;
    w->ahead_n = k;
    w->ahead_next = 0;
    process_prefetch(c, pf, n);
    return off;
}

struct ahead_req *
process_ahead_take(struct conn *c)
{
    struct worker *w = c->worker;
    struct ahead_req *a;

    if (w->ahead_conn != c) {
        return NULL;
    }
    a = &w->ahead[w->ahead_next];
    if (a->off != c->rstart) {
        /* not where this connection is (cannot happen: a guard) */
        w->ahead_conn = NULL;
        return NULL;
    }
    if (++w->ahead_next == w->ahead_n) {
        w->ahead_conn = NULL;
    }
    w->memo = a->key;
    return a;
}

void
process_ahead_drop(struct conn *c)
{
    if (c->worker->ahead_conn == c) {
        c->worker->ahead_conn = NULL;
    }
}

/*
 * The keys go in windows of prefetch_batch: hashed, walked side by side
 * (storage/prefetch.h), then fetched in order.  A window of one key (the
 * last of a multiget, or prefetch_batch 0 or 1) is fetched alone.
 */
static enum process_result
process_get(struct conn *c, struct request *req)
{
    bool touch = req->type == REQ_GAT || req->type == REQ_GATS;
    bool with_cas = req->type == REQ_GETS || req->type == REQ_GATS;
    rel_time_t exptime = touch ? clock_realtime(req->exptime) : 0;
    unsigned max = settings.prefetch_batch > 1 ? settings.prefetch_batch : 1;
    struct prefetch_key *pf = c->worker->pf;
    struct token cursor = req->keys;
    unsigned n;

    /* A key list no longer than one key cannot hold a key too long. */
    if (req->keys.len > PROTO_KEY_MAX && !keys_ok(&req->keys)) {
        return reply(c, RSP_CLIENT_ERROR_FORMAT);
    }
    /* One key, already split and hashed by the look-ahead. */
    if (c->worker->memo.key == req->keys.p &&
        c->worker->memo.nkey == req->keys.len) {
        return get_one(c, &c->worker->memo, touch, exptime, with_cas) != 0
               ? reply(c, RSP_SERVER_ERROR_OOM_GET) : reply(c, RSP_END);
    }
    do {
        n = next_window(c, &cursor, pf, max);
        process_prefetch(c, pf, n);
        for (unsigned i = 0; i < n; i++) {
            if (get_one(c, &pf[i], touch, exptime, with_cas) != 0) {
                return reply(c, RSP_SERVER_ERROR_OOM_GET);
            }
        }
    } while (cursor.len > 0);
    return reply(c, RSP_END);
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

enum process_result
process_store_refused(struct conn *c, enum cache_status st, const char *key,
                      size_t nkey, uint32_t hv, bool is_set, uint32_t vlen)
{
    if (st == CACHE_TOO_LARGE) {
        STAT_INCR(tstats(c)->store_too_large);
        conn_out_rsp(c, RSP_SERVER_ERROR_TOO_LARGE);
    } else {
        STAT_INCR(tstats(c)->store_no_memory);
        conn_out_rsp(c, RSP_SERVER_ERROR_NO_MEMORY);
    }
    if (is_set) {
        cache_delete(key, nkey, hv, 0, NULL);
    }
    c->swallow = (uint64_t)vlen + 2;
    return PROCESS_SWALLOW;
}

static enum process_result
process_update(struct conn *c, struct request *req)
{
    uint32_t hv = process_key_hash(c, req->key.p, req->key.len);
    enum cache_status st;
    struct item *it;

    it = cache_alloc(req->key.p, req->key.len, hv, req->flags,
                     clock_realtime(req->exptime), req->vlen, &st);
    if (it == NULL) {
        return process_store_refused(c, st, req->key.p, req->key.len, hv,
                                     req->type == REQ_SET, req->vlen);
    }
    c->nitem = it;
    c->nread_off = 0;
    c->ncmd = req->type;
    c->ncas = req->cas;
    c->nnoreply = req->noreply;
    return PROCESS_NREAD;
}

static enum rsp_type
store_reply(struct conn *c, enum req_type cmd, enum cache_status st,
            unsigned clsid)
{
    struct thread_stats *ts = tstats(c);

    if (cmd == REQ_CAS) {
        if (st == CACHE_STORED) {
            STAT_INCR(ts->slab[clsid].cas_hits);
        } else if (st == CACHE_EXISTS) {
            STAT_INCR(ts->slab[clsid].cas_badval);
        } else if (st == CACHE_NOT_FOUND) {
            STAT_INCR(ts->cas_misses);
        }
    }
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
    unsigned clsid = item_clsid(it);
    enum rsp_type r;

    if (c->ncmd == REQ_MS) {
        process_meta_store(c);
        return;
    }
    c->nitem = NULL;
    c->noreply = c->nnoreply;
    STAT_INCR(tstats(c)->slab[clsid].cmd_set);
    if (!item_value_crlf_ok(it)) {
        r = RSP_CLIENT_ERROR_CHUNK;
    } else {
        r = store_reply(c, c->ncmd, cache_store(it, store_op(c->ncmd),
                                                 c->ncas), clsid);
        if (settings.detail_enabled) {
            admin_detail_record(item_key(it), item_nkey(it), DETAIL_SET,
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
    uint32_t hv = process_key_hash(c, req->key.p, req->key.len);
    unsigned clsid = 0;
    enum cache_status st;

    st = cache_delete(req->key.p, req->key.len, hv, 0, &clsid);
    if (settings.detail_enabled) {
        admin_detail_record(req->key.p, req->key.len, DETAIL_DELETE,
                            st == CACHE_DELETED);
    }
    if (st == CACHE_DELETED) {
        STAT_INCR(tstats(c)->slab[clsid].delete_hits);
        return reply(c, RSP_DELETED);
    }
    STAT_INCR(tstats(c)->delete_misses);
    return reply(c, RSP_NOT_FOUND);
}

static enum process_result
process_delta(struct conn *c, struct request *req)
{
    bool incr = req->type == REQ_INCR;
    uint32_t hv = process_key_hash(c, req->key.p, req->key.len);
    struct thread_stats *ts = tstats(c);
    uint64_t value;
    unsigned clsid = 0;
    char buf[32];

    switch (cache_delta(req->key.p, req->key.len, hv, incr, req->delta,
                        &value, &clsid)) {
    case CACHE_OK:
        if (incr) {
            STAT_INCR(ts->slab[clsid].incr_hits);
        } else {
            STAT_INCR(ts->slab[clsid].decr_hits);
        }
        conn_out(c, buf, compose_u64(buf, sizeof(buf), value));
        return PROCESS_OK;
    case CACHE_NOT_FOUND:
        if (incr) {
            STAT_INCR(ts->incr_misses);
        } else {
            STAT_INCR(ts->decr_misses);
        }
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
    uint32_t hv = process_key_hash(c, req->key.p, req->key.len);
    struct thread_stats *ts = tstats(c);
    enum cache_status st;
    struct item *it;

    it = cache_touch(req->key.p, req->key.len, hv,
                     clock_realtime(req->exptime), &st);
    STAT_INCR(ts->cmd_touch);
    if (it == NULL) {
        STAT_INCR(ts->touch_misses);
        return reply(c, RSP_NOT_FOUND);
    }
    STAT_INCR(ts->slab[item_clsid(it)].touch_hits);
    cache_release(it);
    return reply(c, RSP_TOUCHED);
}

/* ---- the rest --------------------------------------------------------- */

static enum process_result
process_flush_all(struct conn *c, struct request *req)
{
    rel_time_t when;

    if (!settings.flush_enabled) {
        return reply(c, RSP_CLIENT_ERROR_FLUSH_DISABLED);
    }
    STAT_INCR(tstats(c)->cmd_flush);
    when = req->num > 0 ? clock_realtime(req->num) - 1 : clock_now() - 1;
    admin_set_oldest(when);
    cache_flush(when);
    return reply(c, RSP_OK);
}

static enum process_result
process_version(struct conn *c)
{
    char buf[64];

    conn_out(c, buf, compose_version(buf, sizeof(buf), MCPM_VERSION));
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
    case REQ_QUIT: return PROCESS_CLOSE;
    case REQ_SHUTDOWN: return process_shutdown_cmd(c, req);
    case REQ_STATS: return admin_stats(c, req);
    case REQ_CACHE_MEMLIMIT: return admin_memlimit(c, req);
    case REQ_SLABS: return admin_slabs(c, req);
    case REQ_LRU: return admin_lru(c, req);
    case REQ_LRU_CRAWLER: return admin_lru_crawler(c, req);
    case REQ_MN: case REQ_MG: case REQ_MS: case REQ_MD: case REQ_MA:
    case REQ_ME:
        return process_meta(c, req);
    case REQ_ERROR:
        conn_out_rsp(c, req->err);
        if (req->swallow > 0) {
            c->swallow = req->swallow;
            return PROCESS_SWALLOW;
        }
        return PROCESS_OK;
    default:
        return reply(c, RSP_ERROR);
    }
}
