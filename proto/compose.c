/*
 * compose.c: reply lines into the caller's buffer.
 *
 * compose_value() and compose_u64() run once per hit or per incr, so they
 * write their digits by hand; the stats lines are rare and use snprintf.
 * Every function writes all of its line or nothing and returns 0 when the
 * line does not fit.
 */
#include "proto/compose.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/*
 * The reply table.  Every line gets "\r\n" except RSP_NONE, which stays
 * empty so that compose_rsp(RSP_NONE) writes nothing.
 */
#define RSP_STR(name, str) [name] = sizeof(str) > 1 ? str "\r\n" : "",
#define RSP_LEN(name, str) [name] = sizeof(str) > 1 ? sizeof(str) + 1 : 0,

const char *const rsp_str[RSP_TYPE_COUNT] = {
    RSP_TABLE(RSP_STR)
};

const size_t rsp_len[RSP_TYPE_COUNT] = {
    RSP_TABLE(RSP_LEN)
};

#undef RSP_STR
#undef RSP_LEN

#define U64_DIGITS_MAX 20    /* 18446744073709551615 */

/*
 * Decimal digits of v into tmp, right-aligned at tmp + U64_DIGITS_MAX.
 * Returns the first digit.
 */
static char *
u64_digits(char tmp[U64_DIGITS_MAX], uint64_t v)
{
    char *p = tmp + U64_DIGITS_MAX;

    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    return p;
}

/* Append v in decimal at *pos; false if it would pass end. */
static bool
put_u64(char **pos, const char *end, uint64_t v)
{
    char tmp[U64_DIGITS_MAX];
    char *d = u64_digits(tmp, v);
    size_t n = (size_t)(tmp + U64_DIGITS_MAX - d);

    if ((size_t)(end - *pos) < n) {
        return false;
    }
    memcpy(*pos, d, n);
    *pos += n;
    return true;
}

/* Append n bytes of s at *pos; false if they would pass end. */
static bool
put_mem(char **pos, const char *end, const char *s, size_t n)
{
    if ((size_t)(end - *pos) < n) {
        return false;
    }
    memcpy(*pos, s, n);
    *pos += n;
    return true;
}

/* Digits of v in decimal. */
static size_t
u64_len(uint64_t v)
{
    size_t n = 1;

    while (v >= 100) {
        v /= 100;
        n += 2;
    }
    return n + (v >= 10);
}

/* "00" to "99": numbers are written two digits a division. */
static const char digit_pairs[] =
    "00010203040506070809101112131415161718192021222324252627282930313233"
    "34353637383940414243444546474849505152535455565758596061626364656667"
    "6869707172737475767778798081828384858687888990919293949596979899";

/* v in decimal at p, n = u64_len(v) digits; returns the end. */
static char *
write_u64(char *p, size_t n, uint64_t v)
{
    char *q = p + n;

    while (v >= 100) {
        q -= 2;
        memcpy(q, digit_pairs + 2 * (v % 100), 2);
        v /= 100;
    }
    if (v >= 10) {
        memcpy(q - 2, digit_pairs + 2 * v, 2);
    } else {
        q[-1] = (char)('0' + v);
    }
    return p + n;
}

/* v in decimal at p, its length found as it goes; returns the end.  The
 * numbers of a VALUE line are mostly short: flags 0, a few digits of
 * length. */
static char *
put_dec(char *p, uint64_t v)
{
    if (v < 10) {
        *p = (char)('0' + v);
        return p + 1;
    }
    if (v < 100) {
        memcpy(p, digit_pairs + 2 * v, 2);
        return p + 2;
    }
    return write_u64(p, u64_len(v), v);
}

/* The longest line compose_value() writes for a key of nkey bytes. */
#define VALUE_LINE_MOST(nkey, with_cas) \
    (6 + (nkey) + 1 + 10 + 1 + 10 + ((with_cas) ? 1 + 20 : 0) + 2)

/* The hottest line of all (every hit of a get): when the longest line
 * for the key fits, as it does in the callers' room, it is written
 * without a bound check per piece; else its exact length is worked out
 * first. */
size_t
compose_value(char *buf, size_t cap, const char *key, size_t nkey,
              uint32_t flags, uint32_t vlen, bool with_cas, uint64_t cas)
{
    char *p = buf;

    if (VALUE_LINE_MOST(nkey, with_cas) > cap) {
        size_t need = 6 + nkey + 1 + u64_len(flags) + 1 + u64_len(vlen) +
                      (with_cas ? 1 + u64_len(cas) : 0) + 2;

        if (need > cap) {
            return 0;
        }
    }
    memcpy(p, "VALUE ", 6);
    memcpy(p + 6, key, nkey);
    p += 6 + nkey;
    *p++ = ' ';
    p = put_dec(p, flags);
    *p++ = ' ';
    p = put_dec(p, vlen);
    if (with_cas) {
        *p++ = ' ';
        p = put_dec(p, cas);
    }
    memcpy(p, "\r\n", 2);
    return (size_t)(p + 2 - buf);
}

size_t
compose_u64(char *buf, size_t cap, uint64_t n)
{
    char *pos = buf;
    const char *end = buf + cap;

    if (!put_u64(&pos, end, n) || !put_mem(&pos, end, "\r\n", 2)) {
        return 0;
    }
    return (size_t)(pos - buf);
}

/*
 * snprintf's result as a compose_* result: the length if the whole line
 * fit, else 0.  snprintf always wants room for a NUL, so a stats line needs
 * one spare byte in the buffer; a truncated line left behind is harmless,
 * as the caller ignores bytes past the returned length.
 */
static size_t
fit(int n, size_t cap)
{
    if (n < 0 || (size_t)n >= cap) {
        return 0;
    }
    return (size_t)n;
}

size_t
compose_stat_str(char *buf, size_t cap, const char *name, const char *val)
{
    return fit(snprintf(buf, cap, "STAT %s %s\r\n", name, val), cap);
}

size_t
compose_version(char *buf, size_t cap, const char *version)
{
    return fit(snprintf(buf, cap, "VERSION %s\r\n", version), cap);
}

size_t
compose_rsp(char *buf, size_t cap, enum rsp_type t)
{
    if ((unsigned)t >= RSP_TYPE_COUNT || rsp_len[t] > cap) {
        return 0;
    }
    memcpy(buf, rsp_str[t], rsp_len[t]);
    return rsp_len[t];
}

size_t
compose_uri(char *out, const char *in, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;

    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)in[i];

        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
            (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
            c == '~') {
            out[o++] = (char)c;
        } else {
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    out[o] = '\0';
    return o;
}
