/*
 * response.h: every fixed reply line of the text protocol, byte for byte as
 * memcached 1.6.45 sends it (shared/reference/memcached.md §1.2, Appendix A).
 *
 * rsp_str[t] is the line including "\r\n"; rsp_len[t] its length.  Clients
 * match on these strings, so they are never reworded.
 */
#ifndef MCPM_PROTO_RESPONSE_H
#define MCPM_PROTO_RESPONSE_H

#include <stddef.h>

#define RSP_TABLE(ACTION)                                                     \
    ACTION(RSP_NONE,            "")                                           \
    ACTION(RSP_STORED,          "STORED")                                     \
    ACTION(RSP_NOT_STORED,      "NOT_STORED")                                 \
    ACTION(RSP_EXISTS,          "EXISTS")                                     \
    ACTION(RSP_NOT_FOUND,       "NOT_FOUND")                                  \
    ACTION(RSP_DELETED,         "DELETED")                                    \
    ACTION(RSP_TOUCHED,         "TOUCHED")                                    \
    ACTION(RSP_END,             "END")                                        \
    ACTION(RSP_OK,              "OK")                                         \
    ACTION(RSP_RESET,           "RESET")                                      \
    ACTION(RSP_ERROR,           "ERROR")                                      \
    ACTION(RSP_CLIENT_ERROR_FORMAT, "CLIENT_ERROR bad command line format")   \
    ACTION(RSP_CLIENT_ERROR_CHUNK,  "CLIENT_ERROR bad data chunk")            \
    ACTION(RSP_CLIENT_ERROR_DELETE_USAGE,                                     \
           "CLIENT_ERROR bad command line format.  "                          \
           "Usage: delete <key> [noreply]")                                   \
    ACTION(RSP_CLIENT_ERROR_EXPTIME, "CLIENT_ERROR invalid exptime argument") \
    ACTION(RSP_CLIENT_ERROR_DELTA,                                            \
           "CLIENT_ERROR invalid numeric delta argument")                     \
    ACTION(RSP_CLIENT_ERROR_NONNUMERIC,                                       \
           "CLIENT_ERROR cannot increment or decrement non-numeric value")    \
    ACTION(RSP_CLIENT_ERROR_FLUSH_DISABLED,                                   \
           "CLIENT_ERROR flush_all not allowed")                              \
    ACTION(RSP_CLIENT_ERROR_SHUTDOWN_MODE,                                    \
           "CLIENT_ERROR invalid shutdown mode")                              \
    ACTION(RSP_CLIENT_ERROR_REASSIGN_DISABLED,                                \
           "CLIENT_ERROR slab reassignment disabled")                         \
    ACTION(RSP_CLIENT_ERROR_CRAWLER_DISABLED,                                 \
           "CLIENT_ERROR lru crawler disabled")                               \
    ACTION(RSP_CLIENT_ERROR_CRAWLER_SLEEP,                                    \
           "CLIENT_ERROR sleep must be one second or less")                   \
    ACTION(RSP_CLIENT_ERROR_CMDLINE, "CLIENT_ERROR bad command line")         \
    ACTION(RSP_CLIENT_ERROR_CACHEDUMP_DISABLED,                               \
           "CLIENT_ERROR stats cachedump not allowed")                        \
    ACTION(RSP_CLIENT_ERROR_SLAB_ID, "CLIENT_ERROR Illegal slab id")          \
    ACTION(RSP_CLIENT_ERROR_WATCH_DISABLED,                                   \
           "CLIENT_ERROR watch commands not allowed")                         \
    ACTION(RSP_WATCH_PIPELINED,                                               \
           "ERROR cannot pipeline other commands before watch")               \
    ACTION(RSP_WATCHER_TOO_MANY,                                              \
           "WATCHER_TOO_MANY log watcher limit reached")                      \
    ACTION(RSP_WATCHER_FAILED, "WATCHER_FAILED failed to add log watcher")    \
    ACTION(RSP_SERVER_ERROR_TOO_LARGE, "SERVER_ERROR object too large for cache") \
    ACTION(RSP_SERVER_ERROR_NO_MEMORY,                                        \
           "SERVER_ERROR out of memory storing object")                       \
    ACTION(RSP_SERVER_ERROR_OOM,   "SERVER_ERROR out of memory")              \
    ACTION(RSP_SERVER_ERROR_OOM_READ, "SERVER_ERROR Out of memory during read") \
    ACTION(RSP_SERVER_ERROR_OOM_GET,                                          \
           "SERVER_ERROR out of memory writing get response")                 \
    ACTION(RSP_SERVER_ERROR_OOM_STATS,                                        \
           "SERVER_ERROR out of memory writing stats")                        \
    ACTION(RSP_SERVER_ERROR_SHUTDOWN, "SERVER_ERROR: shutdown not enabled")   \
    ACTION(RSP_ERROR_TOO_MANY_CONNS, "ERROR Too many open connections")       \
    ACTION(RSP_MEMLIMIT_TOO_SMALL,                                            \
           "MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m")          \
    ACTION(RSP_MEMLIMIT_NOT_MB,                                               \
           "MEMLIMIT_ADJUST_FAILED input value is megabytes not bytes")       \
    ACTION(RSP_MEMLIMIT_FAILED,                                               \
           "MEMLIMIT_ADJUST_FAILED out of bounds or unable to adjust")        \
    ACTION(RSP_REASSIGN_BUSY,   "BUSY currently processing reassign request") \
    ACTION(RSP_REASSIGN_BADCLASS, "BADCLASS invalid src or dst class id")     \
    ACTION(RSP_REASSIGN_NOSPARE, "NOSPARE source class has no spare pages")   \
    ACTION(RSP_REASSIGN_SAME,   "SAME src and dst class are identical")       \
    ACTION(RSP_CRAWLER_BUSY,    "BUSY currently processing crawler request")  \
    ACTION(RSP_CRAWLER_BADCLASS, "BADCLASS invalid class id")                 \
    ACTION(RSP_CRAWLER_NOTSTARTED, "NOTSTARTED no items to crawl")            \
    ACTION(RSP_CRAWLER_ERROR,   "ERROR an unknown error happened")            \
    ACTION(RSP_LRU_PCTS,        "ERROR hot and warm pcts must not exceed 80") \
    ACTION(RSP_LRU_FACTORS,                                                   \
           "ERROR hot/warm age factors must be greater than 0")               \
    ACTION(RSP_DUMP_DISABLED,   "ERROR metadump not allowed")             \
    ACTION(RSP_DUMP_PIPELINED,                                                \
           "ERROR cannot pipeline other commands before metadump")            \
    ACTION(RSP_KEYDUMP_DISABLED, "ERROR key dump not allowed")                \
    ACTION(RSP_AUTOMOVE_WINDOW,                                               \
           "CLIENT_ERROR automove window too low or too high")                \
    ACTION(RSP_MGDUMP_PIPELINED,                                              \
           "ERROR cannot pipeline other commands before mgdump")              \
    ACTION(RSP_EN,              "EN")                                         \
    ACTION(RSP_META_INVALID_FLAG, "CLIENT_ERROR invalid flag")                \
    ACTION(RSP_META_DUP_FLAG,   "CLIENT_ERROR duplicate flag")                \
    ACTION(RSP_META_BAD_FLAG,   "CLIENT_ERROR invalid or duplicate flag")     \
    ACTION(RSP_META_TOO_LONG,   "CLIENT_ERROR options flags are too long")    \
    ACTION(RSP_META_MS_TOO_LONG, "CLIENT_ERROR options flags too long")       \
    ACTION(RSP_META_OPAQUE,     "CLIENT_ERROR opaque token too long")         \
    ACTION(RSP_META_BAD_TOKEN,                                                \
           "CLIENT_ERROR bad token in command line format")                   \
    ACTION(RSP_META_INITIAL,    "CLIENT_ERROR invalid numeric initial value") \
    ACTION(RSP_META_DELTA,      "CLIENT_ERROR invalid numeric delta value")   \
    ACTION(RSP_META_MS_MODE,    "CLIENT_ERROR invalid mode for ms M token")   \
    ACTION(RSP_META_MA_MODE,    "CLIENT_ERROR invalid mode for ma M token")   \
    ACTION(RSP_META_M_LENGTH,   "CLIENT_ERROR incorrect length for M token")  \
    ACTION(RSP_META_KEY_DECODE, "CLIENT_ERROR error decoding key")           \
    ACTION(RSP_AUTH_NEEDED,     "CLIENT_ERROR unauthenticated")               \
    ACTION(RSP_AUTH_FAILED,     "CLIENT_ERROR authentication failure")        \
    ACTION(RSP_AUTH_FORMAT,                                                   \
           "CLIENT_ERROR bad authentication token format")                    \
    ACTION(RSP_AUTH_TOO_LONG,   "CLIENT_ERROR auth token too long")           \
    ACTION(RSP_AUTH_TERMINATION,                                              \
           "CLIENT_ERROR bad command line termination")

#define RSP_ENUM(name, str) name,
enum rsp_type {
    RSP_TABLE(RSP_ENUM)
    RSP_TYPE_COUNT
};
#undef RSP_ENUM

/* "<line>\r\n" for each enum rsp_type, and its length. */
extern const char *const rsp_str[RSP_TYPE_COUNT];
extern const size_t rsp_len[RSP_TYPE_COUNT];

#endif
