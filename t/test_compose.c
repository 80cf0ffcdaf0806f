/*
 * test_compose.c: reply lines byte for byte, and the all-or-nothing rule
 * when the caller's buffer is too small.
 */
#include "proto/compose.h"
#include "t/tap.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static char buf[512];

static void
test_value(void)
{
    size_t n;

    n = compose_value(buf, sizeof(buf), "foo", 3, 5, 3, false, 0);
    is_mem(buf, n, "VALUE foo 5 3\r\n", "value: get form");
    n = compose_value(buf, sizeof(buf), "foo", 3, 0, 0, true, 2);
    is_mem(buf, n, "VALUE foo 0 0 2\r\n", "value: gets form");
    n = compose_value(buf, sizeof(buf), "k", 1, UINT32_MAX, UINT32_MAX, true,
                      UINT64_MAX);
    is_mem(buf, n,
           "VALUE k 4294967295 4294967295 18446744073709551615\r\n",
           "value: largest numbers");
    n = compose_value(buf, sizeof(buf), "k", 1, 10, 100, false, 0);
    is_mem(buf, n, "VALUE k 10 100\r\n", "value: zeros inside numbers");

    /* "VALUE foo 5 3\r\n" is 15 bytes: 15 fits, 14 does not. */
    memset(buf, 'x', sizeof(buf));
    is_int(compose_value(buf, 15, "foo", 3, 5, 3, false, 0), 15,
           "value: exact fit");
    is_int(compose_value(buf, 14, "foo", 3, 5, 3, false, 0), 0,
           "value: one byte short");
    is_int(compose_value(buf, 4, "foo", 3, 5, 3, false, 0), 0,
           "value: tiny buffer");
    is_int(compose_value(buf, 17, "foo", 3, 0, 0, true, 22), 0,
           "value: no room for the cas");
    is_int(compose_value(buf, 0, "foo", 3, 0, 0, false, 0), 0,
           "value: zero cap");
}

/* A line is written without a check per piece only when its longest
 * form fits: the longest line exactly fills its cap, one byte less
 * refuses it, and a short line whose longest form does not fit is
 * still written when it does. */
static void
test_value_longest(void)
{
    char key[250];
    size_t most = 6 + sizeof(key) + 1 + 10 + 1 + 10 + 1 + 20 + 2;

    memset(key, 'k', sizeof(key));
    is_int(compose_value(buf, most, key, sizeof(key), UINT32_MAX,
                         UINT32_MAX, true, UINT64_MAX), most,
           "value: the longest line fills its cap");
    is_int(buf[most - 2] == '\r' && buf[most - 1] == '\n', 1,
           "value: the longest line ends in CRLF");
    is_int(compose_value(buf, most - 1, key, sizeof(key), UINT32_MAX,
                         UINT32_MAX, true, UINT64_MAX), 0,
           "value: the longest line, a byte short");
    is_int(compose_value(buf, 6 + sizeof(key) + 6, key, sizeof(key), 0, 0,
                         false, 0), 6 + sizeof(key) + 6,
           "value: a short line in a cap its longest form passes");
}

/* Every number a VALUE line carries, against printf: each power of ten
 * and its neighbours, and a stretch of small ones. */
static void
test_value_numbers(void)
{
    char want[128];
    unsigned bad = 0;
    uint64_t p = 1;

    for (int e = 0; e < 20; e++, p *= 10) {
        for (uint64_t v = p > 2 ? p - 2 : 0; v <= p + 2; v++) {
            uint32_t v32 = (uint32_t)v;
            size_t n = compose_value(buf, sizeof(buf), "k", 1, v32, v32,
                                     true, v);
            int w = snprintf(want, sizeof(want), "VALUE k %u %u %llu\r\n",
                             v32, v32, (unsigned long long)v);

            bad += n != (size_t)w || memcmp(buf, want, n) != 0;
        }
    }
    for (uint32_t v = 0; v < 20000; v += 7) {
        size_t n = compose_value(buf, sizeof(buf), "k", 1, v, v + 1, false, 0);
        int w = snprintf(want, sizeof(want), "VALUE k %u %u\r\n", v, v + 1);

        bad += n != (size_t)w || memcmp(buf, want, n) != 0;
    }
    is_int(bad, 0, "value: numbers as printf writes them");
}

static void
test_u64(void)
{
    size_t n;

    n = compose_u64(buf, sizeof(buf), 0);
    is_mem(buf, n, "0\r\n", "u64: zero");
    n = compose_u64(buf, sizeof(buf), 1234567890);
    is_mem(buf, n, "1234567890\r\n", "u64: ten digits");
    n = compose_u64(buf, sizeof(buf), UINT64_MAX);
    is_mem(buf, n, "18446744073709551615\r\n", "u64: max");
    is_int(compose_u64(buf, 22, UINT64_MAX), 22, "u64: exact fit");
    is_int(compose_u64(buf, 21, UINT64_MAX), 0, "u64: no room for CRLF");
}

static void
test_stats(void)
{
    size_t n;

    n = compose_stat_str(buf, sizeof(buf), "version", "1.6.45");
    is_mem(buf, n, "STAT version 1.6.45\r\n", "stat: string");
    is_int(compose_stat_str(buf, 10, "curr_items", "1"), 0,
           "stat: too small buffer gives 0");
    n = compose_uri(buf, "a b/c~d-e.f_G9%\xff", 16);
    is_mem(buf, n, "a%20b%2Fc~d-e.f_G9%25%FF", "uri: unreserved kept");
    is_int(buf[n], 0, "uri: NUL-terminated");
    n = compose_version(buf, sizeof(buf), "1.6.45");
    is_mem(buf, n, "VERSION 1.6.45\r\n", "version line");
    is_int(compose_version(buf, 8, "1.6.45"), 0, "version: too small");
}

static void
test_rsp(void)
{
    size_t n;
    int t;

    n = compose_rsp(buf, sizeof(buf), RSP_STORED);
    is_mem(buf, n, "STORED\r\n", "rsp: STORED");
    n = compose_rsp(buf, sizeof(buf), RSP_CLIENT_ERROR_FORMAT);
    is_mem(buf, n, "CLIENT_ERROR bad command line format\r\n",
           "rsp: bad command line format");
    n = compose_rsp(buf, sizeof(buf), RSP_SERVER_ERROR_SHUTDOWN);
    is_mem(buf, n, "SERVER_ERROR: shutdown not enabled\r\n",
           "rsp: 1.6.45 shutdown string");
    n = compose_rsp(buf, sizeof(buf), RSP_SERVER_ERROR_OOM_READ);
    is_mem(buf, n, "SERVER_ERROR Out of memory during read\r\n",
           "rsp: capitalised quirk kept");
    is_int(compose_rsp(buf, sizeof(buf), RSP_NONE), 0, "rsp: NONE is empty");
    is_int(rsp_len[RSP_NONE], 0, "rsp_len: NONE is 0");
    is_str(rsp_str[RSP_NONE], "", "rsp_str: NONE is empty");
    is_int(compose_rsp(buf, 7, RSP_STORED), 0, "rsp: too small");
    is_int(compose_rsp(buf, sizeof(buf), RSP_TYPE_COUNT), 0,
           "rsp: out-of-range type");

    /* Every other line ends in exactly one CRLF and its length matches. */
    for (t = RSP_NONE + 1; t < RSP_TYPE_COUNT; t++) {
        size_t len = strlen(rsp_str[t]);

        if (len != rsp_len[t] || len < 3 || rsp_str[t][len - 2] != '\r'
            || rsp_str[t][len - 1] != '\n'
            || memchr(rsp_str[t], '\r', len - 2) != NULL) {
            break;
        }
    }
    is_int(t, RSP_TYPE_COUNT, "rsp table: CRLF and lengths all consistent");
}

int
main(void)
{
    test_value();
    test_value_longest();
    test_value_numbers();
    test_u64();
    test_stats();
    test_rsp();
    return done_testing();
}
