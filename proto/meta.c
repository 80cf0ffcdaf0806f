/*
 * meta.c: the flags of memcached's meta commands, checked and decoded, and
 * the reply lines built from them.
 *
 * Parsing follows memcached's pre-parser (_meta_flag_preparse) and the
 * checks each command makes around it, in the same order, because the
 * order decides which error a client sees:
 *
 *   ms only:  <datalen> missing or bad        -> bad command line format,
 *                                                nothing swallowed
 *   all:      key missing or over 250 bytes   -> bad command line format
 *             more than 20 tokens             -> options flags are too long
 *                                                (ms: "... flags too long")
 *   flags, left to right:
 *             byte >= 127 or a repeated flag  -> duplicate flag, at once
 *             a letter no meta command knows  -> invalid flag, at once
 *             a bad argument                  -> its error, but parsing goes
 *                                                on and the last one wins; a
 *                                                bad F sets no message of its
 *                                                own (bad command line format)
 *   md, ma:   any error of the flag pass      -> invalid or duplicate flag
 *   ms, ma:   M letter not a mode             -> invalid mode for ms/ma M token
 *   all:      O token over 32 bytes, the O    -> opaque token too long
 *             included
 *
 * After a bad ms whose <datalen> was good, memcached 1.6.45 swallows the
 * <datalen> + 2 bytes of the data block.  `me` is apart: only a third
 * token exactly "b" means anything, and a bad base64 key there is a format
 * error.
 *
 * The b flag's key is decoded when the flag is met, as memcached decodes it
 * in place at that point, so a later bad flag still overrides the decoding
 * error.
 */
#include "proto/meta.h"

#include "proto/request.h"
#include "proto/response.h"
#include "proto/token.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Every flag letter the pre-parser accepts, whatever the command. */
static const char known_flags[] = "bcfhklqstuvxCDEFIJLMNOPRT";

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* ---- base64 -------------------------------------------------------- */

/* The 6-bit value of c, 64 for the pad '=', -1 outside the alphabet. */
static int
b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z') {
        return c - 'A';
    }
    if (c >= 'a' && c <= 'z') {
        return c - 'a' + 26;
    }
    if (c >= '0' && c <= '9') {
        return c - '0' + 52;
    }
    if (c == '+') {
        return 62;
    }
    if (c == '/') {
        return 63;
    }
    return c == '=' ? 64 : -1;
}

/* Write the 3 bytes of one quantum; '=' counted as 0. */
static void
b64_put_quantum(const int q[4], char *out)
{
    unsigned v = 0;

    for (int i = 0; i < 4; i++) {
        v = (v << 6) | (unsigned)(q[i] & 63);
    }
    out[0] = (char)(v >> 16);
    out[1] = (char)(v >> 8);
    out[2] = (char)v;
}

ssize_t
meta_base64_decode(const char *in, size_t len, char *out, size_t cap)
{
    size_t count = 0, n = 0;
    int q[4];
    int fill = 0, pad = 0;

    for (size_t i = 0; i < len; i++) {
        count += b64_value((unsigned char)in[i]) >= 0;
    }
    if (count == 0 || count % 4 != 0 || count / 4 * 3 > cap) {
        return -1;
    }
    for (size_t i = 0; i < len; i++) {
        int v = b64_value((unsigned char)in[i]);

        if (v < 0) {
            continue;
        }
        pad += v == 64;
        q[fill++] = v;
        if (fill < 4) {
            continue;
        }
        b64_put_quantum(q, out + n);
        n += 3;
        fill = 0;
        if (pad > 2) {
            return -1;
        }
        if (pad > 0) {
            /* Whatever follows the first padded quantum is ignored. */
            return (ssize_t)(n - (size_t)pad);
        }
    }
    return (ssize_t)n;
}

size_t
meta_base64_encode(const char *in, size_t len, char *out, size_t cap)
{
    const unsigned char *p = (const unsigned char *)in;
    size_t need = (len + 2) / 3 * 4;
    size_t n = 0;

    if (need > cap) {
        return 0;
    }
    for (size_t i = 0; i < len; i += 3) {
        size_t left = len - i;
        unsigned v = (unsigned)p[i] << 16;

        v |= left > 1 ? (unsigned)p[i + 1] << 8 : 0;
        v |= left > 2 ? (unsigned)p[i + 2] : 0;
        out[n++] = b64_alphabet[(v >> 18) & 63];
        out[n++] = b64_alphabet[(v >> 12) & 63];
        out[n++] = left > 1 ? b64_alphabet[(v >> 6) & 63] : '=';
        out[n++] = left > 2 ? b64_alphabet[v & 63] : '=';
    }
    return n;
}

/* ---- parsing ------------------------------------------------------- */

static bool
key_fits(const struct token *key)
{
    return key->len > 0 && key->len <= PROTO_KEY_MAX;
}

/* b: decode the key into m->keybuf and point m->key at it. */
static bool
decode_key(struct meta *m)
{
    ssize_t n = meta_base64_decode(m->key.p, m->key.len, m->keybuf,
                                   sizeof(m->keybuf));

    if (n <= 0) {
        return false;
    }
    m->key.p = m->keybuf;
    m->key.len = (size_t)n;
    return true;
}

static bool
arg_ttl(const struct token *arg, int64_t *out)
{
    int32_t v;

    if (!token_i32(arg, &v)) {
        return false;
    }
    *out = v;
    return true;
}

/*
 * Decode the argument of flag c.  Returns RSP_NONE when it is good or
 * takes none, the error memcached names for it otherwise, and
 * RSP_CLIENT_ERROR_FORMAT for a bad F, which names none.
 */
static enum rsp_type
decode_flag(struct meta *m, char c, const struct token *arg)
{
    switch (c) {
    case 'b':
        return decode_key(m) ? RSP_NONE : RSP_META_KEY_DECODE;
    case 'N':
        return arg_ttl(arg, &m->vivify_ttl) ? RSP_NONE : RSP_META_BAD_TOKEN;
    case 'T':
        return arg_ttl(arg, &m->ttl) ? RSP_NONE : RSP_META_BAD_TOKEN;
    case 'R':
        return arg_ttl(arg, &m->recache_ttl) ? RSP_NONE : RSP_META_BAD_TOKEN;
    case 'C':
        return token_u64(arg, &m->cas_compare) ? RSP_NONE
                                                : RSP_META_BAD_TOKEN;
    case 'E':
        return token_u64(arg, &m->cas_new) ? RSP_NONE : RSP_META_BAD_TOKEN;
    case 'F':
        return token_u32(arg, &m->client_flags) ? RSP_NONE
                                                 : RSP_CLIENT_ERROR_FORMAT;
    case 'J':
        return token_u64(arg, &m->initial) ? RSP_NONE : RSP_META_INITIAL;
    case 'D':
        return token_u64(arg, &m->delta) ? RSP_NONE : RSP_META_DELTA;
    case 'M':
        if (arg->len != 1) {
            return RSP_META_M_LENGTH;
        }
        m->mode = arg->p[0];
        return RSP_NONE;
    case 'O':
        m->opaque = *arg;
        return RSP_NONE;
    default:
        return RSP_NONE;
    }
}

/*
 * Record the flag token t.  Returns RSP_NONE, or an error that ends the
 * pass at once (duplicate or unknown flag).
 */
static enum rsp_type
add_flag(struct meta *m, const struct token *t)
{
    unsigned char c = (unsigned char)t->p[0];
    bool known = memchr(known_flags, c, sizeof(known_flags) - 1) != NULL;
    struct meta_flag *f;

    /* memcached keeps a seen[] array of 127 and files any byte past it as
     * a duplicate. */
    if (c >= 127 || (known && meta_has(m, (char)c))) {
        return RSP_META_DUP_FLAG;
    }
    if (!known) {
        return RSP_META_INVALID_FLAG;
    }
    m->seen |= META_BIT((char)c);
    f = &m->flags[m->nflags++];
    f->c = (char)c;
    f->arg.p = t->p + 1;
    f->arg.len = t->len - 1;
    return RSP_NONE;
}

/*
 * The flag pass over tokens[first..ntokens).  A bad argument does not stop
 * it: the last error message set wins, as in memcached, and a bad F only
 * falls back to the format error when nothing else was named.
 */
static enum rsp_type
preparse(const struct request *req, struct meta *m, unsigned first)
{
    const struct meta_flag *f;
    enum rsp_type err = RSP_NONE;
    bool failed = false;

    for (unsigned i = first; i < req->ntokens; i++) {
        enum rsp_type e = add_flag(m, &req->tokens[i]);

        if (e != RSP_NONE) {
            return e;
        }
        f = &m->flags[m->nflags - 1];
        e = decode_flag(m, f->c, &f->arg);
        if (e == RSP_CLIENT_ERROR_FORMAT) {
            failed = true;
        } else if (e != RSP_NONE) {
            failed = true;
            err = e;
        }
    }
    if (failed && err == RSP_NONE) {
        err = RSP_CLIENT_ERROR_FORMAT;
    }
    return err;
}

/* M for ms: set, add (E), append, prepend, replace; upper case only. */
static enum rsp_type
check_ms_mode(struct meta *m)
{
    if (!meta_has(m, 'M')) {
        m->mode = 'S';
        return RSP_NONE;
    }
    if (memchr("SEAPR", m->mode, 5) == NULL) {
        return RSP_META_MS_MODE;
    }
    return RSP_NONE;
}

/* M for ma: I or + increments, D or - decrements; nothing else. */
static enum rsp_type
check_ma_mode(struct meta *m)
{
    if (!meta_has(m, 'M') || m->mode == 'I' || m->mode == '+') {
        m->mode = 'I';
        return RSP_NONE;
    }
    if (m->mode == 'D' || m->mode == '-') {
        m->mode = 'D';
        return RSP_NONE;
    }
    return RSP_META_MA_MODE;
}

/* The opaque limit counts the O itself. */
static enum rsp_type
check_opaque(const struct meta *m)
{
    if (meta_has(m, 'O') && m->opaque.len + 1 > META_OPAQUE_MAX) {
        return RSP_META_OPAQUE;
    }
    return RSP_NONE;
}

/*
 * Everything after the key (and ms's <datalen>) check: token count, the
 * flag pass, the mode and the opaque length.
 */
static enum rsp_type
parse_flags(const struct request *req, struct meta *m, unsigned first)
{
    enum rsp_type err;

    if (req->ntokens > META_MAX_TOKENS) {
        return req->type == REQ_MS ? RSP_META_MS_TOO_LONG
                                   : RSP_META_TOO_LONG;
    }
    err = preparse(req, m, first);
    if (err != RSP_NONE) {
        /* md and ma never pass the pre-parser's message on. */
        if (req->type == REQ_MD || req->type == REQ_MA) {
            return RSP_META_BAD_FLAG;
        }
        return err;
    }
    if (req->type == REQ_MS) {
        err = check_ms_mode(m);
    } else if (req->type == REQ_MA) {
        err = check_ma_mode(m);
    }
    return err != RSP_NONE ? err : check_opaque(m);
}

/* safe_strtol's rules, then 0 <= n <= INT_MAX - 2. */
static bool
parse_datalen(const struct token *t, uint32_t *out)
{
    int32_t n;

    if (!token_i32(t, &n) || n < 0 || n > INT32_MAX - 2) {
        return false;
    }
    *out = (uint32_t)n;
    return true;
}

static enum rsp_type
parse_ms(const struct request *req, struct meta *m, uint32_t *swallow)
{
    enum rsp_type err;

    if (req->ntokens < 3 || !parse_datalen(&req->tokens[2], &m->vlen)) {
        return RSP_CLIENT_ERROR_FORMAT;
    }
    if (!key_fits(&req->tokens[1])) {
        err = RSP_CLIENT_ERROR_FORMAT;
    } else {
        m->key = req->tokens[1];
        err = parse_flags(req, m, 3);
    }
    if (err != RSP_NONE) {
        *swallow = m->vlen + 2;
    }
    return err;
}

static enum rsp_type
parse_keyed(const struct request *req, struct meta *m)
{
    if (req->ntokens < 2 || !key_fits(&req->tokens[1])) {
        return RSP_CLIENT_ERROR_FORMAT;
    }
    m->key = req->tokens[1];
    return parse_flags(req, m, 2);
}

/* me <key> [b]: no flag pass; a bad base64 key is a format error. */
static enum rsp_type
parse_me(const struct request *req, struct meta *m)
{
    if (req->ntokens < 2 || !key_fits(&req->tokens[1])) {
        return RSP_CLIENT_ERROR_FORMAT;
    }
    m->key = req->tokens[1];
    if (req->ntokens >= 3 && token_eq(&req->tokens[2], "b")) {
        if (!decode_key(m)) {
            return RSP_CLIENT_ERROR_FORMAT;
        }
        m->seen |= META_BIT('b');
    }
    return RSP_NONE;
}

static void
meta_reset(struct meta *m)
{
    memset(m, 0, offsetof(struct meta, keybuf));
    m->delta = 1;
}

enum rsp_type
meta_parse(const struct request *req, struct meta *m, uint32_t *swallow)
{
    meta_reset(m);
    *swallow = 0;
    switch (req->type) {
    case REQ_MN:
        return RSP_NONE;
    case REQ_ME:
        return parse_me(req, m);
    case REQ_MS:
        return parse_ms(req, m, swallow);
    case REQ_MG:
    case REQ_MD:
    case REQ_MA:
        return parse_keyed(req, m);
    default:
        return RSP_CLIENT_ERROR_FORMAT;
    }
}

/* ---- composing ----------------------------------------------------- */

/* A bounded writer: once something does not fit, `full` stays set. */
struct out {
    char   *buf;
    size_t  cap;
    size_t  len;
    bool    full;
};

static void
put(struct out *o, const char *s, size_t n)
{
    if (o->full || n > o->cap - o->len) {
        o->full = true;
        return;
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
}

static void
put_str(struct out *o, const char *s)
{
    put(o, s, strlen(s));
}

static void
put_u64(struct out *o, uint64_t v)
{
    char tmp[24];
    int n = snprintf(tmp, sizeof(tmp), "%" PRIu64, v);

    put(o, tmp, (size_t)n);
}

static void
put_i64(struct out *o, int64_t v)
{
    char tmp[24];
    int n = snprintf(tmp, sizeof(tmp), "%" PRId64, v);

    put(o, tmp, (size_t)n);
}

/* " <c>": the start of every returned flag. */
static void
put_flag(struct out *o, char c)
{
    char s[2] = { ' ', c };

    put(o, s, 2);
}

/* The key as is, or base64-encoded (the caller adds memcached's " b"). */
static void
put_key(struct out *o, const struct token *key, bool binary)
{
    size_t n;

    if (!binary) {
        put(o, key->p, key->len);
        return;
    }
    if (o->full) {
        return;
    }
    n = meta_base64_encode(key->p, key->len, o->buf + o->len,
                           o->cap - o->len);
    if (n == 0 && key->len > 0) {
        o->full = true;
        return;
    }
    o->len += n;
}

/*
 * Which request flags a reply echoes.  O and k always come back, even on a
 * miss; mg adds c f h l s t on a hit, ms c s whatever the outcome, ma c t
 * when it has an item.  Other flags are requests, never echoed.
 */
static bool
echoes(enum req_type type, bool hit, char c)
{
    if (c == 'O' || c == 'k') {
        return true;
    }
    switch (type) {
    case REQ_MG:
        return hit && memchr("cfhlst", c, 6) != NULL;
    case REQ_MS:
        return c == 'c' || c == 's';
    case REQ_MA:
        return hit && (c == 'c' || c == 't');
    default:
        return false;
    }
}

/* k: memcached's mg hit follows the item's b, the others the request's. */
static void
put_key_flag(struct out *o, enum req_type type, const struct meta *m,
             const struct meta_result *r)
{
    bool binary = meta_has(m, 'b')
                  || (type == REQ_MG && r->hit && r->key_binary);

    put_key(o, &m->key, binary);
    if (binary) {
        put_str(o, " b");
    }
}

static void
put_echo(struct out *o, enum req_type type, const struct meta *m,
         const struct meta_result *r, const struct meta_flag *f)
{
    put_flag(o, f->c);
    switch (f->c) {
    case 'O':
        put(o, f->arg.p, f->arg.len);
        break;
    case 'k':
        put_key_flag(o, type, m, r);
        break;
    case 'c':
        put_u64(o, r->cas);
        break;
    case 'f':
        put_u64(o, r->client_flags);
        break;
    case 'h':
        put_str(o, r->fetched ? "1" : "0");
        break;
    case 'l':
        put_u64(o, r->last_access);
        break;
    case 's':
        put_u64(o, r->vlen);
        break;
    case 't':
        put_i64(o, r->ttl);
        break;
    default:
        break;
    }
}

size_t
meta_compose(char *buf, size_t cap, enum req_type type, const char *rc,
             const struct meta *m, const struct meta_result *r)
{
    struct out o = { buf, cap, 0, false };

    put_str(&o, rc);
    if (strcmp(rc, "VA") == 0) {
        put_str(&o, " ");
        put_u64(&o, r->vlen);
    }
    for (unsigned i = 0; i < m->nflags; i++) {
        if (echoes(type, r->hit, m->flags[i].c)) {
            put_echo(&o, type, m, r, &m->flags[i]);
        }
    }
    /* Z before X so that a client never reads W next to Z. */
    if (type == REQ_MG) {
        if (r->token_sent) {
            put_flag(&o, 'Z');
        }
        if (r->stale) {
            put_flag(&o, 'X');
        }
        if (r->win) {
            put_flag(&o, 'W');
        }
    }
    put(&o, "\r\n", 2);
    return o.full ? 0 : o.len;
}

size_t
meta_compose_debug(char *buf, size_t cap, const struct token *key,
                   bool binary, int64_t exp, uint32_t la, uint64_t cas,
                   bool fetched, unsigned cls, size_t size)
{
    struct out o = { buf, cap, 0, false };

    put_str(&o, "ME ");
    put_key(&o, key, binary);
    put_str(&o, " exp=");
    put_i64(&o, exp);
    put_str(&o, " la=");
    put_u64(&o, la);
    put_str(&o, " cas=");
    put_u64(&o, cas);
    put_str(&o, fetched ? " fetch=yes cls=" : " fetch=no cls=");
    put_u64(&o, cls);
    put_str(&o, " size=");
    put_u64(&o, size);
    put(&o, "\r\n", 2);
    return o.full ? 0 : o.len;
}
