/*
 * test_binary.c: the binary protocol's parser and reply headers
 * (proto/binary.h): every opcode's shape, every refusal memcached makes,
 * partial packets, and the header a reply starts with.
 */
#include "proto/binary.h"
#include "t/tap.h"

#include <stdio.h>
#include <string.h>

/* A request packet: header, extras, key, value. */
static size_t
packet(char *out, uint8_t op, const char *ext, uint8_t extlen,
       const char *key, const char *val, uint64_t cas)
{
    size_t kl = key != NULL ? strlen(key) : 0;
    size_t vl = val != NULL ? strlen(val) : 0;

    memset(out, 0, BIN_HEADER_LEN);
    out[0] = (char)BIN_MAGIC_REQ;
    out[1] = (char)op;
    out[2] = (char)(kl >> 8);
    out[3] = (char)kl;
    out[4] = (char)extlen;
    bin_put32(out + 8, (uint32_t)(extlen + kl + vl));
    bin_put32(out + 12, 0xdeadbeef);
    bin_put64(out + 16, cas);
    if (extlen > 0) {
        memcpy(out + BIN_HEADER_LEN, ext, extlen);
    }
    if (kl > 0) {
        memcpy(out + BIN_HEADER_LEN + extlen, key, kl);
    }
    if (vl > 0) {
        memcpy(out + BIN_HEADER_LEN + extlen + kl, val, vl);
    }
    return BIN_HEADER_LEN + extlen + kl + vl;
}

static void
test_gets(void)
{
    static const struct { uint8_t op; bool quiet, with_key; } g[] = {
        { BIN_OP_GET, false, false }, { BIN_OP_GETQ, true, false },
        { BIN_OP_GETK, false, true }, { BIN_OP_GETKQ, true, true },
    };
    struct bin_request r;
    char buf[256];

    for (size_t i = 0; i < sizeof(g) / sizeof(g[0]); i++) {
        size_t n = packet(buf, g[i].op, NULL, 0, "foo", NULL, 7);
        char name[64];

        snprintf(name, sizeof(name), "get op %#x parses", g[i].op);
        is_int(bin_parse(&r, buf, n), 27, name);
        ok(r.cmd == BIN_CMD_GET && r.quiet == g[i].quiet &&
           r.with_key == g[i].with_key && r.opaque == 0xdeadbeef &&
           r.cas == 7 && r.key.len == 3 && memcmp(r.key.p, "foo", 3) == 0,
           "... its form, opaque, cas and key");
    }
}

static void
test_stores(void)
{
    char ext[20], buf[256];
    struct bin_request r;
    size_t n;

    bin_put32(ext, 0xcafe);
    bin_put32(ext + 4, 300);
    n = packet(buf, BIN_OP_SETQ, ext, 8, "k1", "hello", 0);
    is_int(bin_parse(&r, buf, n), 24 + 8 + 2, "set: header, extras, key");
    ok(r.cmd == BIN_CMD_SET && r.quiet && r.flags == 0xcafe &&
       r.exptime == 300 && r.vlen == 5, "set: flags, exptime, value length");
    ok(bin_has_value(r.cmd), "a set has a value to read");
    n = packet(buf, BIN_OP_APPEND, NULL, 0, "k1", "xy", 3);
    is_int(bin_parse(&r, buf, n), 26, "append: no extras");
    ok(r.cmd == BIN_CMD_APPEND && r.vlen == 2 && r.cas == 3, "append");
    bin_put64(ext, 5);
    bin_put64(ext + 8, 10);
    bin_put32(ext + 16, 0xffffffff);
    n = packet(buf, BIN_OP_DECREMENTQ, ext, 20, "n", NULL, 0);
    is_int(bin_parse(&r, buf, n), 45, "decr: 20 bytes of extras");
    ok(r.cmd == BIN_CMD_DECR && r.quiet && r.delta == 5 && r.initial == 10 &&
       r.exptime == 0xffffffff, "decr: delta, initial, exptime");
    ok(!bin_has_value(r.cmd), "decr reads no value");
}

static void
test_others(void)
{
    char ext[4], buf[256];
    struct bin_request r;
    size_t n;

    bin_put32(ext, 60);
    n = packet(buf, BIN_OP_GATK, ext, 4, "key", NULL, 0);
    ok(bin_parse(&r, buf, n) == 31 && r.cmd == BIN_CMD_GAT &&
       r.with_key && r.exptime == 60, "gatk: exptime, key echoed");
    n = packet(buf, BIN_OP_TOUCH, ext, 4, "key", NULL, 0);
    ok(bin_parse(&r, buf, n) == 31 && r.cmd == BIN_CMD_TOUCH, "touch");
    n = packet(buf, BIN_OP_FLUSH, ext, 4, NULL, NULL, 0);
    ok(bin_parse(&r, buf, n) == 28 && r.cmd == BIN_CMD_FLUSH &&
       r.exptime == 60, "flush with a delay");
    n = packet(buf, BIN_OP_FLUSHQ, NULL, 0, NULL, NULL, 0);
    ok(bin_parse(&r, buf, n) == 24 && r.quiet && r.exptime == 0,
       "flushq without one");
    n = packet(buf, BIN_OP_STAT, NULL, 0, "items", NULL, 0);
    ok(bin_parse(&r, buf, n) == 29 && r.cmd == BIN_CMD_STAT &&
       r.key.len == 5, "stat with a group");
    n = packet(buf, BIN_OP_STAT, NULL, 0, NULL, NULL, 0);
    ok(bin_parse(&r, buf, n) == 24 && r.key.len == 0, "stat alone");
    n = packet(buf, BIN_OP_QUITQ, NULL, 0, NULL, NULL, 0);
    ok(bin_parse(&r, buf, n) == 24 && r.cmd == BIN_CMD_QUIT && r.quiet,
       "quitq");
    n = packet(buf, BIN_OP_NOOP, NULL, 0, NULL, NULL, 0);
    ok(bin_parse(&r, buf, n) == 24 && r.cmd == BIN_CMD_NOOP, "noop");
    n = packet(buf, BIN_OP_VERSION, NULL, 0, NULL, NULL, 0);
    ok(bin_parse(&r, buf, n) == 24 && r.cmd == BIN_CMD_VERSION, "version");
    n = packet(buf, BIN_OP_SASL_LIST_MECHS, NULL, 0, NULL, NULL, 0);
    ok(bin_parse(&r, buf, n) == 24 && r.cmd == BIN_CMD_SASL && r.vlen == 0,
       "sasl list mechs");
    n = packet(buf, BIN_OP_SASL_AUTH, NULL, 0, "PLAIN", "\1u\1p", 0);
    ok(bin_parse(&r, buf, n) == 29 && r.cmd == BIN_CMD_SASL &&
       r.key.len == 5 && r.vlen == 4 && bin_has_value(r.cmd),
       "sasl auth: its mechanism and the data after it");
}

/* A refused request: its status, close or swallow. */
static void
refused(const char *buf, size_t n, enum bin_status st, bool close,
        uint32_t swallow, const char *name)
{
    struct bin_request r;
    ssize_t got = bin_parse(&r, buf, n);
    ssize_t used = 24 + (uint8_t)buf[4] + bin_get16(buf + 2);

    if (!ok(got == used && r.cmd == BIN_CMD_ERROR && r.status == st &&
            r.close == close && r.swallow == swallow, name)) {
        printf("#   got %zd cmd %d status %#x close %d swallow %u\n", got,
               r.cmd, r.status, r.close, r.swallow);
    }
}

static void
test_refusals(void)
{
    char ext[8] = { 0 }, buf[512], key[300];
    size_t n;

    n = packet(buf, BIN_OP_GET, ext, 4, "k", NULL, 0);
    refused(buf, n, BIN_EINVAL, true, 0, "get with extras: EINVAL, close");
    n = packet(buf, BIN_OP_SET, NULL, 0, "k", "v", 0);
    refused(buf, n, BIN_EINVAL, true, 0, "set without extras");
    n = packet(buf, BIN_OP_GET, NULL, 0, "k", "zz", 0);
    refused(buf, n, BIN_EINVAL, true, 0, "get with a value");
    n = packet(buf, BIN_OP_NOOP, NULL, 0, "k", NULL, 0);
    refused(buf, n, BIN_EINVAL, true, 0, "noop with a key");
    n = packet(buf, BIN_OP_SET, ext, 8, "", "v", 0);
    refused(buf, n, BIN_EINVAL, true, 0, "set with no key");
    memset(key, 'k', 251);
    key[251] = '\0';
    n = packet(buf, BIN_OP_GET, NULL, 0, key, NULL, 0);
    refused(buf, n, BIN_EINVAL, true, 0, "a key of 251 bytes");
    n = packet(buf, 0x50, NULL, 0, key, NULL, 0);
    refused(buf, n, BIN_EINVAL, true, 0,
            "unknown opcode with a key over 250: EINVAL, close");
    key[250] = '\0';
    n = packet(buf, BIN_OP_GET, NULL, 0, key, NULL, 0);
    is_int(bin_parse(&(struct bin_request){ 0 }, buf, n), 274,
           "250 bytes is fine");
    n = packet(buf, 0x50, NULL, 0, "k", "abc", 0);
    refused(buf, n, BIN_UNKNOWN_COMMAND, false, 3,
            "unknown opcode: the rest of its body swallowed, connection kept");
    n = packet(buf, BIN_OP_SASL_LIST_MECHS, NULL, 0, "k", NULL, 0);
    refused(buf, n, BIN_EINVAL, true, 0, "SASL list with a key");
    n = packet(buf, BIN_OP_SASL_AUTH, NULL, 0, NULL, "abc", 0);
    refused(buf, n, BIN_EINVAL, true, 0, "SASL auth with no mechanism");
    n = packet(buf, BIN_OP_STAT, ext, 4, NULL, NULL, 0);
    refused(buf, n, BIN_EINVAL, true, 0, "stat with extras");
    n = packet(buf, BIN_OP_VERBOSITY, "\0\0\0\1", 4, NULL, NULL, 0);
    refused(buf, n, BIN_UNKNOWN_COMMAND, false, 0,
            "verbosity, even with its level: unknown command, as memcached");
    n = packet(buf, BIN_OP_GET, NULL, 0, "abc", NULL, 0);
    bin_put32(buf + 8, 1);
    refused(buf, n, BIN_UNKNOWN_COMMAND, true, 0,
            "a body shorter than its key: unknown command, close");
}

static void
test_partial(void)
{
    char ext[8] = { 0 }, buf[256];
    struct bin_request r;
    size_t n = packet(buf, BIN_OP_SET, ext, 8, "key", "value", 0);

    is_int(bin_parse(&r, buf, 23), PROTO_EUNFIN, "23 bytes: more needed");
    is_int(bin_parse(&r, buf, 30), PROTO_EUNFIN, "extras cut: more needed");
    is_int(bin_parse(&r, buf, 34), PROTO_EUNFIN, "key cut: more needed");
    is_int(bin_parse(&r, buf, 35), 35, "key complete, value not needed");
    is_int(bin_parse(&r, buf, n), 35, "whole packet");
    buf[0] = 0x42;
    is_int(bin_parse(&r, buf, n), PROTO_ECLOSE, "wrong magic: close");
    n = packet(buf, BIN_OP_SET, ext, 8, "k", NULL, 0);
    bin_put32(buf + 8, BIN_BODY_MAX);
    ok(bin_parse(&r, buf, n) == 33 && r.vlen == BIN_BODY_MAX - 9,
       "a 1 GB body parses; its size is storage's to refuse");
    bin_put32(buf + 8, 0x7fffffff);
    ok(bin_parse(&r, buf, n) == 33 && r.cmd == BIN_CMD_ERROR &&
       r.status == BIN_EINVAL && r.close,
       "a 2 GB body: EINVAL, close (1.6.45)");
    n = packet(buf, BIN_OP_GET, NULL, 0, NULL, NULL, 0);
    buf[2] = 1;     /* a key of 256 bytes, not sent */
    bin_put32(buf + 8, 256);
    is_int(bin_parse(&r, buf, n), PROTO_EUNFIN,
           "a key over 250 is judged once it is in, as memcached");
}

static void
test_compose(void)
{
    char h[BIN_HEADER_LEN];
    static const unsigned char want[BIN_HEADER_LEN] = {
        0x81, 0x0c, 0x00, 0x02, 0x04, 0x00, 0x00, 0x01,
        0x00, 0x00, 0x00, 0x0b, 0xde, 0xad, 0xbe, 0xef,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02,
    };

    bin_compose_header(h, BIN_OP_GETK, BIN_KEY_ENOENT, 0xdeadbeef, 0x102, 4,
                       2, 11);
    ok(memcmp(h, want, sizeof(want)) == 0, "a reply header, byte for byte");
    is_str(bin_status_text(BIN_KEY_EEXISTS), "Data exists for key.",
           "EEXISTS text");
    is_str(bin_status_text(BIN_DELTA_BADVAL),
           "Non-numeric server-side value for incr or decr", "BADVAL text");
    is_str(bin_status_text(BIN_SUCCESS), "", "success has no text");
}

int
main(void)
{
    test_gets();
    test_stores();
    test_others();
    test_refusals();
    test_partial();
    test_compose();
    return done_testing();
}
