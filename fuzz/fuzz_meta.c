/*
 * fuzz_meta.c: the meta protocol: each line split by the text parser,
 * its flags checked and decoded by meta_parse(), the reply line composed
 * from them for every return code, and base64 keys round-tripped.
 */
#include <string.h>

#include "fuzz/fuzz.h"

#include "proto/meta.h"
#include "proto/text.h"

static const char *const codes[] = { "VA", "HD", "EN", "NS", "EX", "NF" };

/* The reply line for every return code, from what a hit might hold. */
static void
compose_all(const struct request *req, const struct meta *m)
{
    struct meta_result r = {
        .hit = true, .cas = 123456789, .client_flags = 42, .ttl = -1,
        .vlen = m->vlen, .fetched = true, .last_access = 7, .win = true,
        .stale = true, .token_sent = true, .key_binary = true,
    };
    char line[2048];

    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
        size_t n = meta_compose(line, sizeof(line), req->type, codes[i],
                                m, &r);

        FUZZ_CHECK(n <= sizeof(line));
        if (n > 0) {
            FUZZ_CHECK(n >= 4 && memcmp(line + n - 2, "\r\n", 2) == 0);
        }
        FUZZ_CHECK(meta_compose(line, 8, req->type, codes[i], m, &r) <= 8);
    }
}

/* decode(encode(key)) == key, for a key as given. */
static void
base64_round_trip(const struct token *key)
{
    /* decoding needs room for whole quanta */
    char enc[4 * ((PROTO_KEY_MAX + 2) / 3) + 1], dec[PROTO_KEY_MAX + 3];
    size_t n;
    ssize_t back;

    if (key->len == 0 || key->len > PROTO_KEY_MAX) {
        return;
    }
    n = meta_base64_encode(key->p, key->len, enc, sizeof(enc));
    FUZZ_CHECK(n > 0 && n <= sizeof(enc));
    back = meta_base64_decode(enc, n, dec, sizeof(dec));
    FUZZ_CHECK(back == (ssize_t)key->len);
    FUZZ_CHECK(memcmp(dec, key->p, key->len) == 0);
    /* and decoding the raw bytes never writes past what it is given */
    back = meta_base64_decode(key->p, key->len, dec, sizeof(dec));
    FUZZ_CHECK(back >= -1 && back <= (ssize_t)sizeof(dec));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    size_t off = 0;

    while (off < size) {
        struct request req;
        struct meta m;
        uint32_t swallow = 0;
        ssize_t n = text_parse(&req, buf + off, size - off);
        enum rsp_type err;

        if (n == PROTO_EUNFIN || n == PROTO_ECLOSE) {
            break;
        }
        FUZZ_CHECK(n > 0 && (size_t)n <= size - off);
        off += (size_t)n;
        if (req.type < REQ_MN || req.type > REQ_ME) {
            if (req.type == REQ_ERROR) {
                off = fuzz_skip(off, size, req.swallow);
            }
            continue;
        }
        err = meta_parse(&req, &m, &swallow);
        if (err != RSP_NONE) {
            off = fuzz_skip(off, size, swallow);
            continue;
        }
        FUZZ_CHECK(m.nflags <= META_MAX_TOKENS);
        FUZZ_CHECK(m.key.len <= PROTO_KEY_MAX);
        FUZZ_CHECK(m.opaque.len <= META_OPAQUE_MAX);
        for (unsigned i = 0; i < m.nflags; i++) {
            FUZZ_CHECK(meta_has(&m, m.flags[i].c));
            FUZZ_CHECK(fuzz_inside(buf, size, m.flags[i].arg.p,
                                   m.flags[i].arg.len));
        }
        if (meta_has(&m, 'b')) {
            FUZZ_CHECK(fuzz_inside(m.keybuf, sizeof(m.keybuf), m.key.p,
                                   m.key.len));
        } else {
            FUZZ_CHECK(fuzz_inside(buf, size, m.key.p, m.key.len));
        }
        compose_all(&req, &m);
        base64_round_trip(&m.key);
        if (req.type == REQ_MS) {
            size_t data_len = (size_t)m.vlen + 2;

            off = fuzz_skip(off, size, data_len);
        }
    }
    return 0;
}
