/*
 * binary.h: memcached's binary protocol, parsed and composed.
 *
 * Pure: bytes in, struct bin_request out; headers composed into the
 * caller's buffer; no allocation, no I/O, libc only.
 *
 * A packet is a 24-byte header, then extras, key and value, integers
 * big-endian:
 *
 *   0 magic (0x80 request, 0x81 reply)  1 opcode  2-3 key length
 *   4 extras length  5 data type  6-7 vbucket (request) / status (reply)
 *   8-11 body length (extras + key + value)  12-15 opaque (echoed)
 *   16-23 CAS
 *
 * bin_parse() takes the header, the extras and the key; the value of a
 * store follows and is read by the caller straight into the item.  The
 * rules of which extras and key each opcode takes, and what memcached
 * answers when they are wrong, are memcached 1.6's, checked on the wire
 * against Debian's memcached (../shared/reference/memcached-binary.md).
 */
#ifndef MCPM_PROTO_BINARY_H
#define MCPM_PROTO_BINARY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto/request.h"

#define BIN_HEADER_LEN  24
#define BIN_MAGIC_REQ   0x80
#define BIN_MAGIC_RES   0x81
#define BIN_BODY_MAX    (1024u * 1024 * 1024)  /* longer: refused, closed */

enum bin_opcode {
    BIN_OP_GET = 0x00, BIN_OP_SET = 0x01, BIN_OP_ADD = 0x02,
    BIN_OP_REPLACE = 0x03, BIN_OP_DELETE = 0x04, BIN_OP_INCREMENT = 0x05,
    BIN_OP_DECREMENT = 0x06, BIN_OP_QUIT = 0x07, BIN_OP_FLUSH = 0x08,
    BIN_OP_GETQ = 0x09, BIN_OP_NOOP = 0x0a, BIN_OP_VERSION = 0x0b,
    BIN_OP_GETK = 0x0c, BIN_OP_GETKQ = 0x0d, BIN_OP_APPEND = 0x0e,
    BIN_OP_PREPEND = 0x0f, BIN_OP_STAT = 0x10, BIN_OP_SETQ = 0x11,
    BIN_OP_ADDQ = 0x12, BIN_OP_REPLACEQ = 0x13, BIN_OP_DELETEQ = 0x14,
    BIN_OP_INCREMENTQ = 0x15, BIN_OP_DECREMENTQ = 0x16, BIN_OP_QUITQ = 0x17,
    BIN_OP_FLUSHQ = 0x18, BIN_OP_APPENDQ = 0x19, BIN_OP_PREPENDQ = 0x1a,
    BIN_OP_VERBOSITY = 0x1b, BIN_OP_TOUCH = 0x1c, BIN_OP_GAT = 0x1d,
    BIN_OP_GATQ = 0x1e, BIN_OP_SASL_LIST_MECHS = 0x20,
    BIN_OP_SASL_AUTH = 0x21, BIN_OP_SASL_STEP = 0x22, BIN_OP_GATK = 0x23,
    BIN_OP_GATKQ = 0x24
};

enum bin_status {
    BIN_SUCCESS = 0x00,
    BIN_KEY_ENOENT = 0x01,          /* "Not found" */
    BIN_KEY_EEXISTS = 0x02,         /* "Data exists for key." */
    BIN_E2BIG = 0x03,               /* "Too large." */
    BIN_EINVAL = 0x04,              /* "Invalid arguments" */
    BIN_NOT_STORED = 0x05,          /* "Not stored." */
    BIN_DELTA_BADVAL = 0x06,        /* "Non-numeric server-side value for
                                       incr or decr" */
    BIN_AUTH_ERROR = 0x20,          /* "Auth failure." */
    BIN_AUTH_CONTINUE = 0x21,
    BIN_UNKNOWN_COMMAND = 0x81,     /* "Unknown command" */
    BIN_ENOMEM = 0x82               /* "Out of memory" */
};

/* What a request asks, the quiet and key-echoing forms folded in. */
enum bin_cmd {
    BIN_CMD_GET, BIN_CMD_GAT, BIN_CMD_TOUCH,
    BIN_CMD_SET, BIN_CMD_ADD, BIN_CMD_REPLACE, BIN_CMD_APPEND,
    BIN_CMD_PREPEND, BIN_CMD_DELETE, BIN_CMD_INCR, BIN_CMD_DECR,
    BIN_CMD_QUIT, BIN_CMD_FLUSH, BIN_CMD_NOOP, BIN_CMD_VERSION,
    BIN_CMD_STAT, BIN_CMD_SASL,
    BIN_CMD_ERROR                   /* reply `status`, then close or
                                       swallow as the request says */
};

struct bin_request {
    uint8_t         opcode;
    enum bin_cmd    cmd;
    bool            quiet;          /* a Q form: success goes unanswered */
    bool            with_key;       /* a K form: the reply echoes the key */
    uint32_t        opaque;
    uint64_t        cas;
    struct token    key;            /* into the caller's buffer */
    uint32_t        flags;          /* set, add, replace */
    uint32_t        exptime;        /* stores, touch, gat, incr/decr, and
                                       flush's delay */
    uint64_t        delta;          /* incr/decr */
    uint64_t        initial;
    uint32_t        vlen;           /* stores: value bytes after the key */
    /* BIN_CMD_ERROR */
    enum bin_status status;
    bool            close;          /* close after the reply */
    uint32_t        swallow;        /* body bytes to discard after it */
};

/* True for the commands whose value follows the parsed part. */
static inline bool
bin_has_value(enum bin_cmd c)
{
    return (c >= BIN_CMD_SET && c <= BIN_CMD_PREPEND) || c == BIN_CMD_SASL;
}

/*
 * Parse one request from buf[0..len): the header, extras and key.
 * Returns the bytes they take (a store's or a SASL step's value, r->vlen
 * bytes, follows), PROTO_EUNFIN when more bytes are needed (as memcached,
 * nothing is judged before the extras and key are in), or PROTO_ECLOSE
 * for a packet that is not a binary request (wrong magic): memcached
 * closes without a reply.
 *
 * A request memcached refuses parses as BIN_CMD_ERROR with its status,
 * its header, extras and key consumed: a body shorter than its extras and
 * key (UNKNOWN_COMMAND, close); a body over BIN_BODY_MAX, a key over 250
 * bytes, or extras, key or body that do not fit the opcode (EINVAL,
 * close); an opcode memcached
 * does not serve, VERBOSITY included (UNKNOWN_COMMAND, the rest of the
 * body to swallow).
 */
ssize_t bin_parse(struct bin_request *r, const char *buf, size_t len);

/* Write a reply header (24 bytes) into out. */
void bin_compose_header(char *out, uint8_t opcode, uint16_t status,
                        uint32_t opaque, uint64_t cas, uint8_t extlen,
                        uint16_t keylen, uint32_t bodylen);

/* The body text memcached sends with an error status ("" for none). */
const char *bin_status_text(enum bin_status st);

/* Big-endian loads and stores. */
static inline uint16_t
bin_get16(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;

    return (uint16_t)(u[0] << 8 | u[1]);
}

static inline uint32_t
bin_get32(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;

    return (uint32_t)u[0] << 24 | (uint32_t)u[1] << 16 |
           (uint32_t)u[2] << 8 | u[3];
}

static inline uint64_t
bin_get64(const char *p)
{
    return (uint64_t)bin_get32(p) << 32 | bin_get32(p + 4);
}

static inline void
bin_put32(char *p, uint32_t v)
{
    p[0] = (char)(v >> 24);
    p[1] = (char)(v >> 16);
    p[2] = (char)(v >> 8);
    p[3] = (char)v;
}

static inline void
bin_put64(char *p, uint64_t v)
{
    bin_put32(p, (uint32_t)(v >> 32));
    bin_put32(p + 4, (uint32_t)v);
}

#endif
