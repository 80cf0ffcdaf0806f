/*
 * meta.h: memcached's meta protocol (mg ms md ma mn me): the flags of a
 * request, checked and decoded, and the reply lines.
 *
 * text_parse() recognises the meta command names and splits the line into
 * req->tokens; meta_parse() then turns those tokens into a struct meta.
 * Pure: no allocation, no I/O, libc only.
 */
#ifndef MCPM_PROTO_META_H
#define MCPM_PROTO_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/request.h"
#include "proto/response.h"

#define META_MAX_TOKENS  20     /* memcached's MFLAG_MAX_OPT_LENGTH */
#define META_OPAQUE_MAX  32     /* MFLAG_MAX_OPAQUE_LENGTH */

/* The bit of a flag letter in meta.seen: 'A'..'Z' are 0..25, 'a'..'z'
 * 26..51. */
#define META_BIT(c) \
    ((uint64_t)1 << ((c) >= 'a' ? (c) - 'a' + 26 : (c) - 'A'))

struct meta_flag {
    char         c;
    struct token arg;            /* the bytes glued to the letter */
};

struct meta {
    struct token key;            /* decoded when the b flag is given */
    uint64_t     seen;           /* META_BIT() of every flag present */
    unsigned     nflags;
    struct meta_flag flags[META_MAX_TOKENS];  /* in request order */

    /* Decoded arguments; meaningful only when the flag is in seen, except
     * the defaults noted. */
    int64_t      ttl;            /* T */
    int64_t      vivify_ttl;     /* N */
    int64_t      recache_ttl;    /* R */
    uint64_t     cas_compare;    /* C */
    uint64_t     cas_new;        /* E */
    uint32_t     client_flags;   /* F, default 0 */
    uint64_t     delta;          /* D, default 1 */
    uint64_t     initial;        /* J, default 0 */
    char         mode;           /* M, upper case: ms S E A P R (default
                                    S); ma I D (+ is I, - is D; default I) */
    struct token opaque;         /* O */
    uint32_t     vlen;           /* ms: <datalen> */

    char         keybuf[PROTO_KEY_MAX];   /* b: the decoded key */
};

static inline bool
meta_has(const struct meta *m, char c)
{
    return (m->seen & META_BIT(c)) != 0;
}

/*
 * Check and decode the flags of a REQ_MG/MS/MD/MA/ME/MN request whose line
 * text_parse() split into req->tokens.  Returns RSP_NONE on success, or
 * the exact error reply memcached 1.6.45 sends (and for ms, *swallow is
 * set to the data bytes to discard after it, 0 when <datalen> itself was
 * bad).
 */
enum rsp_type meta_parse(const struct request *req, struct meta *m,
                         uint32_t *swallow);

/* What the executor knows about the item, for the reply's flags. */
struct meta_result {
    bool         hit;            /* an item was there (mg/ma/ms/md) */
    uint64_t     cas;
    uint32_t     client_flags;
    int64_t      ttl;            /* seconds left, -1 never */
    uint32_t     vlen;           /* value bytes */
    bool         fetched;        /* h: fetched before this command */
    uint32_t     last_access;    /* l: seconds since, before this command */
    bool         win;            /* W */
    bool         stale;          /* X */
    bool         token_sent;     /* Z */
    bool         key_binary;     /* mg hit: the item's key was stored with
                                    b; memcached's k then follows the item,
                                    so k is base64 even without b */
};

/*
 * Compose the reply line "<rc>[ <vlen>] <flags>...\r\n" into buf (at most
 * cap bytes) for command type (REQ_MG/MS/MD/MA), return code rc ("VA",
 * "HD", "EN", "NS", "EX", "NF"), echoing the flags the request asked for
 * in its order, as memcached does for that command and return code, then
 * W, X, Z for mg.  After "VA" comes r->vlen, the value length.  Returns the
 * length, 0 when it does not fit.
 */
size_t meta_compose(char *buf, size_t cap, enum req_type type,
                    const char *rc, const struct meta *m,
                    const struct meta_result *r);

/*
 * "ME <key> exp=<ttl|-1> la=<secs> cas=<n> fetch=yes|no cls=<n>
 * size=<n>\r\n", the key base64-encoded if binary is set.
 */
size_t meta_compose_debug(char *buf, size_t cap, const struct token *key,
                          bool binary, int64_t exp, uint32_t la,
                          uint64_t cas, bool fetched, unsigned cls,
                          size_t size);

/* base64 (RFC 4648, with padding).  decode returns the decoded length or
 * -1 for bad input or a result longer than cap; encode returns the length
 * written or 0 when cap is too small.  Like memcached, decode skips bytes
 * outside the alphabet and stops after the first padded quantum; it fails
 * when the symbols left are none or not a multiple of 4, or when
 * (symbols / 4) * 3 exceeds cap. */
ssize_t meta_base64_decode(const char *in, size_t len, char *out,
                           size_t cap);
size_t meta_base64_encode(const char *in, size_t len, char *out, size_t cap);

#endif
