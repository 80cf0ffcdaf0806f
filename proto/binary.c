/*
 * binary.c: the binary protocol's parser and reply headers (binary.h).
 *
 * Each opcode memcached serves has a row in `rules`: the command it is,
 * its quiet and key-echoing forms, the extras it takes, whether it takes
 * a key and a value.  A packet that does not fit its row gets memcached's
 * answer for it.
 */
#include "proto/binary.h"

#include <string.h>

enum key_rule { KEY_NONE, KEY_NEED, KEY_ANY };

struct rule {
    bool            known;
    enum bin_cmd    cmd;
    bool            quiet;
    bool            with_key;
    uint8_t         ext;            /* extras length it takes ... */
    uint8_t         ext_alt;        /* ... or this one (flush: 0 or 4) */
    enum key_rule   key;
    bool            value;          /* a value may follow the key */
};

/* Row shorthand: R(opcode, command, quiet, key echoed, extras, other
 * extras length, key rule, value), quiet and echoed as 0 or 1. */
#define R(op, c, q, k, e, ea, key_, v) \
    [BIN_OP_##op] = { true, BIN_CMD_##c, q, k, e, ea, KEY_##key_, v }

static const struct rule rules[256] = {
    R(GET,        GET,     0, 0,  0,  0, NEED, 0),
    R(GETQ,       GET,     1, 0,  0,  0, NEED, 0),
    R(GETK,       GET,     0, 1,  0,  0, NEED, 0),
    R(GETKQ,      GET,     1, 1,  0,  0, NEED, 0),
    R(GAT,        GAT,     0, 0,  4,  4, NEED, 0),
    R(GATQ,       GAT,     1, 0,  4,  4, NEED, 0),
    R(GATK,       GAT,     0, 1,  4,  4, NEED, 0),
    R(GATKQ,      GAT,     1, 1,  4,  4, NEED, 0),
    R(TOUCH,      TOUCH,   0, 0,  4,  4, NEED, 0),
    R(SET,        SET,     0, 0,  8,  8, NEED, 1),
    R(SETQ,       SET,     1, 0,  8,  8, NEED, 1),
    R(ADD,        ADD,     0, 0,  8,  8, NEED, 1),
    R(ADDQ,       ADD,     1, 0,  8,  8, NEED, 1),
    R(REPLACE,    REPLACE, 0, 0,  8,  8, NEED, 1),
    R(REPLACEQ,   REPLACE, 1, 0,  8,  8, NEED, 1),
    R(APPEND,     APPEND,  0, 0,  0,  0, NEED, 1),
    R(APPENDQ,    APPEND,  1, 0,  0,  0, NEED, 1),
    R(PREPEND,    PREPEND, 0, 0,  0,  0, NEED, 1),
    R(PREPENDQ,   PREPEND, 1, 0,  0,  0, NEED, 1),
    R(DELETE,     DELETE,  0, 0,  0,  0, NEED, 0),
    R(DELETEQ,    DELETE,  1, 0,  0,  0, NEED, 0),
    R(INCREMENT,  INCR,    0, 0, 20, 20, NEED, 0),
    R(INCREMENTQ, INCR,    1, 0, 20, 20, NEED, 0),
    R(DECREMENT,  DECR,    0, 0, 20, 20, NEED, 0),
    R(DECREMENTQ, DECR,    1, 0, 20, 20, NEED, 0),
    R(QUIT,       QUIT,    0, 0,  0,  0, NONE, 0),
    R(QUITQ,      QUIT,    1, 0,  0,  0, NONE, 0),
    R(FLUSH,      FLUSH,   0, 0,  0,  4, NONE, 0),
    R(FLUSHQ,     FLUSH,   1, 0,  0,  4, NONE, 0),
    R(NOOP,       NOOP,    0, 0,  0,  0, NONE, 0),
    R(VERSION,    VERSION, 0, 0,  0,  0, NONE, 0),
    R(STAT,       STAT,    0, 0,  0,  0, ANY,  0),
    R(SASL_LIST_MECHS, SASL, 0, 0, 0, 0, NONE, 0),
    R(SASL_AUTH,  SASL,    0, 0,  0,  0, NEED, 1),
    R(SASL_STEP,  SASL,    0, 0,  0,  0, NEED, 1),
    /* VERBOSITY is not here: memcached 1.6 answers it "Unknown command"
     * whatever it carries. */
};

#undef R

static const char *const status_text[256] = {
    [BIN_KEY_ENOENT] = "Not found",
    [BIN_KEY_EEXISTS] = "Data exists for key.",
    [BIN_E2BIG] = "Too large.",
    [BIN_EINVAL] = "Invalid arguments",
    [BIN_NOT_STORED] = "Not stored.",
    [BIN_DELTA_BADVAL] = "Non-numeric server-side value for incr or decr",
    [BIN_AUTH_ERROR] = "Auth failure.",
    [BIN_UNKNOWN_COMMAND] = "Unknown command",
    [BIN_ENOMEM] = "Out of memory",
};

const char *
bin_status_text(enum bin_status st)
{
    const char *s = (unsigned)st < 256 ? status_text[st] : NULL;

    return s != NULL ? s : "";
}

/* The request is refused with `st`: what was parsed (header, extras and
 * key) is consumed, the rest of the body swallowed unless the connection
 * closes. */
static ssize_t
refuse(struct bin_request *r, enum bin_status st, bool close, size_t used,
       uint32_t rest)
{
    r->cmd = BIN_CMD_ERROR;
    r->status = st;
    r->close = close;
    r->swallow = close ? 0 : rest;
    return (ssize_t)used;
}

/* Do the packet's extras, key and body fit the opcode's row? */
static bool
fits(const struct rule *ru, uint8_t extlen, uint16_t keylen,
     uint32_t bodylen)
{
    if (extlen != ru->ext && extlen != ru->ext_alt) {
        return false;
    }
    switch (ru->key) {
    case KEY_NONE:
        if (keylen != 0) {
            return false;
        }
        break;
    case KEY_NEED:
        if (keylen == 0) {
            return false;
        }
        break;
    default:
        break;
    }
    return ru->value || bodylen == (uint32_t)extlen + keylen;
}

/* The extras, by command. */
static void
decode_extras(struct bin_request *r, const char *ext, uint8_t extlen)
{
    switch (r->cmd) {
    case BIN_CMD_SET: case BIN_CMD_ADD: case BIN_CMD_REPLACE:
        r->flags = bin_get32(ext);
        r->exptime = bin_get32(ext + 4);
        break;
    case BIN_CMD_INCR: case BIN_CMD_DECR:
        r->delta = bin_get64(ext);
        r->initial = bin_get64(ext + 8);
        r->exptime = bin_get32(ext + 16);
        break;
    case BIN_CMD_GAT: case BIN_CMD_TOUCH:
        r->exptime = bin_get32(ext);
        break;
    case BIN_CMD_FLUSH:
        r->exptime = extlen == 4 ? bin_get32(ext) : 0;
        break;
    default:
        break;
    }
}

ssize_t
bin_parse(struct bin_request *r, const char *buf, size_t len)
{
    const struct rule *ru;
    uint8_t extlen;
    uint16_t keylen;
    uint32_t bodylen;
    size_t used;

    if (len < BIN_HEADER_LEN) {
        return PROTO_EUNFIN;
    }
    if ((unsigned char)buf[0] != BIN_MAGIC_REQ) {
        return PROTO_ECLOSE;
    }
    keylen = bin_get16(buf + 2);
    extlen = (uint8_t)buf[4];
    used = (size_t)BIN_HEADER_LEN + extlen + keylen;
    /* As memcached: the extras and key are in before anything is
     * judged. */
    if (len < used) {
        return PROTO_EUNFIN;
    }
    memset(r, 0, sizeof(*r));
    r->opcode = (uint8_t)buf[1];
    bodylen = bin_get32(buf + 8);
    r->opaque = bin_get32(buf + 12);
    r->cas = bin_get64(buf + 16);
    ru = &rules[r->opcode];
    if ((uint32_t)keylen + extlen > bodylen) {
        return refuse(r, BIN_UNKNOWN_COMMAND, true, used, 0);
    }
    if (bodylen > BIN_BODY_MAX || keylen > PROTO_KEY_MAX) {
        return refuse(r, BIN_EINVAL, true, used, 0);
    }
    if (!ru->known) {
        return refuse(r, BIN_UNKNOWN_COMMAND, false, used,
                      bodylen - extlen - keylen);
    }
    if (!fits(ru, extlen, keylen, bodylen)) {
        return refuse(r, BIN_EINVAL, true, used, 0);
    }
    r->cmd = ru->cmd;
    r->quiet = ru->quiet;
    r->with_key = ru->with_key;
    decode_extras(r, buf + BIN_HEADER_LEN, extlen);
    r->key.p = buf + BIN_HEADER_LEN + extlen;
    r->key.len = keylen;
    r->vlen = bodylen - extlen - keylen;
    return (ssize_t)used;
}

void
bin_compose_header(char *out, uint8_t opcode, uint16_t status,
                   uint32_t opaque, uint64_t cas, uint8_t extlen,
                   uint16_t keylen, uint32_t bodylen)
{
    out[0] = (char)BIN_MAGIC_RES;
    out[1] = (char)opcode;
    out[2] = (char)(keylen >> 8);
    out[3] = (char)keylen;
    out[4] = (char)extlen;
    out[5] = 0;
    out[6] = (char)(status >> 8);
    out[7] = (char)status;
    bin_put32(out + 8, bodylen);
    bin_put32(out + 12, opaque);
    bin_put64(out + 16, cas);
}
