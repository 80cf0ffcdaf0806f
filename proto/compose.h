/*
 * compose.h: struct response pieces to bytes, into the caller's buffer.
 *
 * Each function writes at most `cap` bytes and returns the number written,
 * or 0 if the line did not fit (the caller then replies with
 * SERVER_ERROR output line too long or grows its buffer).  Nothing here
 * allocates.
 */
#ifndef MCPM_PROTO_COMPOSE_H
#define MCPM_PROTO_COMPOSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/response.h"

/* "VALUE <key> <flags> <vlen>[ <cas>]\r\n"; vlen excludes the value's \r\n. */
size_t compose_value(char *buf, size_t cap, const char *key, size_t nkey,
                     uint32_t flags, uint32_t vlen, bool with_cas,
                     uint64_t cas);

/* "<n>\r\n": the reply to incr/decr. */
size_t compose_u64(char *buf, size_t cap, uint64_t n);

/* "STAT <name> <value>\r\n" (the value formatted by the caller). */
size_t compose_stat_str(char *buf, size_t cap, const char *name,
                        const char *val);

/* "VERSION <version>\r\n" */
size_t compose_version(char *buf, size_t cap, const char *version);

/* A key percent-encoded as memcached's logs and dumps show it: everything
 * but RFC 3986's unreserved characters as %XX.  out needs 3 * n + 1
 * bytes; it is NUL-terminated.  Returns the length. */
size_t compose_uri(char *out, const char *in, size_t n);

/* Fixed reply t, or "" for RSP_NONE. */
size_t compose_rsp(char *buf, size_t cap, enum rsp_type t);

#endif
