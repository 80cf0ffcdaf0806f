/*
 * streams.c: a connection's bytes through the text and the binary
 * parser, request after request, as the daemon reads them; shared by the
 * text, binary and UDP harnesses.
 */
#include <string.h>

#include "fuzz/fuzz.h"

#include "proto/binary.h"
#include "proto/text.h"

/* Walk a multiget's keys as the daemon does. */
static void
walk_keys(const struct request *req, const char *buf, size_t n)
{
    struct token cursor = req->keys, key;
    int r;

    while ((r = text_next_key(&cursor, &key)) == 1) {
        FUZZ_CHECK(key.len > 0 && key.len <= PROTO_KEY_MAX);
        FUZZ_CHECK(fuzz_inside(buf, n, key.p, key.len));
    }
    FUZZ_CHECK(r == 0 || r == -1);
}

void
fuzz_text_stream(const char *buf, size_t size)
{
    size_t off = 0;

    while (off < size) {
        struct request req;
        ssize_t n = text_parse(&req, buf + off, size - off);

        if (n == PROTO_EUNFIN || n == PROTO_ECLOSE) {
            break;
        }
        FUZZ_CHECK(n > 0 && (size_t)n <= size - off);
        FUZZ_CHECK(req.ntokens <= PROTO_MAX_TOKENS);
        for (unsigned i = 0; i < req.ntokens; i++) {
            FUZZ_CHECK(fuzz_inside(buf, size, req.tokens[i].p,
                                   req.tokens[i].len));
        }
        if (req.type == REQ_ERROR) {
            off += (size_t)n;
            off = fuzz_skip(off, size, req.swallow);
            continue;
        }
        FUZZ_CHECK(req.type < REQ_TYPE_COUNT);
        if (req.type >= REQ_GET && req.type <= REQ_GATS) {
            walk_keys(&req, buf, size);
        } else if (req.type >= REQ_SET && req.type <= REQ_TOUCH) {
            /* the commands of one key; a meta key is meta_parse()'s */
            FUZZ_CHECK(req.key.len > 0 && req.key.len <= PROTO_KEY_MAX);
            FUZZ_CHECK(fuzz_inside(buf, size, req.key.p, req.key.len));
        }
        off += (size_t)n;
        if (req_has_data(req.type)) {
            size_t data_len = (size_t)req.vlen + 2;

            off = fuzz_skip(off, size, data_len);
        }
    }
}

void
fuzz_bin_stream(const char *buf, size_t size)
{
    size_t off = 0;

    while (off < size) {
        struct bin_request r;
        ssize_t n = bin_parse(&r, buf + off, size - off);
        char header[BIN_HEADER_LEN];

        if (n == PROTO_EUNFIN || n == PROTO_ECLOSE) {
            break;
        }
        FUZZ_CHECK(n >= BIN_HEADER_LEN && (size_t)n <= size - off);
        FUZZ_CHECK(r.cmd <= BIN_CMD_ERROR);
        FUZZ_CHECK(fuzz_inside(buf, size, r.key.p, r.key.len));
        off += (size_t)n;
        if (r.cmd == BIN_CMD_ERROR) {
            FUZZ_CHECK(bin_status_text(r.status) != NULL);
            bin_compose_header(header, r.opcode, (uint16_t)r.status,
                               r.opaque, 0, 0, 0,
                               (uint32_t)strlen(bin_status_text(r.status)));
            FUZZ_CHECK((uint8_t)header[0] == BIN_MAGIC_RES &&
                       (uint8_t)header[1] == r.opcode &&
                       bin_get16(header + 6) == (uint16_t)r.status &&
                       bin_get32(header + 12) == r.opaque);
            if (r.close) {
                break;
            }
            off = fuzz_skip(off, size, r.swallow);
            continue;
        }
        FUZZ_CHECK(r.key.len <= PROTO_KEY_MAX);
        if (bin_has_value(r.cmd)) {
            FUZZ_CHECK(r.vlen <= BIN_BODY_MAX);
            off = fuzz_skip(off, size, r.vlen);
        } else {
            FUZZ_CHECK(r.vlen == 0);
        }
    }
}
