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

/*
 * The first space in [p, end), or end.  Keys and command names are short
 * but not tiny (a byte at a time was 40 instructions of a GET's key):
 * eight bytes are tested at once, a byte equal to ' ' made zero and found
 * with the usual borrow trick, whose lowest set bit is exact.
 */
static inline const char *
token_space(const char *p, const char *end)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    const uint64_t ones = 0x0101010101010101ull;

    while (end - p >= 8) {
        uint64_t w;

        __builtin_memcpy(&w, p, 8);
        w ^= ones * ' ';
        w = (w - ones) & ~w & (ones << 7);
        if (w != 0) {
            return p + (__builtin_ctzll(w) >> 3);
        }
        p += 8;
    }
#endif
    while (p < end && *p != ' ') {
        p++;
    }
    return p;
}

#endif
