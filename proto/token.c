/*
 * token.c: splitting a command line on spaces, and the number parsers.
 *
 * memcached converts protocol fields with strtoull()/strtol() wrapped in
 * safe_strtoull()/safe_strtol() (util.c).  What those accept, and so what is
 * accepted here:
 *
 *   - an optional '+' (strtoull and strtol take one; `set k +5 0 1` stores
 *     flags 5 on memcached 1.6.18);
 *   - for unsigned fields no '-' at all: safe_strtoull rejects every
 *     negative value, and "-0" is refused here too for simplicity;
 *   - for signed fields an optional '-';
 *   - then one or more decimal digits and nothing after them;
 *   - no overflow of the destination type.  memcached truncates 32-bit
 *     fields that overflow (flags 4294967296 are stored as 0 on 1.6.18);
 *     that is a bug nobody depends on, so the value is refused instead.
 *
 * strtoull also skips leading white space, but a token never starts with a
 * space; a leading tab is refused here where memcached would skip it.
 *
 * The parsers work on (pointer, length) tokens, so the line needs no NUL
 * terminators and is never written to.
 */
#include "proto/token.h"

#include <stdint.h>
#include <string.h>

unsigned
token_split(const char *line, size_t len, struct token *tok, unsigned max,
            bool *more)
{
    const char *p = line;
    const char *end = line + len;
    unsigned n = 0;

    if (more != NULL) {
        *more = false;
    }
    while (n < max) {
        while (p < end && *p == ' ') {
            p++;
        }
        if (p == end) {
            return n;
        }
        tok[n].p = p;
        if (n + 1 == max) {
            break;
        }
        while (p < end && *p != ' ') {
            p++;
        }
        tok[n].len = (size_t)(p - tok[n].p);
        n++;
    }
    if (max == 0) {
        /* No room at all: report whether anything was there. */
        while (p < end && *p == ' ') {
            p++;
        }
        if (more != NULL) {
            *more = p < end;
        }
        return 0;
    }
    /* The last slot: a plain token if the line ends with it, else the
     * whole rest of the line. */
    while (p < end && *p != ' ') {
        p++;
    }
    tok[n].len = (size_t)(p - tok[n].p);
    while (p < end && *p == ' ') {
        p++;
    }
    if (p < end) {
        tok[n].len = len - (size_t)(tok[n].p - line);
        if (more != NULL) {
            *more = true;
        }
    }
    return n + 1;
}

/*
 * Digits of t starting at index i, accumulated into *out without passing
 * limit.  False on an empty digit run, a non-digit or overflow.
 */
static bool
parse_digits(const struct token *t, size_t i, uint64_t limit, uint64_t *out)
{
    uint64_t v = 0;

    if (i >= t->len) {
        return false;
    }
    for (; i < t->len; i++) {
        unsigned d = (unsigned)(unsigned char)t->p[i] - '0';

        if (d > 9) {
            return false;
        }
        if (v > (limit - d) / 10) {
            return false;
        }
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

/* Unsigned: optional '+', digits, at most limit. */
static bool
parse_unsigned(const struct token *t, uint64_t limit, uint64_t *out)
{
    size_t i = 0;

    if (t->len > 0 && t->p[0] == '+') {
        i = 1;
    }
    return parse_digits(t, i, limit, out);
}

/* Signed: optional sign, digits, within [-max - 1, max]. */
static bool
parse_signed(const struct token *t, uint64_t max, int64_t *out)
{
    uint64_t mag;
    size_t i = 0;
    bool neg = false;

    if (t->len > 0 && (t->p[0] == '+' || t->p[0] == '-')) {
        neg = t->p[0] == '-';
        i = 1;
    }
    if (!parse_digits(t, i, neg ? max + 1 : max, &mag)) {
        return false;
    }
    /* Negate in unsigned arithmetic: -(max + 1) has no positive twin. */
    *out = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    return true;
}

bool
token_u64(const struct token *t, uint64_t *out)
{
    return parse_unsigned(t, UINT64_MAX, out);
}

bool
token_u32(const struct token *t, uint32_t *out)
{
    uint64_t v;

    if (!parse_unsigned(t, UINT32_MAX, &v)) {
        return false;
    }
    *out = (uint32_t)v;
    return true;
}

bool
token_i64(const struct token *t, int64_t *out)
{
    return parse_signed(t, INT64_MAX, out);
}

bool
token_i32(const struct token *t, int32_t *out)
{
    int64_t v;

    if (!parse_signed(t, INT32_MAX, &v)) {
        return false;
    }
    *out = (int32_t)v;
    return true;
}

bool
token_eq(const struct token *t, const char *s)
{
    size_t n = strlen(s);

    return t->len == n && memcmp(t->p, s, n) == 0;
}
