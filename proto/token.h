/*
 * token.h: splitting a line on spaces and the strict number parsers that
 * memcached applies to protocol fields.
 */
#ifndef MCPM_PROTO_TOKEN_H
#define MCPM_PROTO_TOKEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/request.h"

/*
 * Split line[0..len) (no line terminator) on runs of spaces into at most
 * max tokens.  Returns the number of tokens stored; if more remain, the last
 * stored token spans the whole unsplit rest of the line and *more is set.
 */
unsigned token_split(const char *line, size_t len, struct token *tok,
                     unsigned max, bool *more);

/* Whole-token decimal parsers: no sign where none is allowed, no trailing
 * garbage, no overflow.  Return true and store the value on success. */
bool token_u64(const struct token *t, uint64_t *out);
bool token_u32(const struct token *t, uint32_t *out);
bool token_i64(const struct token *t, int64_t *out);
bool token_i32(const struct token *t, int32_t *out);

/* True if the token is exactly the NUL-terminated string s. */
bool token_eq(const struct token *t, const char *s);

#endif
