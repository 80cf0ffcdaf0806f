/*
 * process_auth.c: -Y's exchange and -S's SASL PLAIN (process_auth.h),
 * with memcached 1.6.45's replies.
 */
#include "config.h"

#include "memcached-pm/cmd/process_auth.h"

#include <string.h>

#include "memcached-pm/base/log.h"
#include "memcached-pm/base/settings.h"
#include "memcached-pm/base/stats.h"
#include "memcached-pm/conn/conn_out.h"
#include "memcached-pm/security/auth.h"
#include "memcached-pm/security/sasl_cyrus.h"
#include "proto/response.h"
#include "proto/token.h"

#define AUTH_LINE_MAX  2048         /* no newline by then: junk, close */
#define AUTH_LINE_MIN  6            /* shorter cannot be "set a 0 0 1" */
#define AUTH_DATA_MAX  16384
#define SASL_MECH_MAX  32

static void
counted(struct conn *c, bool ok)
{
    STAT_INCR(c->stats->auth_cmds);
    if (!ok) {
        STAT_INCR(c->stats->auth_errors);
    }
}

/* ---- -Y --------------------------------------------------------------- */

ssize_t
process_auth_text(struct conn *c)
{
    const char *buf = c->rbuf + c->rstart;
    size_t have = c->rend - c->rstart;
    const char *nl = memchr(buf, '\n', have);
    struct token tok[8];
    size_t line, used;
    uint32_t size;
    bool more;
    unsigned n;
    const char *data, *space;
    bool ok;

    if (nl == NULL) {
        return have > AUTH_LINE_MAX ? PROTO_ECLOSE : PROTO_EUNFIN;
    }
    line = (size_t)(nl - buf);
    if (line < AUTH_LINE_MIN) {
        return PROTO_ECLOSE;
    }
    n = token_split(buf, line > 0 && buf[line - 1] == '\r' ? line - 1 : line,
                    tok, 8, &more);
    used = line + 1;
    if (n < 5 || tok[0].len < 3 || memcmp(tok[0].p, "set", 3) != 0 ||
        !token_u32(&tok[4], &size)) {
        conn_out_rsp(c, RSP_AUTH_NEEDED);
        return (ssize_t)used;
    }
    if (size > AUTH_DATA_MAX) {
        conn_out_rsp(c, RSP_AUTH_TOO_LONG);
        return (ssize_t)used;
    }
    if (have - used < (size_t)size + 2) {
        return PROTO_EUNFIN;
    }
    data = buf + used;
    used += (size_t)size + 2;
    if (data[size] != '\r' || data[size + 1] != '\n') {
        conn_out_rsp(c, RSP_AUTH_TERMINATION);
        return (ssize_t)used;
    }
    /* "user password": the user ends at the first space, the password
     * is the rest of the data */
    if ((space = memchr(data, ' ', size)) == NULL) {
        conn_out_rsp(c, RSP_AUTH_FORMAT);
        return (ssize_t)used;
    }
    ok = auth_check(AUTH_ASCII, data, (size_t)(space - data), space + 1,
                    (size_t)(data + size - space - 1));
    counted(c, ok);
    if (ok) {
        c->proto = CONN_TEXT;
        conn_out_rsp(c, RSP_STORED);
    } else {
        conn_out_rsp(c, RSP_AUTH_FAILED);
    }
    return (ssize_t)used;
}

/* ---- -S --------------------------------------------------------------- */

static enum process_result
sasl_reply(struct conn *c, uint16_t status, const char *body)
{
    conn_out_bin(c, status, 0, NULL, 0, NULL, 0, body,
                 (uint32_t)strlen(body));
    return PROCESS_OK;
}

/* PLAIN's message: [authzid] NUL authcid NUL password (RFC 4616).  A
 * client may act only as itself. */
static bool
plain_ok(const char *msg, size_t len)
{
    const char *nul1 = memchr(msg, '\0', len), *nul2, *user, *pass;
    size_t ulen;

    if (nul1 == NULL ||
        (nul2 = memchr(nul1 + 1, '\0', len - (size_t)(nul1 + 1 - msg)))
        == NULL) {
        return false;
    }
    user = nul1 + 1;
    ulen = (size_t)(nul2 - user);
    pass = nul2 + 1;
    if (nul1 != msg && ((size_t)(nul1 - msg) != ulen ||
                        memcmp(msg, user, ulen) != 0)) {
        return false;
    }
    return auth_check(AUTH_SASL, user, ulen, pass,
                      len - (size_t)(pass - msg));
}

static enum process_result
sasl_verdict(struct conn *c, bool ok)
{
    counted(c, ok);
    c->sasl_started = false;
    if (!ok) {
        log_info("<%d SASL authentication failed", c->fd);
        return sasl_reply(c, BIN_AUTH_ERROR, bin_status_text(BIN_AUTH_ERROR));
    }
    c->authenticated = true;
    return sasl_reply(c, BIN_SUCCESS, "Authenticated");
}

#ifdef ENABLE_CYRUS_SASL
/* AUTH or STEP through Cyrus SASL: its verdict, and what it sends. */
static enum process_result
cyrus_step(struct conn *c, const struct bin_request *r, const char *data)
{
    char mech[SASL_MECH_MAX + 1];
    const char *out;
    unsigned outlen;
    bool start = r->opcode == BIN_OP_SASL_AUTH;
    enum cyrus_result v;

    if (!start && !c->sasl_started) {
        log_info("<%d SASL_STEP without SASL_AUTH", c->fd);
        return sasl_verdict(c, false);
    }
    memcpy(mech, r->key.p, r->key.len);
    mech[r->key.len] = '\0';
    v = cyrus_auth(&c->sasl, c->fd, start, mech, data, r->vlen, &out,
                   &outlen);
    if (v != CYRUS_CONTINUE) {
        return sasl_verdict(c, v == CYRUS_OK);
    }
    c->sasl_started = true;
    conn_out_bin(c, BIN_AUTH_CONTINUE, 0, NULL, 0, NULL, 0, out, outlen);
    return PROCESS_OK;
}
#endif

enum process_result
process_sasl(struct conn *c, const struct bin_request *r)
{
    const char *data = c->rbuf + c->rstart;
    bool plain;

    if (r->opcode == BIN_OP_SASL_LIST_MECHS) {
#ifdef ENABLE_CYRUS_SASL
        if (cyrus_in_use()) {
            const char *mechs = cyrus_mechs(&c->sasl);

            return mechs ? sasl_reply(c, BIN_SUCCESS, mechs)
                         : sasl_reply(c, BIN_AUTH_ERROR,
                                      bin_status_text(BIN_AUTH_ERROR));
        }
#endif
        return sasl_reply(c, BIN_SUCCESS, "PLAIN");
    }
    if (r->key.len <= SASL_MECH_MAX) {
        c->authenticated = false;   /* a new attempt, as memcached's */
    }
    if (r->key.len > SASL_MECH_MAX || r->vlen > SASL_DATA_MAX) {
        /* a mechanism name memcached refuses, or credentials longer than
         * any PLAIN message needs: answered, the data dropped unread */
        if (r->key.len > SASL_MECH_MAX) {
            sasl_reply(c, BIN_EINVAL, bin_status_text(BIN_EINVAL));
        } else {
            sasl_verdict(c, false);
        }
        c->swallow = r->vlen;
        return r->vlen > 0 ? PROCESS_SWALLOW : PROCESS_OK;
    }
    c->rstart += r->vlen;           /* the data is all in (machine.c) */
#ifdef ENABLE_CYRUS_SASL
    if (cyrus_in_use()) {
        return cyrus_step(c, r, data);
    }
#endif
    plain = r->key.len == 5 && memcmp(r->key.p, "PLAIN", 5) == 0;
    if (r->opcode == BIN_OP_SASL_AUTH) {
        if (!plain) {
            return sasl_verdict(c, false);
        }
        if (r->vlen == 0) {
            /* no initial response: ask for it (an empty challenge) */
            c->sasl_started = true;
            return sasl_reply(c, BIN_AUTH_CONTINUE, "");
        }
        return sasl_verdict(c, plain_ok(data, r->vlen));
    }
    /* SASL_STEP: only after an AUTH that asked for more */
    if (!c->sasl_started || !plain) {
        log_info("<%d SASL_STEP without SASL_AUTH", c->fd);
        return sasl_verdict(c, false);
    }
    return sasl_verdict(c, plain_ok(data, r->vlen));
}
