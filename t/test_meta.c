/*
 * test_meta.c: the meta protocol's flag parser and reply composer against
 * memcached: lines go through text_parse() as the daemon feeds them, then
 * meta_parse(); replies are compared byte for byte with the exchanges
 * captured from memcached (1.6.45 where it differs from 1.6.18).
 */
#include "proto/meta.h"
#include "proto/request.h"
#include "proto/response.h"
#include "proto/text.h"
#include "t/tap.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char line_buf[8192];
static struct request req;
static struct meta m;
static uint32_t swallow;

/* Parse one command line (given without its \r\n) down to struct meta. */
static int
mp(const char *line)
{
    snprintf(line_buf, sizeof(line_buf), "%s\r\n", line);
    memset(&req, 0xa5, sizeof(req));
    if (text_parse(&req, line_buf, strlen(line_buf)) <= 0) {
        return -1;
    }
    memset(&m, 0x5a, sizeof(m));
    swallow = 0xdeadbeef;
    return (int)meta_parse(&req, &m, &swallow);
}

/* line must fail with rsp and the given swallow count. */
static void
is_err(const char *line, int rsp, uint32_t sw, const char *name)
{
    int got = mp(line);

    if (!ok(got == rsp && swallow == sw, name)) {
        printf("#   '%s': got %d (%s) swallow %u, want %d swallow %u\n",
               line, got, got >= 0 && got < RSP_TYPE_COUNT ? rsp_str[got]
               : "?", swallow, rsp, sw);
    }
}

static void
is_good(const char *line, const char *name)
{
    is_err(line, RSP_NONE, 0, name);
}

/* A line of n tokens: cmd key [datalen] then distinct flags. */
static const char *
many_tokens(const char *head, unsigned n, unsigned head_tokens)
{
    static char buf[512];
    static const char letters[] = "cfhklqstuvxIPLOT1N1R1C1D1J1F1E1";
    const char *p = letters;
    size_t len = (size_t)snprintf(buf, sizeof(buf), "%s", head);

    for (unsigned i = head_tokens; i < n && *p != '\0'; i++) {
        buf[len++] = ' ';
        buf[len++] = *p++;
        while (*p >= '0' && *p <= '9') {
            buf[len++] = *p++;
        }
    }
    buf[len] = '\0';
    return buf;
}

/* ---- flags --------------------------------------------------------- */

static void
test_each_flag(void)
{
    static const char *good[] = {
        "b", "c", "f", "h", "k", "l", "q", "s", "t", "u", "v", "x",
        "C1", "D1", "E1", "F1", "I", "J1", "L", "MS", "N1", "O", "P",
        "R1", "T1",
    };
    char line[64];
    int bad = 0;

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        char c = good[i][0];

        snprintf(line, sizeof(line), "mg %s %s",
                 c == 'b' ? "Zm9v" : "foo", good[i]);
        if (mp(line) != RSP_NONE || m.nflags != 1 || m.flags[0].c != c
            || m.seen != META_BIT(c)) {
            printf("#   flag %s rejected\n", good[i]);
            bad++;
        }
    }
    is_int(bad, 0, "mg accepts each of the 25 meta flags alone");
    for (int c = 'A'; c <= 'z'; c++) {
        if (!((c >= 'A' && c <= 'Z') || c >= 'a')
            || strchr("bcfhklqstuvxCDEFIJLMNOPRT", c) != NULL) {
            continue;
        }
        snprintf(line, sizeof(line), "mg foo %c", c);
        if (mp(line) != RSP_META_INVALID_FLAG) {
            printf("#   flag %c accepted\n", c);
            bad++;
        }
    }
    is_int(bad, 0, "every other letter is an invalid flag");
    is_err("mg foo Z", RSP_META_INVALID_FLAG, 0, "mg foo Z: invalid flag");
    is_err("mg foo W", RSP_META_INVALID_FLAG, 0, "W is a reply flag only");
    is_err("mg foo 5", RSP_META_INVALID_FLAG, 0, "a digit is no flag");
    is_err("mg foo \x01", RSP_META_INVALID_FLAG, 0, "control byte: invalid");
    is_err("mg foo \x7f", RSP_META_DUP_FLAG, 0, "DEL counts as duplicate");
    is_err("mg foo \xc3\xa9", RSP_META_DUP_FLAG, 0,
           "a byte >= 127 counts as duplicate");
}

static void
test_flag_union(void)
{
    is_good("mg foo D5", "mg accepts ma's D (and ignores it)");
    is_good("mg foo MX", "mg does not check the M mode");
    is_good("mg foo F5 J1 I x", "mg accepts ms/ma/md flags");
    is_good("md foo v t f", "md accepts mg's flags");
    is_good("ma foo s F1 I", "ma accepts other commands' flags");
    is_good("mg foo P Lhint", "P and L accepted");
    is_err("mg foo P P", RSP_META_DUP_FLAG, 0, "P twice is a duplicate");
}

static void
test_duplicates(void)
{
    is_err("mg foo v v", RSP_META_DUP_FLAG, 0, "mg foo v v");
    is_err("mg foo O1 O2", RSP_META_DUP_FLAG, 0, "two opaques");
    is_err("mg foo T5 t T6", RSP_META_DUP_FLAG, 0, "two T");
    is_err("mg foo Z Z", RSP_META_INVALID_FLAG, 0,
           "unknown flag fails before it can repeat");
    is_err("mg foo v Z v", RSP_META_INVALID_FLAG, 0,
           "first bad flag decides");
    is_err("mg foo v v Z", RSP_META_DUP_FLAG, 0, "duplicate before unknown");
    is_err("mg foo Tx v v", RSP_META_DUP_FLAG, 0,
           "duplicate overrides an earlier bad token");
    is_err("ms foo 2 v v", RSP_META_DUP_FLAG, 4, "ms duplicate swallows");
    is_err("md foo v v", RSP_META_BAD_FLAG, 0, "md: invalid or duplicate");
    is_err("ma foo v v", RSP_META_BAD_FLAG, 0, "ma: invalid or duplicate");
}

static void
test_numeric(void)
{
    is_good("mg foo T30 N-5 R+7 C123 E456", "ttl and cas arguments");
    is_int(m.ttl, 30, "T");
    is_int(m.vivify_ttl, -5, "N negative");
    is_int(m.recache_ttl, 7, "R with +");
    ok(m.cas_compare == 123 && m.cas_new == 456, "C and E");
    is_good("ms foo 1 F4294967295 T-1", "F at its maximum");
    ok(m.client_flags == 4294967295u, "F decoded");
    is_int(m.ttl, -1, "T-1");
    is_good("ma foo J10 D18446744073709551615", "J and D");
    ok(m.initial == 10 && m.delta == UINT64_MAX, "J and D decoded");
    is_good("ma foo", "ma defaults");
    ok(m.initial == 0 && m.delta == 1 && m.mode == 'I' && m.client_flags
       == 0 && m.nflags == 0 && m.seen == 0, "ma defaults: J0 D1 MI");
    is_err("mg foo T", RSP_META_BAD_TOKEN, 0, "T without a number");
    is_err("mg foo T5x", RSP_META_BAD_TOKEN, 0, "T with trailing junk");
    is_err("mg foo T2147483648", RSP_META_BAD_TOKEN, 0, "T past int32");
    is_err("mg foo Nx", RSP_META_BAD_TOKEN, 0, "bad N");
    is_err("mg foo Rx", RSP_META_BAD_TOKEN, 0, "bad R");
    is_err("mg foo C-1", RSP_META_BAD_TOKEN, 0, "negative C");
    is_err("mg foo Ex", RSP_META_BAD_TOKEN, 0, "bad E");
    is_err("mg foo Dx", RSP_META_DELTA, 0, "mg bad D: delta value error");
    is_err("mg foo D-1", RSP_META_DELTA, 0, "mg D-1: delta value error");
    is_err("mg foo J", RSP_META_INITIAL, 0, "mg bad J: initial value");
    is_err("mg foo Fx", RSP_CLIENT_ERROR_FORMAT, 0, "bad F names nothing");
    is_err("mg foo F4294967296", RSP_CLIENT_ERROR_FORMAT, 0, "F past u32");
    is_err("ms foo 2 Fx", RSP_CLIENT_ERROR_FORMAT, 4, "ms bad F swallows");
    is_err("mg foo Tx Dy", RSP_META_DELTA, 0, "last message wins (D)");
    is_err("mg foo Dy Tx", RSP_META_BAD_TOKEN, 0, "last message wins (T)");
    is_err("mg foo Tx Fy", RSP_META_BAD_TOKEN, 0, "F keeps T's message");
    is_err("mg foo Fy Tx", RSP_META_BAD_TOKEN, 0, "T overrides after F");
    is_err("ms foo 2 MXX Tx", RSP_META_BAD_TOKEN, 4, "M length then T");
}

static void
test_mode(void)
{
    static const char modes[] = "SEAPR";
    char line[32];
    int bad = 0;

    is_good("ms foo 2", "ms default mode");
    is_int(m.mode, 'S', "ms mode defaults to S");
    for (const char *p = modes; *p != '\0'; p++) {
        snprintf(line, sizeof(line), "ms foo 2 M%c", *p);
        bad += mp(line) != RSP_NONE || m.mode != *p;
        snprintf(line, sizeof(line), "ms foo 2 M%c", *p + 32);
        bad += mp(line) != RSP_META_MS_MODE || swallow != 4;
    }
    is_int(bad, 0, "ms modes S E A P R, lower case refused");
    is_err("ms foo 2 MX", RSP_META_MS_MODE, 4, "ms MX");
    is_err("ms foo 2 M", RSP_META_M_LENGTH, 4, "ms M alone");
    is_err("ms foo 2 MSS", RSP_META_M_LENGTH, 4, "ms MSS");
    is_err("mg foo MSS", RSP_META_M_LENGTH, 0, "mg MSS: length checked");
    is_good("ma foo M+", "ma M+");
    is_int(m.mode, 'I', "+ is increment");
    is_good("ma foo MI", "ma MI");
    is_int(m.mode, 'I', "I is increment");
    is_good("ma foo M-", "ma M-");
    is_int(m.mode, 'D', "- is decrement");
    is_good("ma foo MD D100", "ma MD");
    is_int(m.mode, 'D', "D is decrement");
    is_err("ma foo Mi", RSP_META_MA_MODE, 0, "ma Mi: lower case refused");
    is_err("ma foo Md", RSP_META_MA_MODE, 0, "ma Md refused");
    is_err("ma cnt Mx", RSP_META_MA_MODE, 0, "ma cnt Mx");
    is_err("ma cnt Mxx", RSP_META_BAD_FLAG, 0, "ma M length: flag error");
}

static void
test_ma_errors(void)
{
    is_err("ma cnt D-1", RSP_META_BAD_FLAG, 0, "ma cnt D-1");
    is_err("ma cnt Dx", RSP_META_BAD_FLAG, 0, "ma bad delta");
    is_err("ma cnt D18446744073709551616", RSP_META_BAD_FLAG, 0,
           "ma delta past u64");
    is_err("ma cnt Jx", RSP_META_BAD_FLAG, 0, "ma bad initial");
    is_err("ma cnt Tx", RSP_META_BAD_FLAG, 0, "ma bad T");
    is_err("ma cnt Z", RSP_META_BAD_FLAG, 0, "ma unknown flag");
    is_err("ma !!! b", RSP_META_BAD_FLAG, 0, "ma bad base64 key");
    is_err("md foo Z", RSP_META_BAD_FLAG, 0, "md unknown flag");
    is_err("md foo Tx", RSP_META_BAD_FLAG, 0, "md bad T");
    is_err("md !!! b", RSP_META_BAD_FLAG, 0, "md bad base64 key");
    is_good("md foo x I T30 C5 E6 q k O1", "md with every md flag");
}

static void
test_token_count(void)
{
    is_good(many_tokens("mg foo", 20, 2), "mg with 20 tokens");
    is_int(req.ntokens, 20, "... really 20");
    is_int(m.nflags, 18, "18 flags kept in order");
    is_int(m.flags[17].c, 'R', "... the last one R");
    is_err(many_tokens("mg foo", 21, 2), RSP_META_TOO_LONG, 0,
           "mg with 21 tokens");
    is_err("mg foo c f h k l q s t u v x I P L O T1 N1 R1 C1 D1 J1 F1 E1 "
           "b Z", RSP_META_TOO_LONG, 0, "mg with 27 tokens");
    is_err(many_tokens("ma foo", 21, 2), RSP_META_TOO_LONG, 0,
           "ma with 21 tokens");
    is_good(many_tokens("ms foo 2", 20, 3), "ms with 20 tokens");
    is_err(many_tokens("ms foo 2", 21, 3), RSP_META_MS_TOO_LONG, 4,
           "ms with 21 tokens: its own wording, swallowed");
}

static void
test_opaque(void)
{
    char line[128];

    snprintf(line, sizeof(line), "mg foo O%031d", 0);
    is_good(line, "opaque of 32 bytes with the O");
    is_int(m.opaque.len, 31, "opaque value");
    snprintf(line, sizeof(line), "mg foo O%032d", 0);
    is_err(line, RSP_META_OPAQUE, 0, "opaque of 33 bytes");
    snprintf(line, sizeof(line), "md foo O%032d", 0);
    is_err(line, RSP_META_OPAQUE, 0, "md opaque too long");
    snprintf(line, sizeof(line), "ms foo 2 O%032d", 0);
    is_err(line, RSP_META_OPAQUE, 4, "ms opaque too long swallows");
    snprintf(line, sizeof(line), "ms foo 2 O%032d MX", 0);
    is_err(line, RSP_META_MS_MODE, 4, "ms: mode error before opaque");
    snprintf(line, sizeof(line), "ma foo O%032d Mx", 0);
    is_err(line, RSP_META_MA_MODE, 0, "ma: mode error before opaque");
    snprintf(line, sizeof(line), "ma foo O%032d Dx", 0);
    is_err(line, RSP_META_BAD_FLAG, 0, "ma: flag error before opaque");
    is_good("mg foo O", "empty opaque");
    ok(meta_has(&m, 'O') && m.opaque.len == 0, "empty opaque kept");
}

static void
test_keys(void)
{
    char line[600];

    is_err("mg", RSP_CLIENT_ERROR_FORMAT, 0, "mg without key");
    is_err("md", RSP_CLIENT_ERROR_FORMAT, 0, "md without key");
    is_err("ma", RSP_CLIENT_ERROR_FORMAT, 0, "ma without key");
    snprintf(line, sizeof(line), "mg %0250d v", 0);
    is_good(line, "250-byte key");
    is_int(m.key.len, 250, "key length");
    ok(m.key.p == req.tokens[1].p, "key points into the line");
    snprintf(line, sizeof(line), "mg %0251d v", 0);
    is_err(line, RSP_CLIENT_ERROR_FORMAT, 0, "251-byte key");
    snprintf(line, sizeof(line), "mg %0251d Z", 0);
    is_err(line, RSP_CLIENT_ERROR_FORMAT, 0, "long key before flags");
    is_good("mg  foo   k  v", "runs of spaces");
    is_mem(m.key.p, m.key.len, "foo", "key between spaces");
}

static void
test_base64_keys(void)
{
    char line[600];
    size_t n;

    is_good("mg YWJj b k v", "base64 key");
    is_mem(m.key.p, m.key.len, "abc", "decoded into keybuf");
    ok(m.key.p == m.keybuf, "key points at keybuf");
    is_good("mg YW!Jj b", "bytes outside the alphabet are skipped");
    is_mem(m.key.p, m.key.len, "abc", "... as memcached does");
    is_good("mg YQ==YWJj b", "decoding stops at the first padding");
    is_mem(m.key.p, m.key.len, "a", "... leaving one byte");
    is_good("mg =AAA b", "a leading = is padding too");
    is_int(m.key.len, 2, "... of one byte");
    is_err("mg foo b", RSP_META_KEY_DECODE, 0, "3 symbols: error");
    is_err("mg YWJj= b", RSP_META_KEY_DECODE, 0, "5 symbols: error");
    is_err("mg A=== b", RSP_META_KEY_DECODE, 0, "3 pads: error");
    is_err("mg ==== b", RSP_META_KEY_DECODE, 0, "4 pads: error");
    is_err("mg !!!! b", RSP_META_KEY_DECODE, 0, "no symbol: error");
    is_err("mg !!! Tx b", RSP_META_KEY_DECODE, 0,
           "decode error after a bad token wins");
    is_err("mg !!! b Tx", RSP_META_BAD_TOKEN, 0,
           "bad token after a decode error wins");
    is_err("ms !!! 1 b", RSP_META_KEY_DECODE, 3, "ms bad key swallows");
    n = 0;
    memcpy(line, "mg ", 3);
    n = 3;
    for (int i = 0; i < 62; i++) {
        memcpy(line + n, "YWJj", 4);
        n += 4;
    }
    memcpy(line + n, "YQ== b", 7);
    is_err(line, RSP_CLIENT_ERROR_FORMAT, 0, "252 encoded bytes: too long");
    memcpy(line + 3 + 61 * 4, "YWJjYQ b", 9);
    is_err(line, RSP_META_KEY_DECODE, 0, "250 encoded bytes: bad base64");
    memcpy(line + 3 + 61 * 4, "YWJj b", 7);
    is_good(line, "248 encoded bytes");
    is_int(m.key.len, 186, "decoded to 186");
}

static void
test_ms(void)
{
    char line[600];

    is_good("ms foo 2", "ms foo 2");
    ok(m.vlen == 2 && swallow == 0 && m.nflags == 0, "vlen 2, no flags");
    is_good("ms foo 2 T0 F7", "ms foo 2 T0 F7");
    ok(m.ttl == 0 && m.client_flags == 7 && m.nflags == 2, "T0 F7");
    is_good("ms foo +2", "ms datalen with +");
    is_int(m.vlen, 2, "+2");
    is_good("ms foo -0", "ms datalen -0");
    is_int(m.vlen, 0, "-0 is 0");
    is_good("ms foo 2147483645", "largest datalen");
    is_err("ms foo 2147483646", RSP_CLIENT_ERROR_FORMAT, 0,
           "datalen past INT_MAX - 2");
    is_err("ms foo S2", RSP_CLIENT_ERROR_FORMAT, 0, "ms foo S2");
    is_err("ms foo -1", RSP_CLIENT_ERROR_FORMAT, 0, "negative datalen");
    is_err("ms foo 2x", RSP_CLIENT_ERROR_FORMAT, 0, "datalen with junk");
    is_err("ms foo", RSP_CLIENT_ERROR_FORMAT, 0, "no datalen");
    is_err("ms", RSP_CLIENT_ERROR_FORMAT, 0, "no key");
    snprintf(line, sizeof(line), "ms %0251d 2", 0);
    is_err(line, RSP_CLIENT_ERROR_FORMAT, 4, "long key swallows");
    snprintf(line, sizeof(line), "ms %0251d x", 0);
    is_err(line, RSP_CLIENT_ERROR_FORMAT, 0, "long key, bad datalen");
    is_err("ms foo 10 Z", RSP_META_INVALID_FLAG, 12, "invalid flag swallows");
    is_err("ms foo 0 Tx", RSP_META_BAD_TOKEN, 2, "bad T swallows 0 + 2");
    is_err("ms foo 2 Dx", RSP_META_DELTA, 4, "ms reports bad D");
    is_good("ms Zm9v 2 c k s O9 b I q C1 E2 N3 MA", "ms with its flags");
    ok(m.mode == 'A' && m.nflags == 11 && m.vivify_ttl == 3, "... decoded");
    is_err("ms foo 2 c k s O9 b", RSP_META_KEY_DECODE, 4,
           "ms with b and a key that is not base64");
}

static void
test_me_mn(void)
{
    is_good("me foo", "me foo");
    is_mem(m.key.p, m.key.len, "foo", "me key");
    is_good("me Zm9v b", "me base64");
    is_mem(m.key.p, m.key.len, "foo", "me key decoded");
    ok(meta_has(&m, 'b'), "me b seen");
    is_good("me Zm9v x b", "me: only the third token counts");
    is_mem(m.key.p, m.key.len, "Zm9v", "... so no decoding");
    is_good("me foo Z Z Z", "me checks no flags");
    is_err("me foo b", RSP_CLIENT_ERROR_FORMAT, 0, "me bad base64: format");
    is_err("me", RSP_CLIENT_ERROR_FORMAT, 0, "me without key");
    is_good("mn", "mn");
    is_good("mn x y", "mn ignores tokens");
}

/* ---- composing ----------------------------------------------------- */

static char out[1024];

static const char *
compose(enum req_type type, const char *rc, const struct meta_result *r)
{
    size_t n = meta_compose(out, sizeof(out) - 1, type, rc, &m, r);

    out[n] = '\0';
    return out;
}

static void
test_compose_mg(void)
{
    struct meta_result r = { .hit = true, .cas = 2, .client_flags = 5,
                             .ttl = -1, .vlen = 3, .fetched = true,
                             .last_access = 3 };

    mp("mg foo v t f");
    is_str(compose(REQ_MG, "VA", &r), "VA 3 t-1 f5\r\n", "mg foo v t f");
    mp("mg foo v t f c s k O123");
    is_str(compose(REQ_MG, "VA", &r), "VA 3 t-1 f5 c2 s3 kfoo O123\r\n",
           "mg foo v t f c s k O123");
    mp("mg foo");
    is_str(compose(REQ_MG, "HD", &r), "HD\r\n", "mg foo");
    mp("mg foo h l t");
    is_str(compose(REQ_MG, "HD", &r), "HD h1 l3 t-1\r\n", "mg foo h l t");
    r.ttl = 30;
    r.fetched = false;
    mp("mg foo T30 t h");
    is_str(compose(REQ_MG, "HD", &r), "HD t30 h0\r\n", "mg foo T30 t h");
    mp("mg foo C999 v q u E5 N3 R4 b P L I x D1 J1 F1 MS");
    is_str(compose(REQ_MG, "VA", &r), "VA 3\r\n", "request flags not echoed");
    mp("mg foo q k");
    is_str(compose(REQ_MG, "HD", &r), "HD kfoo\r\n", "q hit still composed");
    r = (struct meta_result){ .hit = false, .cas = 9, .vlen = 3 };
    mp("mg missing v");
    is_str(compose(REQ_MG, "EN", &r), "EN\r\n", "mg missing v");
    mp("mg missing v k Oab");
    is_str(compose(REQ_MG, "EN", &r), "EN kmissing Oab\r\n",
           "mg missing v k Oab");
    mp("mg missing Oab s t c f h l k");
    is_str(compose(REQ_MG, "EN", &r), "EN Oab kmissing\r\n",
           "miss echoes only O and k, in order");
    mp("mg bWlzc2luZw== b k Oab");
    is_str(compose(REQ_MG, "EN", &r), "EN kbWlzc2luZw== b Oab\r\n",
           "miss with a base64 key");
}

static void
test_compose_tokens(void)
{
    struct meta_result r = { .hit = true, .cas = 11, .ttl = -1, .vlen = 3,
                             .stale = true, .win = true };

    mp("mg foo v c");
    is_str(compose(REQ_MG, "VA", &r), "VA 3 c11 X W\r\n",
           "stale, first fetch: X W");
    r.win = false;
    r.token_sent = true;
    is_str(compose(REQ_MG, "VA", &r), "VA 3 c11 Z X\r\n",
           "stale, token out: Z X");
    r.stale = false;
    mp("mg rc R200 t");
    r.ttl = 100;
    is_str(compose(REQ_MG, "HD", &r), "HD t100 Z\r\n", "Z alone");
    r.token_sent = false;
    r.win = true;
    is_str(compose(REQ_MG, "HD", &r), "HD t100 W\r\n", "recache win: W");
    r = (struct meta_result){ .hit = true, .cas = 26, .ttl = 30,
                              .win = true };
    mp("mg viv N30 t c k v s Oab");
    is_str(compose(REQ_MG, "VA", &r), "VA 0 t30 c26 kviv s0 Oab W\r\n",
           "vivified item");
    r.win = false;
    r.token_sent = true;
    r.stale = true;
    is_str(compose(REQ_MD, "HD", &r), "HD kviv Oab\r\n",
           "W X Z only for mg");
}

static void
test_compose_binary(void)
{
    struct meta_result r = { .hit = true, .vlen = 1 };

    mp("mg YWJj b k v");
    is_str(compose(REQ_MG, "VA", &r), "VA 1 kYWJj b\r\n", "k with b");
    mp("mg YQ== k b v");
    is_str(compose(REQ_MG, "VA", &r), "VA 1 kYQ== b\r\n", "k before b");
    mp("mg YWJj b v");
    is_str(compose(REQ_MG, "VA", &r), "VA 1\r\n", "b alone is not echoed");
    mp("mg abc k s");
    r.key_binary = true;
    is_str(compose(REQ_MG, "HD", &r), "HD kYWJj b s1\r\n",
           "plain mg hitting a binary item: the item's b");
    is_str(compose(REQ_MD, "HD", &r), "HD kabc\r\n",
           "md follows the request");
    r.hit = false;
    is_str(compose(REQ_MG, "EN", &r), "EN kabc\r\n",
           "a miss follows the request");
}

static void
test_compose_ms_md_ma(void)
{
    struct meta_result r = { .hit = true, .cas = 4, .vlen = 2, .ttl = -1 };

    mp("ms foo 2 c k s O9");
    is_str(compose(REQ_MS, "HD", &r), "HD c4 kfoo s2 O9\r\n",
           "ms foo 2 c k s O9");
    mp("ms Zm9v 2 b k c s O9");
    r.cas = 16;
    is_str(compose(REQ_MS, "HD", &r), "HD kZm9v b c16 s2 O9\r\n",
           "ms base64 key");
    r.hit = false;
    r.vlen = 5;
    mp("ms foo 2 T0 F7 s k q I");
    is_str(compose(REQ_MS, "NS", &r), "NS s5 kfoo\r\n", "ms NS echoes too");
    mp("ms foo 2 C1");
    is_str(compose(REQ_MS, "EX", &r), "EX\r\n", "ms foo 2 C1");
    mp("md foo k Oab c s t v");
    is_str(compose(REQ_MD, "HD", &r), "HD kfoo Oab\r\n", "md k O only");
    mp("md missing k Oab q");
    is_str(compose(REQ_MD, "NF", &r), "NF kmissing Oab\r\n", "md miss");
    mp("md foo C1");
    is_str(compose(REQ_MD, "EX", &r), "EX\r\n", "md foo C1");
    r = (struct meta_result){ .hit = true, .cas = 13, .ttl = -1, .vlen = 2 };
    mp("ma cnt v t c");
    is_str(compose(REQ_MA, "VA", &r), "VA 2 t-1 c13\r\n", "ma cnt v t c");
    mp("ma 123 k v c t f s");
    r.cas = 22;
    r.vlen = 1;
    is_str(compose(REQ_MA, "VA", &r), "VA 1 k123 c22 t-1\r\n",
           "ma echoes k c t, not f s");
    mp("ma MTIz b k");
    is_str(compose(REQ_MA, "HD", &r), "HD kMTIz b\r\n", "ma base64 k");
    r.hit = false;
    mp("ma missing k Oab c t v");
    is_str(compose(REQ_MA, "NF", &r), "NF kmissing Oab\r\n",
           "ma miss: k O only");
    mp("ma cnt");
    is_str(compose(REQ_MA, "NF", &r), "NF\r\n", "ma cnt");
}

static void
test_compose_limits(void)
{
    struct meta_result r = { .hit = true, .cas = 2, .vlen = 3, .ttl = -1 };
    char small[32];
    size_t n;

    mp("mg foo v c k");
    n = meta_compose(small, 13, REQ_MG, "VA", &m, &r);
    is_int(n, 0, "reply one byte too long: 0");
    n = meta_compose(small, 14, REQ_MG, "VA", &m, &r);
    is_mem(small, n, "VA 3 c2 kfoo\r\n", "reply fits exactly");
    mp("mg YWJj b k");
    n = meta_compose(small, 7, REQ_MG, "HD", &m, &r);
    is_int(n, 0, "no room for the encoded key: 0");
}

static void
test_compose_debug(void)
{
    struct token key = { "foo", 3 };
    size_t n;

    n = meta_compose_debug(out, sizeof(out), &key, false, 92, 8, 11, true,
                           1, 65);
    is_mem(out, n, "ME foo exp=92 la=8 cas=11 fetch=yes cls=1 size=65\r\n",
           "me foo");
    key.p = "abc";
    n = meta_compose_debug(out, sizeof(out), &key, true, -1, 4, 19, false,
                           12, 63);
    is_mem(out, n, "ME YWJj exp=-1 la=4 cas=19 fetch=no cls=12 size=63\r\n",
           "me binary key, no expiry");
    n = meta_compose_debug(out, 20, &key, true, -1, 4, 19, false, 12, 63);
    is_int(n, 0, "me line too long: 0");
}

/* The error lines added for the meta commands, byte for byte. */
static void
test_error_strings(void)
{
    static const struct { int rsp; const char *s; } want[] = {
        { RSP_META_INVALID_FLAG, "CLIENT_ERROR invalid flag\r\n" },
        { RSP_META_DUP_FLAG, "CLIENT_ERROR duplicate flag\r\n" },
        { RSP_META_BAD_FLAG, "CLIENT_ERROR invalid or duplicate flag\r\n" },
        { RSP_META_TOO_LONG, "CLIENT_ERROR options flags are too long\r\n" },
        { RSP_META_MS_TOO_LONG, "CLIENT_ERROR options flags too long\r\n" },
        { RSP_META_OPAQUE, "CLIENT_ERROR opaque token too long\r\n" },
        { RSP_META_BAD_TOKEN,
          "CLIENT_ERROR bad token in command line format\r\n" },
        { RSP_META_INITIAL,
          "CLIENT_ERROR invalid numeric initial value\r\n" },
        { RSP_META_DELTA, "CLIENT_ERROR invalid numeric delta value\r\n" },
        { RSP_META_MS_MODE, "CLIENT_ERROR invalid mode for ms M token\r\n" },
        { RSP_META_MA_MODE, "CLIENT_ERROR invalid mode for ma M token\r\n" },
        { RSP_META_M_LENGTH,
          "CLIENT_ERROR incorrect length for M token\r\n" },
        { RSP_META_KEY_DECODE, "CLIENT_ERROR error decoding key\r\n" },
    };

    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        is_mem(rsp_str[want[i].rsp], rsp_len[want[i].rsp], want[i].s,
               "meta error line, byte for byte");
    }
}

/* ---- base64 -------------------------------------------------------- */

static void
test_base64(void)
{
    static const char *vec[][2] = {
        { "f", "Zg==" }, { "fo", "Zm8=" }, { "foo", "Zm9v" },
        { "foob", "Zm9vYg==" }, { "fooba", "Zm9vYmE=" },
        { "foobar", "Zm9vYmFy" },
    };
    char enc[512], dec[512], raw[300];
    ssize_t d;
    size_t e;
    int bad = 0;

    for (size_t i = 0; i < sizeof(vec) / sizeof(vec[0]); i++) {
        e = meta_base64_encode(vec[i][0], strlen(vec[i][0]), enc, 16);
        d = meta_base64_decode(vec[i][1], strlen(vec[i][1]), dec, 16);
        bad += e != strlen(vec[i][1]) || memcmp(enc, vec[i][1], e) != 0;
        bad += d != (ssize_t)strlen(vec[i][0])
               || memcmp(dec, vec[i][0], (size_t)d) != 0;
    }
    is_int(bad, 0, "RFC 4648 test vectors both ways");
    srand(7);
    for (size_t len = 1; len <= 300; len++) {
        for (size_t i = 0; i < len; i++) {
            raw[i] = (char)(rand() & 0xff);
        }
        e = meta_base64_encode(raw, len, enc, sizeof(enc));
        d = meta_base64_decode(enc, e, dec, sizeof(dec));
        bad += e != (len + 2) / 3 * 4 || d != (ssize_t)len
               || memcmp(raw, dec, len) != 0;
    }
    is_int(bad, 0, "random round trips of 1..300 bytes");
    for (int i = 0; i < 256; i++) {
        raw[i] = (char)i;
    }
    e = meta_base64_encode(raw, 256, enc, sizeof(enc));
    d = meta_base64_decode(enc, e, dec, sizeof(dec));
    ok(d == 256 && memcmp(raw, dec, 256) == 0, "every byte value");
    is_int(meta_base64_encode("foo", 3, enc, 3), 0, "encode: cap too small");
    is_int(meta_base64_encode("foo", 3, enc, 4), 4, "encode: exact cap");
    is_int(meta_base64_encode("", 0, enc, 0), 0, "encode nothing");
    is_int(meta_base64_decode("Zm9v", 4, dec, 2), -1, "decode: cap small");
    is_int(meta_base64_decode("Zg==", 4, dec, 3), 1, "decode Zg==");
    is_int(meta_base64_decode("", 0, dec, 3), -1, "decode nothing: -1");
    is_int(meta_base64_decode("YQ=", 3, dec, 3), -1, "decode 3 symbols");
    is_int(meta_base64_decode("A===", 4, dec, 3), -1, "decode 3 pads");
    is_int(meta_base64_decode("Zm 9\nv", 6, dec, 3), 3, "skips junk");
    is_int(meta_base64_decode("YR==", 4, dec, 3), 1, "stray low bits ok");
    is_int(dec[0], 'a', "... ignored");
}

int
main(void)
{
    test_each_flag();
    test_flag_union();
    test_duplicates();
    test_numeric();
    test_mode();
    test_ma_errors();
    test_token_count();
    test_opaque();
    test_keys();
    test_base64_keys();
    test_ms();
    test_me_mn();
    test_compose_mg();
    test_compose_tokens();
    test_compose_binary();
    test_compose_ms_md_ma();
    test_compose_limits();
    test_compose_debug();
    test_error_strings();
    test_base64();
    return done_testing();
}
