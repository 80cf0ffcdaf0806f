/*
 * request.h: a parsed request of memcached's text protocol.
 *
 * Parsers in proto/ turn bytes into a struct request and never allocate: every
 * string in it is a (pointer, length) into the caller's buffer, valid only as
 * long as that buffer is.  Numbers are already checked and converted, so the
 * daemon never re-parses a token.
 *
 * A parse error is not a parse failure: it is a request of type REQ_ERROR
 * whose `err` names the exact reply (enum rsp_type in response.h) and whose
 * `swallow` says how many data bytes memcached discards after it.
 */
#ifndef MCPM_PROTO_REQUEST_H
#define MCPM_PROTO_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PROTO_KEY_MAX      250    /* memcached's KEY_MAX_LENGTH */
#define PROTO_LINE_MAX     2048   /* no newline by then: close, unless get */
#define PROTO_MAX_TOKENS   24     /* tokens kept per line (mcmc's limit) */

/* Return values of the parsers besides a byte count. */
#define PROTO_EUNFIN  (-1)        /* no complete line yet: read more */
#define PROTO_ECLOSE  (-2)        /* close the connection, send nothing */

struct token {
    const char *p;
    size_t      len;
};

enum req_type {
    REQ_ERROR = 0,       /* a reply is due: see err/errmsg */
    REQ_GET, REQ_GETS, REQ_GAT, REQ_GATS,
    REQ_SET, REQ_ADD, REQ_REPLACE, REQ_APPEND, REQ_PREPEND, REQ_CAS,
    REQ_DELETE, REQ_INCR, REQ_DECR, REQ_TOUCH,
    REQ_FLUSH_ALL, REQ_VERSION, REQ_VERBOSITY, REQ_QUIT, REQ_SHUTDOWN,
    REQ_STATS, REQ_CACHE_MEMLIMIT,
    REQ_SLABS,           /* slabs reassign|automove ...: args in tokens[] */
    REQ_LRU,             /* lru tune|mode|temp_ttl ...: args in tokens[] */
    REQ_LRU_CRAWLER,     /* lru_crawler ...: args in tokens[] */
    REQ_WATCH,           /* watch [streams...]: args in tokens[] */
    REQ_REFRESH_CERTS,   /* refresh_certs (TLS) */
    REQ_MN, REQ_MG, REQ_MS, REQ_MD, REQ_MA, REQ_ME,  /* meta: issue 3 */
    REQ_TYPE_COUNT
};

/* True for the commands followed by a data block of vlen + 2 bytes. */
static inline bool
req_has_data(enum req_type t)
{
    return t >= REQ_SET && t <= REQ_CAS;
}

struct request {
    enum req_type type;
    int           err;       /* REQ_ERROR: an enum rsp_type */
    bool          noreply;   /* last token was exactly "noreply" */
    uint32_t      swallow;   /* REQ_ERROR: data bytes to discard, or 0 */

    struct token  key;       /* single-key commands; get/gets/gat/gats:
                                the one key of a list of one, else empty */
    struct token  keys;      /* get/gets/gat/gats: the keys, space separated;
                                walk them with text_next_key() */

    uint32_t      flags;     /* client flags */
    int64_t       exptime;   /* as sent: relative, absolute or negative */
    uint32_t      vlen;      /* <bytes>, without the trailing \r\n */
    uint64_t      cas;       /* cas <unique> */
    uint64_t      delta;     /* incr/decr */
    int64_t       num;       /* flush_all delay (-1: none), verbosity level,
                                cache_memlimit megabytes */

    /* The line split on spaces, command first, for the admin commands
     * (stats, slabs, lru, lru_crawler, shutdown) whose arguments the daemon
     * interprets.  At most PROTO_MAX_TOKENS are kept. */
    unsigned      ntokens;
    struct token  tokens[PROTO_MAX_TOKENS];
};

#endif
