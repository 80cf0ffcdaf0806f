/*
 * test_text.c: the classic text protocol parser against memcached 1.6.45's
 * behaviour: every command's good and bad forms, the exact error reply,
 * noreply, the data block swallowed after an error, framing and the
 * connection-closing cases.
 */
#include "proto/text.h"
#include "proto/response.h"
#include "proto/token.h"
#include "t/tap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static struct request req;

static ssize_t
parse(const char *s)
{
    memset(&req, 0xa5, sizeof(req));    /* catch fields left unset */
    return text_parse(&req, s, strlen(s));
}

/* Parse a line that must be consumed whole and fail with reply rsp. */
static void
is_err(const char *line, int rsp, uint32_t swallow, const char *name)
{
    ssize_t n = parse(line);

    if (n != (ssize_t)strlen(line) || req.type != REQ_ERROR
        || req.err != rsp || req.swallow != swallow) {
        ok(0, name);
        printf("#   line '%s': n %zd type %d err %d swallow %u\n", line, n,
               (int)req.type, req.err, req.swallow);
        return;
    }
    ok(1, name);
}

/* Parse a line that must be consumed whole as a request of type t. */
static int
is_req(const char *line, enum req_type t, const char *name)
{
    ssize_t n = parse(line);

    if (n != (ssize_t)strlen(line) || req.type != t) {
        ok(0, name);
        printf("#   line '%s': n %zd type %d err %d\n", line, n,
               (int)req.type, req.err);
        return 0;
    }
    return ok(1, name);
}

static void
test_framing(void)
{
    is_int(parse("get foo"), PROTO_EUNFIN, "no newline: unfinished");
    is_int(parse(""), PROTO_EUNFIN, "empty buffer: unfinished");
    is_int(text_parse(&req, NULL, 0), PROTO_EUNFIN, "NULL, 0: unfinished");
    is_int(parse("get foo\r"), PROTO_EUNFIN, "CR without LF: unfinished");
    is_int(parse("get foo\r\nget bar\r\n"), 9, "consumes one line only");
    is_mem(req.keys.p, req.keys.len, "foo", "first line's key");
    is_int(parse("get foo\nget bar\n"), 8, "bare LF ends a line");
    is_mem(req.keys.p, req.keys.len, "foo", "bare LF: CR not in key");
    is_err("\r\n", RSP_CLIENT_ERROR_FORMAT, 0, "blank line (1.6.45)");
    is_err("\n", RSP_CLIENT_ERROR_FORMAT, 0, "bare LF blank line");
    is_err("    \r\n", RSP_CLIENT_ERROR_FORMAT, 0, "spaces only");
    is_err("GET foo\r\n", RSP_ERROR, 0, "commands are case-sensitive");
    is_err("bogus_command\r\n", RSP_ERROR, 0, "unknown command");
    is_err("gett foo\r\n", RSP_ERROR, 0, "prefix of a command is not it");
    is_err("ge foo\r\n", RSP_ERROR, 0, "command prefix");
    is_err("get\tfoo\r\n", RSP_ERROR, 0, "tab does not separate tokens");
    is_err("x\r\r\n", RSP_ERROR, 0, "only one CR stripped");
    ok(is_req("  get foo\r\n", REQ_GET, "leading spaces tolerated")
       && req.keys.len == 3, "leading spaces: key found");
    ok(!req.noreply && req.swallow == 0, "success leaves no error state");
}

static void
test_long_lines(void)
{
    size_t big = PROTO_LINE_MAX + 100;
    char *buf = malloc(big + 3);
    size_t i;

    if (buf == NULL) {
        ok(0, "malloc");
        return;
    }
    memset(buf, 'k', big);
    memcpy(buf, "set ", 4);
    is_int(text_parse(&req, buf, PROTO_LINE_MAX), PROTO_EUNFIN,
           "2048 bytes without LF: still waiting");
    is_int(text_parse(&req, buf, PROTO_LINE_MAX + 1), PROTO_ECLOSE,
           "2049 bytes without LF: close");
    memcpy(buf, "get ", 4);
    is_int(text_parse(&req, buf, big), PROTO_EUNFIN,
           "long get without LF: keep reading");
    memcpy(buf, "gets ", 5);
    is_int(text_parse(&req, buf, big), PROTO_EUNFIN,
           "long gets without LF: keep reading");
    memcpy(buf, "gat 0", 5);
    is_int(text_parse(&req, buf, big), PROTO_ECLOSE,
           "long gat without LF: close");
    memset(buf, ' ', 100);
    memcpy(buf + 100, "get ", 4);
    is_int(text_parse(&req, buf, big), PROTO_EUNFIN,
           "100 leading spaces then get: keep reading");
    memset(buf, ' ', 101);
    memcpy(buf + 101, "get ", 4);
    is_int(text_parse(&req, buf, big), PROTO_ECLOSE,
           "101 leading spaces: close");

    /* A complete long line parses like any other. */
    memcpy(buf, "get ", 4);
    for (i = 4; i < big; i += 10) {
        memcpy(buf + i, "k12345678 ", big - i < 10 ? big - i : 10);
    }
    memcpy(buf + big, "\r\n", 2);
    is_int(text_parse(&req, buf, big + 2), (ssize_t)big + 2,
           "complete long get parses");
    is_int(req.type, REQ_GET, "complete long get: REQ_GET");
    memcpy(buf, "stats", 5);
    memset(buf + 5, ' ', big - 5);
    is_int(text_parse(&req, buf, big + 2), (ssize_t)big + 2,
           "complete long stats line parses");
    is_int(req.type, REQ_STATS, "complete long stats: REQ_STATS");
    is_int(req.ntokens, 1, "complete long stats: one token");
    free(buf);
}

static void
test_http_guard(void)
{
    is_int(parse("GET / HTTP/1.1\r\n"), PROTO_ECLOSE, "HTTP request: close");
    is_int(parse("foo HTTP/1.0\r\n"), PROTO_ECLOSE, "two tokens + HTTP/");
    is_int(parse("foo bar HTTP/1.1   \r\n"), PROTO_ECLOSE,
           "trailing spaces after HTTP/");
    is_err("HTTP/1.1\r\n", RSP_ERROR, 0, "HTTP/ alone: one token, ERROR");
    is_err("foo HTTP\r\n", RSP_ERROR, 0, "HTTP without slash: ERROR");
    is_err("foo HTTP/1.1 x\r\n", RSP_ERROR, 0, "HTTP/ not last: ERROR");
    ok(is_req("get k HTTP/1.1\r\n", REQ_GET, "known command: no guard")
       && req.keys.len == 10, "known command keeps its keys");
}

static void
test_get(void)
{
    struct token cur, key;

    ok(is_req("get foo\r\n", REQ_GET, "get"), "get parses");
    is_mem(req.keys.p, req.keys.len, "foo", "get: keys");
    is_int(req.ntokens, 1, "get: command token only");
    is_mem(req.tokens[0].p, req.tokens[0].len, "get", "get: command");
    ok(is_req("gets a  b   c \r\n", REQ_GETS, "gets"), "gets parses");
    cur = req.keys;
    is_int(text_next_key(&cur, &key), 1, "walk: first");
    is_mem(key.p, key.len, "a", "walk: a");
    is_int(text_next_key(&cur, &key), 1, "walk: second");
    is_mem(key.p, key.len, "b", "walk: b");
    is_int(text_next_key(&cur, &key), 1, "walk: third");
    is_mem(key.p, key.len, "c", "walk: c");
    is_int(text_next_key(&cur, &key), 0, "walk: done");
    is_int(text_next_key(&cur, &key), 0, "walk: stays done");

    is_err("get\r\n", RSP_CLIENT_ERROR_FORMAT, 0, "get without key");
    is_err("get   \r\n", RSP_CLIENT_ERROR_FORMAT, 0, "get with spaces only");
    is_err("gets\r\n", RSP_CLIENT_ERROR_FORMAT, 0, "gets without key");
    ok(is_req("get foo noreply\r\n", REQ_GET, "get: noreply is a key")
       && !req.noreply, "get: noreply not honoured");
}

/* A key list of one key carries that key (req.key), so that its GET
 * needs no walk; a longer list carries none. */
static void
test_only_key(void)
{
    ok(is_req("get foo\r\n", REQ_GET, "one key"), "one key parses");
    is_mem(req.key.p, req.key.len, "foo", "one key: the key");
    ok(is_req("get  foo   \r\n", REQ_GET, "spaces round one key"),
       "spaces round one key parse");
    is_mem(req.key.p, req.key.len, "foo", "spaces round one key: the key");
    is_mem(req.keys.p, req.keys.len, "foo   ", "spaces round one key: list");
    ok(is_req("get foo bar\r\n", REQ_GET, "two keys") && req.key.len == 0
       && req.key.p == NULL, "two keys: no one key");
    ok(is_req("get foo  b\r\n", REQ_GET, "a second key after spaces")
       && req.key.len == 0, "a second key after spaces: no one key");
    ok(is_req("gets abcdefghijklmnop\r\n", REQ_GETS, "gets, a long key")
       && req.key.len == 16, "gets: one key past a word");
    ok(is_req("gat 10 k\r\n", REQ_GAT, "gat of one key"),
       "gat of one key parses");
    is_mem(req.key.p, req.key.len, "k", "gat: the one key");
    ok(is_req("gats 10 a b\r\n", REQ_GATS, "gats of two keys")
       && req.key.len == 0, "gats of two keys: no one key");
}

static void
test_key_walk(void)
{
    char line[600];
    struct token cur, key;

    memcpy(line, "get ", 4);
    memset(line + 4, 'a', 250);
    line[254] = ' ';
    memset(line + 255, 'b', 251);
    memcpy(line + 506, " c\r\n", 5);
    ok(is_req(line, REQ_GET, "get with a 251-byte key parses"),
       "long key checked while walking");
    cur = req.keys;
    is_int(text_next_key(&cur, &key), 1, "250-byte key accepted");
    is_int(key.len, 250, "250-byte key length");
    is_int(text_next_key(&cur, &key), -1, "251-byte key rejected");
    is_int(key.len, 251, "251-byte key length reported");

    cur.p = NULL;
    cur.len = 0;
    is_int(text_next_key(&cur, &key), 0, "empty cursor");
}

/* "<cmd> <251 bytes><tail>" must fail with the format error. */
static void
long_key_err(const char *cmd, const char *tail, const char *name)
{
    char line[400];
    size_t n = strlen(cmd);

    memcpy(line, cmd, n);
    line[n] = ' ';
    memset(line + n + 1, 'k', 251);
    strcpy(line + n + 252, tail);
    is_err(line, RSP_CLIENT_ERROR_FORMAT, 0, name);
}

static void
test_long_keys(void)
{
    long_key_err("delete", "\r\n", "delete: 251-byte key");
    long_key_err("incr", " 1\r\n", "incr: 251-byte key");
    long_key_err("decr", " x\r\n", "decr: key checked before delta");
    long_key_err("touch", " x\r\n", "touch: key checked before exptime");
    long_key_err("touch", " 1 noreply\r\n", "touch: long key, noreply");
    ok(req.noreply, "touch: long-key error is silent under noreply");
}

static void
test_gat(void)
{
    struct token cur, key;

    ok(is_req("gat 100 a b\r\n", REQ_GAT, "gat"), "gat parses");
    is_int(req.exptime, 100, "gat: exptime");
    is_mem(req.keys.p, req.keys.len, "a b", "gat: keys");
    is_mem(req.tokens[1].p, req.tokens[1].len, "100", "gat: tokens[1]");
    cur = req.keys;
    ok(text_next_key(&cur, &key) == 1 && key.len == 1 && *key.p == 'a',
       "gat: first key");
    ok(is_req("gats  -1   k\r\n", REQ_GATS, "gats"), "gats parses");
    is_int(req.exptime, -1, "gats: negative exptime");
    is_mem(req.keys.p, req.keys.len, "k", "gats: key");
    is_err("gat\r\n", RSP_CLIENT_ERROR_FORMAT, 0, "gat alone");
    is_err("gat 10\r\n", RSP_CLIENT_ERROR_FORMAT, 0, "gat without key");
    is_err("gat 10  \r\n", RSP_CLIENT_ERROR_FORMAT, 0, "gat, spaces, no key");
    is_err("gat x k\r\n", RSP_CLIENT_ERROR_EXPTIME, 0, "gat bad exptime");
    is_err("gats 2147483648 k\r\n", RSP_CLIENT_ERROR_EXPTIME, 0,
           "gats exptime overflow");
}

static void
test_set(void)
{
    ok(is_req("set foo 5 0 3\r\n", REQ_SET, "set"), "set parses");
    is_mem(req.key.p, req.key.len, "foo", "set: key");
    is_int(req.flags, 5, "set: flags");
    is_int(req.exptime, 0, "set: exptime");
    is_int(req.vlen, 3, "set: vlen");
    ok(!req.noreply, "set: no noreply");
    ok(is_req("set k 4294967295 -1 0 noreply\n", REQ_SET, "set noreply"),
       "set with noreply parses");
    ok(req.noreply, "set: noreply");
    is_int(req.flags, UINT32_MAX, "set: max flags");
    is_int(req.exptime, -1, "set: negative exptime");
    is_int(req.vlen, 0, "set: zero length");
    ok(is_req("set k 0 0 1 xyz\r\n", REQ_SET, "set: odd sixth token ignored")
       && !req.noreply, "set: sixth token not noreply");
    ok(is_req("set k +1 0 +2\r\n", REQ_SET, "set: plus signs accepted")
       && req.flags == 1 && req.vlen == 2, "set: plus values");
    ok(is_req("set k 0 0 2147483645\r\n", REQ_SET, "set: largest vlen")
       && req.vlen == 2147483645u, "set: vlen INT32_MAX - 2");
    is_req("add k 0 0 1\r\n", REQ_ADD, "add");
    is_req("replace k 0 0 1\r\n", REQ_REPLACE, "replace");
    is_req("append k 0 0 1\r\n", REQ_APPEND, "append");
    is_req("prepend k 0 0 1\r\n", REQ_PREPEND, "prepend");
    ok(req_has_data(req.type), "prepend has data");
}

static void
test_set_errors(void)
{
    char line[300];

    is_err("set\r\n", RSP_CLIENT_ERROR_FORMAT, 0, "set alone");
    is_err("set k 0 0\r\n", RSP_CLIENT_ERROR_FORMAT, 0, "set: no bytes");
    is_err("set k x 0 3\r\n", RSP_CLIENT_ERROR_FORMAT, 5,
           "set: bad flags, swallow");
    is_err("set k -1 0 3\r\n", RSP_CLIENT_ERROR_FORMAT, 5,
           "set: negative flags");
    is_err("set k 4294967296 0 3\r\n", RSP_CLIENT_ERROR_FORMAT, 5,
           "set: flags overflow");
    is_err("set k 0 x 3\r\n", RSP_CLIENT_ERROR_FORMAT, 5, "set: bad exptime");
    is_err("set k 0 2147483648 3\r\n", RSP_CLIENT_ERROR_FORMAT, 5,
           "set: exptime overflow");
    is_err("set k 0 0 x\r\n", RSP_CLIENT_ERROR_FORMAT, 0, "set: bad bytes");
    is_err("set k 0 0 -1\r\n", RSP_CLIENT_ERROR_FORMAT, 0,
           "set: negative bytes, nothing to swallow");
    is_err("set k 0 0 2147483646\r\n", RSP_CLIENT_ERROR_FORMAT, 0,
           "set: bytes over INT32_MAX - 2");
    is_err("set k 0 0 4294967296\r\n", RSP_CLIENT_ERROR_FORMAT, 0,
           "set: bytes overflow");
    is_err("set k 0 0 1 noreply x\r\n", RSP_CLIENT_ERROR_FORMAT, 3,
           "set: too many tokens, swallow");
    is_err("set k 0 0 10 a b c d e f g h i j k l m n o p q r s t u v w\r\n",
           RSP_CLIENT_ERROR_FORMAT, 12, "set: beyond 24 tokens");
    is_err("set k x 0 3 noreply\r\n", RSP_CLIENT_ERROR_FORMAT, 5,
           "set: error under noreply");
    ok(req.noreply, "set: error keeps noreply (nothing is sent)");

    memcpy(line, "set ", 4);
    memset(line + 4, 'k', 251);
    memcpy(line + 255, " 0 0 7\r\n", 9);
    is_err(line, RSP_CLIENT_ERROR_FORMAT, 9, "set: 251-byte key, swallow");
    line[254] = ' ';
    memcpy(line + 254, " 0 0 7\r\n", 9);
    ok(is_req(line, REQ_SET, "set: 250-byte key") && req.key.len == 250,
       "set: 250-byte key accepted");
}

static void
test_cas(void)
{
    ok(is_req("cas k 1 2 3 18446744073709551615\r\n", REQ_CAS, "cas"),
       "cas parses");
    ok(req.cas == UINT64_MAX && req.flags == 1 && req.exptime == 2
       && req.vlen == 3, "cas: fields");
    ok(is_req("cas k 0 0 1 7 noreply\r\n", REQ_CAS, "cas noreply")
       && req.noreply && req.cas == 7, "cas: noreply");
    is_err("cas k 0 0 1\r\n", RSP_CLIENT_ERROR_FORMAT, 3,
           "cas: missing unique (1.6.45), swallow");
    is_err("cas k 0 0 1 x\r\n", RSP_CLIENT_ERROR_FORMAT, 3, "cas: bad unique");
    is_err("cas k 0 0 1 -1\r\n", RSP_CLIENT_ERROR_FORMAT, 3,
           "cas: negative unique");
    is_err("cas k 0 0 1 noreply\r\n", RSP_CLIENT_ERROR_FORMAT, 3,
           "cas: noreply in place of the unique");
    ok(req.noreply, "cas: that error is silent");
    is_err("cas k 0 0 1 1 noreply x\r\n", RSP_CLIENT_ERROR_FORMAT, 3,
           "cas: too many tokens");
}

static void
test_delete(void)
{
    ok(is_req("delete foo\r\n", REQ_DELETE, "delete") && !req.noreply,
       "delete parses");
    is_mem(req.key.p, req.key.len, "foo", "delete: key");
    ok(is_req("delete foo noreply\r\n", REQ_DELETE, "delete noreply")
       && req.noreply, "delete: noreply");
    ok(is_req("delete foo 0\r\n", REQ_DELETE, "delete legacy 0")
       && !req.noreply, "delete: legacy form");
    ok(is_req("delete foo 0 noreply\r\n", REQ_DELETE, "delete 0 noreply")
       && req.noreply, "delete: legacy form with noreply");
    is_err("delete foo x\r\n", RSP_CLIENT_ERROR_DELETE_USAGE, 0,
           "delete: a hold time other than 0");
    is_err("delete foo 0 x\r\n", RSP_CLIENT_ERROR_DELETE_USAGE, 0,
           "delete: 0 followed by something else");
    is_err("delete foo 1 noreply\r\n", RSP_CLIENT_ERROR_DELETE_USAGE, 0,
           "delete: bad hold time with noreply");
    ok(req.noreply, "delete: the usage error is still under noreply");
    is_err("delete a b c d e\r\n", RSP_ERROR, 0,
           "delete: more than four tokens has no handler");
    ok(!req.noreply, "delete: ERROR shape ignores noreply");
    is_err("delete\r\n", RSP_CLIENT_ERROR_FORMAT, 0, "delete without key");
}

static void
test_arith(void)
{
    ok(is_req("incr n 5\r\n", REQ_INCR, "incr") && req.delta == 5,
       "incr: delta");
    ok(is_req("decr n 18446744073709551615 noreply\r\n", REQ_DECR, "decr")
       && req.delta == UINT64_MAX && req.noreply, "decr: max delta noreply");
    ok(is_req("incr n +5\r\n", REQ_INCR, "incr +5") && req.delta == 5,
       "incr: plus sign as strtoull");
    is_err("incr n abc\r\n", RSP_CLIENT_ERROR_DELTA, 0, "incr: bad delta");
    is_err("incr n -1\r\n", RSP_CLIENT_ERROR_DELTA, 0, "incr: negative");
    is_err("decr n 18446744073709551616\r\n", RSP_CLIENT_ERROR_DELTA, 0,
           "decr: delta overflow");
    is_err("incr n 1x noreply\r\n", RSP_CLIENT_ERROR_DELTA, 0,
           "incr: bad delta under noreply");
    ok(req.noreply, "incr: error is silent under noreply");
    is_err("incr n\r\n", RSP_CLIENT_ERROR_FORMAT, 0, "incr: no delta");
    is_err("decr\r\n", RSP_CLIENT_ERROR_FORMAT, 0, "decr: no key");
}

static void
test_touch(void)
{
    ok(is_req("touch k 10\r\n", REQ_TOUCH, "touch") && req.exptime == 10,
       "touch: exptime");
    ok(is_req("touch k -1 noreply\r\n", REQ_TOUCH, "touch noreply")
       && req.exptime == -1 && req.noreply, "touch: negative, noreply");
    is_err("touch k abc\r\n", RSP_CLIENT_ERROR_EXPTIME, 0, "touch: bad");
    is_err("touch k\r\n", RSP_CLIENT_ERROR_FORMAT, 0, "touch: no exptime");
}

static void
test_admin(void)
{
    ok(is_req("flush_all\r\n", REQ_FLUSH_ALL, "flush_all") && req.num == -1,
       "flush_all: no delay");
    ok(is_req("flush_all 10\r\n", REQ_FLUSH_ALL, "flush_all 10")
       && req.num == 10 && !req.noreply, "flush_all: delay");
    ok(is_req("flush_all noreply\r\n", REQ_FLUSH_ALL, "flush_all noreply")
       && req.num == -1 && req.noreply, "flush_all: noreply, no delay");
    ok(is_req("flush_all 0 noreply\r\n", REQ_FLUSH_ALL, "flush_all 0 nr")
       && req.num == 0 && req.noreply, "flush_all: 0 and noreply");
    ok(is_req("flush_all -5\r\n", REQ_FLUSH_ALL, "flush_all -5")
       && req.num == -5, "flush_all: negative delay kept");
    is_err("flush_all abc\r\n", RSP_CLIENT_ERROR_EXPTIME, 0,
           "flush_all: bad delay");
    is_err("flush_all 1 2 3\r\n", RSP_ERROR, 0, "flush_all: too many");
    is_err("flush_all 1 2 noreply\r\n", RSP_ERROR, 0,
           "flush_all: too many, noreply");
    ok(!req.noreply, "flush_all: that ERROR is sent");

    ok(is_req("verbosity 1\r\n", REQ_VERBOSITY, "verbosity") && req.num == 1,
       "verbosity: level");
    ok(is_req("verbosity 5 noreply\r\n", REQ_VERBOSITY, "verbosity noreply")
       && req.num == 5 && req.noreply, "verbosity: level uncapped, noreply");
    ok(is_req("verbosity 1 2\r\n", REQ_VERBOSITY, "verbosity 1 2")
       && req.num == 1, "verbosity: extra token ignored");
    is_err("verbosity\r\n", RSP_CLIENT_ERROR_FORMAT, 0,
           "verbosity: missing (1.6.45)");
    is_err("verbosity abc\r\n", RSP_CLIENT_ERROR_FORMAT, 0,
           "verbosity: not a number");
    is_err("verbosity noreply\r\n", RSP_CLIENT_ERROR_FORMAT, 0,
           "verbosity noreply: an error...");
    ok(req.noreply, "...that is not sent");
    is_err("verbosity 1 2 3\r\n", RSP_ERROR, 0, "verbosity: too many");

    ok(is_req("cache_memlimit 100\r\n", REQ_CACHE_MEMLIMIT, "memlimit")
       && req.num == 100 && !req.noreply, "cache_memlimit: MB");
    ok(is_req("cache_memlimit 64 noreply\r\n", REQ_CACHE_MEMLIMIT,
              "memlimit noreply") && req.noreply, "cache_memlimit: noreply");
    is_err("cache_memlimit abc\r\n", RSP_ERROR, 0, "cache_memlimit: NaN");
    is_err("cache_memlimit\r\n", RSP_ERROR, 0, "cache_memlimit: missing");
    is_err("cache_memlimit 1 2 3\r\n", RSP_ERROR, 0,
           "cache_memlimit: too many");
}

static void
test_kept(void)
{
    ok(is_req("version\r\n", REQ_VERSION, "version") && req.ntokens == 1,
       "version: one token");
    is_req("version x\r\n", REQ_VERSION, "version x (1.6.18 answers)");
    is_req("quit\r\n", REQ_QUIT, "quit");
    ok(is_req("shutdown graceful\r\n", REQ_SHUTDOWN, "shutdown graceful")
       && req.ntokens == 2, "shutdown: tokens kept");
    is_mem(req.tokens[1].p, req.tokens[1].len, "graceful", "shutdown: arg");
    ok(is_req("stats  detail   on\r\n", REQ_STATS, "stats detail on")
       && req.ntokens == 3, "stats: three tokens");
    is_mem(req.tokens[2].p, req.tokens[2].len, "on", "stats: last arg");
    ok(is_req("stats\r\n", REQ_STATS, "stats") && req.ntokens == 1,
       "stats: alone");
    ok(is_req("slabs reassign 1 2\r\n", REQ_SLABS, "slabs")
       && req.ntokens == 4, "slabs: tokens");
    ok(is_req("lru tune 20 20 0.1 2\r\n", REQ_LRU, "lru")
       && req.ntokens == 6, "lru: tokens");
    ok(is_req("lru_crawler metadump all\r\n", REQ_LRU_CRAWLER, "crawler")
       && req.ntokens == 3, "lru_crawler: tokens");
    ok(is_req("stats noreply\r\n", REQ_STATS, "stats noreply")
       && !req.noreply, "stats: noreply not a stats option");
}

static void
test_meta(void)
{
    ok(is_req("mg foo v t f\r\n", REQ_MG, "mg") && req.ntokens == 5,
       "mg: tokens");
    is_mem(req.tokens[1].p, req.tokens[1].len, "foo", "mg: key token");
    is_mem(req.tokens[4].p, req.tokens[4].len, "f", "mg: last flag");
    ok(is_req("ms foo 3 T0\r\n", REQ_MS, "ms") && req.ntokens == 4,
       "ms: tokens, no data handled here");
    is_req("md foo q\r\n", REQ_MD, "md");
    is_req("ma foo\r\n", REQ_MA, "ma");
    ok(is_req("mn\r\n", REQ_MN, "mn") && req.ntokens == 1, "mn: alone");
    is_req("me foo\r\n", REQ_ME, "me");
    is_err("mx foo\r\n", RSP_ERROR, 0, "unknown meta-like command");
    ok(is_req("mg k a b c d e f g h i j k l m n o p q r s t u v w x y\r\n",
              REQ_MG, "mg with many flags") && req.ntokens == PROTO_MAX_TOKENS,
       "mg: tokens capped");
    is_mem(req.tokens[PROTO_MAX_TOKENS - 1].p,
           req.tokens[PROTO_MAX_TOKENS - 1].len, "v w x y",
           "mg: last token holds the rest");
}

/* token_space() against a byte at a time: a space (or none) at every
 * place of strings up to 40 bytes, among bytes of every kind. */
static void
test_token_space(void)
{
    static const char fill[] = "aZ0:\x7f\x80\xa0\xff\x1f!~\x21\x1f";
    char s[48];
    unsigned bad = 0;

    for (size_t len = 0; len <= 40; len++) {
        for (size_t at = 0; at <= len; at++) {
            const char *want;

            for (size_t i = 0; i < len; i++) {
                s[i] = fill[(i * 7 + len) % (sizeof(fill) - 1)];
            }
            if (at < len) {
                s[at] = ' ';
            }
            if (at + 1 < len) {
                s[at + 1] = ' ';        /* only the first one counts */
            }
            for (want = s; want < s + len && *want != ' '; want++) {
            }
            bad += token_space(s, s + len) != want;
        }
    }
    is_int(bad, 0, "token_space finds the first space, or the end");
}

int
main(void)
{
    test_token_space();
    test_framing();
    test_long_lines();
    test_http_guard();
    test_get();
    test_only_key();
    test_key_walk();
    test_gat();
    test_set();
    test_set_errors();
    test_cas();
    test_delete();
    test_arith();
    test_touch();
    test_long_keys();
    test_admin();
    test_kept();
    test_meta();
    return done_testing();
}
