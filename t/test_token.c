/*
 * test_token.c: the line splitter and the number parsers that decide which
 * protocol fields memcached-pm accepts.
 */
#include "proto/token.h"
#include "t/tap.h"

#include <stdint.h>
#include <string.h>

static struct token
tk(const char *s)
{
    struct token t = { s, strlen(s) };

    return t;
}

static void
test_split(void)
{
    struct token tok[4];
    bool more = true;
    const char *line = "  set  k 0 ";
    unsigned n = token_split(line, strlen(line), tok, 4, &more);

    is_int(n, 3, "split: runs of spaces collapse");
    ok(!more, "split: nothing left over");
    is_mem(tok[0].p, tok[0].len, "set", "split: first token");
    is_mem(tok[1].p, tok[1].len, "k", "split: second token");
    is_mem(tok[2].p, tok[2].len, "0", "split: trailing space dropped");

    line = "a b c d e  f";
    n = token_split(line, strlen(line), tok, 4, &more);
    is_int(n, 4, "split: stops at max");
    ok(more, "split: more set when tokens remain");
    is_mem(tok[3].p, tok[3].len, "d e  f", "split: last token is the rest");

    line = "a b c d  ";
    n = token_split(line, strlen(line), tok, 4, &more);
    is_int(n, 4, "split: exactly max tokens");
    ok(!more, "split: trailing spaces are not more");
    is_mem(tok[3].p, tok[3].len, "d", "split: last token alone");

    n = token_split("   ", 3, tok, 4, &more);
    is_int(n, 0, "split: only spaces");
    n = token_split("", 0, tok, 4, NULL);
    is_int(n, 0, "split: empty line, more may be NULL");
    n = token_split("x", 1, tok, 0, &more);
    is_int(n, 0, "split: max 0 stores nothing");
    ok(more, "split: max 0 reports the token");

    line = "a\tb c";
    n = token_split(line, strlen(line), tok, 4, &more);
    is_int(n, 2, "split: only ' ' separates, not tab");
    is_mem(tok[0].p, tok[0].len, "a\tb", "split: tab inside a token");
}

static void
test_u64(void)
{
    uint64_t v = 7;
    struct token t;

    t = tk("18446744073709551615");
    ok(token_u64(&t, &v) && v == UINT64_MAX, "u64: max");
    t = tk("18446744073709551616");
    ok(!token_u64(&t, &v), "u64: max + 1 overflows");
    t = tk("99999999999999999999");
    ok(!token_u64(&t, &v), "u64: 20 nines overflow");
    t = tk("0");
    ok(token_u64(&t, &v) && v == 0, "u64: zero");
    t = tk("000123");
    ok(token_u64(&t, &v) && v == 123, "u64: leading zeros");
    t = tk("+5");
    ok(token_u64(&t, &v) && v == 5, "u64: leading + as strtoull");
    t = tk("-1");
    ok(!token_u64(&t, &v), "u64: -1 rejected");
    t = tk("-0");
    ok(!token_u64(&t, &v), "u64: -0 rejected");
    t = tk("12a");
    ok(!token_u64(&t, &v), "u64: trailing garbage");
    t = tk("a12");
    ok(!token_u64(&t, &v), "u64: leading garbage");
    t = tk("");
    ok(!token_u64(&t, &v), "u64: empty");
    t = tk("+");
    ok(!token_u64(&t, &v), "u64: sign alone");
    t = tk("++1");
    ok(!token_u64(&t, &v), "u64: two signs");
    t = tk("1 ");
    ok(!token_u64(&t, &v), "u64: trailing space inside token");
    t = tk("\t1");
    ok(!token_u64(&t, &v), "u64: leading tab");
    t = tk("0x10");
    ok(!token_u64(&t, &v), "u64: no hex");
    t = tk("12345678");
    t.len = 3;
    ok(token_u64(&t, &v) && v == 123, "u64: token length bounds the parse");
}

static void
test_u32(void)
{
    uint32_t v = 7;
    struct token t;

    t = tk("4294967295");
    ok(token_u32(&t, &v) && v == UINT32_MAX, "u32: max");
    t = tk("4294967296");
    ok(!token_u32(&t, &v), "u32: max + 1 overflows");
    t = tk("18446744073709551616");
    ok(!token_u32(&t, &v), "u32: huge overflows");
    t = tk("-1");
    ok(!token_u32(&t, &v), "u32: negative");
    t = tk("42");
    ok(token_u32(&t, &v) && v == 42, "u32: plain");
    t = tk("4x");
    v = 9;
    ok(!token_u32(&t, &v) && v == 9, "u32: failure leaves *out alone");
}

static void
test_signed(void)
{
    int64_t v = 7;
    int32_t w = 7;
    struct token t;

    t = tk("9223372036854775807");
    ok(token_i64(&t, &v) && v == INT64_MAX, "i64: max");
    t = tk("9223372036854775808");
    ok(!token_i64(&t, &v), "i64: max + 1 overflows");
    t = tk("-9223372036854775808");
    ok(token_i64(&t, &v) && v == INT64_MIN, "i64: min");
    t = tk("-9223372036854775809");
    ok(!token_i64(&t, &v), "i64: min - 1 overflows");
    t = tk("-1");
    ok(token_i64(&t, &v) && v == -1, "i64: -1");
    t = tk("+12");
    ok(token_i64(&t, &v) && v == 12, "i64: +12");
    t = tk("-");
    ok(!token_i64(&t, &v), "i64: sign alone");
    t = tk("--1");
    ok(!token_i64(&t, &v), "i64: two signs");
    t = tk("1-");
    ok(!token_i64(&t, &v), "i64: trailing sign");

    t = tk("2147483647");
    ok(token_i32(&t, &w) && w == INT32_MAX, "i32: max");
    t = tk("2147483648");
    ok(!token_i32(&t, &w), "i32: max + 1 overflows");
    t = tk("-2147483648");
    ok(token_i32(&t, &w) && w == INT32_MIN, "i32: min");
    t = tk("-2147483649");
    ok(!token_i32(&t, &w), "i32: min - 1 overflows");
    t = tk("-30");
    ok(token_i32(&t, &w) && w == -30, "i32: negative exptime");
    t = tk("3.5");
    ok(!token_i32(&t, &w), "i32: no decimals");
}

static void
test_eq(void)
{
    struct token t = tk("noreply");

    ok(token_eq(&t, "noreply"), "eq: same");
    ok(!token_eq(&t, "noreplyx"), "eq: longer string");
    ok(!token_eq(&t, "norepl"), "eq: shorter string");
    t.len = 6;
    ok(token_eq(&t, "norepl"), "eq: token length, not NUL, bounds it");
    t = tk("");
    ok(token_eq(&t, ""), "eq: empty");
}

int
main(void)
{
    test_split();
    test_u64();
    test_u32();
    test_signed();
    test_eq();
    return done_testing();
}
