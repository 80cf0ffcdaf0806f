/*
 * text.c: memcached's classic text protocol, one line at a time.
 *
 * text_parse() finds the "\n" with memchr, looks the first token up in a
 * small table and hands the line to one short parser per command family.
 * Only the get family avoids splitting the line: a multiget may carry
 * thousands of keys, which text_next_key() walks later.  Nothing here
 * allocates or writes to the buffer.
 *
 * Where memcached 1.6.45 and 1.6.18 differ the 1.6.45 behaviour wins:
 * a blank line, `get` with no key, `verbosity` with no level and `cas`
 * without a unique are CLIENT_ERROR bad command line format; the data block
 * after every storage-command error is swallowed when <bytes> is valid.
 * `delete` keeps 1.6.18's checks of its extra tokens.  Admin commands (flush_all,
 * verbosity, cache_memlimit) keep the token counts 1.6.18 accepts.
 */
#include "proto/text.h"
#include "proto/response.h"
#include "proto/token.h"

#include <stdint.h>
#include <string.h>

/* memcached skips at most this many spaces before looking for "get ". */
#define LEAD_SPACE_MAX 100

struct text_cmd {
    const char    *name;
    size_t         len;
    enum req_type  type;
    void         (*parse)(struct request *req, const char *line, size_t len);
};

/* Mark req as an error reply: rsp is the line, swallow the data bytes. */
static void
fail(struct request *req, enum rsp_type rsp, uint32_t swallow)
{
    req->type = REQ_ERROR;
    req->err = rsp;
    req->swallow = swallow;
}

static bool
key_ok(const struct token *t)
{
    return t->len > 0 && t->len <= PROTO_KEY_MAX;
}

/* The last space-separated token of line[0..len), or an empty token. */
static struct token
last_token(const char *line, size_t len)
{
    struct token t;
    size_t end = len;
    size_t start;

    while (end > 0 && line[end - 1] == ' ') {
        end--;
    }
    start = end;
    while (start > 0 && line[start - 1] != ' ') {
        start--;
    }
    t.p = line + start;
    t.len = end - start;
    return t;
}

/*
 * Split the line into req->tokens and set req->noreply if the line's real
 * last token (beyond the 24 kept, if need be) is "noreply".  Only called
 * for commands that accept noreply or ignore it harmlessly.
 */
static void
split(struct request *req, const char *line, size_t len)
{
    struct token last;

    req->ntokens = token_split(line, len, req->tokens, PROTO_MAX_TOKENS,
                               NULL);
    if (req->ntokens >= 2) {
        last = last_token(line, len);
        req->noreply = token_eq(&last, "noreply");
    }
}

/*
 * Too many tokens for an admin command: memcached 1.6 has no handler for
 * that shape, so the reply is ERROR and noreply was never looked at.
 */
static void
fail_shape(struct request *req)
{
    req->noreply = false;
    fail(req, RSP_ERROR, 0);
}

/* noreply is not part of these commands: just split. */
static void
split_plain(struct request *req, const char *line, size_t len)
{
    req->ntokens = token_split(line, len, req->tokens, PROTO_MAX_TOKENS,
                               NULL);
}

/* ---- get family ---------------------------------------------------- */

/* The rest of the line after its first token, leading spaces skipped. */
static struct token
after_first(const char *line, size_t len, size_t first_len)
{
    struct token t;
    size_t i = first_len;

    while (i < len && line[i] == ' ') {
        i++;
    }
    t.p = line + i;
    t.len = len - i;
    return t;
}

/* The key list's one key, when it holds one (trailing spaces allowed):
 * the GET of one key runs without a walk of its list. */
static struct token
only_key(const struct token *keys)
{
    const char *end = keys->p + keys->len;
    const char *sp = token_space(keys->p, end);
    struct token none = { NULL, 0 };

    for (const char *q = sp; q < end; q++) {
        if (*q != ' ') {
            return none;
        }
    }
    return (struct token){ keys->p, (size_t)(sp - keys->p) };
}

static void
parse_get(struct request *req, const char *line, size_t len)
{
    req->keys = after_first(line, len, req->tokens[0].len);
    if (req->keys.len == 0) {
        fail(req, RSP_CLIENT_ERROR_FORMAT, 0);
        return;
    }
    req->key = only_key(&req->keys);
}

/* gat <exptime> <key>+ */
static void
parse_gat(struct request *req, const char *line, size_t len)
{
    struct token exp = after_first(line, len, req->tokens[0].len);
    const char *sp = memchr(exp.p, ' ', exp.len);
    int32_t v;

    if (sp == NULL) {
        /* no exptime, or an exptime and no key */
        fail(req, RSP_CLIENT_ERROR_FORMAT, 0);
        return;
    }
    exp.len = (size_t)(sp - exp.p);
    req->tokens[1] = exp;
    req->ntokens = 2;
    req->keys = after_first(exp.p, len - (size_t)(exp.p - line), exp.len);
    if (req->keys.len == 0) {
        fail(req, RSP_CLIENT_ERROR_FORMAT, 0);
    } else if (!token_i32(&exp, &v)) {
        fail(req, RSP_CLIENT_ERROR_EXPTIME, 0);
    } else {
        req->exptime = v;
        req->key = only_key(&req->keys);
    }
}

/* ---- storage ------------------------------------------------------- */

/* <bytes> as memcached takes it: an int32, 0 <= n <= INT32_MAX - 2. */
static bool
parse_vlen(const struct token *t, uint32_t *out)
{
    int32_t v;

    if (!token_i32(t, &v) || v < 0 || v > INT32_MAX - 2) {
        return false;
    }
    *out = (uint32_t)v;
    return true;
}

/*
 * <cmd> <key> <flags> <exptime> <bytes> [<cas unique>] [noreply]
 * A sixth (seventh for cas) token that is not "noreply" is ignored, as
 * memcached does; more tokens than that are a format error.
 */
static void
parse_store(struct request *req, const char *line, size_t len)
{
    const struct token *tok = req->tokens;
    unsigned want = req->type == REQ_CAS ? 6 : 5;
    bool have_vlen;
    int32_t exp;

    split(req, line, len);
    have_vlen = req->ntokens >= 5 && parse_vlen(&tok[4], &req->vlen);
    if (req->ntokens < want || req->ntokens > want + 1 || !have_vlen
        || !key_ok(&tok[1]) || !token_u32(&tok[2], &req->flags)
        || !token_i32(&tok[3], &exp)
        || (want == 6 && !token_u64(&tok[5], &req->cas))) {
        /* 1.6.45 swallows the data block whenever it knows its size. */
        fail(req, RSP_CLIENT_ERROR_FORMAT, have_vlen ? req->vlen + 2 : 0);
        return;
    }
    req->key = tok[1];
    req->exptime = exp;
}

/* ---- single-key commands -------------------------------------------- */

/*
 * Split and check that there are at least min tokens and a valid key in
 * tokens[1]; on failure req becomes the format error.
 */
static bool
split_keyed(struct request *req, const char *line, size_t len, unsigned min)
{
    split(req, line, len);
    if (req->ntokens < min || !key_ok(&req->tokens[1])) {
        fail(req, RSP_CLIENT_ERROR_FORMAT, 0);
        return false;
    }
    req->key = req->tokens[1];
    return true;
}

/*
 * delete <key> [0] [noreply].  The legacy hold time may only be "0"; any
 * other third or fourth token gets memcached's usage error, and more than
 * four tokens has no handler at all (ERROR).  memcached 1.6.45 relaxed this,
 * but clients' conformance tests (libmemcached's memccapable) still expect
 * the errors, and they cost a well-formed client nothing.
 */
static void
parse_delete(struct request *req, const char *line, size_t len)
{
    bool zero;

    if (!split_keyed(req, line, len, 2) || req->ntokens == 2) {
        return;
    }
    if (req->ntokens > 4) {
        fail_shape(req);
        return;
    }
    zero = token_eq(&req->tokens[2], "0");
    if (req->ntokens == 3 ? !(zero || req->noreply)
                          : !(zero && req->noreply)) {
        fail(req, RSP_CLIENT_ERROR_DELETE_USAGE, 0);
    }
}

/* incr|decr <key> <delta> [noreply] */
static void
parse_arith(struct request *req, const char *line, size_t len)
{
    if (split_keyed(req, line, len, 3)
        && !token_u64(&req->tokens[2], &req->delta)) {
        fail(req, RSP_CLIENT_ERROR_DELTA, 0);
    }
}

/* touch <key> <exptime> [noreply] */
static void
parse_touch(struct request *req, const char *line, size_t len)
{
    int32_t exp;

    if (!split_keyed(req, line, len, 3)) {
        return;
    }
    if (!token_i32(&req->tokens[2], &exp)) {
        fail(req, RSP_CLIENT_ERROR_EXPTIME, 0);
        return;
    }
    req->exptime = exp;
}

/* ---- admin commands ------------------------------------------------ */

/*
 * flush_all [delay] [noreply].  A delay <= 0 means now, like no delay, so
 * num = -1 for "none" cannot be mistaken for a real delay.
 */
static void
parse_flush_all(struct request *req, const char *line, size_t len)
{
    unsigned args;
    int32_t delay;

    split(req, line, len);
    args = req->ntokens - 1 - (req->noreply ? 1 : 0);
    if (req->ntokens > 3) {
        fail_shape(req);
    } else if (args == 0) {
        req->num = -1;
    } else if (!token_i32(&req->tokens[1], &delay)) {
        fail(req, RSP_CLIENT_ERROR_EXPTIME, 0);
    } else {
        req->num = delay;
    }
}

/* verbosity <level> [noreply]; "verbosity noreply" is a silent error. */
static void
parse_verbosity(struct request *req, const char *line, size_t len)
{
    uint32_t level;

    split(req, line, len);
    if (req->ntokens > 3) {
        fail_shape(req);
    } else if (req->ntokens < 2 || !token_u32(&req->tokens[1], &level)) {
        fail(req, RSP_CLIENT_ERROR_FORMAT, 0);
    } else {
        req->num = level;
    }
}

/* cache_memlimit <megabytes> [noreply]: anything wrong is plain ERROR. */
static void
parse_memlimit(struct request *req, const char *line, size_t len)
{
    uint32_t mb;

    split(req, line, len);
    if (req->ntokens < 2 || req->ntokens > 3) {
        fail_shape(req);
        return;
    }
    if (!token_u32(&req->tokens[1], &mb)) {
        fail(req, RSP_ERROR, 0);
        return;
    }
    req->num = mb;
}

/*
 * version, quit, shutdown, stats, slabs, lru, lru_crawler, watch,
 * refresh_certs and the meta commands: the daemon (or meta.c) reads the arguments from
 * tokens[].
 * memcached 1.6.18 answers `version x` and closes on `quit x`, so extra
 * tokens are not checked here.
 */
static void
parse_kept(struct request *req, const char *line, size_t len)
{
    split_plain(req, line, len);
    if (req->ntokens >= 2) {
        req->key = req->tokens[1];
    }
}

/* ---- dispatch ------------------------------------------------------ */

#define CMD(name, type, fn) { name, sizeof(name) - 1, type, fn }

/* Hot commands first: the lookup is a linear scan. */
static const struct text_cmd text_cmds[] = {
    CMD("get",            REQ_GET,            parse_get),
    CMD("set",            REQ_SET,            parse_store),
    CMD("mg",             REQ_MG,             parse_kept),
    CMD("ms",             REQ_MS,             parse_kept),
    CMD("gets",           REQ_GETS,           parse_get),
    CMD("delete",         REQ_DELETE,         parse_delete),
    CMD("incr",           REQ_INCR,           parse_arith),
    CMD("decr",           REQ_DECR,           parse_arith),
    CMD("md",             REQ_MD,             parse_kept),
    CMD("ma",             REQ_MA,             parse_kept),
    CMD("mn",             REQ_MN,             parse_kept),
    CMD("me",             REQ_ME,             parse_kept),
    CMD("add",            REQ_ADD,            parse_store),
    CMD("cas",            REQ_CAS,            parse_store),
    CMD("touch",          REQ_TOUCH,          parse_touch),
    CMD("gat",            REQ_GAT,            parse_gat),
    CMD("gats",           REQ_GATS,           parse_gat),
    CMD("replace",        REQ_REPLACE,        parse_store),
    CMD("append",         REQ_APPEND,         parse_store),
    CMD("prepend",        REQ_PREPEND,        parse_store),
    CMD("stats",          REQ_STATS,          parse_kept),
    CMD("version",        REQ_VERSION,        parse_kept),
    CMD("quit",           REQ_QUIT,           parse_kept),
    CMD("flush_all",      REQ_FLUSH_ALL,      parse_flush_all),
    CMD("verbosity",      REQ_VERBOSITY,      parse_verbosity),
    CMD("shutdown",       REQ_SHUTDOWN,       parse_kept),
    CMD("cache_memlimit", REQ_CACHE_MEMLIMIT, parse_memlimit),
    CMD("slabs",          REQ_SLABS,          parse_kept),
    CMD("lru",            REQ_LRU,            parse_kept),
    CMD("lru_crawler",    REQ_LRU_CRAWLER,    parse_kept),
    CMD("watch",          REQ_WATCH,          parse_kept),
    CMD("refresh_certs",  REQ_REFRESH_CERTS,  parse_kept),
};

#undef CMD

/* Like memcmp() == 0 for the short names here, without the call. */
static bool
same_bytes(const char *a, const char *b, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        if (a[i] != b[i]) {
            return false;
        }
    }
    return true;
}

static const struct text_cmd *
find_cmd(const struct token *t)
{
    size_t i;

    /* Most lines are GETs: compared as one word, not scanned for. */
    if (t->len == 3 && memcmp(t->p, "get", 3) == 0) {
        return &text_cmds[0];
    }
    for (i = 0; i < sizeof(text_cmds) / sizeof(text_cmds[0]); i++) {
        if (text_cmds[i].len == t->len && text_cmds[i].name[0] == t->p[0]
            && same_bytes(text_cmds[i].name, t->p, t->len)) {
            return &text_cmds[i];
        }
    }
    return NULL;
}

/*
 * An unknown command: ERROR, except that a line of two or more tokens
 * ending in "HTTP/..." is a web client, and memcached hangs up on it.
 */
static int
unknown_cmd(struct request *req, const char *line, size_t len)
{
    struct token last = last_token(line, len);

    if (last.p != line && last.len >= 5 && memcmp(last.p, "HTTP/", 5) == 0) {
        return PROTO_ECLOSE;
    }
    req->ntokens = 1;
    fail(req, RSP_ERROR, 0);
    return 0;
}

static void
request_reset(struct request *req)
{
    req->type = REQ_ERROR;
    req->err = RSP_NONE;
    req->noreply = false;
    req->swallow = 0;
    req->key.p = NULL;
    req->key.len = 0;
    req->keys = req->key;
    req->flags = 0;
    req->exptime = 0;
    req->vlen = 0;
    req->cas = 0;
    req->delta = 0;
    req->num = 0;
    req->ntokens = 0;
}

/* Parse one line without its terminator.  0, or PROTO_ECLOSE. */
static int
parse_line(struct request *req, const char *line, size_t len)
{
    const struct text_cmd *cmd;
    struct token *first = &req->tokens[0];
    const char *sp;

    /* memcached 1.6 tolerates spaces before the command. */
    while (len > 0 && *line == ' ') {
        line++;
        len--;
    }
    if (len == 0) {
        fail(req, RSP_CLIENT_ERROR_FORMAT, 0);
        return 0;
    }
    sp = token_space(line, line + len);
    first->p = line;
    first->len = (size_t)(sp - line);
    req->ntokens = 1;
    cmd = find_cmd(first);
    if (cmd == NULL) {
        return unknown_cmd(req, line, len);
    }
    req->type = cmd->type;
    cmd->parse(req, line, len);
    return 0;
}

/*
 * No "\n" in buf.  Past PROTO_LINE_MAX bytes only a multiget (after at
 * most LEAD_SPACE_MAX spaces) may go on growing; memcached closes any
 * other connection (try_read_command_ascii).
 */
static ssize_t
no_newline(const char *buf, size_t len)
{
    size_t i = 0;

    if (len <= PROTO_LINE_MAX) {
        return PROTO_EUNFIN;
    }
    while (i < len && buf[i] == ' ') {
        i++;
    }
    if (i > LEAD_SPACE_MAX) {
        return PROTO_ECLOSE;
    }
    if ((len - i >= 4 && memcmp(buf + i, "get ", 4) == 0)
        || (len - i >= 5 && memcmp(buf + i, "gets ", 5) == 0)) {
        return PROTO_EUNFIN;
    }
    return PROTO_ECLOSE;
}

ssize_t
text_parse(struct request *req, const char *buf, size_t len)
{
    const char *nl;
    size_t llen;

    if (len == 0) {
        return PROTO_EUNFIN;
    }
    nl = memchr(buf, '\n', len);
    if (nl == NULL) {
        return no_newline(buf, len);
    }
    /* A complete line is parsed whatever its length, as memcached does
     * when the whole line arrives in one read. */
    llen = (size_t)(nl - buf);
    if (llen > 0 && buf[llen - 1] == '\r') {
        llen--;
    }
    request_reset(req);
    if (parse_line(req, buf, llen) == PROTO_ECLOSE) {
        return PROTO_ECLOSE;
    }
    return (ssize_t)(nl - buf) + 1;
}

int
text_next_key(struct token *cursor, struct token *key)
{
    const char *p = cursor->p;
    const char *end;
    const char *sp;

    if (cursor->len == 0) {
        return 0;
    }
    end = p + cursor->len;
    while (p < end && *p == ' ') {
        p++;
    }
    if (p == end) {
        cursor->p = end;
        cursor->len = 0;
        return 0;
    }
    sp = token_space(p, end);
    key->p = p;
    key->len = (size_t)(sp - p);
    cursor->p = sp;
    cursor->len = (size_t)(end - sp);
    return key->len > PROTO_KEY_MAX ? -1 : 1;
}
