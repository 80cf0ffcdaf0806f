/*
 * process_bin.c: the binary protocol's commands (process_bin.h).
 *
 * One small function per command, as process.c has for text: the rules
 * are exec.h's and storage's; what is here is the binary protocol's own,
 * checked against memcached 1.6 on the wire:
 *
 *   - a quiet form (SETQ, DELETEQ, INCREMENTQ, ...) says nothing on
 *     success, and GETQ/GETKQ/GATQ/GATKQ nothing on a miss; an error is
 *     always sent;
 *   - a store with a CAS is a compare-and-swap, whatever its opcode;
 *   - NOT_STORED reads "exists" for ADD, "not found" for REPLACE and
 *     "not stored" for APPEND and PREPEND;
 *   - INCREMENT and DECREMENT create a missing counter holding their
 *     initial value, unless the expiration is 0xffffffff.
 *
 * Locking: runs on the connection's worker thread; storage takes the key's
 * item lock inside each call (storage/cache/cache.h).
 */
#include "config.h"

#include "memcached-pm/cmd/process_bin.h"

#include <string.h>

#include "memcached-pm/admin/admin_stats.h"
#include "memcached-pm/admin/detail.h"
#include "memcached-pm/base/log.h"
#include "memcached-pm/base/settings.h"
#include "memcached-pm/cmd/exec.h"
#include "memcached-pm/cmd/lookahead.h"
#include "memcached-pm/cmd/process_auth.h"
#include "memcached-pm/conn/conn_out.h"
#include "memcached-pm/watch/logger.h"

#define COUNTER_EXPTIME_NONE 0xffffffffu  /* incr/decr: do not create */
#define VALUE_HEAD_MAX (BIN_HEADER_LEN + 4 + PROTO_KEY_MAX)

/* ---- replies ---------------------------------------------------------- */

static enum process_result
bin_error(struct conn *c, enum bin_status st)
{
    const char *text = bin_status_text(st);

    conn_out_bin(c, st, 0, NULL, 0, NULL, 0, text, (uint32_t)strlen(text));
    return PROCESS_OK;
}

/* Success: an empty packet, or nothing for a quiet form. */
static enum process_result
bin_ok(struct conn *c, bool quiet, uint64_t cas)
{
    if (!quiet) {
        conn_out_bin(c, BIN_SUCCESS, cas, NULL, 0, NULL, 0, NULL, 0);
    }
    return PROCESS_OK;
}

/* A hit: extras (the client flags), the key when asked, and the value
 * unless it is a TOUCH; takes over the caller's reference. */
static int
out_item(struct conn *c, struct item *it, bool with_key, bool with_value)
{
    uint16_t nkey = with_key ? (uint16_t)item_nkey(it) : 0;
    uint32_t nval = with_value ? item_vlen(it) : 0;
    size_t head = BIN_HEADER_LEN + 4 + nkey;
    char *p = with_value ? conn_out_reserve_value(c, VALUE_HEAD_MAX, it)
                         : conn_out_reserve(c, VALUE_HEAD_MAX);

    if (p == NULL) {
        cache_release(it);
        return -1;
    }
    bin_compose_header(p, c->bin_opcode, BIN_SUCCESS, c->bin_opaque,
                       item_cas(it), 4, nkey, 4 + (uint32_t)nkey + nval);
    if (settings.verbose > 1) {
        log_bin_header(c->fd, '>', "Writing bin response:",
                       (const unsigned char *)p);
    }
    bin_put32(p + BIN_HEADER_LEN, item_client_flags(it));
    memcpy(p + BIN_HEADER_LEN + 4, item_key(it), nkey);
    if (with_value) {
        return conn_out_line_value(c, head, it);
    }
    conn_out_commit(c, head);
    cache_release(it);
    return 0;
}

/* ---- retrieval -------------------------------------------------------- */

struct view_out {
    struct conn *c;
    bool with_key;
};

/* out_item()'s header, extras and key for a hit read without the lock. */
static size_t
view_head(char *p, const struct cache_view *v, void *arg)
{
    const struct view_out *o = arg;
    uint16_t nkey = o->with_key ? v->nkey : 0;

    bin_compose_header(p, o->c->bin_opcode, BIN_SUCCESS, o->c->bin_opaque,
                       v->cas, 4, nkey, 4 + (uint32_t)nkey + v->vlen);
    bin_put32(p + BIN_HEADER_LEN, v->client_flags);
    memcpy(p + BIN_HEADER_LEN + 4, v->key, nkey);
    return BIN_HEADER_LEN + 4 + nkey;
}

static int
out_view(const struct cache_view *v, void *arg)
{
    struct view_out *o = arg;

    return conn_out_view(o->c, v, VALUE_HEAD_MAX, true, view_head, o);
}

/* GET, GETK, GAT, GATK, TOUCH and their quiet forms.  A GET or GETK is
 * first tried without the lock (exec_get_peek()); -vv logs each reply
 * header, which that path does not. */
static enum process_result
bin_get(struct conn *c, const struct bin_request *r)
{
    const char *key = r->key.p;
    size_t nkey = r->key.len;
    bool touch = r->cmd != BIN_CMD_GET;
    struct prefetch_key own;
    const struct prefetch_key *k = lookahead_key(c, key, nkey, &own);
    struct view_out o = { c, r->with_key };
    struct item *it = NULL;
    int peeked = -1;

    if (!touch && settings.verbose <= 1) {
        peeked = exec_get_peek(c->stats, k, CONN_VALUE_COPY_MAX - 2, true,
                               out_view, &o);
    }
    if (peeked < 0) {
        it = exec_get(c->stats, key, nkey, k->hv, touch,
                      touch ? clock_realtime(r->exptime) : 0);
    }
    if (settings.detail_enabled) {
        detail_record(key, nkey, DETAIL_GET, it != NULL || peeked == 1);
    }
    if (peeked == 1) {
        return PROCESS_OK;
    }
    if (it != NULL) {
        if (out_item(c, it, r->with_key, r->cmd != BIN_CMD_TOUCH) != 0) {
            return bin_error(c, BIN_ENOMEM);
        }
        return PROCESS_OK;
    }
    if (r->quiet) {
        return PROCESS_OK;
    }
    if (r->with_key) {
        /* GETK and GATK echo the key on a miss, with no text. */
        conn_out_bin(c, BIN_KEY_ENOENT, 0, NULL, 0, key, (uint16_t)nkey,
                     NULL, 0);
        return PROCESS_OK;
    }
    return bin_error(c, BIN_KEY_ENOENT);
}

/* ---- storage ---------------------------------------------------------- */

static enum req_type
store_type(enum bin_cmd cmd)
{
    switch (cmd) {
    case BIN_CMD_ADD: return REQ_ADD;
    case BIN_CMD_REPLACE: return REQ_REPLACE;
    case BIN_CMD_APPEND: return REQ_APPEND;
    case BIN_CMD_PREPEND: return REQ_PREPEND;
    case BIN_CMD_SET:
    default: return REQ_SET;
    }
}

/* SET, ADD, REPLACE, APPEND, PREPEND: the item the value is read into.
 * APPEND and PREPEND carry no flags or expiration (the old item's are
 * kept). */
static enum process_result
bin_update(struct conn *c, const struct bin_request *r)
{
    const char *key = r->key.p;
    size_t nkey = r->key.len;
    enum cache_status st;
    struct item *it;

    it = exec_alloc(c->stats, key, nkey, lookahead_hash(c, key, nkey),
                    r->flags, clock_realtime(r->exptime),
                    r->vlen, r->cmd == BIN_CMD_SET, &st);
    if (it == NULL) {
        bin_error(c, st == CACHE_TOO_LARGE ? BIN_E2BIG : BIN_ENOMEM);
        c->swallow = r->vlen;
        return PROCESS_SWALLOW;
    }
    c->nitem = it;
    c->nread_off = 0;
    c->ncmd = store_type(r->cmd);
    c->ncas = r->cas;
    c->nnoreply = r->quiet;
    return PROCESS_NREAD;
}

/* A binary value comes without the "\r\n" a stored value ends in. */
static void
value_terminate(struct item *it)
{
    static const char crlf[2] = { '\r', '\n' };
    struct iovec iov[2];
    size_t n = item_value_iov(it, item_vlen(it), iov, 2), k = 0;

    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < iov[i].iov_len && k < 2; j++) {
            ((char *)iov[i].iov_base)[j] = crlf[k++];
        }
    }
}

static enum cache_op
store_op(enum req_type t, uint64_t cas)
{
    switch (t) {
    case REQ_APPEND: return CACHE_APPEND;
    case REQ_PREPEND: return CACHE_PREPEND;
    default: break;
    }
    if (cas != 0) {
        return CACHE_CAS;
    }
    return t == REQ_ADD ? CACHE_ADD : t == REQ_REPLACE ? CACHE_REPLACE
                                                       : CACHE_SET;
}

static enum bin_status
not_stored(enum req_type t)
{
    switch (t) {
    case REQ_ADD: return BIN_KEY_EEXISTS;
    case REQ_REPLACE: return BIN_KEY_ENOENT;
    default: return BIN_NOT_STORED;
    }
}

void
process_bin_store(struct conn *c)
{
    struct item *it = c->nitem;
    struct cache_mstore a = {
        .op = store_op(c->ncmd, c->ncas),
        .compare = c->ncas != 0,
        .compare_cas = c->ncas,
    };
    enum cache_status st;

    c->nitem = NULL;
    value_terminate(it);
    exec_data_ok(c->stats, it);
    st = exec_store(c->stats, it, &a);
    if (settings.detail_enabled) {
        detail_record(item_key(it), item_nkey(it), DETAIL_SET, true);
    }
    cache_release(it);
    switch (st) {
    case CACHE_STORED:
        bin_ok(c, c->nnoreply, a.cas);
        break;
    case CACHE_EXISTS:
        bin_error(c, BIN_KEY_EEXISTS);
        break;
    case CACHE_NOT_FOUND:
        bin_error(c, BIN_KEY_ENOENT);
        break;
    default:
        bin_error(c, not_stored(c->ncmd));
        break;
    }
}

/* ---- single-key commands ---------------------------------------------- */

static enum process_result
bin_delete(struct conn *c, const struct bin_request *r)
{
    const char *key = r->key.p;
    size_t nkey = r->key.len;
    struct cache_mdelete a = {
        .compare = r->cas != 0,
        .compare_cas = r->cas,
    };
    enum cache_status st;

    st = exec_delete(c->stats, key, nkey, lookahead_hash(c, key, nkey), &a,
                     EXEC_DEL_BINARY);
    if (settings.detail_enabled) {
        detail_record(key, nkey, DETAIL_DELETE, st == CACHE_DELETED);
    }
    switch (st) {
    case CACHE_DELETED: return bin_ok(c, r->quiet, 0);
    case CACHE_EXISTS: return bin_error(c, BIN_KEY_EEXISTS);
    case CACHE_NOT_FOUND: return bin_error(c, BIN_KEY_ENOENT);
    default: return bin_error(c, BIN_ENOMEM);
    }
}

static enum process_result
bin_delta(struct conn *c, const struct bin_request *r)
{
    const char *key = r->key.p;
    size_t nkey = r->key.len;
    struct cache_mdelta a = {
        .incr = r->cmd == BIN_CMD_INCR,
        .delta = r->delta,
        .compare = r->cas != 0,
        .compare_cas = r->cas,
        .vivify = r->exptime != COUNTER_EXPTIME_NONE,
        .vivify_exptime = clock_realtime(r->exptime),
        .initial = r->initial,
    };
    char value[8];

    switch (exec_delta(c->stats, key, nkey, lookahead_hash(c, key, nkey),
                       &a)) {
    case CACHE_OK:
        if (!r->quiet) {
            bin_put64(value, a.value);
            conn_out_bin(c, BIN_SUCCESS, a.cas, NULL, 0, NULL, 0, value,
                         sizeof(value));
        }
        return PROCESS_OK;
    case CACHE_NOT_FOUND: return bin_error(c, BIN_KEY_ENOENT);
    case CACHE_EXISTS: return bin_error(c, BIN_KEY_EEXISTS);
    case CACHE_NON_NUMERIC: return bin_error(c, BIN_DELTA_BADVAL);
    default: return bin_error(c, BIN_ENOMEM);
    }
}

/* ---- the rest --------------------------------------------------------- */

static enum process_result
bin_flush(struct conn *c, const struct bin_request *r)
{
    if (!settings.flush_enabled) {
        return bin_error(c, BIN_AUTH_ERROR);
    }
    exec_flush(c->stats, r->exptime);
    return bin_ok(c, r->quiet, 0);
}

static enum process_result
bin_version(struct conn *c)
{
    conn_out_bin(c, BIN_SUCCESS, 0, NULL, 0, NULL, 0, MCPM_VERSION,
                 sizeof(MCPM_VERSION) - 1);
    return PROCESS_OK;
}

/* The request was refused by the parser: memcached's status, then a
 * close or the rest of the body dropped. */
static enum process_result
bin_refused(struct conn *c, const struct bin_request *r)
{
    bin_error(c, r->status);
    if (r->close) {
        return PROCESS_CLOSE;
    }
    c->swallow = r->swallow;
    return r->swallow > 0 ? PROCESS_SWALLOW : PROCESS_OK;
}

/* -vv: the command lines memcached prints for a request. */
static void
log_request(const struct conn *c, const struct bin_request *r)
{
    int nkey = (int)r->key.len;

    switch (r->cmd) {
    case BIN_CMD_GET: case BIN_CMD_GAT: case BIN_CMD_TOUCH:
        log_write("<%d %s %.*s", c->fd, r->cmd == BIN_CMD_GET ? "GET"
                  : "TOUCH", nkey, r->key.p);
        break;
    case BIN_CMD_SET: case BIN_CMD_ADD: case BIN_CMD_REPLACE:
        log_write("<%d %s %.*s Value len is %u", c->fd,
                  r->cmd == BIN_CMD_SET ? "SET" : r->cmd == BIN_CMD_ADD
                  ? "ADD" : "REPLACE", nkey, r->key.p, r->vlen);
        break;
    case BIN_CMD_STAT:
        log_write("<%d STATS %.*s", c->fd, nkey, r->key.p);
        break;
    default:
        break;
    }
}

enum process_result
process_bin(struct conn *c, const struct bin_request *r)
{
    c->bin_opcode = r->opcode;
    c->bin_opaque = r->opaque;
    if (settings.verbose > 1) {
        log_request(c, r);
    }
    if (settings.sasl && !process_sasl_allowed(c, r)) {
        bin_error(c, BIN_AUTH_ERROR);
        return PROCESS_CLOSE;
    }
    switch (r->cmd) {
    case BIN_CMD_GET: case BIN_CMD_GAT: case BIN_CMD_TOUCH:
        return bin_get(c, r);
    case BIN_CMD_SET: case BIN_CMD_ADD: case BIN_CMD_REPLACE:
    case BIN_CMD_APPEND: case BIN_CMD_PREPEND:
        return bin_update(c, r);
    case BIN_CMD_DELETE: return bin_delete(c, r);
    case BIN_CMD_INCR: case BIN_CMD_DECR: return bin_delta(c, r);
    case BIN_CMD_FLUSH: return bin_flush(c, r);
    case BIN_CMD_NOOP: return bin_ok(c, false, 0);
    case BIN_CMD_VERSION: return bin_version(c);
    case BIN_CMD_QUIT:
        bin_ok(c, r->quiet, 0);
        c->close_reason = LOG_CLOSE_NORMAL;
        return PROCESS_CLOSE;
    case BIN_CMD_STAT: return admin_stats_bin(c, r->key.p, r->key.len);
    case BIN_CMD_SASL:
        if (settings.sasl) {
            return process_sasl(c, r);
        }
        /* SASL is off (-S): memcached's answer, the data dropped. */
        bin_error(c, BIN_UNKNOWN_COMMAND);
        c->swallow = r->vlen;
        return r->vlen > 0 ? PROCESS_SWALLOW : PROCESS_OK;
    case BIN_CMD_ERROR:
    default:
        return bin_refused(c, r);
    }
}
